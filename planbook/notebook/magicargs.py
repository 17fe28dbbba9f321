"""The magics' lines: parsing them, and the run options of ``%run_plan`` as flags.

The run options' flags are generated from :data:`planbook.engine.config.OPTIONS` (their name,
type, help and the default the help states) with :func:`run_arguments`; a flag left out is
None here, so a kept run can tell "no options" from "the same options" — the run's default
then comes from the options, never from a copy written here (:func:`given_options`,
:func:`resolved_options`).
"""

from __future__ import annotations

import builtins
import keyword
import shlex
import textwrap
from typing import Any, Callable

from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError

from ..engine.config import DEFAULTS, OPTION, argument_spec
from .words import magic_words

#: the run options ``%run_plan`` takes as flags. ``store`` and the default of ``cache`` are the
#: notebook's (``%plan_store``: runs are kept in the store file unless it says otherwise);
#: ``--cache``/``--no-cache`` are ``%run_plan``'s own flags over that default
RUN_PLAN_OPTIONS = ("on_failure", "retries", "max_steps", "max_replans", "step_timeout", "parallel", "executor",
                    "strategy", "faithful", "approve", "approve_timeout")

#: ``--cache``'s help is the option's own (its default is the notebook's, so it is not stated)
CACHE_HELP = OPTION["cache"].help


def run_arguments(*names: str, extra_help: dict[str, str] | None = None) -> Callable[[Any], Any]:
    """``@ma.argument`` for each run option in ``names`` (listed in that order by ``%run_plan?``)."""
    extra = extra_help or {}

    def decorate(func: Any) -> Any:
        for name in reversed(names):  # magic_arguments lists the last decorator applied first
            flags, kwargs = argument_spec(name, given_only=True, extra_help=extra.get(name, ""))
            func = ma.argument(*flags, **kwargs)(func)
        return func

    return decorate


def given_options(args: Any) -> dict[str, Any]:
    """The run options given on the line, each checked and its error said with the flag."""
    given = {}
    for name in RUN_PLAN_OPTIONS:
        value = getattr(args, name)
        if value is None or value is False:
            continue
        option = OPTION[name]
        try:
            given[name] = option.check(value, option.flag) if option.kind != "object" else value
        except (ValueError, TypeError) as exc:
            raise UsageError(magic_words(str(exc))) from None
    return given


def resolved_options(given: dict[str, Any]) -> dict[str, Any]:
    """Every run option of ``%run_plan``: the given ones, else the run's defaults."""
    return {name: given.get(name, getattr(DEFAULTS, name)) for name in RUN_PLAN_OPTIONS}


def readable_help(func: Any) -> Any:
    """``%run_plan?`` opens with the usage, not with the ``::`` that IPython's magic_arguments
    writes for Sphinx; a cell magic's usage says ``%%``. Goes above ``@ma.magic_arguments()``."""
    doc = func.__doc__ or ""
    if doc.startswith("::\n\n"):
        usage, _, rest = doc[4:].partition("\n\n")
        usage = textwrap.dedent(usage)
        if getattr(func, "magic_type", None) == "cell" or usage.startswith("%plan "):
            usage = "%" + usage.replace("\n", "\n ")  # the continuation lines follow the longer name
        func.__doc__ = usage + "\n\n" + rest
    return func


def parse(magic: Any, line: str) -> Any:
    """Parse the line like a shell would (quotes removed), so ``--title "A b"`` is ``A b``."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot read the options {line!r}: {exc}") from None
    return magic.parser.parse_args(argv)


def check_name(name: str) -> str:
    """NAME must be usable as a variable."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"{name!r} cannot be a variable name: use letters, digits and _ (not starting with a digit)")
    return name


def refuse_shadowing(name: str, ip: Any) -> None:
    """A plan stored as ``print`` or ``In`` would hide the builtin (or IPython's name) for the
    rest of the session, far from the cell that did it: refused, not warned about."""
    if name in vars(builtins):
        what = f"Python's builtin {name}"
    elif name in getattr(ip, "user_ns_hidden", {}):
        what = f"IPython's {name}"
    else:
        return
    raise UsageError(f"%%plan {name}: storing the plan as {name!r} would hide {what} for the rest of the session; "
                     f"choose another name, e.g. %%plan {name}_plan")


def ident(obj: Any) -> Any:
    """Options compare by identity (a redefined toolbox is a different run), strings by value."""
    if obj is None or isinstance(obj, (str, tuple, int, float, bool)):
        return obj
    if isinstance(obj, list) and all(isinstance(x, str) for x in obj):
        return tuple(obj)
    return ("id", id(obj))


def same(old: Any, new: Any) -> bool:
    """NAME still holds the same plan (the same object, or an equal spec string)."""
    return old is new or (isinstance(old, str) and old == new)


__all__ = ["CACHE_HELP", "RUN_PLAN_OPTIONS", "check_name", "given_options", "ident", "parse",
           "readable_help", "refuse_shadowing", "resolved_options", "run_arguments", "same"]
