"""What a fork of a long stored run costs: reading the parent, building the child, and the store.

A 1,000-step stored run (two chains of 500 and a join) is forked at the last step of one
chain. The issue's targets: the fork reads the parent once and starts its first re-run step
within 1.2x the CPU of ``planbook.load_run`` of the parent; the store grows by one row per
re-run step plus a constant (kept steps are references to the parent's rows, never copies).
Figures are CPU time (``time.process_time``), minimum of several, measured in one run
alternately (load, fork, load, fork...), so the ratio holds on a noisy machine.

Run: python benchmarks/fork_cost.py [--quick]   (``--quick``: 100 steps, one repeat; figures meaningless)
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import planbook
from planbook.engine.fork import fork

QUICK = "--quick" in sys.argv
CHAIN = 50 if QUICK else 500
REPEATS = 1 if QUICK else 7
TARGET = 1.2


def make_tools() -> planbook.Toolbox:
    box = planbook.Toolbox()

    @box.tool
    def inc(x: int, by: int = 1) -> int:
        return x + by

    @box.tool
    def join(a: int, b: int) -> int:
        return a * 100_000 + b

    return box


def chains(n: int) -> planbook.Plan:
    steps: list[dict[str, Any]] = []
    for c in "ab":
        for i in range(1, n + 1):
            steps.append({"id": f"{c}{i}", "tool": "inc", "args": {"x": 0} if i == 1 else {"x": f"${c}{i - 1}"}})
    steps.append({"id": "join", "tool": "join", "args": {"a": f"$a{n}", "b": f"$b{n}"}})
    return planbook.Plan.model_validate({"id": "chains", "goal": "two chains and a join", "steps": steps})


def rows(store: Path) -> int:
    con = sqlite3.connect(store)
    try:
        return int(con.execute("SELECT (SELECT count(*) FROM log) + (SELECT count(*) FROM steps)"
                               " + (SELECT count(*) FROM runs)").fetchone()[0])
    finally:
        con.close()


def main() -> None:
    tools = make_tools()
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "runs.sqlite"
        parent = planbook.run(chains(CHAIN), tools=tools, store=store, max_steps=4 * CHAIN)
        steps = len(parent.plan.steps)
        loads, forks = [], []
        grown: list[int] = []
        for _ in range(REPEATS):
            start = time.process_time()
            planbook.load_run(parent.run_id, store=store)
            loads.append(time.process_time() - start)
            first: list[float] = []

            def on_event(event: Any) -> None:
                if event.kind == "step.started" and not first:
                    first.append(time.process_time())

            before = rows(store)
            start = time.process_time()
            child = fork(parent.run_id, at=f"a{CHAIN}", args={"by": 2}, tools=tools, store=store,
                         on_event=on_event)
            forks.append(first[0] - start)
            grown.append(rows(store) - before)
            assert child.ok and child.executions == 2
        load_ms, fork_ms = min(loads) * 1000, min(forks) * 1000
        ratio = fork_ms / load_ms
        print(f"parent: {steps} steps stored")
        print(f"load_run of the parent: {load_ms:.1f} ms CPU; fork up to its first re-run step: {fork_ms:.1f} ms CPU"
              f" -> ratio {ratio:.2f} (target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'})")
        print(f"store rows added by a fork re-running 2 of {steps} steps: {max(grown)} "
              f"(a run row, its first log row, a row per re-run step's start and end, the last write)")


if __name__ == "__main__":
    main()
