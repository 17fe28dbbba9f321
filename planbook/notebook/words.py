"""What the magics say when something is wrong: in the magics' words, not the Python API's.

An engine message names keywords (``max_steps``, ``on_failure='replan'``); a notebook user
typed flags (``--max-steps``, ``--on-failure replan``). :func:`magic_words` translates;
:func:`cell_plan_error` builds the plan error of a cell in those words, and an interrupted run
renders a short traceback (IPython calls ``_render_traceback_``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

from ..data.errors import CellPlanError, PlanError, Problem
from ..data.models import RunResult
from ..engine.config import OPTIONS
from ..outbound import neutralise


def cell_plan_error(problems: list[Problem], *, source: str | None = None, offset: int = 0) -> CellPlanError:
    """A :class:`~planbook.data.errors.CellPlanError` whose problems speak in the magics' flags."""
    said = [dataclasses.replace(p, message=magic_words(p.message)) for p in problems]
    return CellPlanError(said, source=source, offset=offset)


class RunInterrupted(KeyboardInterrupt):
    """The kernel's interrupt stopped a run. Raised (not returned) so "run all" stops too;
    the run is kept and ``%run_plan NAME`` continues it."""

    def __init__(self, name: str, result: RunResult, *, stored: bool = True) -> None:
        self.name = name
        self.result = result
        done = sum(1 for s in result.plan.steps if s.status.value == "completed")
        # after a kernel restart this kernel's run is gone: only the store can continue it
        after_restart = (f" (after a kernel restart: %run_plan {name} --resume)" if stored
                         else " (a kernel restart loses it: this notebook keeps no runs in a file)")
        super().__init__(
            f"plan {name!r} was interrupted ({done}/{len(result.plan.steps)} steps completed); "
            f"run %run_plan {name} to continue it{after_restart}, or %run_plan {name} --restart to start again"
        )

    def _render_traceback_(self) -> list[str]:
        return [neutralise(f"RunInterrupted: {self}")]


#: the Python API's words in the engine's messages → the options that say the same in a magic
_MAGIC_WORDS = (
    ("on_failure='replan'", "--on-failure replan"),
    ("pass planner=...", "add --planner VAR (a planner in the namespace) or --planner llm"),
)

_Pattern = tuple["re.Pattern[str]", Callable[["re.Match[str]"], str]]

_MAGIC_PATTERNS: tuple[_Pattern, ...] = (
    (re.compile(r"on_failure=\[([^\]]*)\]"), lambda m: "--on-failure " + ",".join(re.findall(r"'(\w+)'", m.group(1)))),
    (re.compile(r"\bretries=(\w+)"), lambda m: f"--retries {m.group(1)}"),
    (re.compile(r"\bleave retries out\b"), lambda m: "leave --retries out"),
    # every option whose keyword is no English word (max_steps, step_timeout...) → its flag,
    # written from the options themselves: a new option is translated without a new line here
    *((re.compile(rf"\b{o.name}\b"), lambda m, flag=o.flag: flag) for o in OPTIONS if "_" in o.name),
    (re.compile(r"\bmain_thread=True\b"), lambda m: "main_thread=True (in @planbook.tool)"),
)


def magic_words(message: str) -> str:
    """An engine message as a magic user should read it: ``--planner VAR``, not ``planner=...``."""
    for python, magic in _MAGIC_WORDS:
        message = message.replace(python, magic)
    for pattern, replace in _MAGIC_PATTERNS:
        message = pattern.sub(replace, message)
    return message


def with_hints(exc: PlanError, args: Any) -> list[Problem]:
    """The problems, with what to add to the magic line when names are unknown because none were passed."""
    hints = {
        "unknown_agent": None if getattr(args, "agents", None) else "pass your agents with --agents VAR",
        "unknown_tool": None if getattr(args, "tools", None) else "pass your tools with --tools VAR, or register them with @planbook.tool",
    }
    return [
        dataclasses.replace(p, message=f"{p.message}: {hints[p.code]}") if hints.get(p.code) else p
        for p in exc.problems
    ]


__all__ = ["RunInterrupted", "cell_plan_error", "magic_words", "with_hints"]
