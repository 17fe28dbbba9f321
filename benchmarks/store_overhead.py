"""Store overhead per step: the store calls a runner makes for each step of a 2,000-step
plan of no-op tools, with the SQLite store on, against the same state changes with no store.

Per step the runner records the step going ``in_progress`` (with its ``step.started``
event), then ``completed`` with its result (with its history entry and its
``step.finished`` event): two ``record_step`` calls, two commits. Also measured, in the
same run: the same rows written by bare ``sqlite3`` statements (what SQLite itself
costs on this machine), one commit a step (a completion recorded together with the next
step's start), the two events written by separate ``append_events`` calls, and the
memory store.

Target: under 150 µs of store cost per step (two commits a step), in CPU time, as
benchmarks/engine_overhead.py measures.

Then end to end: ``planbook.run`` of a 2,000-step plan of no-op tools with the SQLite
store on (a fresh file each time, ``cache=False``) against the same run with no store —
everything a step costs the runner with a store (the cache off: no lookups), as
µs per step and as a ratio, CPU and wall. Target: under 150 µs per step more with the
store on. Wall time is printed too: with
``synchronous=NORMAL`` SQLite fsyncs when it checkpoints its write-ahead log, and how
long that waits depends on the disk and on what else writes to it.
Run: python benchmarks/store_overhead.py [STEPS]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import planbook
from planbook.models import Event, Plan, Status, Step
from planbook.runner import RunState
from planbook.store import MemoryStore
from planbook.store.sqlite import SQLiteStore

Recorder = Callable[[RunState, Step, bool], None]


def make_plan(n: int) -> Plan:
    return Plan(id="bench", goal="store overhead", steps=[
        Step(id=f"s{i}", task=f"step {i}", tool="noop", args={"x": i}) for i in range(1, n + 1)
    ])


def run_steps(n: int, record: Recorder | None, *, together: bool = False) -> tuple[float, float]:
    """(CPU, wall) seconds for the per-step state changes of an n-step run and its store calls.

    ``together``: a step's completion is recorded with the next step's start (one call).
    """
    state = RunState(plan=make_plan(n))
    events, history, steps = state.events, state.history, state.plan.steps
    c0, w0 = time.process_time(), time.perf_counter()
    for i, step in enumerate(steps, 1):
        step.set_state(status=Status.in_progress, attempts=1, started_at=time.time())
        events.append(Event.model_construct(kind="step.started", time=time.time(), step=step.id, revision=1,
                                            data={"attempt": 1, "execution": i - 1}))
        if record and (i == 1 or not together):
            record(state, step, False)
        step.set_state(status=Status.completed, result=i, finished_at=time.time())
        history.append(step.snapshot())
        state.executions = i
        events.append(Event.model_construct(kind="step.finished", time=time.time(), step=step.id, revision=1,
                                            data={"duration": 0.0, "result": str(i)}))
        if record and together and i < n:  # the next step starts in the same commit
            following = steps[i]
            following.set_state(status=Status.in_progress, attempts=1, started_at=time.time())
            events.append(Event.model_construct(kind="step.started", time=time.time(), step=following.id,
                                                revision=1, data={"attempt": 1, "execution": i}))
            record(state, [step, following], True)  # type: ignore[arg-type]
            following.set_state(status=Status.not_started)  # the loop starts it again, as before
            events.pop()
        elif record:
            record(state, step, True)
    return time.process_time() - c0, time.perf_counter() - w0


def with_store(store: Any, n: int, *, separate_events: bool = False, together: bool = False) -> tuple[float, float]:
    run_id = store.create_run(make_plan(n), goal="store overhead", config={"max_steps": n})

    def record(state: RunState, step: Any, done: bool) -> None:
        if separate_events:  # the event by itself first: the state then has nothing new
            store.append_events(run_id, state.events[-1:])
        store.record_step(run_id, step, state)

    times = run_steps(n, record, together=together)
    stored = store.load_run(run_id)
    assert stored.counters["executions"] == n and len(stored.history) == n, "the store lost steps"
    assert stored.plan.steps[-1].result == n and stored.plan.steps[-1].status is Status.completed
    return times


def bare_sqlite(path: Path, n: int) -> tuple[float, float]:
    """The rows the store writes, by plain sqlite3 statements with no planbook code (the floor)."""
    store = SQLiteStore(path)  # the same schema and settings
    run_id = store.create_run(make_plan(n), goal="store overhead", config={})
    con = store._connection()
    record = json.dumps({"id": "s1", "task": "step 1", "status": "completed", "attempts": 1, "started_at": 1.0,
                         "finished_at": 2.0, "needs": [], "error": None, "notes": "", "output": ""})
    event = json.dumps({"kind": "step.finished", "time": 1.0, "step": "s1", "revision": 1, "data": {"x": 1}})
    update_step = ("UPDATE steps SET status = ?, record = ?, args_kind = 'json', args = '{\"x\": 1}', result_kind = ?,"
                   " result = ?, result_ref = ? WHERE run_id = ? AND step_id = ?")
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(1, n + 1):
        con.execute("BEGIN IMMEDIATE")
        con.execute(update_step, ("in_progress", record, "json", "null", None, run_id, f"s{i}"))
        con.execute("INSERT INTO events (run_id, seq, record) VALUES (?, ?, ?)", (run_id, 2 * i, event))
        con.execute("COMMIT")
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO history (run_id, seq, record, args_kind, args, result_kind, result) VALUES"
                    " (?, ?, ?, 'json', '{\"x\": 1}', 'json', ?)", (run_id, i, record, str(i)))
        con.execute(update_step, ("completed", record, "ref", None, i, run_id, f"s{i}"))
        con.execute("INSERT INTO events (run_id, seq, record) VALUES (?, ?, ?)", (run_id, 2 * i + 1, event))
        con.execute("UPDATE runs SET status = 'running', counters = ?, executions = ?, updated = ? WHERE id = ?",
                    (record, i, time.time(), run_id))
        con.execute("COMMIT")
    times = time.process_time() - c0, time.perf_counter() - w0
    store.close()
    return times


def noop(x: int) -> int:
    """Return x."""
    return x


TOOLS = planbook.Toolbox([noop])


def timed_run(plan: Plan, n: int, store: Path | None) -> tuple[float, float]:
    """(CPU, wall) seconds of ``planbook.run`` of ``plan``, opening ``store`` included."""
    c0, w0 = time.process_time(), time.perf_counter()
    result = planbook.run(plan, tools=TOOLS, max_steps=n, store=store, cache=False)
    times = time.process_time() - c0, time.perf_counter() - w0
    assert result.ok and result.executions == n, result.error
    if store is not None:
        assert len(planbook.load_run(store=store).history) == n, "the store lost steps"
    return times


def end_to_end(n: int = 2000, repeats: int = 5) -> float:
    """``planbook.run`` with the SQLite store on vs off; returns the store's CPU µs per step."""
    plan = make_plan(n)
    off: list[tuple[float, float]] = []
    on: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        timed_run(plan, n, Path(folder) / "warm.sqlite")  # imports sqlite3 and the store once
        for r in range(repeats):  # interleaved, so machine noise hits both alike
            off.append(timed_run(plan, n, None))
            on.append(timed_run(plan, n, Path(folder) / f"run{r}.sqlite"))
    (cpu_off, wall_off), (cpu_on, wall_on) = (min(t[0] for t in off), min(t[1] for t in off)), \
        (min(t[0] for t in on), min(t[1] for t in on))
    per = 1e6 / n
    print(f"\nplanbook.run, {n} no-op steps, cache=False, a fresh store file each run (best of {repeats})")
    print(f"{'':20s} {'CPU µs/step':>12s} {'wall µs/step':>13s}")
    print(f"{'no store':20s} {cpu_off * per:12.1f} {wall_off * per:13.1f}")
    print(f"{'SQLite store':20s} {cpu_on * per:12.1f} {wall_on * per:13.1f}")
    extra = (cpu_on - cpu_off) * per
    print(f"{'store cost':20s} {extra:12.1f} {(wall_on - wall_off) * per:13.1f}")
    print(f"{'ratio on/off':20s} {cpu_on / cpu_off:11.2f}x {wall_on / wall_off:12.2f}x")
    print(f"end to end: {extra:.1f} µs CPU per step with the store (target < 150): "
          f"{'within' if extra < 150 else 'OVER'} target")
    return extra


def main(n: int = 2000, repeats: int = 5) -> None:
    names = ["no store", "bare sqlite3 (2 commits/step)", "SQLite store (2 commits/step)",
             "SQLite store (1 commit/step)", "SQLite, events apart (4)", "memory store"]
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(repeats):  # interleaved, so machine noise hits all alike
            rows["no store"].append(run_steps(n, None))
            rows["bare sqlite3 (2 commits/step)"].append(bare_sqlite(Path(folder) / f"bare{r}.sqlite", n))
            for name, options, file in [("SQLite store (2 commits/step)", {}, "a"),
                                        ("SQLite store (1 commit/step)", {"together": True}, "b"),
                                        ("SQLite, events apart (4)", {"separate_events": True}, "c")]:
                with SQLiteStore(Path(folder) / f"{file}{r}.sqlite") as store:
                    rows[name].append(with_store(store, n, **options))
            rows["memory store"].append(with_store(MemoryStore(), n))
    base_cpu = min(t[0] for t in rows["no store"])
    base_wall = min(t[1] for t in rows["no store"])
    print(f"steps: {n} (best of {repeats}); store cost = time with the store - time with none, per step")
    print(f"{'':32s} {'CPU µs/step':>12s} {'store CPU':>10s} {'wall µs/step':>13s} {'store wall':>11s}")
    cost: dict[str, float] = {}
    for name in names:
        cpu = min(t[0] for t in rows[name])
        wall = min(t[1] for t in rows[name])
        extra_cpu = (cpu - base_cpu) / n * 1e6 if name != "bare sqlite3 (2 commits/step)" else cpu / n * 1e6
        extra_wall = (wall - base_wall) / n * 1e6 if name != "bare sqlite3 (2 commits/step)" else wall / n * 1e6
        cost[name] = extra_cpu
        print(f"{name:32s} {cpu / n * 1e6:12.1f} {extra_cpu:10.1f} {wall / n * 1e6:13.1f} {extra_wall:11.1f}")
    store_cpu = cost["SQLite store (2 commits/step)"]
    print(f"SQLite store: {store_cpu:.1f} µs CPU per step (target < 150): {'within' if store_cpu < 150 else 'OVER'}"
          f" target; {store_cpu / cost['bare sqlite3 (2 commits/step)']:.2f}x the bare sqlite3 statements")


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    main(steps)
    end_to_end(steps)
