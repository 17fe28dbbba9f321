"""Steering a background run from the live view, in JupyterLab and in Notebook 7 (headless Chromium).

A background run (``%run_plan NAME --background``) returns its cell at once, so a click
reaches the kernel while the run goes. The test clicks **Approve** on waiting rows (each
step then runs; the time from the click to the step's ``step.started`` event is printed,
never asserted), opens **Edit** on the last one, saves an argument that does not fit the
tool (the signature's error shows inline), then a valid one (the step runs with it, and
the revision history shows the ``revised`` diff), checks that another cell answered
during the run; then, on a second run, clicks **Pause** while a step runs (it finishes,
nothing new starts), **Continue**, and **Stop** while the next step runs (the run ends
``failed (aborted)`` once that step finished, and nothing else started). Each run's live view
ends as the run's static record, with its diffs and decisions: no widget is left to save.

Run it alone with ``pytest -m browser tests/browser/test_browser_steering.py -p no:cacheprovider``.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest

from browser_support import (
    ARTIFACTS,
    KERNEL_IDLE_JS,
    RUN_TIMEOUT_MS,
    TIMINGS,
    Lab,
    _command,
    _shot,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

APPROVALS = 5

CELLS = [
    "%load_ext planbook\nimport json, threading, planbook\n\nbox = planbook.Toolbox()\ngate = threading.Event()\n\n"
    "@box.tool\ndef prepare(n: int) -> int:\n    return n\n\n"
    "@box.tool(approve=True)\ndef send(to: str, times: int) -> str:\n    print(f'SENT to {to} x{times}')\n"
    "    return f'sent to {to} x{times}'\n\n"
    "@box.tool\ndef hold(label: str) -> str:\n    assert gate.wait(120)\n    return label",
    "%%plan mails --tools box\ngoal: send notes, each approved\nsteps:\n  - {id: first, tool: prepare, args: {n: 1}}\n"
    + "".join(f"  - {{id: m{i}, tool: send, args: {{to: bob, times: 1}}, needs: [{'first' if i == 1 else f'm{i - 1}'}]}}\n"
              for i in range(1, APPROVALS + 2)),
    "handle = %run_plan mails --tools box --background\nhandle",
    # the run reaches its first approval on its own thread: this cell may start before it does
    "handle.wait_for_approval(60)\nprint('other cell answers while the run waits:', handle.status)",
]

# click a control and return the browser's wall clock at the click (ms since the epoch)
CLICK_JS = """(selector) => {
  const button = document.querySelector(selector);
  if (!button) return null;
  const t = Date.now();
  button.click();
  return t;
}"""

# append a code cell at the end, run it (without waiting for it)
RUN_CELL_JS = """(code) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  nb.activeCellIndex = nb.widgets.length - 1;
  window.jupyterapp.commands.execute('notebook:insert-cell-below').then(() => {
    nb.activeCell.model.sharedModel.setSource(code);
    window.jupyterapp.commands.execute('notebook:run-cell');
  });
}"""

LAST_OUTPUT_JS = """() => {
  const cells = document.querySelectorAll('.jp-CodeCell');
  const last = cells[cells.length - 1];
  return last ? Array.from(last.querySelectorAll('.jp-OutputArea-output')).map(o => o.innerText).join('\\n') : '';
}"""


# a cell that waits until the run took a control (clicks reach the kernel once it is idle)
STEERED = ("import time\nwhile not any(e.kind == 'run.steered' and e.data['action'] == '{action}' "
           "for e in list(held_run.runner.state.events)):\n    time.sleep(0.05)\nprint('{action} arrived')")


def _shot_of(output: Any, name: str) -> None:
    """A screenshot of one output (a run's record, once its live view is gone)."""
    ARTIFACTS.mkdir(exist_ok=True)
    output.screenshot(path=str(ARTIFACTS / f"browser-{name}.png"))


def _row(step: str) -> str:
    return f".planbook-live .pb-row[data-step='{step}']"


def _run_cell(page: Any, code: str, expect: str | None) -> str:
    """Run ``code`` in a new last cell and wait until its output contains ``expect`` (None: do not wait)."""
    page.evaluate(RUN_CELL_JS, code)
    if expect is None:
        return ""
    page.wait_for_function(f"() => ({LAST_OUTPUT_JS})().includes({json.dumps(expect)})", timeout=RUN_TIMEOUT_MS)
    return str(page.evaluate(LAST_OUTPUT_JS))


@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
def test_approve_edit_and_stop_from_the_live_view(request: pytest.FixtureRequest, browser: Any, front_end: str) -> None:
    server: Lab = request.getfixturevalue("lab" if front_end == "lab" else "notebook7")
    name = f"steer-{front_end}.ipynb"
    write_notebook(server.root / name, CELLS)
    context = browser.new_context(viewport={"width": 1280, "height": 1100})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: None if "/static/notebook/notebook_core." in (exc.stack or "")
            else errors.append(f"{exc} {exc.stack or ''}"))
    path = f"/lab/tree/{name}?token={server.token}&reset" if front_end == "lab" else f"/notebooks/{name}?token={server.token}"
    try:
        page.goto(server.url(path))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        _command(page, "notebook:run-all-cells")

        # the first send waits: a banner with the count, the row marked, and another cell ran meanwhile
        page.wait_for_selector(f"{_row('m1')}.planbook-waiting button[data-decide='approve']", timeout=RUN_TIMEOUT_MS)
        banner = page.locator(".planbook-live .planbook-waiting-banner")
        assert "Waiting for you: 1 step (m1)" in banner.inner_text()
        page.get_by_text("other cell answers while the run waits: waiting").wait_for(timeout=RUN_TIMEOUT_MS)
        _shot(page, f"steer-{front_end}-waiting")

        clicks: dict[str, float] = {}
        for i in range(1, APPROVALS + 1):
            step = f"m{i}"
            button = f"{_row(step)}.planbook-waiting button[data-decide='approve']"
            page.wait_for_selector(button, timeout=RUN_TIMEOUT_MS)
            clicked = page.evaluate(CLICK_JS, button)
            assert clicked is not None
            clicks[step] = clicked / 1000
            page.wait_for_selector(f"{_row(step)}.planbook-completed", timeout=RUN_TIMEOUT_MS)

        # Edit on the last one: a value that does not fit the signature, then one that does
        last = f"m{APPROVALS + 1}"
        page.wait_for_selector(f"{_row(last)}.planbook-waiting", timeout=RUN_TIMEOUT_MS)
        page.click(f"{_row(last)} button[data-decide='edit']")
        editor = page.locator(f".planbook-live .pb-pane[data-pane='{last}'] textarea.planbook-editor")
        editor.wait_for(timeout=RUN_TIMEOUT_MS)
        editor.fill('{"to": "dan", "times": "many"}')
        page.click(f".planbook-live .pb-pane[data-pane='{last}'] button[data-decide='save']")
        error = page.locator(f".planbook-live .pb-pane[data-pane='{last}'] .planbook-edit-error",
                             has_text="argument 'times' of tool 'send' expects int")
        error.wait_for(timeout=RUN_TIMEOUT_MS)
        assert page.locator(f"{_row(last)}.planbook-waiting").count() == 1  # nothing ran
        _shot(page, f"steer-{front_end}-edit-error")
        editor.fill('{"to": "dan", "times": 2}')
        page.click(f".planbook-live .pb-pane[data-pane='{last}'] button[data-decide='save']")
        # the run ends: its live view becomes the run's static record (no widget left to save), which
        # shows the edited step, the edit's diff and every decision
        record = page.locator(".jp-OutputArea-output", has=page.locator(".planbook-record")).first
        record.locator(".planbook-verdict", has_text="completed").wait_for(timeout=RUN_TIMEOUT_MS)
        assert page.locator(".planbook-live").count() == 0
        assert record.locator(f"tr[data-step='{last}']", has_text="[✓]").count() == 1
        assert record.locator(".planbook-revisions .planbook-revised", has_text=f"{last}: send(to='dan', times=2)").count() == 1
        assert "edited by you (widget)" in record.locator(".planbook-revisions").inner_text()
        assert record.locator(".planbook-decision", has_text="m1: approved by you (widget)").count() == 1
        assert record.locator(".planbook-decision", has_text=f"{last}: edited by you (widget)").count() == 1
        _shot_of(record, f"steer-{front_end}-edited")

        # the kernel's own record: each step.started after its click, and who decided
        out = _run_cell(page, "r = handle.wait(60)\nprint('STARTED', json.dumps({e.step: e.time for e in r.events "
                              "if e.kind == 'step.started'}))\nprint('WHO', sorted({e.data['who'] for e in r.events "
                              "if e.kind == 'step.decided'}), r.outputs['" + last + "'])", "WHO")
        started = json.loads(out.split("STARTED", 1)[1].split("\n", 1)[0])
        latencies = [(started[step] - at) * 1000 for step, at in clicks.items()]
        assert all(ms > -50 for ms in latencies), latencies  # each step started after its click (clocks agree)
        median = statistics.median(latencies)
        TIMINGS[f"{front_end}_approve_click_to_step_started_ms"] = median
        print(f"\n{front_end}: click on Approve to step.started: median {median:.0f} ms over {len(latencies)} clicks "
              f"({', '.join(f'{ms:.0f}' for ms in latencies)}; target < 300 ms)")
        assert "WHO ['widget'] sent to dan x2" in out

        # Pause while a step runs: it finishes, nothing new starts; Continue goes on; then Stop while
        # the next step runs: it finishes, nothing else starts, the run ends failed (aborted)
        _run_cell(page, "%%plan held --tools box\nsteps:\n  - {id: h1, tool: hold, args: {label: one}}\n"
                        "  - {id: h2, tool: hold, args: {label: two}, needs: [h1]}\n"
                        "  - {id: h3, tool: hold, args: {label: three}, needs: [h2]}\n", "h3")
        _run_cell(page, "gate.clear()\nheld_run = %run_plan held --tools box --background\nheld_run", None)
        page.wait_for_selector(f"{_row('h1')}.planbook-in_progress", timeout=RUN_TIMEOUT_MS)
        live = page.locator(".planbook-live").last
        live.locator("button[data-control='pause']").click()
        _run_cell(page, STEERED.format(action="pause"), "pause arrived")
        _run_cell(page, "gate.set(); print('released h1')", "released h1")
        live.locator("button[data-control='continue']").wait_for(timeout=RUN_TIMEOUT_MS)  # paused
        assert live.locator(".pb-row[data-step='h1'].planbook-completed").count() == 1
        assert live.locator(".pb-row[data-step='h2'].planbook-not_started").count() == 1
        _shot(page, f"steer-{front_end}-paused")
        _run_cell(page, "gate.clear(); print('holding h2')", "holding h2")
        live.locator("button[data-control='continue']").click()
        page.wait_for_selector(f"{_row('h2')}.planbook-in_progress", timeout=RUN_TIMEOUT_MS)
        live.locator("button[data-control='stop']").click()
        # at once, before the kernel took it: the view says stopping…, and Pause and Stop are off
        assert live.locator(".planbook-stopping").count() == 1 and live.locator(".pb-verdict", has_text="running…").count() == 0
        assert live.locator("button[data-control='stop']").is_disabled()
        assert live.locator("button[data-control='pause']").is_disabled()
        _shot(page, f"steer-{front_end}-stopping")
        _run_cell(page, STEERED.format(action="stop"), "stop arrived")
        # taken: still stopping… until the running step ends; the stop is a decision, not a revision
        live.locator(".planbook-decisions-box .planbook-decision", has_text="run: stopped by you (widget)").wait_for(
            timeout=RUN_TIMEOUT_MS)
        assert live.locator(".planbook-stopping").count() == 1
        assert "stopped" not in live.locator(".planbook-revisions").inner_text()
        _run_cell(page, "gate.set()\nr2 = held_run.wait(60)\nprint('HELD', r2.status, r2.reason, "
                        "[s.status.value for s in r2.plan.steps])", "HELD")
        assert "HELD failed aborted ['completed', 'completed', 'not_started']" in page.evaluate(LAST_OUTPUT_JS)
        held = page.locator(".jp-OutputArea-output", has=page.locator(".planbook-record")).nth(1)
        held.locator(".planbook-verdict", has_text="aborted").wait_for(timeout=RUN_TIMEOUT_MS)
        assert page.locator(".planbook-live").count() == 0
        assert held.locator("tr[data-step='h2']", has_text="[✓]").count() == 1
        decisions = held.locator(".planbook-decision").all_inner_texts()
        assert decisions == ["run: paused by you (widget)", "run: continued by you (widget)",
                             "run: stopped by you (widget)"], decisions
        _shot_of(held, f"steer-{front_end}-stopped")
        assert page.get_by_text("Error displaying widget").count() == 0
        assert not errors, f"{front_end}: console errors: {errors}"
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"browser-steer-{front_end}-failed.png"), full_page=True)
        raise
    finally:
        context.close()
        server.delete_sessions()
