"""The SQLite store's extra CPU per step, end to end, next to what SQLite itself costs.

Measured in one run, interleaved so machine noise hits all alike (best of REPEATS):

- **no store**: ``planbook.run`` of a plan of no-op tools (``cache=False``);
- **SQLite store**: the same run with ``store=`` a fresh file — every step's result and
  status are committed before the next step starts (one transaction per step);
- **durable=True**: the same with ``SQLiteStore(path, durable=True)`` (``synchronous=FULL``:
  an fsync per commit, which also survives a power cut);
- **bare sqlite3**: the floor — a WAL transaction per step writing two small rows
  (``synchronous=NORMAL``, a table shaped like version 2's events table), with no planbook code at all,
  and closing the file at the end. Both runs end with their data copied from the write-ahead
  log into the database file (the last close does it), so both count that close.

The store's extra CPU per step is (SQLite store - no store) / steps; the target is at most
4x the bare transaction, measured in the same run. Then the split of that extra: time
inside SQLite calls (``execute``/``executemany``), inside JSON encoding, and the rest
(Python: records, redaction checks, bookkeeping), from one instrumented run with the
instrumentation's own cost taken out.

Last, a save (what a replan or a pause writes) of a STEPS-step plan where one step changed:
its CPU and the rows it writes.

Run: python benchmarks/store_overhead.py [STEPS] [REPEATS] [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import planbook
from planbook.data.models import Plan, Status, Step
from planbook.engine.state import RunState
from planbook.outbound import redact
from planbook.store import values
from planbook.store.sqlite import SQLiteStore

TARGET = 4.0


def noop(x: int) -> int:
    """Return x."""
    return x


TOOLS = planbook.Toolbox([noop])


def make_plan(n: int) -> Plan:
    return Plan(id="bench", goal="store overhead", steps=[
        Step(id=f"s{i}", task=f"step {i}", tool="noop", args={"x": i}) for i in range(1, n + 1)
    ])


def cpu_run(plan: Plan, n: int, store: Any) -> float:
    """CPU seconds of ``planbook.run`` (opening and closing the store included)."""
    c0 = time.process_time()
    result = planbook.run(plan, tools=TOOLS, max_steps=n, store=store, cache=False)
    cpu = time.process_time() - c0
    assert result.ok and result.executions == n, result.error
    if isinstance(store, SQLiteStore):
        store.close()
    return cpu


def bare_sqlite(path: Path, n: int) -> float:
    """CPU seconds of n WAL transactions of two small rows each, in plain sqlite3, and the close."""
    con = sqlite3.connect(str(path), isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = NORMAL")
    con.execute("CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, record TEXT NOT NULL,"
                " PRIMARY KEY (run_id, seq)) WITHOUT ROWID")
    row = '{"kind":"step.finished","time":1796143858.17,"step":"s1","revision":1,"data":{"result":"1"}}'
    c0 = time.process_time()
    for i in range(n):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO events (run_id, seq, record) VALUES (?, ?, ?)", ("r", 2 * i, row))
        con.execute("INSERT INTO events (run_id, seq, record) VALUES (?, ?, ?)", ("r", 2 * i + 1, row))
        con.execute("COMMIT")
    con.close()  # copies the write-ahead log into the file, as closing the store does (counted there too)
    return time.process_time() - c0


class _Timed:
    """A connection whose statements add their CPU time to ``spent``."""

    def __init__(self, con: sqlite3.Connection, spent: list[float]) -> None:
        self._con, self._spent = con, spent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def _timed(self, method: Any, *args: Any) -> Any:
        c0 = time.process_time()
        try:
            return method(*args)
        finally:
            self._spent[0] += time.process_time() - c0
            self._spent[1] += 1

    def execute(self, *args: Any) -> Any:
        return self._timed(self._con.execute, *args)

    def executemany(self, *args: Any) -> Any:
        return self._timed(self._con.executemany, *args)


class _TimedStore(SQLiteStore):
    def __init__(self, path: Path, spent: list[float]) -> None:
        self._spent = spent
        super().__init__(path)

    def _connection(self) -> Any:
        return _Timed(super()._connection(), self._spent)


def split(plan: Plan, n: int, folder: Path, extra: float) -> tuple[float, float, float]:
    """(SQLite, JSON, Python) µs of the store's extra CPU per step."""
    sql = [0.0, 0]
    js = [0.0, 0]
    dump = redact._dump

    def timed_dump(value: Any) -> str:
        c0 = time.process_time()
        try:
            return dump(value)
        finally:
            js[0] += time.process_time() - c0
            js[1] += 1

    c0 = time.process_time()
    for _ in range(2000):
        time.process_time()
    pair = (time.process_time() - c0) / 2000 * 2  # one timed call reads the clock twice
    redact._dump = values.dump_json = timed_dump
    try:
        cpu_run(plan, n, _TimedStore(folder / "split.sqlite", sql))
    finally:
        redact._dump = values.dump_json = dump
    per = 1e6 / n
    sql_us = max(sql[0] - sql[1] * pair, 0.0) * per
    json_us = max(js[0] - js[1] * pair, 0.0) * per
    return sql_us, json_us, max(extra - sql_us - json_us, 0.0)


def save_cost(folder: Path, n: int, saves: int = 20) -> tuple[float, float]:
    """(ms CPU, rows written) per ``save_state`` of an n-step plan with one step changed."""
    with SQLiteStore(folder / "saves.sqlite") as store:
        state = RunState(plan=make_plan(n))
        run_id = store.create_run(state.plan, config={})
        store.save_state(run_id, state)
        con = store._connection()
        rows = con.total_changes
        c0 = time.process_time()
        for i in range(saves):
            state.plan.steps[i].set_state(status=Status.completed, result=i)
            store.save_state(run_id, state)
        cpu = time.process_time() - c0
        return cpu / saves * 1e3, (con.total_changes - rows) / saves


def main(n: int = 2000, repeats: int = 9) -> None:
    plan = make_plan(n)
    rows: dict[str, list[float]] = {"no store": [], "SQLite store": [], "durable=True": [], "bare": []}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        cpu_run(plan, n, SQLiteStore(folder / "warm.sqlite"))  # imports and first-call costs once
        for r in range(repeats):
            rows["no store"].append(cpu_run(plan, n, None))
            rows["SQLite store"].append(cpu_run(plan, n, SQLiteStore(folder / f"run{r}.sqlite")))
            rows["durable=True"].append(cpu_run(plan, n, SQLiteStore(folder / f"durable{r}.sqlite", durable=True)))
            rows["bare"].append(bare_sqlite(folder / f"bare{r}.sqlite", n))
        per = 1e6 / n
        best = {k: min(v) * per for k, v in rows.items()}
        extra = best["SQLite store"] - best["no store"]
        durable = best["durable=True"] - best["no store"]
        bare = best["bare"]
        sql_us, json_us, py_us = split(plan, n, folder, extra)
        save_ms, save_rows = save_cost(folder, n)
    print(f"planbook.run, {n} no-op steps, cache=False, a fresh store file each run; CPU, best of {repeats}")
    print(f"{'no store':34s} {best['no store']:8.1f} µs/step")
    print(f"{'SQLite store':34s} {best['SQLite store']:8.1f} µs/step")
    print(f"{'SQLite store, durable=True':34s} {best['durable=True']:8.1f} µs/step")
    print(f"{'bare sqlite3 WAL txn, 2 small rows':34s} {bare:8.1f} µs/step")
    print(f"store's extra CPU per step: {extra:.1f} µs = {extra / bare:.2f}x the bare transaction "
          f"(target <= {TARGET:g}x = {TARGET * bare:.1f} µs): {'within' if extra <= TARGET * bare else 'OVER'} target")
    print(f"durable=True extra CPU per step: {durable:.1f} µs = {durable / bare:.2f}x the bare transaction")
    print(f"split of the extra (one instrumented run): SQLite {sql_us:.1f} µs, JSON {json_us:.1f} µs, "
          f"Python {py_us:.1f} µs")
    print(f"a save of the {n}-step plan with one step changed: {save_ms:.2f} ms CPU, {save_rows:g} rows written")


if __name__ == "__main__":
    quick = "--quick" in sys.argv[1:]
    positional = [a for a in sys.argv[1:] if a != "--quick"]
    main(int(positional[0]) if positional else 200 if quick else 2000,
         int(positional[1]) if len(positional) > 1 else 1 if quick else 9)
