"""Plan specs: the text a person (or a model) writes to describe a plan.

Two forms are read:

* a YAML or JSON mapping with ``goal``, optional ``title`` and ``steps`` (a list of
  mappings with the :class:`~planbook.models.Step` fields; ``id`` defaults to the
  1-based position);
* a numbered or bulleted Markdown list, where a leading ``[TAG]`` names the agent
  (``1. [DATA_ANALYSIS] Load the CSV``: the OpenManus style). A heading or a
  ``Goal:`` line before the list gives the goal.

Field names from the seed designs are accepted as aliases (``need``, ``tool_name``,
``expected_outcome``), so their plans can be pasted in unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .errors import PlanError, Problem, closest
from .models import Plan, Step
from .refs import find_refs

STEP_FIELDS = ("id", "task", "tool", "args", "agent", "needs", "expect", "on_failure")
ALIASES = {
    "need": "needs",
    "tool_name": "tool",
    "expected_outcome": "expect",
    "description": "task",
    "arguments": "args",
}
PLAN_FIELDS = ("goal", "title", "id", "steps")

_LIST_ITEM = re.compile(r"^\s*(?:(\d+)[.)]|[-*+])\s+(.*\S)\s*$")
_TAG = re.compile(r"^\[([^\]]+)\]\s*(.*)$")
#: a GitHub task-list checkbox or a planbook/OpenManus status mark before the text:
#: ``- [ ] task``, ``- [x] task``, ``1. [✓] [WRITER] task`` (pasted plan text reads back)
_CHECKBOX = re.compile(r"^\[[ xX✓→✗!\-]\]\s+(.*)$")
_GOAL_LINE = re.compile(r"^\s*(?:#+\s*|goal\s*:\s*)(.+?)\s*$", re.IGNORECASE)


def parse_plan(text: str, *, plan_id: str | None = None, goal: str | None = None) -> Plan:
    """Parse a spec into a :class:`Plan`. Raises :class:`PlanError` naming every problem."""
    if not isinstance(text, str):
        raise TypeError(f"a plan spec is text; got {type(text).__name__}")
    if not text.strip():
        raise PlanError([Problem("the plan spec is empty: write a YAML mapping with 'steps' or a Markdown list", code="empty")])
    from .compat import agenticseek  # an AgenticSeek answer: headlines + ```json {"plan": [...]}

    if agenticseek.looks_like_answer(text):
        plan = agenticseek.plan_from_answer(text)
    elif _looks_like_markdown(text):
        plan = _parse_markdown(text)
    else:
        plan = _parse_mapping(text)
    if goal is not None:
        plan.goal = goal
    if plan_id is not None:
        plan.id = plan_id
    elif plan.id == "plan":
        plan.id = slug(plan.title or plan.goal) or "plan"
    return plan


def is_plan_spec(text: str) -> bool:
    """Whether ``text`` is a plan spec rather than a goal in words.

    A spec is a YAML/JSON mapping with ``steps``, a list of step mappings, or a Markdown
    list; prose that merely contains "steps:" or starts with "[" is a goal. Used where
    both are accepted (a planner was given), so a goal is never parsed as a broken plan.
    """
    stripped = text.strip()
    from .compat.agenticseek import looks_like_answer

    if _looks_like_markdown(stripped) or looks_like_answer(stripped):
        return True
    if "\n" not in stripped and not stripped.startswith(("{", "[", "steps:")):
        return False  # one line of prose (a one-line spec starts with {, [ or steps:)
    import yaml

    try:
        data = json.loads(stripped) if stripped.startswith(("{", "[")) else yaml.safe_load(stripped)
    except (ValueError, yaml.YAMLError):
        try:
            data = yaml.safe_load(stripped)
        except yaml.YAMLError:
            return False
    if isinstance(data, Mapping):
        return "steps" in data
    return isinstance(data, list) and bool(data) and all(isinstance(item, Mapping) for item in data)


def slug(text: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text.lower())
    return "-".join(words)[:40].strip("-")


def _looks_like_markdown(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    items = [line for line in lines if _LIST_ITEM.match(line)]
    if not items:
        return False
    others = [line for line in lines if not _LIST_ITEM.match(line)]
    # a YAML list of mappings ("- id: 1" or "- {tool: add}") is YAML, not Markdown
    if any(re.match(r"^\s*-\s+(?:[A-Za-z_]+\s*:|\{)", line) for line in items):
        return False
    return all(_GOAL_LINE.match(line) or line.startswith((" ", "\t")) for line in others)


def _parse_markdown(text: str) -> Plan:
    goal = ""
    steps: list[Step] = []
    lines: dict[str, int] = {}
    problems: list[Problem] = []
    step_indent: int | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        item = _LIST_ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if item and step_indent is not None and indent > step_indent:
            item = None  # a nested list item ("   - detail") describes the step above it
        if not item:
            g = _GOAL_LINE.match(line)
            if g and not steps:
                goal = g.group(1)
            elif g and indent == 0:
                problems.append(
                    Problem(
                        f"{line.strip()!r} comes after the steps: put the goal or heading before the list "
                        f"(or indent the line to continue step {steps[-1].id})",
                        code="syntax",
                        line=lineno,
                    )
                )
            elif line.strip() and steps:  # an indented continuation line adds to the task
                steps[-1].task += " " + line.strip()
            continue
        if step_indent is None:
            step_indent = indent
        number, body = item.groups()
        # the author's numbers are the ids (OpenManus numbers from 0); bullets count from 1
        step_id = number if number is not None else str(len(steps) + 1)
        agent = None
        box = _CHECKBOX.match(body)
        if box:
            body = box.group(1)
        tag = _TAG.match(body)
        if tag:
            agent, body = tag.group(1).strip().lower(), tag.group(2)
        if step_id in lines:
            problems.append(
                Problem(f"duplicate step number {step_id}: number the steps 1, 2, 3, ...", step=step_id, code="duplicate_id", line=lineno)
            )
            continue
        steps.append(Step(id=step_id, task=body.strip(), agent=agent))
        lines[step_id] = lineno
    if problems:
        raise PlanError(problems)
    plan = Plan(goal=goal, steps=steps)
    plan._lines = lines
    return plan


def _parse_mapping(text: str) -> Plan:
    import yaml

    data: Any = None
    if text.lstrip().startswith(("{", "[")):
        try:  # JSON first: valid JSON that YAML rejects (tab indentation) must still read
            data = json.loads(text)
        except ValueError:
            data = None
    try:
        if data is None:
            data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise PlanError(
            [Problem(f"not valid YAML/JSON: {getattr(exc, 'problem', None) or exc}", code="syntax", line=line)]
        ) from None
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, Mapping):
        raise PlanError(
            [Problem("a plan spec must be a mapping with 'steps' (YAML or JSON) or a Markdown list of steps "
                     "(a goal in plain words needs a planner: pass planner=...)", code="syntax")]
        )
    duplicates: dict[str, list[int]] = {}
    lines = _step_lines(text, duplicates)
    try:
        plan = plan_from_dict(data)
    except PlanError as exc:  # point at the step's line, as validation does
        raise PlanError(
            [Problem(p.message, p.step, p.code, lines.get(p.step)) if p.step is not None and p.line is None else p
             for p in exc.problems]
        ) from None
    plan._lines = lines
    plan._duplicate_lines = duplicates
    return plan


def _step_lines(text: str, duplicates: dict[str, list[int]] | None = None) -> dict[str, int]:
    """The line where each step starts, read from the YAML node tree (JSON is YAML).

    Lines of later steps that reuse an id go to ``duplicates``.
    """
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    steps_node = None
    if isinstance(root, yaml.SequenceNode):
        steps_node = root
    elif isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if getattr(key, "value", None) == "steps" and isinstance(value, yaml.SequenceNode):
                steps_node = value
    if steps_node is None:
        return {}
    lines: dict[str, int] = {}
    for position, item in enumerate(steps_node.value, start=1):
        step_id = str(position)
        if isinstance(item, yaml.MappingNode):
            for key, value in item.value:
                if getattr(key, "value", None) == "id" and isinstance(value, yaml.ScalarNode):
                    step_id = str(value.value)
        if step_id in lines and duplicates is not None:
            duplicates.setdefault(step_id, []).append(item.start_mark.line + 1)
        lines.setdefault(step_id, item.start_mark.line + 1)
    return lines


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Build a plan from an already-parsed mapping (used by planners and model output too)."""
    problems: list[Problem] = []
    for key in data:
        if key not in PLAN_FIELDS:
            problems.append(
                Problem(
                    f"unknown plan field {key!r}{closest(str(key), PLAN_FIELDS)} (a plan has {', '.join(PLAN_FIELDS)})",
                    code="unknown_field",
                )
            )
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list):
        problems.append(Problem("'steps' must be a list of steps", code="syntax"))
        raise PlanError(problems)
    steps, step_problems = steps_from_dicts(raw_steps)
    problems += step_problems
    if problems:
        raise PlanError(problems)
    return Plan(
        id=str(data.get("id") or "plan"),
        goal=str(data.get("goal") or ""),
        title=str(data.get("title") or ""),
        steps=steps,
    )


def steps_from_dicts(raw_steps: list[Any]) -> tuple[list[Step], list[Problem]]:
    """Steps from mappings, with aliases applied and ``$id`` references added to ``needs``."""
    steps: list[Step] = []
    problems: list[Problem] = []
    for position, raw in enumerate(raw_steps, start=1):
        if isinstance(raw, Step):
            steps.append(raw.fresh())
            continue
        if isinstance(raw, str):
            raw = {"task": raw}
        if not isinstance(raw, Mapping):
            problems.append(Problem(f"step {position} must be a mapping, got {raw!r}", step=str(position), code="syntax"))
            continue
        fields: dict[str, Any] = {}
        raw_id = raw.get("id", position)
        if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
            problems.append(Problem("the id is empty: give the step an id, or leave 'id' out to number it by position",
                                    step=str(position), code="empty_id"))
            raw_id = position
        step_id = str(raw_id)
        for key, value in raw.items():
            name = ALIASES.get(str(key), str(key))
            if name not in STEP_FIELDS:
                problems.append(
                    Problem(
                        f"unknown field {key!r}{closest(str(key), STEP_FIELDS)} (a step has {', '.join(STEP_FIELDS)})",
                        step=step_id,
                        code="unknown_field",
                    )
                )
                continue
            fields[name] = value
        fields["id"] = step_id
        needs = fields.get("needs") or []
        if isinstance(needs, (str, int)):
            needs = [needs]
        if not isinstance(needs, list):
            problems.append(Problem(f"'needs' must be a list of step ids, got {needs!r}", step=step_id, code="syntax"))
            needs = []
        args = fields.get("args") or {}
        if not isinstance(args, Mapping):
            problems.append(Problem(f"'args' must be a mapping of name to value, got {args!r}", step=step_id, code="syntax"))
            args = {}
        fields["args"] = dict(args)
        fields["needs"] = list(dict.fromkeys([str(n) for n in needs] + find_refs(fields["args"])))
        for text_field in ("task", "expect"):
            if fields.get(text_field) is None:
                fields.pop(text_field, None)
            else:
                fields[text_field] = str(fields[text_field])
        for name_field in ("tool", "agent"):
            if fields.get(name_field) is not None:
                fields[name_field] = str(fields[name_field])
        try:
            steps.append(Step(**fields))
        except Exception as exc:  # pydantic ValidationError: report, keep going
            problems.append(Problem(f"{exc}".replace("\n", " "), step=step_id, code="syntax"))
    return steps, problems
