"""The words a model is shown. Kept in one module so they can be read and changed together.

A model never sees a secret: what a prompt shows of a run (its goal, the remaining plan, what
was executed, the last error) passes the process's checkpoint, and a step's arguments are
shown as :func:`planbook.outbound.shown_value` shows them (a secret-named literal as ``***``, a
``$id`` reference and a :class:`~planbook.Secret`'s ``{"$secret": ...}`` as written). The
runner gives a planner the run that way too, and puts the real values back into a step it
proposes that keeps them (:mod:`planbook.engine.replanning`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..data.models import Plan, Step
from ..outbound import is_secret_name, mask_data, mask_text, shown_value
from ..outbound.text import one_line
from .text import shorten

__all__ = [
    "AGENT_SYSTEM", "FEEDBACK", "PLANNER_SYSTEM", "agent_request", "feedback", "plan_request", "planner_system",
    "replan_request",
]

PLANNER_SYSTEM = """\
You are the planner of a plan-and-execute system. You do not do the work yourself: you \
write a plan of steps that tools and agents will execute, in order.
Each step either calls a tool (give "tool" and "args" that match the tool's argument \
schema) or gives a task in words to an agent (give "agent" and "task", no "args"). Use \
only the tools and agents listed. Give every step its own short id ("1", "2", ...). \
List in "needs" the ids of earlier steps whose results the step uses; a tool argument \
written as "$ID" receives the result of step ID. Say in "expect" what success looks like.
Keep the plan short: at most {max_steps} steps.
{answer} Do not ask for clarification: make reasonable assumptions and write them into the tasks."""

#: How to answer, by mode: with tool calling, or (tool_calling=False) in a fenced JSON block.
ANSWER_WITH_TOOL = (
    "Answer by calling the function submit_plan once with the whole plan. If you cannot call "
    'functions, answer with one ```json block holding {"steps": [...]}.'
)
ANSWER_WITH_JSON = (
    'Answer with the whole plan in one ```json block holding {"steps": [...]}; write nothing '
    "that is not needed outside the block."
)

AGENT_SYSTEM = """\
You are the agent {name!r} ({description}) in a plan-and-execute system. You work on one \
step of a plan. Use the tools you are given when they help. When you are done, call \
finish with status "success" and your answer, or status "failure" and what went wrong. \
Do not ask for clarification."""

FEEDBACK = """\
Your answer was rejected; nothing was executed:
{problems}
Fix these problems and answer again with the whole plan {how}. \
Do not ask for clarification."""


def planner_system(max_steps: int, *, tool_calling: bool = True) -> str:
    """The planner's system prompt; it asks for the answer the way the planner will read it."""
    answer = ANSWER_WITH_TOOL if tool_calling else ANSWER_WITH_JSON
    return PLANNER_SYSTEM.format(max_steps=max_steps, answer=answer)


def feedback(problems: list[str], *, tool_calling: bool = True) -> str:
    """The message that sends a rejected answer's problems back."""
    how = "by calling submit_plan" if tool_calling else "in one ```json block"
    return FEEDBACK.format(problems="\n".join(f"- {p}" for p in problems), how=how)


def describe_tools(tools: Mapping[str, Any]) -> str:
    if not tools:
        return "Tools: (none)"
    lines = ["Tools (name: description, then the JSON schema of its args):"]
    for tool in tools.values():
        properties = {
            name: {k: v for k, v in prop.items() if k != "title"}  # pydantic's titles only repeat the name
            for name, prop in tool.parameters.get("properties", {}).items()
        }
        required = tool.parameters.get("required", [])
        lines.append(f"- {tool.name}: {tool.description or '(no description)'}")
        lines.append(f"  args: {json.dumps(properties, sort_keys=True)}; required: {', '.join(required) or 'none'}")
    return "\n".join(lines)


def describe_agents(agents: Mapping[str, Any]) -> str:
    if not agents:
        return "Agents: (none)"
    lines = ["Agents (name: description):"]
    for name, agent in agents.items():
        lines.append(f"- {name}: {getattr(agent, 'description', '') or '(no description)'}")
    return "\n".join(lines)


def plan_request(goal: str, tools: Mapping[str, Any], agents: Mapping[str, Any]) -> str:
    return f"Goal: {goal}\n\n{describe_tools(tools)}\n\n{describe_agents(agents)}\n\nWrite the plan."


def _leaf(value: Any) -> Any:
    return mask_text(value) if isinstance(value, str) else mask_data(value)


def shown_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A step's arguments as a model may see them (see the module docstring)."""
    return {name: shown_value(value, _leaf, named=type(name) is str and is_secret_name(name))
            for name, value in args.items()}


def _masked(value: Any, limit: int) -> str:
    """``value`` as a prompt shows it: masked whole, then cut (a cut first could split a secret
    into parts no mask finds)."""
    return shorten(mask_text(value if isinstance(value, str) else shorten(value, 1 << 20)), limit)


def step_as_dict(step: Step) -> dict[str, Any]:
    data: dict[str, Any] = {"id": step.id, "task": mask_text(step.task)}
    if step.tool:
        data["tool"], data["args"] = step.tool, shown_args(step.args)
    if step.agent:
        data["agent"] = step.agent
    if step.needs:
        data["needs"] = step.needs
    if step.expect:
        data["expect"] = mask_text(step.expect)
    return data


def executed_lines(history: Iterable[Step], limit: int) -> list[str]:
    lines = []
    for step in history:
        outcome = f"error: {_masked(step.error, limit)}" if step.error else f"result: {_masked(step.result, limit)}"
        # one line per execution: a line break in a task or a result must not forge another one
        lines.append(f"- step {step.id} ({step.status}) {one_line(mask_text(step.describe()))} → {one_line(outcome)}")
    return lines or ["- (nothing yet)"]


def replan_request(
    goal: str,
    tools: Mapping[str, Any],
    agents: Mapping[str, Any],
    *,
    history: list[Step],
    last_error: str | None,
    plan: Plan | None,
    kept_ids: list[str],
    max_steps: int,
    result_limit: int = 200,
    tool_calling: bool = True,
) -> str:
    remaining = [s for s in (plan.steps if plan else []) if s.id not in kept_ids]
    parts = [
        f"Goal: {mask_text(goal)}",
        describe_tools(tools),
        describe_agents(agents),
        "Executed so far (results shortened):\n" + "\n".join(executed_lines(history, result_limit)),
        f"Last error: {mask_text(last_error or '') or '(none)'}",
        "Done steps (kept as they are; do not repeat or rewrite them): " + (", ".join(kept_ids) or "(none)"),
        "Remaining plan:\n" + json.dumps([step_as_dict(s) for s in remaining], ensure_ascii=False),
        "Write the steps that remain to reach the goal: you may keep, change, drop or add steps; "
        "give new work new ids; a step may need the done steps. "
        f"Propose at most {max_steps} steps. If the remaining plan needs no change, "
        + ("call submit_plan with no_change=true and no steps." if tool_calling
           else 'answer with the ```json block {"no_change": true, "steps": []}.'),
    ]
    return "\n\n".join(parts)


def agent_request(goal: str, plan_text: str, step: Step, needs: Mapping[str, Any], result_limit: int = 2000) -> str:
    parts = [
        f"Goal of the run: {goal}" if goal else "",
        f"CURRENT PLAN STATUS:\n{plan_text}",
        f"YOUR CURRENT TASK (step {step.id}): {step.task}",
        f"What success looks like: {step.expect}" if step.expect else "",
    ]
    if needs:
        parts.append(
            "Results of the steps this step needs:\n"
            + "\n".join(f"- step {k}: {shorten(v, result_limit)}" for k, v in needs.items())
        )
    parts.append("Work only on this step. End by calling finish.")
    return "\n\n".join(p for p in parts if p)
