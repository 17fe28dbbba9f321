"""Where a step's work runs, and how a run stays responsive while it does.

With a heartbeat (a live view) or a timeout, a step's work runs in a worker thread
while the runner's thread waits in slices: it calls the heartbeats (views redraw from
the thread that owns them), delivers the events the step emitted from the worker, and
gives up at the timeout. Tools pinned with ``main_thread=True`` (directly, or through an
agent's tools) always run on the runner's thread. Kept apart from the runner's state
machine, which only asks these questions.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from .models import Event, EventKind, Step


class StepThreads:
    """Mixed into :class:`~planbook.runner.Runner`: heartbeats, the event inbox, pinning."""

    tools: Mapping[str, Any]
    agents: Mapping[str, Any]

    def emit(self, kind: EventKind, step: str | None = None, **data: Any) -> Event:  # provided by Runner
        raise NotImplementedError

    def _init_step_threads(self) -> None:
        self._heartbeats: dict[Callable[[], None], float] = {}
        self._interrupted_workers: list[threading.Thread] = []
        self._live_execution: object | None = None
        self._runner_thread = threading.get_ident()
        self._inbox: deque[tuple[object, EventKind, str, dict[str, Any]]] = deque()

    def add_heartbeat(self, callback: Callable[[], None], interval: float = 0.1) -> None:
        """Call ``callback()`` on the runner's thread about every ``interval`` s while a step runs.

        A live view uses this to redraw during a slow step. While a heartbeat is set, a
        step's work runs in a worker thread (except tools marked ``main_thread=True``) and
        the runner's thread waits in slices; events the step emits (``llm.call``) are
        delivered on the runner's thread. Several views may each add one.
        """
        if interval <= 0:
            raise ValueError(f"the heartbeat interval must be positive, got {interval!r}")
        self._heartbeats[callback] = interval

    def remove_heartbeat(self, callback: Callable[[], None]) -> None:
        """Stop calling ``callback`` (a view that closes). Unknown callbacks are ignored."""
        self._heartbeats.pop(callback, None)

    @property
    def _heartbeat_interval(self) -> float:
        return min(self._heartbeats.values(), default=0.1)

    def _tick(self) -> None:
        self._drain()
        for beat in list(self._heartbeats):
            try:
                beat()
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # a broken view must not lose the run (as in emit)
                warnings.warn(f"heartbeat {beat!r} failed: {exc!r}; it is removed", stacklevel=2)
                self._heartbeats.pop(beat, None)

    def _drain(self) -> None:
        """Deliver the events a step emitted from its worker thread (dropping abandoned steps')."""
        while self._inbox:
            token, kind, step_id, data = self._inbox.popleft()
            if token is self._live_execution:
                self.emit(kind, step=step_id, **data)

    def _step_emitter(self, step: Step, token: object) -> Callable[..., None]:
        def emit(kind: EventKind, **data: Any) -> None:
            if token is not self._live_execution:
                return  # a step that timed out: whatever it still does is not part of the run
            if threading.get_ident() == self._runner_thread:
                self.emit(kind, step=step.id, **data)
            else:
                self._inbox.append((token, kind, step.id, data))

        return emit

    def _pinned(self, step: Step) -> str:
        """What ties this step to the runner's thread ('' if nothing): a ``main_thread`` tool,
        used directly or by the step's agent."""
        if step.tool is not None:
            return f"tool {step.tool!r}" if self.tools[step.tool].main_thread else ""
        agent = self.agents.get(step.agent or "")
        if getattr(agent, "main_thread", False):
            return f"agent {step.agent!r}"
        tools = getattr(agent, "tools", None)
        if isinstance(tools, Mapping):
            for name, tool in tools.items():
                if getattr(tool, "main_thread", False):
                    return f"agent {step.agent!r} (its tool {name!r})"
        return ""

    def _wait_for_interrupted(self) -> None:
        """Before a run continues, let interrupted step work that is still blocked finish,
        so the step does not run twice at the same time."""
        while self._interrupted_workers:
            worker = self._interrupted_workers[0]
            if worker.is_alive():
                print(f"planbook: waiting for the interrupted {worker.name} to return from a blocking call "
                      "(interrupt again to stop waiting)", file=sys.stderr)
                while worker.is_alive():
                    worker.join(0.2)
            self._interrupted_workers.pop(0)
