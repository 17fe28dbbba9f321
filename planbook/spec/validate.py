"""Check a plan before anything runs: a bad plan is an error, never half a plan."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from ..data.errors import PlanError, Problem, closest
from ..data.ids import id_problem
from ..data.models import Plan, Status, Step
from ..data.refs import args_with_refs, find_refs
from ..outbound import mask_text, plan_secret_values, remember
from ..outbound.redact import named_secrets
from .formats import field_line
from .reftypes import PLAIN_ID, UNKNOWN, Produced, misfit, type_name


class Tool(Protocol):
    """What checking a plan needs of a tool (:class:`planbook.workers.tools.Tool` is one): the
    problems of binding a step's args to its signature. A protocol, so plan formats sit below
    the workers that implement it."""

    def validate(self, args: Mapping[str, Any], *, skip: Iterable[str] = ()) -> list[str]: ...

    def arg_type(self, name: str) -> Any:
        """The declared type of an argument (``Any`` when not said)."""
        ...

    @property
    def returns(self) -> Any:
        """The declared type of the tool's result (``Any`` when not said)."""
        ...


def plan_problems(
    plan: Plan,
    tools: Mapping[str, Tool],
    agents: Collection[str],
    *,
    known_ids: Collection[str] = (),
) -> list[Problem]:
    """Every problem with ``plan``; empty when it may run.

    ``known_ids`` are ids outside ``plan.steps`` that ``needs`` may name (completed
    steps kept by a replan, when a planner's new steps are checked on their own).
    """
    return _check(plan, tools, agents, known_ids)[0]


def _check(
    plan: Plan, tools: Mapping[str, Tool], agents: Collection[str], known_ids: Collection[str]
) -> tuple[list[Problem], dict[str, int]]:
    """The plan's problems, and each step id's first position in ``plan.steps`` (the index
    checking needs anyway: with no problems it is the scheduler's, see :func:`checked_positions`)."""
    problems: list[Problem] = []

    def add(message: str, step: Step | None, code: str, *where: str) -> None:
        """``where``: the field (``"needs"``, ``"args", name``) whose line the error quotes."""
        line = field_line(plan, step.id, *where) if step is not None else None
        problems.append(Problem(message, step=step.id if step is not None else None, code=code, line=line))

    if not plan.steps:
        add("the plan has no steps: add at least one (a tool call or a task for an agent)", None, "empty")
        return problems, {}

    steps = plan.steps
    step_ids = [s.id for s in steps]
    # each id's first position; when no id repeats (the usual case) built in one C loop, not
    # one insertion per step (at 100,000 steps a table of 5 MB, grown eight times)
    first: dict[str, int] = dict(zip(step_ids, range(len(step_ids))))
    unique = len(first) == len(step_ids)
    if not unique:
        first = {}
    repeats: dict[str, int] = {}
    for i, sid in enumerate(step_ids):
        if not sid.strip():
            add("a step id must not be empty", steps[i], "empty_id")
        elif PLAIN_ID.match(sid) is None and (bad := id_problem(sid)) is not None:
            add(bad, steps[i], "bad_id", "id")
        if unique:
            continue
        step = steps[i]
        if step.id in first:
            add(f"duplicate step id {step.id!r}: every step needs its own id", step, "duplicate_id")
            n = repeats[step.id] = repeats.get(step.id, 0) + 1
            later = plan.repeat_lines(step.id)
            if len(later) >= n:  # point at the repeat, not at the first use of the id
                problems[-1] = replace(problems[-1], line=later[n - 1])
        else:
            first[step.id] = i

    # no second table of every id (at 100,000 steps a set of 4 MB, built and hashed into
    # for each need): the outside ids are looked up on their own, and the union is made
    # only to suggest a close id for a wrong one
    known = set(known_ids) if known_ids else _NOTHING

    producers: dict[tuple[str, bool], Produced] = {}  # one per tool (and failure policy), not one per reference

    def produced(ref: str) -> Produced:
        """What step ``ref``'s result may be: its tool's declared type, when the plan says which tool."""
        at = first.get(ref)
        maker = steps[at] if at is not None else None
        if maker is None or not maker.tool or maker.status is Status.completed:  # a kept result is what it is
            return UNKNOWN
        key = (maker.tool, maker.on_failure in (None, "continue"))
        made = producers.get(key)
        if made is None:
            tool = tools.get(maker.tool)
            made = producers[key] = UNKNOWN if tool is None else Produced(tool.returns, *key)
        return made
    ids: set[str] | None = None
    refs_of: list[list[str]] = []  # each step's references, found once (cycles use them too)
    #: every need listed before its step (the usual order): then there is no cycle, and no graph to search
    ordered = unique
    for i, step in enumerate(plan.steps):
        refs = find_refs(step.args)
        refs_of.append(refs)
        needs = step.needs
        # a reference is a need: one problem per mistake (a lone need cannot repeat)
        for need in (needs if not refs and len(needs) < 2 else dict.fromkeys(needs + refs)):
            if (need in first or need in known) and need != step.id:
                if ordered and first.get(need, -1) >= i:
                    ordered = False
                continue
            if ids is None:  # the ids a close match is looked for in, made at the first wrong need
                ids = first.keys() | known
            # the line to quote: the arg holding the reference, else the need as written
            where = ("args", _arg_with_ref(step, need)) if need in refs else ("needs", need)
            if need == step.id:
                add(f"step {step.id!r} needs itself", step, "cycle", *where)
            elif need in refs and _under_secret_name(step, need):
                # a password that starts with $ reads as a reference: the message does not quote it
                add(f"argument {where[-1]!r} is named like a secret and its value starts with $, so it reads as a "
                    f"reference to a step, and no step has that id{closest(need, ids)}: write $$ for a literal $ "
                    "(its value is not shown)", step, "unknown_ref", *where)
            elif need in refs:
                add(
                    f"args refer to ${need}, but no step has that id{closest(need, ids)} (write $$ for a literal $)",
                    step,
                    "unknown_ref",
                    *where,
                )
            else:
                add(f"needs {need!r}, but no step has that id{closest(need, ids)}", step, "unknown_need", *where)

        if step.tool and step.agent:
            add(f"names both tool {step.tool!r} and agent {step.agent!r}; a step has exactly one", step, "tool_and_agent")
        elif not step.tool and not step.agent:
            add("names neither a tool nor an agent (Markdown: start the line with [AGENT])", step, "no_executor")
        elif step.tool:
            tool = tools.get(step.tool)
            if tool is None:
                add(f"unknown tool {step.tool!r}{closest(step.tool, tools)} (known tools: {_names(tools)})", step,
                    "unknown_tool", "tool")
            elif step.status is not Status.completed:  # a completed step never calls its tool again (a fork's kept step)
                with_refs = args_with_refs(step.args) if refs else _NOTHING
                for message in tool.validate(step.args, skip=with_refs):
                    named = _ARG_NAME.search(message)
                    add(message, step, "bad_args", *(("args", named.group(1)) if named else ("args",)))
                for name in (n for n in step.args if n in with_refs) if with_refs else ():
                    # what a reference gives is often known now: refuse one that cannot fit
                    found = misfit(step.args[name], tool.arg_type(name), produced)
                    if found is not None:
                        add(f"argument {name!r} of tool {step.tool!r} expects {type_name(tool.arg_type(name))}, but "
                            f"{found.gives}, which cannot be {type_name(found.expected)}: the step would fail when "
                            f"called, after the steps before it ran. {_capital(found.advice)}",
                            step, "ref_type", "args", name)
        else:
            assert step.agent is not None
            if step.agent not in agents:
                add(
                    f"unknown agent {step.agent!r}{closest(step.agent, agents)} (known agents: {_names(agents)})",
                    step,
                    "unknown_agent",
                    "agent",
                )
            if step.args:
                add("an agent step takes no args (put what it needs in its task and needs)", step, "bad_args", "args")

    cycle = None if ordered else find_cycle(plan.steps, refs_of)
    if cycle:
        starts = next(s for s in plan.steps if s.id == cycle[0])
        add(f"dependency cycle: {' → '.join(cycle)} (→ reads 'needs'); remove one of these needs", starts, "cycle")
    if problems:
        # a refused plan is an error before any run (or its gate) exists: its secret-named values are
        # secrets of the process before a message can quote them (a mistyped one echoed by a type check)
        remember(plan_secret_values(plan.steps, known_ids))
        problems = [replace(p, message=mask_text(p.message)) for p in problems]  # each one may be listed alone
    return problems, first


_NOTHING: frozenset[str] = frozenset()

#: the arg a tool's validation message is about ("argument 'city' of tool ...")
_ARG_NAME = re.compile(r"argument '([^']+)'")


def _under_secret_name(step: Step, ref: str) -> bool:
    """True when ``$ref`` is written under a secret-named key of ``step``'s args (``password: $x``)."""
    return any(ref in find_refs(value) for value in named_secrets(step.args)[1])


def _arg_with_ref(step: Step, ref: str) -> str:
    """The first arg whose value refers to ``$ref`` (its line is the one to quote)."""
    return next((name for name, value in step.args.items() if ref in find_refs(value)), "")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _names(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) if names else "none registered"


def find_cycle(steps: list[Step], refs_of: list[list[str]] | None = None) -> list[str] | None:
    """A cycle in ``needs`` as ``[a, b, ..., a]`` (a needs b ...), or None. Self-needs are reported separately.

    ``refs_of``: each step's ``$id`` references, when the caller has found them already.
    A plan whose every need is listed before the step (the usual order) has no cycle:
    one pass proves it. Otherwise ``graphlib`` finds the cycle without recursion, so a
    chain of any length in any listing order is checked in linear time.
    """
    if refs_of is None:
        refs_of = [find_refs(s.args) for s in steps]
    position: dict[str, int] = {}
    for i, s in enumerate(steps):
        position.setdefault(s.id, i)
    if len(position) == len(steps) and all(position.get(n, -1) < i for i, s in enumerate(steps) for n in s.needs) \
            and all(position.get(n, -1) < i for i, refs in enumerate(refs_of) for n in refs):
        return None  # every dependency points back up the list: no way round
    import graphlib

    graph: dict[str, list[str]] = {}
    for s, refs in zip(steps, refs_of):
        graph.setdefault(s.id, []).extend(
            n for n in dict.fromkeys(s.needs + refs) if n != s.id and n in position
        )
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle: list[str] = list(exc.args[1])  # each node is a need of the one after it
        cycle.reverse()
        # the ring starts at its step listed first (one lookup per node: a long cycle stays linear)
        start = min(range(len(cycle) - 1), key=lambda i: position[cycle[i]])
        ring = cycle[start:-1] + cycle[:start]
        return ring + [ring[0]]
    return None


def validate_plan(
    plan: Plan, tools: Mapping[str, Tool], agents: Collection[str], *, known_ids: Collection[str] = ()
) -> Plan:
    """Raise :class:`PlanError` listing every problem, or return the plan unchanged."""
    checked_positions(plan, tools, agents, known_ids=known_ids)
    return plan


def checked_positions(
    plan: Plan, tools: Mapping[str, Tool], agents: Collection[str], *, known_ids: Collection[str] = ()
) -> dict[str, int]:
    """Raise :class:`PlanError` as :func:`validate_plan` does, else each step id's position.

    Checking indexes the ids anyway; the runner's scheduler takes this index as its own
    (``Scheduler(plan, ..., position=...)``) rather than hashing every id of a long plan again.
    """
    problems, positions = _check(plan, tools, agents, known_ids)
    if problems:
        raise PlanError(problems)
    return positions


def check_replacement(kept: list[Step], proposed: list[Step]) -> tuple[list[Step], list[Problem]]:
    """Drop proposed steps that repeat a kept (done) step; flag ones that would rewrite it.

    Completed steps are never rewritten by a replan: this is enforced here, in code,
    whatever the planner (or a model) answered.
    """
    done = {s.id: s for s in kept}
    new_steps: list[Step] = []
    problems: list[Problem] = []
    for step in proposed:
        old = done.get(step.id)
        if old is None:
            new_steps.append(step)
        elif old.signature() != step.signature():
            problems.append(
                Problem(
                    f"the replan would rewrite step {step.id!r}, which is already {old.status}; "
                    "completed steps are kept as they are: give new work a new id",
                    step=step.id,
                    code="rewrites_done_step",
                )
            )
    return new_steps, problems

