"""The command line surface: ``planbook`` (:mod:`.app`), its run listing, its approval
prompt, the bundled demo and ``planbook mcp serve`` (planbook as an MCP server).

:func:`main` is the console script's entry (``planbook.cli:main``, as it has always been, so
a ``planbook`` script installed by an earlier version keeps working) and ``python -m
planbook.cli``'s; it loads the command's modules only when called.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``planbook`` command with ``argv`` (default: the process's arguments); its exit code."""
    from .app import main as run_command

    return run_command(argv)


__all__ = ["main"]
