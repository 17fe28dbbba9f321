"""A run store with one damaged row, and ``mcp serve --tools`` naming something that is not
tools: one line ``planbook: ...`` that names the problem and what to do, exit code 2 — never a
traceback — and the store's other runs still listed and shown."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import StoreError, StoreFormatError
from planbook.cli import main
from planbook.store import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
STORE_V2 = Path(__file__).resolve().parents[1] / "fixtures" / "store_v2.sqlite"
SPEC = "goal: sums\nsteps:\n  - {id: x, tool: add, args: {a: 1, b: 2}}\n  - {id: y, tool: add, args: {a: $x, b: 3}}\n"


def _box() -> planbook.Toolbox:
    box = planbook.Toolbox()

    @box.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return box


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """A store with three completed runs, oldest first."""
    path = tmp_path / "runs.sqlite"
    for _ in range(3):
        assert planbook.run(planbook.Plan.parse(SPEC), tools=_box(), store=path).ok
    return path


def run_ids(path: Path) -> list[str]:
    """The store's runs, oldest first (read with sqlite3 itself: the store may be damaged)."""
    con = sqlite3.connect(path)
    try:
        return [r[0] for r in con.execute("SELECT id FROM runs ORDER BY created, rowid")]
    finally:
        con.close()


def damage(path: Path, sql: str, *params: Any) -> None:
    con = sqlite3.connect(path)
    try:
        assert con.execute(sql, params).rowcount == 1
        con.commit()
    finally:
        con.close()


def damage_log_row(path: Path, run_id: str, seq: int, record: str = '{"h": [') -> None:
    """Log row number ``seq`` of the run gets ``record`` (bad JSON by default)."""
    damage(path, "UPDATE log SET record = ? WHERE id = (SELECT (log_key << 32) + ? FROM runs WHERE id = ?)",
           record, seq, run_id)


def one_line_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("planbook: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def null_config(path: Path, run_id: str) -> None:
    """A NULL config: the schema says NOT NULL, so the file's schema is edited first (what a
    hand repair, or another program, can leave behind)."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA writable_schema = ON")
        con.execute("UPDATE sqlite_master SET sql = replace(sql, 'config TEXT NOT NULL', 'config TEXT')"
                    " WHERE name = 'runs'")
        con.commit()
    finally:
        con.close()
    damage(path, "UPDATE runs SET config = NULL WHERE id = ?", run_id)


DAMAGES = {
    "config_sql_null": (null_config, "its config (runs.config)", "is NULL, not JSON text"),
    "log_row": (lambda path, run: damage_log_row(path, run, 3), "its log row 3", "is not JSON"),
    "log_row_not_an_object": (lambda path, run: damage_log_row(path, run, 2, "[1, 2]"), "its log row 2",
                              "is JSON array, not an object"),
    "plan": (lambda path, run: damage(path, "UPDATE runs SET plan = '{bad' WHERE id = ?", run),
             "its plan (runs.plan)", "is not JSON"),
    "config_null": (lambda path, run: damage(path, "UPDATE runs SET config = 'null' WHERE id = ?", run),
                    "its config (runs.config)", "is JSON null, not an object"),
    "counters": (lambda path, run: damage(path, "UPDATE runs SET counters = '[]' WHERE id = ?", run),
                 "its counters (runs.counters)", "is JSON array, not an object"),
    "revisions": (lambda path, run: damage(path, "UPDATE runs SET revisions = '{]' WHERE id = ?", run),
                  "its revisions (runs.revisions)", "is not JSON"),
    "created": (lambda path, run: damage(path, "UPDATE runs SET created = 'yesterday' WHERE id = ?", run),
                "its creation time (runs.created)", "is 'yesterday', not a number"),
    "log_key": (lambda path, run: damage(path, "UPDATE runs SET log_key = log_key + 0.5 WHERE id = ?", run),
                "its log key (runs.log_key)", "not an integer"),
    "log_row_deep": (lambda path, run: damage_log_row(path, run, 1, "[" * 200_000 + "]" * 200_000), "its log row 1",
                     "is not JSON planbook writes (it is nested too deeply to read)"),
    "log_row_fields": (lambda path, run: damage_log_row(path, run, 3, '{"h": [{"r": {"id": "x"}}]}'), "its log row 3",
                       "cannot be read (KeyError: 'v')"),
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_show_of_a_damaged_run_is_one_line_naming_the_store_the_run_and_the_damage(
        store: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    make, part, what = DAMAGES[case]
    first, middle, last = run_ids(store)
    make(store, middle)
    line = one_line_error(capsys, main(["show", middle, "--store", str(store)]))
    assert f"run {middle!r} in the run store {store} is damaged: {part}" in line and f" {what}" in line
    assert "restore the store from a backup" in line and f"delete_run({middle!r})" in line  # what to do
    for healthy in (first, last):  # nothing else is lost
        assert main(["show", healthy, "--store", str(store)]) == 0
        assert "Run completed (goal_met)" in capsys.readouterr().out
    assert main(["resume", middle, "--store", str(store)]) == 2  # the same message, for every surface
    err = capsys.readouterr().err
    assert part in err and what in err


def test_the_store_raises_a_store_error_naming_the_run_and_the_damage(store: Path) -> None:
    first, middle, last = run_ids(store)
    damage_log_row(store, middle, 3)
    reader = SQLiteStore(store, readonly=True)
    try:
        with pytest.raises(StoreFormatError) as info:
            reader.load_run(middle)
        assert isinstance(info.value, StoreError) and info.value.__cause__ is None
        assert f"run {middle!r}" in str(info.value) and "its log row 3 (log id " in str(info.value)
        assert "Expecting" in str(info.value)  # the parser's own words: where in the row it broke
        assert reader.load_run(first).plan.steps[1].result == 6  # the others read as ever
    finally:
        reader.close()
    with pytest.raises(StoreError, match="is damaged: its log row 3"):
        planbook.load_run(middle, store=store)


def test_runs_lists_the_healthy_runs_and_marks_the_damaged_ones(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, middle, last = run_ids(store)
    damage(store, "UPDATE runs SET created = 'yesterday' WHERE id = ?", first)  # used to end the listing in a traceback
    damage(store, "UPDATE runs SET plan = '{bad' WHERE id = ?", middle)
    assert main(["runs", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[1:4]}
    assert "completed (goal_met)" in rows[last] and "2/2" in rows[last]
    assert "damaged" in rows[first] and "completed" not in rows[first] and "?" in rows[first]
    assert "damaged" in rows[middle] and "sums" in rows[middle]
    notes = out.splitlines()[4:]
    assert any(f"run {first!r}" in n and "its creation time (runs.created) is 'yesterday', not a number" in n
               for n in notes), out
    assert any(f"run {middle!r}" in n and "its plan (runs.plan) is not JSON" in n for n in notes), out
    summaries = {r.run_id: r for r in planbook.runs(store)}
    assert summaries[last].damage is None and summaries[middle].damage == "its plan (runs.plan) is not JSON"


def test_runs_marks_a_run_whose_last_log_row_is_not_json(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, middle, last = run_ids(store)
    con = sqlite3.connect(store)
    (seq,) = con.execute("SELECT max(log.id) - (r.log_key << 32) FROM log, runs r WHERE r.id = ?"
                         " AND log.id BETWEEN r.log_key << 32 AND (r.log_key << 32) + 4294967295", (middle,)).fetchone()
    con.close()
    damage_log_row(store, middle, seq)
    assert main(["runs", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"run {middle!r} in the run store {store} is damaged: its last log row is not JSON" in out
    assert out.count("completed (goal_met)") == 2


def test_a_line_break_in_a_damaged_value_does_not_forge_a_row(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, middle, last = run_ids(store)
    damage(store, "UPDATE runs SET created = ? WHERE id = ?", "x\n20990101-000000-ffffff completed\x1b[31m", middle)
    damage(store, "UPDATE runs SET status = ? WHERE id = ?", "completed\n20990101-000000-eeeeee completed", last)
    assert main(["runs", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.splitlines()) == 5, out  # a header, three runs, one note


def test_a_run_with_no_log_rows_is_not_called_damaged_by_the_listing(store: Path) -> None:
    first, middle, last = run_ids(store)
    con = sqlite3.connect(store)
    con.execute("DELETE FROM log WHERE id BETWEEN (SELECT log_key << 32 FROM runs WHERE id = ?)"
                " AND (SELECT (log_key << 32) + 4294967295 FROM runs WHERE id = ?)", (middle, middle))
    con.commit()
    con.close()
    assert [r.damage for r in planbook.runs(store)] == [None, None, None]


def test_mcp_list_and_show_of_a_damaged_run(store: Path) -> None:
    from planbook.cli.mcpserve import PlanbookServer

    first, middle, last = run_ids(store)
    damage_log_row(store, middle, 3)
    damage(store, "UPDATE runs SET plan = '{bad' WHERE id = ?", first)
    app = PlanbookServer(store=str(store))
    text, _, is_error = app.call("list_runs", {})
    assert not is_error and text.count("completed (goal_met)") == 2  # the middle run's damage is not in its last row
    assert f"run {first!r} in the run store {store} is damaged: its plan (runs.plan) is not JSON" in text
    text, _, is_error = app.call("show_run", {"run_id": middle})
    assert is_error and f"run {middle!r} in the run store {store} is damaged: its log row 3" in text
    text, _, is_error = app.call("show_run", {"run_id": last})
    assert not is_error and "Run completed (goal_met)" in text


def _v2(tmp_path: Path, version: int) -> Path:
    """A copy of the version-2 store of the tests (version 1: without the columns version 2 added)."""
    path = tmp_path / "old.sqlite"
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


@pytest.mark.skipif(sqlite3.sqlite_version_info < (3, 35), reason="making a version-1 file needs ALTER TABLE DROP COLUMN")
def test_an_old_store_with_a_damaged_plan_is_listed_not_refused(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _v2(tmp_path, 1)  # version 1 reads a run's plan id out of its plan's JSON
    ids = run_ids(path)
    damage(path, "UPDATE runs SET plan = '{bad' WHERE id = ?", ids[0])
    assert main(["runs", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"run {ids[0]!r} in the run store {path} is damaged: its plan (runs.plan) is not JSON" in out
    assert sum(1 for line in out.splitlines() if line.split()[:1] in ([i] for i in ids[1:])) == 2
    assert main(["show", ids[1], "--store", str(path)]) == 0
    capsys.readouterr()


def test_an_old_store_names_its_damaged_history_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _v2(tmp_path, 2)
    con = sqlite3.connect(path)
    run_id, seq = con.execute("SELECT run_id, seq FROM history ORDER BY run_id, seq LIMIT 1").fetchone()
    con.close()
    damage(path, "UPDATE history SET record = 'nope' WHERE run_id = ? AND seq = ?", run_id, seq)
    line = one_line_error(capsys, main(["show", run_id, "--store", str(path)]))
    assert f"run {run_id!r} in the run store {path} is damaged: its history entry {seq} (table history)" in line


# ------------------------------------------------------------------ mcp serve --tools

NOT_TOOLS = '''
answer = 42
mapping = {"add": 5}
mapping_ok = {"add": lambda a, b: a + b}
'''


@pytest.fixture()
def tools_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "damaged_cli_not_tools.py").write_text(NOT_TOOLS)
    (tmp_path / "damaged_cli_broken.py").write_text("def oops(:\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


@pytest.mark.parametrize(("ref", "what"), [
    ("no_such_module_here:box", "cannot import module 'no_such_module_here'"),
    ("damaged_cli_broken:box", "importing 'damaged_cli_broken' failed: SyntaxError"),
    ("damaged_cli_not_tools:box", "module 'damaged_cli_not_tools' has no 'box'"),
    ("damaged_cli_not_tools:anser", "module 'damaged_cli_not_tools' has no 'anser'; did you mean 'answer'?"),
    ("damaged_cli_not_tools:answer", "is an int, not tools: give a Toolbox"),
    ("damaged_cli_not_tools:mapping", "a tool must be callable, got 5: give a Toolbox"),
    ("nocolon", "not module:object (e.g. mytools:toolbox)"),
])
def test_mcp_serve_with_bad_tools_is_one_line_exit_2(tools_dir: Path, capsys: pytest.CaptureFixture[str],
                                                     ref: str, what: str) -> None:
    line = one_line_error(capsys, main(["mcp", "serve", "--tools", ref]))
    assert line.startswith(f"planbook: --tools {ref}: ") and what in line, line


def test_mcp_serve_with_an_object_that_is_not_tools_exits_2_before_serving(tools_dir: Path) -> None:
    """As a process: the server must not start (it would wait on standard input) with tools it cannot use."""
    done = subprocess.run([sys.executable, "-m", "planbook.cli", "mcp", "serve", "--tools", "damaged_cli_not_tools:answer"],
                          cwd=tools_dir, env={"PYTHONPATH": f"{ROOT}:{tools_dir}", "PATH": ""},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "planbook: --tools damaged_cli_not_tools:answer: is an int, not tools: give a Toolbox, a {name: function} "
        "mapping or a list of functions"]


def test_mcp_error_answers_are_inert_text() -> None:
    """What a client's model reads may be shown on a terminal: an error echoing its input is escaped."""
    from planbook.cli.mcpserve import PlanbookServer

    text, _, is_error = PlanbookServer().call("planning", {"command": "get", "plan_id": "x\x1b]52;c;aGk=\x07y"})
    assert is_error and "\x1b" not in text and "\x07" not in text and "x\\x1b]52;c;aGk=\\x07y" in text


def test_mcp_serve_without_the_sdk_is_one_line_exit_2(tools_dir: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("mcp", "mcp.server", "mcp.server.stdio", "mcp.server.lowlevel", "mcp.types"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed: importing it fails
    line = one_line_error(capsys, main(["mcp", "serve", "--tools", "damaged_cli_not_tools:mapping_ok"]))
    assert line.startswith("planbook: mcp serve needs the MCP SDK") and "pip install 'planbook[mcp]'" in line
