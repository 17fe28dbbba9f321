"""A page reloaded during a run still ends with the run's record in the saved notebook (headless Chromium).

When a run ends, the kernel updates its display to the run's static record by the display's id;
a page reloaded during the run no longer knows that id, and used to keep the widget, which,
saved and reopened without the kernel, said "Error displaying widget: model not found". The
widget is the one live channel after a reload: the kernel keeps it open (``ended``), and the page
asks it for the record and puts it in the widget's place. Run All queues the cells after the run
before the reload; they run before the reloaded page can ask, and the widget is still there then.

For a foreground ``%run_plan`` (the kernel is busy, so the reloaded page learns of the widget
only once the cell ends) and a ``--background`` run (the reloaded page shows the live view again),
in JupyterLab and Notebook 7: run a plan whose second step waits for the test, save, reload the
tab, let the run finish, save, shut the kernel down, reopen: the output is the run's record.

Run it alone with ``pytest -m browser tests/browser/test_browser_reload.py -p no:cacheprovider``.
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
    save_notebook,
    saved_outputs,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]



def _cells(flag: str, background: bool) -> list[str]:
    run = "h = %run_plan waits --background\nh" if background else "r = %run_plan waits"
    return [
        "%load_ext planbook\n%plan_store off\nimport pathlib, time, planbook\n\n@planbook.tool\ndef first() -> str:\n"
        "    print('first step printed this')\n    return 'one'\n\n@planbook.tool\ndef waits() -> str:\n"
        f"    while not pathlib.Path({flag!r}).exists():  # the test creates it after the reload\n"
        "        time.sleep(0.05)\n    return 'two'",
        "%%plan waits\ngoal: a run the test reloads the page during\nsteps:\n  - {id: s1, tool: first}\n"
        "  - {id: s2, tool: waits, needs: [s1]}\n",
        run,
        # Run All queues this cell before the reload: it starts as soon as the run's cell ends, before
        # the reloaded page could ask for anything
        "print('the next cell ran')",
    ]


def _path(server: Lab, front_end: str, name: str) -> str:
    return f"/lab/tree/{name}?token={server.token}&reset" if front_end == "lab" else f"/notebooks/{name}?token={server.token}"


def _open(page: Any, server: Lab, front_end: str, name: str) -> None:
    page.goto(server.url(_path(server, front_end, name)))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)


@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
@pytest.mark.parametrize("mode", ["foreground", "background"])
def test_a_run_whose_page_was_reloaded_is_saved_as_its_record(
    request: pytest.FixtureRequest, browser: Any, front_end: str, mode: str
) -> None:
    server: Lab = request.getfixturevalue("lab" if front_end == "lab" else "notebook7")
    name, flag = f"reload-{mode}-{front_end}.ipynb", f"release-{mode}-{front_end}"
    write_notebook(server.root / name, _cells(flag, mode == "background"))
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: None if "/static/notebook/notebook_core." in (exc.stack or "")
            else errors.append(f"{exc} {exc.stack or ''}"))
    try:
        _open(page, server, front_end, name)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        _command(page, "notebook:run-all-cells")
        page.wait_for_selector(".planbook-live .pb-row.planbook-completed[data-step='s1']", timeout=RUN_TIMEOUT_MS)
        save_notebook(page)
        assert any(WIDGET_MIME in o.get("data", {}) for o in saved_outputs(server.root / name))  # the live view is saved

        page.reload()
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        if mode == "background":  # the kernel is free: the reloaded page shows the live view again
            page.wait_for_selector(".planbook-live .pb-row.planbook-in_progress[data-step='s2']", timeout=RUN_TIMEOUT_MS)
        (server.root / flag).write_text("go", encoding="utf-8")
        # the run ends; the reloaded page puts the run's record where the widget was
        record = page.locator(".jp-OutputArea-output .planbook-record")
        record.locator("tr[data-step='s2']", has_text="[✓]").wait_for(timeout=RUN_TIMEOUT_MS)
        assert page.locator(".planbook-live").count() == 0
        assert page.get_by_text("Error displaying widget").count() == 0
        save_notebook(page)
        outputs = saved_outputs(server.root / name)
        assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})], "the saved notebook keeps the widget"
        assert sum("planbook-record" in "".join(o.get("data", {}).get("text/html", "")) for o in outputs) == 1

        server.delete_sessions()  # the kernel is gone: nothing holds the run's widget any more
        _open(page, server, front_end, name)
        page.locator(".planbook-record tr[data-step='s2']", has_text="[✓]").wait_for(timeout=30_000)
        assert page.get_by_text("Error displaying widget").count() == 0
        assert "completed" in page.locator(".planbook-record .planbook-verdict").first.inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator(".planbook-record").first.screenshot(path=str(ARTIFACTS / f"browser-reload-{mode}-{front_end}.png"))
        assert not errors, errors
    finally:
        context.close()
        server.delete_sessions()
