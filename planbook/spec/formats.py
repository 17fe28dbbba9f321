"""Plan specs: the text a person (or a model) writes to describe a plan.

Two forms are read:

* a YAML or JSON mapping with ``goal``, optional ``title`` and ``steps`` (a list of
  mappings with the :class:`~planbook.data.models.Step` fields; ``id`` defaults to the
  1-based position);
* a numbered or bulleted Markdown list, where a leading ``[TAG]`` names the agent
  (``1. [DATA_ANALYSIS] Load the CSV``: the OpenManus style). A heading or a
  ``Goal:`` line before the list gives the goal.

Field names from the seed designs are accepted as aliases (``need``, ``tool_name``,
``expected_outcome``), so their plans can be pasted in unchanged. Other formats register
themselves with :func:`register_format` (the seed designs in :mod:`planbook.compat` add
AgenticSeek's answers and OpenManus's plan text): the reader knows none of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import ValidationError

from ..data.errors import PlanError, Problem, closest
from ..data.gcwindow import collector_paused
from ..data.ids import id_problem
from ..data.models import Plan, PolicyName, Step, StepSpec, register_plan_reader
from ..data.wording import slug
from .load import MAX_DEPTH, load_spec
from .load import depth as _depth

#: a step's fields, from the one definition in :class:`~planbook.data.models.StepSpec`
STEP_FIELDS: tuple[str, ...] = tuple(StepSpec.model_fields)
POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)
#: ids that need no closer look (the common case, checked fast)
_PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
#: args from a model or a planner (read from text, the whole document is limited to MAX_DEPTH)
MAX_ARGS_DEPTH = MAX_DEPTH
ALIASES = {
    "need": "needs",
    "tool_name": "tool",
    "expected_outcome": "expect",
    "description": "task",
    "arguments": "args",
}
PLAN_FIELDS = ("goal", "title", "id", "steps")
#: ``"$schema": "..."`` at the top of a JSON spec points editors at the plan-file JSON Schema
SCHEMA_KEY = "$schema"

_LIST_ITEM = re.compile(r"^\s*(?:(\d+)[.)]|[-*+])\s+(.*\S)\s*$")
_TAG = re.compile(r"^\[([^\]]+)\]\s*(.*)$")
#: a GitHub task-list checkbox or a planbook/OpenManus status mark before the text:
#: ``- [ ] task``, ``- [x] task``, ``1. [✓] [WRITER] task`` (pasted plan text reads back)
_CHECKBOX = re.compile(r"^\[[ xX✓→✗!\-]\]\s+(.*)$")
_YAML_ITEM = re.compile(r"^\s*-\s+(?:[A-Za-z_]+\s*:|\{)")
_GOAL_LINE = re.compile(r"^\s*(?:#+\s*|goal\s*:\s*)(.+?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class PlanFormat:
    """A plan format other than the two built in: ``detect(text)`` says whether ``text`` is
    written in it (cheaply: it is asked of every spec), ``parse(text)`` reads it or raises
    :class:`PlanError`."""

    name: str
    detect: Callable[[str], bool]
    parse: Callable[[str], Plan]


#: the registered formats, asked in order before the Markdown list and YAML/JSON
PLAN_FORMATS: dict[str, PlanFormat] = {}


def register_format(name: str, detect: Callable[[str], bool], parse: Callable[[str], Plan]) -> None:
    """Teach :func:`parse_plan` (``Plan.parse``, ``%%plan``, ``planbook run``) to read one more format."""
    PLAN_FORMATS[name] = PlanFormat(name, detect, parse)


def _registered(text: str) -> PlanFormat | None:
    return next((f for f in PLAN_FORMATS.values() if f.detect(text)), None)


def parse_plan(text: str, *, plan_id: str | None = None, goal: str | None = None) -> Plan:
    """Parse a spec into a :class:`Plan`. Raises :class:`PlanError` naming every problem."""
    if not isinstance(text, str):
        raise TypeError(f"a plan spec is text; got {type(text).__name__}")
    if not text.strip():
        raise PlanError([Problem("the plan spec is empty: write a YAML mapping with 'steps' or a Markdown list", code="empty")])
    registered = _registered(text)
    if registered is not None:
        plan = registered.parse(text)
    elif _looks_like_markdown(text):
        plan = _parse_markdown(text)
    else:
        with collector_paused():  # no user code runs while a spec is read
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
    if _looks_like_markdown(stripped) or _registered(stripped) is not None:
        return True
    if "\n" not in stripped and not stripped.startswith(("{", "[", "steps:")):
        return False  # one line of prose (a one-line spec starts with {, [ or steps:)
    try:
        data = load_spec(stripped).data
    except PlanError as exc:  # not YAML/JSON: words; nested too deep or too big: data, so a spec
        return any(p.code != "syntax" for p in exc.problems)
    if isinstance(data, Mapping):
        return "steps" in data
    return isinstance(data, list) and bool(data) and all(isinstance(item, Mapping) for item in data)


def _looks_like_markdown(text: str) -> bool:
    if text.lstrip()[:1] in ("{", "["):  # JSON, or a YAML flow collection: a list item cannot start so
        return False
    items = others = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if _LIST_ITEM.match(line):
            # a YAML list of mappings ("- id: 1" or "- {tool: add}") is YAML, not Markdown
            if _YAML_ITEM.match(line):
                return False
            items += 1
        elif not (_GOAL_LINE.match(line) or line.startswith((" ", "\t"))):
            others += 1
    return items > 0 and others == 0


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
    plan.keep_lines(lines)
    return plan


def _parse_mapping(text: str) -> Plan:
    loaded = load_spec(text)
    data = loaded.data
    prefix: tuple[str, ...] = ("steps",)
    if isinstance(data, list):
        data, prefix = {"steps": data}, ()
    if not isinstance(data, Mapping):
        raise PlanError(
            [Problem("a plan spec must be a mapping with 'steps' (YAML or JSON) or a Markdown list of steps "
                     "(a goal in plain words needs a planner: pass planner=...)", code="syntax")]
        )
    source = _Source(loaded.lines, loaded.written, prefix)
    plan, problems = _plan_from_dict(data, source)
    problems = [_at_step(p, source) for p in loaded.problems] + problems
    if problems:
        raise PlanError(problems)
    assert plan is not None
    plan.keep_lines(*source.plan_lines())
    return plan


class _Source:
    """Where the parts of a spec were written, for errors that quote the right line.

    Reads ``lines``/``written`` of :class:`~planbook.spec.load.LoadedSpec` (paths relative to the
    document; ``prefix`` is ``("steps",)`` for a mapping, ``()`` for a bare list of steps).
    :meth:`plan_lines` turns them into what a :class:`Plan` keeps: each step id's line, and
    ``(id, field)`` / ``(id, "args", name)`` / ``(id, "needs", need)`` lines for :func:`field_line`.
    """

    def __init__(self, lines: Mapping[tuple[Any, ...], int] | None = None,
                 written: Mapping[tuple[Any, ...], str] | None = None, prefix: tuple[Any, ...] = ("steps",)) -> None:
        self.lines = lines or {}
        self.written = written or {}
        self.prefix = prefix
        #: per step (by position): the id it got and its needs, as read
        self.ids: dict[int, str] = {}
        self.needs: dict[int, list[Any]] = {}

    def line(self, *path: Any) -> int | None:
        return self.lines.get((*self.prefix, *path)) if path and isinstance(path[0], int) else self.lines.get(path)

    def text(self, value: Any, *path: Any) -> Any:
        """A scalar as the author wrote it (``1.10``, ``010``, ``yes``), else the value."""
        written = self.written.get((*self.prefix, *path) if isinstance(path[0], int) else path)
        return value if written is None else written

    def plan_lines(self) -> tuple[dict[Any, int], dict[str, list[int]]]:
        """The lines a plan keeps, and the lines of steps that repeat an id (one pass at the end:
        a 10,000-step spec has ~100,000 parts)."""
        found: dict[Any, int] = {}
        duplicates: dict[str, list[int]] = {}
        depth, ids, aliases = len(self.prefix), self.ids, ALIASES
        head = self.prefix[0] if self.prefix else None
        for path, line in self.lines.items():
            size = len(path)
            if size <= depth or (head is not None and path[0] != head):
                continue
            step_id = ids.get(path[depth])
            if step_id is None:
                continue
            if size == depth + 1:
                if step_id in found:
                    duplicates.setdefault(step_id, []).append(line)
                else:
                    found[step_id] = line
                continue
            name = aliases.get(path[depth + 1], path[depth + 1])
            if size == depth + 2:
                key: tuple[Any, ...] = (step_id, name)
            else:
                sub = path[depth + 2]
                if name == "needs" and isinstance(sub, int):  # a need by its id, not its position
                    needs = self.needs.get(path[depth], [])
                    sub = str(needs[sub]) if sub < len(needs) else sub
                key = (step_id, name, sub)
            if key not in found:
                found[key] = line
        return found, duplicates

    def step_at(self, line: int) -> str | None:
        """The id of the step written around ``line`` (for problems the parser found by line)."""
        found, start = None, 0
        for index, step_id in self.ids.items():
            at = self.line(index)
            if at is not None and start <= at <= line:
                found, start = step_id, at
        return found


def _at_step(problem: Problem, source: _Source) -> Problem:
    if problem.step is not None or problem.line is None:
        return problem
    return Problem(problem.message, source.step_at(problem.line), problem.code, problem.line)


def field_line(plan: Plan, step_id: str, *where: Any) -> int | None:
    """The line of a step's field (``"needs"``), arg (``"args", "city"``) or need
    (``"needs", "b"``) in the spec the plan was read from; the nearest known line, else None."""
    for end in range(len(where), 0, -1):
        line = plan.line_of(step_id, *where[:end])
        if line is not None:
            return line
    return plan.line_of(step_id)


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Build a plan from an already-parsed mapping (used by planners and model output too)."""
    plan, problems = _plan_from_dict(data, _Source())
    if problems:
        raise PlanError(problems)
    assert plan is not None
    return plan


def _plan_from_dict(data: Mapping[str, Any], source: _Source) -> tuple[Plan | None, list[Problem]]:
    problems: list[Problem] = []
    for key in data:
        if key not in PLAN_FIELDS and key != SCHEMA_KEY:
            problems.append(
                Problem(
                    f"unknown plan field {key!r}{closest(str(key), PLAN_FIELDS)} (a plan has {', '.join(PLAN_FIELDS)})",
                    code="unknown_field",
                    line=source.line(key),
                )
            )
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list):
        problems.append(Problem("'steps' must be a list of steps", code="syntax", line=source.line("steps")))
        return None, problems
    steps, step_problems = _read_steps(raw_steps, source)
    problems += step_problems
    if problems:
        return None, problems
    text = {key: source.text(data.get(key), key) if key in data else None for key in ("id", "goal", "title")}
    # the steps are validated already (Plan(...) would run each step's validator again)
    plan = Plan.model_construct(
        id=str(text["id"] or "plan"), goal=str(text["goal"] or ""), title=str(text["title"] or ""), steps=steps
    )
    return plan, problems


def steps_from_dicts(raw_steps: list[Any]) -> tuple[list[Step], list[Problem]]:
    """Steps from mappings, with aliases applied and ``$id`` references added to ``needs``."""
    return _read_steps(raw_steps, _Source(), check_depth=True)


def _read_steps(raw_steps: list[Any], source: _Source, *, check_depth: bool = False) -> tuple[list[Step], list[Problem]]:
    """The steps, and every problem with the line of the key or item at fault when ``source`` knows it.

    ``check_depth``: the data did not come through :mod:`planbook.spec.load`, which limits nesting
    (a model's JSON may nest ~1,000 levels; walking that recursively would crash).
    """
    steps: list[Step] = []
    problems: list[Problem] = []
    for index, raw in enumerate(raw_steps):
        if isinstance(raw, Step):
            steps.append(raw.fresh())
            continue
        if isinstance(raw, str):
            raw = {"task": raw}
        if not isinstance(raw, Mapping):
            problems.append(Problem(f"step {index + 1} must be a mapping, got {_short(raw)}", step=str(index + 1),
                                    code="syntax", line=source.line(index)))
            continue
        step = _read_step(raw, index, source, problems, check_depth)
        if step is not None:
            steps.append(step)
    return steps, problems


def _read_step(raw: Mapping[Any, Any], index: int, source: _Source, problems: list[Problem],
               check_depth: bool) -> Step | None:
    position = str(index + 1)
    raw_id = raw.get("id", position)
    if not isinstance(raw_id, str):
        raw_id = source.text(raw_id, index, "id")
    step_id = str(raw_id)
    if raw_id is None or not _PLAIN_ID.match(step_id):
        if raw_id is None or not step_id.strip():
            bad: str | None = "the id is empty: give the step an id, or leave 'id' out to number it by position"
        elif isinstance(raw_id, (Mapping, list)):
            bad = f"the id must be a word or a number, got {_short(raw_id)}"
        else:
            bad = id_problem(step_id)
        if bad is not None:
            code = "empty_id" if bad.startswith("the id is empty") else "bad_id"
            problems.append(Problem(bad, step=position, code=code, line=source.line(index, "id")))
            step_id = position
    source.ids[index] = step_id
    keys: dict[str, Any] = {}  # field name -> the key written (an alias such as 'need')

    def problem(message: str, name: str | None, code: str = "syntax") -> None:
        line = source.line(index, keys.get(name, name)) if name is not None else None
        problems.append(Problem(message, step=step_id, code=code, line=line or source.line(index)))

    fields: dict[str, Any] = {}
    for key, value in raw.items():
        name = ALIASES.get(key, key) if isinstance(key, str) else str(key)
        if name not in STEP_FIELDS:
            problems.append(Problem(
                f"unknown field {key!r}{closest(str(key), STEP_FIELDS)} (a step has {', '.join(STEP_FIELDS)})",
                step=step_id, code="unknown_field", line=source.line(index, key) or source.line(index)))
            continue
        fields[name], keys[name] = value, key
    fields["id"] = step_id

    needs = fields.get("needs") or []
    if isinstance(needs, (str, int, float, bool)):
        needs = [needs if isinstance(needs, str) else source.text(needs, index, keys["needs"])]
    elif isinstance(needs, list):
        needs = [n if isinstance(n, (str, Mapping, list)) else source.text(n, index, keys.get("needs"), i)
                 for i, n in enumerate(needs)]
    else:
        problem(f"'needs' must be a list of step ids, got {_short(needs)}", "needs")
        needs = []
    source.needs[index] = needs
    fields["needs"] = list(dict.fromkeys(str(n) for n in needs))  # Step adds the $id references

    args = fields.get("args") or {}
    if not isinstance(args, Mapping):
        problem(f"'args' must be a mapping of name to value, got {_short(args)}", "args")
        args = {}
    elif check_depth and args and _depth(args) > MAX_ARGS_DEPTH:
        problem(f"args are nested more than {MAX_ARGS_DEPTH} levels deep: flatten them, or load the data in a tool",
                "args", "too_deep")
        args = {}
    fields["args"] = dict(args)

    for text_field in ("task", "expect", "tool", "agent"):
        value = fields.get(text_field)
        if value is None:
            fields.pop(text_field, None)
        elif isinstance(value, (Mapping, list)):
            problem(f"'{text_field}' must be text, got {_short(value)}", text_field)
            fields.pop(text_field)
        elif not isinstance(value, str):
            fields[text_field] = str(source.text(value, index, keys[text_field]))
    policy = fields.get("on_failure")
    if policy is not None and policy not in POLICY_NAMES:
        problem(f"unknown policy {_short(policy)} in on_failure{closest(str(policy), POLICY_NAMES)} "
                f"(choose from {', '.join(POLICY_NAMES)})", "on_failure", "bad_policy")
        fields.pop("on_failure")
    try:
        return Step(**fields)
    except ValidationError as exc:  # what the checks above do not cover: said without pydantic's URL
        for error in exc.errors():
            loc = [str(part) for part in error["loc"]]
            problem(f"{'.'.join(loc) or 'the step'}: {error['msg']} (got {_short(error.get('input'))})",
                    loc[0] if loc else None)
        return None


def _short(value: Any, limit: int = 80) -> str:
    """A value for an error message, cut to one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


register_plan_reader(parse_plan)  # Plan.parse reads through this module without the models importing it
