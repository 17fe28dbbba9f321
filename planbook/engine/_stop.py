"""How a run stops: it ends, completes, pauses, or is interrupted (and later continues).

Ending writes the run's last status and tells the door (a stop given meanwhile came too
late); a pause with nothing left to run is a completion; Ctrl-C keeps every call that
completed and leaves the others to finish in the background, waited for before the run
goes on. Part of :class:`~planbook.engine.runner.Runner` (a mixin).
"""

from __future__ import annotations

import sys
import traceback as traceback_module

from ..data.models import RunReason, RunStatus, Status
from ..data.stepmark import StepMark
from ._algo import completion
from ._parts import RunnerParts


class Stopping(RunnerParts):
    """The runner's endings, pauses and interrupts."""

    def _finish(
        self, status: RunStatus, reason: RunReason, error: str | None = None, exc: BaseException | None = None
    ) -> None:
        """End the run. ``exc``: the exception behind it (a crashing planner), kept as a traceback."""
        self.state.status, self.state.reason, self.state.error = status, reason, error and self.secrets.text(error)
        if exc is not None:
            self.state.traceback = self.secrets.text(
                "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__)))
        if self.door is not None:  # a stop given as it ended is recorded, refused: this is what ended it
            self.door.ending(self.state.error or f"{status}: {reason}")
        self.emit("run.finished", status=status, reason=reason, error=self.state.error, executions=self.state.executions,
                  replans=self.state.replans)
        if self.recorder is not None:
            self.recorder.flush(self.state)

    def _complete(self) -> None:
        """The plan's end was reached: the run completed (every step, or not all of them)."""
        self._finish(*completion(self.plan))

    def _pause(self, why: str) -> None:
        if not self.state.pending_failures and self.scheduler.peek() is None and not self._replan_for \
                and not (self.steering is not None and self.steering.waiting):
            self._complete()  # nothing is left to run: the run is over, not paused
            return
        if self.door is not None:
            self.door.paused()  # sets the status with the door's phase, under its lock
        else:
            self.state.status, self.state.reason = "paused", "paused"
        self.emit("run.paused", why=why)
        if self.recorder is not None:
            self.recorder.flush(self.state)

    # ------------------------------------------------------------- interrupts
    def _interrupt(self, why: str = "") -> None:
        """Ctrl-C (or a call that raised KeyboardInterrupt: ``why``): keep every call that completed;
        leave running calls to finish in the background."""
        for flight in list(self.dispatch.inflight):
            if flight.future.done():
                self.dispatch.inflight.remove(flight)
                try:
                    self._record(flight, kept=True)
                except KeyboardInterrupt as exc:  # that call raised it too: it runs again, like the rest
                    why = why or str(exc)
        for flight in self.dispatch.inflight:
            if flight.handle is not None:
                flight.handle.cancel()  # an awaited coroutine stops at its next await
            self._uncount(flight, StepMark.still_running)
            self.dispatch.leftovers.append(flight)
        self.dispatch.inflight = []
        self._ending = None if self.finished else self._ending
        if self.finished:  # Ctrl-C while the end was being reported: the run did end that way
            return
        self._pause_why = None
        s = self.state
        s.status, s.reason, s.error = "interrupted", "interrupted", f"interrupted: {why}" if why else "interrupted by the user"
        self.emit("run.finished", status="interrupted", reason="interrupted", error=s.error,
                  executions=s.executions, replans=s.replans)
        if self.recorder is not None:
            self.recorder.save(s)

    def _settle_leftovers(self) -> None:
        """Before a run continues, wait for calls still running from before the interrupt.

        Waits on each call's own future (never on a thread's ``is_alive``), so a step
        never runs twice at the same time; a call that completed is kept, not run again.
        """
        while self.dispatch.leftovers:
            flight = self.dispatch.leftovers[0]
            if not flight.future.done():
                print(f"planbook: waiting for the interrupted call of step {flight.step.id!r} to return "
                      "(interrupt again to stop waiting)", file=sys.stderr)
                while not flight.future.done():
                    self.dispatch.wait(0.25)
            self.dispatch.leftovers.pop(0)
            if flight.step.status is not Status.not_started or self.dispatch.outcome_of(flight) is None:
                continue  # interrupted (it runs again), or the step was changed by hand meanwhile
            self.state.executions += 1
            self._unshare(flight.step)
            flight.step.set_state(attempts=flight.step.attempts + 1, notes="", mark=None)
            self._stale = True
            self._record(flight, kept=True)

    def settle(self) -> None:
        """Wait for calls still running from an interrupted run (``--restart`` does this first)."""
        self._settle_leftovers()
