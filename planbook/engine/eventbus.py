"""Events and heartbeats of a run, always delivered on the runner's thread.

Views subscribe to events and add heartbeats (a redraw about every 0.1 s while steps
run). Steps running on worker threads emit events (an agent's ``llm.call``) into an
inbox that the runner's thread drains, so a view is only ever touched from the thread
that owns it. Events of a call that was given up on (a timeout) are dropped.
"""

from __future__ import annotations

import threading
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..data.models import Event, EventKind

EventHandler = Callable[[Event], None]

#: Integrations that watch every run register here by name (``planbook.otel`` adds its
#: spans); each is called with the new Runner, and subscribes to its events itself.
#: The engine imports none of them: they register with it.
RUN_HOOKS: dict[str, Callable[[Any], None]] = {}


class EventBus:
    """Handlers, heartbeats and the inbox of events from worker threads."""

    def __init__(self, record: Callable[[EventKind, str | None, dict[str, Any], float | None], Event],
                 handlers: EventHandler | Iterable[EventHandler] | None = None) -> None:
        #: ``record(kind, step, data, at)`` makes the event (at time ``at``, None: now) and keeps it
        self._record = record
        self.handlers: list[EventHandler] = []
        if callable(handlers):
            self.handlers.append(handlers)
        elif handlers is not None:
            self.handlers.extend(handlers)
        self.heartbeats: dict[Callable[[], None], float] = {}
        self.owner = threading.get_ident()
        self._inbox: deque[tuple[object, EventKind, str, dict[str, Any]]] = deque()
        #: tokens of the calls whose events still count (a timed-out call's token is removed)
        self.live: set[object] = set()

    def emit(self, kind: EventKind, step: str | None = None, **data: Any) -> Event:
        return self.publish(kind, step, data)

    def publish(self, kind: EventKind, step: str | None, data: dict[str, Any], at: float | None = None) -> Event:
        """Record and deliver an event whose data the caller built (and hands over); ``at``: its
        time, if the caller has just read the run's clock."""
        event = self._record(kind, step, data, at)
        if not self.handlers:  # nobody listens: the event is only recorded
            return event
        return self.deliver(event)

    def deliver(self, event: Event) -> Event:
        """Hand ``event`` to every handler (``publish`` records it first; a ``step.output`` is
        only delivered: see planbook.engine.liveoutput)."""
        kind = event.kind
        for handler in list(self.handlers):
            try:
                handler(event)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # a broken view must not lose the run; say so once
                warnings.warn(f"event handler {handler!r} failed on {kind}: {exc!r}; it is removed", stacklevel=3)
                if handler in self.handlers:
                    self.handlers.remove(handler)
        return event

    # --------------------------------------------------------------- heartbeats
    def add_heartbeat(self, callback: Callable[[], None], interval: float = 0.1) -> None:
        if interval <= 0:
            raise ValueError(f"the heartbeat interval must be positive, got {interval!r}")
        self.heartbeats[callback] = interval

    def remove_heartbeat(self, callback: Callable[[], None]) -> None:
        self.heartbeats.pop(callback, None)

    @property
    def interval(self) -> float:
        return min(self.heartbeats.values(), default=0.1)

    def beat(self) -> None:
        """Deliver what workers emitted, then let every view redraw."""
        self.drain()
        for beat in list(self.heartbeats):
            try:
                beat()
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # a broken view must not lose the run (as in emit)
                warnings.warn(f"heartbeat {beat!r} failed: {exc!r}; it is removed", stacklevel=2)
                self.heartbeats.pop(beat, None)

    # ------------------------------------------------------------ worker events
    def drain(self) -> None:
        """Deliver the events steps emitted from worker threads (dropping given-up calls')."""
        while self._inbox:
            token, kind, step_id, data = self._inbox.popleft()
            if token in self.live:
                self.emit(kind, step=step_id, **data)

    def emitter(self, step_id: str, token: object) -> Callable[..., None]:
        """The ``emit`` an agent gets for one call of one step."""
        def emit(kind: EventKind, **data: Any) -> None:
            if token not in self.live:
                return  # a call that timed out: whatever it still does is not part of the run
            if threading.get_ident() == self.owner:
                self.emit(kind, step=step_id, **data)
            else:
                self._inbox.append((token, kind, step_id, data))

        return emit
