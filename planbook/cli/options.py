"""The run options as the surfaces spell them, generated from :data:`planbook.engine.config.OPTIONS`.

A flag's name, type, default, metavar and help, and a JSON schema property's type, minimum
and description, are written here from the option, never by hand: one default and one
check per option. The command line adds its flags with :func:`add_run_options`, the MCP
server builds its ``run_plan`` schema with :func:`json_properties`, and the ``%run_plan``
magic takes :func:`argument_spec` (with ``given_only``: the magic must tell an option left
out from one given with its default).
"""

from __future__ import annotations

from typing import Any

from ..engine.config import OPTION, Option, text_parser
from ..engine.policies import POLICIES, policy_named


def argument_spec(name: str, *, given_only: bool = False, extra_help: str = "") -> tuple[list[str], dict[str, Any]]:
    """``(flags, add_argument keywords)`` of option ``name``. ``given_only``: the default is
    None (left out), and the help still says the run's default."""
    option = OPTION[name]
    help_text = option.describe() + (f". {extra_help}" if extra_help else "")
    default = None if given_only else option.default
    kwargs: dict[str, Any] = {"dest": option.name, "help": help_text.replace("%", "%%")}
    if option.kind == "flag":  # left out is its default, False
        kwargs.update(action="store_true", default=option.default)
        return [option.flag], kwargs
    if option.kind == "steps":
        kwargs.update(nargs="?", const=True, type=text_parser(option), default=default)
    else:
        kwargs.update(type=text_parser(option), default=default)
    if option.metavar:
        kwargs["metavar"] = option.metavar
    return [option.flag], kwargs


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
                       help="reuse no earlier results, not even for tools registered with cache=True")


def run_options(args: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The keywords of ``Runner`` from parsed flags: only the options ``names`` (as parsed)."""
    return {name: getattr(args, name) for name in names}


def json_property(option: Option) -> dict[str, Any]:
    """One option as a JSON schema property (its type, its minimum, its description)."""
    prop: dict[str, Any] = {"description": option.describe()}
    if option.kind == "whole":
        prop.update(type="integer", minimum=option.minimum or 0)
    elif option.kind == "seconds":
        prop.update(type="number", exclusiveMinimum=0)
    elif option.kind == "policy":  # a server has no planner: the policies that need one are left out
        prop.update(type="string", enum=[p for p in POLICIES if not policy_named(p).needs_planner])
    elif option.kind in ("flag", "tri"):
        prop.update(type="boolean")
    else:
        prop.update(type="string")
    return prop


def json_properties(names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The properties of a JSON schema for the options ``names``, keyed as a client gives them."""
    return {OPTION[name].key: json_property(OPTION[name]) for name in names}


def from_json(args: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The keywords of ``Runner`` from a JSON client's arguments: only those given, each checked
    under the name the client used (a default is never written here)."""
    given = {}
    for name in names:
        option = OPTION[name]
        if option.key in args:
            given[name] = option.check(args[option.key], option.key)
    return given


__all__ = ["add_cache_flags", "add_run_options", "argument_spec", "from_json", "json_properties", "json_property",
           "run_options"]
