"""What a finished run keeps: no per-step duplicates of bookkeeping, no second view of the
plan in the Runner, and copies that still behave as independent steps.

(The figure itself, bytes per step, is printed by benchmarks/engine_overhead.py.)
"""

from __future__ import annotations

import copy

import planbook
from planbook import Plan, Runner, Status, Step, Toolbox


def noop(x: int) -> int:
    """Return x."""
    return x


def linear(n: int) -> Plan:
    return Plan(steps=[Step(id=f"s{i}", tool="noop", args={"x": i}, needs=[f"s{i - 1}"] if i else [])
                       for i in range(n)])


def test_steps_of_a_run_share_one_set_of_field_names_instead_of_a_copy_each() -> None:
    result = planbook.run(linear(50), tools=Toolbox([noop]), max_steps=50)
    assert result.ok
    sets = {id(s.__pydantic_fields_set__) for s in result.history + result.plan.steps}
    assert len(sets) <= 2, f"{len(sets)} sets of field names for {len(result.history)} executions"


def test_a_finished_runner_keeps_no_index_of_its_plan() -> None:
    runner = Runner(linear(20), tools=Toolbox([noop]), max_steps=20)
    result = runner.run()
    assert result.ok
    assert runner.scheduler.by_id == {} and runner.scheduler.position == {} and runner.scheduler.dependents == {}
    assert runner.advance() is None and runner.run().ok  # a finished runner still answers


def test_a_paused_runner_keeps_its_index_and_continues() -> None:
    runner = Runner(linear(6), tools=Toolbox([noop]), max_steps=6)
    paused = runner.run(until="s2")
    assert paused.status == "paused" and len(runner.scheduler.by_id) == 6
    assert runner.run().outputs == {f"s{i}": i for i in range(6)}


def test_shared_copies_still_change_one_at_a_time() -> None:
    result = planbook.run(linear(3), tools=Toolbox([noop]), max_steps=3)
    first, second = result.history[0], result.history[1]
    first.expect = "looked at"
    first.status = "failed"  # type: ignore[assignment] - a string is turned into the enum
    assert first.status is Status.failed and "expect" in first.model_fields_set
    assert "expect" not in second.model_fields_set and second.status is Status.completed
    again = second.model_copy(update={"task": "copied"})
    assert again.task == "copied" and "task" in again.model_fields_set and "task" not in second.model_fields_set
    deep = copy.deepcopy(second)
    deep.task = "deep"
    assert second.task == "" and "task" not in second.model_fields_set
    assert result.plan.steps[2].model_dump(exclude_unset=True)["id"] == "s2"
    assert result.history[2].model_dump(exclude_unset=True)["id"] == "s2"


def test_a_finished_run_keeps_one_object_per_execution_not_a_copy_beside_the_plan() -> None:
    result = planbook.run(linear(5), tools=Toolbox([noop]), max_steps=5)
    assert all(h is p for h, p in zip(result.history, result.plan.steps))


def test_the_past_is_not_rewritten_by_a_retry_or_by_edits_while_paused() -> None:
    box = Toolbox()
    tries = {"n": 0}

    @box.tool
    def flaky() -> str:
        """Fail once, then work."""
        tries["n"] += 1
        if tries["n"] == 1:
            raise RuntimeError("first try fails")
        return "ok"

    box.tool(noop)
    plan = Plan(steps=[Step(id="f", tool="flaky"), Step(id="n", tool="noop", args={"x": 1}),
                       Step(id="m", tool="noop", args={"x": 2})])
    runner = Runner(plan, tools=box, on_failure=["retry", "abort"], max_steps=5)
    paused = runner.run(until="n")
    assert paused.status == "paused"
    first, second = runner.state.history[0], runner.state.history[1]
    assert (first.status, second.status) == (Status.failed, Status.completed) and first.error
    assert all(h is not p for h in runner.state.history for p in runner.plan.steps)  # copies while paused
    runner.plan.step("n").notes = "edited by hand while paused"
    result = runner.run()
    assert result.ok
    assert [h.status for h in result.history] == [Status.failed, Status.completed, Status.completed, Status.completed]
    assert result.history[0].error and "first try fails" in result.history[0].error
    assert result.history[2].notes == ""  # the edit came after that execution
