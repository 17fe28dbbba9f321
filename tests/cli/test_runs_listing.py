"""``planbook runs`` and ``planbook.runs()`` as a person reads them: each run's duration, its steps
by status (``5 completed, 1 failed``), when it started (``today 14:03``, not a raw timestamp) and
only the settings the listed runs differ in; ``planbook.runs()`` shows as a table in a notebook
and is still the list it was. Before, the listing had none of these and a notebook showed the
list's repr (``RunSummary(... started=1796681337.32...)``)."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook.cli import main
from planbook.engine.resume import RunList
from planbook.outbound.html import sanitize_html
from planbook.store import RunSummary
from planbook.views.runlist import duration_text, runlist_html, runlist_text, when_text

#: a fixed "now": 2026-03-04 15:00 local time
NOW = time.mktime((2026, 3, 4, 15, 0, 0, 0, 0, -1))


def summary(run_id: str, **fields: Any) -> RunSummary:
    base = dict(goal="sums", status="completed", reason="goal_met", started=NOW - 600, updated=NOW - 600 + 2.5,
                steps_done=6, steps_total=6, model_calls=0, step_counts={"completed": 6},
                settings={"parallel": 1, "planner": None, "model": None})
    return RunSummary(run_id, **{**base, **fields})


def test_times_read_as_a_person_says_them() -> None:
    assert when_text(NOW - 3600, NOW) == "today 14:00"
    assert when_text(NOW - 86400, NOW) == "yesterday 15:00"
    assert when_text(NOW - 3 * 86400, NOW) == "2026-03-01 15:00"
    assert when_text(0.0, NOW) == "?" and when_text("x", NOW) == "?"
    assert [duration_text(s) for s in (0.0004, 0.25, 3.44, 125, 3 * 3600 + 180, 2 * 86400 + 4 * 3600, None)] == [
        "0.4 ms", "250 ms", "3.4 s", "2 min 05 s", "3 h 03 min", "2 d 4 h", "?"]


def test_the_table_shows_counts_duration_and_only_the_settings_that_differ() -> None:
    listed = [
        summary("r3", status="failed", reason="aborted", steps_done=5, step_counts={"completed": 5, "failed": 1},
                settings={"parallel": 4, "planner": "LLMPlanner", "model": "tiny"}),
        summary("r2", started=NOW - 86400 - 600, updated=NOW - 86400 - 600 + 75),
        summary("r1", status="running", reason=None, steps_done=2, updated=NOW - 590, step_counts={"not_started": 6},
                writer_pid=os.getpid()),  # its writer is alive: it is still going
    ]
    lines = runlist_text(listed, now=NOW).splitlines()
    assert lines[0].split() == ["run", "status", "steps", "step", "statuses", "took", "model", "calls", "started",
                                "parallel", "planner", "model", "goal"]
    r3, r2, r1 = lines[1:]
    assert "failed (aborted)" in r3 and "5 completed, 1 failed" in r3 and "2.5 s" in r3 and "today 14:50" in r3
    assert re.search(r"today 14:50\s+4\s+LLMPlanner\s+tiny\s+sums$", r3), r3
    assert "6 completed" in r2 and "1 min 15 s" in r2 and "yesterday 14:50" in r2
    assert re.search(r"\s1\s+—\s+—\s+sums$", r2), r2
    # a run still going: how far it got (its row's counts are from when it started), and so far
    assert "2 completed, 4 to go" in r1 and "10.0 s so far" in r1
    assert str(NOW)[:6] not in "\n".join(lines)  # no raw timestamp anywhere
    # the same settings everywhere: no column for them
    same = runlist_text([summary("a"), summary("b")], now=NOW)
    assert "parallel" not in same and "planner" not in same and "model calls" in same


def test_a_damaged_row_shows_no_counted_numbers() -> None:
    text = runlist_text([summary("bad", damage="its plan (runs.plan) is not JSON")], now=NOW)
    row = text.splitlines()[1]
    assert "damaged" in row and "completed" not in row and "?" in row


def test_runs_is_still_the_list_and_shows_as_a_table(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    box = planbook.Toolbox()

    @box.tool
    def ok(x: str = "a") -> str:
        """Works."""
        return x

    spec = "goal: <script>alert(1)</script>\nsteps:\n  - {id: a, tool: ok}\n  - {id: b, tool: ok}\n"
    planbook.run(spec, tools=box, store=str(path))
    planbook.run(spec, tools=box, store=str(path), parallel=2)
    listed = planbook.runs(path)
    assert isinstance(listed, list) and isinstance(listed, RunList) and len(listed) == 2
    assert listed[0].steps_done == 2 and listed[-1].run_id == listed[1].run_id
    assert listed == list(listed) and [s.run_id for s in listed[:1]] == [listed[0].run_id]
    bundle = listed._repr_mimebundle_()
    page = bundle["text/html"]
    assert 'class="planbook-runs' in page and page.count("<tr>") == 3 and "<th" in page
    assert "2 completed" in page and "parallel" in page and ("today " in page or "yesterday " in page)  # at midnight
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "var(" not in page and set(re.findall(r"(?<![-\w])color:([^;\"]+)", page)) <= {"#fff"}
    assert sanitize_html(page) is not None  # the gate's sanitiser keeps it as HTML
    assert bundle["text/plain"].splitlines()[0].startswith("run ") and str(listed) == listed.text()
    tree = planbook.runs(path, tree=True)
    assert isinstance(tree, RunList) and tree.tree and len(tree) == 2
    assert "No runs" in runlist_html([])


def test_planbook_runs_lists_counts_duration_and_differing_settings(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.sqlite"
    box = planbook.Toolbox()

    @box.tool
    def ok(x: str = "a") -> str:
        """Works."""
        return x

    @box.tool
    def bad(x: str = "a") -> str:
        """Fails."""
        raise RuntimeError("no")

    spec = "goal: sums\nsteps:\n  - {id: a, tool: ok}\n  - {id: c, tool: bad, on_failure: skip}\n  - {id: d, tool: ok}\n"
    planbook.run(spec, tools=box, store=str(path))
    planbook.run(spec, tools=box, store=str(path), parallel=2)
    assert main(["runs", "--store", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "parallel" in out[0].split() and "took" in out[0].split()
    assert all("2 completed, 1 skipped" in row and re.search(r"\d (ms|s) ", row) and re.search(r"(today|yesterday) \d\d:\d\d", row)
               for row in out[1:])
    assert re.search(r"\s2\s+sums$", out[1]) and re.search(r"\s1\s+sums$", out[2])


def test_a_summary_with_counts_replaced_shows_them() -> None:
    one = summary("r", step_counts={"completed": 1, "in_progress": 1, "not_started": 2}, status="paused",
                  reason="paused", steps_done=1, steps_total=4)
    assert "1 completed, 1 in progress, 2 not started" in runlist_text([one], now=NOW)
    older = dataclasses.replace(one, step_counts=None, settings={})
    assert "1 completed of 4" in runlist_text([older], now=NOW)
