"""Parallel branches, measured as ratios in one run.

1. A fan-out of 8 steps that each sleep 0.2 s, then a join: for a serial run,
   ``parallel=8`` on planbook's worker threads, and ``parallel=8`` on an in-process
   Dask cluster, the wall time of the run over its critical path (0.2 s of fan-out +
   the join). Targets: parallel=8 ≤ 1.15, Dask ≤ 1.3 (serial is about 8).
2. Many small steps on a cluster: 200 independent steps of 10 ms, ``parallel=16``, on
   an in-process Dask cluster (1 worker, 16 threads), as wall time over an ideal
   ``ThreadPoolExecutor(16)`` running the same 200 sleeps (everything submitted at
   once, no planbook). Target: ≤ 1.5. Dask's own cost of one task per call is printed
   beside it (the same 200 sleeps submitted at once to the cluster).
Run: python benchmarks/parallel.py [--quick]   (Dask needs: pip install "planbook[dask]")

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait

import planbook

QUICK = "--quick" in sys.argv[1:]
WIDTH, NAP = (8, 0.02) if QUICK else (8, 0.2)
#: section 2: many small steps
SMALL, SMALL_NAP, SMALL_WIDTH = (32, 0.01, 16) if QUICK else (200, 0.01, 16)


def nap(i: int) -> int:
    """Sleep, then return i (stands in for a slow API call)."""
    time.sleep(NAP)
    return i


def tick(i: int) -> int:
    """Sleep 10 ms, then return i (a small remote call)."""
    time.sleep(SMALL_NAP)
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
    with Client(processes=False, dashboard_address=None, n_workers=1, threads_per_worker=SMALL_WIDTH) as client:
        many_small(client, repeats=1 if QUICK else 5)


def many_small(client: object, repeats: int = 5) -> None:
    """200 independent 10 ms steps, 16 wide, on Dask, over an ideal thread pool (best of ``repeats``)."""
    executor = client.get_executor(pure=False)  # type: ignore[attr-defined]
    plan = json.dumps({"goal": "many small steps",
                       "steps": [{"id": f"s{i}", "tool": "tick", "args": {"i": i}} for i in range(SMALL)]})
    box = planbook.Toolbox([tick])
    planbook.run(plan, tools=box, parallel=SMALL_WIDTH, executor=executor, max_steps=SMALL)  # warm the cluster

    def ideal() -> None:
        with ThreadPoolExecutor(SMALL_WIDTH) as pool:
            wait([pool.submit(tick, i) for i in range(SMALL)])

    def dask_alone() -> None:
        wait([executor.submit(tick, i) for i in range(SMALL)])

    def planbook_on_dask() -> None:
        result = planbook.run(plan, tools=box, parallel=SMALL_WIDTH, executor=executor, max_steps=SMALL)
        assert result.ok and len(result.outputs) == SMALL, result.error

    walls: dict[str, list[float]] = {"ideal": [], "dask": [], "planbook": []}
    for _ in range(repeats):  # interleaved, so machine noise hits all alike
        for name, fn in (("ideal", ideal), ("planbook", planbook_on_dask), ("dask", dask_alone)):
            start = time.perf_counter()
            fn()
            walls[name].append(time.perf_counter() - start)
    best = {name: min(times) for name, times in walls.items()}
    print(f"{SMALL} steps of {SMALL_NAP * 1e3:g} ms, {SMALL_WIDTH} wide (wall, best of {repeats}):")
    print(f"  ideal ThreadPoolExecutor({SMALL_WIDTH})     {best['ideal'] * 1e3:7.1f} ms")
    print(f"  Dask, one task per call, all at once {best['dask'] * 1e3:7.1f} ms   ratio {best['dask'] / best['ideal']:5.2f}")
    print(f"  planbook parallel={SMALL_WIDTH} on Dask      {best['planbook'] * 1e3:7.1f} ms   "
          f"ratio {best['planbook'] / best['ideal']:5.2f}   (target ≤ 1.5)")


if __name__ == "__main__":
    main()
