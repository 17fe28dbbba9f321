"""A resume claims its run before anything runs: a second process (or a second resume at
once) stops with a clear ResumeError while the first writes it; a dead writer is taken
over; ``planbook runs`` shows such a run as ``stopped (writer gone)``; ``--force`` takes
over a run whose writer cannot be checked from here. Real processes, waiting on files."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import planbook
from helpers import note_tools
from planbook import Plan, ResumeError, RunClaimed, Step
from planbook.data.errors import this_host

ROOT = Path(__file__).resolve().parents[2]
#: a generous bound for a busy machine; the tests wait on files, never on the clock
PATIENCE = 120.0

TOOLS = '''
import os
import sys

import planbook

box = planbook.Toolbox()


def _log(line):
    with open(os.environ["CALLS_FILE"], "a") as f:  # one short O_APPEND write: whole lines
        f.write(f"{line} {os.getpid()}\\n")


@box.tool(cache=False)
def add(a: int, b: int) -> int:
    """Add, and log the call."""
    _log(f"add-{a}-{b}")
    if os.environ.get("STOP_AT") == f"{a} {b}":
        raise KeyboardInterrupt  # the user's Ctrl-C, at this call
    return a + b


@box.tool(cache=False)
def hold(x: int) -> int:
    """Log, then wait for standard input to close when $HOLD is set (the test holds the writer)."""
    _log("hold")
    if os.environ.get("HOLD"):
        sys.stdin.read()
    return x
'''

SPEC = ("goal: held\nsteps:\n  - {id: a, tool: add, args: {a: 1, b: 2}}\n  - {id: b, tool: add, args: {a: $a, b: 3}}\n"
        "  - {id: h, tool: hold, args: {x: $b}}\n")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "held_tools.py").write_text(TOOLS)
    (tmp_path / "plan.yaml").write_text(SPEC)
    return tmp_path


def _env(workdir: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{workdir}", "CALLS_FILE": str(workdir / "calls.txt"),
           "PLANBOOK_HOME": str(workdir / "home"), **extra}
    for name in ("HOLD", "STOP_AT"):
        if name not in extra:
            env.pop(name, None)
    return env


def cli(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "planbook.cli", *args], cwd=workdir, env=_env(workdir, **env),
                          capture_output=True, text=True, timeout=PATIENCE)


def start(workdir: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "planbook.cli", *args], cwd=workdir, env=_env(workdir, **env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def calls(workdir: Path) -> list[str]:
    path = workdir / "calls.txt"
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def wait_for_call(workdir: Path, name: str, proc: subprocess.Popen[str]) -> None:
    """Until the held process has logged the call ``name`` (it then waits on its stdin)."""
    deadline = time.monotonic() + PATIENCE
    while name not in calls(workdir):
        if proc.poll() is not None:
            pytest.fail(f"the process ended before its call {name}: {proc.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no call {name} within {PATIENCE:g} s")
        time.sleep(0.01)  # a poll interval, not a synchronisation


def interrupted_run(workdir: Path) -> None:
    """A run stopped by Ctrl-C at step b: a and nothing else completed."""
    stopped = cli(workdir, "run", "plan.yaml", "--tools", "held_tools:box", "--plain", STOP_AT="3 3")
    assert stopped.returncode == 1, stopped.stderr
    assert calls(workdir) == ["add-1-2", "add-3-3"]


@pytest.mark.parametrize("first", ["run", "resume"])
def test_a_second_resume_stops_before_running_anything_while_the_writer_lives(workdir: Path, first: str) -> None:
    if first == "resume":  # the first writer is itself a resume of an interrupted run
        interrupted_run(workdir)
        writer = start(workdir, "resume", "--tools", "held_tools:box", "--plain", HOLD="1")
    else:
        writer = start(workdir, "run", "plan.yaml", "--tools", "held_tools:box", "--plain", HOLD="1")
    try:
        wait_for_call(workdir, "hold", writer)
        before = calls(workdir)
        second = cli(workdir, "resume", "--tools", "held_tools:box", "--plain")
        assert second.returncode == 2, second
        [line] = second.stderr.strip().splitlines()
        assert f"is being written by process {writer.pid} on host {this_host()} since " in line
        assert line.endswith("wait for it, or pass --force if that process is gone (force=True in Python)")
        assert "Traceback" not in second.stderr
        assert calls(workdir) == before  # it ran nothing
        listed = cli(workdir, "runs")
        assert "running" in listed.stdout and "writer gone" not in listed.stdout
    finally:
        out, err = writer.communicate(input="", timeout=PATIENCE)  # its stdin closes: the held call returns
    assert writer.returncode == 0, err
    assert calls(workdir).count("hold") == 1
    [run] = planbook.runs(workdir / "home" / "runs.sqlite")
    assert (run.status, run.steps_done) == ("completed", 3)


def test_a_dead_writer_is_shown_as_gone_and_its_run_taken_over(workdir: Path) -> None:
    writer = start(workdir, "run", "plan.yaml", "--tools", "held_tools:box", "--plain", HOLD="1")
    try:
        wait_for_call(workdir, "hold", writer)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=PATIENCE)  # reaped: its pid is gone
    listed = cli(workdir, "runs")
    assert listed.returncode == 0 and "stopped (writer gone)" in listed.stdout, listed.stdout
    [run] = planbook.runs(workdir / "home" / "runs.sqlite")
    assert run.status == "running" and run.writer_gone and run.writer_pid == writer.pid
    resumed = cli(workdir, "resume", "--tools", "held_tools:box", "--plain")
    assert resumed.returncode == 0, resumed.stderr
    assert calls(workdir) == ["add-1-2", "add-3-3", "hold", "hold"]  # a and b were not run again
    [run] = planbook.runs(workdir / "home" / "runs.sqlite")
    assert (run.status, run.writer_gone, run.writer_host) == ("completed", False, this_host())


def _written_elsewhere(store: Path, host: str, pid: int) -> None:
    """What the store holds while a process on another machine writes the run."""
    con = sqlite3.connect(store)
    con.execute("UPDATE runs SET status = 'running', writer_pid = ?, writer_host = ?, writer_since = ?",
                (pid, host, time.time()))
    con.commit()
    con.close()


def test_a_writer_on_another_host_cannot_be_checked_so_only_force_takes_over(workdir: Path) -> None:
    interrupted_run(workdir)
    store = workdir / "home" / "runs.sqlite"
    _written_elsewhere(store, "elsewhere.example", 4242)
    refused = cli(workdir, "resume", "--tools", "held_tools:box", "--plain")
    assert refused.returncode == 2 and "by process 4242 on host elsewhere.example" in refused.stderr
    assert "stopped (writer gone)" not in cli(workdir, "runs").stdout
    forced = cli(workdir, "resume", "--tools", "held_tools:box", "--plain", "--force")
    assert forced.returncode == 0, forced.stderr
    assert calls(workdir) == ["add-1-2", "add-3-3", "add-3-3", "hold"]



def test_resume_in_python_is_refused_then_forced(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    plan = Plan(id="p", goal="g", steps=[Step(id="a", tool="note", args={"x": "a"}),
                                         Step(id="b", tool="note", args={"x": "b"})])
    paused = planbook.Runner(plan, tools=note_tools(seen), store=store).run(until="a")
    assert paused.status == "paused"
    _written_elsewhere(store, this_host(), os.getppid())  # a live process on this host writes it
    with pytest.raises(ResumeError, match=rf"is being written by process {os.getppid()} on host "):
        planbook.resume(store=store, tools=note_tools(seen))
    assert seen == ["a"]
    result = planbook.resume(store=store, tools=note_tools(seen), force=True)
    assert result.ok and seen == ["a", "b"]


def test_a_paused_run_taken_over_meanwhile_stops_before_running_anything(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    plan = Plan(id="p", goal="g", steps=[Step(id="a", tool="note", args={"x": "a"}),
                                         Step(id="b", tool="note", args={"x": "b"})])
    runner = planbook.Runner(plan, tools=note_tools(seen), store=store)
    assert runner.run(until="a").status == "paused"
    _written_elsewhere(store, this_host(), os.getppid())  # another live process resumed it meanwhile
    with pytest.raises(RunClaimed, match=rf"is being written by process {os.getppid()}"):
        runner.run()
    assert seen == ["a"]


def test_a_resume_that_finds_the_run_changed_since_it_loaded_it_stops(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    plan = Plan(id="p", goal="g", steps=[Step(id="a", tool="note", args={"x": "a"}),
                                         Step(id="b", tool="note", args={"x": "b"})])
    planbook.Runner(plan, tools=note_tools(seen), store=store).run(until="a")
    from planbook.store.sqlite import SQLiteStore

    opened = SQLiteStore(store)
    loaded = opened.load_run(opened.latest_run_id() or "")
    con = sqlite3.connect(store)
    con.execute("UPDATE runs SET updated = updated + 1")  # another process wrote it since
    con.commit()
    con.close()
    with pytest.raises(RunClaimed, match="meanwhile .* out of date: resume it again"):
        opened.claim_run(loaded.run_id, updated=loaded.updated)


def test_a_paused_run_resumed_elsewhere_meanwhile_is_not_continued_from_a_stale_state(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    plan = Plan(id="p", goal="g", steps=[Step(id="a", tool="note", args={"x": "a"}),
                                         Step(id="b", tool="note", args={"x": "b"}),
                                         Step(id="c", tool="note", args={"x": "c"})])
    runner = planbook.Runner(plan, tools=note_tools(seen), store=store)
    assert runner.run(until="a").status == "paused"
    # another process resumed it, ran b, and was interrupted (its writer is gone now)
    child = subprocess.run([sys.executable, "-c", (
        "import planbook, sys\n"
        "box = planbook.Toolbox()\n"
        "@box.tool(cache=False)\n"
        "def note(x: str) -> str:\n"
        "    if x == 'c':\n"
        "        raise KeyboardInterrupt\n"
        "    return x\n"
        f"print(planbook.resume(store={str(store)!r}, tools=box).status)\n")],
        capture_output=True, text=True, timeout=PATIENCE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout.strip() == "interrupted", child.stderr
    with pytest.raises(RunClaimed, match=r"was written by process \d+ on host .* meanwhile \(it is interrupted now\)"):
        runner.run()
    assert seen == ["a"]


def test_run_plan_resume_is_refused_while_another_process_writes_and_force_takes_over(ip: Any, tmp_path: Path) -> None:
    from IPython.core.error import UsageError

    store, seen = tmp_path / "runs.sqlite", []
    ip.user_ns["claim_box"] = note_tools(seen)
    ip.run_cell_magic("plan", "claimed --tools claim_box", "steps:\n  - {id: a, tool: note, args: {x: a}}\n"
                      "  - {id: b, tool: note, args: {x: b}}\n")
    planbook.Runner(ip.user_ns["claimed"].copy_plan(), tools=note_tools(seen), store=store).run(until="a")
    _written_elsewhere(store, this_host(), os.getppid())
    try:
        ip.run_line_magic("plan_store", str(store))
        with pytest.raises(UsageError, match=rf"is being written by process {os.getppid()} .* pass --force"):
            ip.run_line_magic("run_plan", "claimed --resume --no-view")
        with pytest.raises(UsageError, match="--force goes with --resume"):
            ip.run_line_magic("run_plan", "claimed --force --no-view")
        assert seen == ["a"]
        result = ip.run_line_magic("run_plan", "claimed --resume --force --no-view")
    finally:
        ip.run_line_magic("plan_store", "default")
    assert result.ok and seen == ["a", "b"]
