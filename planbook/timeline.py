"""The timeline of a run: overlaps between executions and the critical path.

Computed from the small :class:`~planbook.models.Execution` records the runner keeps,
only when a result is asked for.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from .models import Execution, Step, Timeline, TimelineEntry


def build_timeline(records: Sequence[Execution], history: Sequence[Step]) -> Timeline:
    """``records[i]`` and ``history[i]`` describe the same execution (history has its needs)."""
    if not records:
        return Timeline()
    overlaps: dict[int, list[int]] = {r.execution: [] for r in records}
    active: list[tuple[float, int]] = []  # (end, execution) of executions started so far
    for r in sorted(records, key=lambda r: (r.start, r.execution)):
        while active and active[0][0] <= r.start:
            heapq.heappop(active)
        for _, other in active:
            overlaps[other].append(r.execution)
            overlaps[r.execution].append(other)
        heapq.heappush(active, (r.end, r.execution))

    # longest chain: an execution waits for the latest execution of each step it needs
    # and for the previous attempt of its own step
    latest: dict[str, int] = {}  # step id -> index of its latest execution so far
    length: list[float] = []
    previous: list[int | None] = []
    for i, r in enumerate(records):
        needs = history[i].needs if i < len(history) else []
        before = [latest[s] for s in (*needs, r.step) if s in latest]
        best = max(before, key=lambda j: length[j], default=None)
        length.append(max(r.end - r.start, 0.0) + (length[best] if best is not None else 0.0))
        previous.append(best)
        latest[r.step] = i
    end = max(range(len(records)), key=lambda j: length[j])
    path: list[int] = []
    at: int | None = end
    while at is not None:
        path.append(records[at].execution)
        at = previous[at]
    path.reverse()
    entries = [
        TimelineEntry.model_construct(execution=r.execution, step=r.step, attempt=r.attempt, revision=r.revision,
                                      worker=r.worker, start=r.start, end=r.end, ok=r.ok,
                                      overlaps=sorted(overlaps[r.execution]))
        for r in records
    ]
    wall = max(r.end for r in records) - min(r.start for r in records)
    return Timeline.model_construct(executions=entries, critical_path=path, wall=wall, critical=length[end])
