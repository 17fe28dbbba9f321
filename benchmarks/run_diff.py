"""What comparing two runs costs: ``diff_runs`` and its static HTML, in CPU time, and the HTML's size.

The runs: a chain of N steps (each adds one to the last's result) run once, and a fork of it with
new arguments at the middle step, so half the rows change (the fork re-runs them) and half are
kept; N = 1,000 and N = 100. Targets (issue 35): ``diff_runs`` of two 1,000-step runs within 50 ms
of CPU, its HTML within 100 ms and 150 kB; the HTML of two 100-step runs within 40 kB. Also the
worst case for size: a fork at the first step (every row changes).

Run: ``python benchmarks/run_diff.py [--quick]`` (a few seconds; ``--quick``: a tenth of the sizes, figures meaningless). CPU time is ``time.process_time``, the
median of several repeats; the figures are printed with whether each target is met.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import planbook  # noqa: E402
from planbook.data.rundiff import diff_runs  # noqa: E402
from planbook.engine.fork import fork  # noqa: E402

QUICK = "--quick" in sys.argv  # a tenth of the sizes, one repeat: the figures mean nothing
REPEATS = 1 if QUICK else 7
SCALE = 10 if QUICK else 1


@planbook.tool
def inc(x: int, by: int = 1) -> int:
    return x + by


def chain(n: int) -> planbook.Plan:
    steps: list[dict[str, Any]] = [{"id": f"s{i}", "tool": "inc", "args": {"x": 0} if i == 1 else {"x": f"$s{i - 1}"}}
                                   for i in range(1, n + 1)]
    return planbook.Plan.model_validate({"id": f"chain-{n}", "goal": f"a chain of {n} steps", "steps": steps})


def cpu_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    """The median CPU milliseconds of ``fn()`` over :data:`REPEATS` calls, and its last value."""
    times, value = [], None
    for _ in range(REPEATS):
        start = time.process_time()
        value = fn()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times), value


def measure(n: int, at: int) -> dict[str, float]:
    base = planbook.run(chain(n), tools=[inc], max_steps=n + 10)
    child = fork(base, at=f"s{at}", args={"x": 1000}, tools=[inc], max_steps=n + 10)
    diff_ms, diff = cpu_ms(lambda: diff_runs(base, child))
    html_ms, html = cpu_ms(lambda: diff.html())
    return {"diff_ms": diff_ms, "html_ms": html_ms, "kb": len(html.encode()) / 1000,
            "changed": len(diff.changed_steps())}


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "NOT met"


def main() -> None:
    print(f"diff_runs and its HTML (CPU ms, median of {REPEATS}; HTML size in kB)")
    for n, at, targets in ((1000, 500, {"diff_ms": 50, "html_ms": 100, "kb": 150}),
                           (100, 50, {"kb": 40}),
                           (1000, 1, {"kb": 150}),
                           (100, 1, {"kb": 40})):
        n, at = n // SCALE, max(at // SCALE, 1)
        got = measure(n, at)
        line = (f"  {n:>5} steps, fork at s{at:<4} ({got['changed']:>4} rows changed): diff {got['diff_ms']:6.1f} ms, "
                f"HTML {got['html_ms']:6.1f} ms, {got['kb']:6.1f} kB")
        checks = [f"{name} ≤ {limit}: {verdict(got[name], limit)}" for name, limit in targets.items()]
        print(line + "   [" + "; ".join(checks) + "]")


if __name__ == "__main__":
    main()
