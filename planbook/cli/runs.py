"""``planbook runs``, ``planbook show`` and ``planbook resume``: the command line over the run store.

Kept apart from :mod:`planbook.cli.app` (which parses and runs plans) so each stays small.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..outbound.text import one_line

STORE_HELP = "the run store (default: $PLANBOOK_HOME/runs.sqlite, else .planbook/runs.sqlite here)"


def add_commands(sub: Any, load_help: dict[str, str]) -> None:
    """Add the store's subcommands to the ``planbook`` parser."""
    runs = sub.add_parser("runs", help="list the runs in the run store, newest first")
    runs.add_argument("--store", metavar="PATH", help=STORE_HELP)
    runs.add_argument("--limit", type=int, default=20, metavar="N", help="show at most N runs (default 20; 0: all)")
    runs.add_argument("--tree", action="store_true",
                      help="each fork indented under the run it was forked from (oldest fork first)")

    show = sub.add_parser("show", help="show a stored run: its plan with marks, the verdict, every diff")
    show.add_argument("run_id", nargs="?", help="the run (default: the latest)")
    show.add_argument("--store", metavar="PATH", help=STORE_HELP)
    show.add_argument("--step", metavar="ID",
                      help="show step ID's pane: its call, time, result, printed output and error")

    resume = sub.add_parser("resume", help="finish a stored run that was interrupted or cut short")
    resume.add_argument("run_id", nargs="?", help="the run (default: the latest)")
    resume.add_argument("--store", metavar="PATH", help=STORE_HELP)
    for option in ("tools", "agents", "planner"):
        resume.add_argument(f"--{option}", metavar="MODULE:OBJECT", help=load_help[option])
    resume.add_argument("--plan", metavar="FILE",
                        help="the plan spec the run was made from: args the store does not keep (secrets) are taken from it")
    resume.add_argument("--rerun", metavar="ID", action="append", default=[],
                        help="run step ID again although its tool is idempotent=False and it was in progress")
    resume.add_argument("--force", action="store_true",
                        help="take the run over although the store says another process writes it (when that process "
                             "is gone, e.g. on another host)")
    resume.add_argument("--plain", action="store_true", help="no live view; print the final result only")


def store_path(args: argparse.Namespace) -> Any:
    """``--store`` (``~`` is the home folder), else the default store."""
    from pathlib import Path

    from ..store import default_store_path

    return Path(args.store).expanduser() if args.store else default_store_path()


def list_runs(args: argparse.Namespace) -> str:
    """The text of ``planbook runs``: a row per run with its verdict, steps (done of all, and by
    status), duration, model calls, start (``today 14:03``) and goal, and the settings the listed
    runs differ in (:mod:`planbook.views.runlist`). A run whose stored row is damaged is listed as
    ``damaged``, with a line below the table saying what and what to do: it must not hide the
    healthy runs, nor be dropped from the list."""
    from ..engine.resume import runs
    from ..store.logrows import damaged
    from ..views.runlist import runlist_text

    where = store_path(args)
    tree = bool(getattr(args, "tree", False))
    listed = runs(where, limit=args.limit or None, tree=tree)
    if not listed:
        return f"no runs in {where}"
    notes = [one_line(str(damaged(r.run_id, str(where), r.damage))) for r in listed if r.damage]
    return "\n".join([runlist_text(listed, tree), *notes])


def show_run(args: argparse.Namespace) -> Any:
    """The stored run (printed as its plan, verdict and diffs), or with ``--step ID`` that step's
    pane (what a saved notebook's record keeps only for the steps worth opening)."""
    from ..engine.resume import load_run

    result = load_run(args.run_id, store=store_path(args))
    step = getattr(args, "step", None)
    return result.pane(step) if step else result
