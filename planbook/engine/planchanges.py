"""Changes to a run's plan, applied on the run's thread: a replan, a review's answer, the first
plan, an edit by a person, an agent ending the run.

:mod:`planbook.engine.replanning` decides and returns a :mod:`~planbook.engine.proposals` value;
this module asks it and carries the value out — with the runner and the door
(:mod:`planbook.engine.door`), the only code that writes a run's state
(``tests/architecture/test_door_architecture.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..data.diff import diff_plans
from ..data.models import PlanDiff, Status, Step
from ..data.wording import edited_by_you
from . import replanning
from .proposals import Change, FirstPlan, Reject, Revise

if TYPE_CHECKING:
    from .control import RunAccess

__all__ = ["apply", "edit_step", "first_plan", "replan", "review", "stop_after"]


def edit_step(runner: RunAccess, step: Step, args: dict[str, Any], who: str) -> None:
    """Give a step that has not started new arguments: a new revision with a ``revised`` diff,
    like a replan by a person (it costs no replan budget). Changed in place, so calls in flight
    keep their steps."""
    s = runner.state
    before = runner.plan.copy_plan()
    step.args = args
    runner.plan.revision += 1
    diff = diff_plans(before, runner.plan, reason=edited_by_you(who))
    s.revisions.append(diff)
    _emit_diff(runner, diff, edited_by=who)
    if runner.recorder is not None:
        runner.recorder.save(s)


def apply(runner: RunAccess, change: Change) -> bool:
    """Carry out what a replan, a review or the first planning returned; False when the run ended."""
    s = runner.state
    if change is None:
        return True
    if isinstance(change, FirstPlan):
        s.plan = change.plan
        return True
    if isinstance(change, Revise):
        s.replans += change.replans
        diff = diff_plans(runner.plan, change.candidate, reason=change.reason)
        s.plan = change.candidate
        for new in change.new_steps:  # a step the planner (re)proposed is new work with its own retries
            s.retries_used.pop(new.id, None)
        s.revisions.append(diff)
        runner.scheduler.rebuild(change.candidate)
        if runner.door is not None:  # a step that left the plan stops waiting for a decision
            runner.door.left({st.id for st in change.candidate.steps})
        _emit_diff(runner, diff)
        runner.emit("plan.created", steps=[st.id for st in change.candidate.steps])
        if runner.recorder is not None:
            runner.recorder.save(s)
        return True
    if isinstance(change, Reject):
        # kept in the history (its plan.diff marked rejected), so the user sees what was proposed and why not
        diff = diff_plans(runner.plan, change.candidate, reason=change.reason).model_copy(
            update={"rejected": change.rejected})
        s.revisions.append(diff)
        _emit_diff(runner, diff)
        runner.control.end("failed", "no_plan", change.rejected)
        return False
    s.replans += change.replans
    runner.control.end(change.status, change.reason, change.error, change.exc)
    return False


def replan(runner: RunAccess, failed: Step) -> None:
    """Ask the planner for a new plan after ``failed``, and apply what it returned."""
    try:
        change = replanning.replan(runner, failed)
    except KeyboardInterrupt:
        runner.state.pending_failures.append(failed.id)  # the failure is handled again on continue
        raise
    apply(runner, change)


def review(runner: RunAccess, step: Step) -> None:
    """Ask ``after_step`` whether the rest of the plan changes, and apply its answer."""
    apply(runner, replanning.review(runner, step))


def first_plan(runner: RunAccess) -> bool:
    return apply(runner, replanning.first_plan(runner))


def stop_after(runner: RunAccess, step: Step, why: str) -> None:
    """An agent said the goal is reached: skip what has not started and end the run. A step that
    waited for a person is skipped too: it waits no more (its mark goes, and the door forgets it)."""
    for other in runner.plan.steps:
        if other.status is Status.not_started:
            other.set_state(status=Status.skipped, notes=f"not run: step {step.id} ended the run ({why})", mark=None)
            runner.emit("step.skipped", step=other.id, reason=why, by=step.id)
            runner.control.changed(other)
    if runner.door is not None:  # no step is left to wait: none that waited goes on waiting
        runner.door.left({st.id for st in runner.plan.steps if st.status is Status.not_started})
    runner.control.end_when_idle("completed", "stopped", f"step {step.id} ended the run: {why}")


def _emit_diff(runner: RunAccess, diff: PlanDiff, edited_by: str | None = None) -> None:
    """``plan.diff``; ``edited_by``: who edited the plan by hand (a live view announces an edit as
    one, not as a replan), left out for a planner's or a review's change."""
    data: dict[str, Any] = {"removed": diff.removed, "added": diff.added, "revised": diff.revised,
                            "from_revision": diff.from_revision, "to_revision": diff.to_revision,
                            "reason": diff.reason}
    if edited_by is not None:
        data["edited_by"] = edited_by
    if diff.rejected is not None:
        data["rejected"] = diff.rejected
    runner.emit("plan.diff", **data)
