"""Reading an AgenticSeek answer: ``parse_answer`` must grow linearly with the number of tasks.

An answer of N tasks (a headline per task, then one ```json plan in which each task needs the
one before) is read by ``planbook.compat.agenticseek.parse_answer``, by default and as
upstream reads it (``faithful=True``). Each row prints the best CPU time of a few runs and
the cost per task against the smallest size, measured in this run: a ratio near 1 is
linear (it was 12x at 8,000 tasks when each task's needs were checked against a list of
the earlier ids rebuilt for every task).

Run: python benchmarks/parse_answer.py [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import json
import sys
import time

from planbook.compat.agenticseek_answers import parse_answer

QUICK = "--quick" in sys.argv[1:]
SIZES = (100, 800) if QUICK else (1_000, 8_000)
REPEATS = 1 if QUICK else 3


def answer(tasks: int) -> str:
    plan = [{"agent": "web", "id": str(i), "need": [str(i - 1)] if i > 1 else [], "task": f"task {i}"}
            for i in range(1, tasks + 1)]
    headlines = "".join(f"## Task {i}: task {i}\n" for i in range(1, tasks + 1))
    return headlines + "```json\n" + json.dumps({"plan": plan}) + "\n```\n"


def best_cpu(text: str, faithful: bool) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        parse_answer(text, faithful=faithful)
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    for faithful in (False, True):
        base = None
        for size in SIZES:
            cpu = best_cpu(answer(size), faithful)
            per_task = cpu / size
            base = base or per_task
            print(f"faithful={faithful!s:5}  {size:>6} tasks: {cpu * 1000:7.1f} ms CPU, "
                  f"{per_task * 1e6:5.1f} us a task, {per_task / base:4.2f}x the cost a task at {SIZES[0]}")


if __name__ == "__main__":
    main()
