"""Engine overhead per step: a 2,000-step linear plan of no-op tools with no view
attached, against the same calls in a bare Python loop, measured in one process.

Target: under 50 µs of overhead per step for the whole ``planbook.run`` (checking the
plan before it runs included). Prints the figures, the split between checking and
running, and the ratio. CPU time (process_time) is measured, so other load on the
machine disturbs the figures less. Run: python benchmarks/engine_overhead.py [N]
"""

from __future__ import annotations

import sys
import time

import planbook
from planbook.models import Plan, Step


def noop(x: int) -> int:
    """Return x."""
    return x


def main(n: int = 2000, repeats: int = 5) -> None:
    tools = planbook.Toolbox([noop])
    plan = Plan(id="bench", goal="overhead", steps=[Step(id=str(i), tool="noop", args={"x": i}) for i in range(1, n + 1)])

    bare_times, check_times, run_times = [], [], []
    for _ in range(repeats):  # interleave, so machine noise hits all alike
        t0 = time.process_time()
        for i in range(1, n + 1):
            noop(x=i)
        bare_times.append(time.process_time() - t0)

        t0 = time.process_time()
        runner = planbook.Runner(plan, tools=tools, max_steps=n)  # validation and copying
        t1 = time.process_time()
        result = runner.run()
        t2 = time.process_time()
        check_times.append(t1 - t0)
        run_times.append(t2 - t1)
        assert result.status == "completed" and result.executions == n, result.error

    bare, check, execution = min(bare_times), min(check_times), min(run_times)
    total = check + execution
    overhead_us = (total - bare) / n * 1e6
    print(f"steps: {n} (best of {repeats}, CPU time)")
    print(f"bare loop:        {bare * 1e3:9.2f} ms  ({bare / n * 1e6:7.2f} µs/call)")
    print(f"check the plan:   {check * 1e3:9.2f} ms  ({check / n * 1e6:7.2f} µs/step)")
    print(f"run it:           {execution * 1e3:9.2f} ms  ({execution / n * 1e6:7.2f} µs/step)")
    print(f"overhead:         {overhead_us:9.2f} µs/step   (target < 50 µs)")
    print(f"ratio planbook.run/bare: {total / bare:.0f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
