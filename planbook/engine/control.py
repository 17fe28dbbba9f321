"""How a run ends, pauses, replans and tells the store a step changed: one owner, one writer.

The runner's tick loop, its recording of outcomes, the door (decisions from people) and the
plan changes all want to end a run, pause it, or replan after a failure. They used to set the
runner's private fields (``_ending``, ``_pause_why``) and call its private methods; now they
ask :class:`RunControl`, which alone writes the run's status and these wishes, so "what ends a
run" has one answer and one place to read it.

It also declares :class:`RunAccess`, the small view of a run that the door, the plan changes
and replanning are typed against: they never import the runner (no import circle, type-only
ones included), and a type checker says when they reach for more than a run offers.
"""

from __future__ import annotations

import traceback as traceback_module
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..data.models import RunReason, RunStatus, Step
from ._algo import completion, holding

if TYPE_CHECKING:
    from ..data.models import Event, EventKind, Plan
    from ..outbound import RunSecrets
    from ..workers.agents import AgentRegistry
    from ..workers.planners import Planner
    from ..workers.tools import Toolbox
    from .budget import Budget
    from .config import RunConfig
    from .dispatch import Dispatcher
    from .eventbus import EventBus
    from .persistence import RunRecorder
    from .scheduler import Scheduler
    from .state import RunState
    from .steering import Steering

#: (status, reason, error[, the exception behind it])
Ending = tuple[Any, ...]


class DoorSide(Protocol):
    """What the run tells its door when it ends or pauses (planbook.engine.door.Door)."""

    def ending(self, cause: str) -> None: ...
    def paused(self, apply: Callable[[], None]) -> None: ...
    def left(self, kept: set[str]) -> None: ...  # only the steps ``kept`` may go on waiting


class RunAccess(Protocol):
    """What the door, the plan changes and replanning may use of a run (the runner is one)."""

    state: RunState
    config: RunConfig
    budget: Budget
    dispatch: Dispatcher
    scheduler: Scheduler
    bus: EventBus
    tools: Toolbox
    agents: AgentRegistry
    planner: Planner | None
    secrets: RunSecrets
    recorder: RunRecorder | None
    steering: Steering | None
    goal_only: str | None
    after_step: Any
    control: RunControl

    @property
    def door(self) -> DoorSide | None: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def finished(self) -> bool: ...
    @property
    def parallel(self) -> int: ...
    def emit(self, kind: EventKind, step: str | None = None, **data: Any) -> Event: ...


class RunControl:
    """The one writer of a run's status and of its wish to end, pause or replan.

    ``end_*`` keep the first cause: a stop given while a failure already ends the run does
    not rename what ended it (the door records the stop as too late)."""

    def __init__(self, run: RunAccess) -> None:
        self._run = run
        self._ending: Ending | None = None
        self._replan_for: Step | None = None
        self._pause_why: str | None = None

    # ------------------------------------------------------------ what is wished
    @property
    def ending(self) -> Ending | None:
        """How the run ends once its running steps finish (None: it is not ending)."""
        return self._ending

    @property
    def replan_for(self) -> Step | None:
        return self._replan_for

    @property
    def pause_why(self) -> str | None:
        return self._pause_why

    @property
    def holding(self) -> bool:
        """Nothing new starts: the run is ending, replanning or pausing."""
        return holding(self._ending, self._replan_for, self._pause_why)

    def end_later(self, status: RunStatus, reason: RunReason, error: str | None, exc: BaseException | None = None) -> bool:
        """End the run once its running steps finish; False when something ended it first."""
        if self._ending is not None:
            return False
        self._ending = (status, reason, error) if exc is None else (status, reason, error, exc)
        return True

    def end_when_idle(self, status: RunStatus, reason: RunReason, error: str | None) -> None:
        """End the run now if nothing runs, else once the running steps finish."""
        self.end_later(status, reason, error)
        self.end_if_due()

    def end_if_due(self) -> bool:
        """End the run if it is ending and nothing runs any more; True when it ended here."""
        if self._ending is None or self._run.dispatch.inflight:
            return False
        self.end(*self._ending)
        return True

    def pause_after(self, why: str | None) -> None:
        """Pause once the running steps finish (None: no reason to pause)."""
        if why is not None:
            self._pause_why = why

    def take_pause(self) -> str | None:
        """The pause wished for, now carried out (the caller pauses)."""
        why, self._pause_why = self._pause_why, None
        return why

    def replan_after(self, step: Step) -> None:
        """Replan after ``step`` failed, once the running steps finish (the first failure asks)."""
        if self._replan_for is None:
            self._replan_for = step

    def take_replan(self) -> Step | None:
        """The failure to replan after, now carried out (the caller replans)."""
        failed, self._replan_for = self._replan_for, None
        return failed

    # ------------------------------------------------------------ carrying it out
    def end(self, status: RunStatus, reason: RunReason, error: str | None = None,
            exc: BaseException | None = None) -> None:
        """End the run now. ``exc``: the exception behind it (a crashing planner), kept as a traceback."""
        run = self._run
        s = run.state
        s.status, s.reason, s.error = status, reason, error and run.secrets.text(error)
        if exc is not None:
            s.traceback = run.secrets.text(
                "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__)))
        if run.door is not None:  # a stop given as it ended is recorded, refused: this is what ended it
            run.door.ending(s.error or f"{status}: {reason}")
        run.emit("run.finished", status=status, reason=reason, error=s.error, executions=s.executions,
                 replans=s.replans)
        if run.recorder is not None:
            run.recorder.flush(s)

    def complete(self) -> None:
        """The plan's end was reached: the run completed (every step, or not all of them)."""
        self.end(*completion(self._run.plan))

    def pause(self, why: str) -> None:
        """Pause now (a pause with nothing left to run is a completion)."""
        run = self._run
        s = run.state
        if not s.pending_failures and run.scheduler.peek() is None and not self._replan_for \
                and not (run.steering is not None and run.steering.waiting):
            self.complete()  # nothing is left to run: the run is over, not paused
            return
        if run.door is not None:  # the status and the door's phase change together, under its lock
            run.door.paused(self._paused)
        else:
            self._paused()
        run.emit("run.paused", why=why)
        if run.recorder is not None:
            run.recorder.flush(s)

    def _paused(self) -> None:
        self._run.state.status, self._run.state.reason = "paused", "paused"

    def going_on(self) -> None:
        """A paused or interrupted run continues."""
        s = self._run.state
        s.status, s.reason, s.error = "running", None, None

    def interrupted(self, why: str) -> None:
        """Ctrl-C: the run says it was interrupted (a pause wished for is forgotten, an ending is
        kept for when it goes on) — unless it had just ended that way."""
        run = self._run
        if run.finished:  # Ctrl-C while the end was being reported: the run did end that way
            self._ending = None
            return
        self._pause_why = None  # an ending wished for stays: the run ends that way when it goes on
        s = run.state
        s.status, s.reason, s.error = "interrupted", "interrupted", f"interrupted: {why}" if why else "interrupted by the user"
        run.emit("run.finished", status="interrupted", reason="interrupted", error=s.error,
                 executions=s.executions, replans=s.replans)
        if run.recorder is not None:
            run.recorder.save(s)

    def changed(self, step: Step) -> None:
        """``step`` changed outside a call's end (a skip, a retry, a cache hit): the store hears of it."""
        if self._run.recorder is not None:
            self._run.recorder.changed(step)
