"""The door: every decision about a run arrives in one inbox, and is applied here, on the run's thread.

Approve, skip, edit and stop (about a step); pause, resume, stop and retry (about the run)
come from the live view's buttons, a :class:`~planbook.notebook.handle.RunHandle`, the terminal
prompt and ``approve=`` callables. Those who decide only *give* a decision (checked where
it is given, so a bad one is an error there and then); the runner's thread takes them in
the order given and applies them here — with the changes that replanning and steering
*return* (:mod:`planbook.engine.replanning`, :mod:`planbook.engine.steering`), like a failure policy
only decides and the runner carries it out (:mod:`planbook.engine.policies`). This module, the
plan changes it applies (:mod:`planbook.engine.planchanges`) and the runner (``runner.py`` and its
parts ``_loop``, ``_record``, ``_stop``) are the only code that writes a run's state
(``tests/architecture/test_door_architecture.py``).

The rules a decision follows:

- it names the step as it was when decided (:class:`~planbook.engine.approvals.StepRef`: id,
  revision, tool and arguments or agent and task): a replan or an edit that changes that
  work voids it (a ``step.decided`` event says ``voided`` and why), and the step asks again;
- a later decision about a step that has not started replaces the earlier one (given in
  advance, or applied and not yet started) — except after a skip, which is final: a later
  decision is refused with an error (retry the step in a paused run); and an approval after
  an edit keeps the edit (the edit already says "run it, with these arguments");
- a decision about a step that started meanwhile, or left the plan, is refused as an event;
  a step that leaves the plan (a replan removed it) stops waiting;
- the ``approve=`` callable and the terminal prompt answer off the run's thread, one question
  at a time, and their answer comes through the inbox like a person's: one deadline
  (``approve_timeout``) holds for every answer, so a callable that never answers times out;
- pauses given before the run paused are one decision;
- after the run ended, a decision is refused with a one-line :class:`RunEnded`.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..data.errors import RunEnded
from ..data.models import Status, Step
from ..data.stepmark import StepMark
from ..outbound.text import bounded
from ..workers.interrupts import call_user
from ..workers.interrupts import waiting as interruptible
from .approvals import ApprovalContext, Decision, StepRef, Who, check_edit, checked
from .asking import AskingThread
from .calls import describe_exception
from .planchanges import edit_step
from .steering import WAITING_NOTE, Steering

if TYPE_CHECKING:
    from .control import RunAccess

Action = Literal["decide", "pause", "resume", "stop", "edit", "retry", "deadline", "answer"]


# ------------------------------------------------------------------ the inbox
@dataclass
class Request:
    """One decision on its way to the run."""

    action: Action
    who: Who
    step: str | None = None
    decision: Decision | None = None
    args: dict[str, Any] | None = None
    since: float = 0.0
    #: an asker's answer that is not a Decision: what it raised
    exc: BaseException | None = None
    #: answered once applied (an edit or a retry of a paused run returns when it took effect)
    done: concurrent.futures.Future[None] | None = field(default=None, compare=False)


class Door:
    """The run's one inbox (any thread gives) and its applier (only the run's thread applies)."""

    def __init__(self, runner: RunAccess, steering: Steering) -> None:
        self.runner, self.steering = runner, steering
        self._lock = threading.Lock()
        self._queue: deque[Request] = deque()
        self.arrived = threading.Event()
        #: decisions given before their step asked, by step id (the later replaces the earlier)
        self._kept: dict[str, Decision] = {}
        #: steps a skip was given for, as they were: a later decision about that step is refused
        self._final: dict[str, tuple[Who, StepRef | None]] = {}
        #: the thread that applies decisions (the run's): a decision given on it cannot wait for itself
        self._applier: int | None = None
        #: "resuming" from a resume given until the run pauses again (a second one adds nothing)
        self._phase: Literal["", "resuming"] = ""
        self._ended = False
        #: a pause was applied and the run has not paused yet: another pause adds nothing
        self._pausing = False
        #: the step the callable or the prompt is answering now (one question at a time), and
        #: the thread that asks it
        self._busy: str | None = None
        self._asker = AskingThread()
        self._timers: dict[str, threading.Timer] = {}
        self._wake = runner.dispatch.nudge

    # ============================================================ from any thread
    def _put(self, request: Request) -> None:
        self._queue.append(request)
        self.arrived.set()
        self._wake()

    def _open_or_raise(self, what: str) -> None:
        runner = self.runner
        if self._ended or runner.finished:
            raise RunEnded(f"the run of plan {runner.plan.id!r} has ended ({runner.state.status}): nothing to {what}")

    def _paused_or_raise(self, what: str) -> None:
        runner = self.runner
        if runner.state.status != "paused" or self._phase == "resuming" or self._stop_given():
            going = ("is going on (a resume is on its way)" if self._phase == "resuming" else
                     "is stopping" if self._stop_given() else f"is {runner.state.status}")
            raise RuntimeError(f"the run of plan {runner.plan.id!r} {going}: pause it first to {what}")

    def _stop_given(self) -> bool:
        return any(r.action == "stop" for r in self._queue)

    def decide(self, step: Step, decision: Decision) -> None:
        """Give ``decision`` about ``step``. An edit's args are checked here, once, in the giver's
        thread (ValueError names each problem, and nothing is queued); the caller checks the rule."""
        runner = self.runner
        decision = checked(decision, step, runner.tools)
        if decision.about is None:
            decision = decision.naming(step, runner.plan.revision)
        with self._lock:
            self._open_or_raise(decision.action)
            skipped = self._final.get(step.id)
            if skipped is not None and (skipped[1] is None or skipped[1].covers(step)):
                raise ValueError(f"step {step.id!r} was skipped by you ({skipped[0]}): a skip is final, so this "
                                 f"{decision.action} was not taken (retry it in a paused run)")
            earlier = [r.decision for r in self._queue if r.action == "decide" and r.step == step.id]
            pending = earlier[-1] if earlier else self._kept.get(step.id)
            if decision.action == "approve" and pending is not None and pending.action == "edit" \
                    and (pending.about is None or pending.about.covers(step)):
                return  # an edit on its way already says "run it, with these arguments": approving keeps it
            self._queue = deque(r for r in self._queue if not (r.action == "decide" and r.step == step.id))
            self._kept.pop(step.id, None)  # the later decision replaces the earlier
            if decision.action == "skip":
                self._final[step.id] = (decision.who, decision.about)
            self._put(Request("decide", decision.who, step.id, decision))

    def pause(self, who: Who) -> None:
        """Finish the running steps, start nothing new (right after a resume: pause again).

        Pauses given before the run paused are one decision: a pause on its way, applied and
        not yet taken effect, or a paused run with no resume on its way, adds nothing."""
        with self._lock:
            self._open_or_raise("pause")
            last = next((r.action for r in reversed(self._queue) if r.action in ("pause", "resume")), None)
            if last == "pause":
                return
            if last is None and (self._pausing or (self.runner.state.status == "paused"
                                                   and self._phase != "resuming")):
                return
            self._put(Request("pause", who))

    def resume(self, who: Who) -> None:
        with self._lock:
            self._open_or_raise("resume")
            if self.runner.state.status != "paused":
                raise RuntimeError(f"the run of plan {self.runner.plan.id!r} is {self.runner.state.status}, not "
                                   "paused: nothing to resume")
            if self._phase == "resuming":
                return  # one is on its way: a second must not be kept for the next pause
            self._phase = "resuming"
            self._put(Request("resume", who))

    def stop(self, who: Who) -> None:
        with self._lock:
            if not self._ended and not self.runner.finished:
                self._put(Request("stop", who))

    def change_paused(self, action: Literal["edit", "retry"], step: Step, who: Who,
                      args: dict[str, Any] | None = None) -> None:
        """An edit or a retry of a paused run: applied by the run before this returns (or refused).

        Refused at once (RuntimeError) unless the run is paused with no resume or stop on its way:
        then the run's thread is idle and takes it next, so this never waits for the run to go on."""
        if action == "edit":  # checked once, here, in the giver's thread (ValueError names each problem)
            args = check_edit(step, args or {}, self.runner.tools)
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if threading.get_ident() == self._applier:
            raise RuntimeError(f"the {action} of step {step.id!r} was given on the run's own thread (an on_event "
                               "handler or a callable the run calls): it would wait for itself. Give it from "
                               "another thread, or once the run's call returns")
        with self._lock:
            self._open_or_raise(action)
            self._paused_or_raise(f"{action} step {step.id!r}" + (
                " (it does not wait for approval: only a paused run changes it)" if action == "edit" else ""))
            if action == "edit" and step.id in self._final:
                raise ValueError(f"step {step.id!r} was skipped by you ({self._final[step.id][0]}): retry it first")
            self._put(Request(action, who, step.id, args=args, done=done))
        done.result()

    def pop_kept(self, step_id: str) -> Decision | None:
        with self._lock:
            return self._kept.pop(step_id, None)

    # ============================================================ on the run's thread
    def _take(self) -> Request | None:
        with self._lock:
            if not self._queue:
                self.arrived.clear()
                return None
            return self._queue.popleft()

    def apply_inbox(self) -> None:
        """Apply, in the order given, every decision that arrived (at the top of a tick)."""
        self._applier = threading.get_ident()
        while (request := self._take()) is not None:
            self._apply(request)

    def paused(self, apply: Callable[[], None]) -> None:
        """The run pauses (``apply`` sets its status): the status and the door's phase change
        together, so a resume given at any moment is either for this pause or refused as too
        early, never lost."""
        with self._lock:
            apply()
            self._phase = ""
            self._pausing = False

    def idle(self) -> bool:
        """A paused run waits here: decisions apply as they come; True when a resume came (the run
        goes on), False when it ended (a stop, a missed deadline)."""
        runner = self.runner
        self._applier = threading.get_ident()
        while True:
            request = self._take()
            if request is None:
                self.arrived.wait()
                continue
            if request.action == "resume":
                runner.emit("run.steered", action="resume", who=request.who)
                return True
            if request.action != "pause":  # a pause of a paused run adds nothing
                if request.action == "stop":
                    self._stop(request.who, " while paused")
                else:
                    self._apply(request)
                runner.control.end_if_due()
            if runner.finished:
                return False

    def wait(self) -> None:
        """Nothing runs and steps wait: wait for a decision (views redraw meanwhile)."""
        bus = self.runner.bus
        while not self.arrived.is_set():
            with interruptible():
                self.arrived.wait(bus.interval if bus.heartbeats else 0.25)
            bus.beat()
        self.apply_inbox()

    def close(self) -> None:
        """The run ended: stop the deadlines' timers and refuse what still waits for an answer."""
        with self._lock:
            self._ended = True
            pending, self._queue = list(self._queue), deque()
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        self._asker.close()
        runner = self.runner
        for request in pending:
            if request.done is not None and not request.done.done():
                request.done.set_exception(RuntimeError(
                    f"the run of plan {runner.plan.id!r} is no longer paused ({runner.state.status}): "
                    f"the {request.action} of step {request.step!r} was not applied"))

    # ------------------------------------------------------------ applying
    def _apply(self, request: Request) -> None:
        runner = self.runner
        try:
            if request.action == "decide":
                assert request.step is not None and request.decision is not None
                self._decided(request.step, request.decision)
            elif request.action == "pause" and not runner.finished:
                with self._lock:
                    self._pausing = True
                runner.emit("run.steered", action="pause", who=request.who)
                runner.control.pause_after(f"paused by you ({request.who})")
            elif request.action == "answer":
                self._answered(request)
            elif request.action == "stop" and not runner.finished:
                self._stop(request.who)
            elif request.action == "deadline":
                assert request.step is not None
                self._deadline(request.step, request.since)
            elif request.action == "edit":
                assert request.step is not None and request.args is not None
                step = runner.plan.step(request.step)
                if step.status is not Status.not_started:
                    raise ValueError(f"step {step.id!r} is {step.status.value}: only a step that has not started "
                                     "can be edited")
                runner.emit("step.decided", step=step.id, **Decision.edit(request.args, who=request.who).as_data())
                edit_step(runner, step, request.args, request.who)  # checked when given (change_paused)
            elif request.action == "retry":
                assert request.step is not None
                self._retry(request.step, request.who)
        except (KeyError, ValueError, TypeError) as exc:
            if request.done is None:
                raise
            request.done.set_exception(exc)
            return
        if request.done is not None:
            request.done.set_result(None)

    def _stop(self, who: Who, when: str = "") -> None:
        """End the run, unless something ended it first (a failed step's abort, a budget, an
        agent's stop, a missed deadline): the first cause stays what ended it, and the stop is
        recorded as refused, too late (the run only waited for its running steps to finish)."""
        runner = self.runner
        ending = runner.control.ending
        if ending is not None:
            self._too_late(who, str(ending[2]))
            return
        runner.emit("run.steered", action="stop", who=who)
        runner.control.end_later("failed", "aborted", f"stopped by you ({who}){when}")

    def _too_late(self, who: Who, cause: str) -> None:
        self.runner.emit("run.steered", action="refused", who=who, reason="the stop came too late: the run was "
                         f"already ending ({self.runner.secrets.text(cause)})")

    def ending(self, cause: str) -> None:
        """The run ends now (its status is set): a stop given meanwhile, not applied yet, came too late."""
        with self._lock:
            stops = [r for r in self._queue if r.action == "stop"]
            if stops:
                self._queue = deque(r for r in self._queue if r.action != "stop")
        for request in stops:
            self._too_late(request.who, cause)

    def _decided(self, step_id: str, decision: Decision, *, asked: bool = False) -> None:
        """A decision about a step: applied if it waits or was approved and has not started, kept
        if it has not asked yet, refused (as an event) if it started or left the plan."""
        runner, steering = self.runner, self.steering
        step = runner.scheduler.by_id.get(step_id)
        if step is None or step.status is not Status.not_started:
            why = "is no longer in the plan" if step is None else f"is {step.status.value}"
            runner.emit("step.decided", step=step_id, decision="refused", who=decision.who,
                        reason=f"the {decision.action} came too late: step {step_id!r} {why}")
            if decision.action == "skip" and (step is None or step.status is not Status.skipped):
                with self._lock:  # a skip that was not taken makes nothing final
                    self._final.pop(step_id, None)
            return
        if step_id in steering.waiting:
            if self._voided(step, decision):
                return  # it goes on waiting: someone decides about the step as it is now
            self._stop_waiting(step_id)
            self.settle(step, decision, asked=asked)
            self.note_waiting()
        elif step_id in steering.approved:  # approved and not started: the later decision replaces it
            if decision.action == "approve":
                return  # approved already (as it is now, an edit included): a second approval changes nothing
            del steering.approved[step_id]
            if not self._voided(step, decision):
                self.settle(step, decision)
        else:
            with self._lock:
                self._kept[step_id] = decision

    def _voided(self, step: Step, decision: Decision) -> bool:
        about = decision.about
        if about is None or about.covers(step):
            return False
        self.runner.emit("step.decided", step=step.id, decision="voided", who=decision.who, reason=about.changed(step))
        if decision.action == "skip":
            with self._lock:
                self._final.pop(step.id, None)
        return True

    def _deadline(self, step_id: str, since: float) -> None:
        steering = self.steering
        if steering.waiting.get(step_id) != since:
            return  # decided in time
        step = self.runner.scheduler.by_id.get(step_id)
        self._stop_waiting(step_id)
        if step is not None:
            self.settle(step, Decision.stop(f"no decision within approve_timeout={steering.timeout:g} s",
                                            who="timeout"))

    def _retry(self, step_id: str, who: Who) -> None:
        runner = self.runner
        step = runner.plan.step(step_id)
        if step.status not in (Status.failed, Status.skipped):
            raise ValueError(f"step {step_id!r} is {step.status.value}: only a failed or skipped step can be retried")
        step.set_state(status=Status.not_started, error=None, traceback=None, notes=f"retried by you ({who})")
        runner.state.retries_used.pop(step_id, None)
        with self._lock:
            self._final.pop(step_id, None)
        for other in runner.plan.steps:  # what it blocked may run now (the run re-blocks what still cannot)
            if other.status is Status.blocked:
                other.set_state(status=Status.not_started, notes="")
        runner.emit("step.decided", step=step_id, decision="retry", who=who)
        runner.control.changed(step)

    # ------------------------------------------------------------ may a step start?
    def clear(self, step: Step) -> bool | None:
        """May ``step`` (the first ready one) start now? True: yes. False: it was taken out of the
        ready set (it waits, or a decision was applied): look again. None: a run of one step at
        a time keeps plan order, so nothing after a waiting step starts."""
        runner, steering = self.runner, self.steering
        if steering.waiting and runner.parallel == 1 and step.id not in steering.waiting:
            return None
        # the approval is taken here, whatever the verdict: it covers one execution of the step
        verdict = steering.verdict(
            step, approval=steering.approved.pop(step.id, None), kept=lambda: self.pop_kept(step.id))
        if verdict.kind == "start":
            return True
        runner.scheduler.take()
        if verdict.voided is not None:
            who, why, action = verdict.voided
            runner.emit("step.decided", step=step.id, decision="voided", who=who, reason=why)
            if action == "skip":  # a skip that no longer applies is no longer final
                with self._lock:
                    self._final.pop(step.id, None)
        if verdict.kind == "apply":
            assert verdict.decision is not None
            self.settle(step, verdict.decision, asked=verdict.asked)
        elif verdict.kind == "end":
            runner.scheduler.again(step)
            runner.control.end_later("failed", "aborted", verdict.error, verdict.exc)
        elif verdict.kind == "ask":  # the callable or the prompt answers through the inbox
            since = steering.waiting[step.id] = time.monotonic()
            steering.asking.add(step.id)
            if steering.timeout is not None:
                self._start_timer(step.id, since, steering.timeout)
            self._ask_next()
        elif verdict.kind == "wait":
            since = steering.waiting[step.id] = time.monotonic()
            step.notes, step.mark = WAITING_NOTE, StepMark.waiting
            runner.control.changed(step)  # the store keeps the mark: a crashed run shows who waited
            self.note_waiting()  # in the store before anyone hears of it
            runner.emit("step.waiting", step=step.id, tool=step.tool, args=dict(step.args))
            if steering.timeout is not None:
                self._start_timer(step.id, since, steering.timeout)
        return False

    def _start_timer(self, step_id: str, since: float, timeout: float) -> None:
        """At the deadline a request enters the inbox and wakes the run, whatever its lanes are doing."""
        timer = threading.Timer(timeout, lambda: self._late(step_id, since))
        timer.daemon = True
        with self._lock:
            if self._ended:
                return
            earlier, self._timers[step_id] = self._timers.get(step_id), timer
        if earlier is not None:
            earlier.cancel()  # the step waits afresh (a refused edit): the deadline counts from now
        timer.start()

    def _late(self, step_id: str, since: float) -> None:
        with self._lock:
            if not self._ended:
                self._put(Request("deadline", "timeout", step_id, since=since))

    def _cancel_timer(self, step_id: str) -> None:
        with self._lock:
            timer = self._timers.pop(step_id, None)
        if timer is not None:
            timer.cancel()

    def settle(self, step: Step, decision: Decision, *, asked: bool = False) -> None:
        """Apply a decision about a step taken out of the ready set. ``asked``: the ``approve=``
        callable's or the prompt's answer (an edit of theirs that does not fit ends the run: it
        is a bug, not a choice; a person's is refused and the step waits for them again)."""
        runner = self.runner
        if decision.action == "edit":
            try:  # a person's edit was checked when given; a callable's (or the prompt's) answer is checked here
                args = checked(decision, step, runner.tools).args or {}
            except (TypeError, ValueError) as exc:
                runner.emit("step.decided", step=step.id, decision="refused", who=decision.who, reason=str(exc))
                if not asked and self.steering.remote:
                    since = self.steering.waiting[step.id] = time.monotonic()  # someone can decide again
                    if self.steering.timeout is not None:
                        self._start_timer(step.id, since, self.steering.timeout)
                else:  # a callable's (or prompt's) edit that does not fit: its answer is a bug, not a choice
                    runner.scheduler.again(step)
                    runner.control.end_later("failed", "aborted", f"the edit of step {step.id} was refused: {exc}")
                return
            runner.emit("step.decided", step=step.id, **decision.as_data())
            edit_step(runner, step, args, decision.who)
        else:
            runner.emit("step.decided", step=step.id, **decision.as_data())
        if step.mark == StepMark.waiting:
            step.notes, step.mark = "", None
        if decision.action in ("approve", "edit"):
            self.steering.approved[step.id] = (StepRef.of(step, runner.plan.revision), decision.who)
            runner.scheduler.again(step)
        elif decision.action == "skip":
            step.status = Status.skipped
            step.notes = f"skipped by you ({decision.who})" + (f": {decision.reason}" if decision.reason else "")
            with self._lock:
                self._final.setdefault(step.id, (decision.who, decision.about))
            runner.emit("step.skipped", step=step.id, reason=decision.reason or "skipped by you", by=decision.who)
            runner.control.changed(step)
            runner.scheduler.ended_without_result(step)
        else:  # stop
            by = "" if decision.who == "timeout" else f" by you ({decision.who})"
            why = f"stopped{by} at step {step.id}" + (f": {decision.reason}" if decision.reason else "")
            runner.scheduler.again(step)
            runner.control.end_later("failed", "aborted", why)

    def note_waiting(self) -> None:
        """The run's reason says it waits for a person (``planbook runs`` shows it), written to the store now."""
        s = self.runner.state
        if self.steering.people_wait() and s.status == "running":
            s.reason = "waiting"
        elif s.reason == "waiting":
            s.reason = None
        if self.runner.recorder is not None:
            self.runner.recorder.flush(s)

    # ------------------------------------------------------------ the callable and the prompt
    def _stop_waiting(self, step_id: str) -> None:
        """``step_id`` waits no more (decided, timed out, or it left the plan): its deadline goes."""
        self.steering.waiting.pop(step_id, None)
        self.steering.asking.discard(step_id)
        self._cancel_timer(step_id)

    def left(self, kept: set[str]) -> None:
        """Only the steps ``kept`` may go on waiting: one that left the plan (a revision) or was
        skipped (an agent's stop) waits no more (else a run could wait for ever, a handle list it)."""
        steering = self.steering
        gone = [step_id for step_id in steering.waiting if step_id not in kept]
        for step_id in gone:
            self._stop_waiting(step_id)
        for step_id in [step_id for step_id in steering.approved if step_id not in kept]:
            del steering.approved[step_id]
        if gone:
            self.note_waiting()
            self._ask_next()

    def _ask_next(self) -> None:
        """Ask the callable or the prompt about the first waiting step it has not answered, unless
        it is answering one now: one question at a time, in plan order (a prompt reads one terminal)."""
        runner, steering = self.runner, self.steering
        if self._busy is not None or not steering.asking or steering.prompt is None:
            return
        position = runner.scheduler.position
        step_id = min(steering.asking, key=lambda sid: position.get(sid, 0))
        step = runner.scheduler.by_id[step_id]
        since = steering.waiting[step_id]
        deadline = since + steering.timeout if steering.timeout is not None else None
        context = ApprovalContext(runner.plan.goal, runner.plan.copy_plan,
                                  {n: runner.scheduler.by_id[n].result for n in step.needs}, deadline=deadline)
        self._busy = step_id
        prompt, ref = steering.prompt, StepRef.of(step, runner.plan.revision)
        snapshot, asker = step.snapshot(), steering.asker_name()

        def ask() -> None:
            try:
                answer: Any = call_user(prompt, snapshot, context)
            except BaseException as exc:  # noqa: BLE001 - ends the run and is kept with it, never lost
                request = Request("answer", "api", step_id, since=since, exc=exc)
            else:
                if not isinstance(answer, Decision):
                    answer = Decision.stop(f"{asker} returned {bounded(repr(answer), 200)}, not a Decision")
                request = Request("answer", answer.who, step_id, replace(answer, about=ref), since=since)
            with self._lock:
                if not self._ended:
                    self._put(request)

        self._asker.ask(ask)

    def _answered(self, request: Request) -> None:
        """The callable's or the prompt's answer: applied if its question is still open (not
        decided by someone else meanwhile, not past its deadline, still in the plan)."""
        runner, steering = self.runner, self.steering
        step_id = request.step
        assert step_id is not None
        if self._busy == step_id:
            self._busy = None
        if steering.waiting.get(step_id) != request.since or step_id not in steering.asking:
            self._ask_next()
            return  # the question was closed meanwhile: this answer came too late
        step = runner.scheduler.by_id[step_id]
        if request.exc is not None:
            exc = request.exc
            self._stop_waiting(step_id)
            runner.scheduler.again(step)
            runner.control.end_later("failed", "aborted", f"{steering.asker_name()} raised {describe_exception(exc)} "
                                     f"when asked about step {step_id!r}", exc)
            return
        assert request.decision is not None
        if request.decision.who == "timeout" and steering.timeout is not None:
            steering.asking.discard(step_id)  # asked no more; the run's own deadline decides
            return  # (a prompt that stopped reading at the deadline)
        about = request.decision.about
        if about is not None and not about.covers(step):  # the step changed while it was asked: ask again
            runner.emit("step.decided", step=step_id, decision="voided", who=request.who,
                        reason=about.changed(step))
        else:
            steering.asking.discard(step_id)
            self._decided(step_id, request.decision, asked=True)
        self._ask_next()
