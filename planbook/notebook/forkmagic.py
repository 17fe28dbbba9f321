"""``%run_plan NAME --fork-at STEP`` and ``%diff_runs``: what-if runs from a notebook.

The flags are read here and handed to the engine's fork (:mod:`planbook.engine.fork`); the
run is then driven like any other (the live view, ``--background``). A flag that cannot go
with another is one :class:`UsageError` naming both, before anything is looked up or runs.
"""

from __future__ import annotations

import json
from typing import Any

from IPython.core.error import UsageError

from ..data.errors import ForkError, PlanbookError
from ..data.models import Plan, RunResult

#: the flags that make ``%run_plan`` a fork
FORK_FLAGS = ("fork_at", "set", "result", "reuse")


def wants_fork(args: Any) -> bool:
    return bool(args.fork_at or args.set or args.result or args.reuse)


def refuse_fork_contradictions(args: Any) -> None:
    """Flags that cannot go with a fork, named together."""
    if not args.fork_at:
        given = [f"--{n.replace('_', '-')}" for n in ("set", "result", "reuse") if getattr(args, n)]
        raise UsageError(f"{' and '.join(given)} describe a fork: add --fork-at STEP (the step to fork at)")
    for flag in ("resume", "restart", "step", "until"):
        if getattr(args, flag):
            raise UsageError(f"--fork-at and --{flag} cannot go together: --fork-at starts a new run from the "
                             f"plan's latest stored run; drop --{flag}")
    if args.set and args.result:
        raise UsageError("--set and --result cannot go together: --set runs the step again with new arguments, "
                         "--result pins what it returned without running it; give one")


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``--set k=v``: ``v`` is JSON when it reads as JSON (``5``, ``"x"``, ``[1, 2]``), else the text itself."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--set {pair!r}: write NAME=VALUE (VALUE is read as JSON when it is JSON, else as text)")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError:
            out[name.strip()] = text
    return out


def fork_runner(magics: Any, name: str, value: Any, args: Any, who: dict[str, Any], options: dict[str, Any]) -> Any:
    """The child's runner (not started): NAME's latest stored run forked as the flags say."""
    from ..engine.fork import UNSET, fork

    store = magics.session.store()
    if store is None:
        raise UsageError("--fork-at forks the plan's latest stored run, and this session keeps no runs "
                         "(%plan_store off): %plan_store PATH turns the store on")
    pinned = magics.lookup(args.result, "--result") if args.result else UNSET
    plan_name = value.id if isinstance(value, Plan) else name
    given = {k: v for k, v in options.items() if v is not None}
    # a planner with no other edit plans again from the fork point: only when the line asks for it
    # (--planner); the one %%plan used plans the child's replans when the line edits a step
    planner = who["planner"] if args.planner or args.set or args.result else None
    try:
        return fork(plan_name, at=args.fork_at, args=parse_sets(args.set) if args.set else None, result=pinned,
                    reuse=args.reuse or "independent", store=store, tools=who["tools"], agents=who["agents"],
                    planner=planner, rerun=args.rerun, start=False, **given)
    except (ForkError, PlanbookError) as exc:
        raise UsageError(f"%run_plan {name} --fork-at {args.fork_at}: {exc}") from None


def run_ids(magics: Any, names: list[str]) -> list[RunResult]:
    """``%diff_runs`` operands: a variable holding a RunResult, a run id, or a plan name (its latest run)."""
    from ..engine.resume import load_run

    store = magics.session.store()
    ns = magics.ip.user_ns
    found: list[RunResult] = []
    for word in names:
        held = ns.get(word)
        if isinstance(held, RunResult):
            found.append(held)
            continue
        if store is None:
            raise UsageError(f"%diff_runs {word}: no RunResult variable {word!r}, and this session keeps no runs "
                             "(%plan_store PATH turns the store on)")
        plan = held if isinstance(held, Plan) else None
        run_id = word
        latest = store.latest_run_id(plan_id=plan.id if plan is not None else word)
        if latest is not None:
            run_id = latest
        try:
            found.append(load_run(run_id, store=store))
        except PlanbookError as exc:
            raise UsageError(f"%diff_runs {word}: {exc}") from None
    return found


def latest_fork(magics: Any, word: str) -> list[RunResult]:
    """``%diff_runs NAME``: NAME's latest fork, after its parent."""
    from ..engine.resume import load_run

    store = magics.session.store()
    if store is None:
        raise UsageError("%diff_runs NAME compares NAME's latest fork with its parent in the run store, and this "
                         "session keeps no runs (%plan_store PATH turns the store on)")
    held = magics.ip.user_ns.get(word)
    plan_id = held.id if isinstance(held, Plan) else word
    forks = [s for s in store.list_runs() if s.plan_id == plan_id and s.parent is not None]
    if not forks:
        raise UsageError(f"%diff_runs {word}: plan {word!r} has no forked run in the store; make one with "
                         f"%run_plan {word} --fork-at STEP --set NAME=VALUE, or name two runs: %diff_runs A B")
    child = load_run(forks[0].run_id, store=store)
    return [load_run(str(child.parent), store=store), child]


__all__ = ["FORK_FLAGS", "fork_runner", "latest_fork", "parse_sets", "refuse_fork_contradictions", "run_ids",
           "wants_fork"]
