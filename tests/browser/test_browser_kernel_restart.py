"""A kernel restarted during a run: the live view says so, stops its clock, and saves as a record.

A restart closes no comm: the run's output used to keep saying "running…" with its clock counting,
and, saved, reopened as "Error displaying widget: model not found" (the kernel that held the model
is gone, and no record ever replaced the widget). Now the page learns the widget's comm is dead,
says "the kernel restarted during this run" and how to go on (``%run_plan NAME --resume`` for a
stored run; what was lost for a run no store kept), stops its clocks, and a save writes that
message with the run as the page last drew it in the widget's place.

A plan whose second step waits on an event nobody sets (the restart ends it), in JupyterLab, run in
the foreground (stored in a file) and with ``--background`` (no store): restart the kernel through
JupyterLab's command and its dialog, check the view, save, reopen without a kernel.

Run it alone with ``pytest -m browser tests/browser/test_browser_kernel_restart.py -p no:cacheprovider``.
"""

from __future__ import annotations

from typing import Any

import pytest

from browser_support import (
    ARTIFACTS,
    KERNEL_IDLE_JS,
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

ERROR = "Error displaying widget"


def _cells(store: str, background: bool) -> list[str]:
    run = "h = %run_plan waits --background\nh" if background else "r = %run_plan waits"
    return [
        f"%load_ext planbook\n%plan_store {store}\nimport threading, planbook\n"
        "release = threading.Event()  # never set: the kernel restart ends the run\n\n"
        "@planbook.tool\ndef first() -> str:\n    return 'one'\n\n"
        "@planbook.tool\ndef waits() -> str:\n    release.wait(600)\n    return 'two'",
        "%%plan waits\ngoal: a run the kernel restarts during\nsteps:\n  - {id: s1, tool: first}\n"
        "  - {id: s2, tool: waits, needs: [s1]}\n",
        run,
    ]


@pytest.mark.parametrize(("mode", "store", "words"), [
    ("foreground", "runs.sqlite", "`%run_plan waits --resume` continues it"),
    ("background", "off", "its progress is lost"),
])
def test_a_kernel_restart_during_a_run_is_said_and_saved_as_a_record(
    lab: Lab, browser: Any, mode: str, store: str, words: str
) -> None:
    name = f"restart-{mode}.ipynb"
    write_notebook(lab.root / name, _cells(store, mode == "background"))
    with notebook_page(browser, lab, name) as (page, errors):
        _command(page, "notebook:run-all-cells")
        live = page.locator(".planbook-live").first
        live.locator(".pb-row.planbook-completed[data-step='s1']").wait_for(timeout=RUN_TIMEOUT_MS)
        live.get_by_text("running…").wait_for(timeout=RUN_TIMEOUT_MS)
        counts = live.locator(".pb-counts")
        counts.filter(has_text="elapsed").wait_for(timeout=RUN_TIMEOUT_MS)
        before = counts.inner_text()
        # the clock counts while the run goes on (what must stop once the kernel is gone)
        page.wait_for_function("(t) => { const c = document.querySelector('.planbook-live .pb-counts');"
                               " return !!c && c.textContent !== t; }", arg=before, timeout=RUN_TIMEOUT_MS)

        _command(page, "notebook:restart-kernel")  # JupyterLab asks first: accept
        page.locator(".jp-Dialog .jp-mod-accept").click(timeout=20_000)
        gone = live.locator(".planbook-kernel-gone")
        gone.wait_for(timeout=RUN_TIMEOUT_MS)
        said = gone.inner_text()
        assert said.startswith("the kernel restarted during this run"), said
        assert words in said, said
        assert live.get_by_text("running…").count() == 0
        assert live.locator("[data-control]").count() == 0, "Pause / Stop steer a run that is gone"
        stopped = counts.inner_text()
        page.wait_for_function(KERNEL_IDLE_JS, timeout=60_000)  # the new kernel is up: seconds later
        live.locator(".pb-tab[data-tab='steps']").click()  # a redraw: the clock still reads the same
        assert counts.inner_text() == stopped, "the clock went on after the kernel went"
        ARTIFACTS.mkdir(exist_ok=True)
        live.screenshot(path=str(ARTIFACTS / f"browser-kernel-restart-{mode}.png"))

        save_notebook(page)
        outputs = saved_outputs(lab.root / name)
        assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})], "the saved notebook keeps the widget"
        kept = [o for o in outputs if "planbook-kernel-gone" in output_text(o, "text/html")]
        assert len(kept) == 1, outputs
        assert words in output_text(kept[0], "text/plain")
        assert "[✓] s1" in output_text(kept[0], "text/plain")
        # the page shows the view again once the file is written, still saying the kernel went
        live.locator(".planbook-kernel-gone").wait_for(timeout=10_000)

        lab.delete_sessions()
        open_notebook(page, lab, name, kernel=False)
        record = page.locator(".planbook-gone-record")
        record.locator("tr[data-step='s1']", has_text="[✓]").wait_for(timeout=30_000)
        assert words in record.locator(".planbook-kernel-gone").inner_text()
        assert "cut short" in record.locator("tr[data-step='s2']").inner_text()
        assert page.get_by_text(ERROR).count() == 0
        record.screenshot(path=str(ARTIFACTS / f"browser-kernel-restart-{mode}-reopened.png"))
        assert not errors, errors
