"""The pane of an execution a replan removed opens, live and in the saved record (issue 37 §3).

A plan whose step ``beta`` prints a line, then fails; the run replans (the planner replaces
``beta`` with ``gamma``) and ``gamma`` waits for a file the test creates. While it waits (the
kernel is busy running the cell), the test clicks beta's red Timeline bar: the pane of that
execution opens, with its call, the traceback and what it printed. The Steps tab lists beta
under "removed in revision 2", and a click there opens the same pane. Then the run ends, the
notebook is saved, and the saved file's record holds beta under its revision with that pane.

Run it alone with ``pytest -m browser tests/browser/test_browser_removed_execution.py -p no:cacheprovider``.
"""

from __future__ import annotations

from typing import Any

import pytest

from browser_support import (
    KERNEL_IDLE_JS,
    RUN_TIMEOUT_MS,
    Lab,
    _command,
    notebook_page,
    output_text,
    save_notebook,
    saved_outputs,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "%load_ext planbook\n%plan_store off\nimport pathlib, time, planbook\nfrom planbook import ScriptedPlanner\n\n"
    "@planbook.tool\ndef fetch(source: str) -> str:\n    print('fetching', source, 'now')\n"
    "    if source == 'beta':\n        raise ConnectionError('beta is down today')\n    return source.upper()\n\n"
    "@planbook.tool\ndef waits(gate: str) -> str:\n"
    "    while not pathlib.Path('release-' + gate).exists():  # the test creates it once it has looked\n"
    "        time.sleep(0.05)\n    return gate\n\n"
    "planner = ScriptedPlanner({None: [], 'beta': [{'id': 'gamma', 'tool': 'waits', 'args': {'gate': 'removed'}}]})",
    "%%plan sources\nsteps:\n  - {id: alpha, tool: fetch, args: {source: alpha}}\n"
    "  - {id: beta, tool: fetch, args: {source: beta}, needs: [alpha]}\n",
    "r = %run_plan sources --planner planner --on-failure replan",
]
NAME = "removed-execution.ipynb"
LIVE = ".planbook-live"


def _pane_text(page: Any) -> str:
    pane = page.locator(f"{LIVE} .pb-execution-pane[data-pane='beta']")
    pane.wait_for(timeout=RUN_TIMEOUT_MS)
    return str(pane.inner_text())


def _check_pane(text: str) -> None:
    assert "fetch(source='beta')" in text, text  # the call
    assert "ConnectionError: beta is down today" in text, text  # the error and the traceback
    assert "Traceback (most recent call last)" in text, text
    assert "fetching beta now" in text, text  # what it printed
    assert "started +" in text and "revision 1" in text, text  # its times, and the revision it ran in


def test_the_pane_of_a_removed_failed_execution_opens_live_and_in_the_saved_record(browser: Any, lab: Lab) -> None:
    (lab.root / "release-removed").unlink(missing_ok=True)
    write_notebook(lab.root / NAME, CELLS)
    with notebook_page(browser, lab, NAME, height=1100) as (page, errors):
        _command(page, "notebook:run-all-cells")
        # the replanned run waits in gamma: the kernel is busy, every click is answered in the browser
        page.wait_for_selector(f"{LIVE} .pb-row.planbook-in_progress[data-step='gamma']", timeout=RUN_TIMEOUT_MS)
        live = page.locator(LIVE).first
        # the Steps tab lists beta under its revision, and a click opens its execution's pane
        removed = live.locator(".planbook-removed-steps[data-revision='2'] .planbook-removed-step[data-step='beta']")
        removed.wait_for(timeout=RUN_TIMEOUT_MS)
        assert "removed in revision 2" in str(live.locator(".planbook-removed-steps").inner_text())
        removed.click()
        _check_pane(_pane_text(page))
        removed.click()  # closes it
        live.locator(".pb-execution-pane").wait_for(state="detached", timeout=10_000)
        # the red bar of the Timeline opens the same pane
        live.locator(".pb-tab[data-tab='timeline']").click()
        bar = live.locator("svg.pb-gantt .pb-bar-ex.pb-failed[data-step='beta']")
        assert bar.count() == 1
        bar.click()
        _check_pane(_pane_text(page))
        # the step still in the plan opens its own pane, not an execution's
        live.locator("svg.pb-gantt .pb-bar-ex[data-step='alpha']").click()
        page.locator(f"{LIVE} .pb-pane[data-pane='alpha']").wait_for(timeout=RUN_TIMEOUT_MS)
        live.locator(".pb-execution-pane").wait_for(state="detached", timeout=10_000)
        (lab.root / "release-removed").write_text("go", encoding="utf-8")
        page.wait_for_selector(".planbook-record", timeout=RUN_TIMEOUT_MS)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        # the record, as the page shows it: beta under its revision, its pane opens from its row
        record = page.locator(".planbook-record").first
        group = record.locator(".planbook-removed-steps[data-revision='2']")
        assert "Removed in revision 2" in str(group.inner_text())
        group.locator("details.planbook-pane summary").first.click()
        _check_pane(str(group.locator(".planbook-execution-pane[data-pane='beta']").inner_text()))
        # and as the saved file keeps it
        save_notebook(page)
        outputs = saved_outputs(lab.root / NAME)
        records = [html for o in outputs if "planbook-record" in (html := output_text(o, "text/html"))]
        assert len(records) == 1, [list(o.get("data", {})) for o in outputs]
        kept = records[0]
        assert 'class="planbook-removed-steps" data-revision="2"' in kept
        assert 'planbook-execution-pane" data-execution="2" data-pane="beta"' in kept
        for words in ("ConnectionError: beta is down today", "Traceback (most recent call last)", "fetching beta now"):
            assert words in kept, words
        assert not errors, errors
