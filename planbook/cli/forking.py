"""``planbook fork`` and ``planbook diff``: what-if runs and run comparisons on the command line.

``fork`` is :func:`planbook.engine.fork.fork` with its edit given as flags (``--set k=v``,
``--result-json FILE``, ``--plan FILE``); the child runs and prints as ``planbook run`` prints,
under the lineage headline. ``diff`` prints :func:`planbook.data.rundiff.diff_runs` as text or
JSON rows, and with ``--fail-on`` its exit code answers a CI job's question. Bad input is one
line on stderr and exit code 2, with nothing created (the engine checks before it builds).
Kept apart from :mod:`planbook.cli.app` so each stays small.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..data.errors import ForkError, closest
from ..data.lineage import REUSE_CHOICES, Lineage
from ..data.models import RunResult
from ..outbound import neutralise, one_line
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, USAGE_ERRORS, UsageProblem, load_given, read_spec
from .options import RUN_FLAGS, add_run_options
from .runs import STORE_HELP, store_path

SET_HELP = ("change argument NAME of the --at step to VALUE; repeatable. VALUE is read as JSON when it parses "
            "as JSON (5, true, null, [1, 2], {\"a\": 1}, \"quoted text\"), else taken as the text it is "
            "(hello, 2024-01-01); {\"$secret\": \"env:VAR\"} passes a secret by reference")
FAIL_ON_HELP = (
    "exit 1 (for CI) when the runs differ: 'changed' when any step's call or result differs from the base "
    "run's (the first divergence is not none; a step only one run has counts); 'regressed' when a run did "
    "not complete where the base completed, or has more failed steps than the base. Otherwise the exit is 0")


def add_commands(sub: Any, load_help: dict[str, str]) -> None:
    """Add ``fork`` and ``diff`` to the ``planbook`` parser."""
    fork = sub.add_parser("fork", help="fork a stored run at a step with a change, and run what the change reaches",
                          description="Fork a stored run: the steps the change cannot reach are kept (not run "
                                      "again), the changed step and everything depending on it run again.")
    fork.add_argument("run", metavar="RUN", help="the run: a run id, or a plan name meaning its latest run")
    fork.add_argument("--at", metavar="STEP",
                      help="the fork point: the step to change; with no --set, --result-json or --plan, a "
                           "control fork that runs STEP and what depends on it again unchanged (without --at "
                           "either: every step)")
    fork.add_argument("--set", dest="sets", metavar="NAME=VALUE", action="append", default=[], help=SET_HELP)
    fork.add_argument("--result-json", metavar="FILE",
                      help="pin the --at step's result to the JSON in FILE ('-' reads standard input) without "
                           "running it")
    fork.add_argument("--plan", metavar="FILE",
                      help="an edited plan spec: the fork points are the steps whose call changed")
    fork.add_argument("--reuse", choices=tuple(REUSE_CHOICES), default="independent",
                      help="what is kept: " + "; ".join(f"{k}: {v}" for k, v in REUSE_CHOICES.items())
                      + " (default: independent)")
    fork.add_argument("--rerun", metavar="STEP", action="append", default=[],
                      help="run STEP again although its tool is declared idempotent=False")
    fork.add_argument("--store", metavar="PATH", help=STORE_HELP)
    for option in ("tools", "agents", "planner"):
        fork.add_argument(f"--{option}", metavar="MODULE:OBJECT", help=load_help[option])
    add_run_options(fork, RUN_FLAGS, given_only=True)
    fork.add_argument("--plain", action="store_true", help="no live view; print the final result only")

    diff = sub.add_parser("diff", help="compare stored runs step by step (the first is the base)")
    diff.add_argument("runs", metavar="RUN", nargs="+", help="two or more runs: run ids, or plan names meaning "
                                                            "their latest run; the first is the base")
    diff.add_argument("--json", action="store_true",
                      help="print JSON: {runs, verdict, first_divergence, first_divergences, changed, regressed, "
                           "rows}, rows one flat object per step (base_* and other_* columns, as diff_runs().rows())")
    diff.add_argument("--changed-only", action="store_true", help="only the steps whose call, result or status differ")
    diff.add_argument("--fail-on", choices=("changed", "regressed"), help=FAIL_ON_HELP)
    diff.add_argument("--store", metavar="PATH", help=STORE_HELP)


# ------------------------------------------------------------------------------------ fork
def parse_sets(items: Sequence[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` as arguments: VALUE as JSON when it parses, else as text;
    ``{"$secret": ref}`` as a :class:`~planbook.Secret` (a reference, never the value)."""
    from ..data.secret import from_json_refs

    edits: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageProblem(f"--set takes NAME=VALUE (e.g. --set x=5), got {_cut(item)!r}")
        if name in edits:
            raise UsageProblem(f"--set {name}=... is given twice: give each argument once")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        edits[name] = from_json_refs(value)
    return edits


def _cut(text: str) -> str:
    """Part of a bad ``--set`` for the error: the name side only (a value may be a secret)."""
    return text.partition("=")[0][:60]


def _result_json(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"cannot read --result-json {path!r}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:  # a JSONDecodeError, or a plain ValueError (an integer of too many digits)
        why = f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise UsageProblem(f"--result-json {path!r} is not JSON ({why}): give the "
                           "result the step should have returned, as JSON") from None


def _check_flags(args: argparse.Namespace) -> None:
    """Flags that cannot go together, named both, before anything is read or run."""
    if args.sets and args.result_json:
        raise UsageProblem("--set and --result-json cannot go together: --set runs the step again with new "
                           "arguments, --result-json pins what it returned without running it; give one")
    if args.plan and (args.sets or args.result_json):
        given = "--set" if args.sets else "--result-json"
        raise UsageProblem(f"--plan cannot go with {given}: put the change in the plan file")
    if (args.sets or args.result_json) and not args.at:
        given = "--set" if args.sets else "--result-json"
        raise UsageProblem(f"{given} changes one step: say which with --at STEP")


def fork_runner(args: argparse.Namespace) -> Any:
    """The child's ready :class:`~planbook.engine.runner.Runner` (not started), or an error
    (UsageProblem, PlanbookError, ValueError) with nothing created."""
    from ..engine.fork import UNSET, fork

    _check_flags(args)
    edits = parse_sets(args.sets) if args.sets else None
    result = _result_json(args.result_json) if args.result_json else UNSET
    plan = read_spec(args.plan) if args.plan else None
    options = {name: getattr(args, name) for name in RUN_FLAGS if getattr(args, name, None) is not None}
    return fork(args.run, at=args.at, args=edits, result=result, plan=plan, reuse=args.reuse,
                store=store_path(args), rerun=args.rerun,
                tools=load_given(args.tools, "tools"), agents=load_given(args.agents, "agents"),
                planner=load_given(args.planner, "planner"),
                start=False, **options)


def with_flags(text: str) -> str:
    """An engine error as the command line says it: where it says ``pass tools=``, the flags too."""
    if "pass tools=" in text or "pass agents=" in text:  # the engine's words: say the flag too
        text += " (on the command line: --tools / --agents MODULE:OBJECT)"
    return text


def headline(runner: Any) -> str:
    """What ``planbook fork`` prints before the child runs: its lineage headline, and its run id."""
    lineage = runner.state.lineage
    top = [runner.secrets.terminal(Lineage(**lineage).headline())] if lineage else []
    return "\n".join([*top, neutralise(f"run {runner.run_id}")])


# ------------------------------------------------------------------------------------ diff
def load_runs(where: Any, names: Sequence[str]) -> list[RunResult]:
    """The stored runs ``names`` names (run ids, or plan names meaning their latest run), read
    only: a path with no store, an unknown name, each one line naming it."""
    import os

    from ..store import open_store

    if len(names) < 2:
        raise UsageProblem("diff compares two or more runs: planbook diff BASE OTHER [MORE...]")
    if isinstance(where, (str, os.PathLike)) and not os.path.exists(where):
        raise ForkError(f"there is no run store at {os.fspath(where)}: pass --store with the path the runs "
                        "were saved in")
    store = open_store(where, readonly=True)
    try:
        listed = store.list_runs()
        ids = [summary.run_id for summary in listed]
        known = ids + sorted({summary.plan_id for summary in listed if summary.plan_id})
        results = []
        for name in names:
            run_id = name if name in ids else store.latest_run_id(plan_id=name)
            if run_id is None:
                raise ForkError(f"no run or plan {name!r} in the run store {os.fspath(where)}{closest(name, known)} "
                                "(planbook runs lists them)")
            results.append(store.load_run(run_id).result())
        return results
    finally:
        store.close()


def failed_steps(result: RunResult) -> int:
    return sum(1 for step in result.plan.steps if step.status.value == "failed")


def regressed(base: RunResult, other: RunResult) -> bool:
    """``--fail-on regressed``: ``other`` did not complete where ``base`` completed, or has more failed steps."""
    return (base.status == "completed" and other.status != "completed") or failed_steps(other) > failed_steps(base)


def changed(diff: Any) -> bool:
    """``--fail-on changed``: in some run, some step's call or result differs from the base's (a first divergence)."""
    return any(found is not None for found in diff.divergences)


def diff_command(args: argparse.Namespace) -> int:
    """``planbook diff``: the comparison as text or JSON rows; ``--fail-on`` sets the exit code."""
    try:
        results = load_runs(store_path(args), args.runs)
        from ..data.rundiff import diff_runs

        diff = diff_runs(results[0], *results[1:])
    except USAGE_ERRORS as exc:
        print(one_line(f"planbook: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    is_changed = changed(diff)
    is_regressed = any(regressed(results[0], other) for other in results[1:])
    if args.json:
        print(json.dumps(diff_json(diff, args.changed_only, is_changed, is_regressed), ensure_ascii=False,
                         default=str, indent=1))
    else:
        print(neutralise(diff.hider()(diff.text(changed_only=args.changed_only))))
    if (args.fail_on == "changed" and is_changed) or (args.fail_on == "regressed" and is_regressed):
        return EXIT_FAILED
    return EXIT_OK


def diff_json(diff: Any, changed_only: bool, is_changed: bool, is_regressed: bool) -> dict[str, Any]:
    """``planbook diff --json`` (and the MCP tool's structured answer): the runs, the verdict,
    each run's first divergence, the two ``--fail-on`` answers and the rows (``diff.rows()``)."""
    return {"runs": diff.run_ids, "verdict": diff.hider()(diff.verdict), "first_divergence": diff.first_divergence,
            "first_divergences": diff.first_divergences, "changed": is_changed, "regressed": is_regressed,
            "rows": diff.rows(changed_only=changed_only)}


__all__ = ["add_commands", "changed", "diff_command", "diff_json", "fork_runner", "headline", "load_runs", "parse_sets",
           "regressed", "with_flags"]
