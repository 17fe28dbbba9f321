"""OpenManus's plan text: a step as ``[TAG] task``, ``get``'s plan text, and reading it back.

The planning tool (:mod:`planbook.compat.openmanus`), the flow on it and the scripted
model's deterministic summary (:mod:`planbook.compat.model`) all read or write this text;
it sits below all three so each imports it, and none imports another to reach it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..data.errors import PlanError, Problem
from ..data.models import STATUS_MARKS, Plan, Status, Step

__all__ = ["TAG", "format_plan", "one_line", "parse_plan_text", "step_from_text", "step_text"]

#: OpenManus finds a step's agent with this regex, searched anywhere in the step text
TAG = re.compile(r"\[([A-Z_]+)\]")
_MARK_STATUS = {mark: status for status, mark in STATUS_MARKS.items()}


# --------------------------------------------------------------------- step text
def step_from_text(text: str, step_id: str) -> Step:
    """A step from an OpenManus step string: ``[TAG]`` (found anywhere, as OpenManus does) names the agent.

    A leading tag is taken off the task; a tag inside the text stays where it was
    written, so the text reads back unchanged.
    """
    text = text.strip()
    match = TAG.search(text)
    if match is None:
        return Step(id=step_id, task=text)
    task = text[match.end():].strip() if match.start() == 0 else text
    return Step(id=step_id, task=task, agent=match.group(1).lower())


def step_text(step: Step) -> str:
    """The step as OpenManus writes it: ``[TAG] task``, the task of an untagged step as is."""
    if step.agent:
        tag = f"[{step.agent.upper()}]"
        return step.task if tag in step.task else f"{tag} {step.task}".rstrip()
    if step.tool:
        args = ", ".join(f"{k}={v!r}" for k, v in step.args.items())
        return f"{step.task} ({step.tool})" if step.task else f"{step.tool}({args})"
    return step.task


#: every character ``str.splitlines`` breaks a line at: each would start a new line in the plan text
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with each line break shown as ``⏎``: inside a plan line it cannot start a line of its own."""
    return _LINE_BREAK.sub("⏎", text)


def format_plan(plan: Plan, *, text_of: Callable[[Step], str] = step_text, raw: bool = False) -> str:
    """The text of OpenManus's ``get``: header, a rule, progress, status counts, ``i. [mark] text``.

    As OpenManus's code does, the rule is as long as the header line *with* its newline
    (one more ``=`` than the header's characters) and an empty plan shows ``(0%)``.
    Steps are numbered by position from 0. planbook's ``failed`` and ``skipped`` steps
    (the tool never writes them, a run does) get their marks and are counted after the
    four OpenManus statuses. ``text_of`` gives a step's text (the tool passes the text as
    written); line breaks in step texts and notes are shown as ``⏎`` unless ``raw``
    (OpenManus prints them, so a step text can forge a step line).
    """
    shown = (lambda text: text) if raw else one_line
    header = f"Plan: {shown(plan.display_title)} (ID: {shown(plan.id)})\n"
    output = header + "=" * len(header) + "\n\n"
    counts = plan.counts()
    total = len(plan.steps)
    done = counts[Status.completed]
    output += f"Progress: {done}/{total} steps completed "
    output += f"({done / total * 100:.1f}%)\n" if total else "(0%)\n"
    output += (
        f"Status: {done} completed, {counts[Status.in_progress]} in progress, "
        f"{counts[Status.blocked]} blocked, {counts[Status.not_started]} not started"
    )
    for extra in (Status.failed, Status.skipped):
        if counts[extra]:
            output += f", {counts[extra]} {extra.value}"
    output += "\n\nSteps:\n"
    for index, step in enumerate(plan.steps):
        output += f"{index}. {STATUS_MARKS[step.status]} {shown(text_of(step))}\n"
        if step.notes:
            output += f"   Notes: {shown(step.notes)}\n"
    return output


_HEADER = re.compile(r"^Plan: (?P<title>.*) \(ID: (?P<id>[^()]*)\)\s*$")
_STEP_LINE = re.compile(r"^(?P<number>[^\s\[]+?)\. (?P<mark>\[[^\]]\])(?: (?P<text>.*))?$")
_DETAIL = re.compile(r"^ {2,}(?P<kind>Notes|Needs|Error): (?P<value>.*)$")
_IGNORED = re.compile(r"^(?:=+|Progress: .*|Status: .*|Steps:|Revision: \d+)\s*$")


def parse_plan_text(text: str, *, plan_id: str | None = None) -> Plan:
    """Read a plan back from its text (``get``'s output, or planbook's plan text), statuses included.

    Step ids are the numbers as written; ``[TAG]`` names the agent; ``Notes:``,
    ``Needs:`` and ``Error:`` lines under a step are read into it. Raises
    :class:`~planbook.PlanError` naming every line it cannot read.
    """
    title, found_id, goal = "", None, ""
    steps: list[Step] = []
    lines: dict[str, int] = {}
    problems: list[Problem] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.rstrip()
        if not stripped.strip():
            continue
        if (m := _HEADER.match(stripped)) and not steps:
            title, found_id = m.group("title"), m.group("id")
        elif m := _STEP_LINE.match(stripped):
            status = _MARK_STATUS.get(m.group("mark"))
            number = m.group("number")
            if status is None:
                problems.append(Problem(f"unknown mark {m.group('mark')}: use one of {' '.join(_MARK_STATUS)}",
                                        step=number, code="syntax", line=lineno))
            elif number in lines:
                problems.append(Problem(f"step number {number} appears twice (first on line {lines[number]})",
                                        step=number, code="duplicate_id", line=lineno))
            else:
                step = step_from_text(m.group("text") or "", number)
                step.status = status
                steps.append(step)
                lines[number] = lineno
        elif (m := _DETAIL.match(stripped)) and steps:
            step, value = steps[-1], m.group("value").strip()
            if m.group("kind") == "Notes":
                step.notes = value
            elif m.group("kind") == "Error":
                step.error = value
            else:
                step.needs = [n.strip() for n in value.split(",") if n.strip()]
        elif stripped.startswith("Goal: ") and not steps:
            goal = stripped[len("Goal: "):].strip()
        elif not _IGNORED.match(stripped.strip()):
            problems.append(Problem(f"cannot read {stripped.strip()!r}: expected a step line such as "
                                    "'0. [ ] [AGENT] task' or '   Notes: ...'", code="syntax", line=lineno))
    if problems:
        raise PlanError(problems)
    if not steps:
        raise PlanError([Problem("no step lines ('0. [ ] task') in the plan text", code="empty")])
    plan = Plan(id=plan_id or found_id or "plan", title=title, goal=goal, steps=steps)
    plan.keep_lines(lines)
    return plan
