"""A paused run's editor (issue 37 §5): its button says Save, not "Save and run" (the run stays
paused until Continue), it closes once saved, and the step's pane shows the call from the new
arguments, not "tool Task" — in JupyterLab, clicking as a person does. (Saved, the edit was applied
but not drawn: a paused run's view had no heartbeat left to draw the throttled update.)

Run it alone with ``pytest -m browser tests/browser/test_browser_paused_editor.py -p no:cacheprovider``.
"""

from __future__ import annotations

from typing import Any

import pytest

from browser_support import RUN_TIMEOUT_MS, Lab, _command, notebook_page, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "%load_ext planbook\n%plan_store off\nimport planbook\n\nbox = planbook.Toolbox()\n\n"
    "@box.tool\ndef write(topic: str) -> str:\n    return f'notes on {topic}'\n\n"
    "@box.tool(approve=True)\ndef send(text: str) -> str:\n    return 'sent: ' + text",
    "%%plan mail --tools box\nsteps:\n  - {id: write, tool: write, args: {topic: bees}}\n"
    "  - {id: send, tool: send, args: {text: $write}, needs: [write]}\n"
    "  - {id: more, tool: write, args: {topic: ants}, needs: [send], task: Summarize them}\n",
    "handle = %run_plan mail --tools box --background\nhandle",
]
LIVE = ".planbook-live"


def test_a_paused_runs_editor_saves_closes_and_shows_the_new_call(browser: Any, lab: Lab) -> None:
    write_notebook(lab.root / "paused-editor.ipynb", CELLS)
    with notebook_page(browser, lab, "paused-editor.ipynb") as (page, errors):
        _command(page, "notebook:run-all-cells")
        page.wait_for_selector(f"{LIVE} .pb-row[data-step='send'] button[data-decide='approve']", timeout=RUN_TIMEOUT_MS)
        page.locator(f"{LIVE} button[data-control='pause']").click()
        page.wait_for_selector(f"{LIVE} button[data-control='continue']", timeout=RUN_TIMEOUT_MS)  # it paused
        page.locator(f"{LIVE} .pb-row[data-step='more']").click()  # its pane offers Edit in a paused run
        edit = f"{LIVE} .pb-pane button[data-decide='edit']"
        page.wait_for_selector(edit, timeout=RUN_TIMEOUT_MS)
        page.locator(edit).click()
        save = f"{LIVE} .pb-pane button[data-decide='save']"
        page.wait_for_selector(save, timeout=RUN_TIMEOUT_MS)
        assert page.locator(save).inner_text() == "Save"  # the run stays paused: not "Save and run"
        page.locator(f"{LIVE} .pb-pane textarea.pb-editor").fill('{"topic": "wasps"}')
        page.locator(save).click()
        page.wait_for_function(f"() => !document.querySelector('{LIVE} textarea.pb-editor')", timeout=RUN_TIMEOUT_MS)
        call = f"{LIVE} .pb-pane"
        # the pane's call line is the call from the new arguments (as Python writes it, or as the page does)
        page.wait_for_function(f"() => /write\\(topic=[\"']wasps[\"']\\)/.test((document.querySelector('{call}') || {{}}).innerText || '')",
                               timeout=RUN_TIMEOUT_MS)
        shown = page.locator(call).inner_text()
        assert "write Summarize them" not in shown, shown
        assert page.locator(f"{LIVE} button[data-control='continue']").count() == 1  # still paused
        assert not errors, errors
