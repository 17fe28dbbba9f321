"""The SQLite store: several writers, threads, and files it must refuse and leave untouched."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from planbook import StoreError, StoreFormatError
from planbook.data.models import Event, Plan, Status, Step
from planbook.engine.state import RunState
from planbook.store import open_store
from planbook.store.schema import SCHEMA_VERSION
from planbook.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]

WRITER = r"""
import sys
from planbook.data.models import Event, Plan, Status, Step
from planbook.engine.runner import RunState
from planbook.store import step_cache_key
from planbook.store.sqlite import SQLiteStore

path, name, runs, steps, busy = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
store = SQLiteStore(path, busy_timeout=busy)
print("ready", flush=True)
assert sys.stdin.readline().strip() == "go"
for r in range(runs):
    plan = Plan(id=f"{name}-{r}", goal=f"{name} run {r}",
                steps=[Step(id=f"s{i}", tool="t", args={"i": i}) for i in range(steps)])
    state = RunState(plan=plan)
    run_id = store.create_run(plan, config={"writer": name}, run_id=f"{name}-{r}")
    for i, step in enumerate(plan.steps):
        step.set_state(status=Status.in_progress)
        state.events.append(Event(kind="step.started", time=0.0, step=step.id))
        store.record_step(run_id, step, state)
        step.set_state(status=Status.completed, result=[name, r, i])
        state.history.append(step.snapshot())
        state.executions += 1
        state.events.append(Event(kind="step.finished", time=0.0, step=step.id))
        store.record_step(run_id, step, state)
        store.cache_put(step_cache_key("t", {"w": name, "r": r, "i": i}), i, tool="t", run_id=run_id,
                        step_id=step.id)
    state.status, state.reason = "completed", "goal_met"
    store.save_state(run_id, state)
print("done", store.busy_retries, flush=True)
"""


@pytest.mark.parametrize("busy_timeout", [5.0, 0.0], ids=["sqlite-waits", "planbook-retries"])
def test_two_writer_processes_lose_no_rows_and_never_see_locked(tmp_path: Path, busy_timeout: float) -> None:
    """busy_timeout=0 leaves every wait to planbook's own retries (SQLite answers "locked" at once)."""
    path = tmp_path / "shared.sqlite"
    runs, steps = 12, 20
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(runs), str(steps), str(busy_timeout)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for name in ("w1", "w2")
    ]
    try:
        for p in procs:  # both have opened the store: now let them write at once
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert "locked" not in err and out.startswith("done")

    store = SQLiteStore(path)
    listed = store.list_runs()
    assert len(listed) == 2 * runs
    assert all((r.status, r.steps_done, r.steps_total, r.executions) == ("completed", steps, steps, steps)
               for r in listed)
    for name in ("w1", "w2"):
        for r in range(runs):
            loaded = store.load_run(f"{name}-{r}")
            assert [s.result for s in loaded.plan.steps] == [[name, r, i] for i in range(steps)]
            assert len(loaded.history) == steps and len(loaded.events) == 2 * steps
            assert loaded.config == {"writer": name}
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM cache").fetchone()[0] == 2 * runs * steps
    con.close()


def test_opening_a_store_another_process_is_creating_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cause of a flaky two-writer run: the second process read the file while the first
    held it locked to create it, and (with busy_timeout=0) failed at once with "locked"."""
    from planbook.store import sqlite as sqlite_module

    path = tmp_path / "new.sqlite"
    creator = sqlite3.connect(path, isolation_level=None)  # a store being created: page 1 written, locked
    creator.execute("PRAGMA user_version = 7")
    creator.execute("BEGIN EXCLUSIVE")
    refused = threading.Event()
    real_check = sqlite_module.check_file

    def check_file(*args: object) -> None:
        try:
            real_check(*args)  # type: ignore[arg-type]
        except BaseException:
            refused.set()
            raise

    monkeypatch.setattr(sqlite_module, "check_file", check_file)
    opened: list[object] = []
    opener = threading.Thread(target=lambda: opened.append(_open_or_error(path)))
    opener.start()
    try:
        assert refused.wait(timeout=60)  # it met the lock...
    finally:
        creator.execute("ROLLBACK")
        creator.close()
    opener.join(timeout=120)
    assert len(opened) == 1 and isinstance(opened[0], SQLiteStore), opened  # ...and waited for it
    assert opened[0].busy_retries >= 1 and opened[0].list_runs() == []


def _open_or_error(path: Path) -> object:
    try:
        return SQLiteStore(path, busy_timeout=0.0)
    except Exception as exc:  # shown by the assertion
        return exc


def test_threads_share_one_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "threads.sqlite")
    n_threads, steps = 4, 30
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            plan = Plan(id=f"t{k}", steps=[Step(id=f"s{i}", tool="t") for i in range(steps)])
            state = RunState(plan=plan)
            run_id = store.create_run(plan, config={}, run_id=f"t{k}")
            barrier.wait(timeout=60)
            for step in plan.steps:
                step.set_state(status=Status.completed, result=k)
                state.history.append(step.snapshot())
                state.events.append(Event(kind="step.finished", time=0.0, step=step.id))
                store.record_step(run_id, step, state)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    for k in range(n_threads):
        loaded = store.load_run(f"t{k}")
        assert [s.result for s in loaded.plan.steps] == [k] * steps and len(loaded.events) == steps


def test_a_run_written_by_two_processes_at_once_is_refused_clearly(tmp_path: Path) -> None:
    first = SQLiteStore(tmp_path / "r.sqlite")
    plan = Plan(id="p", steps=[Step(id="a", tool="t"), Step(id="b", tool="t")])
    state = RunState(plan=plan)
    run_id = first.create_run(plan, config={})
    state.events.append(Event(kind="run.started", time=0.0))
    first.save_state(run_id, state)

    second = SQLiteStore(tmp_path / "r.sqlite")  # another process resumes the same run meanwhile
    theirs = RunState(**second.load_run(run_id).state_fields())
    theirs.events.append(Event(kind="run.started", time=1.0, data={"resumed": True}))
    second.save_state(run_id, theirs)

    state.events.append(Event(kind="step.started", time=2.0, step="a"))
    with pytest.raises(StoreError, match="written by another process meanwhile"):
        first.record_step(run_id, plan.steps[0], state)
    assert len(second.load_run(run_id).events) == 2


def test_wal_mode_and_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    SQLiteStore(path).close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    con.close()
    SQLiteStore(path).close()  # opening again adds nothing
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1
    con.close()


def _refused(path: Path, match: str) -> StoreFormatError:
    before = path.read_bytes()
    with pytest.raises(StoreFormatError, match=match) as info:
        SQLiteStore(path)
    assert str(path) in str(info.value) and "left as it is" in str(info.value)
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return info.value


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_bytes(os.urandom(4096) + b"notes the user cares about")
    _refused(path, "not a planbook run store, or it is damaged")
    text = tmp_path / "notes.txt"
    text.write_text("my notes\n" * 1000)
    _refused(text, "not a planbook run store")


def test_a_damaged_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    store.create_run(Plan(id="p", steps=[Step(id="a", tool="t")]), config={})
    store.close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page, after the header
    path.write_bytes(bytes(data))
    _refused(path, "damaged")


def test_a_store_from_a_newer_planbook_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    store.create_run(Plan(id="p", steps=[Step(id="a", tool="t")]), config={}, run_id="keep-me")
    store.close()
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    con.commit()
    con.close()
    error = _refused(path, f"newer planbook \\(schema version {SCHEMA_VERSION + 1}")
    assert "upgrade planbook" in str(error)


def test_a_database_of_another_program_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (name TEXT)")
    con.execute("INSERT INTO users VALUES ('ada')")
    con.commit()
    con.close()
    _refused(path, "database of another program \\(tables: users\\)")


def test_a_store_missing_tables_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SQLiteStore(path).close()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE cache")
    con.commit()
    con.close()
    _refused(path, "lacks its tables cache")


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.touch()
    store = SQLiteStore(path)
    assert store.list_runs() == []


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        open_store(tmp_path)


def test_a_closed_store_opens_its_connection_again(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.sqlite")
    store.close()
    run_id = store.create_run(Plan(id="p", steps=[]), config={})
    assert store.latest_run_id() == run_id


def test_a_forked_child_uses_its_own_connection(tmp_path: Path) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    store = SQLiteStore(tmp_path / "r.sqlite")
    store.create_run(Plan(id="p", steps=[]), config={}, run_id="parent")
    pid = os.fork()
    if pid == 0:  # the child: write through the inherited store object, then leave at once
        code = 1
        try:
            store.create_run(Plan(id="c", steps=[]), config={}, run_id="child")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert {r.run_id for r in store.list_runs()} == {"parent", "child"}



KILLED = r"""
import sys
from planbook.data.models import Event, Plan, Status, Step
from planbook.engine.runner import RunState
from planbook.store.sqlite import SQLiteStore

store = SQLiteStore(sys.argv[1])
plan = Plan(id="p", steps=[Step(id=f"s{i}", tool="t", args={"i": i}) for i in range(20_000)])
state = RunState(plan=plan)
run_id = store.create_run(plan, config={}, run_id="victim")
for step in plan.steps:  # until killed
    step.set_state(status=Status.in_progress)
    state.events.append(Event(kind="step.started", time=0.0, step=step.id))
    store.record_step(run_id, step, state)
    step.set_state(status=Status.completed, result={"square": step.args["i"] ** 2})
    state.history.append(step.snapshot())
    state.executions += 1
    state.events.append(Event(kind="step.finished", time=0.0, step=step.id))
    store.record_step(run_id, step, state)
    print(step.id, flush=True)  # reported only once it is in the store
"""


def test_a_killed_writer_loses_no_recorded_step_and_the_run_goes_on(tmp_path: Path) -> None:
    import signal

    path = tmp_path / "r.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        reported = [proc.stdout.readline().strip() for _ in range(300)]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert reported[-1] == "s299"

    store = SQLiteStore(path)
    loaded = store.load_run("victim")
    done = [s for s in loaded.plan.steps if s.status is Status.completed]
    assert len(done) >= 300 and len(loaded.history) == len(done) == loaded.counters["executions"]
    assert all(s.result == {"square": int(s.id[1:]) ** 2} for s in done)
    assert [s.id for s in done] == [f"s{i}" for i in range(len(done))]
    assert len(loaded.interrupted_steps()) <= 1  # the step in progress at the kill, if any

    state = RunState(**loaded.state_fields())
    following = state.plan.steps[len(done)]
    following.set_state(status=Status.completed, result="after the crash")
    state.history.append(following.snapshot())
    state.executions += 1
    store.record_step("victim", following, state)
    assert SQLiteStore(path).load_run("victim").plan.steps[len(done)].result == "after the crash"
