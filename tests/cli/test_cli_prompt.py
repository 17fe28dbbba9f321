"""``planbook run --approve``: the [a]pprove [s]kip [e]dit [q]uit prompt on a real terminal (a pty),
and a clear error when standard input is not a terminal."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pty")

from terminal_support import Terminal, _env  # noqa: E402

TOOLS = '''
import planbook

tools = planbook.Toolbox()
sent = []


@tools.tool
def draft(to: str) -> str:
    return f"dear {to}"


@tools.tool(approve=True)
def send(text: str, to: str) -> str:
    print(f"SENT {text!r} TO {to}")
    return f"sent to {to}"
'''

PLAN = """
goal: send a note
steps:
  - {id: draft, tool: draft, args: {to: bob}}
  - {id: send, tool: send, args: {text: $draft, to: bob}, needs: [draft]}
"""


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "mailtools.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "plan.yaml").write_text(PLAN, encoding="utf-8")
    return tmp_path


@pytest.fixture(autouse=True)
def _close_terminals() -> Iterator[None]:
    yield
    while Terminal.opened:
        Terminal.opened.pop().close()


def test_edit_refused_then_accepted_at_the_prompt(workdir: Path) -> None:
    term = Terminal(workdir)
    term.expect("step send waits for approval: send(")
    term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
    term.type("e")
    term.expect("new arguments as JSON")
    term.type('{"text": "$draft", "to": 5}')
    term.expect("argument 'to' of tool 'send' expects str")
    term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
    term.type("e")
    term.expect("new arguments as JSON")
    term.type('{"text": "$draft", "to": "alice"}')
    assert term.finish() == 0, term.text
    assert "SENT 'dear bob' TO alice" in term.text
    assert "Edited by you (cli): " in term.text and "Replanned" not in term.text  # a person's edit, not a replan


def test_quit_stops_the_run(workdir: Path) -> None:
    term = Terminal(workdir, "--approve", "draft")
    term.expect("step draft waits for approval")
    term.type("a")
    term.expect("step send waits for approval")
    term.type("q")
    assert term.finish() == 1, term.text
    assert "aborted" in term.text and "stopped by you (cli) at step send: quit at the prompt" in term.text
    assert "SENT" not in term.text


def test_skip_at_the_prompt(workdir: Path) -> None:
    term = Terminal(workdir)
    term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
    term.type("s")
    term.expect("why (optional)? ")
    term.type("not today")
    assert term.finish() == 0, term.text
    assert "skipped by you (cli): not today" in term.text and "SENT" not in term.text


def test_without_a_terminal_it_says_so_before_anything_runs(workdir: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "planbook.cli", "run", "plan.yaml", "--tools", "mailtools:tools",
                           "--no-store"], cwd=workdir, env=_env(workdir), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "step 'send' waits for approval, and standard input is not a terminal" in proc.stderr
    assert "SENT" not in proc.stdout


def test_resuming_a_run_that_was_waiting_asks_again_on_the_terminal(workdir: Path) -> None:
    import shutil
    import sqlite3

    env = _env(workdir)
    store, crashed = workdir / "runs.sqlite", workdir / "crashed.sqlite"
    code = ("import sys, sqlite3, planbook, mailtools\n"
            "h = planbook.start(open('plan.yaml').read(), tools=mailtools.tools, view=False, store='runs.sqlite')\n"
            "h.wait_for_approval(60)\n"
            "with sqlite3.connect('runs.sqlite') as src, sqlite3.connect('crashed.sqlite') as dst:\n"
            "    src.backup(dst)\n"
            "h.stop(); h.wait(60)\n")
    subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, check=True, timeout=120)
    assert store.exists() and crashed.exists()
    shutil.copy(crashed, workdir / "again.sqlite")
    with sqlite3.connect(crashed) as db:  # the store as the crash left it: the run waits for approval
        assert db.execute("SELECT status, reason FROM runs").fetchall() == [("running", "waiting")]
    proc = subprocess.run([sys.executable, "-m", "planbook.cli", "resume", "--store", "crashed.sqlite", "--tools",
                           "mailtools:tools", "--force"], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "step 'send' waits for approval, and standard input is not a terminal" in proc.stderr
    terminal = Terminal(workdir, command=["resume", "--store", "again.sqlite", "--tools", "mailtools:tools", "--force"])
    terminal.expect("step send waits for approval")
    terminal.type("a")
    assert terminal.finish() == 0, terminal.text
    assert "SENT 'dear bob' TO bob" in terminal.text


URL_TOOLS = '''
import planbook

tools = planbook.Toolbox()


@tools.tool(approve=True)
def fetch(url: str) -> str:
    ok = url == "https://ada:s3cret-pass-99@example.test/b"
    print("FETCHED WITH THE REAL CREDENTIALS" if ok else f"FETCHED {url.replace(chr(42), '+')}")
    return "ok"
'''

URL_PLAN = """
goal: fetch a page
steps:
  - {id: fetch, tool: fetch, args: {url: "https://ada:s3cret-pass-99@example.test/a"}}
"""


def test_an_edit_that_moves_a_hidden_secret_is_refused_at_the_prompt_then_one_that_keeps_it_runs(
        tmp_path: Path) -> None:
    """The prompt asked the gate to keep the secrets outside its ``try``: an edit whose ``***``
    no longer matched the hidden parts raised out of the prompt and ended the command."""
    (tmp_path / "mailtools.py").write_text(URL_TOOLS, encoding="utf-8")
    (tmp_path / "plan.yaml").write_text(URL_PLAN, encoding="utf-8")
    term = Terminal(tmp_path)
    term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
    term.type("e")
    term.expect("new arguments as JSON")
    term.type('{"url": "https://***@***/b"}')
    term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
    term.type("e")
    term.expect("new arguments as JSON")
    term.type('{"url": "https://***@example.test/b"}')
    assert term.finish() == 0, term.text
    assert "FETCHED WITH THE REAL CREDENTIALS" in term.text
    assert "s3cret-pass-99" not in term.text
