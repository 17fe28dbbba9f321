"""Schema version 5: a fresh plan's steps are its run's first log row, not a row per step.

Until the run's first save, that row is what a patch changes and what a reader starts
from; the save writes every step to the steps table, which is the base from then on. A
plan that is not fresh (a step already run, args that are not plain JSON, anything for
redaction to change) is written step by step, as before. A reader gets the same steps
either way, and ``planbook runs`` counts them either way.
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


def _plan(n: int = 3) -> Plan:
    return Plan(id="p", goal="g", steps=[
        Step(id=f"s{i}", task=f"step {i}", tool="noop", args={"x": i, "tags": ["a", "b"]},
             needs=[f"s{i - 1}"] if i > 1 else [], expect="a number" if i == 2 else "")
        for i in range(1, n + 1)
    ])


def _table(path: Path, query: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _stored(path: Path) -> bytes:
    """Every byte of the store: its file and, while it is open, its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def _first_row(path: Path) -> dict[str, Any]:
    return json.loads(_table(path, "SELECT record FROM log ORDER BY id LIMIT 1")[0][0])


def _same_steps(loaded: Plan, plan: Plan) -> None:
    assert [s.model_dump() for s in loaded.steps] == [s.model_dump() for s in plan.steps]
    assert [{k: type(v) for k, v in s.model_dump().items()} for s in loaded.steps] == \
           [{k: type(v) for k, v in s.model_dump().items()} for s in plan.steps]


def _start(store: SQLiteStore, run_id: str, state: RunState, step: Step, at: float,
           ended: list[Step] = ()) -> None:  # type: ignore[assignment]
    step.set_state(status=Status.in_progress, attempts=step.attempts + 1, started_at=at, finished_at=None)
    state.executions += 1
    store.record_step(run_id, [*ended, step], state)


def _finish(state: RunState, step: Step, at: float, result: Any) -> Step:
    step.set_state(status=Status.completed, finished_at=at, result=result)
    state.history.append(step.model_copy())
    return step


def test_a_fresh_plan_is_one_log_row_and_reads_back_the_same_at_every_point(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    plan = _plan()
    with SQLiteStore(path) as store:
        run_id = store.create_run(plan)
        assert _table(path, "SELECT count(*) FROM steps") == [(0,)]
        first = _first_row(path)
        assert [e["r"]["id"] for e in first["b"]] == ["s1", "s2", "s3"]
        _same_steps(store.load_run(run_id).plan, plan)

        state = RunState(plan=plan)
        s1, s2 = plan.steps[0], plan.steps[1]
        _start(store, run_id, state, s1, 100.0)
        _same_steps(store.load_run(run_id).plan, plan)  # the patch applies to the created row
        _finish(state, s1, 101.0, {"n": 1})
        _start(store, run_id, state, s2, 102.0, [s1])
        loaded = store.load_run(run_id)
        _same_steps(loaded.plan, plan)
        assert [h.id for h in loaded.history] == ["s1"] and loaded.history[0].result == {"n": 1}

        store.save_state(run_id, state)  # the first save writes every step to the steps table
        assert _table(path, "SELECT step_id, status FROM steps ORDER BY position") == [
            ("s1", "completed"), ("s2", "in_progress"), ("s3", "not_started")]
        _same_steps(store.load_run(run_id).plan, plan)

        _finish(state, s2, 103.0, 2)
        _start(store, run_id, state, plan.steps[2], 104.0, [s2])  # a patch of the table's row now
        _same_steps(store.load_run(run_id).plan, plan)
    with SQLiteStore(path, readonly=True) as reader:
        _same_steps(reader.load_run(run_id).plan, plan)


@pytest.mark.parametrize("spoil", ["completed", "tuple_args", "secret_word", "known_secret", "object_field"])
def test_a_plan_that_is_not_fresh_is_written_step_by_step(tmp_path: Path, spoil: str) -> None:
    path = tmp_path / "runs.sqlite"
    plan = _plan()
    last = plan.steps[2]
    secrets: list[str] = []
    if spoil == "completed":  # a completed step whose result is not plain JSON (a plain one goes in the first row)
        last.set_state(status=Status.completed, result=(3, 4))
    elif spoil == "tuple_args":
        last.args = {"x": (1, 2)}  # JSON would give a list back
    elif spoil == "secret_word":
        last.args = {"api_key": "abc"}
    elif spoil == "known_secret":
        last.task = "send hunter2-secret-value"
        secrets = ["hunter2-secret-value"]
    else:
        last.__dict__["notes"] = object()  # a field holding an object: written as its repr, step by step
    with SQLiteStore(path, secrets=secrets) as store:
        run_id = store.create_run(plan)
        assert _table(path, "SELECT count(*) FROM steps") == [(3,)]
        assert _table(path, "SELECT count(*) FROM log") == [(0,)]  # no created row
        # the first steps' rows are what their patches change, as for a plan written in one row
        state = RunState(plan=plan)
        _start(store, run_id, state, plan.steps[0], 100.0)
        assert "p" in json.loads(_table(path, "SELECT record FROM log ORDER BY id DESC LIMIT 1")[0][0])["s"][0]
        loaded = store.load_run(run_id).plan
        assert [s.id for s in loaded.steps] == ["s1", "s2", "s3"]
        assert loaded.steps[0].model_dump() == plan.steps[0].model_dump()
        if spoil == "known_secret":
            assert "hunter2-secret-value" not in loaded.steps[2].task
        if secrets or spoil == "secret_word":
            assert b"hunter2-secret-value" not in _stored(path) and b'"abc"' not in _stored(path)


def test_a_completed_step_with_a_plain_result_is_written_in_the_first_row(tmp_path: Path) -> None:
    """A fork's plan starts with completed steps (pinned results): one row, not a row per step."""
    path = tmp_path / "runs.sqlite"
    plan = _plan()
    plan.steps[2].set_state(status=Status.completed, result={"n": 3}, notes="pinned: the fork gave this result")
    with SQLiteStore(path) as store:
        run_id = store.create_run(plan)
        assert _table(path, "SELECT count(*) FROM steps") == [(0,)]
        assert _table(path, "SELECT count(*) FROM log") == [(1,)]
        loaded = store.load_run(run_id).plan
        assert loaded.steps[2].status is Status.completed and loaded.steps[2].result == {"n": 3}
        assert loaded.steps[2].notes.startswith("pinned: ")


def test_runs_counts_the_steps_of_a_run_written_in_one_row_and_after_a_replan(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    plan = _plan(4)
    with SQLiteStore(path) as store:
        run_id = store.create_run(plan)
        summary = store.list_runs()[0]
        assert (summary.steps_total, summary.steps_done) == (4, 0)
        state = RunState(plan=plan)
        _start(store, run_id, state, plan.steps[0], 100.0)
        _finish(state, plan.steps[0], 101.0, 1)
        store.record_step(run_id, [plan.steps[0]], state)
        assert (store.list_runs()[0].steps_total, store.list_runs()[0].steps_done) == (4, 1)
        plan.steps.append(Step(id="s5", task="one more", tool="noop"))  # a replan adds a step: a save follows
        store.save_state(run_id, state)
        assert (store.list_runs()[0].steps_total, store.list_runs()[0].steps_done) == (5, 1)


def test_a_run_written_in_one_row_goes_on_in_another_process(tmp_path: Path) -> None:
    """A resume (a new store object, knowing nothing) reads the statuses from the created
    row and the log, records the next steps, and its save writes every step."""
    path = tmp_path / "runs.sqlite"
    plan = _plan()
    with SQLiteStore(path) as store:
        run_id = store.create_run(plan)
        state = RunState(plan=plan)
        _start(store, run_id, state, plan.steps[0], 100.0)
        _finish(state, plan.steps[0], 101.0, 1)
        store.record_step(run_id, [plan.steps[0]], state)
    with SQLiteStore(path) as again:
        stored = again.load_run(run_id)
        resumed = RunState(plan=stored.plan, history=stored.history, events=stored.events,
                           executions=stored.counters.get("executions", 0))
        step = resumed.plan.steps[1]
        _start(again, run_id, resumed, step, 102.0)
        assert again.load_run(run_id).plan.steps[1].status is Status.in_progress
        again.save_state(run_id, resumed)
        assert _table(path, "SELECT step_id, status FROM steps ORDER BY position") == [
            ("s1", "completed"), ("s2", "in_progress"), ("s3", "not_started")]
        _same_steps(again.load_run(run_id).plan, resumed.plan)


def test_a_version_4_store_counts_steps_in_its_table_and_migrates_when_written(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path) as store:
        plan = _plan()
        plan.steps[0].args = {"url": "https://example.org"}  # "://" : written step by step, as version 4 did
        run_id = store.create_run(plan)
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE runs DROP COLUMN steps_total")
    con.execute("UPDATE schema_version SET version = 4")
    con.commit()
    con.close()
    with SQLiteStore(path, readonly=True) as reader:
        assert reader.version == 4 and reader.list_runs()[0].steps_total == 3
        assert [s.id for s in reader.load_run(run_id).plan.steps] == ["s1", "s2", "s3"]
    with SQLiteStore(path) as writer:
        assert writer.version == SCHEMA_VERSION == 6
        assert writer.list_runs()[0].steps_total == 3  # the new column is empty: the table counts them
        writer.create_run(_plan(2))
        assert sorted(s.steps_total for s in writer.list_runs()) == [2, 3]


def test_a_history_entry_encoded_in_one_call_keeps_no_secret(tmp_path: Path) -> None:
    """Plain args and a plain result are encoded with the record at once; a known secret in
    the result still makes it unrestorable, and one in a text of the record is redacted."""
    secret = "sk-live-0123456789abcdefXYZ"
    path = tmp_path / "runs.sqlite"
    plan = _plan(2)
    with SQLiteStore(path, secrets=[secret]) as store:
        run_id = store.create_run(plan)
        state = RunState(plan=plan)
        s1, s2 = plan.steps
        _start(store, run_id, state, s1, 100.0)
        _finish(state, s1, 101.0, {"echo": secret})
        _start(store, run_id, state, s2, 102.0, [s1])
        _finish(state, s2, 103.0, 7)
        s2.set_state(notes=f"the key was {secret}")
        state.history[-1].set_state(notes=f"the key was {secret}")
        store.record_step(run_id, [s2], state)
        loaded = store.load_run(run_id)
    assert secret.encode() not in _stored(path)
    first = loaded.history[0].result
    assert getattr(first, "reason", "").startswith("it held a secret")
    assert loaded.history[1].result == 7 and secret not in loaded.history[1].notes and "***" in loaded.history[1].notes


@pytest.mark.parametrize("edit", ["append", "retype"])
def test_args_edited_in_place_after_the_created_row_are_written_whole(tmp_path: Path, edit: str) -> None:
    """The copy taken when the created row was written tells that the args changed since
    (a value of another type counts): the step is then written whole, not as a patch."""
    path = tmp_path / "runs.sqlite"
    plan = _plan(2)
    with SQLiteStore(path) as store:
        run_id = store.create_run(plan)
        step = plan.steps[0]
        if edit == "append":
            step.args["tags"].append("c")
        else:
            step.args["x"] = 1.0  # equal to 1, of another type
        _start(store, run_id, RunState(plan=plan), step, 100.0)
        loaded = store.load_run(run_id).plan.steps[0]
    assert loaded.args == step.args and type(loaded.args["x"]) is type(step.args["x"])
    deltas = [d for (r,) in _table(path, "SELECT record FROM log ORDER BY id") for d in json.loads(r).get("s", [])]
    assert deltas and "p" not in deltas[-1]  # written whole


@pytest.mark.parametrize("field", ["notes", "output"])
def test_a_record_field_holding_a_list_is_checked_whole(tmp_path: Path, field: str) -> None:
    """A record's texts are checked one by one only when they are its values: a list or a
    mapping set on a step (pydantic does not check assignments) keeps its texts nested, and
    the record's whole JSON is checked then, on every path (created row, history entry, save)."""
    token = "Authorization: Bearer abcdefghijklmnop"
    path = tmp_path / "runs.sqlite"
    plan = _plan(2)
    with SQLiteStore(path) as store:
        run_id = store.create_run(plan)
        state = RunState(plan=plan)
        s1, s2 = plan.steps
        s1.__dict__[field] = [token] if field == "notes" else {"log": [token]}
        _start(store, run_id, state, s1, 100.0)
        _finish(state, s1, 101.0, 1)
        _start(store, run_id, state, s2, 102.0, [s1])
        store.save_state(run_id, state)
        assert b"abcdefghijklmnop" not in _stored(path)
    assert b"abcdefghijklmnop" not in _stored(path)


def test_a_version_5_store_migrates_to_6_in_one_transaction_and_its_runs_read_as_before(tmp_path: Path) -> None:
    """Version 6 adds kept results (a fork's references to its parent's rows): a version-5 file is
    a version-6 file without forks, so migrating it changes only its version number."""
    path = tmp_path / "runs.sqlite"
    with SQLiteStore(path) as store:
        run_id = store.create_run(_plan())
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = 5")
    con.commit()
    con.close()
    with SQLiteStore(path, readonly=True) as reader:
        assert reader.version == 5 and [s.id for s in reader.load_run(run_id).plan.steps] == ["s1", "s2", "s3"]
    with SQLiteStore(path) as writer:
        assert writer.version == SCHEMA_VERSION == 6
        assert [s.id for s in writer.load_run(run_id).plan.steps] == ["s1", "s2", "s3"]
    assert _table(path, "SELECT version FROM schema_version") == [(6,)]
