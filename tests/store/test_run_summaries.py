"""What a run's summary knows for ``planbook runs`` and ``planbook.runs()``: its duration, its
steps by status and the settings it was made with (parallel, planner, model), the same in
both stores. Before, a summary had none of them: the listing showed raw numbers only."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import ScriptedPlanner, Toolbox
from planbook.store import MemoryStore, RunSummary

SPEC = """goal: sums of things
steps:
  - {id: a, tool: ok}
  - {id: b, tool: ok}
  - {id: c, tool: bad, on_failure: continue}
  - {id: d, tool: ok, needs: [c]}
  - {id: e, tool: bad, needs: [d], on_failure: skip}
  - {id: f, tool: ok, needs: [e]}
"""


def tools() -> Toolbox:
    box = Toolbox()

    @box.tool
    def ok(x: str = "a") -> str:
        """Works."""
        return x

    @box.tool
    def bad(x: str = "a") -> str:
        """Fails."""
        raise RuntimeError("no")

    return box


class ModelPlanner(ScriptedPlanner):
    """A planner that names its model, as a model-backed one (LLMPlanner) does."""

    model = "tiny-model"


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Any:
    return MemoryStore() if request.param == "memory" else str(tmp_path / "runs.sqlite")


def test_a_summary_counts_its_steps_by_status_and_knows_its_duration(store: Any) -> None:
    planbook.run(SPEC, tools=tools(), store=store)
    [summary] = planbook.runs(store)
    assert dict(summary.step_counts or {}) == {"completed": 3, "failed": 1, "skipped": 1, "blocked": 1}
    assert list(summary.step_counts or {}) == ["completed", "failed", "skipped", "blocked"]  # Status's order
    assert summary.duration is not None and 0 <= summary.duration == summary.updated - summary.started


def test_a_summary_keeps_the_settings_a_run_was_made_with(store: Any) -> None:
    planbook.run(SPEC, tools=tools(), store=store, parallel=3)
    planner = ModelPlanner(first=[{"id": "a", "tool": "ok"}])
    planbook.run("say a", planner=planner, tools=tools(), store=store)
    planned, parallel = planbook.runs(store)
    assert dict(parallel.settings) == {"parallel": 3, "planner": None, "model": None}
    assert dict(planned.settings) == {"parallel": 1, "planner": "ModelPlanner", "model": "tiny-model"}


def test_a_run_that_stopped_short_is_counted_as_it_stood(store: Any) -> None:
    """Its row is written when its status changes: the steps that never ran are counted too."""
    planbook.run(SPEC.replace("on_failure: continue", "on_failure: abort"), tools=tools(), store=store)
    [summary] = planbook.runs(store)
    assert summary.status == "failed"
    assert dict(summary.step_counts or {}) == {"not_started": 3, "completed": 2, "failed": 1}


def test_a_summary_stays_hashable_and_comparable() -> None:
    """The new fields are mappings: they take part in equality, not in the hash (a summary was hashable)."""
    one = RunSummary("r", "g", "completed", None, 1.0, 2.0, 1, 1, 0, step_counts={"completed": 1},
                     settings={"parallel": 1})
    assert hash(one) == hash(dataclasses.replace(one, step_counts={"completed": 2}))
    assert one != dataclasses.replace(one, step_counts={"completed": 2})
    assert one.duration == 1.0 and dataclasses.replace(one, damage="x").duration is None


def test_an_older_row_without_counts_or_settings_is_listed_without_them(tmp_path: Path) -> None:
    import json
    import sqlite3

    path = tmp_path / "runs.sqlite"
    planbook.run(SPEC, tools=tools(), store=str(path))
    con = sqlite3.connect(path)
    (counters,) = con.execute("SELECT counters FROM runs").fetchone()
    old = json.loads(counters)
    old.pop("step_counts")
    con.execute("UPDATE runs SET counters = ?, config = ?", (json.dumps(old), '{"max_steps": 12}'))
    con.commit()
    con.close()
    [summary] = planbook.runs(path)
    assert summary.step_counts is None and dict(summary.settings) == {} and summary.damage is None
