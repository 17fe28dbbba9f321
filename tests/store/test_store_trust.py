"""The store never crashes a run and never trusts stale state: values that break the
encoders, a paused plan edited in place, store paths with ``~``, reading without writing."""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import planbook
from helpers import note_tools, store_files
from planbook import Plan, Step, StoreError, Toolbox
from planbook.engine.runner import Runner
from planbook.store import MemoryStore, Unrestorable, open_store
from planbook.store.schema import SCHEMA_VERSION
from planbook.store.sqlite import SQLiteStore

# ------------------------------------------------------- values that break the encoders


def _big() -> int:
    return math.factorial(2000)  # 5,736 digits: past the limit of int -> str conversion


def _self_containing() -> list:
    value: list[Any] = [1]
    value.append(value)
    return value


def _deep() -> list:
    value: list[Any] = []
    for _ in range(5000):
        value = [value]
    return value


MAKERS = {"big": _big, "self_containing": _self_containing, "deep": _deep}


def _tools(maker: str) -> Toolbox:
    box = Toolbox()

    @box.tool(name="make")
    def make() -> Any:
        """The awkward value."""
        return MAKERS[maker]()

    @box.tool
    def after(note: str) -> str:
        """A later step: the run goes on."""
        return note

    return box


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("kind", ["sqlite", "memory-with-secrets"])
def test_a_result_that_breaks_the_encoder_is_kept_or_marked_and_the_run_ends_in_the_store(
    maker: str, kind: str, tmp_path: Path
) -> None:
    store: Any = SQLiteStore(tmp_path / "runs.sqlite") if kind == "sqlite" else MemoryStore(secrets=["s3cr3t-value"])
    plan = Plan(id="awkward", goal="store what cannot be written", steps=[
        Step(id="a", tool="make"), Step(id="b", tool="after", args={"note": "went on"}, needs=["a"]),
    ])
    result = planbook.run(plan, tools=_tools(maker), store=store)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert result.outputs["b"] == "went on"
    [listed] = store.list_runs()
    assert (listed.status, listed.steps_done) == ("completed", 2)  # the run's end was written
    stored = store.load_run(listed.run_id).plan.step("a").result
    if kind == "memory-with-secrets" or maker != "deep":  # pickle (or the memory store) gives it back
        assert not isinstance(stored, Unrestorable)
        if maker == "big":
            assert stored == math.factorial(2000)
        elif maker == "self_containing":
            assert stored[1] is stored
    else:  # pickle cannot either: the existing rule, a marker that says why
        assert isinstance(stored, Unrestorable) and "RecursionError" in stored.repr + stored.reason


# ---------------------------------------------------------- a paused plan edited in place


def test_a_paused_plan_edited_in_place_is_what_the_store_holds_and_what_a_resume_runs(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    box = Toolbox()

    @box.tool(cache=False)
    def record(x: int) -> int:
        """Note the value it was called with."""
        seen.append(x)
        return x

    @box.tool(cache=False)
    def stop() -> int:
        """The user's Ctrl-C, once."""
        if "stopped" not in seen:
            seen.append("stopped")
            raise KeyboardInterrupt
        return 0

    plan = Plan(id="edited", goal="g", steps=[
        Step(id="a", tool="record", args={"x": 1}),
        Step(id="s", tool="stop"),
        Step(id="b", tool="record", args={"x": 1}),
    ])
    runner = Runner(plan, tools=box, store=store)
    paused = runner.run(until="a")
    assert paused.status == "paused"
    runner.plan.step("b").args["x"] = 99  # the same dict object, edited in place
    runner.plan.step("b").needs.append("a")  # a list field of the record, edited in place
    stopped = runner.run()  # the stop step interrupts the run: its state is saved
    assert stopped.status == "interrupted"
    stored = planbook.load_run(store=store).plan.step("b")
    assert stored.args == {"x": 99} and stored.needs == ["a"]
    resumed = planbook.resume(store=store, tools=box)
    assert resumed.status == "completed" and seen == [1, "stopped", 99]


# ------------------------------------------------------------------ reading never writes



def _two_step_plan(plan_id: str = "p") -> Plan:
    return Plan(id=plan_id, goal=f"goal of {plan_id}", steps=[Step(id="a", tool="note", args={"x": "a"}),
                                                              Step(id="b", tool="note", args={"x": "b"})])


def test_reading_a_path_with_no_store_says_so_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "here.sqlite"
    for read in (lambda: planbook.runs(missing), lambda: planbook.load_run(store=missing),
                 lambda: planbook.load_run("some-run", store=missing)):
        with pytest.raises(StoreError, match=r"there is no run store at .*here\.sqlite \(nothing was created there\)"):
            read()
    assert list(tmp_path.iterdir()) == []



def test_reading_a_store_changes_no_byte_of_it(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    planbook.run(_two_step_plan(), tools=note_tools([]), store=store)
    before = store_files(tmp_path)
    assert [r.status for r in planbook.runs(store)] == ["completed"]
    assert planbook.load_run(store=store).outputs == {"a": "a", "b": "b"}
    assert store_files(tmp_path) == before


def _can_mount_read_only() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_mount_read_only(),
                    reason="needs a private mount namespace (unshare -m) to put the store on a read-only disk")
def test_a_store_on_a_read_only_disk_is_read_not_called_damaged(tmp_path: Path) -> None:
    folder, disk = tmp_path / "store", tmp_path / "readonly"
    folder.mkdir()
    disk.mkdir()
    with SQLiteStore(folder / "runs.sqlite") as store:
        planbook.run(_two_step_plan(), tools=note_tools([]), store=store)
    assert not (folder / "runs.sqlite-wal").exists()  # closed cleanly: all in the file
    root = Path(__file__).resolve().parents[2]
    script = (f"mount --bind {folder} {disk} && mount -o remount,bind,ro {disk} && "
              f"{sys.executable} -m planbook.cli runs --store {disk}/runs.sqlite && "
              f"{sys.executable} -m planbook.cli show --store {disk}/runs.sqlite")
    shown = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(root)})
    assert shown.returncode == 0, shown.stderr
    assert "completed (goal_met)" in shown.stdout and "goal of p" in shown.stdout
    assert "damaged" not in shown.stderr


# ----------------------------------------------------------------- ~ in every store path


def test_a_tilde_in_a_store_path_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    planbook.run(_two_step_plan(), tools=note_tools([]), store="~/runs.sqlite")
    assert (tmp_path / "home" / "runs.sqlite").exists() and not (tmp_path / "~").exists()
    assert [r.status for r in planbook.runs("~/runs.sqlite")] == ["completed"]
    assert isinstance(open_store("~/runs.sqlite"), SQLiteStore)
    assert SQLiteStore("~/runs.sqlite").path == tmp_path / "home" / "runs.sqlite"


def test_plan_store_expands_a_tilde(ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from planbook.notebook.magics import magics_of

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    magics = magics_of(ip)
    try:
        ip.run_line_magic("plan_store", "~/nb/runs.sqlite")
        assert str(tmp_path / "home" / "nb" / "runs.sqlite") in capsys.readouterr().out
        assert Path(magics.store().location) == tmp_path / "home" / "nb" / "runs.sqlite"
        assert not (tmp_path / "~").exists()
    finally:
        ip.run_line_magic("plan_store", "default")


# ------------------------------------------------ old store files, and the --resume lookup


#: a store written by the planbook before schema version 3 (version 2: history and events
#: tables): a completed run of plan "old", a run of plan "paused" paused after step a, and a
#: failed run of plan "typed" whose first step's result (a tuple) is pickled
STORE_V2 = Path(__file__).resolve().parents[1] / "fixtures" / "store_v2.sqlite"


def _old_store(tmp_path: Path, version: int) -> Path:
    """A copy of :data:`STORE_V2`, made what a version-1 planbook wrote when ``version`` is 1
    (no plan id, no writer host or time)."""
    path = tmp_path / "runs.sqlite"
    path.write_bytes(STORE_V2.read_bytes())
    if version == 1:
        con = sqlite3.connect(path)
        con.execute("DROP INDEX runs_by_plan")
        for column in ("plan_id", "writer_host", "writer_since"):
            con.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        con.execute("UPDATE schema_version SET version = 1")
        con.commit()
        con.close()
    return path


def _contents(stored: Any) -> tuple[Any, ...]:
    """What a user reads of a loaded run."""
    return (stored.goal, stored.counters, [(s.id, s.status, s.result, s.args, s.error) for s in stored.plan.steps],
            [(s.id, s.status, s.result, s.attempts) for s in stored.history],
            [(e.kind, e.step, e.data) for e in stored.events], stored.updated)


@pytest.mark.skipif(sqlite3.sqlite_version_info < (3, 35), reason="making a version-1 file needs ALTER TABLE DROP COLUMN")
@pytest.mark.parametrize("version", [1, 2])
def test_an_older_store_is_read_as_it_is_and_migrated_when_written(tmp_path: Path, version: int) -> None:
    store, seen = _old_store(tmp_path, version), []
    before = store_files(tmp_path)
    listed = planbook.runs(store)  # read-only: read as it is, nothing changed
    by_plan = {r.plan_id: r for r in listed}
    assert sorted((r.plan_id, r.status, r.steps_done, r.steps_total) for r in listed) == [
        ("old", "completed", 2, 2), ("paused", "paused", 1, 2), ("typed", "failed", 1, 2)]
    reader = SQLiteStore(store, readonly=True)
    as_read = {p: _contents(reader.load_run(r.run_id)) for p, r in by_plan.items()}
    reader.close()
    assert as_read["typed"][2][0][2] == ("z", "z")  # the pickled tuple comes back
    assert store_files(tmp_path) == before
    opened = SQLiteStore(store)  # for writing: migrated in one transaction
    con = sqlite3.connect(store)
    assert con.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "log" in tables and not tables & {"history", "events"}
    con.close()
    assert {p: _contents(opened.load_run(r.run_id)) for p, r in by_plan.items()} == as_read
    assert sorted((r.plan_id, r.status, r.steps_done, r.steps_total) for r in opened.list_runs()) == sorted(
        (r.plan_id, r.status, r.steps_done, r.steps_total) for r in listed)
    assert opened.latest_run_id(plan_id="old") == by_plan["old"].run_id
    resumed = planbook.resume(by_plan["paused"].run_id, store=opened, tools=note_tools(seen))
    assert resumed.ok and seen == ["b"]
    again = opened.load_run(by_plan["paused"].run_id)
    assert [e.kind for e in again.events][:len(as_read["paused"][4])] == [k for k, _, _ in as_read["paused"][4]]
    assert [(s.id, s.status.value) for s in again.history] == [("a", "completed"), ("b", "completed")]


def test_run_plan_resume_finds_the_latest_run_of_its_plan_with_one_query(
    ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    ip.user_ns["note_box"] = note_tools(seen)
    ip.run_cell_magic("plan", "target --tools note_box", "steps:\n  - {id: a, tool: note, args: {x: a}}\n"
                      "  - {id: b, tool: note, args: {x: b}}\n")
    opened = SQLiteStore(store)
    for i in range(30):  # other plans' runs, some newer than the one to find
        if i == 10:
            Runner(ip.user_ns["target"].copy_plan(), tools=ip.user_ns["note_box"], store=opened).run(until="a")
        planbook.run(_two_step_plan(f"other{i}"), tools=note_tools([]), store=opened)
    wanted = opened.latest_run_id(plan_id="target")
    loaded: list[str] = []
    real_load = SQLiteStore.load_run

    def load_run(self: SQLiteStore, run_id: str) -> Any:
        loaded.append(run_id)
        return real_load(self, run_id)

    def list_runs(self: SQLiteStore, **_: Any) -> Any:
        raise AssertionError("--resume must not list every run")

    monkeypatch.setattr(SQLiteStore, "load_run", load_run)
    monkeypatch.setattr(SQLiteStore, "list_runs", list_runs)
    try:
        ip.run_line_magic("plan_store", str(store))
        result = ip.run_line_magic("run_plan", "target --resume --no-view")
    finally:
        ip.run_line_magic("plan_store", "default")
    assert result.ok and seen == ["a", "b"]
    assert loaded == [wanted]  # only the run it resumes was loaded


def test_an_event_holding_values_json_cannot_write_is_stored_as_text(tmp_path: Path) -> None:
    from planbook.data.models import Event
    from planbook.engine.state import RunState

    store = SQLiteStore(tmp_path / "runs.sqlite")
    plan = _two_step_plan()
    state = RunState(plan=plan)
    run_id = store.create_run(plan, config={})
    state.events += [Event(kind="llm.call", time=1.0, data={"big": _big()}),
                     Event(kind="llm.call", time=2.0, data={"loop": _self_containing()}),
                     Event(kind="llm.call", time=3.0, data={"deep": _deep()})]
    store.save_state(run_id, state)
    events = store.load_run(run_id).events
    assert [e.kind for e in events] == ["llm.call"] * 3 and "[...]" in str(events[1].data)


def test_args_changed_in_place_to_an_equal_value_of_another_type_are_written_again(tmp_path: Path) -> None:
    from planbook.data.models import Status
    from planbook.engine.state import RunState

    store = SQLiteStore(tmp_path / "runs.sqlite")
    plan = _two_step_plan()
    state = RunState(plan=plan)
    run_id = store.create_run(plan, config={})
    step = plan.step("a")
    step.args["x"] = 1
    step.set_state(status=Status.in_progress)
    store.record_step(run_id, step, state)
    step.args["x"] = True  # == 1, but another value
    store.record_step(run_id, step, state)
    assert store.load_run(run_id).plan.step("a").args == {"x": True}
    assert type(store.load_run(run_id).plan.step("a").args["x"]) is bool


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_both_stores_find_a_plans_latest_run_and_name_its_plan(kind: str, tmp_path: Path) -> None:
    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "runs.sqlite")
    first = planbook.run(_two_step_plan("alpha"), tools=note_tools([]), store=store)
    planbook.run(_two_step_plan("beta"), tools=note_tools([]), store=store)
    assert first.ok
    listed = store.list_runs()
    assert [r.plan_id for r in listed] == ["beta", "alpha"]
    assert store.latest_run_id(plan_id="alpha") == listed[1].run_id
    assert store.latest_run_id(plan_id="gamma") is None
    assert store.latest_run_id() == listed[0].run_id
