"""What-if runs: fork a run at a step, with an edit, and let the runner do the rest.

A fork is a resume of a state built from the parent (shared/DESIGN.md): the parent's last
plan, copied; the steps the edit cannot reach kept (completed, their results the parent's
own objects, marked ``kept from run R``; a store writes them as references to the parent's
rows); the edited steps and everything that depends on them cleared to run again; the
whole adopted by a new :class:`~planbook.engine.runner.Runner` under a new run id, with the
parent's options unless others are given. The parent is read once and never written.

The rules (README, "What-if runs"): kept steps never ask for approval again and do not
count against ``max_steps``; a re-run set holding a step that ran in the parent with a tool
declared ``idempotent=False`` stops before anything runs unless ``rerun=`` names it; a
replan in the child is a revision of the child only; a step the parent never ran cannot be
a fork point (nothing to fork from), but it runs in the child whether the edit reaches it or not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from ..data.errors import ForkError, PlanError, closest
from ..data.lineage import (
    PINNED_NOTE,
    REUSE_CHOICES,
    Lineage,
    Reuse,
    dependents,
    kept_note,
    kept_steps,
)
from ..data.models import Event, Plan, RunResult, Status, Step
from ..data.refs import resolve
from ..data.stepmark import StepMark
from ..outbound.redact import shown_arg
from ..workers.agents import AgentsLike, as_agents
from ..workers.planners import Planner
from ..workers.tools import ToolsLike, as_toolbox
from .approvals import check_edit
from .config import DEFAULTS, resumed_options
from .runner import Runner

#: ``result=`` not given (None is a result a step may be pinned to)
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()


@dataclass
class Parent:
    """The run a fork starts from, read once: its last plan, revisions, options and where it lives."""

    run_id: str
    plan: Plan
    revisions: list[Any]
    config: dict[str, Any]
    status: str
    goal: str
    store: Any = None
    #: the store was opened here from a path (closed when the fork ends)
    opened_here: bool = False
    lineage: dict[str, Any] | None = None


def read_parent(run: Any, store: Any = None) -> Parent:
    """The parent of a fork: a :class:`RunResult` (read from ``store`` when given, else in memory),
    a run id, or a plan name meaning its latest stored run. Reads only; nothing is created."""
    if isinstance(run, RunResult) and store is None:
        if run.run_id is None:
            raise ForkError("this result has no run id: fork a result planbook.run returned, or a stored run")
        return Parent(run.run_id, run.plan, list(run.revisions), {"max_steps": run.max_steps,
                      "max_replans": run.max_replans}, run.status, run.goal, lineage=run.lineage)
    from ..store import default_store_path, open_store

    where = store if store is not None else default_store_path()
    here = isinstance(where, (str, os.PathLike)) and os.fspath(where) != ":memory:"
    if here and not os.path.exists(os.path.expanduser(os.fspath(where))):
        raise ForkError(f"there is no run store at {os.fspath(where)}: pass store= the path the run was saved "
                        "in (the magics and the CLI use .planbook/runs.sqlite under the current directory)")
    opened: Any = open_store(where)
    try:
        listed = {summary.run_id: summary for summary in opened.list_runs()}  # read once, for both checks
        run_id = _stored_id(opened, run, listed)
        _refuse_live_writer(listed[run_id], run_id)
        stored = opened.load_run(run_id, plan_only=True)  # a fork needs its parent's plan, not its history
    except BaseException:
        if here:
            opened.close()
        raise
    return Parent(run_id, stored.plan, list(stored.revisions), dict(stored.config), stored.status, stored.goal,
                  store=opened, opened_here=here, lineage=stored.counters.get("lineage"))


def _stored_id(store: Any, run: Any, listed: Mapping[str, Any]) -> str:
    """The id of the stored run ``run`` names: a result's id, a run id, or a plan's latest run."""
    wanted = run.run_id if isinstance(run, RunResult) else run
    if not isinstance(wanted, str) or not wanted:
        raise ForkError(f"fork takes a RunResult, a run id or a plan name; got {type(run).__name__}")
    ids = list(listed)
    if wanted in listed:
        return wanted
    latest = store.latest_run_id(plan_id=wanted)
    if latest is not None:
        return str(latest)
    what = "run" if isinstance(run, RunResult) else "run or plan"
    raise ForkError(f"no {what} {wanted!r} in the run store {store.location}{closest(wanted, ids)} "
                    f"(planbook.runs() lists its runs)")


def _refuse_live_writer(summary: Any, run_id: str) -> None:
    """A run another live process is writing is not forked: its state is not final (the claim's wording)."""
    from ..data.errors import RunClaimed
    from ..store.claims import refuse_claim

    try:
        refuse_claim(run_id, summary.status, summary.writer_pid, summary.writer_host, summary.writer_since,
                     force=False)
    except RunClaimed as exc:
        raise ForkError(f"{exc}: fork it once that run has stopped") from None


@dataclass
class ForkPlan:
    """The child's plan and what it tells: the fork points, what was kept, pinned, re-run, removed."""

    plan: Plan
    at: list[str]
    how: str
    edit: dict[str, dict[str, Any]]
    kept: set[str]
    pinned: set[str]
    removed: list[str]
    #: ``reuse="identical"``: dependents that may still be kept at run time -> the parent's call
    parent_calls: dict[str, tuple[Any, Any, Any]]


def plan_fork(parent: Parent, *, at: str | Sequence[str] | None, args: Mapping[str, Any] | None, result: Any,
              plan: Plan | str | None, reuse: Reuse, tools: Any, agents: Any) -> ForkPlan:
    """The child's plan, checked: the edit applied, the kept steps marked, the rest cleared."""
    if reuse not in REUSE_CHOICES:
        raise ForkError(f"reuse={reuse!r} is not a choice: "
                        + "; ".join(f"{name!r} keeps {what}" for name, what in REUSE_CHOICES.items()))
    if args is not None and result is not UNSET:
        raise ForkError("args= and result= cannot go together: args= runs the step again with new arguments, "
                        "result= pins what it returned without running it; give one")
    if plan is not None and (args is not None or result is not UNSET):
        raise ForkError("plan= cannot go with args= or result=: put the change in the plan you pass")
    points = [at] if isinstance(at, str) else list(at or [])
    base = parent.plan
    for step_id in points:
        _check_point(parent, step_id)
    if (args is not None or result is not UNSET) and len(points) != 1:
        raise ForkError("args= and result= change one step: say which with at=STEP")
    edit: dict[str, dict[str, Any]] = {}
    removed: list[str] = []
    if plan is not None:
        new_plan = Plan.parse(plan) if isinstance(plan, str) else plan
        changed, removed = _plan_changes(base, new_plan)
        points = [sid for sid in [st.id for st in new_plan.steps] if sid in changed or sid in points]
        edit = {sid: {"plan": "added" if sid not in {st.id for st in base.steps} else "changed"} for sid in changed}
        how = "plan"
        source = new_plan
    else:
        source = base
        how = "control"
        if args is not None:
            how = "args"
        elif result is not UNSET:
            how = "result"
    if not points:
        if plan is not None:
            raise ForkError("the plan given is the run's own plan: there is nothing to fork at (pass at=STEP for "
                            "a control fork)")
        points = [st.id for st in base.steps]  # a control fork of the whole run: every step runs again
    kept = kept_steps(_as_ran(base, source), points, reuse)
    if reuse == "identical":
        parent_calls = _parent_calls(base, source, dependents(source, points) - set(points))
    else:
        parent_calls = {}
    by_parent = {st.id: st for st in base.steps}
    steps: list[Step] = []
    pinned: set[str] = set()
    toolbox = tools
    for st in source.steps:
        old = by_parent.get(st.id)
        if st.id in kept and old is not None:
            step = old.snapshot()
            step.set_state(notes=kept_note(parent.run_id, old), mark=StepMark.kept, from_run=parent.run_id,
                           from_step=old.id)
        else:
            step = st.fresh()
        if st.id == (points[0] if points else None) and args is not None:
            edit[st.id] = _args_edit(step, args, toolbox)
            step.args = {**step.args, **dict(args)}
        elif st.id == (points[0] if points else None) and result is not UNSET:
            pinned.add(st.id)
            step.set_state(status=Status.completed, result=result, notes=f"{PINNED_NOTE}the fork gave this result",
                           error=None, traceback=None, mark=StepMark.pinned, from_run=None, from_step=None)
            edit[st.id] = {"result": _shown(st.id, result)}
        steps.append(step)
    if parent.store is not None:
        _refuse_unstored(steps, parent)
    child = base.model_copy(update={"steps": steps, "goal": source.goal or base.goal})
    return ForkPlan(child, points, how, edit, kept, pinned, removed, parent_calls)


def replan_fork(shaped: ForkPlan, planner: Planner, tools: Any, agents: Any) -> tuple[ForkPlan, list[Event]]:
    """``planner=`` with no other edit: the planner plans again from the fork point. It is shown
    what a replan shows (the kept steps, secrets as ``***``) and asked to replace the fork point and
    what depends on it; its answer passes the one acceptance check, else nothing runs. Its model
    calls are the child's (returned as events, counted in the child's usage)."""

    from ..outbound import RunSecrets
    from ..spec.acceptance import accept_steps
    from ..workers.interrupts import call_user
    from ..workers.planners import PlanningContext, planner_steps, tell_planner
    from .replanning import Shown

    secrets = RunSecrets()
    secrets.learn_plan(shaped.plan)
    shown = Shown(secrets)
    kept = [st for st in shaped.plan.steps if st.status is Status.completed]
    agent_names = list(agents or ())
    events: list[Event] = []
    base = shaped.plan
    context = PlanningContext(
        tools=tools, agents=agents or {}, plan=shown.plan(base), kept_ids=[st.id for st in kept],
        validate=lambda steps: accept_steps(base, kept, list(steps), tools, agent_names)[2],
        emit=lambda kind, **data: events.append(Event.record(kind, time.time(), None, 0, data)))
    tell_planner(planner, context)
    at = ", ".join(shaped.at)
    # no run id here: it is random, and a cassette recorded for this fork must replay for a new run
    why = (f"plan again from step {at} (a fork of an earlier run: the steps shown completed are kept; "
           f"replace {at} and what depends on it)")
    try:
        proposed = planner_steps(call_user(planner, secrets.text(base.goal), [shown.step(st) for st in kept],
                                           secrets.text(why)))
    except (PlanError, ForkError):
        raise  # already one line that says what is wrong
    except Exception as exc:  # noqa: BLE001 - a planner that fails makes no fork, and says why
        raise ForkError(f"the planner could not plan again from step {at}: {type(exc).__name__}: {exc}") from None
    unkept = shown.restore(proposed)
    candidate, new_steps, problems = accept_steps(base, kept, proposed, tools, agent_names)
    if unkept is not None or problems:
        told = unkept or "; ".join(p.message for p in problems)
        raise ForkError(f"the planner's plan from step {at} is invalid, so nothing ran: {told}")
    if not new_steps:
        raise ForkError(f"the planner proposed no steps to replace {at}: nothing to fork")
    name = getattr(planner, "model", None) or getattr(planner, "__name__", None) or type(planner).__name__
    edit = {shaped.at[0]: {"planner": str(name)}}
    removed = sorted({st.id for st in base.steps} - {st.id for st in candidate.steps})
    candidate.revision = base.revision
    return (ForkPlan(candidate, shaped.at, "planner", edit, shaped.kept, shaped.pinned, removed, {}), events)


def _as_ran(base: Plan, source: Plan) -> Plan:
    """``source`` (the parent's plan, or an edited one) with the parent's statuses, for what may be kept."""
    if source is base:
        return base
    done = {st.id: st for st in base.steps}
    steps = []
    for st in source.steps:
        old = done.get(st.id)
        steps.append(old if old is not None and same_call(old, st)
                     else st.fresh())
    return base.model_copy(update={"steps": steps})


def _check_point(parent: Parent, step_id: str) -> None:
    """A fork point is a step of the parent's last plan that ran; else one line saying why not."""
    ids = [st.id for st in parent.plan.steps]
    if step_id not in ids:
        for diff in reversed(parent.revisions):
            if step_id in getattr(diff, "removed", ()):
                raise ForkError(
                    f"step {step_id!r} is not in run {parent.run_id}'s last plan: revision {diff.to_revision} removed "
                    f"it (revision {diff.from_revision} had it); fork at a step of the last plan, or pass plan= "
                    "with the step put back")
        raise ForkError(f"run {parent.run_id} has no step {step_id!r}{closest(step_id, ids)} (its steps: "
                        f"{', '.join(ids[:12])}{', ...' if len(ids) > 12 else ''})")
    step = parent.plan.step(step_id)
    if step.status in (Status.not_started, Status.blocked) and step.attempts == 0:
        unmet = next((n for n in step.needs if parent.plan.step(n).status is not Status.completed), None)
        why = f"; its first unmet need is {unmet!r} ({parent.plan.step(unmet).status.value})" if unmet else ""
        raise ForkError(f"step {step_id!r} never ran in run {parent.run_id} (it is {step.status.value}{why}): "
                        "there is nothing to fork from there; fork at a step that ran")


def unstored_args(step: Step) -> list[str]:
    """The arguments of a stored step that the store did not keep (a secret-named literal's value
    is never written; a value that could not be restored): a step that runs needs them given."""
    if not step.args:
        return []
    from ..store.values import Redacted, Unrestorable, has_marker

    return [k for k, v in step.args.items() if has_marker(v, Redacted) or has_marker(v, Unrestorable)]


def same_call(old: Step, new: Step) -> bool:
    """Whether ``new`` does what the parent's ``old`` did: same tool or agent, task, needs and
    arguments — an argument the store did not keep (a secret's value) matches whatever is given
    for it (the plan the run was made from gives it back; it is no change). There is no stored
    value to compare a new secret with: a fork that changes one names its step with ``at=``."""
    if old.needs != new.needs:
        return False
    missing = unstored_args(old)
    if missing:
        old = old.copy_with({"args": {**old.args, **{k: new.args[k] for k in missing if k in new.args}}})
    return old.signature() == new.signature()


def _refuse_unstored(steps: list[Step], parent: Parent) -> None:
    """A step that runs in the fork with arguments the store did not keep: said before anything runs."""
    lacking = {st.id: names for st in steps if st.status is not Status.completed and (names := unstored_args(st))}
    if not lacking:
        return
    listed = "; ".join(f"{sid}: {', '.join(names)}" for sid, names in lacking.items())
    first, names = next(iter(lacking.items()))
    raise ForkError(
        f"the fork runs again steps whose arguments run {parent.run_id} did not store (a secret's value is never "
        f"written) — {listed}. Give them again: fork at={first!r} with args= naming {', '.join(names)}, or pass plan= the plan the run was "
        "made from (its values fill them in and are no change). Give a secret as planbook.Secret (Secret.env('NAME')) "
        "and a run forks from its store alone: the store keeps its reference")


def _plan_changes(base: Plan, new: Plan) -> tuple[set[str], list[str]]:
    """The steps of ``new`` whose call differs from ``base`` (or that are new), and the removed ids."""
    old = {st.id: st for st in base.steps}
    changed = {st.id for st in new.steps if st.id not in old or not same_call(old[st.id], st)}
    ids = {st.id for st in new.steps}
    return changed, [sid for sid in old if sid not in ids]


def _args_edit(step: Step, args: Mapping[str, Any], tools: Any) -> dict[str, Any]:
    """The new arguments checked as Edit checks them, and what changed as shown text (old → new)."""
    if step.tool is None:
        raise ForkError(f"step {step.id!r} is a task for agent {step.agent!r}: it has no arguments to change "
                        "(fork it with plan= and a changed task, or result= to pin its answer)")
    if not isinstance(args, Mapping):
        raise ForkError(f"args= must be a dict of the arguments to change, got {type(args).__name__}")
    if step.tool not in tools:
        raise ForkError(f"step {step.id!r} calls tool {step.tool!r}, which is not among the tools given: pass "
                        "tools= with it")
    merged = {**step.args, **dict(args)}
    if unstored_args(step.copy_with({"args": merged})):
        return {name: [(_shown(name, step.args[name]) if name in step.args else "(not set)"), _shown(name, value)] for name, value in args.items()}
    try:
        check_edit(step, merged, tools)
    except (ValueError, TypeError) as exc:
        raise ForkError(str(exc)) from None
    return {name: [(_shown(name, step.args[name]) if name in step.args else "(not set)"), _shown(name, value)] for name, value in args.items()
            if name not in step.args or step.args[name] != value} or {"args": ["same", "same"]}


def _shown(name: Any, value: Any) -> str:
    text = shown_arg(name, value, repr)
    return text if len(text) <= 120 else text[:117] + "..."


def _parent_calls(base: Plan, source: Plan, candidates: set[str]) -> dict[str, tuple[Any, Any, Any]]:
    """For ``reuse="identical"``: each completed dependent's call in the parent (tool, resolved args, result)."""
    by_id = {st.id: st for st in base.steps}
    new = {st.id: st for st in source.steps}
    calls: dict[str, tuple[Any, Any, Any]] = {}
    for sid in candidates:
        old = by_id.get(sid)
        if old is None or old.status is not Status.completed or old.tool is None:
            continue
        if sid not in new or not same_call(old, new[sid]):
            continue
        try:
            resolved = resolve(old.args, {n: by_id[n].result for n in old.needs if n in by_id})
        except Exception:  # noqa: BLE001 - a call that cannot be rebuilt is simply run again
            continue
        calls[sid] = (old.tool, resolved, old.result)
    return calls


def _side_effects(child: ForkPlan, parent: Parent, toolbox: Any, rerun: Iterable[str]) -> None:
    """Before anything runs: a step that ran in the parent and runs again with a tool declared
    ``idempotent=False`` is named, with the opt-in (as :func:`planbook.resume` does)."""
    allowed = set(rerun)
    ran = {st.id for st in parent.plan.steps if st.attempts or st.status in (Status.completed, Status.failed)}
    again = []
    for step in child.plan.steps:
        if step.status is Status.completed or step.id not in ran or step.tool is None or step.id in allowed:
            continue
        tool = toolbox.get(step.tool)
        if tool is not None and not tool.idempotent:
            again.append(step.id)
    if again:
        names = ", ".join(repr(s) for s in again)
        raise ForkError(
            f"the fork would run again {names}, whose tool is declared idempotent=False: its call in run "
            f"{parent.run_id} may have taken effect already. Nothing ran. Check, then fork with rerun={again!r} "
            f"(planbook fork ... {' '.join('--rerun ' + s for s in again)}) to run them again anyway")


@overload
def fork(
    run: Any,
    *,
    at: str | Sequence[str] | None = None,
    args: Mapping[str, Any] | None = None,
    result: Any = UNSET,
    plan: Plan | str | None = None,
    planner: Planner | None = None,
    reuse: Reuse = "independent",
    store: Any = None,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    start: Literal[True] = True,
    **options: Any,
) -> RunResult: ...
@overload
def fork(
    run: Any,
    *,
    at: str | Sequence[str] | None = None,
    args: Mapping[str, Any] | None = None,
    result: Any = UNSET,
    plan: Plan | str | None = None,
    planner: Planner | None = None,
    reuse: Reuse = "independent",
    store: Any = None,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    start: Literal[False],
    **options: Any,
) -> Runner: ...
@overload
def fork(
    run: Any,
    *,
    at: str | Sequence[str] | None = None,
    args: Mapping[str, Any] | None = None,
    result: Any = UNSET,
    plan: Plan | str | None = None,
    planner: Planner | None = None,
    reuse: Reuse = "independent",
    store: Any = None,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    start: bool = True,
    **options: Any,
) -> RunResult | Runner: ...
def fork(
    run: Any,
    *,
    at: str | Sequence[str] | None = None,
    args: Mapping[str, Any] | None = None,
    result: Any = UNSET,
    plan: Plan | str | None = None,
    planner: Planner | None = None,
    reuse: Reuse = "independent",
    store: Any = None,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    start: bool = True,
    **options: Any,
) -> RunResult | Runner:
    """Fork ``run`` at ``at`` and run the child: see :func:`planbook.fork` (``start=False`` returns
    the ready :class:`Runner`, for a view or a background handle to attach first)."""
    parent = read_parent(run, store)
    try:
        toolbox = as_toolbox(tools)
        shaped = plan_fork(parent, at=at, args=args, result=result, plan=plan, reuse=reuse, tools=toolbox,
                           agents=agents)
        planning: list[Event] = []
        if planner is not None and shaped.how == "control" and at is not None:
            shaped, planning = replan_fork(shaped, planner, toolbox, as_agents(agents))
        _side_effects(shaped, parent, toolbox, rerun)
        given = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(given) - {o for o in _option_names()})
        if unknown:
            raise ForkError(f"fork takes no option {', '.join(map(repr, unknown))}; its options are those of "
                            f"planbook.run: {', '.join(_option_names())}")
        chosen = resumed_options(parent.config, given)
        if "retry" not in (chosen.get("on_failure") or ()) and not any(
                st.on_failure == "retry" for st in shaped.plan.steps):
            chosen["retries"] = None
        chosen.setdefault("executor", DEFAULTS.executor)
        runner = Runner(shaped.plan, tools=tools, agents=agents, planner=planner, store=parent.store,
                        on_event=on_event, **chosen)
        to_run = sum(1 for st in runner.plan.steps if st.status is not Status.completed)
        lineage = Lineage(parent=parent.run_id, at=shaped.at if shaped.how != "control" or at else [],
                          how=shaped.how, edit=shaped.edit, reuse=reuse,  # type: ignore[arg-type]
                          kept=len(shaped.kept), rerun=to_run, pinned=len(shaped.pinned), removed=shaped.removed,
                          planner=shaped.edit.get(shaped.at[0], {}).get("planner") if shaped.at else None)
        runner.adopt_fork(lineage.model_dump(), shaped.parent_calls, owns_store=parent.opened_here)
        if planning:
            runner.count_planning(planning)  # the model calls that planned the fork count in its usage
    except BaseException:
        if parent.opened_here:
            parent.store.close()
        raise
    if not start:
        return runner
    try:
        return runner.run()
    finally:
        runner.release_store()


def _option_names() -> list[str]:
    from .config import OPTIONS

    return [o.name for o in OPTIONS]


__all__ = ["Parent", "UNSET", "fork", "plan_fork", "read_parent"]
