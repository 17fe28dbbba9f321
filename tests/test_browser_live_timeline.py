"""The live view's timeline follows the record's rules (planbook/views/charts.py), in JupyterLab.

Lanes by real overlap in time: a serial run of many instant steps is one lane, however wide
its bars are drawn (the view used to place bars by drawn extent, so a serial run of fast steps
looked parallel), and two steps that really ran at once take two. One linear scale: no log scale
switched on by itself. Checked while the run goes (the live view), on its timeline's caption.

Run it alone with ``pytest -m browser tests/test_browser_live_timeline.py -p no:cacheprovider``.
"""

from __future__ import annotations

from typing import Any

import pytest

from browser_support import Lab, write_notebook
from test_browser import KERNEL_IDLE_JS, RUN_TIMEOUT_MS, _command, browser, lab  # noqa: F401

pytestmark = pytest.mark.browser

FAST = 10  # with w: 11 executions, under the default step budget (12)


def _cells() -> list[str]:
    steps = "".join(f"  - {{id: f{i}, tool: fast, args: {{i: {i}}}" + (f", needs: [f{i - 1}]" if i else "") + "}\n"
                    for i in range(FAST))
    return [
        "%load_ext planbook\n%plan_store off\nimport pathlib, time, planbook\n\n@planbook.tool\ndef fast(i: int) -> int:\n"
        "    return i\n\n@planbook.tool\ndef waits(gate: str) -> str:\n"
        "    while not pathlib.Path('release-' + gate).exists():  # the test creates it once it has looked\n"
        "        time.sleep(0.05)\n    return gate",
        f"%%plan serial\nsteps:\n{steps}  - {{id: w, tool: waits, args: {{gate: one}}, needs: [f{FAST - 1}]}}\n",
        "%%plan both\nsteps:\n  - {id: a, tool: waits, args: {gate: two}}\n  - {id: b, tool: waits, args: {gate: two}}\n",
        "r1 = %run_plan serial",
        "r2 = %run_plan both --parallel 2",
    ]


def _caption(page: Any, nth: int) -> str:
    live = page.locator(".planbook-live").nth(nth)
    live.locator(".pb-tab[data-tab='timeline']").click()
    return str(live.locator("svg.pb-gantt > text").first.text_content())


def test_lanes_are_real_overlap_in_time(browser: Any, lab: Lab) -> None:  # noqa: F811
    write_notebook(lab.root / "live-timeline.ipynb", _cells())
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        page.goto(lab.url(f"/lab/tree/live-timeline.ipynb?token={lab.token}&reset"))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        _command(page, "notebook:run-all-cells")
        page.wait_for_selector(".planbook-live .pb-row.planbook-in_progress[data-step='w']", timeout=RUN_TIMEOUT_MS)
        caption = _caption(page, 0)
        assert caption.startswith(f"{FAST + 1} executions in 1 lane,"), caption  # serial: one lane
        assert page.locator(".planbook-live svg.pb-gantt[data-scale='linear']").count() == 1
        (lab.root / "release-one").write_text("go", encoding="utf-8")  # w ends, then a and b both wait at once
        page.wait_for_selector(".planbook-live .pb-row.planbook-in_progress[data-step='b']", timeout=RUN_TIMEOUT_MS)
        page.wait_for_selector(".planbook-live .pb-row.planbook-in_progress[data-step='a']", timeout=RUN_TIMEOUT_MS)
        caption = _caption(page, 0)
        assert caption.startswith("2 executions in 2 lanes,"), caption  # they really ran at once
        (lab.root / "release-two").write_text("go", encoding="utf-8")
        page.wait_for_function("() => document.querySelectorAll('.planbook-record').length === 2",
                               timeout=RUN_TIMEOUT_MS)
    finally:
        context.close()
        lab.delete_sessions()
