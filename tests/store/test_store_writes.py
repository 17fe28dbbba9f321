"""The SQLite store's write path: each step's row written once per state change.

A save (a replan, a pause, a resumed run, the end) writes the rows of the steps that
changed, not every step of the plan again; anything changed — also in place, also a
secret learned since — is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planbook.data.models import Plan, Status, Step
from planbook.engine.state import RunState
from planbook.store.sqlite import SQLiteStore


def _plan(n: int) -> Plan:
    return Plan(id="p", goal="g", steps=[Step(id=f"s{i}", tool="t", args={"x": [i]}, needs=[]) for i in range(n)])


def _rows_written(store: SQLiteStore, write: Any) -> int:
    """Rows the store inserted, updated or deleted in ``write()`` (SQLite's own count)."""
    con = store._connection()
    before = con.total_changes
    write()
    return con.total_changes - before


def test_a_save_writes_only_the_steps_that_changed(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.sqlite") as store:
        state = RunState(plan=_plan(50))
        run_id = store.create_run(state.plan, config={})
        store.save_state(run_id, state)  # as a run begins
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 1  # the run's row only
        state.plan.steps[7].set_state(status=Status.completed, result=7)
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 2  # that step, the run
        state.plan.steps[8].set_state(status=Status.in_progress)
        store.record_step(run_id, state.plan.steps[8], state)
        # recorded in the log; the save brings its row in the steps table up to date, once
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 2
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 1
        state.plan.steps = state.plan.steps[:40]  # a replan that drops ten steps
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 11
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 1  # the kept ones are known
        assert len(store.load_run(run_id).plan.steps) == 40


def test_a_step_is_one_row_written_and_the_run_row_only_when_its_status_changes(tmp_path: Path) -> None:
    """The durability point of a step (the previous step's result and history entry, the
    events, the next step in progress) is one log row; the run's row is written when a
    reader of it must see a change: a pause, waiting for approval, the end."""
    with SQLiteStore(tmp_path / "runs.sqlite") as store:
        state = RunState(plan=_plan(5))
        run_id = store.create_run(state.plan, config={})
        store.save_state(run_id, state)
        steps = state.plan.steps
        for i in range(3):
            steps[i].set_state(status=Status.in_progress, attempts=1)
            state.executions += 1
            assert _rows_written(store, lambda: store.record_step(run_id, [steps[i - 1], steps[i]] if i else
                                                                  [steps[i]], state)) == 1
            steps[i].set_state(status=Status.completed, result=i)
            state.history.append(steps[i])
        [live] = store.list_runs()  # a reader sees the progress the log holds
        assert (live.status, live.executions, live.steps_done, live.steps_total) == ("running", 3, 2, 5)
        state.status, state.reason = "running", "waiting"
        assert _rows_written(store, lambda: store.record_step(run_id, [steps[2]], state)) == 2
        assert [(r.status, r.reason, r.steps_done) for r in store.list_runs()] == [("running", "waiting", 3)]
        loaded = store.load_run(run_id)
        assert [(s.status.value, s.result) for s in loaded.plan.steps][:4] == [
            ("completed", 0), ("completed", 1), ("completed", 2), ("not_started", None)]
        assert [s.id for s in loaded.history] == ["s0", "s1", "s2"] and loaded.counters["executions"] == 3
        assert loaded.counters["reason"] == "waiting"


def test_a_save_still_writes_what_changed_in_place_or_may_now_hold_a_secret(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.sqlite") as store:
        state = RunState(plan=_plan(5))
        run_id = store.create_run(state.plan, config={})
        store.save_state(run_id, state)
        steps = state.plan.steps
        steps[0].args["x"].append(99)  # a paused plan edited in place
        steps[1].needs.append("s0")
        steps[2].set_state(status=Status.completed, result={"rows": [1]})
        store.save_state(run_id, state)
        steps[2].result["rows"].append(2)  # a mutable result changed after it was written
        steps[3].set_state(error="failed with hunter2-password")
        store.save_state(run_id, state)
        store.add_secrets(["hunter2-password"])  # learned since: the row that holds it is written again
        store.save_state(run_id, state)
        stored = store.load_run(run_id).plan.steps
        assert stored[0].args == {"x": [0, 99]}
        assert stored[1].needs == ["s0"]
        assert stored[2].result == {"rows": [1, 2]}
        assert "hunter2" not in (stored[3].error or "") and "***" in (stored[3].error or "")


def test_a_save_after_the_store_was_read_writes_every_step_again(tmp_path: Path) -> None:
    """What this process knows of the rows is forgotten when it reads the run: another
    process may have written it meanwhile, so nothing is skipped on trust."""
    with SQLiteStore(tmp_path / "runs.sqlite") as store:
        state = RunState(plan=_plan(10))
        run_id = store.create_run(state.plan, config={})
        store.load_run(run_id)
        assert _rows_written(store, lambda: store.save_state(run_id, state)) == 11


def test_durable_fsyncs_every_commit_and_a_run_takes_such_a_store(tmp_path: Path) -> None:
    import planbook

    def noop(x: int) -> int:
        """Return x."""
        return x

    with SQLiteStore(tmp_path / "normal.sqlite") as normal:
        assert normal._connection().execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with SQLiteStore(tmp_path / "durable.sqlite", durable=True) as durable:
        assert durable._connection().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        result = planbook.run(_plan(3).model_copy(update={"steps": [
            Step(id=f"s{i}", tool="noop", args={"x": i}) for i in range(3)]}),
            tools=planbook.Toolbox([noop]), store=durable, cache=False)
        assert result.ok
        stored = durable.load_run(durable.latest_run_id() or "")
        assert [st.result for st in stored.plan.steps] == [0, 1, 2]


def test_a_finished_run_leaves_nothing_of_its_rows_in_the_store_object(tmp_path: Path) -> None:
    """What a row was made of is kept only while the run is written: a store object a
    notebook keeps open does not grow with every finished run."""
    with SQLiteStore(tmp_path / "runs.sqlite") as store:
        state = RunState(plan=_plan(20))
        run_id = store.create_run(state.plan, config={})
        state.status = "completed"
        store.record_step(run_id, [], state)
        assert run_id not in store._caches
