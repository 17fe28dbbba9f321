"""Write a plan back as a YAML spec that :meth:`Plan.parse` reads identically.

Used by ``%%plan --review``: a planner's plan becomes an editable ``%%plan`` cell, so
the person approves (or edits) the plan by running the cell. Only what a spec can say is
written (goal, title, the steps' fields); run state is not.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..data.models import Plan, Step

_DIGITS = re.compile(r"^(0|[1-9][0-9]*)$")


def plan_spec(plan: Plan) -> str:
    """The YAML text of ``plan`` (its id is not written: ``%%plan NAME`` gives it)."""
    _check_plain_args(plan)
    head: dict[str, Any] = {}
    if plan.goal:
        head["goal"] = plan.goal
    if plan.title:
        head["title"] = plan.title
    parts = [_dump(head, flow=False)] if head else []
    steps = [_step_dict(step) for step in plan.steps]
    parts.append("steps:\n" + (_dump(steps) if steps else "[]\n"))
    return "".join(parts)


def _step_dict(step: Step) -> dict[str, Any]:
    data: dict[str, Any] = {"id": _id(step.id)}
    if step.task:
        data["task"] = step.task
    if step.tool is not None:
        data["tool"] = step.tool
    if step.args:
        data["args"] = step.args
    if step.agent is not None:
        data["agent"] = step.agent
    if step.needs:
        data["needs"] = [_id(n) for n in step.needs]
    if step.expect:
        data["expect"] = step.expect
    if step.on_failure is not None:
        data["on_failure"] = step.on_failure
    return data


def _id(step_id: str) -> int | str:
    """``1`` rather than ``'1'``: the spec reader turns ids back into text."""
    return int(step_id) if _DIGITS.match(step_id) else step_id


def _dump(data: Any, *, flow: bool | None = None) -> str:
    """Block style, with short leaf lists/mappings on one line (``needs: [1, 2]``)."""
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=flow, width=10**6))


def _check_plain_args(plan: Plan) -> None:
    """Args a YAML spec cannot express (objects, NaN) would not read back the same: say so."""
    for step in plan.steps:
        for name, value in step.args.items():
            if not _plain(value):
                raise ValueError(
                    f"step {step.id}: argument {name!r} holds {type(value).__name__} {value!r}, which a YAML "
                    "spec cannot express; use plain values (text, numbers, lists, mappings) or a $id reference"
                )


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False
