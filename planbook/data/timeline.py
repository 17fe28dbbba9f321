"""The timeline of a run: overlaps between executions and the critical path.

One definition for the engine (``RunResult.timeline``, from the runner's records) and
the views (the live Timeline tab, from events, with executions still open), so both
highlight the same path. Records are anything with ``execution``, ``step``, ``start``
and ``end`` (``None`` while running).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .models import Execution, Step, Timeline, TimelineEntry


def overlaps_of(records: Sequence[Any], now: float | None = None) -> dict[int, list[int]]:
    """For each execution, the executions that ran at the same time (a sweep by start time).

    An execution still running counts as running until ``now`` (or for ever).
    """
    until = float("inf") if now is None else now
    found: dict[int, list[int]] = {r.execution: [] for r in records}
    active: list[tuple[float, int]] = []  # (end, execution) of the executions started so far
    for r in sorted(records, key=lambda r: (r.start, r.execution)):
        while active and active[0][0] <= r.start:
            heapq.heappop(active)
        for _, other in active:
            found[other].append(r.execution)
            found[r.execution].append(other)
        heapq.heappush(active, (r.end if r.end is not None else until, r.execution))
    return {k: sorted(v) for k, v in found.items()}


def critical_chain(records: Sequence[Any], needs_of: Callable[[int, Any], Iterable[str]]) -> tuple[list[int], float]:
    """The longest chain of finished executions that had to run one after another, and its length.

    An execution waits for the latest earlier execution of each step it needs and for the
    previous attempt of its own step. ``records`` are in the order they were recorded;
    ``needs_of(i, record)`` gives the steps record ``i`` needed.
    """
    latest: dict[str, int] = {}  # step id -> index of its latest finished execution so far
    length: dict[int, float] = {}
    previous: dict[int, int | None] = {}
    for i, r in enumerate(records):
        end = r.end
        if end is None:
            continue
        step = r.step
        # the longest chain among the executions waited for: the first of the longest, in the
        # order of the needs and then the step's own previous attempt
        best: int | None = None
        best_length = 0.0
        for s in needs_of(i, r):
            j = latest.get(s)
            if j is not None and (best is None or length[j] > best_length):
                best, best_length = j, length[j]
        j = latest.get(step)
        if j is not None and (best is None or length[j] > best_length):
            best, best_length = j, length[j]
        took = end - r.start
        length[i] = (0.0 if took < 0.0 else took) + best_length
        previous[i] = best
        latest[step] = i
    if not length:
        return [], 0.0
    end = max(length, key=lambda j: length[j])
    path: list[int] = []
    at: int | None = end
    while at is not None:
        path.append(records[at].execution)
        at = previous[at]
    path.reverse()
    return path, length[end]


def build_timeline(records: Sequence[Execution], history: Sequence[Step]) -> Timeline:
    """``records[i]`` and ``history[i]`` describe the same execution (history has its needs)."""
    if not records:
        return Timeline()
    overlaps = overlaps_of(records)
    path, critical = critical_chain(records, lambda i, r: history[i].needs if i < len(history) else ())
    entries = [
        TimelineEntry.model_construct(execution=r.execution, step=r.step, attempt=r.attempt, revision=r.revision,
                                      worker=r.worker, start=r.start, end=r.end, ok=r.ok,
                                      overlaps=overlaps[r.execution])
        for r in records
    ]
    wall = max(r.end for r in records) - min(r.start for r in records)
    return Timeline.model_construct(executions=entries, critical_path=path, wall=wall, critical=critical)
