"""Finish a run after a crash, a kernel restart or Ctrl-C; list and load stored runs.

A resumed run continues where its store says it was: completed steps are not executed
again (their stored results flow to later steps), revisions, budgets and events go on.
A step that was in progress when the process died is treated as interrupted and runs
again — unless its tool is declared ``idempotent=False``: then the call may already
have taken effect, and the resume stops and asks (``rerun=[step]`` continues).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from ..data.errors import NothingToResume, ResumeError
from ..data.models import Plan, RunResult, Status
from ..data.render import render
from ..data.stepmark import StepMark
from ..outbound import mask_text
from ..workers.agents import AgentsLike
from ..workers.planners import Planner
from ..workers.tools import ToolsLike, as_toolbox
from .config import DEFAULTS, resumed_options
from .runner import Runner
from .state import INTERRUPTED_NOTE, RunState

if TYPE_CHECKING:  # the store package loads when a store is opened, not with import planbook
    from ..store.base import RunStore, RunSummary, StoredRun, StoreLike


def _open(store: StoreLike, *, readonly: bool = False) -> RunStore:
    if store is None:
        raise ResumeError("resume needs the store the run was saved in: pass store=PATH (the magics and the CLI "
                          "use .planbook/runs.sqlite under the current directory, or $PLANBOOK_HOME/runs.sqlite)")
    from ..store import open_store

    if not readonly and isinstance(store, (str, os.PathLike)) and os.fspath(store) != ":memory:":
        open_store(store, readonly=True).close()  # a path with no store: say so, create nothing
    return open_store(store, readonly=readonly)


class RunList(list["RunSummary"]):
    """The runs :func:`runs` lists: a list of :class:`~planbook.store.base.RunSummary` (index it,
    loop over it, as ever) that a notebook shows as a table — each run's verdict, steps by status,
    duration, start (``today 14:03``) and the settings the listed runs differ in — and
    ``str()`` prints as ``planbook runs`` does."""

    def __init__(self, summaries: Iterable[RunSummary] = (), *, tree: bool = False) -> None:
        super().__init__(summaries)
        #: listed as a fork tree (each fork indented under its parent)
        self.tree = tree

    def text(self) -> str:
        """The table as text (what ``planbook runs`` prints)."""
        return mask_text(str(render("runlist_text", self, self.tree)))

    def __str__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        bundle: dict[str, str] = render("runlist_bundle", self, self.tree)
        return bundle


def runs(store: Any = None, *, limit: int | None = None, tree: bool = False) -> RunList:
    """The runs in a store, newest first (id, goal, status, reason, started, steps done/total and by
    status, duration, model calls, settings, and ``parent``: the run a fork was made from), as a
    :class:`RunList`: a list that a notebook shows as a table. ``tree=True``: each fork listed right
    under its parent (oldest fork first), with its ``depth``. Reading never writes: a path with no
    store is an error, and nothing is created."""
    from ..store import default_store_path

    where = store if store is not None else default_store_path()
    opened = _open(where, readonly=True)
    try:
        listed = opened.list_runs(limit=None if tree else limit)
    finally:
        _close_if_opened_here(where, opened)
    if not tree:
        return RunList(listed)
    ordered = fork_tree(listed)
    return RunList(ordered[:limit] if limit is not None else ordered, tree=True)


def fork_tree(summaries: list[Any]) -> list[Any]:
    """Runs (newest first) as a tree: a run without a parent in the list is a root; each fork
    follows its parent, oldest first, one ``depth`` deeper."""
    from dataclasses import replace

    ids = {s.run_id for s in summaries}
    children: dict[str, list[Any]] = {}
    roots = []
    for summary in summaries:
        if summary.parent is not None and summary.parent in ids and summary.parent != summary.run_id:
            children.setdefault(summary.parent, []).append(summary)
        else:
            roots.append(summary)
    ordered: list[Any] = []
    seen: set[str] = set()
    todo = [(root, 0) for root in reversed(roots)]
    while todo:
        summary, depth = todo.pop()
        if summary.run_id in seen:
            continue
        seen.add(summary.run_id)
        ordered.append(replace(summary, depth=depth))
        todo.extend((child, depth + 1) for child in children.get(summary.run_id, ()))  # newest first: popped last
    return ordered


def load_run(run_id: str | None = None, *, store: Any = None) -> RunResult:
    """A stored run as a :class:`RunResult` (the latest run by default); reads only."""
    from ..store import default_store_path

    where = store if store is not None else default_store_path()
    opened = _open(where, readonly=True)
    try:
        return opened.load_run(run_id or _latest(opened)).result()
    finally:
        _close_if_opened_here(where, opened)


def _close_if_opened_here(store: Any, opened: Any) -> None:
    """A store opened here from a path is closed here, not whenever the collector reaches it
    (an open connection keeps the write-ahead log and its index beside the file)."""
    if isinstance(store, (str, os.PathLike)):
        opened.close()


def _latest(store: Any) -> str:
    run_id = store.latest_run_id()
    if run_id is None:
        raise ResumeError(f"the run store {store.location} holds no runs yet")
    return str(run_id)


@overload
def resume(
    run_id: str | None = None,
    *,
    store: Any,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    planner: Planner | None = None,
    plan: Plan | None = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    executor: Any = DEFAULTS.executor,
    run: Literal[True] = True,
    approve: Any = DEFAULTS.approve,
    force: bool = False,
) -> RunResult: ...
@overload
def resume(
    run_id: str | None = None,
    *,
    store: Any,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    planner: Planner | None = None,
    plan: Plan | None = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    executor: Any = DEFAULTS.executor,
    run: Literal[False],
    approve: Any = DEFAULTS.approve,
    force: bool = False,
) -> Runner: ...
@overload
def resume(
    run_id: str | None = None,
    *,
    store: Any,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    planner: Planner | None = None,
    plan: Plan | None = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    executor: Any = DEFAULTS.executor,
    run: bool = True,
    approve: Any = DEFAULTS.approve,
    force: bool = False,
) -> RunResult | Runner: ...
def resume(
    run_id: str | None = None,
    *,
    store: Any,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    planner: Planner | None = None,
    plan: Plan | None = None,
    rerun: Iterable[str] = (),
    on_event: Any = None,
    executor: Any = DEFAULTS.executor,
    run: bool = True,
    approve: Any = DEFAULTS.approve,
    force: bool = False,
) -> RunResult | Runner:
    """Continue a stored run (the latest by default) and return its result.

    ``plan``: the plan the run was made from, to take again the args a store does not
    keep (secrets). ``rerun``: steps that were in progress at the crash and whose tool is
    not idempotent, to run again anyway. ``run=False`` returns the ready :class:`Runner`
    (the magics attach a view first). The run is claimed before anything runs: while
    another live process writes it, :class:`ResumeError` says which; ``force=True`` takes
    it over anyway (when that process is gone, e.g. on another host). ``approve``: as for
    :func:`planbook.run`; a step that was waiting for a decision when the run stopped asks again.
    """
    opened = _open(store)
    stored = opened.load_run(run_id or _latest(opened))
    if stored.status in ("completed", "failed"):
        result = stored.result()
        if run:
            return result
        raise NothingToResume(f"run {stored.run_id} already {stored.status} ({stored.reason}): nothing to resume")
    config = stored.config
    state = RunState(**stored.state_fields())
    toolbox = as_toolbox(tools)
    again = set(rerun)
    unknown = again - {st.id for st in state.plan.steps}
    if unknown:
        raise ResumeError(f"rerun names no step of run {stored.run_id}: {', '.join(sorted(unknown))}")
    for step_id in stored.interrupted_steps():
        step = state.plan.step(step_id)
        tool = toolbox.get(step.tool) if step.tool else None
        if tool is not None and not tool.idempotent and step_id not in again:
            raise ResumeError(
                f"step {step_id!r} was running when run {stored.run_id} stopped, and its tool {step.tool!r} is "
                f"declared idempotent=False: its call may already have taken effect. Check, then resume with "
                f"rerun=[{step_id!r}] (planbook resume --rerun {step_id}; %run_plan NAME --resume --rerun {step_id}) "
                "to run it again"
            )
        step.set_state(status=Status.not_started, attempts=max(step.attempts - 1, 0), notes=INTERRUPTED_NOTE,
                       mark=StepMark.interrupted)
    for step_id in stored.steps_to_rerun():  # a result the store could not keep, and a later step needs it
        step = state.plan.step(step_id)
        step.set_state(status=Status.not_started, result=None,
                       notes="runs again: its result could not be stored, and a later step needs it")
    missing = stored.missing_args()
    if missing:
        _restore_args(state.plan, missing, plan, stored.run_id)
    _claim(opened, stored, force)  # last, so a resume refused above leaves no claim behind
    # an execution that never finished never happened: the count is what the history holds
    # (derived, not decremented: a resume that is itself cut short must not count twice)
    state.executions = len(state.history)
    if state.status == "running":  # the process died mid-run
        state.status, state.reason = "interrupted", "interrupted"
    # every option the run was started with, from the one options table (engine/config.py)
    options = resumed_options(config, {"executor": executor, "approve": approve})
    retrying = "retry" in (options["on_failure"] or ()) or any(st.on_failure == "retry" for st in state.plan.steps)
    if not retrying:
        options["retries"] = None  # stored as the default; given without a retry policy it is refused
    runner = Runner(state.plan, tools=tools, agents=agents, planner=planner, store=opened, on_event=on_event, **options)
    runner.adopt(state, stored.run_id)
    if not run:
        return runner
    try:
        return runner.run()
    finally:
        _close_if_opened_here(store, opened)


def _claim(store: RunStore, stored: StoredRun, force: bool) -> None:
    """Claim the run for this process before anything of it runs (stores that can be written
    by several processes implement ``claim_run``); the claim also checks that the run was
    not written since it was loaded."""
    from ..data.errors import RunClaimed
    from ..store.base import ClaimingStore

    if not isinstance(store, ClaimingStore):
        return  # a store only this process writes
    try:
        store.claim_run(stored.run_id, force=force, updated=stored.updated)
    except RunClaimed as exc:
        raise ResumeError(str(exc)) from None


def _restore_args(plan: Plan, missing: dict[str, list[str]], given: Plan | None, run_id: str) -> None:
    by_id = {st.id: st for st in given.steps} if given is not None else {}
    lacking = {sid: names for sid, names in missing.items() if sid not in by_id}
    if lacking:
        listed = "; ".join(f"{sid}: {', '.join(names)}" for sid, names in lacking.items())
        raise ResumeError(f"run {run_id} did not store some args (secrets, or values it could not keep) — {listed}. "
                          "Pass the plan the run was made from (resume(..., plan=PLAN); planbook resume --plan "
                          "FILE; in a notebook %run_plan NAME --resume does this) so they can be taken from it. "
                          "To make such a run resume from its store alone, give a secret as planbook.Secret "
                          "(Secret.env('NAME') reads an environment variable): the store keeps its reference, "
                          "never its value, and a resumed run reads it again")
    for sid, names in missing.items():
        step = plan.step(sid)
        step.args = {**step.args, **{n: by_id[sid].args[n] for n in names if n in by_id[sid].args}}


__all__: Sequence[str] = ("load_run", "resume", "runs")
