"""A stored run of notebook 02's plan replayed in JupyterLab (headless Chromium), clicked while it plays.

The tutorial runs take milliseconds: their live view is a record before anyone can click. Here the
replanned run of notebook 02 (a failure, then revision 2 round it) is stored, then ``%replay``-ed
slowly: a Timeline bar and a Graph node are clicked while it plays and their panes open; the replay
ends as the run's record. ``display(planbook.PlanView(result).widget)`` (the README's one-liner)
shows the live widget. The notebook is saved, the kernel shut down, the notebook reopened: every
output is a record, never "Error displaying widget".

Run it alone with ``pytest -m browser tests/browser/test_browser_replay.py -p no:cacheprovider``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from browser_support import ARTIFACTS, KERNEL_IDLE_JS, ROOT, RUN_TIMEOUT_MS, Lab, _command, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
NAME = "replay-02.ipynb"


def _lesson_cells() -> list[str]:
    """Notebook 02's own cells: its tools, its planner, its ``%%plan euros``."""
    nb = json.loads((ROOT / "notebooks" / "02-failure-and-replanning.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    wanted = ("class RateService", "%%plan shopping", "lesson_planner = ", "%%plan euros")
    found = [next(src for src in code if marker in src) for marker in wanted]
    return found


def _cells() -> list[str]:
    return [
        "%load_ext planbook\n%plan_store runs.sqlite --no-cache\nimport planbook",
        *_lesson_cells(),
        "service.reset(primary_failures=99)\nreplanned = %run_plan euros --no-view",
        "%replay euros --speed 0.3",
        "display(planbook.PlanView(replanned).widget)",
    ]


def _save(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=20_000)


def _outputs(path: Path) -> list[dict[str, Any]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def test_a_replay_is_clickable_while_it_plays_and_saved_as_its_record(lab: Lab, browser: Any) -> None:
    write_notebook(lab.root / NAME, _cells())
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"{exc} {exc.stack or ''}"))
    try:
        page.goto(lab.url(f"/lab/tree/{NAME}?token={lab.token}&reset"))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        _command(page, "notebook:run-all-cells")
        live = page.locator(".planbook-live").filter(has=page.locator(".planbook-replay")).first
        live.wait_for(timeout=RUN_TIMEOUT_MS)

        # the Timeline: load's bar, once it ran; a click opens its pane while the replay goes on
        live.locator(".pb-tab[data-tab='timeline']").click()
        bar = live.locator(".pb-bar-ex[data-step='load']").first
        bar.wait_for(timeout=RUN_TIMEOUT_MS)
        bar.click()
        live.locator(".pb-pane[data-pane='load']").wait_for(timeout=10_000)
        assert live.locator(".planbook-replay").count() == 1, "the replay ended before the click"

        # the Graph: rate's node, once it failed (revision 1); its pane says why
        live.locator(".pb-tab[data-tab='graph']").click()
        node = live.locator(".pb-node.planbook-failed[data-step='rate']")
        node.wait_for(timeout=RUN_TIMEOUT_MS)
        node.click()
        pane = live.locator(".pb-pane[data-pane='rate']")
        pane.wait_for(timeout=10_000)
        assert "timed out" in pane.inner_text()
        assert live.locator(".planbook-replay").count() == 1, "the replay ended before the click"
        ARTIFACTS.mkdir(exist_ok=True)
        live.screenshot(path=str(ARTIFACTS / "browser-replay-playing.png"))

        # it ends as the run's record; the one-liner below shows the live widget
        record = page.locator(".jp-OutputArea-output .planbook-record")
        record.locator("tr[data-step='convert']", has_text="[✓]").first.wait_for(timeout=RUN_TIMEOUT_MS)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_TIMEOUT_MS)
        page.locator(".planbook-live .pb-row[data-step='rate_backup']").wait_for(timeout=30_000)
        assert page.get_by_text("Error displaying widget").count() == 0

        _save(page)
        outputs = _outputs(lab.root / NAME)
        assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})], "a saved output keeps a widget"
        records = [o for o in outputs if "planbook-record" in "".join(o.get("data", {}).get("text/html", ""))]
        assert len(records) == 2, "the replay's record and the one-liner's"
        # the page still shows the one-liner's live widget (put back after the save)
        page.locator(".planbook-live .pb-row[data-step='rate_backup']").wait_for(timeout=10_000)

        lab.delete_sessions()  # the kernel is gone: no widget model survives
        page.goto(lab.url(f"/lab/tree/{NAME}?token={lab.token}&reset"))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        page.locator(".planbook-record tr[data-step='rate_backup']", has_text="[✓]").first.wait_for(timeout=30_000)
        assert page.locator(".planbook-record").count() == 2
        assert page.get_by_text("Error displaying widget").count() == 0
        assert not errors, errors
    finally:
        context.close()
        lab.delete_sessions()
