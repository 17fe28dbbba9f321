"""How a run's plan changes while it goes: the first plan, a replan after a failure, a
review after a step (AgenticSeek), and an agent ending the run (OpenManus's FINISHED).

Every change passes the one acceptance check (:mod:`planbook.spec.acceptance`), is checked
against the replan budget before it happens, and becomes a revision with a diff. This
module only *decides*: it asks the planner (or the review) and returns what the run
should do — a :class:`~planbook.engine.proposals.Revise`, a :class:`~planbook.engine.proposals.Reject`,
an :class:`~planbook.engine.proposals.End` — and the runner applies it (:func:`planbook.engine.planchanges.apply`);
nothing here writes the run's state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..data.errors import PlanError, PlanningError
from ..data.models import Plan, Status, Step
from ..data.plaincopy import clone_data
from ..spec.acceptance import accept_steps
from ..workers.interrupts import call_user
from ..workers.planners import PlanningContext, make_plan, planner_steps, tell_planner
from .calls import describe_exception
from .proposals import Change, End, FirstPlan, Reject, Revise
from .state import failure_line

if TYPE_CHECKING:
    from ..outbound import RunSecrets
    from .control import RunAccess


class Shown:
    """What a planner is shown of a run, and how the runner puts back what it hid.

    A planner (a model above all: its prompt is sent, and recorded in a cassette) never sees a
    secret: a step's secret-named literal args are ``***`` (a ``$id`` reference and a
    :class:`~planbook.Secret` as written), a known secret inside a text is ``***``, a step that
    holds a secret shows its result as ``***``; the goal and the last error are masked. A step
    the planner proposes under an id it was shown gets back, argument by argument, what it keeps
    of what was hidden (:meth:`~planbook.outbound.RunSecrets.kept_secrets`)."""

    def __init__(self, secrets: RunSecrets) -> None:
        self.secrets = secrets
        #: step id -> (the run's step, its args as shown, its task as shown)
        self.steps: dict[str, tuple[Step, dict[str, Any], str]] = {}

    def step(self, step: Step) -> Step:
        """A copy of ``step`` as the planner may see it (the plan's steps are shown first: an
        id's latest args are the ones a proposal keeps)."""
        gate = self.secrets
        args = gate.shown_args(step.args, as_json=False) if step.args else {}
        task = gate.text(step.task)
        self.steps.setdefault(step.id, (step, args, task))
        update: dict[str, Any] = {"args": clone_data(args), "needs": list(step.needs), "task": task}
        if step.result is not None:
            update["result"] = gate.result(step) if gate.holds_secret(step.id) else gate.data(step.result)
        return step.model_copy(update=update)

    def plan(self, plan: Plan) -> Plan:
        copy = plan.copy_plan()
        copy.steps = [self.step(st) for st in copy.steps]
        copy.goal = self.secrets.text(copy.goal)
        return copy

    def restore(self, proposed: list[Step]) -> str | None:
        """Put back into ``proposed`` (in place) what was hidden in the steps it keeps; why not, if it cannot."""
        for step in proposed:
            seen = self.steps.get(step.id)
            if seen is None:
                continue
            current, args, task = seen
            if step.task == task:
                step.task = current.task
            if step.args and current.args:
                try:
                    step.args = self.secrets.kept_secrets(step.args, current.args, args)
                except ValueError as exc:
                    return f"step {step.id!r}: {exc}"
        return None


def first_plan(run: RunAccess) -> Change:
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


def replan(run: RunAccess, failed: Step) -> Change:
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
    shown = Shown(run.secrets)
    context = PlanningContext(
        tools=run.tools,
        agents=run.agents,
        plan=shown.plan(run.plan),
        kept_ids=[st.id for st in kept],
        validate=lambda steps: accept_steps(run.plan, kept, list(steps), run.tools, run.agents)[2],
        emit=lambda kind, **data: run.emit(kind, **data),
    )
    tell_planner(run.planner, context)
    try:
        run.bus.beat()  # views draw the failure before a (possibly slow) planner runs
        # copies (the planner must not rewrite the run's records), as a planner may see them
        history = [shown.step(st) for st in s.history]
        proposed = planner_steps(call_user(run.planner, run.secrets.text(run.plan.goal), history,
                                           run.secrets.text(why)))
    except KeyboardInterrupt:
        raise  # the replan did not happen; the runner handles the failure again on continue
    except (PlanningError, PlanError) as exc:
        return End("failed", "no_plan", f"replanning after step {failed.id} failed: {exc}", replans=1)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a planner ends the run, not the process
        return End("failed", "no_plan", f"the planner raised {describe_exception(exc)}", exc, replans=1)
    unkept = shown.restore(proposed)
    candidate, new_steps, problems = accept_steps(run.plan, kept, proposed, run.tools, run.agents)
    if unkept is not None:
        return Reject(candidate, reason=why, rejected=f"the planner's new plan is invalid: {unkept}")
    if not proposed or (not new_steps and not problems):
        return End("failed", "no_plan", f"the planner had no new plan after: {why}", replans=1)
    if problems:  # refused: the plan did not change, so no replan is counted
        error = str(PlanError(problems)).replace("invalid plan", "the planner's new plan is invalid", 1)
        return Reject(candidate, reason=why, rejected=error)
    return Revise(candidate, new_steps, reason=why)


def review(run: RunAccess, step: Step) -> Change:
    """Ask ``after_step`` whether the rest of the plan changes (None: it does not)."""
    s = run.state
    assert run.after_step is not None
    shown = Shown(run.secrets)
    try:
        answer = call_user(run.after_step, run.secrets.text(run.plan.goal), shown.plan(run.plan), shown.step(step))
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
    unkept = shown.restore(proposed)
    candidate, new_steps, problems = accept_steps(run.plan, kept, proposed, run.tools, run.agents)
    if unkept is not None:
        return Reject(candidate, reason=f"review after step {step.id}",
                      rejected=f"the review after step {step.id} proposed an invalid plan: {unkept}")
    if problems:
        error = str(PlanError(problems)).replace("invalid plan", f"the review after step {step.id} "
                                                 "proposed an invalid plan", 1)
        return Reject(candidate, reason=f"review after step {step.id}", rejected=error)
    return Revise(candidate, new_steps, reason=f"review after step {step.id}")
