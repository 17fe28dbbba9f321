"""The scheduler: ready steps in plan order, serial runs in today's order, blocking through
any number of levels, and long plans that must not recurse or go quadratic."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Lab, events_of, step_trace
from planbook import Plan, Runner, Status, Step, Toolbox, run
from planbook.engine.scheduler import Scheduler
from planbook.spec.validate import find_cycle, plan_problems

SETTINGS = settings(max_examples=80, deadline=None)


def plan_of(*steps: tuple[str, list[str]], tool: str = "ok") -> Plan:
    return Plan(steps=[Step(id=sid, tool=tool, needs=needs) for sid, needs in steps])


@contextmanager
def shallow_stack(room: int = 120) -> Iterator[None]:
    """Allow only ``room`` frames beyond the current depth: a recursion over a long plan fails here."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + room)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# ------------------------------------------------------------------ the ready set
def test_ready_steps_are_handed_out_in_plan_order() -> None:
    # c needs d, which is listed after it; a and b are independent; e needs a and b
    plan = plan_of(("c", ["d"]), ("a", []), ("e", ["a", "b"]), ("b", []), ("d", []))
    scheduler = Scheduler(plan, lambda step, dead: None)
    assert [scheduler.take().id for _ in range(3)] == ["a", "b", "d"]
    assert scheduler.take() is None  # c and e wait for their needs
    for sid in ("d", "a"):  # d completes first, though a is listed earlier
        plan.step(sid).status = Status.completed
        scheduler.completed(plan.step(sid))
    assert scheduler.peek().id == "c" and scheduler.take().id == "c"
    plan.step("b").status = Status.completed
    scheduler.completed(plan.step("b"))
    assert scheduler.take().id == "e" and scheduler.take() is None


def test_a_step_put_back_is_ready_again_at_its_place_in_plan_order() -> None:
    plan = plan_of(("a", []), ("b", []), ("c", []))
    scheduler = Scheduler(plan, lambda step, dead: None)
    first = scheduler.take()
    first.status = Status.in_progress
    assert scheduler.peek().id == "b"
    first.status = Status.not_started  # an interrupted call or a retry
    scheduler.again(first)
    assert [scheduler.take().id for _ in range(3)] == ["a", "b", "c"]


def naive_serial_order(steps: list[Step], failing: set[str]) -> list[str]:
    """The runner's order before the scheduler existed: each time, the first step of the
    plan that has not started and whose needs all completed (skip on failure)."""
    status = {s.id: "todo" for s in steps}
    order: list[str] = []
    while True:
        changed = True
        while changed:  # block what needs a step that will never complete
            changed = False
            for s in steps:
                if status[s.id] == "todo" and any(status[n] in ("skipped", "blocked") for n in s.needs):
                    status[s.id], changed = "blocked", True
        ready = [s for s in steps if status[s.id] == "todo" and all(status[n] == "done" for n in s.needs)]
        if not ready:
            return order
        step = ready[0]
        order.append(step.id)
        status[step.id] = "skipped" if step.id in failing else "done"


@st.composite
def dags_with_failures(draw: st.DrawFn) -> tuple[list[Step], set[str]]:
    n = draw(st.integers(1, 14))
    ids = [f"s{i}" for i in range(n)]
    steps = []
    for i, sid in enumerate(ids):
        needs = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=3)) if i else []
        steps.append(Step(id=sid, tool="ok", needs=needs))
    steps = draw(st.permutations(steps))
    failing = set(draw(st.lists(st.sampled_from(ids), unique=True, max_size=3)))
    return [s.model_copy(update={"tool": "fail" if s.id in failing else "ok"}) for s in steps], failing


@SETTINGS
@given(dags_with_failures())
def test_a_serial_run_keeps_todays_order_exactly(case: tuple[list[Step], set[str]]) -> None:
    steps, failing = case
    lab = Lab()
    result = run(Plan(steps=steps), tools=lab.tools, on_failure="skip", max_steps=100)
    assert [sid for sid, _ in step_trace(result)] == naive_serial_order(steps, failing)
    assert result.executions == len(result.history) == len(lab.calls)


# ------------------------------------------------------------------ blocking
def test_blocking_propagates_through_several_levels_with_events() -> None:
    lab = Lab()
    # a fails → b → c → d (a chain) and x needs b and y; y is independent; z needs c and y
    plan = Plan(steps=[
        Step(id="a", tool="fail"),
        Step(id="b", tool="ok", needs=["a"]),
        Step(id="y", tool="ok"),
        Step(id="c", tool="ok", needs=["b"]),
        Step(id="x", tool="ok", needs=["b", "y"]),
        Step(id="d", tool="ok", needs=["c"]),
        Step(id="z", tool="ok", needs=["y", "c"]),
    ])
    result = run(plan, tools=lab.tools, on_failure="skip")
    status = {s.id: s.status for s in result.plan.steps}
    assert status == {"a": Status.skipped, "b": Status.blocked, "y": Status.completed, "c": Status.blocked,
                      "x": Status.blocked, "d": Status.blocked, "z": Status.blocked}
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    blocked = {e.step: e.data["because"] for e in events_of(result, "step.blocked")}
    assert blocked == {"b": ["a"], "c": ["b"], "x": ["b"], "d": ["c"], "z": ["c"]}
    assert len(events_of(result, "step.blocked")) == 5  # each step blocked once
    assert result.plan.step("d").notes == "blocked: needs c, which did not complete"
    assert result.plan.step("z").notes == "blocked: needs c, which did not complete"
    assert [c for c in lab.calls if c[0] == "ok"] == [("ok", "ok")]  # only y ran
    assert result.executions == len(result.history) == 2


def test_blocking_a_long_chain_does_not_recurse() -> None:
    lab = Lab()
    steps = [Step(id="s0", tool="fail")] + [Step(id=f"s{i}", tool="ok", needs=[f"s{i - 1}"]) for i in range(1, 3000)]
    with shallow_stack():
        result = run(Plan(steps=steps), tools=lab.tools, on_failure="skip")
    assert result.plan.counts()[Status.blocked] == 2999
    assert len(events_of(result, "step.blocked")) == 2999


# ------------------------------------------------------------------ long plans
def reversed_chain(n: int) -> list[Step]:
    """s0 ← s1 ← ... ← s(n-1), listed last-first: every need points forward in the plan."""
    return [Step(id=f"s{i}", tool="add", args={"a": f"$s{i - 1}", "b": 1} if i else {"a": 0, "b": 1})
            for i in reversed(range(n))]


def test_a_1000_step_chain_listed_last_first_validates_and_runs() -> None:
    box = Toolbox()
    seen: list[int] = []

    @box.tool
    def add(a: int, b: int) -> int:
        """Add, and remember the order."""
        seen.append(a)
        return a + b

    plan = Plan(steps=reversed_chain(1000))
    assert plan.step("s999").needs == ["s998"]  # the references made the dependencies
    with shallow_stack():
        result = Runner(plan, tools=box, max_steps=1000).run()
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert seen == list(range(1000)) and result.outputs["s999"] == 1000
    assert result.executions == len(result.history) == 1000


@pytest.mark.slow
def test_checking_a_100000_step_plan_listed_last_first_is_not_recursive() -> None:
    n = 100_000
    steps = [Step(id=f"s{i}", tool="ok", needs=[f"s{i - 1}"] if i else []) for i in reversed(range(n))]
    plan = Plan(steps=steps)
    tools = Lab().tools
    with shallow_stack():
        assert find_cycle(steps) is None
        assert plan_problems(plan, tools, []) == []
        scheduler = Scheduler(plan, lambda step, dead: None)
        assert scheduler.take().id == "s0" and scheduler.take() is None
    # the same plan closed into a cycle is reported, still without recursion
    steps[-1] = Step(id="s0", tool="ok", needs=[f"s{n - 1}"])
    with shallow_stack():
        cycle = find_cycle(steps)
    assert cycle is not None and len(cycle) == n + 1 and cycle[0] == cycle[-1]
