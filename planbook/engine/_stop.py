"""How a run is interrupted (and later continues).

Ctrl-C keeps every call that completed and leaves the others to finish in the background,
waited for before the run goes on. Ending and pausing are
:class:`~planbook.engine.control.RunControl`'s, the one writer of a run's status. Part of :class:`~planbook.engine.runner.Runner` (a mixin).
"""

from __future__ import annotations

import sys

from ..data.models import Status
from ..data.stepmark import StepMark
from ._outcomes import Recording


class Stopping(Recording):
    """The runner's interrupts (how a run ends or pauses is :class:`~planbook.engine.control.RunControl`'s)."""

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
        self.control.interrupted(why)

    def _settle_leftovers(self) -> None:
        """Before a run continues, wait for calls still running from before the interrupt.

        Waits on each call's own future (never on a thread's ``is_alive``), so a step
        never runs twice at the same time; a call that completed is kept, not run again.
        """
        while self.dispatch.leftovers:
            flight = self.dispatch.leftovers[0]
            if not flight.future.done():
                print(self.secrets.line(f"planbook: waiting for the interrupted call of step {flight.step.id!r} "
                                        "to return (interrupt again to stop waiting)"), file=sys.stderr)
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
