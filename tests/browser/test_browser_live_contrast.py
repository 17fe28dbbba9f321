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

from browser_support import RUN_TIMEOUT_MS, TEXT_CONTRAST_JS, Lab, _command, notebook_page, set_theme, write_notebook

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
""" + TEXT_CONTRAST_JS + r"""
  const failures = [], buttons = [];
  let checked = 0;
  for (const root of document.querySelectorAll('.planbook-live')) {
    for (const t of texts(root, el => el.closest('svg') || el.tagName === 'STYLE')) {
      checked++;
      if (t.el.tagName === 'BUTTON') buttons.push(t.text);
      if (t.ratio < 4.5) failures.push({ text: t.text.slice(0, 40), tag: t.el.tagName, ratio: +t.ratio.toFixed(2), fg: t.fg, bg: t.bg });
    }
  }
  return { checked, failures, buttons, light: document.body.dataset.jpThemeLight };
}"""


def test_the_live_views_controls_read_in_light_and_dark(browser: Any, lab: Lab) -> None:
    write_notebook(lab.root / "live-contrast.ipynb", CELLS)
    try:
        for theme in THEMES:
            set_theme(lab, theme)
            with notebook_page(browser, lab, "live-contrast.ipynb") as (page, errors):
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
                assert not errors, (theme, errors)
    finally:
        set_theme(lab, "JupyterLab Light")
