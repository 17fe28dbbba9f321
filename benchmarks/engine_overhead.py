"""Engine overhead per step, measured as ratios in one process.

1. A 2,000-step linear plan of no-op tools, no view, against the same calls in a bare
   loop. Target: under 50 µs of overhead per step (checking the plan included), and
   at most 20 µs per step to run it.
2. Flatness: CPU per step of checking the plan (``Runner(...)``) and of running it, at
   1,000, 10,000 and 100,000 steps, and each phase at 100,000 over 1,000. Target: within 1.3×.
3. What a finished run keeps per step, with the Runner still held (traced memory of the
   Runner and its result). Target: at most 2 KiB.
4. A live view's cost: CPU of 1,000 fast steps with the notebook widget view attached
   (a heartbeat, steps on a worker thread, throttled redraws, result panes for the steps
   near the running ones) over the same run without a view. Target: at most 1.3×.

CPU time (process_time) is measured and runs are interleaved, so other load on the
machine disturbs the ratios less. Run: python benchmarks/engine_overhead.py [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Callable

import planbook
from planbook.data.models import Plan, Step


def noop(x: int) -> int:
    """Return x."""
    return x


TOOLS = planbook.Toolbox([noop])


def linear(n: int) -> Plan:
    return Plan(id="bench", goal="overhead", steps=[Step(id=str(i), tool="noop", args={"x": i}) for i in range(1, n + 1)])


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def overhead(n: int = 2000, repeats: int = 5) -> None:
    plan = linear(n)
    bare, check, run = [], [], []
    for _ in range(repeats):  # interleaved, so machine noise hits all alike
        bare.append(cpu(lambda: [noop(x=i) for i in range(1, n + 1)]))
        t0 = time.process_time()
        runner = planbook.Runner(plan, tools=TOOLS, max_steps=n)
        t1 = time.process_time()
        result = runner.run()
        run.append(time.process_time() - t1)
        check.append(t1 - t0)
        assert result.ok and result.executions == n, result.error
    b, c, r = min(bare), min(check), min(run)
    print(f"1. {n} steps, best of {repeats} (CPU time)")
    print(f"   bare loop        {b / n * 1e6:8.2f} µs/call")
    print(f"   check the plan   {c / n * 1e6:8.2f} µs/step")
    print(f"   run it           {r / n * 1e6:8.2f} µs/step   (target ≤ 20)")
    print(f"   overhead         {(c + r - b) / n * 1e6:8.2f} µs/step   (target < 50)")


def flatness(sizes: tuple[int, ...] = (1000, 10_000, 100_000)) -> None:
    check: dict[int, float] = {}
    run: dict[int, float] = {}
    for n in sizes:
        plan = linear(n)
        repeats = max(2, min(7, 200_000 // n)) if n >= 1000 else 1
        checks, runs = [], []
        for _ in range(repeats):
            gc.collect()  # the garbage of the last size is not this one's cost
            t0 = time.process_time()
            runner = planbook.Runner(plan, tools=TOOLS, max_steps=n)
            t1 = time.process_time()
            assert runner.run().ok
            runs.append(time.process_time() - t1)
            checks.append(t1 - t0)
            del runner
        check[n], run[n] = min(checks) / n, min(runs) / n
    small, large = sizes[0], sizes[-1]
    print(f"2. per step (CPU, best of several) at {', '.join(f'{n:,}' for n in sizes)} steps:")
    print("   check the plan  " + "  ".join(f"{check[n] * 1e6:6.2f} µs" for n in sizes)
          + f"   {large:,}/{small:,}: {check[large] / check[small]:.2f}   (target ≤ 1.3)")
    print("   run it          " + "  ".join(f"{run[n] * 1e6:6.2f} µs" for n in sizes)
          + f"   {large:,}/{small:,}: {run[large] / run[small]:.2f}   (target ≤ 1.3)")


def memory(n: int = 2000) -> None:
    plan = linear(n)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    runner = planbook.Runner(plan, tools=TOOLS, max_steps=n)
    result = runner.run()
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before  # the Runner is still held, with its result
    tracemalloc.stop()
    assert result.ok and runner.finished
    print(f"3. kept per step, Runner included: {kept / n / 1024:.2f} KiB   (target ≤ 2; the plan, history, events,"
          f" timing and outputs of {n} steps)")


def live_view(n: int = 1000, repeats: int = 3) -> None:
    try:
        from planbook.views.live import LiveView
        from planbook.views.widget import PlanView
    except ImportError as exc:  # pragma: no cover - ipywidgets is a dependency
        print(f"4. live view: skipped ({exc})")
        return
    plan = linear(n)

    def plain() -> None:
        assert planbook.Runner(plan, tools=TOOLS, max_steps=n).run().ok

    built: list[int] = []

    def viewed() -> None:
        runner = planbook.Runner(plan, tools=TOOLS, max_steps=n)
        view = PlanView(runner)
        bridge = LiveView(runner, view)
        try:
            assert runner.run().ok
        finally:
            bridge.close()
        built.append(len(view.panes))

    without, with_view = [], []
    for _ in range(repeats):
        without.append(cpu(plain))
        with_view.append(cpu(viewed))
    ratio = min(with_view) / min(without)
    print(f"4. {n} fast steps: no view {min(without) * 1e3:.1f} ms, live widget view {min(with_view) * 1e3:.1f} ms CPU"
          f"   ratio {ratio:.2f}   (target ≤ 1.3); result panes built during the run: {max(built)} of {n}"
          " (the others on a click)")


if __name__ == "__main__":
    if "--quick" in sys.argv[1:]:
        overhead(200, repeats=1)
        flatness((100, 1000))
        memory(200)
        live_view(100, repeats=1)
    else:
        overhead()
        flatness()
        memory()
        live_view()
