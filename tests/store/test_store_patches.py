"""Schema version 4: a step going in progress is written as a patch of its stored row.

A patch holds only the fields that differ from the step's row in the steps table, and is
written only when the store can prove the rest unchanged (same values and types, the
same args text, the same secrets known); anything else is written whole. A reader gets
the same step either way.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from planbook.data.models import Plan, Status, Step
from planbook.engine.state import RunState
from planbook.store.schema import SCHEMA_VERSION
from planbook.store.sqlite import SQLiteStore


def _plan() -> Plan:
    return Plan(id="p", goal="g", steps=[
        Step(id="a", task="fetch the page", tool="fetch", args={"url": "https://example.org", "n": [1, 2]}),
        Step(id="b", task="count words", tool="count", args={"of": "$a"}, needs=["a"], expect="a number"),
    ])


def _deltas(path: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(path)
    try:
        docs = [json.loads(r) for (r,) in con.execute("SELECT record FROM log ORDER BY id")]
    finally:
        con.close()
    return [d for doc in docs for d in doc.get("s", [])]


class Text(str):
    """A text of another type than the one the row was written from."""


def _start(store: SQLiteStore, run_id: str, state: RunState, step: Step, at: float) -> None:
    step.set_state(status=Status.in_progress, attempts=step.attempts + 1, started_at=at, finished_at=None,
                   error=None, traceback=None)
    state.executions += 1
    store.record_step(run_id, [step], state)


def _same(a: Step, b: Step) -> None:
    """Equal field by field, type for type (field order may differ: older pydantic's
    ``model_construct`` puts the defaults it fills in last)."""
    assert a.model_dump() == b.model_dump()
    assert {k: type(v) for k, v in a.model_dump().items()} == {k: type(v) for k, v in b.model_dump().items()}


def test_a_step_going_in_progress_is_a_patch_and_reads_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path) as store:
        state = RunState(plan=_plan())
        run_id = store.create_run(state.plan, config={})
        _start(store, run_id, state, state.plan.steps[0], 1796143858.125)
        [delta] = _deltas(path)
        assert delta == {"p": {"id": "a", "status": "in_progress", "attempts": 1, "started_at": 1796143858.125}}
        loaded = store.load_run(run_id)
        _same(loaded.plan.steps[0], state.plan.steps[0])
        _same(loaded.plan.steps[1], state.plan.steps[1])
    with SQLiteStore(path) as again:  # a new process: what a resume reads
        _same(again.load_run(run_id).plan.steps[0], state.plan.steps[0])


@pytest.mark.parametrize("change", ["args in place", "needs in place", "task", "a type", "a secret learned"])
def test_a_step_changed_since_its_row_was_written_is_written_whole(tmp_path: Path, change: str) -> None:
    """Never a stale patch: what changed in place, a value of another type (1 for 1.0), or a
    secret that the row may hold, makes the step's whole entry be written."""
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path) as store:
        state = RunState(plan=_plan())
        run_id = store.create_run(state.plan, config={})
        step = state.plan.steps[1]
        if change == "args in place":
            step.args["of"] = "$a.text"
        elif change == "needs in place":
            step.needs.append("a")
        elif change == "task":
            step.task = "count the words"
        elif change == "a type":
            step.set_state(expect=Text("a number"))
        else:
            store.add_secrets(["a number"])
        _start(store, run_id, state, step, 1796143858.5)
        if change == "a secret learned":
            # every row of the run is written again, whole, masked now (the run's goal and plan too)
            assert _deltas(path) == []
        else:
            [delta] = _deltas(path)
            assert "p" not in delta and delta["r"]["id"] == "b", delta
        loaded = store.load_run(run_id).plan.steps[1]
        if change == "a secret learned":
            assert loaded.expect == "***"
        elif change == "a type":
            assert type(loaded.expect) is str and loaded.expect == "a number"
        else:
            _same(loaded, step)


def test_a_failed_step_started_again_is_written_whole_and_read_as_its_last_state(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path) as store:
        state = RunState(plan=_plan())
        run_id = store.create_run(state.plan, config={})
        step = state.plan.steps[0]
        _start(store, run_id, state, step, 10.0)
        step.set_state(status=Status.failed, error="timed out", finished_at=11.0)
        state.history.append(step)  # as a run does: the history holds the step until it changes again
        store.record_step(run_id, [step], state)
        state.history[0] = step.snapshot()
        _start(store, run_id, state, step, 12.0)  # the retry
        assert [list(d) for d in _deltas(path)] == [["p"], ["h"], ["r", "a", "v"]]
        loaded = store.load_run(run_id)
        _same(loaded.plan.steps[0], step)
        assert (loaded.history[0].status, loaded.history[0].error) == (Status.failed, "timed out")


def test_counters_changed_in_place_are_written(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.sqlite") as store:
        state = RunState(plan=_plan())
        run_id = store.create_run(state.plan, config={})
        _start(store, run_id, state, state.plan.steps[0], 1.0)
        state.retries_used["a"] = 1  # the runner changes the dict in place
        state.pending_failures.append("a")
        store.record_step(run_id, [], state)
        counters = store.load_run(run_id).counters
        assert counters["retries_used"] == {"a": 1} and counters["pending_failures"] == ["a"]
        assert counters["executions"] == 1


def test_a_version_3_store_is_read_as_it_is_and_migrated_when_written(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path) as store:
        state = RunState(plan=_plan())
        run_id = store.create_run(state.plan, config={})
        state.plan.steps[0].set_state(status=Status.completed, result=3)
        store.save_state(run_id, state)
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = 3")  # a version-3 file is version 4 without patches
    con.commit()
    con.close()
    with SQLiteStore(path, readonly=True) as reader:
        assert reader.version == 3 and reader.load_run(run_id).plan.steps[0].result == 3
    with SQLiteStore(path) as writer:
        assert writer.version == SCHEMA_VERSION == 6
        assert writer.load_run(run_id).plan.steps[0].result == 3
    con = sqlite3.connect(path)
    assert con.execute("SELECT version FROM schema_version").fetchall() == [(6,)]
    con.close()


def test_a_record_is_checked_for_secrets_by_its_texts_whatever_their_type(tmp_path: Path) -> None:
    """Records are checked by their texts, not their JSON (field names are planbook's own):
    a text of a str subclass, or a secret in ``needs``, is redacted all the same."""
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path, secrets=["hunter22"]) as store:
        plan = Plan(id="p", steps=[Step(id="a", tool="t"), Step(id="b", tool="t", needs=["a"])])
        plan.steps[0].set_state(task=Text("log in with password=swordfish1"))  # as set_state keeps it
        plan.steps[1].needs.append(Text("hunter22"))
        run_id = store.create_run(plan, config={})
        stored = path.read_bytes() + path.with_name(path.name + "-wal").read_bytes()  # the steps table or the log
        assert b"swordfish1" not in stored and b"hunter22" not in stored
        loaded = store.load_run(run_id).plan.steps
        assert loaded[0].task == "log in with password=***" and loaded[1].needs == ["a", "***"]
