"""How a run's plan changes while it goes: the first plan, a replan after a failure, a
review after a step (AgenticSeek), and an agent ending the run (OpenManus's FINISHED).

Every change passes the one acceptance check (:mod:`planbook.acceptance`), is counted
against the replan budget before it happens, and becomes a revision with a diff: the
runner's tick only decides *that* a plan must change; this module changes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .acceptance import accept_steps
from .diff import diff_plans
from .errors import PlanError, PlanningError
from .execute import describe_exception
from .interrupts import call_user
from .models import Plan, PlanDiff, Status, Step, _clone
from .planners import PlanningContext, make_plan, planner_steps, tell_planner

if TYPE_CHECKING:
    from .runner import Runner


def copy_step(step: Step) -> Step:
    """A history record a planner may change without changing the run's."""
    return step.model_copy(update={"args": _clone(step.args), "needs": list(step.needs)})


def first_plan(run: Runner) -> bool:
    assert run.planner is not None and run.goal_only is not None
    try:
        plan = make_plan(
            run.goal_only, run.planner, tools=run.tools, agents=run.agents, plan_id=run.plan.id,
            emit=lambda kind, **data: run.emit(kind, **data),
        )
    except (PlanningError, PlanError) as exc:
        run._finish("failed", "no_plan", f"the planner could not make a plan: {exc}")
        return False
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a planner ends the run, not the process
        run._finish("failed", "no_plan", f"the planner raised {describe_exception(exc)}", exc)
        return False
    run.state.plan = plan
    return True

def replan(run: Runner, failed: Step) -> None:
    s = run.state
    assert run.planner is not None
    refused = run.budget.replan_refused(s.executions, s.replans, s.last_error)
    if refused is not None:
        run._finish("failed", refused[0], refused[1])  # type: ignore[arg-type]
        return
    kept = [st for st in run.plan.steps if st.status in (Status.completed, Status.skipped)]
    context = PlanningContext(
        tools=run.tools,
        agents=run.agents,
        plan=run.plan.copy_plan(),
        kept_ids=[st.id for st in kept],
        validate=lambda steps: accept_steps(run.plan, kept, list(steps), run.tools, run.agents)[2],
        emit=lambda kind, **data: run.emit(kind, **data),  # type: ignore[arg-type]
    )
    tell_planner(run.planner, context)
    s.replans += 1
    try:
        run.bus.beat()  # views draw the failure before a (possibly slow) planner runs
        history = [copy_step(st) for st in s.history]  # the planner must not rewrite the run's records
        proposed = planner_steps(call_user(run.planner, run.plan.goal, history, s.last_error))
    except KeyboardInterrupt:
        s.replans -= 1  # the replan did not happen; the failure is handled again on continue
        s.pending_failures.append(failed.id)
        raise
    except (PlanningError, PlanError) as exc:
        run._finish("failed", "no_plan", f"replanning after step {failed.id} failed: {exc}")
        return
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a planner ends the run, not the process
        run._finish("failed", "no_plan", f"the planner raised {describe_exception(exc)}", exc)
        return
    candidate, new_steps, problems = accept_steps(run.plan, kept, proposed, run.tools, run.agents)
    if not proposed or (not new_steps and not problems):
        run._finish("failed", "no_plan", f"the planner had no new plan after: {s.last_error}")
        return
    if problems:
        s.replans -= 1  # refused: the plan did not change, so no replan is counted
        error = str(PlanError(problems)).replace("invalid plan", "the planner's new plan is invalid", 1)
        record_rejected(run, candidate, reason=s.last_error, rejected=error)
        run._finish("failed", "no_plan", error)
        return
    apply_revision(run, candidate, new_steps, reason=s.last_error)

def stop_after(run: Runner, step: Step, why: str) -> None:
    """An agent said the goal is reached: skip what has not started and end the run."""
    for other in run.plan.steps:
        if other.status is Status.not_started:
            other.status = Status.skipped
            other.notes = f"not run: step {step.id} ended the run ({why})"
            run.emit("step.skipped", step=other.id, reason=why, by=step.id)
            run._changed(other)
    run._ending = ("completed", "stopped", f"step {step.id} ended the run: {why}")
    if not run.dispatch.inflight:
        run._finish(*run._ending)

def review(run: Runner, step: Step) -> None:
    """Ask ``after_step`` whether the rest of the plan changes; apply its answer as a revision."""
    s = run.state
    assert run.after_step is not None
    try:
        answer = call_user(run.after_step, run.plan.goal, run.plan.copy_plan(), step.snapshot())
        proposed = None if answer is None else planner_steps(answer)
    except KeyboardInterrupt:
        raise
    except (PlanningError, PlanError) as exc:
        run._finish("failed", "no_plan", f"the review after step {step.id} failed: {exc}")
        return
    except BaseException as exc:  # noqa: BLE001 - as for a planner
        run._finish("failed", "no_plan", f"the review after step {step.id} raised {describe_exception(exc)}", exc)
        return
    if proposed is None:
        return  # no change: costs no replan
    refused = run.budget.replan_refused(s.executions, s.replans, f"the review after step {step.id}")
    if refused is not None:
        run._finish("failed", refused[0], refused[1])  # type: ignore[arg-type]
        return
    position = run.scheduler.position.get(step.id, -1)
    kept = [st for i, st in enumerate(run.plan.steps)
            if i <= position or st.status not in (Status.not_started, Status.blocked)]
    candidate, new_steps, problems = accept_steps(run.plan, kept, proposed, run.tools, run.agents)
    if problems:
        error = str(PlanError(problems)).replace("invalid plan", f"the review after step {step.id} "
                                                 "proposed an invalid plan", 1)
        record_rejected(run, candidate, reason=f"review after step {step.id}", rejected=error)
        run._finish("failed", "no_plan", error)
        return
    s.replans += 1
    apply_revision(run, candidate, new_steps, reason=f"review after step {step.id}")

def apply_revision(run: Runner, candidate: Plan, new_steps: list[Step], reason: str | None) -> None:
    s = run.state
    diff = diff_plans(run.plan, candidate, reason=reason)
    s.plan = candidate
    for new in new_steps:  # a step the planner (re)proposed is new work with its own retries
        s.retries_used.pop(new.id, None)
    s.revisions.append(diff)
    run.scheduler.rebuild(candidate)
    _emit_diff(run, diff)
    run.emit("plan.created", steps=[st.id for st in candidate.steps])
    if run.recorder is not None:
        run.recorder.save(s)


def record_rejected(run: Runner, candidate: Plan, reason: str | None, rejected: str) -> None:
    """Keep a refused replacement in the revision history (and its ``plan.diff`` event, marked
    ``rejected``), so the user sees what the planner proposed and why it was refused; the
    plan itself does not change."""
    diff = diff_plans(run.plan, candidate, reason=reason).model_copy(update={"rejected": rejected})
    run.state.revisions.append(diff)
    _emit_diff(run, diff)


def _emit_diff(run: Runner, diff: PlanDiff) -> None:
    data = {"removed": diff.removed, "added": diff.added, "revised": diff.revised,
            "from_revision": diff.from_revision, "to_revision": diff.to_revision, "reason": diff.reason}
    if diff.rejected is not None:
        data["rejected"] = diff.rejected
    run.emit("plan.diff", **data)
