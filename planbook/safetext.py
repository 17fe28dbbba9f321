"""Moved to :mod:`planbook.outbound.text` (the gate). Kept only while imports move over."""

from .outbound.text import RETURN_MARK, indent_lines, md_code, md_text, neutralise, one_line  # noqa: F401
