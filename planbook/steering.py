"""Steering a run while it goes: approvals, pause and stop, applied in the runner's decide step.

Decisions come from any thread (a widget's button on the kernel's main thread, a
:class:`~planbook.handle.RunHandle` method, the CLI prompt) into an inbox; only the
runner's thread changes the run, at the top of a tick or while it waits. Each decision
becomes an event that says who gave it (``step.decided``, ``run.steered``), so the
store keeps it and the views show it. A step that waits is taken out of the ready set,
so a parallel run keeps running the other ready steps meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalContext, ApprovalRule, ApproveLike, Decision, Who, check_edit
from .diff import diff_plans
from .interrupts import call_user, waiting
from .models import Status, Step

if TYPE_CHECKING:
    from .runner import Runner

#: how a step's note begins while it waits for a decision
WAITING_NOTE = "waiting for approval"
#: what a step asks when it waits and nobody can answer (a foreground run without a callable)
NOBODY = ("step {step!r} waits for approval and this run has nobody to ask: pass approve=a callable "
          "(step, context) -> Decision, run it in the background (planbook.start(...), %run_plan NAME "
          "--background) and decide with handle.approve({step!r}), or on a terminal use planbook run --approve")

Prompt = Callable[[Step, ApprovalContext], Decision]


class Steering:
    """The approvals and controls of one run (thread-safe inbox, applied on the runner's thread)."""

    def __init__(self, rule: ApprovalRule, *, timeout: float | None = None, prompt: Prompt | None = None) -> None:
        self.rule = rule
        self.timeout = timeout
        #: answers on the runner's thread when a step asks (the CLI prompt); else rule.callback
        self.prompt = prompt or rule.callback
        #: decisions can come from another thread (a background run's handle or widget)
        self.remote = False
        self._lock = threading.Lock()
        self._inbox: deque[tuple[str, str | None, Any]] = deque()
        self.arrived = threading.Event()
        #: steps waiting for a decision, with when they began to (monotonic)
        self.waiting: dict[str, float] = {}
        #: decisions given before their step asked (a notebook deciding in code), by step id
        self.given: dict[str, Decision] = {}
        self.approved: set[str] = set()
        self._wake: Callable[[], None] = lambda: None

    def attach(self, runner: Runner) -> None:
        self._wake = runner.dispatch.nudge

    # ----------------------------------------------------------- from any thread
    def give(self, step_id: str, decision: Decision) -> None:
        """Queue a decision about ``step_id`` (it applies when the step asks, or at once if it waits)."""
        self._put("decide", step_id, decision)

    def control(self, action: str, who: Who) -> None:
        """Queue ``pause`` or ``stop`` (from a button, a handle)."""
        self._put(action, None, who)

    def _put(self, kind: str, step_id: str | None, payload: Any) -> None:
        with self._lock:
            self._inbox.append((kind, step_id, payload))
        self.arrived.set()
        self._wake()

    # ------------------------------------------------------ on the runner's thread
    def check_askers(self, runner: Runner) -> None:
        """Before a run: a step that would ask with nobody to answer is an error now, not a hang."""
        if self.prompt is None and not self.remote:
            asking = [s.id for s in runner.plan.steps if s.status is Status.not_started and self.rule.asks(s)
                      and s.id not in self.approved]
            if asking:
                raise ValueError(NOBODY.format(step=asking[0]))

    def apply_inbox(self, runner: Runner) -> None:
        """Apply what arrived: decisions for waiting steps (others wait for their step), pause, stop."""
        while True:
            with self._lock:
                if not self._inbox:
                    self.arrived.clear()
                    return
                kind, step_id, payload = self._inbox.popleft()
            if kind == "decide":
                assert step_id is not None
                if step_id in self.waiting:
                    del self.waiting[step_id]
                    self._apply(runner, runner.scheduler.by_id[step_id], payload)
                    self._note_waiting(runner)
                else:
                    self.given[step_id] = payload
            elif kind == "pause" and not runner.finished:
                runner.emit("run.steered", action="pause", who=payload)
                runner._pause_why = f"paused by you ({payload})"
            elif kind == "stop" and not runner.finished:
                runner.emit("run.steered", action="stop", who=payload)
                runner._ending = ("failed", "aborted", f"stopped by you ({payload})")

    def clear(self, runner: Runner, step: Step) -> bool | None:
        """May ``step`` (the first ready one) start now? If it must ask, it is taken out of the
        ready set until a decision comes (False); a decision at hand is applied first. None: a
        run of one step at a time keeps plan order, so nothing after a waiting step starts."""
        if self.waiting and runner.parallel == 1 and step.id not in self.waiting:
            return None
        if step.id in self.approved:
            self.approved.discard(step.id)  # an approval is for one execution: a retry asks again
            return True
        if not self.rule.asks(step):
            return True
        runner.scheduler.take()
        decision = self.given.pop(step.id, None)
        if decision is None and step.id in self.waiting:
            return False  # still waiting (a pause or a replan put it back)
        if decision is None and self.prompt is not None:
            context = ApprovalContext(runner.plan.goal, runner.plan.copy_plan,
                                      {n: runner.scheduler.by_id[n].result for n in step.needs})
            decision = call_user(self.prompt, step.snapshot(), context)
            if not isinstance(decision, Decision):
                decision = Decision.stop(f"the approve= callable returned {decision!r}, not a Decision")
        if decision is None:
            if not self.remote:
                runner._ending = ("failed", "aborted", NOBODY.format(step=step.id))
                runner.scheduler.again(step)
                return False
            self.waiting[step.id] = time.monotonic()
            step.notes = WAITING_NOTE
            self._note_waiting(runner)  # in the store before anyone hears of it
            runner.emit("step.waiting", step=step.id, tool=step.tool, args=dict(step.args))
            return False
        self._apply(runner, step, decision)
        return False

    def _apply(self, runner: Runner, step: Step, decision: Decision) -> None:
        """What a decision does (the step was taken out of the ready set)."""
        if step.status is not Status.not_started:
            return  # decided twice, or the run moved on (a stop, a replan): nothing left to decide
        if decision.action == "edit":
            try:
                args = check_edit(step, decision.args or {}, runner.tools)
            except (TypeError, ValueError) as exc:  # checked when given; the plan may have changed since
                runner.emit("step.decided", step=step.id, decision="refused", who=decision.who, reason=str(exc))
                if step.id in self.given or decision.who in ("widget", "api") and self.remote:
                    self.waiting[step.id] = time.monotonic()  # someone can decide again
                else:  # a callable's (or prompt's) edit that does not fit: its answer is a bug, not a choice
                    runner.scheduler.again(step)
                    runner._ending = ("failed", "aborted", f"the edit of step {step.id} was refused: {exc}")
                return
            runner.emit("step.decided", step=step.id, **decision.as_data())
            edit_step(runner, step, args, decision.who)
        else:
            runner.emit("step.decided", step=step.id, **decision.as_data())
        if step.notes == WAITING_NOTE:
            step.notes = ""
        if decision.action in ("approve", "edit"):
            self.approved.add(step.id)
            runner.scheduler.again(step)
        elif decision.action == "skip":
            step.status = Status.skipped
            step.notes = f"skipped by you ({decision.who})" + (f": {decision.reason}" if decision.reason else "")
            runner.emit("step.skipped", step=step.id, reason=decision.reason or "skipped by you", by=decision.who)
            runner._changed(step)
            runner.scheduler.ended_without_result(step)
        else:  # stop
            by = "" if decision.who == "timeout" else f" by you ({decision.who})"
            why = f"stopped{by} at step {step.id}" + (f": {decision.reason}" if decision.reason else "")
            runner.scheduler.again(step)
            runner._ending = ("failed", "aborted", why)

    def _note_waiting(self, runner: Runner) -> None:
        """The run's reason says it waits (``planbook runs`` shows it), written to the store now."""
        s = runner.state
        if self.waiting and s.status == "running":
            s.reason = "waiting"
        elif s.reason == "waiting":
            s.reason = None
        if runner.recorder is not None:
            runner.recorder.flush(s)

    def wait(self, runner: Runner) -> None:
        """Nothing runs and steps wait: wait for a decision (views redraw; ``approve_timeout`` counts)."""
        bus = runner.bus
        while not self.arrived.is_set():
            if self.timeout is not None:
                now = time.monotonic()
                late = [sid for sid, since in self.waiting.items() if now - since >= self.timeout]
                if late:
                    for sid in late:
                        self.give(sid, Decision.stop(f"no decision within approve_timeout={self.timeout:g} s",
                                                     who="timeout"))
                    break
            slice_ = bus.interval if bus.heartbeats else 0.25
            if self.timeout is not None:
                first = min(self.waiting.values(), default=time.monotonic())
                slice_ = max(min(slice_, first + self.timeout - time.monotonic()), 0.0)
            with waiting():
                self.arrived.wait(slice_)
            bus.beat()
        self.apply_inbox(runner)


def build(approve: ApproveLike, approve_timeout: float | None, tools: Any, plan: Any) -> Steering:
    """The steering of a run from its ``approve=`` and ``approve_timeout=`` options (checked here)."""
    if approve_timeout is not None and (isinstance(approve_timeout, bool) or not isinstance(approve_timeout, (int, float))
                                        or approve_timeout <= 0):
        raise ValueError(f"approve_timeout must be a positive number of seconds (or None: wait as long as it takes), "
                         f"got {approve_timeout!r}")
    return Steering(ApprovalRule(approve, tools, plan), timeout=approve_timeout)


def edit_step(runner: Runner, step: Step, args: dict[str, Any], who: str) -> None:
    """Give a step that has not started new arguments: a new revision with a ``revised`` diff,
    like a replan by a person (it costs no replan budget). Changed in place, so calls in flight
    keep their steps."""
    s = runner.state
    before = runner.plan.copy_plan()
    step.args = args
    runner.plan.revision += 1
    diff = diff_plans(before, runner.plan, reason=f"edited by you ({who})")
    s.revisions.append(diff)
    runner.emit("plan.diff", removed=diff.removed, added=diff.added, revised=diff.revised,
                from_revision=diff.from_revision, to_revision=diff.to_revision, reason=diff.reason)
    if runner.recorder is not None:
        runner.recorder.save(s)
