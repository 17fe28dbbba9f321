"""Steering a run while it goes: which steps wait for a person, and whether a step may start.

Steering only *decides* (like a failure policy, :mod:`planbook.engine.policies`): asked about the
first ready step, it answers with a :class:`Verdict` — start, wait for a person, apply a
decision at hand (one given in advance, or the ``approve=`` callable's answer), or end the
run. The decisions themselves reach the run through its one inbox and are applied on the
runner's thread by :mod:`planbook.engine.door` (the door), which also carries out verdicts;
each becomes an event that says who gave it (``step.decided``, ``run.steered``), so the
store keeps it and the views show it. A step that waits is taken out of the ready set, so
a parallel run keeps running the other ready steps meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..data.models import Status, Step
from .approvals import ApprovalContext, ApprovalRule, ApproveLike, Decision, StepRef

if TYPE_CHECKING:
    from ..data.models import Plan

#: how a step's note begins while it waits for a decision
WAITING_NOTE = "waiting for approval"
#: what a step asks when it waits and nobody can answer (a foreground run without a callable)
NOBODY = ("step {step!r} waits for approval and this run has nobody to ask: pass approve=a callable "
          "(step, context) -> Decision, run it in the background (planbook.start(...), %run_plan NAME "
          "--background) and decide with handle.approve({step!r}), or on a terminal use planbook run --approve")

Prompt = Callable[[Step, ApprovalContext], Decision]


class HasPlan(Protocol):
    """A run, as far as checking its askers goes."""

    @property
    def plan(self) -> Plan: ...


@dataclass(frozen=True)
class Verdict:
    """What the first ready step does: ``start``; ``still`` (it waits already); ``wait`` (for a
    person); ``ask`` (the ``approve=`` callable or the prompt, whose answer comes through the
    inbox like a person's, under the same deadline); ``apply`` ``decision``; ``end`` the run with
    ``error`` (``exc`` behind it). ``voided``: (who, why, action) of an earlier decision the step
    no longer matches. ``asked``: the decision is the callable's or the prompt's answer (not a
    person's decision, whatever its ``who`` says)."""

    kind: Literal["start", "still", "wait", "ask", "apply", "end"]
    decision: Decision | None = None
    error: str = ""
    exc: BaseException | None = None
    voided: tuple[str, str, str] | None = None
    asked: bool = False


START = Verdict("start")


class Steering:
    """The approvals of one run: its rule, who answers, which steps wait and which were approved."""

    def __init__(self, rule: ApprovalRule, *, timeout: float | None = None, prompt: Prompt | None = None) -> None:
        self.rule = rule
        self.timeout = timeout
        #: answers when a step asks (the CLI prompt; else rule.callback): called off the run's
        #: thread by the door, its answer given to the inbox like any decision
        self.prompt = prompt or rule.callback
        #: decisions can come from another thread (a background run's handle or widget)
        self.remote = False
        #: steps waiting for a decision, with when they began to (monotonic; read from other threads)
        self.waiting: dict[str, float] = {}
        #: the waiting steps whose answer the callable or the prompt gives (asked one at a time)
        self.asking: set[str] = set()
        #: steps approved and not started yet, as approved (an approval covers one execution of that work)
        self.approved: dict[str, tuple[StepRef, str]] = {}

    def ask_with(self, prompt: Prompt) -> None:
        """Answer the steps that wait with ``prompt`` (the terminal's), set before the run starts."""
        self.prompt = prompt

    def answered_elsewhere(self) -> None:
        """Decisions come from another thread (a background run's handle or its view)."""
        self.remote = True

    def check_askers(self, runner: HasPlan) -> None:
        """Before a run: a step that would ask with nobody to answer is an error now, not a hang."""
        if self.prompt is None and not self.remote:
            asking = [s.id for s in runner.plan.steps if s.status is Status.not_started and self.rule.asks(s)
                      and s.id not in self.approved]
            if asking:
                raise ValueError(NOBODY.format(step=asking[0]))

    def verdict(self, step: Step, *, approval: tuple[StepRef, str] | None,
                kept: Callable[[], Decision | None]) -> Verdict:
        """What ``step`` does now (this only decides: the door applies it). ``approval``: the step's
        approval, taken by the door (an approval covers one execution); ``kept``: takes the decision
        given for it in advance, if any."""
        voided: tuple[str, str, str] | None = None
        if approval is not None:
            ref, who = approval
            if ref.covers(step):
                return START  # an approval is for one execution: a retry asks again
            voided = (who, ref.changed(step), "approve")  # a replan or an edit changed the step since
        if not self.rule.asks(step):
            return START
        decision = kept()
        if decision is not None and decision.about is not None and not decision.about.covers(step):
            voided, decision = (decision.who, decision.about.changed(step), decision.action), None
        if decision is not None:
            return Verdict("apply", decision, voided=voided)
        if step.id in self.waiting:
            return Verdict("still", voided=voided)  # a pause or a replan put it back in the ready set
        if self.prompt is not None:  # the callable or the prompt is asked off the run's thread (the door)
            return Verdict("ask", voided=voided)
        if not self.remote:
            return Verdict("end", error=NOBODY.format(step=step.id), voided=voided)
        return Verdict("wait", voided=voided)

    def asker_name(self) -> str:
        """Who answers when the run asks, as an error names it."""
        return "the approve= callable" if self.prompt is self.rule.callback else "the approval prompt"

    def people_wait(self) -> bool:
        """Whether a step waits for a person (not only for the callable or the prompt to answer)."""
        return any(step_id not in self.asking for step_id in self.waiting)


def build(approve: ApproveLike, approve_timeout: float | None, tools: Any, plan: Any) -> Steering:
    """The steering of a run from its ``approve=`` and ``approve_timeout=`` options (checked here)."""
    if approve_timeout is not None and (isinstance(approve_timeout, bool) or not isinstance(approve_timeout, (int, float))
                                        or approve_timeout <= 0):
        raise ValueError(f"approve_timeout must be a positive number of seconds (or None: wait as long as it takes), "
                         f"got {approve_timeout!r}")
    return Steering(ApprovalRule(approve, tools, plan), timeout=approve_timeout)
