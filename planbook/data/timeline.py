"""What one execution of a step was, and the timeline of a run: overlaps and the critical path.

:class:`Execution` is the one record of an execution: the engine's ``RunResult.records``, a
stored run's records and every view's timeline bar are this type, built by one
:class:`TimelineBuilder` from the run's events and history (a store keeps both), so a run
reads the same live, finished or loaded back. :class:`Timeline` (``RunResult.timeline``) and
the views share one definition of overlaps and of the critical path.

This module imports nothing of planbook but the collector's window: the models import it, not
the reverse.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import BaseModel, Field

from .gcwindow import collector_paused, worth_keeping

__all__ = ["Execution", "Timeline", "TimelineBuilder", "build_timeline", "critical_chain", "overlaps_of",
           "records_of", "with_overlaps"]


class _Event(Protocol):
    """What the builder reads of an event (:class:`planbook.data.models.Event`): read only, so an
    event whose ``kind`` is narrower (a Literal) is one."""

    @property
    def kind(self) -> str: ...
    @property
    def time(self) -> float: ...
    @property
    def step(self) -> str | None: ...
    @property
    def revision(self) -> int: ...
    @property
    def data(self) -> dict[str, Any]: ...


class _Step(Protocol):
    """What the timeline reads of a history entry (:class:`planbook.data.models.Step`)."""

    id: str
    needs: list[str]
    started_at: float | None
    finished_at: float | None


@dataclass(slots=True)  # one a step, live and finished: slots make that half the work
class Execution:
    """One execution of a step: when and where its call ran, and how it ended (a bar of the timeline).

    ``end`` and ``ok`` are None while it runs. ``overlaps`` (the executions that ran at the
    same time) is filled by a timeline; it says nothing of this execution alone, so two
    records of one execution are equal whatever their timeline filled in.
    """

    execution: int
    step: str
    attempt: int
    revision: int
    worker: str | None
    start: float
    end: float | None = None
    ok: bool | None = None
    error: str | None = None
    overlaps: list[int] | tuple[int, ...] = field(default=(), compare=False)  # a list once filled; () shared until then
    #: closed by an interrupt while its call ran; a call kept when the run continues ends it
    interrupted: bool = False

    @property
    def duration(self) -> float:
        """Seconds the call took (0 while it runs)."""
        return self.end - self.start if self.end is not None else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"execution": self.execution, "step": self.step, "attempt": self.attempt, "revision": self.revision,
                "worker": self.worker, "start": self.start, "end": self.end, "ok": self.ok,
                "overlaps": list(self.overlaps)}


class TimelineBuilder:
    """Builds the executions from events, one event at a time (a live view feeds it as they come).

    The execution number comes from the event's data when the engine gives it, else from
    the order of ``step.started`` events. Events of different steps may interleave
    (parallel runs): each step has at most one open execution.

    ``history``: the run's history (a list the run appends to, read as events come). The
    runner appends an entry, then tells ``step.finished`` or ``step.failed``, for every
    execution it records, so the n-th such event goes with ``history[n]``, whose times are
    the call's own (read where it ran). A call handed to an executor (whose step keeps the
    run's times) carries its own in the event's ``call_start`` and ``call_end``, which win.
    Without either (or for an entry of another step) an
    execution starts at its ``step.started`` and lasts the event's ``duration``. Where it ran
    is the ``step.started``'s ``worker`` (the executor), or the thread a pool ran it on when
    the ending event names one.
    """

    def __init__(self, history: Sequence[_Step] | None = None) -> None:
        self.history = history
        self._ended = 0  # step.finished / step.failed events fed so far
        self.executions: list[Execution] = []
        self._open: dict[str, Execution] = {}
        self._interrupted: dict[str, Execution] = {}  # step -> its execution an interrupt closed
        self._count = 0
        self.origin: float | None = None  # the time of the first event: timeline times are relative to it
        self._worked = 0.0  # the run's working time before its current stretch
        self._since: float | None = None  # when the current stretch of work began (None: not working)
        self._ran = False
        self.seen = 0  # events fed so far
        self._last: float | None = None  # the time of the event before this one

    def feed(self, event: _Event) -> Execution | None:
        """Account for one event; returns the execution it started or ended, if any."""
        self.seen += 1
        kind = event.kind
        last, self._last = self._last, event.time
        if self.origin is None and kind != "llm.call":  # the calls that planned a run come before it
            self.origin = event.time
        # the kinds in the order a run makes them most (two step events a step)
        if kind == "step.started":
            step = event.step
            if step is None:
                return None
            if self._interrupted:
                self._interrupted.pop(step, None)  # it runs again: the interrupted bar stays as it was
            data = event.data
            count = self._count + 1
            number = data.get("execution") or count
            if type(number) is not int:
                number = int(number)
            self._count = number if number > count else count
            attempt = data.get("attempt") or 1
            worker = data.get("worker")
            new = Execution(number, step, attempt if type(attempt) is int else int(attempt), event.revision,
                            worker if worker is None or type(worker) is str else str(worker), event.time)
            self._open[step] = new
            self.executions.append(new)
            return new
        if kind == "step.finished" or kind == "step.failed":
            step = event.step
            if step is None:
                return None
            data = event.data
            ended, history = self._ended, self.history
            self._ended = ended + 1
            ex = self._open.pop(step, None)
            if ex is None:  # a call that completed while the run was interrupted, kept when it continued
                ex = self._interrupted.pop(step, None)
                if ex is None or data.get("execution") not in (None, ex.execution):
                    return None
                ex.interrupted, ex.error = False, None
            entry = history[ended] if history is not None and ended < len(history) else None
            own = data.get("call_start")
            if own is not None:  # the call's own times, where the step's are the run's (an executor's batch)
                ex.start, ex.end = float(own), float(data.get("call_end") or own)
            elif entry is not None and entry.id == step and entry.started_at is not None \
                    and entry.finished_at is not None:
                ex.start, ex.end = entry.started_at, entry.finished_at
            else:
                duration = data.get("duration")
                if type(duration) is float:
                    ex.end = ex.start + duration
                else:
                    ex.end = ex.start + float(duration) if isinstance(duration, (int, float)) else event.time
            worker = data.get("worker")
            if worker is not None:
                ex.worker = worker if type(worker) is str else str(worker)
            ex.ok = kind == "step.finished"
            if not ex.ok:
                ex.error = str(data.get("error") or "")
            return ex
        if kind == "run.started":
            self._ran = True
            if self._open or self._since is not None:
                # a run that never said it ended (its process died: a kernel restart) goes on from
                # its store: it stopped at its last event, not here (the gap is no one's time)
                self._close_open(last if last is not None else event.time)
            if self._since is None:
                self._since = event.time
        elif kind == "run.paused" or kind == "run.finished":
            if self._since is not None:
                self._worked += max(0.0, event.time - self._since)
                self._since = None
            if kind == "run.finished":  # an interrupted step never finishes: close its bar where the run stopped
                self._close_open(event.time)
        return None

    def _close_open(self, at: float) -> None:
        """The run stopped at ``at`` with calls running: their bars end there, interrupted."""
        if self._since is not None:
            self._worked += max(0.0, at - self._since)
            self._since = None
        for ex in self._open.values():
            ex.end, ex.ok, ex.interrupted = max(at, ex.start), False, True
            ex.error = "interrupted"
            self._interrupted[ex.step] = ex
        self._open.clear()

    def feed_new(self, events: Sequence[_Event], end: int | None = None) -> "TimelineBuilder":
        """Feed the events after the ones already fed (up to ``end``): a live view reads a run's
        record, which only grows, when it draws."""
        feed = self.feed
        for event in events[self.seen:end]:
            feed(event)
        return self

    def working_time(self, now: float | None = None) -> float | None:
        """The run's working time: every stretch from ``run.started`` to the ``run.paused`` or
        ``run.finished`` that ends it, summed, plus the current stretch up to ``now``. Time
        paused at a breakpoint or after an interrupt is not counted. None before the run starts."""
        if not self._ran:
            return None
        going = max(0.0, now - self._since) if self._since is not None and now is not None else 0.0
        return self._worked + going

    def feed_all(self, events: Iterable[_Event]) -> "TimelineBuilder":
        for event in events:
            self.feed(event)
        return self


def with_overlaps(executions: Sequence[Execution], now: float | None = None) -> list[Execution]:
    """Fill each execution's ``overlaps`` (the executions that ran at the same time)."""
    found = overlaps_of(executions, now)
    for ex in executions:
        ex.overlaps = found[ex.execution]
    return list(executions)



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


def records_of(history: Sequence[_Step], events: Sequence[_Event]) -> list[Execution]:
    """A run's records: its executions that ended (an execution an interrupt cut did not
    happen: it is not counted, and runs again), in the order they started.

    The records live as long as the result: made with the collector paused (no user code runs
    here), and a long run's go straight to the oldest generation (see gcwindow).
    """
    with collector_paused(keep=worth_keeping(len(history))):
        built = TimelineBuilder(history).feed_all(events).executions
    return [ex for ex in built if ex.end is not None and not ex.interrupted]


class Timeline(BaseModel):
    """When each execution ran, on which worker, and the run's critical path.

    ``critical_path`` lists execution numbers along the longest chain of work that had to
    happen one after another (a step after the steps it needs, a retry after its
    attempt); ``critical`` is its length in seconds and ``wall`` the run's span, so
    ``wall / critical`` near 1 means the run was as fast as its dependencies allow.
    """

    executions: list[Execution] = Field(default_factory=list)
    critical_path: list[int] = Field(default_factory=list)
    wall: float = 0.0
    critical: float = 0.0

    def __str__(self) -> str:
        lines = [f"wall {self.wall:.3f} s, critical path {self.critical:.3f} s "
                 f"({' → '.join(str(e) for e in self.critical_path) or 'empty'})"]
        origin = min((e.start for e in self.executions), default=0.0)
        for e in self.executions:
            mark = "✓" if e.ok else "✗"
            end = e.end if e.end is not None else e.start
            lines.append(f"#{e.execution:<4} {e.step:<16} {mark} {e.start - origin:8.3f} → {end - origin:8.3f}"
                         f"  {e.worker}" + (f"  overlaps {e.overlaps}" if e.overlaps else ""))
        return "\n".join(lines)


def build_timeline(records: Sequence[Execution], history: Sequence[_Step]) -> Timeline:
    """The timeline of finished ``records`` (copies, with their overlaps). An execution waited
    for the needs its step had when it ran: the history entry it made (a step's executions end
    in the order they start, so its k-th record is its k-th entry); a replan may change them."""
    done = [r for r in records if r.end is not None]
    if not done:
        return Timeline()
    entries_of: dict[str, list[list[str]]] = {}
    for h in history:
        entries_of.setdefault(h.id, []).append(h.needs)
    made: dict[str, int] = {}
    needs: list[Sequence[str]] = []
    for r in done:
        k = made.get(r.step, 0)
        made[r.step] = k + 1
        own = entries_of.get(r.step, ())
        needs.append(own[k] if k < len(own) else own[-1] if own else ())
    overlaps = overlaps_of(done)
    path, critical = critical_chain(done, lambda i, r: needs[i])
    entries = [replace(r, overlaps=overlaps[r.execution]) for r in done]
    wall = max(r.end for r in done if r.end is not None) - min(r.start for r in done)
    return Timeline.model_construct(executions=entries, critical_path=path, wall=wall, critical=critical)
