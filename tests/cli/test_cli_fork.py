"""``planbook fork``, ``planbook diff`` and ``planbook runs --tree``, on a plan of two 10-step chains
and a join (a1..a10, b1..b10, join), with every tool call counted."""

from __future__ import annotations

import hashlib
import importlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from planbook.cli.app import main
from planbook.cli.forking import parse_sets

TOOLS = '''
import planbook

CALLS = []
box = planbook.Toolbox()


@box.tool
def inc(x: int) -> int:
    """One more (each call counted: the tests count what a fork runs again)."""
    CALLS.append(("inc", x))
    return x + 1


@box.tool
def join(a: int, b: int) -> int:
    """The two chains' ends added."""
    CALLS.append(("join", a, b))
    return a + b


@box.tool
def fail_if(x: int) -> int:
    """Fails on 99 (a fork that sets it regresses)."""
    CALLS.append(("fail_if", x))
    if x == 99:
        raise ValueError("x is 99")
    return x


@box.tool
def use(x: int, token: str) -> str:
    """A step with a secret-named argument."""
    CALLS.append(("use", x))
    return f"used {len(token)} characters"
'''


def chains_spec(n: int = 10) -> str:
    """Two chains of ``n`` steps (a1 = inc(0), a2 = inc($a1), ...) and a join of their ends."""
    steps: list[dict[str, Any]] = []
    for chain in "ab":
        for i in range(1, n + 1):
            steps.append({"id": f"{chain}{i}", "tool": "inc",
                          "args": {"x": 0 if i == 1 else f"${chain}{i - 1}"}})
    steps.append({"id": "join", "tool": "join", "args": {"a": f"$a{n}", "b": f"$b{n}"}})
    return json.dumps({"id": "chains", "goal": "two chains and a join", "steps": steps})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A folder with the tools module (a name of its own: imported fresh) and the plan; the module."""
    name = f"fork_tools_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(TOOLS)
    (tmp_path / "chains.json").write_text(chains_spec())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANBOOK_HOME", str(tmp_path / "home"))
    module = importlib.import_module(name)
    yield tmp_path, module
    sys.modules.pop(name, None)


def cli(project: Any, *argv: str) -> int:
    folder, module = project
    return main([*argv, "--store", str(folder / "runs.sqlite")])


def tools(project: Any) -> list[str]:
    return ["--tools", f"{project[1].__name__}:box"]


def ran(project: Any) -> Any:
    """The parent run (21 calls), then the call counter emptied."""
    assert cli(project, "run", "chains.json", *tools(project), "--plain", "--max-steps", "100") == 0
    assert len(project[1].CALLS) == 21
    project[1].CALLS.clear()


def store_rows(path: Path) -> dict[str, str]:
    """A hash of every table's rows, to show the parent's rows are never written."""
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        return {n: hashlib.sha256(repr(con.execute(f"select * from {n} order by 1").fetchall()).encode()).hexdigest()
                for n in names}
    finally:
        con.close()


def run_ids(project: Any) -> list[str]:
    import planbook

    return [r.run_id for r in planbook.runs(store=project[0] / "runs.sqlite")]


def test_a_fork_at_a1_with_a_new_x_runs_that_chain_and_the_join_only(project: Any,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    ran(project)
    parent = run_ids(project)[0]
    capsys.readouterr()
    assert cli(project, "fork", "chains", "--at", "a1", "--set", "x=5", *tools(project), "--plain") == 0
    out = capsys.readouterr().out
    calls = project[1].CALLS
    assert len(calls) == 11  # a1..a10 and the join
    assert calls[-1] == ("join", 15, 10)  # a10 = 5 + 10, b10 = 10 (kept)
    assert calls[0] == ("inc", 5)
    assert f"fork of run {parent} at a1 — x: 0 → 5; kept 10, re-running 11" in out
    assert "Result of step join:\n25" in out
    child = run_ids(project)[0]
    assert child != parent
    import planbook

    loaded = planbook.load_run(child, store=project[0] / "runs.sqlite")
    assert loaded.parent == parent and loaded.plan.step("join").result == 25
    assert all(loaded.plan.step(f"b{i}").notes.startswith("kept from run ") for i in range(1, 11))


def test_a_pinned_result_a_control_fork_and_ancestors_count_their_calls(project: Any, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ran(project)
    calls = project[1].CALLS
    (tmp_path / "pin.json").write_text("41")
    assert cli(project, "fork", "chains", "--at", "a1", "--result-json", "pin.json", *tools(project), "--plain") == 0
    assert len(calls) == 10 and all(c[0] == "join" or c[1] >= 41 for c in calls)  # a2..a10 and the join
    assert calls[-1] == ("join", 50, 10)  # a1 pinned to 41: a10 = 50
    parent = run_ids(project)[-1]  # the first run made
    calls.clear()
    assert cli(project, "fork", parent, "--at", "a5", *tools(project), "--plain") == 0
    assert len(calls) == 7  # a control fork at a5: a5..a10 and the join
    calls.clear()
    assert cli(project, "fork", parent, "--at", "a5", "--reuse", "ancestors", *tools(project), "--plain") == 0
    assert len(calls) == 17  # LangGraph's fork: everything but a1..a4 again
    out = capsys.readouterr().out
    assert "(reuse=ancestors)" in out


def test_runs_tree_puts_forks_under_their_parent(project: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ran(project)
    parent = run_ids(project)[0]
    assert cli(project, "fork", "chains", "--at", "a1", "--set", "x=5", *tools(project), "--plain") == 0
    child = run_ids(project)[0]
    assert cli(project, "fork", child, "--at", "b1", "--set", "x=2", *tools(project), "--plain") == 0
    grandchild = run_ids(project)[0]
    assert cli(project, "run", "chains.json", *tools(project), "--plain", "--max-steps", "100") == 0
    other = run_ids(project)[0]
    capsys.readouterr()
    assert cli(project, "runs", "--tree") == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    order = [next(r for r in (parent, child, grandchild, other) if r in line) for line in lines]
    assert order == [other, parent, child, grandchild]
    depth = {r: line.index(r) for r, line in zip(order, lines)}
    assert depth[other] == depth[parent] < depth[child] < depth[grandchild]


def test_the_parents_rows_are_not_written_by_a_fork_a_fork_of_a_fork_or_a_diff(project: Any) -> None:
    ran(project)
    path = project[0] / "runs.sqlite"
    parent = run_ids(project)[0]
    con = sqlite3.connect(path)
    tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    con.close()
    assert "runs" in tables

    def parent_rows() -> str:
        con = sqlite3.connect(path)
        try:
            cols = [r[1] for r in con.execute("pragma table_info(runs)")]
            key = "run_id" if "run_id" in cols else cols[0]
            return repr(con.execute(f"select * from runs where {key} = ?", (parent,)).fetchall())
        finally:
            con.close()

    before = parent_rows()
    assert cli(project, "fork", parent, "--at", "a1", "--set", "x=5", *tools(project), "--plain") == 0
    child = run_ids(project)[0]
    assert cli(project, "fork", child, "--at", "b2", "--set", "x=7", *tools(project), "--plain") == 0
    assert parent_rows() == before


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("argv, says", [
    (["fork", "nope", "--at", "a1"], "no run or plan 'nope'"),
    (["fork", "chains", "--at", "a11", "--set", "x=1"], "did you mean"),
    (["fork", "chains", "--at", "a1", "--set", "x=1", "--result-json", "pin.json"], "--set and --result-json"),
    (["fork", "chains", "--set", "x=1"], "--set changes one step: say which with --at STEP"),
    (["fork", "chains", "--at", "a1", "--set", "x"], "--set takes NAME=VALUE"),
    (["fork", "chains", "--at", "a1", "--set", "x=1", "--set", "x=2"], "given twice"),
    (["fork", "chains", "--at", "a1", "--set", "x=\"five\""], "x"),  # a str where the tool takes an int
    (["fork", "chains", "--at", "a1", "--set", "y=1"], "y"),  # an argument inc does not take
    (["fork", "chains", "--at", "a1", "--result-json", "missing.json"], "cannot read --result-json"),
    (["fork", "chains", "--at", "a1", "--reuse", "ancestors", "--set", "x=1", "--plan", "chains.json"],
     "--plan cannot go with --set"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_created(project: Any, capsys: pytest.CaptureFixture[str],
                                                          argv: list[str], says: str) -> None:
    ran(project)
    path = project[0] / "runs.sqlite"
    before = store_rows(path)
    capsys.readouterr()
    assert cli(project, *argv, *tools(project), "--plain") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and says in captured.err, captured.err
    assert store_rows(path) == before and project[1].CALLS == []


def test_result_json_refused_by_json_for_its_size_is_one_line_exit_2(project: Any,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """json.loads raises a plain ValueError (not a JSONDecodeError, which has .msg and .lineno) for an
    integer of more digits than Python converts: it is bad input like any other, not a crash."""
    ran(project)
    (project[0] / "big.json").write_text("1" * 5000)
    capsys.readouterr()
    assert cli(project, "fork", "chains", "--at", "a1", "--result-json", "big.json", *tools(project), "--plain") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "is not JSON" in err and "digits" in err, err
    assert project[1].CALLS == []


def test_no_store_at_the_path_is_one_line_and_creates_nothing(project: Any, capsys: pytest.CaptureFixture[str]) -> None:
    folder = project[0]
    for argv in (["fork", "chains", "--at", "a1"], ["diff", "a", "b"]):
        assert main([*argv, "--store", str(folder / "none" / "runs.sqlite")]) == 2
        err = capsys.readouterr().err
        assert "there is no run store at" in err and len(err.strip().splitlines()) == 1
    assert not (folder / "none").exists()


def test_set_values_are_json_when_they_parse_else_text() -> None:
    from planbook import Secret

    got = parse_sets(["n=5", "f=1.5", "t=true", "z=null", "l=[1, 2]", "s=hello", "q=\"5\"", "e=", "u=a=b",
                      'k={"$secret": "env:SOME_VAR"}'])
    assert got["n"] == 5 and got["f"] == 1.5 and got["t"] is True and got["z"] is None and got["l"] == [1, 2]
    assert got["s"] == "hello" and got["q"] == "5" and got["e"] == "" and got["u"] == "a=b"
    assert isinstance(got["k"], Secret) and got["k"].ref == "env:SOME_VAR"


# ---------------------------------------------------------------------------------- diff
def test_diff_prints_the_comparison_and_fail_on_changed_exits_1(project: Any,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    ran(project)
    parent = run_ids(project)[0]
    assert cli(project, "fork", parent, "--at", "a5", *tools(project), "--plain") == 0  # a control fork
    control = run_ids(project)[0]
    assert cli(project, "fork", parent, "--at", "a1", "--set", "x=5", *tools(project), "--plain") == 0
    edited = run_ids(project)[0]
    capsys.readouterr()
    assert cli(project, "diff", parent, control, "--fail-on", "changed") == 0  # replays the same: no change
    out = capsys.readouterr().out
    assert "identical" in out
    assert cli(project, "diff", parent, "chains", "--fail-on", "changed", "--changed-only") == 1  # chains: `edited`
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()]
    assert "first at a1" in out and "b3" not in rows and "join" in rows  # (a run id may hold "b3": rows only)
    assert cli(project, "diff", parent, edited, "--fail-on", "regressed") == 0  # changed, not worse
    capsys.readouterr()
    assert cli(project, "diff", parent, control, edited, "--json", "--changed-only") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runs"] == [parent, control, edited] and data["changed"] is True and data["regressed"] is False
    assert data["first_divergences"] == {control: None, edited: "a1"}
    assert [row["step"] for row in data["rows"]] == [f"a{i}" for i in range(1, 11)] + ["join"]
    assert data["rows"][0]["other2_call"] == "inc(x=5)" and data["rows"][0]["other1_change"] == "same"


def test_fail_on_regressed_is_a_run_that_did_not_complete_or_has_more_failed_steps(
        project: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "checks.yaml").write_text(
        "id: checks\nsteps:\n  - {id: c1, tool: fail_if, args: {x: 1}}\n  - {id: c2, tool: fail_if, args: {x: 2}}\n"
        "  - {id: c3, tool: inc, args: {x: $c2}}\n")
    assert cli(project, "run", "checks.yaml", *tools(project), "--plain") == 0
    good = run_ids(project)[0]
    assert cli(project, "fork", good, "--at", "c2", "--set", "x=99", *tools(project), "--plain") == 1
    broken = run_ids(project)[0]
    assert cli(project, "fork", broken, "--at", "c1", "--set", "x=99", *tools(project), "--plain",
               "--on-failure", "continue") == 0  # a run option given to the fork: it goes on past failures
    worse = run_ids(project)[0]
    capsys.readouterr()
    import planbook

    loaded = {r: planbook.load_run(r, store=tmp_path / "runs.sqlite") for r in (good, broken, worse)}
    failed = {r: [s.id for s in res.plan.steps if s.status.value == "failed"] for r, res in loaded.items()}
    assert failed[good] == [] and failed[broken] == ["c2"] and failed[worse][:2] == ["c1", "c2"]
    assert loaded[good].status == loaded[worse].status == "completed" and loaded[broken].status == "failed"
    assert cli(project, "diff", good, broken, "--fail-on", "regressed") == 1  # did not complete where the base did
    assert cli(project, "diff", broken, good, "--fail-on", "regressed") == 0  # it got better
    assert cli(project, "diff", broken, worse, "--fail-on", "regressed") == 1  # completed, but more failed steps
    assert cli(project, "diff", good, worse, "--fail-on", "regressed") == 1
    assert cli(project, "diff", good, worse, "--fail-on", "changed") == 1
    assert cli(project, "diff", worse, broken, "--fail-on", "regressed") == 1  # fewer failed, but did not complete
    assert cli(project, "diff", good, good, "--fail-on", "changed") == 0
    assert "identical" in capsys.readouterr().out


@pytest.mark.parametrize("argv, says", [
    (["diff", "chains", "nope"], "no run or plan 'nope'"),
    (["diff", "chains"], "two or more runs"),
    (["diff", "chainz", "chains"], "did you mean"),
])
def test_diff_bad_input_is_one_line_exit_2(project: Any, capsys: pytest.CaptureFixture[str], argv: list[str],
                                           says: str) -> None:
    ran(project)
    capsys.readouterr()
    assert cli(project, *argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err


# ---------------------------------------------------------------------------------- secrets
ECHO_TOOLS = '''
import planbook

box = planbook.Toolbox()


@box.tool
def echo_token(token: str) -> str:
    """A careless tool: it prints and returns what it was given."""
    print(f"got token {token}")
    return f"the token is {token}"


@box.tool
def shout(text: str) -> str:
    """Says a text louder (a known secret given under a name that is not secret)."""
    print(f"shouting {text}")
    return text + "!"
'''


def test_a_secret_given_to_fork_is_masked_in_every_output_and_the_store(tmp_path: Path) -> None:
    """``--set token=VALUE`` (a secret-named argument), ``--set token={"$secret": "env:VAR"}`` (a
    reference the vault learns when it is revealed) and a known secret under a plain name
    (``--set text=...`` of a value the tools module made a Secret): in no stdout, stderr or store byte."""
    import os
    import subprocess

    from canary_support import forms_of

    literal, from_env, known = "CANARYfkLt8Wq2Rz5NpX", "CANARYfkEv3Hs9Jd4KmB", "CANARYfkKn6Gc1Tb7VyQ"
    (tmp_path / "echo_tools.py").write_text(ECHO_TOOLS + f"\nplanbook.Secret({known!r}, name='fork-known')\n")
    (tmp_path / "sec.yaml").write_text("id: sec\nsteps:\n  - {id: s1, tool: echo_token, args: {token: first}}\n"
                                       "  - {id: s2, tool: shout, args: {text: hello}}\n")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{tmp_path}", "PLANBOOK_HOME": str(tmp_path),
           "FORK_CANARY_ENV": from_env}
    env.pop("PLANBOOK_OTEL", None)
    store = ["--store", str(tmp_path / "runs.sqlite")]
    outputs: list[str] = []

    def cli(*argv: str) -> int:
        done = subprocess.run([sys.executable, "-m", "planbook.cli", *argv, *store], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        outputs.extend((done.stdout, done.stderr))
        return done.returncode

    tools = ("--tools", "echo_tools:box", "--plain")
    assert cli("run", "sec.yaml", *tools) == 0
    assert cli("fork", "sec", "--at", "s1", "--set", f"token={literal}", *tools) == 0
    assert "token: *** → ***" in outputs[-2]  # a secret-named argument is hidden, old and new
    assert cli("fork", "sec", "--at", "s1", "--set", 'token={"$secret": "env:FORK_CANARY_ENV"}', *tools) == 0
    assert cli("fork", "sec", "--at", "s2", "--set", f"text={known}", *tools) == 0
    assert cli("fork", "sec", "--at", "s1", "--set", f"token={literal}", "--set", f"nope={known}", *tools) == 2
    assert cli("diff", "sec", "sec") == 0
    ids = subprocess.run([sys.executable, "-c", "import planbook,sys; print(' '.join(r.run_id for r in "
                          f"planbook.runs(store={str(tmp_path / 'runs.sqlite')!r})))"], env=env,
                         capture_output=True, text=True, timeout=60).stdout.split()
    assert len(ids) == 4
    assert cli("diff", *reversed(ids)) == 0
    assert cli("diff", *reversed(ids), "--json") == 0
    assert cli("runs", "--tree") == 0
    for run_id in ids:
        assert cli("show", run_id) == 0
    assert "got token ***" in "".join(outputs) and "shouting ***" in "".join(outputs)  # ran with the values, masked
    store_bytes = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite"))
    texts = {"stdout/stderr": "\n".join(outputs).lower(), "store": store_bytes.decode("utf-8", "replace").lower()}
    for value in (literal, from_env, known):
        for where, text in texts.items():
            for form_name, form in forms_of(value).items():
                assert form not in text, f"{value} ({form_name}) in {where}"
            assert value[6:14].lower() not in text, f"a fragment of {value} in {where}"
