"""The live view's controls and texts read in both themes (issue 37 §5): every text, button included,
is at least 4.5:1 (WCAG AA) against what is behind it, from computed styles, in JupyterLab Light
and Dark. (The record's contrast is measured by tests/browser/test_record_untrusted.py; this is the
live widget's: the Approve / Skip / Edit buttons of a waiting row drew the row's amber #7a4f00 on
the dark theme's #212121, 2.3:1.)

A background run waits for an approval: its row shows Approve / Skip / Edit, the run Pause / Stop;
the test opens the row's pane and its editor (Save and run / Cancel) and measures everything shown.

Run it alone with ``pytest -m browser tests/browser/test_browser_live_contrast.py -p no:cacheprovider``.
"""

from __future__ import annotations

from typing import Any

import pytest

from browser_support import COLOUR_JS, KERNEL_IDLE_JS, RUN_TIMEOUT_MS, Lab, _command, set_theme, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "%load_ext planbook\n%plan_store off\nimport planbook\n\nbox = planbook.Toolbox()\n\n"
    "@box.tool\ndef write(topic: str) -> str:\n    return f'notes on {topic}'\n\n"
    "@box.tool(approve=True)\ndef send(text: str) -> str:\n    return 'sent: ' + text",
    "%%plan mail --tools box\nsteps:\n  - {id: write, tool: write, args: {topic: bees}}\n"
    "  - {id: send, tool: send, args: {text: $write}, needs: [write]}\n",
    "handle = %run_plan mail --tools box --background\nhandle",
]
THEMES = ("JupyterLab Light", "JupyterLab Dark")

# every visible text of the live views (buttons included): its contrast against what is behind it
CONTRAST_JS = r"""() => {
""" + COLOUR_JS + r"""
  function opacity(el) {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
    return o;
  }
  const failures = [], buttons = [];
  let checked = 0;
  for (const root of document.querySelectorAll('.planbook-live')) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    while (walker.nextNode()) {
      const node = walker.currentNode, el = node.parentElement;
      if (!node.textContent.trim() || !el || seen.has(el) || !el.getClientRects().length) continue;
      if (el.closest('svg') || el.tagName === 'STYLE') continue;
      seen.add(el);
      const cs = getComputedStyle(el);
      if (cs.visibility === 'hidden' || cs.display === 'none') continue;
      const bg = behind(el);
      let fg = parse(cs.color);
      fg = over([fg[0], fg[1], fg[2], fg[3] * opacity(el)], bg);
      const r = ratio(fg, bg);
      checked++;
      if (el.tagName === 'BUTTON') buttons.push(node.textContent.trim());
      if (r < 4.5) failures.push({ text: node.textContent.trim().slice(0, 40), tag: el.tagName, ratio: +r.toFixed(2),
        fg: fg.slice(0, 3).map(Math.round), bg: bg.slice(0, 3).map(Math.round) });
    }
  }
  return { checked, failures, buttons, light: document.body.dataset.jpThemeLight };
}"""


def test_the_live_views_controls_read_in_light_and_dark(browser: Any, lab: Lab) -> None:
    write_notebook(lab.root / "live-contrast.ipynb", CELLS)
    try:
        for theme in THEMES:
            set_theme(lab, theme)
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            page = context.new_page()
            try:
                page.goto(lab.url(f"/lab/tree/live-contrast.ipynb?token={lab.token}&reset"))
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
                page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
                page.wait_for_function(f"() => document.body.dataset.jpThemeLight === "
                                       f"'{'true' if 'Light' in theme else 'false'}'", timeout=30_000)
                _command(page, "notebook:run-all-cells")
                row = ".planbook-live .pb-row[data-step='send'].planbook-waiting"
                page.wait_for_selector(f"{row} button[data-decide='approve']", timeout=RUN_TIMEOUT_MS)
                # the waiting row reads as waiting, with the value it will be sent
                assert page.locator(f"{row} .m").inner_text() == "[?]"
                assert "send(text='notes on bees')" in page.locator(f"{row} .k").inner_text()
                page.locator(f"{row} button[data-decide='edit']").click()  # its pane and editor open
                page.wait_for_selector(".planbook-live .pb-pane button[data-decide='save']", timeout=RUN_TIMEOUT_MS)
                assert page.locator(".planbook-live .pb-pane button[data-decide='save']").inner_text() == "Save and run"
                status = page.locator(".planbook-live .pb-pane tr").first.inner_text()
                assert "waiting" in status and "not_started" not in status, status
                found = page.evaluate(CONTRAST_JS)
                assert found["light"] == ("true" if "Light" in theme else "false")
                for control in ("Approve", "Skip", "Edit", "Pause", "Stop", "Save and run", "Cancel"):
                    assert control in found["buttons"], (theme, control, found["buttons"])
                assert found["checked"] >= 20, found
                assert not found["failures"], (theme, found["failures"])
                # saved, the editor closes (it stayed open, the decision already sent) and the step runs
                page.locator(".planbook-live .pb-pane button[data-decide='save']").click()
                page.wait_for_function("() => !document.querySelector('.planbook-live textarea.pb-editor')",
                                       timeout=RUN_TIMEOUT_MS)
                page.wait_for_selector(".planbook-record", timeout=RUN_TIMEOUT_MS)
            finally:
                context.close()
                lab.delete_sessions()
    finally:
        set_theme(lab, "JupyterLab Light")
