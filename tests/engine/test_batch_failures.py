"""A failure inside a batch ends a run exactly as it does without an executor.

Each scenario is one plan, one set of tools and one policy, run twice: on the runner's
own thread (no executor) and on an executor that takes ready steps in batches (a Dask
cluster's, and a plain thread pool's, which take the same path). Both runs must end with
the same status, reason and error, the same per-step statuses, results and attempts, the
same outputs, and the same count of executions, and that count must be the number of
calls the tool really made (counted under a lock, on whatever thread ran them).

``parallel=1`` on both sides: with one lane a batch runs its calls in plan order, so the
calls themselves must come in the same order as in the plain run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

import planbook
from planbook import Plan, RunResult, Step, Toolbox

# ---------------------------------------------------------------- the tool
# module level: a Dask executor ships the tool's function by reference


class Calls:
    """Every call the tool really made, in order, and what it still has to fail (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.made: list[str] = []
        #: label -> how many of its next calls fail (-1: every call)
        self.failing: dict[str, int] = {}

    def reset(self, failing: dict[str, int]) -> None:
        with self.lock:
            self.made = []
            self.failing = dict(failing)

    def take(self, label: str) -> bool:
        """Record a call of ``label``; True when this call must fail."""
        with self.lock:
            self.made.append(label)
            left = self.failing.get(label, 0)
            if left > 0:
                self.failing[label] = left - 1
            return left != 0


CALLS = Calls()


def work(label: str) -> str:
    """Return ``label`` in capitals, or fail as the scenario says."""
    if CALLS.take(label):
        raise RuntimeError(f"{label} broke")
    return label.upper()


def tools() -> Toolbox:
    box = Toolbox()
    box.tool(work)
    return box


# ---------------------------------------------------------------- the planner
def fixing_planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
    """Replace every step that has not completed with a working one (its id and label + ``b``).

    Pure: what it proposes depends only on what it is told, so both runs get the same plan
    when they tell it the same history.
    """
    done = {st.id for st in history if st.status.value == "completed"}
    return [Step(id=f"{sid}b", tool="work", args={"label": f"{sid}b"}) for sid in IDS if sid not in done]


IDS = [f"s{i}" for i in range(6)]


def plan(needs: dict[str, list[str]] | None = None) -> Plan:
    needs = needs or {}
    return Plan(goal="six small calls",
                steps=[Step(id=sid, tool="work", args={"label": sid}, needs=needs.get(sid, [])) for sid in IDS])


# ---------------------------------------------------------------- the table
@dataclass(frozen=True)
class Scenario:
    name: str
    failing: dict[str, int]
    options: dict[str, Any] = field(default_factory=dict)
    needs: dict[str, list[str]] = field(default_factory=dict)
    planner: bool = False


ALWAYS = -1
SCENARIOS = [
    Scenario("abort", {"s1": ALWAYS}),
    Scenario("abort, tight budget", {"s1": ALWAYS}, {"max_steps": 2}),
    Scenario("abort at the budget's edge", {"s2": ALWAYS}, {"max_steps": 3}),
    Scenario("skip", {"s1": ALWAYS}, {"on_failure": "skip"}),
    Scenario("skip blocks what needs it", {"s1": ALWAYS}, {"on_failure": "skip"}, needs={"s4": ["s1"]}),
    Scenario("skip, tight budget", {"s1": ALWAYS}, {"on_failure": "skip", "max_steps": 4}),
    Scenario("skip, budget of the plan's size", {"s1": ALWAYS}, {"on_failure": "skip", "max_steps": 6}),
    Scenario("skip twice", {"s1": ALWAYS, "s3": ALWAYS}, {"on_failure": "skip", "max_steps": 5}),
    Scenario("retry works", {"s1": 1}, {"on_failure": "retry"}),
    Scenario("retry, budget one short", {"s1": 1}, {"on_failure": "retry", "max_steps": 6}),
    Scenario("retry, budget exact", {"s1": 1}, {"on_failure": "retry", "max_steps": 7}),
    Scenario("retry, tight budget", {"s1": 1}, {"on_failure": "retry", "max_steps": 2}),
    Scenario("retry then skip", {"s1": ALWAYS}, {"on_failure": ["retry", "skip"], "retries": 2}),
    Scenario("retry then skip, tight budget", {"s1": ALWAYS}, {"on_failure": ["retry", "skip"], "max_steps": 6}),
    Scenario("retry then abort", {"s2": ALWAYS}, {"on_failure": ["retry", "abort"]}),
    Scenario("retry of the last step", {"s5": 1}, {"on_failure": "retry", "max_steps": 7}),
    Scenario("continue", {"s1": ALWAYS}, {"on_failure": "continue"}, needs={"s4": ["s1"]}),
    Scenario("continue, tight budget", {"s1": ALWAYS}, {"on_failure": "continue", "max_steps": 3}),
    Scenario("replan", {"s1": ALWAYS}, {"on_failure": "replan"}, planner=True),
    Scenario("replan, tight budget", {"s1": ALWAYS}, {"on_failure": "replan", "max_steps": 4}, planner=True),
    Scenario("replan, budget used at the failure", {"s1": ALWAYS}, {"on_failure": "replan", "max_steps": 2},
             planner=True),
    Scenario("replan with dependents", {"s2": ALWAYS}, {"on_failure": "replan", "max_steps": 9},
             needs={"s3": ["s2"], "s5": ["s0"]}, planner=True),
    Scenario("retry then replan", {"s1": ALWAYS}, {"on_failure": ["retry", "replan"], "max_steps": 8},
             planner=True),
]


def run(scenario: Scenario, executor: Any) -> tuple[RunResult, list[str]]:
    CALLS.reset(scenario.failing)
    options = dict(scenario.options)
    if scenario.planner:
        options["planner"] = fixing_planner
    result = planbook.run(plan(scenario.needs), tools=tools(), executor=executor, **options)
    with CALLS.lock:
        return result, list(CALLS.made)


def ending(result: RunResult) -> dict[str, Any]:
    """What must not depend on where the calls ran."""
    return {
        "status": result.status,
        "reason": result.reason,
        "error": result.error,
        "steps": [(st.id, st.status.value, st.result, st.attempts, st.error) for st in result.plan.steps],
        "outputs": result.outputs,
        "executions": result.executions,
        "history": [(st.id, st.status.value) for st in result.history],
        "revisions": [(d.removed, d.added, d.revised) for d in result.revisions],
    }


# ---------------------------------------------------------------- the executors
@pytest.fixture(scope="module")
def dask_executor() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, dashboard_address=None, n_workers=1, threads_per_worker=2) as client:
        yield client.get_executor(pure=False)


@pytest.fixture(scope="module")
def threads_executor() -> Iterator[Any]:
    with ThreadPoolExecutor(2) as pool:
        yield pool


@pytest.fixture(params=["dask", "threads"])
def executor(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_executor")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_batched_run_ends_as_a_plain_run(scenario: Scenario, executor: Any) -> None:
    plain, plain_calls = run(scenario, None)
    batched, batched_calls = run(scenario, executor)
    assert plain.executions == len(plain_calls) == len(plain.history)  # the reference counts right
    assert ending(batched) == ending(plain)
    assert batched.executions == len(batched_calls) == len(batched.history)
    assert batched_calls == plain_calls


def test_the_batches_really_hold_several_calls(dask_executor: Any) -> None:
    """The comparison above is about batches: on this plan the executor gets them."""
    from planbook import Runner

    CALLS.reset({})
    runner = Runner(plan(), tools=tools(), executor=dask_executor, max_steps=6)
    sizes: list[int] = []
    start_batch = runner.dispatch.start_batch

    def counting(flights: list[Any], results: list[dict[str, Any]]) -> None:
        sizes.append(len(flights))
        start_batch(flights, results)

    runner.dispatch.start_batch = counting  # type: ignore[method-assign]
    result = runner.run()
    assert result.ok and sizes == [6]


# ---------------------------------------------------------------- decisions a batch must not take early
def cached_tools() -> Toolbox:
    box = Toolbox()
    box.tool(cache=True)(work)
    return box


@pytest.mark.parametrize("policy", ["abort", "replan"])
def test_a_stored_result_does_not_complete_a_step_ahead_of_a_failure(
        policy: str, executor: Any, tmp_path: Any) -> None:
    """s2..s5 have stored results, s1 fails: a plain run never reaches them (abort), or
    replaces them (replan); a batch formed from s0 must not complete them from the cache first."""
    ends = []
    for where, store in (("plain", tmp_path / "plain.sqlite"), ("batched", tmp_path / "batched.sqlite")):
        CALLS.reset({})
        primed = planbook.run(Plan(steps=plan().steps[2:]), tools=cached_tools(), store=store)
        assert primed.ok, primed.error
        CALLS.reset({"s1": ALWAYS})
        options: dict[str, Any] = {"planner": fixing_planner} if policy == "replan" else {}
        result = planbook.run(plan(), tools=cached_tools(), store=store, on_failure=policy,
                              executor=executor if where == "batched" else None, **options)
        with CALLS.lock:
            made = list(CALLS.made)
        assert result.executions == len(made) == len(result.history)
        ends.append((ending(result), made))
    assert ends[1] == ends[0]


@pytest.mark.parametrize("policy", ["abort", "skip"])
def test_an_approval_is_not_asked_ahead_of_a_failure(policy: str, executor: Any) -> None:
    """Every step asks before it runs. A plain run asks about a step when its turn comes;
    a batch must not ask about s2..s5 before s1's failure (abort: they never run)."""
    ends = []
    for where in ("plain", "batched"):
        asked: list[str] = []

        def approve(step: Step, context: planbook.ApprovalContext) -> planbook.Decision:
            asked.append(step.id)
            return planbook.Decision.approve()

        CALLS.reset({"s1": ALWAYS})
        result = planbook.run(plan(), tools=tools(), approve=approve, on_failure=policy,
                              executor=executor if where == "batched" else None)
        with CALLS.lock:
            made = list(CALLS.made)
        assert result.executions == len(made) == len(result.history)
        ends.append((ending(result), made, asked))
    assert ends[1] == ends[0]


# ---------------------------------------------------------------- a batch ends as a whole
class HeldCompletions:
    """The runner's completions queue, whose ``hold_at``-th put waits until ``release`` is set.

    The executor puts each call of a batch there as the batch ends; holding one put lets the
    runner act on what it has been told so far, as a busy machine may make it do.
    """

    def __init__(self, inner: Any, hold_at: int, release: threading.Event) -> None:
        self.inner, self.hold_at, self.release = inner, hold_at, release
        self.puts = 0

    def put(self, item: Any) -> None:
        self.inner.put(item)
        self.puts += 1
        if self.puts == self.hold_at:
            self.release.wait(WAIT)  # bounded: a run that never releases it fails the comparison below

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get(*args, **kwargs)


WAIT = 30.0


class LateStart(ThreadPoolExecutor):
    """Starts a task only once its done-callback is registered: the callback then runs on the
    pool's thread when the task ends, never on the submitting thread (as it does for a task
    that ended before the callback was added)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        registered = threading.Event()

        def gated() -> Any:
            registered.wait(WAIT)
            return fn(*args, **kwargs)

        future = super().submit(gated)
        add = future.add_done_callback

        def add_done_callback(callback: Any) -> None:
            add(callback)
            registered.set()

        future.add_done_callback = add_done_callback  # type: ignore[method-assign]
        return future


def test_the_runner_learns_a_batch_s_end_at_once() -> None:
    """s4 fails once under retry with max_steps=6. The batch s0..s5 ends with s5 unreached;
    were s4's failure seen while s5 still counted as running, the retry would be refused
    ("6 of max_steps=6 executions made" after 5 calls) instead of running as the sixth."""
    scenario = Scenario("retry at the budget's edge", {"s4": 1}, {"on_failure": "retry", "max_steps": 6})
    plain, plain_calls = run(scenario, None)
    assert plain.reason == "step_budget" and plain_calls == ["s0", "s1", "s2", "s3", "s4", "s4"]

    CALLS.reset(scenario.failing)
    with LateStart(2) as pool:
        runner = planbook.Runner(plan(), tools=tools(), executor=pool, **scenario.options)
        retried = threading.Event()
        runner.subscribe(lambda event: retried.set() if event.kind == "step.retry" else None)
        held = HeldCompletions(runner.dispatch.completions, 5, retried)
        runner.dispatch.completions = held  # type: ignore[assignment]
        batched = runner.run()
    with CALLS.lock:
        batched_calls = list(CALLS.made)
    assert ending(batched) == ending(plain)
    assert batched.executions == len(batched_calls) == len(batched.history)
    assert batched_calls == plain_calls


def batch_ending_while_read(executor: Any) -> tuple[Any, list[Any]]:
    """A dispatcher with three calls of one batch in flight, the batch ending just after it
    is first read (as when it ends while the runner scans its calls one by one)."""
    from planbook.engine.dispatch import Flight
    from planbook.engine.executors import Batch, BatchedCall

    class EndsWhileRead(Batch):
        """Not ended when first read, ended from then on."""

        __slots__ = ("reads",)

        def __init__(self) -> None:
            self.reads = 0

        @property  # type: ignore[override]
        def ended(self) -> bool:
            self.reads += 1
            return self.reads > 1

    runner = planbook.Runner(plan(), tools=tools(), executor=executor)
    dispatch = runner.dispatch
    assert dispatch.batching
    batch = EndsWhileRead()
    flights = [Flight(step, i) for i, step in enumerate(runner.plan.steps[:3], start=1)]
    task: Future[Any] = Future()  # the batch's one task on the executor
    for flight in flights:
        flight.future = BatchedCall(batch)
        flight.future.future = task
    dispatch.inflight = list(flights)
    return dispatch, flights


def test_a_batch_that_ends_during_a_scan_is_seen_whole(threads_executor: Any) -> None:
    """The runner collects the calls that ended: all of a batch or none of it."""
    dispatch, flights = batch_ending_while_read(threads_executor)
    dispatch.completions.put(None)  # the wait after a scan that found nothing returns at once
    assert dispatch.wait_for_one() == flights


def test_a_batch_that_ends_as_its_cluster_is_given_up_fails_whole(threads_executor: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster with no worker left fails the calls still waiting on it: all of a batch or none."""
    from planbook.engine import dispatch as dispatch_module
    from planbook.engine.executors import BatchedCall

    monkeypatch.setattr(dispatch_module, "NO_WORKER_GRACE", 0.0)
    dispatch, flights = batch_ending_while_read(threads_executor)
    monkeypatch.setattr(dispatch._futures, "cannot_run", lambda: "the test took its workers")
    dispatch._check_executor()
    given_up = [not isinstance(flight.future, BatchedCall) for flight in flights]
    assert given_up in ([True] * 3, [False] * 3)


# ------------------------------------------------------------ two lanes: a failure in one
@pytest.mark.parametrize("policy", ["abort", "replan"])
def test_a_failure_in_one_lane_stops_the_other_lane_s_batch_between_calls(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``parallel=2`` each lane takes a batch ([f, a, b] and [c, d, e]). When f fails and
    its policy ends (or replans) the run, the other lane's batch starts no further call: a
    plain run would not have started one either."""
    from planbook.engine.dispatch import Dispatcher

    halted = threading.Event()
    original = Dispatcher.halt

    def halt(self: Dispatcher, on: bool) -> None:
        original(self, on)
        if on:
            halted.set()  # the run starts nothing new from here on

    monkeypatch.setattr(Dispatcher, "halt", halt)
    made: list[str] = []
    lock = threading.Lock()
    box = Toolbox()

    @box.tool(cache=False)
    def work(label: str) -> str:
        with lock:
            made.append(label)
        if label == "f":
            raise RuntimeError("f broke")
        if label == "c":  # the other lane's first call ends only once the run stopped starting
            assert halted.wait(30)
        return label

    plan = Plan(steps=[Step(id=s, tool="work", args={"label": s}, on_failure=policy) for s in "fabcde"])
    planner = (lambda goal, history, last_error: [Step(id="g", tool="work", args={"label": "g"})]) \
        if policy == "replan" else None
    with ThreadPoolExecutor(2) as pool:
        result = planbook.run(plan, tools=box, parallel=2, executor=pool, planner=planner)
    assert "d" not in made and "e" not in made, made
    assert result.executions == len(made), (result.executions, made)
