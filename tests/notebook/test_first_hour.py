"""The first hour of a new user (issue 27): a restarted kernel, a click on an ended run,
the command line's live table and approval prompt, MCP errors, the course's words."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

import planbook
import planbook.mcp
from helpers import Kernel
from planbook import Plan, Toolbox
from planbook.notebook.magics import magics_of

CHAIN = """\
steps:
  - {id: a, tool: tick, args: {label: a}}
  - {id: b, tool: tick, args: {label: b}}
  - {id: c, tool: tick, args: {label: c}}
"""


class Ticks:
    """A tool that records its calls and is interrupted (as by the kernel's button) when told."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stop_at: set[str] = set()
        self.tools = Toolbox()

        @self.tools.tool
        def tick(label: str) -> str:
            """Tick."""
            self.calls.append(label)
            if label in self.stop_at:
                self.stop_at.discard(label)
                raise KeyboardInterrupt
            return label


# ------------------------------------------------------------------ after a kernel restart
def _stored_unfinished_run(ip: Any, name: str) -> Ticks:
    """A run of plan NAME interrupted at step b and kept in the notebook's store, by another
    runner than this kernel's magics: what the store holds after a kernel restart."""
    from planbook.store import default_store_path

    ticks = Ticks()
    ip.user_ns["ticks"] = ticks.tools
    ip.run_cell_magic("plan", f"{name} --tools ticks", CHAIN)
    ticks.stop_at.add("b")
    result = planbook.run(Plan.parse(CHAIN, id=name), tools=ticks.tools, store=str(default_store_path()))
    assert result.status == "interrupted"
    magics = magics_of(ip)
    assert magics is not None and name not in magics.runs  # this kernel has no run of NAME
    ticks.calls.clear()
    return ticks


def test_a_run_over_an_unfinished_stored_run_is_refused_and_says_how_to_continue(ip: Any) -> None:
    ticks = _stored_unfinished_run(ip, "chain27")
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("run_plan", "chain27 --no-view")
    message = str(info.value)
    assert "plan 'chain27' has an unfinished run in the store" in message
    assert "interrupted, 1/3 steps completed" in message
    assert "%run_plan chain27 --resume continues it" in message
    assert "%run_plan chain27 --restart starts a new run" in message
    assert ticks.calls == []  # refused before anything ran
    resumed = ip.run_line_magic("run_plan", "chain27 --resume --no-view")
    assert resumed.status == "completed" and ticks.calls == ["b", "c"]  # a was not run again


def test_restart_starts_over_when_asked(ip: Any) -> None:
    ticks = _stored_unfinished_run(ip, "chain27r")
    result = ip.run_line_magic("run_plan", "chain27r --restart --no-view")
    assert result.status == "completed" and ticks.calls == ["a", "b", "c"]
    again = ip.run_line_magic("run_plan", "chain27r --no-view")  # this kernel's run ended: a new run
    assert again.status == "completed" and ticks.calls == ["a", "b", "c"] * 2


def test_background_over_an_unfinished_stored_run_is_refused_too_and_can_resume_or_restart(ip: Any) -> None:
    """--background follows the foreground's rule (one owner: _refuse_over_stored), and says
    the commands that work in the background: --resume --background, --restart --background."""
    from planbook.store import default_store_path

    ticks = _stored_unfinished_run(ip, "bgchain27")
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("run_plan", "bgchain27 --background --no-view")
    message = str(info.value)
    assert "plan 'bgchain27' has an unfinished run in the store" in message
    assert "%run_plan bgchain27 --resume --background continues it" in message
    assert "%run_plan bgchain27 --restart --background starts a new run" in message
    assert ticks.calls == []  # refused before anything ran
    resumed = ip.run_line_magic("run_plan", "bgchain27 --resume --background --no-view").wait(timeout=60)
    assert resumed.status == "completed" and ticks.calls == ["b", "c"]  # a was not run again
    ticks.stop_at.add("b")  # leave an unfinished run again, then start over in the background
    stopped = planbook.run(Plan.parse(CHAIN, id="bgchain27"), tools=ticks.tools, store=str(default_store_path()))
    assert stopped.status == "interrupted"
    ticks.calls.clear()
    again = ip.run_line_magic("run_plan", "bgchain27 --restart --background --no-view").wait(timeout=60)
    assert again.status == "completed" and ticks.calls == ["a", "b", "c"]


def test_a_finished_stored_run_does_not_stop_a_new_run(ip: Any) -> None:
    from planbook.store import default_store_path

    ticks = Ticks()
    ip.user_ns["ticks"] = ticks.tools
    ip.run_cell_magic("plan", "done27 --tools ticks", CHAIN)
    planbook.run(Plan.parse(CHAIN, id="done27"), tools=ticks.tools, store=str(default_store_path()))
    assert ip.run_line_magic("run_plan", "done27 --no-view").status == "completed"


def test_the_interrupt_says_what_to_do_after_a_restart(ip: Any) -> None:
    ticks = Ticks()
    ip.user_ns["ticks"] = ticks.tools
    ip.run_cell_magic("plan", "cut27 --tools ticks", CHAIN)
    ticks.stop_at.add("b")
    with pytest.raises(KeyboardInterrupt) as info:
        ip.run_line_magic("run_plan", "cut27 --no-view")
    assert "(after a kernel restart: %run_plan cut27 --resume)" in str(info.value)
    ip.run_line_magic("plan_store", ":memory:")
    try:
        ticks.stop_at.add("b")
        with pytest.raises(KeyboardInterrupt) as info:
            ip.run_line_magic("run_plan", "cut27 --no-view --restart")
        assert "--resume" not in str(info.value) and "a kernel restart loses it" in str(info.value)
    finally:
        ip.run_line_magic("plan_store", "default")


RESTART_SETUP = """\
%load_ext planbook
import time, planbook
ran = []
@planbook.tool
def inc(x: int) -> int:
    "Add one."
    ran.append(x)
    return x + 1
@planbook.tool
def nap(seconds: float) -> str:
    "Sleep: the kernel's interrupt arrives here."
    import sys
    print("napping", file=sys.stderr, flush=True)
    time.sleep(seconds)
    return "rested"
"""
NAPS = ('%%plan naps\nsteps:\n  - {id: 1, tool: inc, args: {x: 1}}\n  - {id: 2, tool: nap, args: {seconds: 30}}\n'
        "  - {id: 3, tool: inc, args: {x: 3}}\n")


def test_in_a_real_kernel_a_restart_does_not_start_the_run_over(tmp_path: Any) -> None:
    """The interrupt names --resume; after a restart, %run_plan NAME refuses (nothing runs)
    and --resume finishes the run without running step 1 again."""
    kernel = Kernel()  # PLANBOOK_HOME is this test's own folder (conftest): the store is there
    try:
        for code in (RESTART_SETUP, NAPS):
            reply, _ = kernel.execute(code)
            assert reply["status"] == "ok", reply
        reply, messages = kernel.execute("%run_plan naps --no-view", interrupt_when="napping")
        assert reply.get("ename") == "RunInterrupted", reply
        (error,) = [m for m in messages if m["msg_type"] == "error"]
        assert error["content"]["traceback"] == [
            "RunInterrupted: plan 'naps' was interrupted (1/3 steps completed); run %run_plan naps to continue it "
            "(after a kernel restart: %run_plan naps --resume), or %run_plan naps --restart to start again"
        ]
        kernel.km.restart_kernel(now=True)
        kernel.kc.wait_for_ready(timeout=120)
        for code in (RESTART_SETUP.replace("seconds: float", "seconds: float = 0").replace("time.sleep(seconds)", ""),
                     NAPS):
            reply, _ = kernel.execute(code)
            assert reply["status"] == "ok", reply
        reply, messages = kernel.execute("%run_plan naps --no-view")
        assert (reply["status"], reply.get("ename")) == ("error", "UsageError"), reply  # "run all" stops here
        said = "".join(m["content"].get("text", "") + "".join(m["content"].get("traceback", []))
                       for m in messages if m["msg_type"] in ("stream", "error"))
        assert "plan 'naps' has an unfinished run in the store" in said and "%run_plan naps --resume" in said, said
        reply, messages = kernel.execute("ran")
        (value,) = [m for m in messages if m["msg_type"] == "execute_result"]
        assert value["content"]["data"]["text/plain"] == "[]"  # nothing ran
        reply, messages = kernel.execute("r = %run_plan naps --resume --no-view\nr.status, ran, r.outputs['2']")
        assert reply["status"] == "ok", reply
        (value,) = [m for m in messages if m["msg_type"] == "execute_result"]
        assert value["content"]["data"]["text/plain"] == "('completed', [3], 'rested')"
    finally:
        kernel.close()


# ------------------------------------------------------------------ the command line
CLI_TOOLS = '''
import planbook
import planbook.mcp

tools = planbook.Toolbox()


@tools.tool
def add(a: int, b: int) -> int:
    return a + b


@tools.tool
def login(user: str) -> str:
    return "tok-" + "9f8e7d6c5b4a"


@tools.tool(approve=True)
def publish(value: int) -> str:
    print(f"PUBLISHED {value}")
    return f"published {value}"


@tools.tool(approve=True)
def connect(user: str, api_key: str) -> str:
    return f"connected {user}"
'''


@pytest.fixture()
def cli_dir(tmp_path: Any) -> Any:
    (tmp_path / "pubtools.py").write_text(CLI_TOOLS, encoding="utf-8")
    (tmp_path / "sums.yaml").write_text(
        "steps:\n  - {id: sum, tool: add, args: {a: 40, b: 2}}\n  - {id: twice, tool: add, args: {a: $sum, b: $sum}}\n",
        encoding="utf-8")
    (tmp_path / "publish.yaml").write_text(
        "steps:\n  - {id: sum, tool: add, args: {a: 40, b: 2}}\n  - {id: pub, tool: publish, args: {value: $sum}}\n"
        "  - {id: key, tool: login, args: {user: ann}}\n"
        "  - {id: con, tool: connect, args: {user: ann, api_key: $key}}\n",
        encoding="utf-8")
    return tmp_path


def _terminal(cli_dir: Any, plan: str) -> Any:
    from terminal_support import Terminal

    return Terminal(cli_dir, command=["run", plan, "--tools", "pubtools:tools", "--no-store"])


def test_the_live_table_stays_on_when_an_unused_tool_would_ask(cli_dir: Any) -> None:
    """A toolbox with an approve=True tool the plan does not use: the table is drawn (it was
    off, and the terminal stayed blank until the end)."""
    term = _terminal(cli_dir, "sums.yaml")
    try:
        term.expect("Run completed")
        assert term.finish() == 0, term.text
    finally:
        term.close()
    assert "tool/agent" in term.text and "0/2 completed · steps" in term.text, term.text  # the table, mid-run
    assert "Plan: " not in term.text, term.text  # not the plain text view printed at the end


def test_the_prompt_shows_the_values_a_step_will_get_and_hides_secrets(cli_dir: Any) -> None:
    term = _terminal(cli_dir, "publish.yaml")
    try:
        term.expect("step pub waits for approval: publish(value=42)")
        term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
        term.type("a")
        term.expect("step con waits for approval: connect(")
        term.expect("[a]pprove [s]kip [e]dit [q]uit? ")
        term.type("a")
        assert term.finish() == 0, term.text
    finally:
        term.close()
    assert 'connect(user="ann", api_key=***)' in term.text, term.text
    assert "9f8e7d6c5b4a" not in term.text, term.text  # the key a step made never reaches the terminal
    assert "PUBLISHED 42" in term.text and "tool/agent" in term.text, term.text


# ------------------------------------------------------------------ MCP errors
def test_a_missing_mcp_server_is_one_line_that_says_how_to_install_it(ip: Any, capsys: Any,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Any) -> None:
    pytest.importorskip("mcp")
    from planbook import MCPError, MCPServerNotFound

    # a server the index has under its command's name, and that is not installed here
    monkeypatch.setitem(MCPServerNotFound.KNOWN, "mcp-server-nowhere27", "mcp-server-nowhere27")
    monkeypatch.setattr(MCPServerNotFound, "TUTORIALS", frozenset({"mcp-server-nowhere27"}))
    result = ip.run_cell('%plan_tools clock27 --mcp "mcp-server-nowhere27 --local-timezone UTC"')
    error = result.error_in_exec
    assert isinstance(error, MCPServerNotFound) and isinstance(error, MCPError)
    out = capsys.readouterr()
    shown = (out.out + out.err).strip().splitlines()
    assert shown == [
        "MCPServerNotFound: the MCP server mcp-server-nowhere27 --local-timezone UTC is not installed here (no "
        "command 'mcp-server-nowhere27' on PATH): pip install mcp-server-nowhere27 (or pip install "
        "\"planbook[tutorials]\", which has it)"
    ], shown
    with pytest.raises(MCPServerNotFound, match=r"no command 'my-own-server' on PATH\): install that server"):
        planbook.mcp.connect("my-own-server --port 1")


def test_the_command_line_says_a_missing_server_in_one_line(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mcp")
    (tmp_path / "t.yaml").write_text("steps:\n  - {id: a, tool: get_current_time, args: {timezone: UTC}}\n")
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-m", "planbook.cli", "run", "t.yaml", "--mcp", "no-such-mcp-server"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
                          env={"PATH": str(tmp_path), "PYTHONPATH": root, "PLANBOOK_HOME": str(tmp_path)})
    assert proc.returncode == 2, proc
    assert proc.stderr.splitlines() == [
        "planbook: the MCP server no-such-mcp-server is not installed here (no command 'no-such-mcp-server' on "
        "PATH): install that server (its own instructions say how: pip, uv tool or npm), or give the full path of "
        "its command"], proc.stderr


# ------------------------------------------------------------------ notebook 07 invites a click
def _code_cells(name: str) -> list[str]:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "notebooks" / name
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_notebook_07_goes_on_after_a_click_on_approve_in_a_real_kernel() -> None:
    """A student clicks Approve in the view of the background run, then runs the next cells:
    the decision in code after the end is one line (RunEnded), and every later cell works
    (it was a long traceback, then NameError: result)."""
    cells = _code_cells("07-steering-a-run.ipynb")
    started = next(i for i, code in enumerate(cells) if "%run_plan note --background" in code)
    kernel = Kernel()
    try:
        def run(code: str) -> list[dict]:
            reply, messages = kernel.execute(code)
            errors = [m["content"] for m in messages if m["msg_type"] == "error"]
            assert reply["status"] == "ok" and not errors, (code, reply, errors)
            return messages

        for code in cells[: started + 1]:
            run(code)
        # the click, as the view's Approve button delivers it (planbook.views.steer.on_control)
        messages = run("from planbook.views.steer import on_control\nhandle.wait_for_approval(timeout=60)\n"
                       "refused = on_control(handle, {'action': 'approve', 'step': 'send'})\n"
                       "refused, handle.wait(timeout=60).status, outbox")
        (value,) = [m for m in messages if m["msg_type"] == "execute_result"]
        assert value["content"]["data"]["text/plain"] == (
            "('', 'completed', [('team', 'Dear team, a word about the release.')])")
        # a decision in code about the ended run: one line, no traceback
        reply, messages = kernel.execute('handle.approve("send")')
        (error,) = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert error["traceback"] == ["RunEnded: the run of plan 'note' has ended (completed): nothing to approve"]
        printed = []
        for code in cells[started + 1:]:
            printed += [m["content"]["text"] for m in run(code) if m["msg_type"] == "stream"]
        assert "the run of plan 'note' has ended (completed): nothing to approve\n" in "".join(printed)
    finally:
        kernel.close()


# ------------------------------------------------------------------ the course's words
def _markdown(name: str) -> str:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "notebooks" / name
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _root() -> Any:
    from pathlib import Path

    return Path(__file__).resolve().parents[2]


def test_the_readme_and_chapter_1_list_every_chapter() -> None:
    readme = (_root() / "README.md").read_text(encoding="utf-8")
    first = _markdown("01-first-plan.ipynb").split("\n--")[0]
    for notebook in sorted((_root() / "notebooks").glob("*.ipynb")):
        number = int(notebook.name[:2])
        listed = f"{number}. `{notebook.name}`" if notebook.name[2] == "-" else f"`{notebook.name}`"  # 05b-…: an appendix
        assert listed in readme, f"the README's course list lacks {notebook.name}"
        if number > 1:
            assert f"]({notebook.name})" in first, f"notebook 01's 'Later notebooks' lacks {notebook.name}"


def test_the_readmes_notebook_install_gives_what_every_tutorial_needs() -> None:
    """Installed as the README says, chapter 8 stopped at its first cell (no MCP SDK, no server)."""
    import re
    import sys
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    readme = (_root() / "README.md").read_text(encoding="utf-8")
    assert '.venv/bin/pip install ".[tutorials]"' in readme
    project = tomllib.loads((_root() / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    names = {canonicalize_name(Requirement(r).name) for r in [*project["dependencies"], *extras["tutorials"]]}
    assert {canonicalize_name(Requirement(r).name) for r in extras["lab"]} <= names
    dists = packages_distributions()
    for notebook in sorted((_root() / "notebooks").glob("*.ipynb")):
        code = "\n".join(_code_cells(notebook.name))
        written = set(re.findall(r"%%writefile (\w+)\.py", code))
        for module in re.findall(r"^\s*(?:import|from) ([\w.]+)", code, re.M):
            top = module.split(".")[0]
            if top == "planbook" or top in written or top not in dists:  # planbook, a file the notebook wrote, stdlib
                continue
            assert {canonicalize_name(d) for d in dists[top]} & names, (
                f"{notebook.name} imports {module}, which no dependency nor the tutorials extra installs")
        for command in re.findall(r'--mcp "([\w-]+)', code):
            assert canonicalize_name(command) in names, f"{notebook.name} starts {command}: not in the tutorials extra"


def test_the_stale_words_are_gone() -> None:
    first = _markdown("01-first-plan.ipynb")
    assert "and reuse the earlier result of a tool call" not in first  # the cache is off by default
    assert "only for tools registered with\n`cache=True`" in first
    assert "Its text form is the\nfinal plan and a one-line verdict" not in first  # the cell shows one line
    assert "the view leaves the final plan as text" not in _markdown("04-llm-planner.ipynb")
    assert 'pip install "planbook[tutorials]"' in _markdown("08-mcp-tools-and-traces.ipynb")


def test_notebook_05_shows_what_its_words_point_at() -> None:
    """05 told the reader to note an itinerary no cell printed, named "seed 004" without a word,
    and numbered OpenManus's steps from 0 where planbook's start at 1 without saying so."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "notebooks" / "05-three-designs.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    texts = ["".join(c["source"]) for c in cells]
    note = next(i for i, text in enumerate(texts) if text.startswith("Note the itinerary"))
    printed = "".join(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"])
                      for o in cells[note - 1].get("outputs", []))
    assert "the itinerary (step 2): Saturday: no train to Lyon, no hotel" in printed
    words = _markdown("05-three-designs.ipynb")
    assert "*seed 004*" in words and "004 is the plan-execute lesson" in words
    assert "OpenManus numbers its steps from **0**" in words


# ------------------------------------------------------------------ notebook 07's click, in the browser
STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
# every code cell ran, or one failed (then the cells below it do not run)
ALL_RAN_OR_FAILED_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const code = nb.widgets.filter(c => c.model.type === 'code');
  const running = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).some(p => p.textContent.includes('*'));
  return !running && (code.every(c => c.model.executionCount !== null)
    || document.querySelector("%s") !== null);
}""" % STDERR

#: every code cell's outputs as text, from the notebook's model (stdout, stderr, text/plain, errors)
OUTPUT_TEXTS_JS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const texts = [];
  for (const cell of nb.widgets.filter(c => c.model.type === 'code')) {
    for (const out of cell.model.outputs.toJSON()) {
      if (out.text) texts.push(Array.isArray(out.text) ? out.text.join('') : out.text);
      const plain = out.data && out.data['text/plain'];
      if (plain) texts.push(Array.isArray(plain) ? plain.join('') : plain);
      if (out.output_type === 'error') texts.push(out.ename + ': ' + out.evalue);
    }
  }
  return texts;
}"""

RUN_FROM_JS = """([index, command]) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  nb.activeCellIndex = index;
  window.jupyterapp.commands.execute(command);
}"""


@pytest.mark.browser
@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
def test_notebook_07_after_a_click_on_approve_in_the_browser(request: pytest.FixtureRequest, front_end: str) -> None:
    """A student runs notebook 07 to its background run, clicks Approve in the live view, then
    runs the rest: one line says the run had ended, and no cell fails (a traceback, then
    NameError: result, before)."""
    import json
    import shutil

    from browser_support import KERNEL_IDLE_JS, RUN_TIMEOUT_MS

    browser = request.getfixturevalue("browser")
    server = request.getfixturevalue("lab" if front_end == "lab" else "notebook7")
    name = f"07-click-{front_end}.ipynb"
    shutil.copy(_root() / "notebooks" / "07-steering-a-run.ipynb", server.root / name)
    cells = json.loads((server.root / name).read_text(encoding="utf-8"))["cells"]
    started = next(i for i, c in enumerate(cells) if "%run_plan note --background" in "".join(c["source"]))
    context = browser.new_context(viewport={"width": 1280, "height": 1100})
    page = context.new_page()
    path = f"/lab/tree/{name}?token={server.token}&reset" if front_end == "lab" else f"/notebooks/{name}?token={server.token}"
    try:
        page.goto(server.url(path))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        page.evaluate(RUN_FROM_JS, [started + 1, "notebook:run-all-above"])  # up to the background run
        approve = ".planbook-live .pb-row[data-step='send'].planbook-waiting button[data-decide='approve']"
        page.wait_for_selector(approve, timeout=RUN_TIMEOUT_MS)
        page.click(approve)
        record = page.locator(".jp-OutputArea-output", has=page.locator(".planbook-record")).first
        record.locator(".planbook-verdict", has_text="completed").wait_for(timeout=RUN_TIMEOUT_MS)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_TIMEOUT_MS)
        page.evaluate(RUN_FROM_JS, [started + 1, "notebook:run-all-below"])  # then Shift+Enter on
        page.wait_for_function(ALL_RAN_OR_FAILED_JS, timeout=RUN_TIMEOUT_MS)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_TIMEOUT_MS)
        # the cells' outputs as the notebook holds them: JupyterLab renders only the cells near the
        # viewport (a cell scrolled away has no text in the page), and the chapter is long
        outputs = "\n".join(page.evaluate(OUTPUT_TEXTS_JS))
        assert "Traceback" not in outputs and page.locator(STDERR).count() == 0, outputs  # no cell failed
        assert outputs.count("the run of plan 'note' has ended (completed): nothing to approve") == 1, outputs
        for failure in ("Traceback", "NameError", "RunEnded:"):
            assert failure not in outputs, (failure, outputs)
    finally:
        context.close()
        server.delete_sessions()


def test_a_paused_background_run_of_this_kernel_is_no_restarts_leftover(ip: Any) -> None:
    """A run paused in the background by this kernel is stored unfinished, but it is not what a
    restart left behind: a foreground run of the plan is not refused for it."""
    import threading

    ticks = Ticks()
    gate = threading.Event()

    @ticks.tools.tool
    def hold(label: str) -> str:
        """Wait for the test."""
        assert gate.wait(60)
        return label

    ip.user_ns["ticks"] = ticks.tools
    ip.run_cell_magic("plan", "bg27 --tools ticks", "steps:\n  - {id: a, tool: hold, args: {label: a}}\n"
                                                   "  - {id: b, tool: tick, args: {label: b}}\n")
    handle = ip.run_line_magic("run_plan", "bg27 --background --no-view")
    try:
        handle.pause()
        gate.set()
        assert handle.wait_for_approval(timeout=60) == [] and handle.status == "paused"
        result = ip.run_line_magic("run_plan", "bg27 --no-view")
        assert result.status == "completed"
    finally:
        gate.set()
        if not handle.done:
            handle.stop()
            handle.wait(timeout=60)
