"""One check that every plan passes before it runs: the first plan and each replan.

A replan may add and change steps, never rewrite a completed (or skipped) one; the
combined plan must validate like a hand-written one. ``make_plan`` (first plans), the
runner (replans) and a planner's own ``context.validate`` all call this.

A replacement replaces the steps that have not run. With parallel branches some of them
belong to branches that did not fail: a replacement that drops one of those while a step
it keeps (or adds) still needs it is refused with an error naming every such step, so the
planner (or a model, which gets the error back) knows what it owes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..data.errors import Problem
from ..data.models import Plan, Status, Step
from ..data.refs import find_refs
from .validate import Tool, check_replacement, plan_problems

#: statuses of work still to come: a replacement may drop such a step unless its steps need it
PENDING = frozenset({Status.not_started, Status.blocked, Status.in_progress})


def accept_steps(
    base: Plan, kept: list[Step], proposed: list[Step], tools: Mapping[str, Tool], agents: Collection[str],
) -> tuple[Plan, list[Step], list[Problem]]:
    """The candidate plan (``kept`` + the new steps), the new steps, and every problem.

    ``base`` gives the id, goal and title; the candidate's revision is one more than its.
    """
    new_steps, problems = check_replacement(kept, proposed)
    candidate = Plan(id=base.id, goal=base.goal, title=base.title, steps=list(kept) + new_steps,
                     revision=base.revision + 1)
    owed = pending_needed(base, candidate)
    problems = problems + plan_problems(candidate, tools, agents, known_ids=owed) + owed_problems(candidate, owed)
    return candidate, new_steps, problems


def pending_needed(base: Plan, candidate: Plan) -> list[str]:
    """Pending steps of ``base`` that ``candidate`` dropped although its steps need them,
    directly or through another such step (in plan order): what a replacement must keep."""
    present = {s.id for s in candidate.steps}
    dropped = {s.id: s for s in base.steps if s.status in PENDING and s.id not in present}
    owed: set[str] = set()
    todo = [ref for s in candidate.steps for ref in _needs(s) if ref in dropped]
    while todo:
        sid = todo.pop()
        if sid not in owed:
            owed.add(sid)
            todo.extend(ref for ref in _needs(dropped[sid]) if ref in dropped)
    return [s.id for s in base.steps if s.id in owed]


def owed_problems(candidate: Plan, owed: list[str]) -> list[Problem]:
    """One problem per step that needs a dropped pending step, then one naming all of them."""
    if not owed:
        return []
    problems = [Problem(f"needs {ref!r}, a step that was still pending and that the new plan dropped",
                        step=s.id, code="drops_needed_step")
                for s in candidate.steps for ref in _needs(s) if ref in owed]
    problems.append(Problem(
        f"a replacement must keep the pending steps that its steps need: {', '.join(owed)} "
        "(return them unchanged with the new steps, or change the steps that need them)",
        code="drops_needed_step"))
    return problems


def _needs(step: Step) -> list[str]:
    """The ids a step uses: its ``needs`` and its ``$id`` references, once each."""
    return list(dict.fromkeys([*step.needs, *find_refs(step.args)]))
