"""Steering: what a background run costs, and how fast a decision starts its step.

Prints, measured in one run each:
- the CPU time of 2,000 no-op steps run in the background (``planbook.start(...).wait()``)
  over the same run in the foreground (``planbook.run``): target about 1 (a background run
  adds a thread, not work per step);
- the same foreground run with a tool that asks and an ``approve=`` callable that approves,
  over the run with no approvals: the cost of asking, per step;
- the time from ``handle.approve(id)`` on this thread to the step's ``step.started`` event on
  the run's thread, median over 50 steps that each wait (target < 300 ms end to end in a
  browser, where ``tests/browser/test_browser_steering.py`` prints the click-to-start figure).
Run: python benchmarks/steering.py [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

import planbook

STEPS, ASKS = (100, 5) if "--quick" in sys.argv[1:] else (2000, 50)


def noop(i: int) -> int:
    """Return i."""
    return i


def spec(n: int, tool: str = "noop") -> str:
    return "steps:\n" + "".join(f"  - {{id: s{i}, tool: {tool}, args: {{i: {i}}}}}\n" for i in range(n))


def cpu(fn: object) -> float:
    start = time.process_time()
    fn()  # type: ignore[operator]
    return time.process_time() - start


def main() -> None:
    box = planbook.Toolbox([noop])
    box.add(noop, name="asks", approve=True)
    plan = spec(STEPS)
    planbook.run(plan, tools=box, max_steps=STEPS)  # warm up
    foreground = cpu(lambda: planbook.run(plan, tools=box, max_steps=STEPS))
    background = cpu(lambda: planbook.start(plan, tools=box, max_steps=STEPS, view=False).wait())
    asking = cpu(lambda: planbook.run(spec(STEPS, "asks"), tools=box, max_steps=STEPS,
                                      approve=lambda step, context: planbook.Decision.approve()))
    print(f"{STEPS} no-op steps, CPU: foreground {foreground * 1000:.0f} ms, background {background * 1000:.0f} ms "
          f"(ratio {background / foreground:.2f}); every step asking a callable {asking * 1000:.0f} ms "
          f"(ratio {asking / foreground:.2f}, {(asking - foreground) / STEPS * 1e6:.1f} µs per step)")

    started: dict[str, float] = {}
    waiting = threading.Condition()

    def on_event(event: planbook.Event) -> None:
        if event.kind == "step.started" and event.step:
            started[event.step] = time.perf_counter()
        if event.kind in ("step.started", "step.waiting"):
            with waiting:
                waiting.notify_all()

    handle = planbook.start(spec(ASKS, "asks"), tools=box, max_steps=ASKS, view=False, on_event=on_event)
    latencies = []
    for i in range(ASKS):
        with waiting:
            waiting.wait_for(lambda: handle.waiting == [f"s{i}"], 30)
        at = time.perf_counter()
        handle.approve(f"s{i}")
        with waiting:
            waiting.wait_for(lambda: f"s{i}" in started, 30)
        latencies.append((started[f"s{i}"] - at) * 1000)
    handle.wait(30)
    print(f"handle.approve to step.started, median over {ASKS}: {statistics.median(latencies):.2f} ms "
          f"(max {max(latencies):.2f} ms)")


if __name__ == "__main__":
    main()
