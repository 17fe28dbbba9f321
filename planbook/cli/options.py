"""The run options as the command line's flags, generated from :data:`planbook.engine.config.OPTIONS`.

A flag's name, type, default, metavar and help come from the option
(:func:`~planbook.engine.config.argument_spec`), never written here: one default and one
check per option. ``%run_plan`` takes the same specs (planbook.notebook.magicargs); the MCP
server's schema is :func:`~planbook.engine.config.json_properties`.
"""

from __future__ import annotations

from typing import Any

from ..engine.config import NO_CACHE_HELP, OPTION, argument_spec

#: the run options ``planbook run`` and ``planbook fork`` take as flags (generated from
#: planbook.engine.config.OPTIONS); ``store`` is the command line's own ``--store``/``--no-store``
#: (its default is the store file, not nowhere), ``executor`` is an object no flag can name
RUN_FLAGS = ("on_failure", "retries", "max_steps", "max_replans", "step_timeout", "parallel", "strategy",
             "faithful", "approve", "approve_timeout", "cache")


def add_run_options(parser: Any, names: tuple[str, ...], *, extra_help: dict[str, str] | None = None,
                    given_only: bool = False) -> None:
    """Add the flags of the options ``names`` to an argparse parser (``cache`` as ``--cache``/``--no-cache``).
    ``given_only``: a flag left out is None, not the option's default (``planbook fork`` keeps the
    parent's value for an option not given; the help still says the run's default)."""
    extra_help = extra_help or {}
    for name in names:
        if name == "cache":
            add_cache_flags(parser, extra_help.get(name, ""), given_only=given_only)
            continue
        flags, kwargs = argument_spec(name, given_only=given_only, extra_help=extra_help.get(name, ""))
        if given_only and kwargs.get("action") == "store_true":
            kwargs["default"] = None  # a flag left out: not given (the parent's value stays)
        parser.add_argument(*flags, **kwargs)


def add_cache_flags(parser: Any, extra_help: str = "", *, given_only: bool = False) -> None:
    """``--cache`` (True) and ``--no-cache`` (False) into one ``cache``; neither: the default
    (None with ``given_only``)."""
    option = OPTION["cache"]
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cache", dest="cache", action="store_const", const=True,
                       default=None if given_only else option.default,
                       help=(option.describe() + (f". {extra_help}" if extra_help else "")).replace("%", "%%"))
    group.add_argument("--no-cache", dest="cache", action="store_const", const=False,
                       help=NO_CACHE_HELP)


def run_options(args: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The keywords of ``Runner`` from parsed flags: only the options ``names`` (as parsed)."""
    return {name: getattr(args, name) for name in names}


__all__ = ["RUN_FLAGS", "add_cache_flags", "add_run_options", "run_options"]
