"""Many small steps on a given executor: ready steps handed over in batches (one task per
lane, not one per call), with every semantic of a parallel run kept — at most ``parallel``
calls at once, ``max_steps`` counted as steps start, nothing new after an abort, results
independent of completion order — and a cluster that loses its last worker mid-step
giving a failed step, not a hang.

Overlap is forced with events and barriers, never with sleeps.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

import planbook
from helpers import events_of
from planbook import Plan, Runner, Status, Step, Toolbox

WAIT = 30.0


class CountingPool(ThreadPoolExecutor):
    """A thread pool that counts the tasks it was given, and the most calls running at once."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="counted")
        self.tasks = 0
        self.lock = threading.Lock()
        self.now = self.peak = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.tasks += 1
        return super().submit(fn, *args, **kwargs)


def counted_tools(pool: CountingPool, calls: list[str], fail: frozenset[str] | set[str] = frozenset()) -> Toolbox:
    box = Toolbox()

    @box.tool
    def work(label: str) -> str:
        """Return the label (fail for the labels the test names)."""
        with pool.lock:
            pool.now += 1
            pool.peak = max(pool.peak, pool.now)
            calls.append(label)
        try:
            if label in fail:
                raise RuntimeError(f"{label} broke")
            return label
        finally:
            with pool.lock:
                pool.now -= 1

    return box


def wide(n: int) -> Plan:
    return Plan(steps=[Step(id=f"s{i}", tool="work", args={"label": f"s{i}"}) for i in range(n)])


def test_ready_steps_go_to_an_executor_in_batches_not_one_task_each() -> None:
    calls: list[str] = []
    with CountingPool(4) as pool:
        result = planbook.run(wide(40), tools=counted_tools(pool, calls), parallel=4, executor=pool, max_steps=40)
    assert (result.status, result.reason) == ("completed", "goal_met"), result.error
    assert result.outputs == {f"s{i}": f"s{i}" for i in range(40)}
    assert sorted(calls) == sorted(f"s{i}" for i in range(40))  # each step ran once
    assert pool.tasks <= 8, f"{pool.tasks} tasks for 40 steps on 4 lanes"
    assert pool.peak <= 4  # a batch runs its calls one after another: never more than parallel at once
    assert result.executions == len(result.history) == 40
    assert [r.execution for r in result.records] == sorted(r.execution for r in result.records)


def test_parallel_one_with_an_executor_runs_one_call_at_a_time_in_plan_order() -> None:
    calls: list[str] = []
    with CountingPool(4) as pool:
        result = planbook.run(wide(10), tools=counted_tools(pool, calls), executor=pool, max_steps=10)
    assert result.ok and pool.peak == 1
    assert calls == [f"s{i}" for i in range(10)]


def test_max_steps_counts_steps_as_they_start_when_batched() -> None:
    calls: list[str] = []
    with CountingPool(3) as pool:
        result = planbook.run(wide(20), tools=counted_tools(pool, calls), parallel=3, executor=pool, max_steps=7)
    assert (result.status, result.reason) == ("failed", "step_budget")
    assert len(calls) == result.executions == len(result.history) == 7
    assert sorted(calls) == [f"s{i}" for i in range(7)]  # the first seven in plan order
    assert [st.status for st in result.plan.steps[7:]] == [Status.not_started] * 13


def test_a_failure_stops_its_batch_and_abort_starts_nothing_new() -> None:
    calls: list[str] = []
    with CountingPool(1) as pool:
        result = planbook.run(wide(6), tools=counted_tools(pool, calls, fail={"s1"}), executor=pool, max_steps=6)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert calls == ["s0", "s1"]  # s2..s5 were in s1's batch: never reached, never started
    assert result.executions == len(result.history) == 2
    steps = {st.id: st for st in result.plan.steps}
    assert steps["s1"].status is Status.failed
    assert all(steps[f"s{i}"].status is Status.not_started and steps[f"s{i}"].attempts == 0 for i in range(2, 6))
    kinds = [e.kind for e in result.events]
    assert "step.started" not in kinds[kinds.index("step.failed"):]


def test_abort_with_lanes_running_lets_them_finish_and_hands_out_nothing_after() -> None:
    calls: list[str] = []
    with CountingPool(2) as pool:
        result = planbook.run(wide(12), tools=counted_tools(pool, calls, fail={"s0"}), parallel=2, executor=pool,
                              max_steps=12)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.executions == len(result.history) == len(calls)
    kinds = [e.kind for e in result.events]
    assert "step.started" not in kinds[kinds.index("step.failed"):]
    assert pool.peak <= 2


def test_steps_a_failed_batch_never_reached_run_later_under_skip() -> None:
    calls: list[str] = []
    with CountingPool(2) as pool:
        result = planbook.run(wide(8), tools=counted_tools(pool, calls, fail={"s2"}), parallel=2, executor=pool,
                              on_failure="skip", max_steps=8)
    assert (result.status, result.reason) == ("completed", "steps_skipped"), result.error
    assert sorted(calls) == sorted(f"s{i}" for i in range(8))  # every step ran exactly once
    assert result.executions == len(result.history) == 8
    assert {k: v for k, v in result.outputs.items()} == {f"s{i}": f"s{i}" for i in range(8) if i != 2}
    assert all(st.attempts == 1 for st in result.plan.steps)


def test_batched_results_flow_to_dependents_whatever_order_lanes_finish_in() -> None:
    """Two lanes: the second finishes first (the first waits for it); the join sees both in plan order."""
    second_done = threading.Event()
    box = Toolbox()

    @box.tool
    def part(label: str) -> str:
        """Return the label; the first lane's calls wait until the second lane is done."""
        if label.startswith("a"):
            assert second_done.wait(WAIT)
        elif label == "b1":
            second_done.set()
        return label

    @box.tool
    def join(parts: list) -> str:  # type: ignore[type-arg]
        """Join the parts."""
        return ",".join(parts)

    steps = [Step(id=i, tool="part", args={"label": i}) for i in ("a0", "a1", "b0", "b1")]
    steps.append(Step(id="j", tool="join", args={"parts": ["$a0", "$a1", "$b0", "$b1"]}))
    with ThreadPoolExecutor(2) as pool:
        result = planbook.run(Plan(steps=steps), tools=box, parallel=2, executor=pool, max_steps=5)
    assert result.ok, result.error
    assert result.outputs["j"] == "a0,a1,b0,b1"
    assert [st.id for st in result.history][-1] == "j"


def test_a_slow_tool_is_sent_one_call_per_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from planbook.engine import dispatch

    calls: list[str] = []
    monkeypatch.setattr(dispatch, "SLOW_CALL", 0.0, raising=False)  # every call counts as slow
    with CountingPool(2) as pool:
        runner = Runner(wide(10), tools=counted_tools(pool, calls), parallel=2, executor=pool, max_steps=10)
        runner.dispatch.slow_tools.add("work")  # as if its last call had been slow already
        result = runner.run()
    assert result.ok and pool.tasks == 10


# ----------------------------------------------------------------- a cluster losing its worker
# module level: a Dask executor ships calls by reference
GONE = threading.Event()


def leave_the_cluster(label: str) -> str:
    """Close the Dask worker running this call, then wait (the call never returns to the cluster)."""
    from distributed import get_worker

    worker = get_worker()
    worker.loop.add_callback(worker.close)
    GONE.wait(WAIT)
    return label


def test_a_worker_that_dies_mid_step_is_a_failed_step_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    from planbook.engine import dispatch

    monkeypatch.setattr(dispatch, "NO_WORKER_GRACE", 0.0, raising=False)
    GONE.clear()
    outcome: dict[str, Any] = {}
    with distributed.Client(processes=False, dashboard_address=None, n_workers=1, threads_per_worker=2,
                            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as client:
        executor = client.get_executor(pure=False)

        def go() -> None:
            outcome["result"] = planbook.run("steps: [{id: lost, tool: leave_the_cluster, args: {label: x}}]",
                                             tools=[leave_the_cluster], executor=executor)

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        thread.join(WAIT)
        GONE.set()
        assert not thread.is_alive(), "the run hung on a cluster with no worker left"
    result = outcome["result"]
    assert (result.status, result.reason) == ("failed", "aborted")
    step = result.plan.step("lost")
    assert step.status is Status.failed
    assert "no worker left" in step.error and "may have run in part" in step.error
    assert result.executions == len(result.history) == 1
    assert events_of(result, "step.failed")[0].step == "lost"


def test_until_stops_a_batch_at_its_step() -> None:
    calls: list[str] = []
    with CountingPool(2) as pool:
        runner = Runner(wide(10), tools=counted_tools(pool, calls), executor=pool, max_steps=10)
        paused = runner.run(until="s3")
        assert paused.status == "paused" and calls == ["s0", "s1", "s2", "s3"]
        assert runner.run().ok and calls == [f"s{i}" for i in range(10)]


def test_a_review_after_each_step_gets_steps_one_at_a_time_on_an_executor() -> None:
    calls: list[str] = []
    seen: list[tuple[str, list[str]]] = []

    def review(goal: str, plan: Plan, step: Step) -> None:
        seen.append((step.id, list(calls)))
        return None

    with CountingPool(2) as pool:
        result = planbook.run(wide(5), tools=counted_tools(pool, calls), executor=pool, after_step=review,
                              max_steps=5)
    assert result.ok
    assert seen == [(f"s{i}", [f"s{j}" for j in range(i + 1)]) for i in range(5)]  # nothing ran ahead of a review
