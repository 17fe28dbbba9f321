"""How a run's plan changes while it goes: the first plan, a replan after a failure, a
review after a step (AgenticSeek), and an agent ending the run (OpenManus's FINISHED).

Every change passes the one acceptance check (:mod:`planbook.spec.acceptance`), is checked
against the replan budget before it happens, and becomes a revision with a diff. This
module only *decides*: it asks the planner (or the review) and returns what the run
should do — a :class:`~planbook.engine.changes.Revise`, a :class:`~planbook.engine.changes.Reject`,
an :class:`~planbook.engine.changes.End` — and the runner applies it (:func:`planbook.engine.planchanges.apply`);
nothing here writes the run's state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..spec.acceptance import accept_steps
from .changes import Change, End, FirstPlan, Reject, Revise
from ..data.errors import PlanError, PlanningError
from .execute import describe_exception
from ..workers.interrupts import call_user
from ..data.models import Status, Step, _clone
from ..workers.planners import PlanningContext, make_plan, planner_steps, tell_planner
from .state import failure_line

if TYPE_CHECKING:
    from .runner import Runner


def copy_step(step: Step) -> Step:
    """A history record a planner may change without changing the run's."""
    return step.model_copy(update={"args": _clone(step.args), "needs": list(step.needs)})


def first_plan(run: Runner) -> Change:
    """The first plan of a run given a goal (or why there is none)."""
    assert run.planner is not None and run.goal_only is not None
    try:
        plan = make_plan(
            run.goal_only, run.planner, tools=run.tools, agents=run.agents, plan_id=run.plan.id,
            emit=lambda kind, **data: run.emit(kind, **data),
        )
    except (PlanningError, PlanError) as exc:
        return End("failed", "no_plan", f"the planner could not make a plan: {exc}")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a planner ends the run, not the process
        return End("failed", "no_plan", f"the planner raised {describe_exception(exc)}", exc)
    return FirstPlan(plan)


def replan(run: Runner, failed: Step) -> Change:
    """The planner's new plan after ``failed`` (a replan is counted once the planner was asked)."""
    s = run.state
    assert run.planner is not None
    # why this replan: the failure of the step whose policy called for it. Another lane's call that
    # failed while the replan waited for the calls in flight is handled by its own policy, and
    # s.last_error may already name it.
    why = failure_line(failed.id, failed.error) if failed.error else s.last_error
    refused = run.budget.replan_refused(s.executions, s.replans, why)
    if refused is not None:
        return End("failed", refused[0], refused[1])  # type: ignore[arg-type]
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
    try:
        run.bus.beat()  # views draw the failure before a (possibly slow) planner runs
        history = [copy_step(st) for st in s.history]  # the planner must not rewrite the run's records
        proposed = planner_steps(call_user(run.planner, run.plan.goal, history, why))
    except KeyboardInterrupt:
        raise  # the replan did not happen; the runner handles the failure again on continue
    except (PlanningError, PlanError) as exc:
        return End("failed", "no_plan", f"replanning after step {failed.id} failed: {exc}", replans=1)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a planner ends the run, not the process
        return End("failed", "no_plan", f"the planner raised {describe_exception(exc)}", exc, replans=1)
    candidate, new_steps, problems = accept_steps(run.plan, kept, proposed, run.tools, run.agents)
    if not proposed or (not new_steps and not problems):
        return End("failed", "no_plan", f"the planner had no new plan after: {why}", replans=1)
    if problems:  # refused: the plan did not change, so no replan is counted
        error = str(PlanError(problems)).replace("invalid plan", "the planner's new plan is invalid", 1)
        return Reject(candidate, reason=why, rejected=error)
    return Revise(candidate, new_steps, reason=why)


def review(run: Runner, step: Step) -> Change:
    """Ask ``after_step`` whether the rest of the plan changes (None: it does not)."""
    s = run.state
    assert run.after_step is not None
    try:
        answer = call_user(run.after_step, run.plan.goal, run.plan.copy_plan(), step.snapshot())
        proposed = None if answer is None else planner_steps(answer)
    except KeyboardInterrupt:
        raise
    except (PlanningError, PlanError) as exc:
        return End("failed", "no_plan", f"the review after step {step.id} failed: {exc}")
    except BaseException as exc:  # noqa: BLE001 - as for a planner
        return End("failed", "no_plan", f"the review after step {step.id} raised {describe_exception(exc)}", exc)
    if proposed is None:
        return None  # no change: costs no replan
    refused = run.budget.replan_refused(s.executions, s.replans, f"the review after step {step.id}")
    if refused is not None:
        return End("failed", refused[0], refused[1])  # type: ignore[arg-type]
    position = run.scheduler.position.get(step.id, -1)
    kept = [st for i, st in enumerate(run.plan.steps)
            if i <= position or st.status not in (Status.not_started, Status.blocked)]
    candidate, new_steps, problems = accept_steps(run.plan, kept, proposed, run.tools, run.agents)
    if problems:
        error = str(PlanError(problems)).replace("invalid plan", f"the review after step {step.id} "
                                                 "proposed an invalid plan", 1)
        return Reject(candidate, reason=f"review after step {step.id}", rejected=error)
    return Revise(candidate, new_steps, reason=f"review after step {step.id}")
