"""``planbook runs``, ``show`` and ``resume`` over the run store, and ``run --store/--no-store/--cache/--no-cache``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

TOOLS = '''
import os
import planbook

box = planbook.Toolbox()


@box.tool
def add(a: int, b: int) -> int:
    """Add, and leave a mark per call (the tests count calls)."""
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(f"add {a} {b}\\n")
    if os.environ.get("STOP_AT") == f"{a} {b}":
        raise KeyboardInterrupt  # the user's Ctrl-C, at this call
    return a + b
'''

SPEC = "goal: sums\nsteps:\n  - {id: x, tool: add, args: {a: 1, b: 2}}\n  - {id: y, tool: add, args: {a: $x, b: 3}}\n"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "sum_tools.py").write_text(TOOLS)
    (tmp_path / "plan.yaml").write_text(SPEC)
    return tmp_path


def cli(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{workdir}", "CALLS_FILE": str(workdir / "calls.txt"),
               "PLANBOOK_HOME": str(workdir / "home"), **env}
    return subprocess.run([sys.executable, "-m", "planbook.cli", *args], cwd=workdir, env=environ,
                          capture_output=True, text=True, timeout=120)


def calls(workdir: Path) -> list[str]:
    path = workdir / "calls.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_runs_are_kept_listed_and_shown(workdir: Path) -> None:
    done = cli(workdir, "run", "plan.yaml", "--tools", "sum_tools:box", "--plain")
    assert done.returncode == 0, done.stderr
    assert (workdir / "home" / "runs.sqlite").exists()  # $PLANBOOK_HOME/runs.sqlite
    listed = cli(workdir, "runs")
    assert listed.returncode == 0 and "completed (goal_met)" in listed.stdout and "2/2" in listed.stdout
    assert "sums" in listed.stdout
    shown = cli(workdir, "show")
    assert shown.returncode == 0 and "y. [✓] add(" in shown.stdout and "Run completed (goal_met)" in shown.stdout


@pytest.mark.slow
def test_the_same_calls_are_reused_from_the_store_only_with_cache(workdir: Path) -> None:
    run = ("run", "plan.yaml", "--tools", "sum_tools:box", "--plain")
    assert cli(workdir, *run).returncode == 0
    assert cli(workdir, *run).returncode == 0
    assert calls(workdir) == ["add 1 2", "add 3 3"] * 2  # the cache is off by default: both runs ran
    assert cli(workdir, *run, "--cache").returncode == 0  # only a run that uses the cache fills it
    cached = cli(workdir, *run, "--cache")
    assert cached.returncode == 0 and calls(workdir) == ["add 1 2", "add 3 3"] * 3  # reused both results
    assert "cached: the result of step" in cached.stdout
    assert cli(workdir, *run, "--no-cache").returncode == 0  # accepted: the default
    assert len(calls(workdir)) == 8
    assert cli(workdir, *run, "--no-store").returncode == 0
    assert len(calls(workdir)) == 10
    assert cli(workdir, "runs").stdout.count("completed (goal_met)") == 5  # --no-store kept no record
    both = cli(workdir, *run, "--cache", "--no-cache")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    nowhere = cli(workdir, *run, "--cache", "--no-store")
    assert nowhere.returncode == 2 and "--cache reuses results stored by earlier runs" in nowhere.stderr


def test_an_interrupted_run_is_resumed_without_repeating_what_completed(workdir: Path) -> None:
    stopped = cli(workdir, "run", "plan.yaml", "--tools", "sum_tools:box", "--plain", STOP_AT="3 3")
    assert stopped.returncode == 1 and "interrupted" in stopped.stdout
    resumed = cli(workdir, "resume", "--tools", "sum_tools:box", "--plain")
    assert resumed.returncode == 0, resumed.stderr
    assert calls(workdir) == ["add 1 2", "add 3 3", "add 3 3"]  # x ran once; y, interrupted, ran again
    again = cli(workdir, "resume", "--tools", "sum_tools:box", "--plain")
    assert again.returncode == 0 and "already ended; nothing to resume" in again.stdout
    assert len(calls(workdir)) == 3


def test_store_errors_are_usage_errors_with_the_file_named(workdir: Path) -> None:
    bad = workdir / "not-a-store.sqlite"
    bad.write_bytes(b"this is not a database at all" * 100)
    before = bad.read_bytes()
    listed = cli(workdir, "runs", "--store", str(bad))
    assert listed.returncode == 2 and "not-a-store.sqlite" in listed.stderr and "Traceback" not in listed.stderr
    assert bad.read_bytes() == before
    assert cli(workdir, "run", "plan.yaml", "--tools", "sum_tools:box", "--plain").returncode == 0
    missing = cli(workdir, "show", "no-such-run")
    assert missing.returncode == 2 and "no-such-run" in missing.stderr


@pytest.mark.parametrize("command", [("runs",), ("show",), ("show", "some-run"), ("resume",)])
def test_reading_a_store_that_is_not_there_says_so_and_creates_nothing(workdir: Path, command: tuple[str, ...]) -> None:
    gone = workdir / "nowhere" / "runs.sqlite"
    for args in ([*command, "--store", str(gone)], list(command)):  # a given path, and the default store
        shown = cli(workdir, *args)
        assert shown.returncode == 2, shown
        assert "no run store at" in shown.stderr and "Traceback" not in shown.stderr
        assert len(shown.stderr.strip().splitlines()) == 1
    assert not (workdir / "nowhere").exists() and not (workdir / "home").exists()


def _under_a_file(workdir: Path) -> str:
    (workdir / "afile").write_text("x")
    return str(workdir / "afile" / "runs.sqlite")


def _a_directory(workdir: Path) -> str:
    (workdir / "adir").mkdir()
    return str(workdir / "adir")


def _not_a_store(workdir: Path) -> str:
    (workdir / "notes.txt").write_text("my notes, not a database\n" * 50)
    return str(workdir / "notes.txt")


@pytest.mark.parametrize("where", [_under_a_file, _a_directory, _not_a_store])
def test_run_with_an_unusable_store_is_one_line_and_exit_2(workdir: Path, where: Any) -> None:
    store = where(workdir)
    done = cli(workdir, "run", "plan.yaml", "--tools", "sum_tools:box", "--plain", "--store", store)
    assert done.returncode == 2, done
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("planbook: ") and os.path.basename(store.rstrip("/")) in line
    assert calls(workdir) == []  # nothing ran


def test_a_tilde_in_store_is_the_home_folder(workdir: Path) -> None:
    home = workdir / "userhome"
    home.mkdir()
    done = cli(workdir, "run", "plan.yaml", "--tools", "sum_tools:box", "--plain", "--store", "~/kept/runs.sqlite",
               HOME=str(home))
    assert done.returncode == 0, done.stderr
    assert (home / "kept" / "runs.sqlite").exists() and not (workdir / "~").exists()
    listed = cli(workdir, "runs", "--store", "~/kept/runs.sqlite", HOME=str(home))
    assert listed.returncode == 0 and "completed" in listed.stdout


KILLED = '''
import os
import signal
import planbook

box = planbook.Toolbox()


@box.tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@box.tool(idempotent=False)
def pay(amount: int) -> str:
    """Pay: twice would pay twice."""
    with open(os.environ["CALLS_FILE"], "a") as f:
        f.write(f"pay {amount}\\n")
    if os.environ.get("DIE_IN_PAY"):
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies in the call: did the payment go out?
    return f"paid {amount}"
'''


def test_resume_asks_before_calling_a_non_idempotent_tool_again(workdir: Path) -> None:
    """The step in progress at a crash uses an idempotent=False tool: resume refuses (it is not
    "a run that already ended"), names the step and --rerun; --rerun runs it."""
    (workdir / "pay_tools.py").write_text(KILLED)
    (workdir / "pay.yaml").write_text("goal: pay\nsteps:\n  - {id: x, tool: add, args: {a: 1, b: 2}}\n"
                                      "  - {id: p, tool: pay, args: {amount: $x}}\n")
    killed = cli(workdir, "run", "pay.yaml", "--tools", "pay_tools:box", "--plain", DIE_IN_PAY="1")
    assert killed.returncode == -9
    asked = cli(workdir, "resume", "--tools", "pay_tools:box", "--plain")
    assert asked.returncode == 2, asked.stdout
    assert "already ended" not in asked.stdout
    assert "step 'p' was running" in asked.stderr and "idempotent=False" in asked.stderr
    assert "planbook resume --rerun p" in asked.stderr
    assert calls(workdir) == ["pay 3"]
    rerun = cli(workdir, "resume", "--tools", "pay_tools:box", "--plain", "--rerun", "p")
    assert rerun.returncode == 0, rerun.stderr
    assert calls(workdir) == ["pay 3", "pay 3"]


def test_resume_takes_secret_args_again_from_the_plan_file(workdir: Path) -> None:
    """A secret arg is never stored: ``planbook resume --plan FILE`` gives it back; without it,
    the error says how."""
    (workdir / "key_tools.py").write_text(TOOLS + '''

@box.tool
def fetch(n: int, api_key: str) -> int:
    """Fetch with a key."""
    assert api_key == "sk-test-123", api_key
    return n
''')
    spec = ("goal: keyed\nsteps:\n  - {id: x, tool: add, args: {a: 1, b: 2}}\n"
            "  - {id: y, tool: fetch, args: {n: $x, api_key: sk-test-123}}\n")
    (workdir / "keyed.yaml").write_text(spec)
    stopped = cli(workdir, "run", "keyed.yaml", "--tools", "key_tools:box", "--plain", STOP_AT="1 2")
    assert stopped.returncode == 1
    assert b"sk-test-123" not in (workdir / "home" / "runs.sqlite").read_bytes()
    lacking = cli(workdir, "resume", "--tools", "key_tools:box", "--plain")
    assert lacking.returncode == 2 and "y: api_key" in lacking.stderr and "--plan" in lacking.stderr
    resumed = cli(workdir, "resume", "--tools", "key_tools:box", "--plain", "--plan", "keyed.yaml")
    assert resumed.returncode == 0, resumed.stderr
    assert "Run completed (goal_met)" in resumed.stdout
