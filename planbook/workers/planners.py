"""Planners: pure functions ``(goal, history, last_error) -> list[Step]``.

A planner knows nothing about execution, retries or timeouts; it only proposes the
plan *from the cursor on*. Returning ``[]`` means "I cannot continue" and ends the run
with reason ``no_plan``.

A replan's steps replace every step that has not completed: the runner keeps the completed
(and skipped) ones. With parallel branches, steps of a branch that did not fail may still
be pending; a replacement must keep (return unchanged) every pending step that one of its
steps needs, directly or through another. A replacement that drops one is refused with an
error naming them, and shows in the revision history as rejected.

A planner that needs to see the run's tools, agents or current plan (a model-backed
one, say) may define ``set_context(context: PlanningContext)``; the runner calls it
before every planning call. Plain functions do not need it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

from ..data.errors import PlanError, PlanningError, Problem
from ..data.models import Plan, Step
from ..data.wording import slug
from ..spec.acceptance import accept_steps
from ..spec.formats import parse_plan, steps_from_dicts
from .agents import AgentsLike, as_agents
from .interrupts import call_user
from .tools import Tool, ToolsLike, as_toolbox


class Planner(Protocol):
    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]: ...


@dataclass
class PlanningContext:
    """What the runner tells a context-aware planner before each call."""

    tools: Mapping[str, Tool]
    agents: Mapping[str, Any]
    plan: Plan | None
    kept_ids: list[str] = field(default_factory=list)
    #: problems the runner would find in these proposed steps (empty = acceptable)
    validate: Callable[[list[Step]], list[Problem]] | None = None
    #: ``emit("llm.call", **data)`` records an event in the run
    emit: Callable[..., Any] | None = None


StepsLike = Union[str, Sequence[Union[Step, Mapping[str, Any], str]]]


def to_steps(spec: StepsLike) -> list[Step]:
    """Steps from a spec string, Step objects or mappings (fresh copies every time)."""
    if isinstance(spec, str):
        return [s.fresh() for s in parse_plan(spec).steps]
    steps, problems = steps_from_dicts(list(spec))
    if problems:
        raise PlanError(problems)
    return steps


class ScriptedPlanner:
    """A deterministic planner made of rules keyed on the last error.

    ``rules`` maps ``None`` to the first plan and regex patterns (searched in
    ``last_error``) to workaround plans; the first matching pattern wins, and no match
    returns ``[]``. Every call returns fresh steps, so the planner stays pure.
    ``calls`` records ``(goal, history ids, last_error)`` for teaching and tests.

    >>> planner = ScriptedPlanner({None: "1. [writer] draft", "timeout": "1. [writer] shorter draft"})
    """

    def __init__(self, rules: Mapping[str | None, StepsLike] | None = None, *, first: StepsLike | None = None) -> None:
        self.rules: list[tuple[str | None, list[Step]]] = []
        if first is not None:
            self.rules.append((None, to_steps(first)))
        for key, steps in (rules or {}).items():
            self.rules.append((key, to_steps(steps)))
        if not any(key is None for key, _ in self.rules):
            raise ValueError("a ScriptedPlanner needs a first plan: a rule keyed on None (or first=...)")
        for key, _ in self.rules:
            if key is not None:
                re.compile(key)  # a bad pattern is an error now, not at the first failure
        self.calls: list[tuple[str, list[str], str | None]] = []

    def when(self, pattern: str, steps: StepsLike) -> "ScriptedPlanner":
        """Add a rule: when the last error matches ``pattern``, propose ``steps``."""
        re.compile(pattern)
        self.rules.append((pattern, to_steps(steps)))
        return self

    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        self.calls.append((goal, [s.id for s in history], last_error))
        for key, steps in self.rules:
            if (key is None and last_error is None) or (
                key is not None and last_error is not None and re.search(key, last_error, re.IGNORECASE)
            ):
                return [s.fresh() for s in steps]
        return []

    def __repr__(self) -> str:
        return f"ScriptedPlanner({[k for k, _ in self.rules]})"


def planner_steps(result: Any) -> list[Step]:
    """Normalise what a planner returned (steps, mappings, a spec string or a Plan)."""
    if result is None:
        return []
    if isinstance(result, Plan):
        return [s.fresh() for s in result.steps]
    if isinstance(result, str):
        return to_steps(result) if result.strip() else []
    if isinstance(result, Iterable):
        return to_steps(list(result))
    raise TypeError(f"a planner must return a list of steps, got {type(result).__name__}")


def make_plan(
    goal: str,
    planner: Planner,
    *,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    plan_id: str | None = None,
    title: str = "",
    emit: Callable[..., Any] | None = None,
) -> Plan:
    """Ask ``planner`` for a first plan and validate it. Raises PlanningError / PlanError.

    ``emit(kind, **data)`` receives the planner's events (``llm.call``), so a run counts
    the first planning call's usage too.
    """
    toolbox, agent_map = as_toolbox(tools), as_agents(agents)
    base = Plan(id=plan_id or slug(goal) or "plan", goal=goal, title=title, steps=[], revision=0)

    def problems_of(steps: list[Step]) -> list[Problem]:
        return accept_steps(base, [], list(steps), toolbox, agent_map)[2]

    tell_planner(planner, PlanningContext(tools=toolbox, agents=agent_map, plan=None, validate=problems_of, emit=emit))
    steps = planner_steps(call_user(planner, goal, [], None))
    if not steps:
        raise PlanningError(f"the planner returned no steps for the goal {goal!r}")
    plan, _, problems = accept_steps(base, [], steps, toolbox, agent_map)
    if problems:
        raise PlanError(problems)
    return plan


def tell_planner(planner: Any, context: PlanningContext) -> None:
    set_context = getattr(planner, "set_context", None)
    if callable(set_context):
        set_context(context)
