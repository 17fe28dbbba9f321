"""The bridge from a runner's events to a live view, throttled (which view to show is
chosen in :mod:`planbook.views.show`, which imports this module and the views).

The runner calls its handlers and heartbeats on its own thread (in a notebook: the
kernel's main thread), and this bridge draws only on the thread that made it: it never
starts a thread, and events from other threads wait for the next draw there. Steps can
finish thousands of times a second and the notebook server caps iopub traffic, so draws
go through a token bucket (a short burst, then about ``rate`` per second); the final
state is always drawn when the run pauses or finishes. A draw the bucket held back is
not lost: the bridge is the runner's heartbeat, called while a slow step works, and
draws what is pending as soon as the bucket allows.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

from ..data.models import Event, RunResult, Usage
from ..data.timeline import TimelineBuilder
from .html import NO_MATH
from .publish import ensure_checkpoint, update_display
from .state import LIVE_ROWS, ViewState, verdict_line

FLUSH_NOW = frozenset({"run.paused", "run.finished"})

#: above the static copy of a live view (shown where widgets do not run, e.g. on GitHub)
LIVE_NOTE = "Live view (where widgets do not run, this is how the run stood when the cell finished)"


class ViewTarget(Protocol):
    def render(self, state: ViewState) -> None: ...


class Throttle:
    """A token bucket: ``burst`` updates at once, then ``rate`` per second on average.

    Asked again before the next token is due, it answers "not yet" from the time it worked
    out then (one clock reading, no arithmetic): a fast run asks on every event.
    """

    def __init__(self, rate: float = 10.0, burst: int = 3, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.last = clock()
        #: before this time the bucket holds less than a token (-inf: work it out on the next ask);
        #: a caller that reads the clock anyway may compare with it before asking
        self.due = float("-inf")

    def allow(self, now: float | None = None) -> bool:
        """Take a token if there is one; ``now``: the clock, if the caller has just read it."""
        if now is None:
            now = self.clock()
        if now < self.due:
            return False
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        # the bucket fills linearly and stays under its cap until then, so asking earlier
        # changes nothing: the tokens are worked out again from ``last`` once it is due
        if self.burst >= 1 and self.rate > 0:
            self.due = now + (1.0 - self.tokens) / self.rate
        else:
            self.due = float("inf")  # never a token (what the arithmetic above gives too)
        return False


class LiveView:
    """Subscribes to a runner and renders its state into ``target``, throttled.

    ``updates`` counts draws (what a test of the throttle reads). While attached, the
    bridge is the runner's heartbeat and draws held-back updates then. Call :meth:`close`
    when the run returns: it draws the final state, removes the heartbeat, unsubscribes
    and, if the view was displayed with a ``handle``, updates that display with the final
    state (so the notebook keeps it).

    A target may also have ``note_event(event, state_fn)``: called for every event, unthrottled
    (the terminal prints a replan's diff above its table there).
    """

    def __init__(
        self,
        runner: Any,
        target: ViewTarget,
        *,
        rate: float = 10.0,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float = 0.1,
        handle: Any = None,
    ) -> None:
        self.runner = runner
        self.target = target
        self.handle = handle
        self.clock = clock
        self.throttle = Throttle(rate, burst, clock)
        self.updates = 0
        self.events = 0
        self.pending = False
        self.closed = False
        self.last_draw = clock()
        #: the thread that made the view (the kernel's execution thread): the only one that draws
        self.thread = threading.get_ident()
        self.usage = Usage()
        self.timeline = TimelineBuilder()
        self._read: list[Event] | None = None  # the event list the usage and timeline were read from
        self._note = getattr(target, "note_event", None)
        #: the display becomes the target's record when the run ends, so the finished run is not
        #: drawn first (for a long run, that last drawing was a sixth of what the view sent)
        self._recorded = handle is not None and hasattr(target, "record")
        self._catch_up()
        runner.subscribe(self)
        runner.add_heartbeat(self.beat, heartbeat)

    def __call__(self, event: Event) -> None:
        # every event of a run comes here, thousands a second: only count it and decide whether
        # to draw; the usage and the timeline read the new events when a state is taken
        self.events += 1
        if self._note is not None and threading.get_ident() == self.thread:
            self._note(event, self.state)
        if event.kind in FLUSH_NOW:
            if event.kind == "run.finished" and self._recorded:
                self.pending = True  # the record replaces the drawing: close() takes the final state
            else:
                self.flush()
            return
        throttle = self.throttle
        now = throttle.clock()
        if now >= throttle.due and throttle.allow(now):  # "not yet" without a call, most events
            self.flush()
        else:
            self.pending = True
            if self.runner.state.status == "paused":  # an edit or a retry of a paused run: no heartbeat
                self.flush()  # beats while it waits, so nothing else would draw it before Continue

    def beat(self) -> None:
        """The runner's heartbeat (its thread, during a step's work): draw a held-back update
        if the bucket allows, and about once a second anyway, so the elapsed times move on."""
        due = self.pending or self.clock() - self.last_draw >= 1.0
        if due and threading.get_ident() == self.thread and self.throttle.allow():
            self.flush()

    def state(self) -> ViewState:
        self._catch_up()
        return ViewState.of_runner(self.runner, usage=self.usage, timeline=self.timeline)

    def _catch_up(self) -> None:
        """Feed the usage and the timeline the run's events they have not read yet (the run's
        record only grows; a runner given another state is read again from its start)."""
        events = self.runner.state.events
        if events is not self._read:
            self._read = events
            self.usage, self.timeline = Usage(), TimelineBuilder(self.runner.state.history)
        start = self.timeline.seen
        end = len(events)
        if start == end:
            return
        self.usage.add_events(events[start:end])
        self.timeline.feed_new(events, end)

    def flush(self) -> None:
        """Draw now, if on the view's own thread (elsewhere: leave it pending for that thread)."""
        if self.closed and not self.pending:
            return
        if threading.get_ident() != self.thread:
            self.pending = True
            return
        self.pending = False
        self.last_draw = self.clock()
        try:
            self.target.render(self.state())
        except Exception as exc:  # the view is broken, the run is not: say so once and stop drawing
            self._detach()
            self.closed = True
            warnings.warn(
                f"the live view of plan {self.runner.plan.id!r} stopped updating ({type(exc).__name__}: {exc}); "
                "the run goes on and its result shows how it ended",
                stacklevel=2,
            )
            return
        self.updates += 1

    def draw_here(self) -> None:
        """Draw now, on the calling thread, which draws the view from now on: for a view nothing
        else draws (a replay stepped by its Next button). The button's messages come on whatever
        thread the kernel gives a widget's messages: JupyterLab has a subshell for them, so not
        the thread that made the view, and :meth:`flush` would leave every step pending."""
        self.thread = threading.get_ident()
        self.flush()

    def _detach(self) -> None:
        self.runner.unsubscribe(self)
        self.runner.remove_heartbeat(self.beat)

    def close(self) -> None:
        """Stop listening; draw the last state if an update is pending; leave the final state in the
        display: a widget's display becomes its static record (no widget mime type, so a saved
        notebook never says "Error displaying widget"), and the widget is closed then (a target's
        ``close()``: nothing of the run stays in ipywidgets' registry)."""
        if self.closed:
            return
        self._detach()
        if self.pending and not self._recorded:
            self.flush()
        self.closed = True
        if self.handle is not None:
            record = getattr(self.target, "record", None)  # a widget leaves a static record behind
            try:
                data = record(self.state()) if record is not None else None
                if data is not None:
                    update_display(self.handle, data, raw=True)
                else:
                    update_display(self.handle, self.target)
            except Exception as exc:  # the run's result is still returned
                warnings.warn(f"the final state of the live view could not be shown ({type(exc).__name__}: {exc})",
                              stacklevel=2)
                return  # the display still shows the widget: it stays open
            leave = getattr(self.target, "leave", None) if data is not None else None
            if leave is not None:
                # the display is the record now: the widget is closed once a page shows the record (a
                # page reloaded during the run asks for it until then; a few stay open at most), else
                # ipywidgets keeps it (and through it this run's plan) for the kernel's life
                leave(data)


# ------------------------------------------------------------------ the static HTML view, updated in place
class HtmlView:
    """The fallback live view in a kernel without anywidget: one display, updated in place
    through its display id with the static HTML (a window of rows while the run goes)."""

    def __init__(self, source: Any) -> None:
        self.state = ViewState.of(source)
        self.handle: Any = None
        self.renders = 0

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """While the run goes: a window of rows and a progress line (each update re-sends it
        all); once it stops: the whole final state."""
        from .html import state_html
        from .record import record_bundle
        from .text import progress_line, state_bundle

        ensure_checkpoint()
        if self.state.status is None:
            return state_bundle(self.state)
        if self.state.status != "running":
            return record_bundle(self.state)
        return {"text/plain": progress_line(self.state), "text/html": state_html(self.state, max_rows=LIVE_ROWS)}

    def show(self) -> "HtmlView":
        from .publish import display

        self.handle = display(self, display_id=True)
        return self

    def render(self, state: ViewState) -> None:
        self.state = state
        self.renders += 1
        if self.handle is not None:
            update_display(self.handle, self)


# ------------------------------------------------------------------ a result a live view already showed
class LiveRunResult(RunResult):
    """A run result whose plan a live view above already shows: displayed as the cell's
    value, it is one line (the verdict), not the plan a second time. ``print()`` and
    ``str()`` still give the whole text; everything else is a :class:`RunResult`."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .html import TONE_COLORS, esc, fg

        ensure_checkpoint()
        state = ViewState.of_result(self)
        line = f"{verdict_line(state)} (the live view above shows the plan; print() the result for its text)"
        html = (f'<div class="planbook-verdict planbook-run-{esc(self.status)} {NO_MATH}" '
                f'style="{fg(TONE_COLORS[state.tone])};'
                f'font-family:monospace">{esc(line)}</div>')
        return {"text/plain": line, "text/html": html}

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self._repr_mimebundle_()["text/plain"])


def shown_live(result: RunResult) -> LiveRunResult:
    """``result`` as a :class:`LiveRunResult` (same fields, shared values)."""
    return LiveRunResult.model_construct(**{name: getattr(result, name) for name in RunResult.model_fields})
