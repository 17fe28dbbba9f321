"""One check that every plan passes before it runs: the first plan and each replan.

A replan may add and change steps, never rewrite a completed (or skipped) one; the
combined plan must validate like a hand-written one. ``make_plan`` (first plans), the
runner (replans) and a planner's own ``context.validate`` all call this.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .errors import Problem
from .models import Plan, Step
from .tools import Tool
from .validate import check_replacement, plan_problems


def accept_steps(
    base: Plan, kept: list[Step], proposed: list[Step], tools: Mapping[str, Tool], agents: Collection[str],
) -> tuple[Plan, list[Step], list[Problem]]:
    """The candidate plan (``kept`` + the new steps), the new steps, and every problem.

    ``base`` gives the id, goal and title; the candidate's revision is one more than its.
    """
    new_steps, problems = check_replacement(kept, proposed)
    candidate = Plan(id=base.id, goal=base.goal, title=base.title, steps=list(kept) + new_steps,
                     revision=base.revision + 1)
    problems = problems + plan_problems(candidate, tools, agents)
    return candidate, new_steps, problems
