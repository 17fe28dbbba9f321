"""Parallel branches: a fan-out of 8 steps that each sleep 0.2 s, then a join.

Prints, for a serial run, ``parallel=8`` on planbook's worker threads, and
``parallel=8`` on an in-process Dask cluster, the wall time of the run over its
critical path (0.2 s of fan-out + the join), measured in one run each.
Targets: parallel=8 ≤ 1.15, Dask ≤ 1.3 (serial is about 8).
Run: python benchmarks/parallel.py   (Dask needs: pip install "planbook[dask]")
"""

from __future__ import annotations

import json
import time

import planbook

WIDTH, NAP = 8, 0.2


def nap(i: int) -> int:
    """Sleep, then return i (stands in for a slow API call)."""
    time.sleep(NAP)
    return i


def join(parts: list) -> int:  # type: ignore[type-arg]
    """Add the parts."""
    return sum(parts)


def build() -> tuple[str, planbook.Toolbox]:
    # module-level tools: a cluster gets them by reference, as it would a user's importable tools
    box = planbook.Toolbox([nap, join])
    steps: list[dict[str, object]] = [{"id": f"part{i}", "tool": "nap", "args": {"i": i}} for i in range(WIDTH)]
    steps.append({"id": "join", "tool": "join", "args": {"parts": [f"$part{i}" for i in range(WIDTH)]}})
    return json.dumps({"goal": "fan out, then join", "steps": steps}), box


def measure(label: str, **options: object) -> float:
    spec, box = build()
    start = time.perf_counter()
    result = planbook.run(spec, tools=box, max_steps=WIDTH + 1, **options)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    assert result.ok and result.outputs["join"] == sum(range(WIDTH)), result.error
    critical = result.timeline.critical
    print(f"{label:<28} wall {wall:6.3f} s   critical path {critical:6.3f} s   ratio {wall / critical:5.2f}")
    return wall / critical


def main() -> None:
    print(f"fan-out of {WIDTH} steps sleeping {NAP} s, then a join (ratio = wall / critical path)")
    measure("serial (parallel=1)")
    measure("parallel=8, threads", parallel=WIDTH)
    try:
        from distributed import Client
    except ImportError:
        print("parallel=8, Dask               skipped: pip install 'planbook[dask]'")
        return
    with Client(processes=False, dashboard_address=None, n_workers=1, threads_per_worker=WIDTH) as client:
        executor = client.get_executor(pure=False)
        # a cluster is long-lived: its first task pays for connecting, which is not the run's cost
        planbook.run("steps: [{id: warm, tool: join, args: {parts: [1]}}]", tools=[join], executor=executor)
        measure("parallel=8, Dask in-process", parallel=WIDTH, executor=executor)


if __name__ == "__main__":
    main()
