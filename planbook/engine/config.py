"""A run's options, each with one default, one check and one line of help.

:data:`OPTIONS` is the one place a run option is described: its keyword, its default, how
it is checked and what it means. Everything else is built from it: :class:`RunConfig`
(the checked settings of one run, see :meth:`RunConfig.build`), the default of every
keyword in the signatures of :func:`planbook.run`, :class:`~planbook.engine.runner.Runner`,
:func:`planbook.start` and :func:`planbook.resume` (``DEFAULTS.max_steps``), the command
line's flags, the MCP server's JSON schema and the ``%run_plan`` magic's options
(:mod:`planbook.cli.options`). A test (``tests/engine/test_run_options.py``) holds them together.

What a run is given but is not an option of it (a *collaborator*, an object that does part of
the work) is kept out: ``plan`` (what runs), ``planner``, ``tools``, ``agents`` (who does the
work), ``after_step`` (a review after each step), ``on_event`` (who listens) and ``clock``
(the time source, replaced in tests). Options are values a user chooses at a surface; the
object-valued ones (``executor``, ``store``, an ``approve`` callable) are options too, and a
surface that cannot name an object (the MCP schema) leaves them out.

Together with the :class:`~planbook.engine.state.RunState` a :class:`RunConfig` is enough
to continue a run later, so it is plain data: the executor and store objects and an
``approve`` callable are kept out of what is serialised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from ..data import budgets
from .policies import POLICIES, normalise_policy, policy_named, unknown_policy


class OptionTextError(ValueError):
    """Text given for an option (a flag's value) that is not a value of its kind."""


@dataclass(frozen=True)
class Option:
    """One run option. ``kind`` says how text becomes a value and how a value is checked:
    ``whole`` (an int >= ``minimum``), ``seconds`` (a positive number, None: no limit),
    ``policy`` (a failure policy or a chain), ``flag`` (True/False), ``tri`` (True, False or
    None), ``name`` (a string or None), ``steps`` (True, step ids or tool names, or a callable:
    checked against the plan by :mod:`planbook.engine.approvals`), ``object`` (only Python can
    give it; checked by what uses it)."""

    name: str
    default: Any
    kind: str
    help: str
    minimum: int | None = None
    #: the word the surfaces use when it differs from the keyword (``--timeout``, not ``--step-timeout``)
    word: str | None = None
    metavar: str | None = None
    #: the default in words, when the value alone does not say it (``retries``: None means 1)
    default_text: str | None = None

    def describe(self) -> str:
        """The help line with the default, written from the default (never a copy of it)."""
        default = self.default_text if self.default_text is not None else self.default
        if default is None or default is False:
            return self.help
        return f"{self.help} (default {default})"

    @property
    def flag(self) -> str:
        """The command-line / magic flag: ``--max-steps``."""
        return "--" + (self.word or self.name).replace("_", "-")

    @property
    def key(self) -> str:
        """The name a JSON client gives (``timeout`` for ``step_timeout``)."""
        return self.word or self.name

    def check(self, value: Any, label: str | None = None) -> Any:
        """``value`` as the run uses it, or an error naming the option (as ``label``, when given)."""
        label = label or self.name
        if self.kind == "whole":
            return _whole(label, value, minimum=self.minimum or 0)
        if self.kind == "seconds":
            return _seconds(label, value)
        if self.kind in ("flag", "tri"):
            if value is None and self.kind == "tri":
                return None
            if not isinstance(value, bool):
                raise TypeError(f"{label} must be True or False{' or None' if self.kind == 'tri' else ''}, got {value!r}")
            return value
        if self.kind == "name":
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{label} must be a name (a string), got {type(value).__name__}")
            return value
        if self.kind == "policy":
            if value is not None:
                chain = (value,) if isinstance(value, str) else tuple(value)
                for name in chain:
                    if name not in POLICIES:
                        raise ValueError(f"{label}: {unknown_policy(name)}")
            return value
        return value  # objects, steps: checked by what uses them (the executor's .submit, the store's opening)

    def parse(self, text: str, label: str | None = None) -> Any:
        """A flag's text as a value of this option. Whole numbers are range-checked by :meth:`check`
        when the run is built; seconds here (``nan`` and ``inf`` would silently mean "no limit")."""
        label = label or self.flag
        if self.kind == "whole":
            try:
                return int(text)
            except ValueError:
                raise OptionTextError(f"{label} takes a whole number, got {text!r}") from None
        if self.kind == "seconds":
            try:
                value = float(text)
            except ValueError:
                raise OptionTextError(f"{label} takes a number of seconds, got {text!r}") from None
            if not math.isfinite(value) or value <= 0:  # text says a limit: nan, inf, 0 are none
                raise OptionTextError(_seconds_message(label, text))
            return value
        if self.kind == "policy":
            chain = [part.strip() for part in text.split(",") if part.strip()]
            if not chain:
                raise OptionTextError(f"{label} needs a policy: {', '.join(POLICIES)}")
            for name in chain:
                if name not in POLICIES:
                    raise OptionTextError(unknown_policy(name))
            return chain[0] if len(chain) == 1 else chain
        if self.kind == "steps":  # step ids or tool names, comma-separated
            return [part.strip() for part in text.split(",") if part.strip()]
        return text


def _whole(name: str, value: Any, *, minimum: int) -> int:
    # bool is an int subclass: max_steps=True must not mean "one step"
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def _seconds_message(name: str, value: Any) -> str:
    return f"{name} must be a positive number of seconds (leave it out for no limit), got {value!s}"


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
        raise ValueError(_seconds_message(name, repr(value)))
    return None if math.isinf(value) else float(value)


DEFAULT_PARALLEL = 1
#: the retries of the retry policy when ``retries`` is left out (None)
RETRIES_IF_UNSAID = 1

#: every option of a run, in the order the signatures list them
OPTIONS: tuple[Option, ...] = (
    Option("on_failure", None, "policy",
           f"what a failure does: {', '.join(POLICIES)}, or a chain such as retry,replan; "
           "a step's own on_failure overrides it", metavar="POLICY",
           default_text="replan with a planner, else abort"),
    Option("retries", None, "whole", "extra attempts per step for the retry policy",
           minimum=0, metavar="N", default_text=str(RETRIES_IF_UNSAID)),
    Option("max_steps", budgets.MAX_STEPS, "whole", "step budget: executions, including after replans",
           minimum=0, metavar="N"),
    Option("max_replans", budgets.MAX_REPLANS, "whole", "replan budget", minimum=0, metavar="N"),
    Option("step_timeout", None, "seconds", "seconds a step may take",
           word="timeout", metavar="SECONDS", default_text="no limit"),
    Option("parallel", DEFAULT_PARALLEL, "whole",
           "run up to N steps whose needs are done at once",
           minimum=1, metavar="N", default_text=f"{DEFAULT_PARALLEL}: one at a time, in plan order"),
    Option("executor", None, "object",
           "a concurrent.futures.Executor that runs tool calls (e.g. a Dask client's get_executor(pure=False))",
           metavar="VAR"),
    Option("store", None, "object",
           "where the run persists, so it can be resumed: a path, ':memory:' or a store",
           metavar="PATH", default_text="nowhere"),
    Option("cache", None, "tri",
           "answer a tool call from an earlier stored run's result of the same call (same tool code, same "
           "arguments): off by default, since a tool that reads a clock, a price or a file would give "
           "yesterday's answer; tools registered with cache=True are cached anyway, cache=False and "
           "idempotent=False never", default_text="None: only tools registered with cache=True"),
    Option("strategy", None, "name",
           "run as a seed design: planbook, lesson, openmanus or agenticseek", metavar="NAME",
           default_text="planbook"),
    Option("faithful", False, "flag",
           "with strategy openmanus or agenticseek: reproduce that design's pitfalls, for teaching"),
    Option("approve", None, "steps",
           "steps that wait for a decision before they start: every step (True), the step ids or tool names "
           "given, or a callable (step, context) -> Decision; tools registered with approve=True always ask",
           metavar="IDS|TOOLS"),
    Option("approve_timeout", None, "seconds",
           "seconds a step may wait for a decision; then the run stops (failed, aborted)", metavar="SECONDS"),
)

#: the options by keyword
OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}

#: the help of ``--no-cache``, the flag that sets ``cache=False`` (``--cache`` says the option's own help)
NO_CACHE_HELP = "reuse no earlier run's results, not even for tools registered with cache=True"

#: each option's default, by attribute: ``max_steps: int = DEFAULTS.max_steps`` in a signature
DEFAULTS: Any = SimpleNamespace(**{o.name: o.default for o in OPTIONS})

#: what a run takes that is not an option of it (see the module's docstring)
COLLABORATORS: tuple[str, ...] = ("plan", "planner", "tools", "agents", "after_step", "on_event", "clock")


def check_option(name: str, value: Any, label: str | None = None) -> Any:
    """Check one option's value (``label``: the option as the caller named it)."""
    return OPTION[name].check(value, label)


class RunConfig(BaseModel):
    """The settings of one run. Build it with :meth:`build`, which checks every value."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    #: the failure policy chain (``("retry", "replan")``); a step's own ``on_failure`` overrides it
    policy: tuple[str, ...] = ("abort",)
    #: extra attempts per step for the retry policy
    retries: int = RETRIES_IF_UNSAID
    max_steps: int = DEFAULTS.max_steps
    max_replans: int = DEFAULTS.max_replans
    step_timeout: float | None = DEFAULTS.step_timeout
    #: how many ready steps may run at once (1: one at a time, in plan order)
    parallel: int = DEFAULTS.parallel
    #: where steps run: None (planbook's own), or any ``concurrent.futures.Executor``
    executor: Any = Field(default=DEFAULTS.executor, exclude=True)
    #: a description of the executor for stores and views (``"threads"``, ``"ClientExecutor"``)
    executor_name: str = "inline"
    #: the cross-run step cache (with a store): None answers only tools registered with
    #: ``cache=True`` from earlier runs, True every tool that does not say ``cache=False``,
    #: False none. Off by default: a tool that reads the world would give a stale answer.
    cache: bool | None = DEFAULTS.cache
    #: where the run persists (a path or a store object; the runner opens it)
    store: Any = Field(default=DEFAULTS.store, exclude=True)
    #: the seed design the run follows, and whether its pitfalls are on
    strategy: str | None = DEFAULTS.strategy
    faithful: bool = DEFAULTS.faithful
    #: the steps that ask (a callable is not data: the runner stores the rule's own form)
    approve: Any = Field(default=DEFAULTS.approve, exclude=True)
    approve_timeout: float | None = DEFAULTS.approve_timeout

    @classmethod
    def build(cls, *, has_planner: bool = False, **given: Any) -> "RunConfig":
        """Check and combine the options a caller passed (``run()``, ``Runner``, magics, CLI): any of
        :data:`OPTIONS` by keyword, each left out taking its default (the signatures that list them
        are ``run``, ``Runner`` and ``start``)."""
        unknown = sorted(set(given) - set(OPTION))
        if unknown:
            raise TypeError(f"not a run option: {', '.join(unknown)}; the options are {', '.join(OPTION)}")
        o = {name: given.get(name, option.default) for name, option in OPTION.items()}
        for name in ("max_steps", "max_replans", "parallel", "step_timeout", "approve_timeout", "strategy", "faithful"):
            o[name] = check_option(name, o[name])  # seconds: inf is no limit (None)
        if o["retries"] is not None:
            check_option("retries", o["retries"])
        policy = normalise_policy(o["on_failure"], has_planner=has_planner)
        if o["retries"] == 0 and "retry" in policy:
            raise ValueError("on_failure includes 'retry' but retries=0, so nothing would be retried: "
                             "pass retries=N (N >= 1), or leave retries out for one retry")
        if o["cache"] not in (None, True, False):
            raise TypeError(f"cache must be True (reuse earlier runs' results of the same tool calls), False "
                            f"(never) or None (only tools registered with cache=True), got {o['cache']!r}")
        executor = o["executor"]
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError(f"executor must be a concurrent.futures.Executor (something with .submit), "
                            f"got {type(executor).__name__}")
        described = type(executor).__name__ if executor is not None else "threads" if o["parallel"] > 1 else "inline"
        retries, _ = o.pop("retries"), o.pop("on_failure")  # the chain is the policy
        return cls(policy=policy, retries=RETRIES_IF_UNSAID if retries is None else retries, executor_name=described,
                   **o)


def text_parser(option: Option, label: str | None = None) -> Callable[[str], Any]:
    """``option.parse`` as argparse wants it (an ``ArgumentTypeError`` on bad text)."""
    import argparse

    if option.kind == "whole":
        return int  # argparse's own words for a bad number: "invalid int value: 'many'"

    def parse(text: str) -> Any:
        try:
            return option.parse(text, label)
        except OptionTextError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = option.name  # argparse names the type in its messages
    return parse


# ------------------------------------------------------------ the options as surfaces spell them
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
            given[name] = option.check(_json_whole(option, args[option.key]), option.key)
    return given


#: the name a stored run's config keeps an option under, where it differs from the keyword
#: (the failure policy is stored as the chain it became)
STORED_AS: dict[str, str] = {"on_failure": "policy"}
#: what a resumed run does not take from its stored config: ``store`` (the resume's own, where
#: the run is kept); the objects a store cannot keep (``executor``, an ``approve`` callable) are
#: given to ``resume()`` again, and take the stored value (``approve``'s stored rule) when not given
RESUME_OWN: tuple[str, ...] = ("store",)


def resumed_options(stored: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The options a resumed run takes, one for each of :data:`OPTIONS` (but ``store``): the value
    given to ``resume()`` again when it is given (not None), else the one the stored run's config
    kept, else the option's default. Built from the table, so an option added to it is resumed
    too: copying them by hand lost ``approve_timeout`` (stored as 30.0, resumed as None)."""
    options: dict[str, Any] = {}
    for option in OPTIONS:
        if option.name in RESUME_OWN:
            continue
        value = given.get(option.name)
        if value is None:
            value = stored.get(STORED_AS.get(option.name, option.name), option.default)
        options[option.name] = value
    return options


def _json_whole(option: Option, value: Any) -> Any:
    """A whole number as a JSON client may send it: ``2.0`` (JSON has one number type, and JSON
    Schema counts 2.0 as an integer) or ``"2"`` (the server always took these); anything else as sent."""
    if option.kind != "whole" or isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    return value


__all__ = ["COLLABORATORS", "DEFAULTS", "NO_CACHE_HELP", "OPTION", "OPTIONS", "Option", "OptionTextError", "RESUME_OWN",
           "RunConfig", "STORED_AS", "argument_spec", "check_option", "from_json", "json_properties", "json_property",
           "resumed_options", "text_parser"]
