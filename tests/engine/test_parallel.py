"""Parallel branches: at most N steps at once, failures and policies with steps in flight,
exact budgets, results independent of completion order, the timeline, and every way in
(``run``, ``Runner``, any ``concurrent.futures.Executor``, Dask, the CLI and the magic).

Overlap is forced with barriers and events, never with sleeps: a barrier of N parties
only opens when N calls run at the same time, so a run that is less parallel than it
should be fails (after ``WAIT`` seconds) instead of passing by luck.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import planbook
from helpers import events_of
from planbook import Plan, Runner, Status, Step, Toolbox

#: how long a barrier or event waits before the test gives up (only reached when the engine is wrong)
WAIT = 30.0


class Gauge:
    """How many calls run at once, counted under a lock, and the most ever seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.workers: list[str] = []

    @contextmanager
    def running(self) -> Iterator[None]:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.workers.append(threading.current_thread().name)
        try:
            yield
        finally:
            with self.lock:
                self.now -= 1


def meeting_tools(parties: int, gauge: Gauge) -> Toolbox:
    """``meet`` waits at a barrier of ``parties`` calls; ``ok`` just returns its label."""
    barrier = threading.Barrier(parties, timeout=WAIT)
    box = Toolbox()

    @box.tool
    def meet(label: str) -> str:
        """Return the label once ``parties`` calls are running together."""
        with gauge.running():
            barrier.wait()
            return label

    @box.tool
    def ok(label: str = "ok", parts: list | None = None) -> str:
        """Return the label (and the parts it was given)."""
        with gauge.running():
            return label if parts is None else f"{label}({','.join(map(str, parts))})"

    return box


def fan_out(width: int, tool: str = "meet") -> Plan:
    """root → ``width`` branches → join (which gets every branch's result, in plan order)."""
    steps = [Step(id="root", tool="ok", args={"label": "root"})]
    steps += [Step(id=f"b{i}", tool=tool, args={"label": f"b{i}"}, needs=["root"]) for i in range(width)]
    steps.append(Step(id="join", tool="ok", args={"label": "join", "parts": [f"$b{i}" for i in range(width)]}))
    return Plan(goal="fan out and join", steps=steps)


def joined(width: int) -> str:
    return f"join({','.join(f'b{i}' for i in range(width))})"


# ------------------------------------------------------------------ at most N at once
@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("entry", ["run", "Runner"])
def test_concurrency_reaches_n_and_never_goes_above(n: int, entry: str) -> None:
    gauge = Gauge()
    box = meeting_tools(n, gauge)
    # 3N independent steps: each barrier round needs exactly N of them running together
    plan = Plan(steps=[Step(id=f"s{i}", tool="meet", args={"label": f"s{i}"}) for i in range(3 * n)])
    if entry == "run":
        result = planbook.run(plan, tools=box, parallel=n, max_steps=3 * n)
    else:
        result = Runner(plan, tools=box, parallel=n, max_steps=3 * n).run()
    assert (result.status, result.reason) == ("completed", "goal_met"), result.error
    assert gauge.peak == n
    assert result.outputs == {f"s{i}": f"s{i}" for i in range(3 * n)}
    assert result.executions == len(result.history) == len(result.timeline.executions) == 3 * n
    started = events_of(result, "run.started")[0]
    assert started.data["parallel"] == n


def test_parallel_never_runs_a_step_before_its_needs() -> None:
    gauge = Gauge()
    box = meeting_tools(4, gauge)
    result = planbook.run(fan_out(4), tools=box, parallel=8)
    assert result.ok and result.outputs["join"] == joined(4)
    assert gauge.peak == 4  # root alone, the four branches together, join alone
    order = [s.id for s in result.history]
    assert order[0] == "root" and order[-1] == "join" and sorted(order[1:5]) == ["b0", "b1", "b2", "b3"]


def test_a_serial_run_is_the_default_and_runs_on_the_main_thread() -> None:
    gauge = Gauge()
    result = planbook.run(fan_out(3, tool="ok"), tools=meeting_tools(3, gauge))
    assert result.ok and gauge.peak == 1
    assert set(gauge.workers) == {threading.main_thread().name}
    assert [s.id for s in result.history] == ["root", "b0", "b1", "b2", "join"]


def test_events_and_heartbeats_stay_on_the_runners_thread() -> None:
    threads: set[str] = set()
    gauge = Gauge()
    runner = Runner(fan_out(4), tools=meeting_tools(4, gauge), parallel=4,
                    on_event=lambda event: threads.add(threading.current_thread().name))
    runner.add_heartbeat(lambda: threads.add(threading.current_thread().name), interval=0.01)
    result = runner.run()
    assert result.ok and gauge.peak == 4
    assert threads == {threading.main_thread().name}
    assert all(name.startswith("planbook-worker") for name in gauge.workers)


def test_results_do_not_depend_on_completion_order() -> None:
    """Branches finish last-first (each waits for the next one to have finished)."""
    done = {i: threading.Event() for i in range(4)}
    box = Toolbox()

    @box.tool
    def part(i: int) -> str:
        """Finish only after part i+1 finished."""
        if i + 1 in done:
            assert done[i + 1].wait(WAIT), f"part {i + 1} never finished"
        done[i].set()
        return f"part{i}"

    @box.tool
    def collect(parts: list) -> str:
        """Join the parts in the order given."""
        return "+".join(parts)

    spec = ("steps:\n" + "".join(f"  - {{id: p{i}, tool: part, args: {{i: {i}}}}}\n" for i in range(4))
            + "  - {id: all, tool: collect, args: {parts: [$p0, $p1, $p2, $p3]}}\n")
    result = planbook.run(spec, tools=box, parallel=4)
    assert result.ok, result.error
    # history is in recording order (calls seen finished together are recorded in plan order)
    assert sorted(s.id for s in result.history[:4]) == ["p0", "p1", "p2", "p3"] and result.history[4].id == "all"
    assert [e.step for e in events_of(result, "step.started")][:4] == ["p0", "p1", "p2", "p3"]  # plan order
    assert result.outputs == {f"p{i}": f"part{i}" for i in range(4)} | {"all": "part0+part1+part2+part3"}


# ------------------------------------------------------------------ failures with steps in flight
def test_independent_branches_go_on_after_a_failure_with_skip() -> None:
    started, failed = threading.Event(), threading.Event()
    box = Toolbox()
    calls: list[str] = []

    @box.tool
    def broken() -> None:
        """Fail once the other branch is running."""
        calls.append("a")
        assert started.wait(WAIT)
        raise ConnectionError("source down")

    @box.tool
    def work(label: str) -> str:
        """The other branch: its first step waits until the failure was recorded."""
        calls.append(label)
        if label == "b1":
            started.set()
            assert failed.wait(WAIT), "the failure was never recorded while b1 ran"
        return label

    plan = Plan(steps=[
        Step(id="a", tool="broken"),
        Step(id="b1", tool="work", args={"label": "b1"}),
        Step(id="a2", tool="work", args={"label": "a2"}, needs=["a"]),
        Step(id="a3", tool="work", args={"label": "a3"}, needs=["a2"]),
        Step(id="b2", tool="work", args={"label": "b2"}, needs=["b1"]),
        Step(id="b3", tool="work", args={"label": "b3"}, needs=["b2"]),
    ])
    result = planbook.run(plan, tools=box, parallel=2, on_failure="skip",
                          on_event=lambda e: failed.set() if e.kind == "step.failed" else None)
    status = {s.id: s.status for s in result.plan.steps}
    assert status == {"a": Status.skipped, "b1": Status.completed, "a2": Status.blocked, "a3": Status.blocked,
                      "b2": Status.completed, "b3": Status.completed}
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    assert {e.step for e in events_of(result, "step.blocked")} == {"a2", "a3"}
    assert sorted(calls) == ["a", "b1", "b2", "b3"]
    assert result.executions == len(result.history) == 4


def in_flight_world() -> tuple[Toolbox, list[str], Any]:
    """``a`` fails while ``b`` runs; ``b`` returns only once the failure was recorded."""
    box = Toolbox()
    calls: list[str] = []
    b_running, a_recorded = threading.Event(), threading.Event()

    @box.tool
    def broken() -> None:
        """Fail while b is running."""
        calls.append("a")
        assert b_running.wait(WAIT)
        raise RuntimeError("a broke")

    @box.tool
    def slow() -> str:
        """Run until a's failure was handled."""
        calls.append("b")
        b_running.set()
        assert a_recorded.wait(WAIT), "a's failure was never recorded while b ran"
        return "b done"

    @box.tool
    def ok(label: str) -> str:
        """Quick."""
        calls.append(label)
        return label

    def on_event(event: Any) -> None:
        if event.kind == "step.failed" and event.step == "a":
            a_recorded.set()

    return box, calls, on_event


def test_abort_lets_running_steps_finish_and_starts_nothing_else() -> None:
    box, calls, on_event = in_flight_world()
    plan = Plan(steps=[
        Step(id="a", tool="broken"),
        Step(id="b", tool="slow"),
        Step(id="c", tool="ok", args={"label": "c"}),
        Step(id="d", tool="ok", args={"label": "d"}),
        Step(id="e", tool="ok", args={"label": "e"}, needs=["b"]),
    ])
    result = planbook.run(plan, tools=box, parallel=2, on_failure="abort", on_event=on_event)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.error == "step a failed: RuntimeError: a broke"
    assert sorted(calls) == ["a", "b"]
    status = {s.id: s.status for s in result.plan.steps}
    assert status == {"a": Status.failed, "b": Status.completed, "c": Status.not_started,
                      "d": Status.not_started, "e": Status.not_started}
    assert result.outputs == {"b": "b done"}  # the running step finished and was kept
    assert {e.step for e in events_of(result, "step.started")} == {"a", "b"}
    assert result.executions == len(result.history) == len(result.timeline.executions) == 2
    assert events_of(result, "run.finished")[-1].data["executions"] == 2


def test_abort_with_a_running_step_that_times_out() -> None:
    release, running = threading.Event(), threading.Event()
    box = Toolbox()

    @box.tool
    def broken() -> None:
        """Fail while the other step runs."""
        assert running.wait(WAIT)
        raise RuntimeError("a broke")

    @box.tool
    def stuck() -> str:
        """Run until stopped (Python code, so the timeout can stop it)."""
        running.set()
        while not release.wait(0.01):
            pass
        return "released"

    try:
        result = planbook.run("steps: [{id: a, tool: broken}, {id: b, tool: stuck}, {id: c, tool: broken}]",
                              tools=box, parallel=2, step_timeout=1)
    finally:
        release.set()
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.error == "step a failed: RuntimeError: a broke"
    assert result.plan.step("b").status is Status.failed and "TimeoutError" in result.plan.step("b").error
    assert result.plan.step("c").status is Status.not_started
    assert result.executions == len(result.history) == 2


def test_replan_waits_for_running_steps_and_the_planner_sees_them() -> None:
    box, calls, on_event = in_flight_world()
    seen: list[list[tuple[str, str]]] = []

    def planner(goal: str, history: list[Step], last_error: str | None) -> list[dict[str, Any]]:
        seen.append([(s.id, s.status.value) for s in history])
        return [{"id": "a-again", "tool": "ok", "args": {"label": "a-again"}},
                {"id": "c", "tool": "ok", "args": {"label": "$b"}, "needs": ["a-again"]}]

    plan = Plan(goal="replan around a", steps=[
        Step(id="a", tool="broken"),
        Step(id="b", tool="slow"),
        Step(id="c", tool="ok", args={"label": "c"}, needs=["a"]),
    ])
    result = planbook.run(plan, tools=box, planner=planner, parallel=2, on_event=on_event)
    assert (result.status, result.reason) == ("completed", "goal_met"), result.error
    # one replan, after b finished: the planner saw a's failure and b's result
    assert seen == [[("a", "failed"), ("b", "completed")]]
    assert result.replans == 1 and result.outputs["c"] == "b done" and result.outputs["b"] == "b done"
    order = [(e.kind, e.step) for e in result.events if e.kind in ("step.finished", "plan.diff")]
    assert order.index(("step.finished", "b")) < order.index(("plan.diff", None))
    assert sorted(calls) == ["a", "a-again", "b", "b done"]
    assert result.executions == len(result.history) == 4


# ------------------------------------------------------------------ budgets and random graphs
class DagWorld:
    """Tools for random graphs: ``join`` names its inputs, ``flop`` always fails, ``flaky``
    fails its first ``failures`` calls. Every call is counted; calls jitter a little so
    that completion order varies (jitter only: nothing waits on it)."""

    def __init__(self, seed: int) -> None:
        self.gauge = Gauge()
        self.calls: list[str] = []
        self.failures: dict[str, int] = {}
        self.rng = random.Random(seed)
        self.tools = Toolbox()
        world = self

        def jitter() -> None:
            with world.gauge.lock:
                pause = world.rng.random() * 0.001
            time.sleep(pause)

        @self.tools.tool
        def join(name: str, parts: list) -> str:
            """Name the parts."""
            with world.gauge.running():
                world.calls.append(name)
                jitter()
                return f"{name}({','.join(parts)})"

        @self.tools.tool
        def flop(name: str, parts: list) -> str:
            """Always fail."""
            with world.gauge.running():
                world.calls.append(name)
                jitter()
                raise RuntimeError(f"{name} failed")

        @self.tools.tool
        def flaky(name: str, parts: list, failures: int) -> str:
            """Fail the first ``failures`` calls."""
            with world.gauge.running():
                world.calls.append(name)
                jitter()
                with world.gauge.lock:
                    used = world.failures[name] = world.failures.get(name, 0) + 1
                if used <= failures:
                    raise RuntimeError(f"{name} failed ({used} of {failures})")
                return f"{name}!({','.join(parts)})"


@st.composite
def random_runs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 12))
    ids = [f"s{i}" for i in range(n)]
    steps = []
    for i, sid in enumerate(ids):
        needs = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=2)) if i else []
        kind = draw(st.sampled_from(["join", "join", "join", "flop", "flaky"]))
        args: dict[str, Any] = {"name": sid, "parts": [f"${need}" for need in needs]}
        if kind == "flaky":
            args["failures"] = draw(st.integers(1, 2))
        steps.append({"id": sid, "tool": kind, "args": args})
    policy = draw(st.sampled_from([["skip"], ["retry", "skip"]]))
    return {
        "steps": draw(st.permutations(steps)),
        "policy": policy,
        "retries": draw(st.integers(1, 2)) if "retry" in policy else None,
        "parallel": draw(st.integers(2, 4)),
        # at most 3 executions per step (a flaky step, retried twice): 3n is always enough
        "max_steps": draw(st.one_of(st.integers(1, 2 * n), st.just(3 * n))),
        "seed": draw(st.integers(0, 2**16)),
    }


def run_world(case: dict[str, Any], parallel: int) -> tuple[planbook.RunResult, DagWorld]:
    world = DagWorld(case["seed"])
    plan = Plan(steps=[Step(**s) for s in case["steps"]])
    result = planbook.run(plan, tools=world.tools, on_failure=case["policy"], retries=case["retries"],
                          max_steps=case["max_steps"], parallel=parallel)
    return result, world


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_runs())
def test_budgets_are_exact_and_results_match_a_serial_run(case: dict[str, Any]) -> None:
    result, world = run_world(case, case["parallel"])
    event(f"{result.reason}, peak {world.gauge.peak}")
    assert world.gauge.peak <= case["parallel"]
    assert result.executions <= case["max_steps"]
    assert result.executions == len(result.history) == len(result.timeline.executions) == len(world.calls)
    if result.reason == "step_budget":
        assert result.executions == case["max_steps"]  # used up exactly, never exceeded
    assert not [s.id for s in result.plan.steps if s.status is Status.in_progress]

    serial, serial_world = run_world(case, 1)
    assert (result.status, result.reason) == (serial.status, serial.reason)
    if serial.reason != "step_budget":  # with the budget enough, the same work in any order
        assert result.outputs == serial.outputs
        assert {s.id: s.status for s in result.plan.steps} == {s.id: s.status for s in serial.plan.steps}
        assert result.executions == serial.executions
        assert sorted(world.calls) == sorted(serial_world.calls)


# ------------------------------------------------------------------ the timeline
def test_the_timeline_shows_overlaps_and_the_critical_path() -> None:
    barrier = threading.Barrier(4, timeout=WAIT)
    others_recorded = threading.Event()
    finished: list[str] = []
    box = Toolbox()

    @box.tool
    def step(label: str, parts: list | None = None) -> str:
        """Branches meet at the barrier; the long one ends after the other three were recorded."""
        if label.startswith("b"):
            barrier.wait()
            if label == "b-long":
                assert others_recorded.wait(WAIT)
        return label

    def on_event(event: Any) -> None:
        if event.kind == "step.finished":
            finished.append(event.step)
            if sum(1 for s in finished if s.startswith("b")) == 3:
                others_recorded.set()

    plan = Plan(steps=[
        Step(id="root", tool="step", args={"label": "root"}),
        *[Step(id=f"b{i}", tool="step", args={"label": f"b{i}"}, needs=["root"]) for i in range(3)],
        Step(id="b-long", tool="step", args={"label": "b-long"}, needs=["root"]),
        Step(id="join", tool="step", args={"label": "join", "parts": ["$b0", "$b1", "$b2", "$b-long"]}),
    ])
    result = planbook.run(plan, tools=box, parallel=4, on_event=on_event)
    assert result.ok, result.error
    timeline = result.timeline
    by_step = {e.step: e for e in timeline.executions}
    assert len(timeline.executions) == result.executions == 6
    branches = ["b0", "b1", "b2", "b-long"]
    for b in branches:  # all four were at the barrier together
        assert sorted(by_step[b].overlaps) == sorted(by_step[o].execution for o in branches if o != b)
    assert by_step["root"].overlaps == [] and by_step["join"].overlaps == []
    assert len({by_step[b].worker for b in branches}) == 4
    assert by_step["b-long"].end == max(by_step[b].end for b in branches)
    # the longest chain: root, then the branch that took longest (start-up time of the
    # worker threads counts, so that is not necessarily b-long), then join
    longest = max(branches, key=lambda b: by_step[b].duration)
    assert timeline.critical_path == [by_step["root"].execution, by_step[longest].execution,
                                      by_step["join"].execution]
    path_time = sum(by_step[s].duration for s in ("root", longest, "join"))
    assert timeline.critical == pytest.approx(path_time)
    assert 0 < timeline.critical <= timeline.wall + 1e-9
    text = str(timeline)
    assert text.startswith("wall ") and f"#{by_step['b-long'].execution}" in text and "overlaps" in text


def test_a_serial_timeline_has_no_overlaps_and_its_path_is_the_chain() -> None:
    result = planbook.run(fan_out(3, tool="ok"), tools=meeting_tools(3, Gauge()))
    timeline = result.timeline
    assert [e.overlaps for e in timeline.executions] == [[]] * 5
    assert {e.worker for e in timeline.executions} == {"main"}
    assert timeline.critical_path[0] == 1 and timeline.critical_path[-1] == 5 and len(timeline.critical_path) == 3


# ------------------------------------------------------------------ other executors
def test_any_concurrent_futures_executor_runs_the_tool_calls() -> None:
    gauge = Gauge()
    box = meeting_tools(3, gauge)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="mypool") as pool:
        result = planbook.run(fan_out(3), tools=box, parallel=3, executor=pool)
    assert result.ok and result.outputs["join"] == joined(3)
    assert gauge.peak == 3
    workers = {e.worker for e in result.timeline.executions}
    assert workers and all(w.startswith("mypool") for w in workers)
    assert events_of(result, "step.started")[0].data["worker"] == "ThreadPoolExecutor"


def test_an_executor_that_is_not_one_is_refused() -> None:
    with pytest.raises(TypeError, match="executor must be a concurrent.futures.Executor"):
        planbook.run(fan_out(2), tools=meeting_tools(2, Gauge()), executor=object())
    with pytest.raises(ValueError, match="parallel must be a whole number >= 1, got 0"):
        planbook.run(fan_out(2), tools=meeting_tools(2, Gauge()), parallel=0)


# the Dask test's tools live at module level: a Dask executor ships calls by reference
DASK_BARRIER = threading.Barrier(4, timeout=WAIT)
DASK_CALLS: list[tuple[str, str]] = []


def dask_square(x: int) -> int:
    """Square x once four calls run together (on Dask's worker threads)."""
    DASK_CALLS.append(("square", threading.current_thread().name))
    DASK_BARRIER.wait()
    return x * x


def dask_total(parts: list) -> int:
    """Add the parts."""
    DASK_CALLS.append(("total", threading.current_thread().name))
    return sum(parts)


def test_a_dask_executor_runs_a_fan_out() -> None:
    distributed = pytest.importorskip("distributed")
    box = Toolbox([dask_square, dask_total])
    parts = {"parts": ["$sq0", "$sq1", "$sq2", "$sq3"]}
    plan = Plan(steps=[
        *[Step(id=f"sq{i}", tool="dask_square", args={"x": i}) for i in range(4)],
        Step(id="sum", tool="dask_total", args=parts),
        Step(id="same", tool="dask_total", args=parts),  # the same call again: with pure=False it runs too
    ])
    DASK_CALLS.clear()
    DASK_BARRIER.reset()
    # no dashboard; the scheduler's own HTTP endpoint on a free loopback port (8787 may be taken)
    with distributed.Client(processes=False, dashboard_address=None, n_workers=1, threads_per_worker=4,
                            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as client:
        result = planbook.run(plan, tools=box, parallel=4, executor=client.get_executor(pure=False), max_steps=6)
    assert (result.status, result.reason) == ("completed", "goal_met"), result.error
    assert result.outputs["sum"] == result.outputs["same"] == 0 + 1 + 4 + 9
    assert sorted(kind for kind, _ in DASK_CALLS) == ["square"] * 4 + ["total"] * 2  # identical calls not merged
    workers = [e.worker for e in result.timeline.executions]
    assert sorted(workers) == sorted(name for _, name in DASK_CALLS)
    assert all(w and w != "main" and not w.startswith("planbook-") for w in workers)
    assert result.executions == len(result.history) == 6


def test_the_timeline_from_known_records() -> None:
    """Overlaps and the critical path computed from fixed times (no clock involved)."""
    from planbook.data.timeline import Execution, build_timeline

    def record(n: int, step: str, start: float, end: float, attempt: int = 1, ok: bool = True) -> Execution:
        return Execution(execution=n, step=step, attempt=attempt, revision=1, worker=f"w{n}", start=start, end=end,
                         ok=ok)

    history = [Step(id="a", tool="ok"), Step(id="b", tool="ok", needs=["a"]), Step(id="c", tool="ok", needs=["a"]),
               Step(id="c", tool="ok", needs=["a"]), Step(id="d", tool="ok", needs=["b", "c"])]
    records = [record(1, "a", 0, 1), record(2, "b", 1, 5), record(3, "c", 1, 2, ok=False),
               record(4, "c", 2, 4, attempt=2), record(5, "d", 5, 6)]
    timeline = build_timeline(records, history)
    overlaps = {e.execution: e.overlaps for e in timeline.executions}
    assert overlaps == {1: [], 2: [3, 4], 3: [2], 4: [2], 5: []}  # touching ends do not overlap
    assert timeline.critical_path == [1, 2, 5] and timeline.critical == 6 and timeline.wall == 6
    # make the retried step the long way round: its two attempts come one after the other
    records[3] = record(4, "c", 2, 5.5, attempt=2)
    records[4] = record(5, "d", 5.5, 6)
    timeline = build_timeline(records, history)
    assert timeline.critical_path == [1, 3, 4, 5] and timeline.critical == pytest.approx(6.0)


# ------------------------------------------------------------------ the CLI and the magic
FAN_TOOLS = '''
import threading
import planbook

box = planbook.Toolbox()
meeting = threading.Barrier(4, timeout=30)

@box.tool
def piece(label: str) -> str:
    """Meet the other three branches, then return the label."""
    meeting.wait()
    return label

@box.tool
def gather(parts: list) -> str:
    """Join the parts."""
    return "+".join(parts)
'''

FAN_SPEC = """\
goal: four branches at once
steps:
  - {id: p0, tool: piece, args: {label: a}}
  - {id: p1, tool: piece, args: {label: b}}
  - {id: p2, tool: piece, args: {label: c}}
  - {id: p3, tool: piece, args: {label: d}}
  - {id: all, tool: gather, args: {parts: [$p0, $p1, $p2, $p3]}}
"""


def test_the_cli_runs_branches_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from planbook.cli import main

    module = f"fan_tools_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(FAN_TOOLS)
    (tmp_path / "fan.yaml").write_text(FAN_SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    code = main(["run", "fan.yaml", "--tools", f"{module}:box", "--parallel", "4"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Run completed (goal_met): steps 5/12" in out
    assert "Result of step all:\na+b+c+d" in out
    assert main(["run", "fan.yaml", "--tools", f"{module}:box", "--parallel", "0"]) == 2
    assert "parallel must be a whole number >= 1, got 0" in capsys.readouterr().err


def test_the_magic_runs_branches_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.error import UsageError
    from IPython.testing import globalipapp

    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "planbook")
    monkeypatch.setattr(ip.display_pub, "publish", lambda *args, **kwargs: None)  # the live view draws nowhere
    namespace: dict[str, Any] = {}
    exec(FAN_TOOLS, namespace)
    ip.user_ns["fan_box"] = namespace["box"]
    ip.run_cell_magic("plan", "fan --tools fan_box", FAN_SPEC)
    result = ip.run_line_magic("run_plan", "fan --parallel 4")
    assert (result.status, result.reason) == ("completed", "goal_met"), result.error
    assert result.outputs["all"] == "a+b+c+d"
    assert len({e.worker for e in result.timeline.executions[:4]}) == 4
    with pytest.raises(UsageError, match="--parallel must be a whole number >= 1, got 0"):
        ip.run_line_magic("run_plan", "fan --parallel 0 --restart")
