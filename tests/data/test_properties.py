"""Property tests (hypothesis): validation on random DAGs and cycles, diffs, references,
and the runner's budget and blocking invariants."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Lab
from planbook import Plan, Step, Toolbox, diff_plans, run
from planbook.data.refs import find_refs, resolve
from planbook.spec.validate import find_cycle, plan_problems

SETTINGS = settings(max_examples=100, deadline=None)
TOOLS = Lab().tools


@st.composite
def dags(draw: st.DrawFn) -> list[Step]:
    """Steps whose needs only point to steps earlier in a hidden topological order; the
    list order is shuffled, so needs may point forward in the plan."""
    n = draw(st.integers(1, 12))
    ids = [f"s{i}" for i in range(n)]
    steps = []
    for i, sid in enumerate(ids):
        needs = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=3)) if i else []
        steps.append(Step(id=sid, tool="ok", needs=needs))
    return draw(st.permutations(steps))


@st.composite
def cyclic(draw: st.DrawFn) -> tuple[list[Step], list[str]]:
    """A random DAG plus a cycle through 2 or more of its steps."""
    steps = [s.model_copy(deep=True) for s in draw(dags().filter(lambda s: len(s) >= 2))]
    ring = draw(st.lists(st.sampled_from([s.id for s in steps]), min_size=2, max_size=len(steps), unique=True))
    by_id = {s.id: s for s in steps}
    for here, there in zip(ring, ring[1:] + ring[:1]):
        if there not in by_id[here].needs:
            by_id[here].needs.append(there)
    return steps, ring


def is_real_cycle(path: list[str], steps: list[Step]) -> bool:
    needs = {s.id: set(s.needs) for s in steps}
    return len(path) >= 3 and path[0] == path[-1] and len(set(path[:-1])) == len(path) - 1 and all(
        b in needs[a] for a, b in zip(path, path[1:]))


@SETTINGS
@given(dags())
def test_random_dags_are_valid_and_never_report_a_cycle(steps: list[Step]) -> None:
    assert find_cycle(steps) is None
    assert plan_problems(Plan(steps=steps), TOOLS, []) == []


@SETTINGS
@given(cyclic())
def test_an_injected_cycle_is_always_reported_and_is_a_real_cycle(case: tuple[list[Step], list[str]]) -> None:
    steps, _ = case
    problems = [p for p in plan_problems(Plan(steps=steps), TOOLS, []) if p.code == "cycle"]
    assert len(problems) == 1
    match = re.match(r"dependency cycle: (.*) \(→ reads 'needs'\)", problems[0].message)
    assert match, problems[0].message
    path = match.group(1).split(" → ")
    assert is_real_cycle(path, steps), (path, [(s.id, s.needs) for s in steps])
    assert problems[0].step == path[0]
    assert is_real_cycle(find_cycle(steps), steps)


@SETTINGS
@given(dags(), st.data())
def test_a_self_need_is_reported_as_needing_itself(steps: list[Step], data: st.DataObject) -> None:
    victim = data.draw(st.sampled_from(steps))
    victim.needs.append(victim.id)
    problems = plan_problems(Plan(steps=steps), TOOLS, [])
    assert [(p.step, p.message) for p in problems] == [(victim.id, f"step {victim.id!r} needs itself")]


# ------------------------------------------------------------------ diffs
step_ids = st.sampled_from([str(i) for i in range(1, 9)])
tools = st.sampled_from(["ok", "fetch", "count"])
arg_values = st.one_of(st.integers(-3, 3), st.text("ab$", max_size=3), st.lists(st.integers(0, 2), max_size=2))


@st.composite
def plans(draw: st.DrawFn, revision: int = 1) -> Plan:
    ids = draw(st.lists(step_ids, unique=True, max_size=8))
    steps = []
    for sid in ids:
        if draw(st.booleans()):
            steps.append(Step(id=sid, agent=draw(st.sampled_from(["writer", "analyst"])), task=draw(st.sampled_from(["", "a", "b"]))))
        else:
            args = draw(st.dictionaries(st.sampled_from(["x", "y"]), arg_values, max_size=2))
            steps.append(Step(id=sid, tool=draw(tools), args=args, task=draw(st.sampled_from(["", "a"]))))
    return Plan(steps=steps, revision=revision)


@SETTINGS
@given(plans())
def test_the_diff_of_a_plan_with_itself_is_empty(plan: Plan) -> None:
    diff = diff_plans(plan, plan)
    assert diff.empty and (diff.removed, diff.added, diff.revised, diff.steps) == ([], [], [], {})
    again = plan.copy_plan()
    for step in again.steps:  # run state (status, results, notes) is not part of what a step does
        step.status, step.result, step.notes = "completed", object(), "ran"
    assert diff_plans(plan, again).empty


@SETTINGS
@given(plans(), plans(revision=2))
def test_removed_added_revised_partition_the_changes(old: Plan, new: Plan) -> None:
    diff = diff_plans(old, new, reason="because")
    old_by, new_by = {s.id: s for s in old.steps}, {s.id: s for s in new.steps}
    lists = [diff.removed, diff.added, diff.revised]
    for ids in lists:
        assert len(ids) == len(set(ids))
    assert not (set(diff.removed) & set(diff.added) or set(diff.removed) & set(diff.revised)
                or set(diff.added) & set(diff.revised))
    for sid in old_by.keys() | new_by.keys():
        if sid not in new_by:
            expected = diff.removed
        elif sid not in old_by:
            expected = diff.added
        elif old_by[sid].signature() != new_by[sid].signature():
            expected = diff.revised
        else:
            expected = None
        hits = [ids for ids in lists if sid in ids]
        assert hits == ([expected] if expected is not None else []), sid
    assert set(diff.steps) == set(diff.removed) | set(diff.added) | set(diff.revised)
    assert (diff.from_revision, diff.to_revision, diff.reason) == (1, 2, "because")


@SETTINGS
@given(st.dictionaries(st.sampled_from(["a", "b"]), arg_values, max_size=2))
def test_arg_order_does_not_make_a_revision(args: dict) -> None:
    forward = Plan(steps=[Step(id="1", tool="ok", args=args)])
    backward = Plan(steps=[Step(id="1", tool="ok", args=dict(reversed(list(args.items()))))])
    assert diff_plans(forward, backward).empty


# ------------------------------------------------------------------ references
ref_ids = st.sampled_from(["1", "10", "11", "100", "a", "a1", "a_b"])
segments = st.lists(st.one_of(st.tuples(st.just("text"), st.text("xy 1$", max_size=4).map(lambda t: t.replace("$", "$$"))),
                              st.tuples(st.just("ref"), ref_ids)), max_size=6)


@SETTINGS
@given(segments)
def test_inline_refs_resolve_to_exactly_their_own_result(parts: list[tuple[str, str]]) -> None:
    results = {sid: f"<{sid}>" for sid in ["1", "10", "11", "100", "a", "a1", "a_b"]}
    template = "".join(value if kind == "text" else "${" + value + "}" for kind, value in parts)
    expected = "".join(value.replace("$$", "$") if kind == "text" else results[value] for kind, value in parts)
    assert resolve(template, results) == expected
    assert set(find_refs(template)) <= {value for kind, value in parts if kind == "ref"}


# ------------------------------------------------------------------ the runner
@settings(max_examples=50, deadline=None)
@given(dags(), st.sets(st.integers(0, 11)), st.integers(0, 14))
def test_runner_budget_and_blocking_invariants(steps: list[Step], failing: set[int], max_steps: int) -> None:
    box = Toolbox()
    calls: list[str] = []

    @box.tool
    def work(name: str) -> str:
        calls.append(name)
        if int(name[1:]) in failing:
            raise RuntimeError(f"{name} failed")
        return name

    plan = Plan(steps=[Step(id=s.id, tool="work", args={"name": s.id}, needs=s.needs) for s in steps])
    result = run(plan, tools=box, on_failure="skip", max_steps=max_steps)
    assert result.executions == len(calls) == len(result.history) <= max_steps
    statuses = {s.id: s.status.value for s in result.plan.steps}
    for s in result.plan.steps:
        if statuses[s.id] == "blocked":
            assert any(statuses[n] in ("skipped", "blocked") for n in s.needs)
        if statuses[s.id] in ("completed", "skipped"):
            assert all(statuses[n] == "completed" for n in s.needs)
            assert calls.count(s.id) == 1
    if result.reason == "step_budget":
        assert result.executions == max_steps and "not_started" in statuses.values()
    else:
        assert result.status == "completed" and "not_started" not in statuses.values()
        assert result.reason == ("goal_met" if all(v == "completed" for v in statuses.values()) else "steps_skipped")
        assert result.outputs == {sid: sid for sid, v in statuses.items() if v == "completed"}
