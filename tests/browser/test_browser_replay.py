"""A stored run of notebook 02's plan replayed in JupyterLab (headless Chromium), clicked while it plays.

The tutorial runs take milliseconds: their live view is a record before anyone can click. Here the
replanned run of notebook 02 (a failure, then revision 2 round it) is stored, then replayed twice:
``%replay euros --speed 3`` plays it through and ends as the run's record, and ``%replay euros --step``
holds each moment until the view's Next button is clicked, so a Timeline bar and a Graph node are
clicked while it plays (at a timed pace, whether a click lands before the end depends on how busy
the machine is) and their panes open; it too ends as the run's record. JupyterLab hands a widget's
messages to a subshell of the kernel, so each Next is handled on that thread: the moment must be
drawn there (it was left pending for the cell's thread, and the Timeline stayed empty).
``display(planbook.PlanView(result).widget)`` (the README's one-liner) shows the live widget. The
notebook is saved, the kernel shut down, the notebook reopened: every output is a record, never
"Error displaying widget".

Run it alone with ``pytest -m browser tests/browser/test_browser_replay.py -p no:cacheprovider``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from browser_support import (
    ARTIFACTS,
    ROOT,
    RUN_TIMEOUT_MS,
    WIDGET_MIME,
    Lab,
    _command,
    notebook_page,
    open_notebook,
    output_text,
    save_notebook,
    saved_outputs,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NAME = "replay-02.ipynb"
STEPPED = "%replay euros --step"


def _lesson_cells() -> list[str]:
    """Notebook 02's own cells: its tools, its planner, its ``%%plan euros``."""
    nb = json.loads((ROOT / "notebooks" / "02-failure-and-replanning.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    wanted = ("class RateService", "%%plan shopping", "lesson_planner = ", "%%plan euros")
    return [next(src for src in code if marker in src) for marker in wanted]


def _cells() -> list[str]:
    return [
        "%load_ext planbook\n%plan_store runs.sqlite --no-cache\nimport planbook",
        *_lesson_cells(),
        "service.reset(primary_failures=99)\nreplanned = %run_plan euros --no-view",
        "%replay euros --speed 3",
        STEPPED,
        "display(planbook.PlanView(replanned).widget)",
    ]


def _shown(cell: Any) -> tuple[int, int]:
    """How many of the replay's moments its line in ``cell`` says are shown, and of how many."""
    line = str(cell.locator(".planbook-replay").text_content())
    found = re.search(r"(\d+) of (\d+) moments shown", line)
    assert found, line
    return int(found[1]), int(found[2])


def _next_until(cell: Any, selector: str) -> None:
    """Click the replay's Next, one moment at a time, until ``selector`` is in ``cell``'s output
    (each click answered before the next: the line counts it, or the replay ended as its record)."""
    while cell.locator(selector).count() == 0:
        shown, total = _shown(cell)
        assert shown < total, f"the replay reached its last moment without {selector}"
        cell.locator("button[data-replay='next']").click()
        answered = cell.locator(".planbook-replay", has_text=f"{shown + 1} of {total} moments shown")
        answered.or_(cell.locator(".planbook-record")).first.wait_for(timeout=RUN_TIMEOUT_MS)


def test_a_replay_is_clickable_while_it_plays_and_saved_as_its_record(lab: Lab, browser: Any) -> None:
    write_notebook(lab.root / NAME, _cells())
    with notebook_page(browser, lab, NAME) as (page, errors):
        _command(page, "notebook:run-all-cells")
        cell = page.locator(".jp-CodeCell").filter(has_text=STEPPED)
        live = cell.locator(".planbook-live")
        live.locator("button[data-replay='next']").wait_for(timeout=RUN_TIMEOUT_MS)
        assert _shown(cell)[0] == 0

        # the Timeline: load's bar, once it ran; a click opens its pane while the replay holds its moment
        live.locator(".pb-tab[data-tab='timeline']").click()
        _next_until(cell, ".pb-bar-ex[data-step='load']")
        live.locator(".pb-bar-ex[data-step='load']").first.click()
        live.locator(".pb-pane[data-pane='load']").wait_for(timeout=10_000)

        # the Graph: rate's node, once it failed (revision 1); its pane says why
        live.locator(".pb-tab[data-tab='graph']").click()
        node = ".pb-node.planbook-failed[data-step='rate']"
        _next_until(cell, node)
        live.locator(node).click()
        pane = live.locator(".pb-pane[data-pane='rate']")
        pane.wait_for(timeout=10_000)
        assert "timed out" in pane.inner_text()
        shown, total = _shown(cell)
        assert 0 < shown < total, "the replay is still playing"
        ARTIFACTS.mkdir(exist_ok=True)
        live.screenshot(path=str(ARTIFACTS / "browser-replay-playing.png"))

        # Next to the end: it ends as the run's record, like the timed replay above it
        _next_until(cell, ".planbook-record")
        cell.locator(".planbook-record tr[data-step='convert']", has_text="[✓]").first.wait_for(timeout=RUN_TIMEOUT_MS)
        timed = page.locator(".jp-CodeCell").filter(has_text="%replay euros --speed 3")
        timed.locator(".planbook-record tr[data-step='convert']", has_text="[✓]").first.wait_for(timeout=RUN_TIMEOUT_MS)
        # the one-liner below shows the live widget
        page.locator(".planbook-live .pb-row[data-step='rate_backup']").wait_for(timeout=30_000)
        assert page.get_by_text("Error displaying widget").count() == 0

        save_notebook(page)
        outputs = saved_outputs(lab.root / NAME)
        assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})], "a saved output keeps a widget"
        records = [o for o in outputs if "planbook-record" in output_text(o, "text/html")]
        assert len(records) == 3, "the two replays' records and the one-liner's"
        # the page still shows the one-liner's live widget (put back after the save)
        page.locator(".planbook-live .pb-row[data-step='rate_backup']").wait_for(timeout=10_000)

        lab.delete_sessions()  # the kernel is gone: no widget model survives
        open_notebook(page, lab, NAME, kernel=False)
        page.locator(".planbook-record tr[data-step='rate_backup']", has_text="[✓]").first.wait_for(timeout=30_000)
        # every output is drawn as it scrolls into view: wait for the three, do not count at once
        page.wait_for_function("() => document.querySelectorAll('.planbook-record').length === 3", timeout=30_000)
        assert page.get_by_text("Error displaying widget").count() == 0
        assert not errors, errors
