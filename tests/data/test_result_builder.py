"""One RunResult builder: a run read back from its store is the run as it ended, field by field.

``Runner.result`` and ``StoredRun.result`` both hand plain data to
:func:`planbook.data.results.run_result`; a run with a failure, a retry and a replan reads
the same live and stored (its timing records included), and each path is seen to call the
builder (a result built beside it would drift from the other one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Step
from planbook.data import results
from planbook.data.models import RunResult
from planbook.engine.runner import Runner
from planbook.store import MemoryStore
from planbook.store.sqlite import SQLiteStore

SPEC = """
steps:
  - {id: a, tool: ok, args: {x: "1"}}
  - {id: b, tool: flaky, args: {x: $a}, needs: [a]}
  - {id: c, tool: ok, args: {x: $b}, needs: [b]}
"""

#: every field of a result; the test fails when RunResult gains one that is not compared
FIELDS = ("status", "reason", "plan", "history", "revisions", "events", "outputs", "error", "traceback",
          "executions", "replans", "max_steps", "max_replans", "usage", "records", "run_id", "lineage")


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()

    @tools.tool
    def ok(x: str = "") -> str:
        return "ok" + x

    @tools.tool
    def flaky(x: str = "") -> str:
        raise RuntimeError(f"flaky broke on {x}")

    return tools


def _planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
    """After b fails: a step that works in its place, and c after it."""
    return [Step(id="b2", tool="ok", args={"x": "$a"}, needs=["a"]),
            Step(id="c", tool="ok", args={"x": "$b2"}, needs=["b2"])]


def _run(store: Any) -> tuple[RunResult, RunResult]:
    """The live result of a run with a failure, a retry and a replan, and its stored result."""
    runner = Runner(SPEC, tools=_tools(), planner=_planner, on_failure=["retry", "replan"], retries=1, store=store)
    live = runner.run()
    assert runner.recorder is not None
    stored = store.load_run(runner.recorder.run_id).result()
    return live, stored


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    return value


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_stored_run_reads_as_the_live_run_field_by_field(kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "runs.sqlite")
    live, stored = _run(store)
    assert (live.status, live.reason, live.replans) == ("completed", "goal_met", 1)
    assert any(not r.ok for r in live.records) and len(live.records) == live.executions == 5
    assert set(FIELDS) == set(RunResult.model_fields), "a new field of RunResult: compare it here too"
    for name in FIELDS:
        assert _plain(getattr(stored, name)) == _plain(getattr(live, name)), name
    assert _plain(stored.timeline) == _plain(live.timeline)


def test_both_paths_build_the_result_with_the_one_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[RunResult] = []
    builder = results.run_result

    def spy(**fields: Any) -> RunResult:
        result = builder(**fields)
        built.append(result)
        return result

    monkeypatch.setattr(results, "run_result", spy)
    live, stored = _run(MemoryStore())
    assert built == [live, stored] and built[0] is live and built[1] is stored
