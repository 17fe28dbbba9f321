"""The run options as the command line's flags, generated from :data:`planbook.engine.config.OPTIONS`.

A flag's name, type, default, metavar and help come from the option
(:func:`~planbook.engine.config.argument_spec`), never written here: one default and one
check per option. ``%run_plan`` takes the same specs (planbook.notebook.magicargs); the MCP
server's schema is :func:`~planbook.engine.config.json_properties`.
"""

from __future__ import annotations

from typing import Any

from ..engine.config import NO_CACHE_HELP, OPTION, argument_spec


def add_run_options(parser: Any, names: tuple[str, ...], *, extra_help: dict[str, str] | None = None) -> None:
    """Add the flags of the options ``names`` to an argparse parser (``cache`` as ``--cache``/``--no-cache``)."""
    extra_help = extra_help or {}
    for name in names:
        if name == "cache":
            add_cache_flags(parser, extra_help.get(name, ""))
            continue
        flags, kwargs = argument_spec(name, extra_help=extra_help.get(name, ""))
        parser.add_argument(*flags, **kwargs)


def add_cache_flags(parser: Any, extra_help: str = "") -> None:
    """``--cache`` (True) and ``--no-cache`` (False) into one ``cache``; neither: the default."""
    option = OPTION["cache"]
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cache", dest="cache", action="store_const", const=True, default=option.default,
                       help=(option.describe() + (f". {extra_help}" if extra_help else "")).replace("%", "%%"))
    group.add_argument("--no-cache", dest="cache", action="store_const", const=False,
                       help=NO_CACHE_HELP)


def run_options(args: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The keywords of ``Runner`` from parsed flags: only the options ``names`` (as parsed)."""
    return {name: getattr(args, name) for name in names}


__all__ = ["add_cache_flags", "add_run_options", "run_options"]
