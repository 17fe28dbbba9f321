"""Store overhead per step: the calls a runner makes for each step of a 2,000-step plan of
no-op tools, with the SQLite store on, against the same state changes with no store.

Per step the runner records the step going ``in_progress`` (with its ``step.started``
event) and then ``completed`` with its result (with its history entry and
``step.finished`` event): two ``record_step`` calls, two commits. Also measured: the same
with the two events written by separate ``append_events`` calls (four commits a step),
and the memory store. Target: under 150 µs per step with the SQLite store on.
Wall time is measured (commits wait on the file system); best of several repeats.
Run: python benchmarks/store_overhead.py [STEPS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from planbook.models import Event, Plan, Status, Step
from planbook.runner import RunState
from planbook.store import MemoryStore
from planbook.store.sqlite import SQLiteStore


def make_plan(n: int) -> Plan:
    return Plan(id="bench", goal="store overhead", steps=[
        Step(id=f"s{i}", task=f"step {i}", tool="noop", args={"x": i}) for i in range(1, n + 1)
    ])


def run_steps(n: int, record: Callable[[RunState, Step, Event, bool], None] | None) -> float:
    """Seconds for the per-step state changes of an n-step run (and the store calls, if any)."""
    state = RunState(plan=make_plan(n))
    events, history = state.events, state.history
    t0 = time.perf_counter()
    for i, step in enumerate(state.plan.steps, 1):
        step.set_state(status=Status.in_progress, attempts=1, started_at=time.time())
        started = Event.model_construct(kind="step.started", time=time.time(), step=step.id, revision=1,
                                        data={"attempt": 1, "execution": i - 1})
        events.append(started)
        if record:
            record(state, step, started, False)
        step.set_state(status=Status.completed, result=i, finished_at=time.time())
        history.append(step.snapshot())
        state.executions = i
        finished = Event.model_construct(kind="step.finished", time=time.time(), step=step.id, revision=1,
                                         data={"duration": 0.0, "result": str(i)})
        events.append(finished)
        if record:
            record(state, step, finished, True)
    return time.perf_counter() - t0


def with_store(store: Any, n: int, *, separate_events: bool) -> float:
    run_id = store.create_run(make_plan(n), goal="store overhead", config={"max_steps": n})

    def record(state: RunState, step: Step, event: Event, done: bool) -> None:
        if separate_events:  # the events first, by themselves: the state then has nothing new
            store.append_events(run_id, [event])
        store.record_step(run_id, step, state)

    seconds = run_steps(n, record)
    stored = store.load_run(run_id)
    assert stored.counters["executions"] == n and len(stored.history) == n and len(stored.events) == 2 * n
    assert stored.plan.steps[-1].result == n
    return seconds


def main(n: int = 2000, repeats: int = 5) -> None:
    rows: dict[str, list[float]] = {"no store": [], "sqlite (2 commits/step)": [], "sqlite, events apart (4)": [],
                                    "memory store": []}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(repeats):  # interleaved, so machine noise hits all alike
            rows["no store"].append(run_steps(n, None))
            with SQLiteStore(Path(folder) / f"a{r}.sqlite") as store:
                rows["sqlite (2 commits/step)"].append(with_store(store, n, separate_events=False))
            with SQLiteStore(Path(folder) / f"b{r}.sqlite") as store:
                rows["sqlite, events apart (4)"].append(with_store(store, n, separate_events=True))
            rows["memory store"].append(with_store(MemoryStore(), n, separate_events=False))
    base = min(rows["no store"])
    print(f"steps: {n} (best of {repeats}, wall time)")
    for name, times in rows.items():
        best = min(times)
        extra = (best - base) / n * 1e6
        print(f"{name:26s} {best * 1e3:9.2f} ms  {best / n * 1e6:8.2f} µs/step  store: {extra:8.2f} µs/step"
              f"  ({best / base:5.1f}x no store)")
    sqlite_cost = (min(rows["sqlite (2 commits/step)"]) - base) / n * 1e6
    print(f"SQLite store cost per step: {sqlite_cost:.1f} µs (target < 150 µs): "
          f"{'within' if sqlite_cost < 150 else 'OVER'} target")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
