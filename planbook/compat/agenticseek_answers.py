"""Reading AgenticSeek's answers ("headline + ```json plan"): whole, or not at all.

:func:`parse_answer` reads every ```json block of an answer in one pass (:func:`json_blocks`),
by default or as upstream's ``Tools.load_exec_block`` and ``PlannerAgent.parse_agent_tasks``
do (``faithful``). :mod:`planbook.compat.agenticseek` builds the planner and its review on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.errors import PlanError, Problem
from ..data.models import Plan, Step

__all__ = [
    "AGENTS", "FENCE", "ParsedAnswer", "SeedTask", "json_blocks", "looks_like_answer", "need_report", "parse_answer",
    "plan_from_answer", "seed_task", "task_names",
]

#: The four agents of AgenticSeek's planner.
AGENTS: dict[str, str] = {
    "coder": "writes and runs code",
    "file": "finds, reads and writes files and folders",
    "web": "searches the web and browses pages",
    "casual": "talks, explains and sums up what was done",
}
_OPEN_JSON = re.compile("```json", re.IGNORECASE)
_BARE_PLAN = re.compile(r'^\s*\{\s*"plan"\s*:\s*\[')
FENCE = "```"


@dataclass(frozen=True)
class SeedTask:
    """A task's id and need as upstream keeps them: exactly as written (any JSON type)."""

    id: Any
    need: Any = None
    has_need: bool = False
    #: the task's title as upstream keeps it: its headline, or its ``task`` value (any JSON type)
    title: Any = field(default="", compare=False)


@dataclass
class ParsedAnswer:
    """A planner answer read whole: the steps, their headline titles, and what looks wrong."""

    steps: list[Step]
    #: one title per step: the headlines, or each task when the counts differ (the seed's fallback)
    titles: list[str]
    #: duplicate ids and needs that point forward or nowhere (the plan still parsed)
    report: list[Problem] = field(default_factory=list)
    #: read with ``faithful``: each step's id and need as written, in step order
    seeds: list[SeedTask] = field(default_factory=list)

    def plan(self, *, goal: str = "", plan_id: str = "plan", title: str = "") -> Plan:
        """The steps as a planbook plan (ids as written: planbook's validation refuses duplicates)."""
        return Plan(id=plan_id, goal=goal, title=title, steps=[s.fresh() for s in self.steps])


# ------------------------------------------------------------------- reading
def json_blocks(text: str, *, faithful: bool = False) -> list[str]:
    """The contents of the ```json blocks of ``text``, in order, in one pass.

    Upstream's reading (``Tools.load_exec_block``, ``faithful``): the opening tag is
    ```` ```json ```` exactly (```` ```JSON ```` is not a block), whatever follows it on
    its line is content, and when that first line holds a ``:`` it is dropped as a save
    path (a one-line block keeps it all: it has no second line); the text before the tag
    on its line is taken off every line of the block that starts with it. By default the tag is
    matched in any case and the rest of the opening line is content when it starts the
    JSON (``{`` or ``[``), else an info string (``:path``, ``c``) that is dropped, so a
    block is read however its first line is written.
    """
    blocks: list[str] = []
    start = 0
    while True:
        if faithful:
            found = text.find("```json", start)
            if found == -1:
                break
        else:
            match = _OPEN_JSON.search(text, start)
            if match is None:
                break
            found = match.start()
        begin = found + len("```json")
        end = text.find(FENCE, begin)
        if end == -1:
            break
        content = text[begin:end]
        if faithful:  # upstream takes off what precedes the tag on its line from every line that starts with it
            prefix = text[text.rfind("\n", 0, found) + 1:found]
            if prefix:
                content = "\n".join(line[len(prefix):] if line.startswith(prefix) else line
                                    for line in content.split("\n"))
        first, newline, rest = content.partition("\n")
        if faithful:
            if ":" in first and newline:
                content = rest
        elif first.strip() and not first.lstrip().startswith(("{", "[")):
            content = rest
        blocks.append(content)
        start = end + len(FENCE)
    return blocks


def looks_like_answer(text: str) -> bool:
    """Whether ``text`` is an AgenticSeek answer (a ```json block with "plan") or a bare ``{"plan": [...]}``."""
    return bool(_BARE_PLAN.match(text)) or any('"plan"' in block for block in json_blocks(text))


def _outside_fences(text: str) -> str:
    """``text`` without its fenced blocks (in one pass)."""
    parts = text.split(FENCE)
    return "".join(parts[0::2])


def task_names(text: str, *, faithful: bool = False) -> list[str]:
    """The headlines: lines holding ``##`` or starting with a digit (outside code blocks;
    upstream, ``faithful``, reads the code blocks' lines too, and breaks lines at ``\\n`` only,
    where planbook breaks them wherever ``str.splitlines`` does)."""
    names = []
    lines = text.strip().split("\n") if faithful else _outside_fences(text).splitlines()
    for line in lines:
        line = line.strip()
        if line and ("##" in line or line[0].isdigit()):
            names.append(line)
    return names


def _load(block: str, number: int) -> tuple[Any, Problem | None]:
    try:
        return json.loads(block), None
    except RecursionError:
        return None, Problem(f"json block {number} is nested too deeply to read: write the plan as a flat list "
                             'of tasks ({"plan": [{"agent": ..., "id": ..., "need": [...], "task": ...}]})',
                             code="too_deep")
    except ValueError as exc:
        return None, Problem(f"json block {number} is not valid JSON ({exc})", code="syntax")


def parse_answer(text: str, *, agents: Iterable[str] | Mapping[str, Any] | None = tuple(AGENTS),
                 faithful: bool = False) -> ParsedAnswer:
    """Read an answer (headlines + every ```json plan block, or a bare ``{"plan": [...]}``).

    ``agents`` are the names a task may use (``None``: any; checked later by the run).
    Raises :class:`~planbook.PlanError` with every problem; nothing partial is returned.
    ``faithful`` reads the blocks as upstream does (:func:`json_blocks`) and keeps ids and
    needs as written (:func:`seed_task`).
    """
    try:
        return _parse_answer(text, agents, faithful)
    except RecursionError:  # a task or field nested deeper than Python can walk
        raise PlanError([Problem("the answer is nested too deeply to read: write the plan as a flat list of tasks",
                                 code="too_deep")]) from None


def _parse_answer(text: str, agents: Iterable[str] | Mapping[str, Any] | None, faithful: bool) -> ParsedAnswer:
    # agents match as upstream matches them, by str.lower(): "Web" is web, the ligature in "ﬁle" is not "fi"
    known = {name.lower(): name for name in agents} if agents is not None else None
    if faithful:
        return _parse_seed(text, agents)
    blocks = json_blocks(text)
    if not blocks and _BARE_PLAN.match(text):
        blocks = [text]
    problems: list[Problem] = []
    raw_tasks: list[Any] = []
    for number, block in enumerate(blocks, start=1):
        data, problem = _load(block, number)
        if problem is not None:
            problems.append(problem)
            continue
        if isinstance(data, dict) and "plan" in data:
            if isinstance(data["plan"], list):
                raw_tasks += data["plan"]
            else:
                problems.append(Problem(f"json block {number}: 'plan' must be a list of tasks", code="syntax"))
    if not blocks:
        problems.append(Problem('no ```json block: write the tasks, then the plan as ```json {"plan": [...]}```',
                                code="no_plan"))
    elif not raw_tasks and not problems:
        problems.append(Problem('no "plan" list in the ```json block(s)', code="no_plan"))
    steps = []
    for position, raw in enumerate(raw_tasks, start=1):
        step, step_problems = _task(raw, position, known)
        if step is not None:
            steps.append(step)
        problems += step_problems
    if problems:
        raise PlanError(problems)
    names = task_names(text)
    titles = names if len(names) == len(steps) else [s.task for s in steps]
    return ParsedAnswer(steps=steps, titles=titles, report=need_report(steps))


def _parse_seed(text: str, agents: Iterable[str] | Mapping[str, Any] | None) -> ParsedAnswer:
    """Read as upstream's ``parse_agent_tasks``: block by block, task by task, stopping at the first
    refusal (a :class:`~planbook.PlanError`: upstream returns no tasks and asks again) or raising
    :class:`~planbook.UpstreamCrash` where upstream's own operations raise."""
    from ..data.errors import UpstreamCrash

    blocks = json_blocks(text, faithful=True)
    if not blocks:
        raise PlanError([Problem('no ```json block: write the tasks, then the plan as ```json {"plan": [...]}```',
                                 code="no_plan")])
    lowered = None if agents is None else {name.lower() for name in agents}
    tasks: list[tuple[Any, Any]] = []  # (the task as written, its agent in lower case)
    for number, block in enumerate(blocks, start=1):
        try:
            data = json.loads(block)
        except RecursionError as exc:  # upstream catches only JSONDecodeError
            raise UpstreamCrash(exc, f"reading json block {number} of the plan") from None
        except ValueError as exc:
            raise PlanError([Problem(f"json block {number} is not valid JSON ({exc})", code="syntax")]) from None
        try:  # upstream's steps, in its order: each raises what upstream's raises
            if "plan" not in data:
                continue
            for raw in data["plan"]:
                agent = raw["agent"].lower()
                position = len(tasks) + 1
                if lowered is not None and agent not in lowered:
                    raise PlanError([Problem(f"Agent {raw['agent']} does not exist.", step=str(position),
                                             code="unknown_agent")])
                if "id" not in raw or "task" not in raw:
                    raise PlanError([Problem("Missing field in json plan.", step=str(position), code="missing_field")])
                tasks.append((raw, agent))
        except (TypeError, KeyError, AttributeError) as exc:
            raise UpstreamCrash(exc, f"reading json block {number} of the plan") from exc
    if not tasks:
        raise PlanError([Problem('no "plan" list in the ```json block(s)', code="no_plan")])
    names = task_names(text, faithful=True)
    titles: list[Any] = names if len(names) == len(tasks) else [raw["task"] for raw, _ in tasks]
    known = {name.lower(): name for name in agents} if agents is not None else {}
    steps, seeds = [], []
    for position, ((raw, agent), title) in enumerate(zip(tasks, titles), start=1):
        steps.append(Step(id=f"t{position}", task=str(raw["task"]), agent=known.get(agent, agent)))
        seeds.append(SeedTask(raw["id"], raw.get("need"), "need" in raw, title))
    return ParsedAnswer(steps=steps, titles=[str(t) for t in titles], seeds=seeds)


def seed_task(raw: Any, position: int, known: dict[str, str] | None) -> tuple[tuple[Step, SeedTask] | None, list[Problem]]:
    """One task read as upstream reads it (``faithful``), alone: only an unknown agent or a missing
    ``id``/``task`` refuses it; the id and need are kept as written (any JSON type) in a
    :class:`SeedTask`, never checked. The step's planbook id is its position (``t1``, ``t2``...:
    upstream allows the same id twice) and it has no planbook ``needs``: upstream's need is a
    soft constraint and its tasks run in array order. A task upstream crashes on raises
    :class:`~planbook.UpstreamCrash` (:func:`parse_answer` reads a whole answer)."""
    try:
        parsed = _parse_seed(f"```json\n{json.dumps({'plan': [raw]})}\n```",
                             None if known is None else list(known.values()))
    except PlanError as exc:
        return None, [Problem(p.message, step=str(position) if p.step else None, code=p.code) for p in exc.problems]
    step = parsed.steps[0].model_copy(update={"id": f"t{position}"})
    return (step, parsed.seeds[0]), []


def _task(raw: Any, position: int, known: dict[str, str] | None) -> tuple[Step | None, list[Problem]]:
    where = f"task {position}"
    if not isinstance(raw, dict):
        return None, [Problem(f"{where} must be an object with agent, id, need and task, got {raw!r}", code="syntax")]
    problems = []
    for key in ("agent", "id", "task"):
        value = raw.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            problems.append(Problem(f"{where} has no {key!r}: every task needs agent, id and task", code="missing_field"))
    agent = str(raw.get("agent") or "")
    if agent and known is not None and agent.lower() not in known:
        problems.append(Problem(f"{where}: agent {agent!r} does not exist; the agents are {', '.join(known.values())}",
                                step=str(raw.get("id") or position), code="unknown_agent"))
    need = raw.get("need")
    if need is None or need == "":
        needs: list[str] = []
    elif isinstance(need, (str, int)) and not isinstance(need, bool):
        needs = [n.strip() for n in str(need).split(",") if n.strip()]
    elif isinstance(need, list) and all(isinstance(n, (str, int)) and not isinstance(n, bool) for n in need):
        needs = [str(n) for n in need]
    else:
        problems.append(Problem(f"{where}: 'need' must be a list of task ids, got {need!r}", code="syntax"))
        needs = []
    if problems:
        return None, problems
    name = known[agent.lower()] if known is not None else agent.lower()
    return Step(id=str(raw["id"]).strip(), task=str(raw["task"]), agent=name, needs=needs), []


def need_report(steps: Sequence[Step]) -> list[Problem]:
    """Ids used twice, and needs that point to the step itself, forward, or nowhere.

    AgenticSeek stores answers by id (a repeat overwrites the earlier answer) and runs
    tasks in order, so a need on a later task, or on no task, silently gets nothing.
    """
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for position, step in enumerate(steps, start=1):
        if step.id in first:
            problems.append(Problem(
                f"id {step.id!r} is used by tasks {first[step.id]} and {position}: answers are stored by id, "
                "so the later answer replaces the earlier one for every task that needs it",
                step=step.id, code="duplicate_id"))
        else:
            first[step.id] = position
    earlier: set[str] = set()
    for position, step in enumerate(steps, start=1):
        if position > 1:
            earlier.add(steps[position - 2].id)
        for need in step.needs:
            if need == step.id and need not in earlier:
                problems.append(Problem(f"task {position} needs itself ({need!r})", step=step.id, code="cycle"))
            elif need in earlier:
                continue
            elif need in first:
                problems.append(Problem(
                    f"task {position} needs {need!r}, which comes later (task {first[need]}): tasks run in order, "
                    "so it would get nothing", step=step.id, code="need_forward"))
            else:
                problems.append(Problem(f"task {position} needs {need!r}, but no task has that id",
                                        step=step.id, code="unknown_need"))
    return problems


def plan_from_answer(text: str, *, plan_id: str | None = None, goal: str | None = None) -> Plan:
    """:meth:`Plan.parse` for an AgenticSeek answer; the run checks the agents' names."""
    parsed = parse_answer(text, agents=None)
    return parsed.plan(goal=goal or "", plan_id=plan_id or "plan")
