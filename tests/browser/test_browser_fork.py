"""Fork from here in JupyterLab (headless Chromium), and a forked run's record read untrusted.

A background run waits for an approval at its last step, so its live view stays live with
finished steps above. The test opens a finished step's pane, clicks **Fork from here**, sees the
code line the fork will run, gives arguments that do not fit the tool (the signature's error
shows inline, nothing runs), then ones that do, clicks **Fork**, and finds the child's live view
below (its header names the parent; the step the edit does not reach is marked kept). Approving
each run's last step ends it, and each live view becomes its run's record. Then a notebook that
forks a stored run (``%run_plan --fork-at``) is executed by nbclient, never signed, and opened
in the light and the dark theme: the fork's header and the panes' fork line are there, readable.

Every wait is on a DOM state (no sleeps). Run it alone with
``pytest -m browser tests/browser/test_browser_fork.py -p no:cacheprovider``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from browser_support import (
    COLOUR_JS,
    RUN_TIMEOUT_MS,
    Lab,
    _command,
    _shot,
    execute_notebook,
    notebook_page,
    set_theme,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETUP = ("%load_ext planbook\nimport planbook\nbox = planbook.Toolbox()\n\n"
         "@box.tool\ndef add(x: int, by: int) -> int:\n    return x + by\n\n"
         "@box.tool(approve=True)\ndef send(total: int) -> str:\n    return f'sent {total}'")
PLAN = ("%%plan sums --tools box\ngoal: add up, then send (approved)\nsteps:\n"
        "  - {id: a1, tool: add, args: {x: 0, by: 1}}\n"
        "  - {id: a2, tool: add, args: {x: $a1, by: 1}, needs: [a1]}\n"
        "  - {id: b1, tool: add, args: {x: 10, by: 1}}\n"
        "  - {id: send, tool: send, args: {total: $a2}, needs: [a2, b1]}")
CELLS = [SETUP, PLAN, "handle = %run_plan sums --tools box --background\nhandle"]


def _live(page: Any, index: int) -> Any:
    return page.locator(".planbook-live").nth(index)


def test_fork_from_here_shows_the_childs_live_view(lab: Lab, browser: Any) -> None:
    name = "fork-live.ipynb"
    write_notebook(lab.root / name, CELLS)
    with notebook_page(browser, lab, name, height=1400) as (page, errors):
        _command(page, "notebook:run-all-cells")

        parent = _live(page, 0)
        parent.locator(".pb-row[data-step='send'].planbook-waiting").wait_for(timeout=RUN_TIMEOUT_MS)
        parent.locator(".pb-row[data-step='a1'].planbook-completed").click()
        pane = parent.locator(".pb-pane[data-pane='a1']")
        pane.locator("button[data-fork='open']").click()
        args = pane.locator("textarea.planbook-fork-args")
        args.wait_for(timeout=RUN_TIMEOUT_MS)
        assert json.loads(args.input_value()) == {"x": 0, "by": 1}
        code = pane.locator(".planbook-fork-code")
        assert code.inner_text().startswith('planbook.fork("') and 'at="a1"' in code.inner_text()
        assert code.inner_text().endswith('runs.sqlite")')  # the store the magics keep runs in

        # arguments that do not fit the tool: one line beside the step, and no child
        args.fill('{"x": 0, "by": "five"}')
        pane.locator("button[data-fork='go']").click()
        pane.locator(".planbook-fork-error", has_text="argument 'by' of tool 'add' expects int").wait_for(
            timeout=RUN_TIMEOUT_MS)
        assert page.locator(".planbook-live").count() == 1

        args.fill('{"x": 0, "by": 5}')
        assert 'args={"x": 0, "by": 5}' in code.inner_text()  # the line follows the editor
        parent_id = code.inner_text().split('"')[1]
        pane.locator("button[data-fork='go']").click()

        # the child's live view, below the parent's, says what it forked; b1 was kept
        child = _live(page, 1)
        child.locator(".planbook-lineage", has_text=" at a1 — by: 1 → 5").wait_for(timeout=RUN_TIMEOUT_MS)
        lineage = child.locator(".planbook-lineage").inner_text()
        assert f"fork of run {parent_id} at a1" in lineage and "kept 1, re-running 3" in lineage
        child.locator(".pb-row[data-step='b1'] .planbook-cached").wait_for(timeout=RUN_TIMEOUT_MS)
        assert "kept" in (child.locator(".pb-row[data-step='b1'] .planbook-cached").get_attribute("title") or "")
        child.locator(".pb-row[data-step='send'].planbook-waiting").wait_for(timeout=RUN_TIMEOUT_MS)
        _shot(page, "fork-child")

        # both end when their sends are approved: each live view becomes its run's record
        child.locator(".pb-row[data-step='send'] button[data-decide='approve']").click()
        page.locator(".planbook-record .planbook-lineage", has_text=" at a1 — by: 1 → 5").wait_for(
            timeout=RUN_TIMEOUT_MS)
        _live(page, 0).locator(".pb-row[data-step='send'] button[data-decide='approve']").click()
        page.wait_for_function("() => document.querySelectorAll('.planbook-record').length === 2",
                               timeout=RUN_TIMEOUT_MS)
        assert page.locator(".planbook-live").count() == 0
        child_record = page.locator(".planbook-record", has=page.locator(".planbook-lineage"))
        assert "sent 6" in (child_record.text_content() or "")  # a1 = 0 + 5, a2 = a1 + 1 (a closed pane's text)
        assert not errors, errors


THEMES = ("JupyterLab Light", "JupyterLab Dark")
RECORD_CELLS = [
    SETUP.replace("(approve=True)", ""),
    PLAN,
    "r = %run_plan sums --tools box",
    "child = %run_plan sums --tools box --fork-at a1 --set by=5",
]

# the fork's header line and the panes' fork lines as the page shows them, with their contrast
READ_FORK_JS = r"""() => {
""" + COLOUR_JS + r"""
  const out = { lineage: [], code: [], trusted: null, failures: [] };
  const panel = window.jupyterapp.shell.currentWidget;
  if (panel && panel.content && panel.content.widgets)
    out.trusted = panel.content.widgets.some(c => c.model.type === 'code' && c.model.outputs.length && c.model.trusted);
  document.querySelectorAll('.planbook-record details').forEach(d => d.open = true);
  const check = (el) => {
    const cs = getComputedStyle(el), bg = behind(el), fg = parse(cs.color);
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
    const r = ratio(over([fg[0], fg[1], fg[2], fg[3] * o], bg), bg);
    if (r < 4.5) out.failures.push({ text: el.textContent.slice(0, 40), ratio: +r.toFixed(2) });
  };
  for (const el of document.querySelectorAll('.planbook-record .planbook-lineage')) { out.lineage.push(el.textContent); check(el); }
  for (const el of document.querySelectorAll('.planbook-record .planbook-fork-code')) {
    out.code.push({ text: el.textContent, height: el.getBoundingClientRect().height }); check(el);
  }
  return out;
}"""


def test_a_forked_runs_record_reads_untrusted_in_light_and_dark(lab: Lab, browser: Any) -> None:
    source = lab.root / "fork-record-source.ipynb"
    write_notebook(source, RECORD_CELLS)
    nb = execute_notebook(source, lab.root / "fork-record.ipynb", store_widget_state=False)  # never signed
    htmls = [o["data"]["text/html"] for c in nb.cells for o in c.get("outputs", [])
             if "planbook-record" in o.get("data", {}).get("text/html", "")]
    assert len(htmls) == 2 and "planbook-lineage" in htmls[1] and "planbook-lineage" not in htmls[0]
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        for theme in THEMES:
            set_theme(lab, theme)
            page = context.new_page()
            page.goto(lab.url(f"/lab/tree/fork-record.ipynb?token={lab.token}&reset"))
            page.wait_for_function("() => document.querySelectorAll('.planbook-record').length === 2", timeout=30_000)
            light = "true" if "Light" in theme else "false"
            page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=30_000)
            found = page.evaluate(READ_FORK_JS)
            assert found["trusted"] is False, f"{theme}: the notebook opened trusted"
            assert len(found["lineage"]) == 1 and " at a1 — by: 1 → 5; kept 1, re-running 3" in found["lineage"][0]
            assert found["code"] and all(c["height"] > 0 and c["text"].startswith('planbook.fork("')
                                         for c in found["code"]), found["code"]
            assert any('at="a1", args={"x": 0, "by": 1}' in c["text"] for c in found["code"])
            assert not found["failures"], f"{theme}: text below WCAG AA 4.5:1: {found['failures']}"
            page.locator(".planbook-record").nth(1).screenshot(
                path=str(lab.root / f"fork-record-{'light' if light == 'true' else 'dark'}.png"))
            page.close()
            lab.delete_sessions()
    finally:
        set_theme(lab, THEMES[0])
        context.close()
