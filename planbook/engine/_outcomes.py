"""Recording a step's outcome, and carrying out what its failure policy decided.

A call ended: its times, its result or error, its history entry and timing record, its
event, the store's copy; then a failure's policy (:mod:`planbook.engine.policies` decides,
the methods here apply: retry, skip, replan, keep going, abort), an agent's stop or a
review (:mod:`planbook.engine.planchanges`). Part of :class:`~planbook.engine.runner.Runner`
(a mixin: the runner's state is its own, written only here, in the loop and the door).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from ..data.gcwindow import FreezeWindow
from ..data.models import Status, Step, finished_data
from ..data.stepmark import StepMark
from ..outbound import REDACTED_TEXT
from . import planchanges
from ._algo import NO_WINDOW, step_times, thread_hint
from ._parts import RunnerParts
from .calls import summarize
from .dispatch import Flight
from .executors import NotReached
from .policies import Verdict, chain_for, verdict_for
from .state import CUT_NOTES, KEPT_NOTE, failure_line

#: what of an outcome may echo a secret, hidden before the step's record and event are made
_SCRUBBED = ("error", "traceback", "output", "summary")


class Recording(RunnerParts):
    """The runner's recording of outcomes and its failure policies' actions."""

    #: the collector's window during ``run()`` (ticked once a recorded call), NO_WINDOW outside it
    _gc: FreezeWindow = NO_WINDOW
    #: history entries that are the plan's step itself (id(step) -> index), copied before it changes
    _shared: dict[int, int]

    def _record(self, flight: Flight, *, kept: bool = False) -> None:
        """Record a finished call and apply the policy to a failure.

        ``kept``: a call that completed around an interrupt; what it decides (its failure's
        policy, a review, an agent's stop) waits until the run continues.
        """
        s, step = self.state, flight.step
        self.dispatch.ended(flight)
        outcome = self.dispatch.outcome_of(flight)
        if outcome is None:
            # a batch's call after a failure never started: it is simply ready again
            self._uncount(flight, None if isinstance(flight.future.exception(), NotReached) else StepMark.interrupted)
            if isinstance(flight.future.exception(), KeyboardInterrupt):
                # the call itself was interrupted (a tool raised it, on any thread or executor): so is the run
                raise KeyboardInterrupt(f"the call of step {step.id!r} raised KeyboardInterrupt")
            return
        # an inline call (no worker) ended just now: its end, read where it ran, is the time
        now = outcome.finished if flight.timed and not outcome.worker and outcome.finished is not None \
            else self.clock()
        # a step that feeds a secret (by reference, through any number of steps) holds one: its result
        # is learned before anything about the call is written, shown or sent (its output, its event's
        # summary, its record, its store row), so every one of them hides it
        if outcome.ok and self.secrets.learn_outcome(step.id, outcome.result):
            outcome.summary = REDACTED_TEXT  # what the views show of a holder's result
        if not outcome.ok or outcome.output:  # an echoed secret (a secret arg, a token, the model key) leaves no trace
            self.secrets.scrub(outcome, _SCRUBBED)
        # a clean call's summary reaches the views only in its step.finished event, which the run's
        # gate masks when it is made (Runner._record_event): no second pass over it here
        if flight.live is not None:  # what it printed since the last step.output, before its end is told
            self.dispatch.relay.finish(flight.live, outcome.output)  # type: ignore[union-attr]
        began, ended = step_times(step.started_at, outcome, flight.timed, kept, now)
        if not outcome.ok:
            hinted = thread_hint(outcome.error, outcome.worker)
            if hinted is not None:
                outcome.error = hinted
        step.set_state(
            status=Status.completed if outcome.ok else Status.failed,
            result=outcome.result,
            error=outcome.error,
            traceback=outcome.traceback,
            output=outcome.output,
            started_at=began,
            finished_at=ended,
            **({"notes": outcome.notes} if outcome.notes else {"notes": KEPT_NOTE} if kept else {}),
        )
        self._gc.tick()
        if self._gc is NO_WINDOW:  # a tick outside run() (advance): the caller may edit the plan next
            s.history.append(step.snapshot())
        else:
            # during run() the history holds the step itself until the run changes it again
            # (_unshare): a finished run keeps one object per execution, not two
            self._unshare(step)
            self._shared[id(step)] = len(s.history)
            s.history.append(step)
        if self.recorder is not None:
            self.recorder.changed(step)
            if outcome.ok and flight.cache_key is not None:
                self.recorder.remember(flight.cache_key, step.result, tool=step.tool or "", step_id=step.id)
        # a call handed to an executor (a batch's calls one after another) keeps the run's times as
        # the step's: its own, read where it ran, go with its event for the record (RunResult.records)
        own = (outcome.started, outcome.finished) if outcome.started is not None and outcome.finished is not None \
            and (outcome.started != began or outcome.finished != ended) else None
        if outcome.ok:
            self.scheduler.completed(step)
            finished = finished_data(step.duration, flight.execution,
                                     outcome.summary if outcome.summary is not None else summarize(outcome.result))
            if kept:
                finished["kept"] = True
            if outcome.worker:  # the thread it ran on (step.started named the executor): the record's worker
                finished["worker"] = outcome.worker
            if own is not None:
                finished["call_start"], finished["call_end"] = own
            self.bus.publish("step.finished", step.id, finished, now)
            if kept or self.control.ending is not None:
                return
            if outcome.stop is not None:
                planchanges.stop_after(self, step, outcome.stop)
            elif self.after_step is not None:
                planchanges.review(self, step)
            return
        s.last_error = failure_line(step.id, outcome.error)
        s.pending_failures.append(step.id)  # until its policy is applied (Ctrl-C may come first)
        failed = {"duration": step.duration, "error": outcome.error, "execution": flight.execution}
        if kept:
            failed["kept"] = True
        if outcome.worker:
            failed["worker"] = outcome.worker
        if own is not None:
            failed["call_start"], failed["call_end"] = own
        self.bus.publish("step.failed", step.id, failed, now)
        if kept:
            return  # its policy is applied when the run continues
        s.pending_failures.remove(step.id)
        if self.control.ending is not None:
            return  # the run is ending: running steps only finish
        self._apply_policy(step)
        if self.after_step is not None and not self.finished and self.control.ending is None \
                and step.status in (Status.failed, Status.skipped) and self.control.replan_for is None:
            planchanges.review(self, step)

    def _uncount(self, flight: Flight, mark: StepMark | None) -> None:
        """An execution that did not complete did not happen: it runs again (``mark``: how it was cut)."""
        step = flight.step
        if flight.token is not None:
            self.bus.live.discard(flight.token)
        if flight.live is not None:
            self.dispatch.relay.drop(flight.live)  # type: ignore[union-attr]
        self._unshare(step)
        self.state.executions -= 1
        step.set_state(attempts=max(step.attempts - 1, 0), status=Status.not_started, notes=CUT_NOTES.get(mark, ""),
                       mark=mark)
        self.scheduler.again(step)
        self.control.changed(step)

    def _unshare(self, step: Step) -> None:
        """``step`` is about to change: if the history holds it, the history gets a copy."""
        if self._shared:
            index = self._shared.pop(id(step), None)
            if index is not None:
                self.state.history[index] = step.snapshot()

    def _unshare_history(self) -> None:
        history = self.state.history
        for index in self._shared.values():
            history[index] = history[index].snapshot()
        self._shared = {}

    # --------------------------------------------------------------- policies
    def _apply_policy(self, step: Step) -> None:
        """Carry out what the failed step's policy chain decides (planbook.engine.policies decides)."""
        verdict: Verdict = verdict_for(step, chain_for(step, self.policy), self)
        self._carry_out[verdict](self, step)

    def retries_used(self, step: Step) -> int:
        return self.state.retries_used.get(step.id, 0)

    def _retry(self, step: Step) -> None:
        used = self.state.retries_used[step.id] = self.retries_used(step) + 1
        self._unshare(step)
        step.status = Status.not_started
        step.notes = f"retry {used}/{self.retries} after: {step.error}"
        self.scheduler.again(step)
        self.emit("step.retry", step=step.id, retry=used, of=self.retries, error=step.error)
        self.control.changed(step)

    def _skip(self, step: Step) -> None:
        self._unshare(step)
        step.status = Status.skipped
        step.notes = f"skipped after: {step.error}"
        self.emit("step.skipped", step=step.id, error=step.error)
        self.control.changed(step)
        self.scheduler.ended_without_result(step)

    def _replan(self, step: Step) -> None:
        self.control.replan_after(step)  # after the running steps finish; they are part of what happened
        if not self.dispatch.inflight:
            failed = self.control.take_replan()
            assert failed is not None
            planchanges.replan(self, failed)

    def _keep_going(self, step: Step) -> None:
        self._unshare(step)
        step.notes = f"failed; its dependents run anyway (on_failure continue): {step.error}"
        self.scheduler.release(step)
        self.control.changed(step)

    def _abort(self, step: Step) -> None:
        self.control.end_when_idle("failed", "aborted", f"step {step.id} failed: {step.error}")

    #: each verdict of a policy, and how the runner carries it out
    _carry_out: ClassVar[dict[Verdict, Callable[[Recording, Step], None]]] = {
        "abort": _abort, "skip": _skip, "retry": _retry, "replan": _replan, "continue": _keep_going}

    def _blocked(self, step: Step, dead: list[str]) -> None:
        self.emit("step.blocked", step=step.id, because=dead)
        self.control.changed(step)
