"""Which steps did not run in this run: answered from the step cache, or completed before a resume.

A default never hides work, so every view marks such a step (row, pane, timeline, header).
The marks come from the run's events: ``step.cached`` (the step cache answered, with the
run and step the result came from) and ``run.started`` with ``resumed=True, stored=True`` (a step that
completed before it was not run again). A step whose events are gone (a plan copied out of
a result) is still marked, from its typed mark (:class:`~planbook.data.stepmark.StepMark`).
The words for each mark are here: the runner sets marks, it does not word them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..data.models import Event, Plan, Status, Step
from ..data.stepmark import REUSED

#: the mark a cached or resumed step shows after its status mark
CACHED_MARK = "⟲"


@dataclass(frozen=True)
class CacheMark:
    """Why a completed step did not run here: ``kind`` is ``cached``, ``resumed``, ``kept`` (a fork
    kept its parent's result) or ``pinned`` (a fork gave its result)."""

    step: str
    kind: str
    #: the run the result came from (a cache hit), if known
    from_run: str | None = None
    #: the step of that run, if known
    from_step: str | None = None
    #: when this run took the result (the event's time), if known
    at: float | None = None

    def describe(self) -> str:
        """``cached: the result of step fetch in run R, not run again`` (for a row's tooltip; a pane
        adds when, with :func:`planbook.views.html.cached_text`)."""
        if self.kind == "resumed":
            text = "resumed: completed before the run was resumed, not run again"
        elif self.kind == "kept":
            text = f"kept: the result of step {self.step} in run {self.from_run or 'the parent run'}, not run again (fork)"
        elif self.kind == "pinned":
            text = "pinned: the fork gave this result; the step did not run"
        elif self.from_run:
            text = f"cached: the result of step {self.from_step or self.step} in run {self.from_run}, not run again"
        else:
            text = "cached: a stored result, not run again"
        return text


class MarkBuilder:
    """Finds the marks one event at a time (a live view feeds the events it has not seen yet)."""

    def __init__(self) -> None:
        self.marks: dict[str, CacheMark] = {}
        self._finished: set[str] = set()
        self.seen = 0  # events fed so far

    def feed(self, event: Event) -> None:
        self.seen += 1
        kind, step = event.kind, event.step
        # a step's own events first: a run makes two a step, every other kind is rare
        if (kind == "step.finished" or kind == "step.started") and step is not None:
            if self.marks:
                self.marks.pop(step, None)  # it ran (again) in this run
            if kind == "step.finished":
                self._finished.add(step)
        elif step is not None and kind == "step.cached":
            self.marks[step] = CacheMark(step, "kept" if event.data.get("kept") else "cached",
                                         _text(event.data.get("from_run")),
                                         _text(event.data.get("from_step")), event.time)
        elif kind == "run.started" and event.data.get("resumed") and event.data.get("stored", True):
            # a resume from the store (events stored before ``stored`` existed count as one)
            for step_id in self._finished:
                self.marks.setdefault(step_id, CacheMark(step_id, "resumed", at=event.time))
            self._finished.clear()

    def feed_new(self, events: Sequence[Event]) -> "MarkBuilder":
        """Feed the events after the ones already seen (``events`` only grows during a run)."""
        feed = self.feed
        for event in events[self.seen:]:
            feed(event)
        return self

    def of(self, plan: Plan) -> dict[str, CacheMark]:
        """The marks of the steps of ``plan`` that are completed now (by id)."""
        out: dict[str, CacheMark] = {}
        completed = Status.completed  # read once, not per step
        found = self.marks.get
        for step in plan.steps:
            if step.status is not completed:
                continue
            mark = found(step.id)
            if mark is None and step.mark in REUSED:
                mark = _marked(step)
            if mark is not None:
                out[step.id] = mark
        return out


def cache_marks(events: Iterable[Event], plan: Plan) -> dict[str, CacheMark]:
    """The completed steps of ``plan`` that were answered from the cache or a resume, by id."""
    builder = MarkBuilder()
    events = events if isinstance(events, Sequence) else list(events)
    if any(e.kind == "step.cached" or (e.kind == "run.started" and e.data.get("resumed")) for e in events):
        for event in events:  # only a run the cache or a resume answered has marks from its events
            builder.feed(event)
    return builder.of(plan)


def cached_count_text(marks: dict[str, CacheMark]) -> str:
    """``3 cached · 2 resumed · 14 kept · 1 pinned`` ('' when every step ran)."""
    counts = {kind: 0 for kind in ("cached", "resumed", "kept", "pinned")}
    for mark in marks.values():
        counts[mark.kind] = counts.get(mark.kind, 0) + 1
    return " · ".join(f"{n} {kind}" for kind, n in counts.items() if n)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _marked(step: Step) -> CacheMark:
    """The mark a step carries itself (a plan copied out of a result has no events to tell it)."""
    return CacheMark(step.id, str(step.mark), step.from_run, step.from_step)
