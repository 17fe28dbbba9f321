"""What the static record of a run costs: its bytes and the time to build it.

The record is what a saved notebook keeps of a run (what git stores, GitHub renders and
nbval compares), and it is sent on the kernel's IOPub when the run ends. Targets (issue
"the live view as a user's kernel pays for it"): at most 120 kB for 1,000 steps, 30 kB for
a typical 10-step run, built in at most 10 ms for 1,000 steps.

Two kinds of run at 10, 100 and 1,000 steps:

- ``serial``: a chain of steps, each using the one before, some printing a line;
- ``mixed``: four parallel chains (lanes), every 25th step failing once and retried, and
  one failure that is replanned (a new revision).

Prints, per run: the bytes of the record's HTML, of the whole display that replaces the live
view (``record_bundle``: text/plain and text/html) and the build time (best of N).

    python benchmarks/record_size.py          # 10, 100, 1000 steps, best of 5
    python benchmarks/record_size.py --quick  # 10 and 100 steps, one build (checks it still works)
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import planbook
from planbook import ScriptedPlanner
from planbook.views.html import result_html, state_html
from planbook.views.record import record_bundle
from planbook.views.state import ViewState


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()
    failed: set[str] = set()

    @tools.tool
    def inc(x: int, tag: str = "") -> int:
        "Add one (prints a line now and then)."
        if x % 7 == 0:
            print(f"step at {x}")
        return x + 1

    @tools.tool(cache=False)
    def flaky(x: int, tag: str) -> int:
        "Fails on its first call."
        if tag not in failed:
            failed.add(tag)
            raise ConnectionError(f"flaky {tag}: try again")
        return x + 1

    @tools.tool(cache=False)
    def broken(x: int) -> int:
        "Always fails: the planner replaces it."
        raise ValueError("broken step: replan")

    return tools


def serial(n: int) -> planbook.RunResult:
    steps = ["  - {id: s1, task: Step 1, tool: inc, args: {x: 1}}"]
    steps += [f"  - {{id: s{i}, task: Step {i}, tool: inc, args: {{x: $s{i - 1}}}}}" for i in range(2, n + 1)]
    result = planbook.run("goal: a serial run\nsteps:\n" + "\n".join(steps), tools=_tools(), max_steps=n)
    assert result.status == "completed", result.error
    return result


def mixed(n: int, lanes: int = 4) -> planbook.RunResult:
    per = max(1, n // lanes)
    steps: list[dict[str, Any]] = []
    for lane in range(lanes):
        for i in range(per):
            sid = f"l{lane}s{i}"
            tool = "flaky" if (lane * per + i) % 25 == 3 else "inc"
            args: dict[str, Any] = {"x": i, "tag": sid} if i == 0 else {"x": f"${steps[-1]['id']}", "tag": sid}
            step = {"id": sid, "task": f"Lane {lane} step {i}", "tool": tool, "args": args}
            if i:
                step["needs"] = [steps[-1]["id"]]
            steps.append(step)
    steps[-1] = {**steps[-1], "tool": "broken", "args": {"x": 1}}
    fix = [{"id": "fix", "task": "Do it another way", "tool": "inc", "args": {"x": 1}}]
    planner = ScriptedPlanner({None: steps, "broken step": fix})
    result = planbook.run("a mixed run", planner=planner, tools=_tools(), on_failure=["retry", "replan"], retries=1,
                          parallel=lanes, max_steps=2 * n + 10)
    assert result.status == "completed", result.error
    return result


def best_ms(build: Any, repeat: int) -> float:
    """The least CPU time (ms) of ``repeat`` builds (CPU, not wall: the machine may be shared)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        build()
        best = min(best, time.process_time() - start)
    return best * 1000


def measure(result: planbook.RunResult, repeat: int) -> tuple[int, int, float, float]:
    """(bytes of the record's HTML, bytes of the whole display, build ms from the view's state,
    build ms from the run result)."""
    state = ViewState.of_result(result)
    html = state_html(state)
    assert html == result_html(result)
    bundle = sum(len(part.encode()) for part in record_bundle(state).values())  # what replaces the live view
    return (len(html.encode()), bundle, best_ms(lambda: state_html(state), repeat),
            best_ms(lambda: result_html(result), repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 and 100 steps, one build each")
    args = parser.parse_args()
    sizes, repeat = ((10, 100), 1) if args.quick else ((10, 100, 1000), 5)
    print(f"{'run':<8} {'steps':>6} {'record HTML':>12} {'whole display':>14} {'build':>10} {'from result':>12}")
    for kind, make in (("serial", serial), ("mixed", mixed)):
        for n in sizes:
            result = make(n)
            html, bundle, ms, from_result = measure(result, repeat)
            print(f"{kind:<8} {n:>6} {html / 1000:>9.1f} kB {bundle / 1000:>11.1f} kB {ms:>7.1f} ms "
                  f"{from_result:>9.1f} ms")
    print("build: the record from the live view's state (what a view pays when its run ends); from result: "
          "with the view's state built from the run's events (result_html); CPU time, best of the repeats")
    print("targets: record HTML <= 120 kB for 1,000 steps, <= 30 kB for 10; built in <= 10 ms for 1,000 steps")


if __name__ == "__main__":
    main()
