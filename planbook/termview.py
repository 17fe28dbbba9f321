"""The terminal view (kept for imports): it lives in :mod:`planbook.views.terminal`."""

from .views.terminal import ASCII_MARKS, MAX_ROWS, ROWS_BEFORE, TerminalView, safe_console  # noqa: F401
