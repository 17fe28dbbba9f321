"""The tutorial notebooks in a real JupyterLab, driven by headless Chromium.

nbval checks the text outputs; only a browser shows whether the plan widgets render,
update and reach their final state. For each tutorial notebook the test opens a copy in
JupyterLab, clears it, runs all cells, waits for the kernel to go idle, and checks that
every code cell ran, that only cells tagged ``raises-exception`` raised, that the plan
widgets rendered (no "Error displaying widget", no news prompt), that in the first
notebook every step row shows ✓ and every progress bar is full, and that the second
shows its revision history (removed steps struck through, added ones highlighted).
Notebooks other than the three tutorials (``04-*``) are run and checked too, without
requiring a widget. A screenshot per notebook and the timings go to ``test-artifacts/``.

A second test runs a slow plan in JupyterLab and in Notebook 7 and, while the cell still
runs, clicks a finished row and times its pane opening (the browser answers from what the
kernel already sent), then switches to the Timeline and the Graph; screenshots of each view.

Run it alone with ``pytest -m browser tests/test_browser.py -p no:cacheprovider``.
It needs a Chromium binary: ``$PLANBOOK_CHROMIUM``, else ``/usr/bin/chromium`` (Debian's
``chromium`` package); Playwright's own browser downloads are never used. Without it the
test is skipped, except with ``CI`` set, where it fails.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import (
    CHROMIUM_ARGS,
    CHROMIUM_ENV,
    ROOT,
    Lab,
    chromium_path,
    copy_notebooks,
    start_lab,
    write_notebook,
)

pytestmark = pytest.mark.browser

TUTORIALS = ["01-first-plan.ipynb", "02-failure-and-replanning.ipynb", "03-dependencies.ipynb"]
OPTIONAL = sorted(p.name for p in (ROOT / "notebooks").glob("04-*.ipynb"))
NOTEBOOKS = TUTORIALS + OPTIONAL
ARTIFACTS = ROOT / "test-artifacts"
RUN_TIMEOUT_MS = 45_000
TIMINGS: dict[str, float] = {}


def _require_chromium() -> Path:
    chromium = chromium_path()
    if chromium.is_file() and os.access(chromium, os.X_OK):
        return chromium
    where = f"{chromium} (from ${CHROMIUM_ENV})" if os.environ.get(CHROMIUM_ENV) else f"{chromium} (set ${CHROMIUM_ENV} to use another browser)"
    if os.environ.get("CI"):
        pytest.fail(
            f"no Chromium at {where} and CI is set: .ci/run must install it first "
            "(apt-get update && apt-get install -y chromium)", pytrace=False,
        )
    pytest.skip(f"no Chromium at {where}: install Debian's chromium package (apt-get install -y chromium)")


def test_the_browser_binary_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CHROMIUM_ENV, raising=False)
    assert chromium_path() == Path("/usr/bin/chromium")
    monkeypatch.setenv(CHROMIUM_ENV, "")
    assert chromium_path() == Path("/usr/bin/chromium")
    fake = tmp_path / "my-chromium"
    monkeypatch.setenv(CHROMIUM_ENV, str(fake))
    assert chromium_path() == fake
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"no Chromium at {fake} \\(from \\$PLANBOOK_CHROMIUM\\) and CI is set"):
        _require_chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no Chromium at"):
        _require_chromium()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert _require_chromium() == fake


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require_chromium()  # before starting Lab: no browser, no point
    root = tmp_path_factory.mktemp("lab-root")
    copy_notebooks(root)  # the test runs copies: the committed notebooks stay as they are
    lab = start_lab(root)
    TIMINGS["lab_ready_s"] = time.monotonic() - lab.started
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def browser(lab: Lab) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed: pip install the project's test extra", pytrace=False)
        pytest.skip("playwright is not installed (pip install playwright; never `playwright install`)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(_require_chromium()), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-timings.json").write_text(json.dumps(TIMINGS, indent=2), encoding="utf-8")
    print("\nbrowser test timings (s):", json.dumps({k: round(v, 2) for k, v in TIMINGS.items()}))


# What the notebook model says about every code cell (JupyterLab exposes its app as
# window.jupyterapp with --LabApp.expose_app_in_browser).
CELLS_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets.filter(c => c.model.type === 'code').map((c, i) => ({
    index: i,
    source: c.model.sharedModel.getSource().slice(0, 80),
    count: c.model.executionCount,
    tags: c.model.getMetadata('tags') || [],
    errors: c.model.outputs.toJSON().filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue),
    widgets: c.model.outputs.toJSON().filter(
      o => o.data && o.data['application/vnd.jupyter.widget-view+json']).length,
  }));
}"""

DONE_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.sessionContext || !panel.sessionContext.session) return false;
  const kernel = panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code' && c.model.sharedModel.getSource().trim());
  return kernel && kernel.status === 'idle' && cells.every(c => c.model.executionCount !== null);
}"""

IDLE_JS = """() => {
  const bar = document.querySelector('#jp-main-statusbar');
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return bar && bar.textContent.includes('| Idle') && panel && panel.sessionContext
    && panel.sessionContext.session && panel.sessionContext.session.kernel
    && panel.sessionContext.session.kernel.status === 'idle';
}"""

# Every widget-view output in the model has a rendered view in the DOM.
RENDERED_JS = """(expected) => document.querySelectorAll('.jp-OutputArea-output .planbook-live').length >= expected"""

PROGRESS_JS = """() => Array.from(document.querySelectorAll('.planbook-live .pb-bar > div')).map(b => b.style.width)"""


def _open(page: Any, lab: Lab, name: str) -> None:
    page.goto(lab.url(f"/lab/tree/{name}?token={lab.token}&reset"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
    page.wait_for_function(IDLE_JS, timeout=30_000)  # the toolbar's idle can precede the kernel


def _command(page: Any, command: str) -> None:
    page.evaluate(f"() => {{ window.jupyterapp.commands.execute({json.dumps(command)}); }}")


def _run_all(page: Any, name: str, started: float | None = None) -> list[dict[str, Any]]:
    """Clear, run all cells, wait until every cell ran and the kernel is idle.

    With ``started`` (a monotonic time), records the time until the first progress bar shows.
    """
    _command(page, "notebook:clear-all-cell-outputs")  # so a cell that did not run shows no count
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.every(c => c.model.type !== 'code' "
        "|| c.model.executionCount === null)", timeout=10_000,
    )
    _command(page, "notebook:run-all-cells")
    if started is not None:
        page.wait_for_selector(".planbook-live .pb-bar", timeout=RUN_TIMEOUT_MS)
        TIMINGS["cold_start_to_first_widget_s"] = time.monotonic() - started
    try:
        page.wait_for_function(DONE_JS, timeout=RUN_TIMEOUT_MS, polling=200)
    except Exception as exc:  # name the cells that did not run, and why the run stopped
        cells = page.evaluate(CELLS_JS)
        stuck = [c for c in cells if c["count"] is None]
        raise AssertionError(
            f"{name}: not every cell ran within {RUN_TIMEOUT_MS / 1000:.0f} s; not run: "
            f"{[c['source'] for c in stuck][:3]}; errors so far: {[c['errors'] for c in cells if c['errors']]}"
        ) from exc
    return page.evaluate(CELLS_JS)


def _check_cells(name: str, cells: list[dict[str, Any]]) -> int:
    """Errors only where a cell says it raises; returns the number of widget outputs."""
    for cell in cells:
        expected = "raises-exception" in cell["tags"]
        where = f"{name} code cell {cell['index'] + 1} ({cell['source'].splitlines()[0] if cell['source'] else ''!r})"
        if expected:
            assert cell["errors"], f"{where} is tagged raises-exception but did not raise"
        else:
            assert not cell["errors"], f"{where} raised: {cell['errors']}"
    return sum(c["widgets"] for c in cells)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(lab: Lab, browser: Any, name: str) -> None:
    assert (lab.root / name).exists(), f"notebooks/{name} is missing: it is one of the tutorials"
    started = time.monotonic()
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        _open(page, lab, name)
        stored_errors = page.get_by_text("Error displaying widget").count()
        assert stored_errors == 0, f"{name} as committed shows 'Error displaying widget' {stored_errors}x on open"
        first = name == NOTEBOOKS[0] and "cold_start_to_first_widget_s" not in TIMINGS
        cells = _run_all(page, name, lab.started if first else None)
        widget_outputs = _check_cells(name, cells)
        if name in TUTORIALS:  # they run plans with %run_plan, which shows the live view
            assert widget_outputs > 0, f"{name} displayed no widget: %run_plan should show the live plan view"
        page.wait_for_function(RENDERED_JS, arg=widget_outputs, timeout=20_000)
        assert page.get_by_text("Error displaying widget").count() == 0, f"{name}: a widget failed to render"
        news = page.get_by_text("Jupyter news").count()
        assert news == 0, f"{name}: the news prompt is showing: binder/postBuild's overrides.json did not apply"
        if widget_outputs:
            assert page.locator(".planbook-live .pb-bar").count() > 0, f"{name}: no live plan view rendered"
            assert page.locator(".planbook-live .pb-row").count() > 0, f"{name}: the live view shows no step rows"
        if name.startswith("01-"):
            _check_first_notebook(page)
        if name.startswith("02-"):  # the replans' revision history: removed struck through, added highlighted
            assert page.locator(".planbook-live .planbook-removed del").count() > 0, "02: no struck-through removed step"
            assert page.locator(".planbook-live .planbook-added ins").count() > 0, "02: no highlighted added step"
        _screenshot(page, name, widget_outputs)
    finally:
        context.close()
        lab.delete_sessions()
        TIMINGS[f"{name}_s"] = time.monotonic() - started


def _screenshot(page: Any, name: str, widget_outputs: int) -> None:
    """Scroll to the most telling widget (a revision history if any, else a plan view) and save."""
    if widget_outputs:
        history = page.locator(".planbook-live .planbook-revisions .planbook-diff")
        target = history.first if history.count() else page.locator(".planbook-live").first
        target.scroll_into_view_if_needed()
        target.wait_for(state="visible")
        # cells off screen are painted lazily (content-visibility): let two frames pass
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.wait_for_timeout(300)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"browser-{Path(name).stem}.png"))


def _check_first_notebook(page: Any) -> None:
    """Every run in the first notebook succeeds: full bars, and ✓ on every step row."""
    widths = page.evaluate(PROGRESS_JS)
    assert widths and all(float(w.rstrip("%")) == 100 for w in widths), f"01: progress bars not full: {widths}"
    rows = page.evaluate(STEP_ROWS_JS)
    assert rows, "01: no step rows found in the live plan views"
    unfinished = [r for r in rows if r["mark"] != "[✓]" or "planbook-completed" not in r["cls"]]
    assert not unfinished, f"01: step rows that did not reach ✓: {unfinished}"
    # the result pane opened from code (view.open("fetch")) shows what the tool printed
    pane = page.locator(".planbook-live .pb-pane[data-pane='fetch']", has_text="fetched 'Fog': 7 lines")
    assert pane.count() == 1, "01: step fetch's result pane does not show the tool's printed line"


# Step rows of the live plan views (planbook/views/static/planview.js draws them).
STEP_ROWS_JS = """() => Array.from(document.querySelectorAll('.planbook-live .pb-row.planbook-step')).map(r => ({
  step: r.dataset.step, cls: r.className, mark: r.querySelector('.m').textContent.trim()}))"""


# ------------------------------------------------------------------ the live view while a run goes
SLOW_CELLS = [
    "%load_ext planbook\nimport time, planbook\n\n@planbook.tool\ndef slow(i: int) -> str:\n"
    "    'A slow step.'\n    print(f'working on {i}')\n    time.sleep(0.7)\n"
    "    return f'result of step {i}\\nsecond line'",
    "%%plan slowplan\ngoal: a slow plan to click through\nsteps:\n"
    + "".join(f"  - {{id: s{i}, tool: slow, args: {{i: {i}}}, task: Step {i}"
              + (f", needs: [s{i - 1}]" if i > 1 else "") + "}\n" for i in range(1, 9)),
    "r = %run_plan slowplan",
]

KERNEL_IDLE_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""

# the last code cell still runs ([*] in its prompt)
RUNNING_JS = """() => {
  const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'));
  return prompts.length > 0 && prompts[prompts.length - 1].textContent.includes('*');
}"""

# click a row and time it until its pane shows the result (the browser answers: the kernel is busy)
CLICK_JS = """async (id) => {
  const row = document.querySelector(`.planbook-live .pb-row[data-step="${id}"]`);
  const t0 = performance.now();
  row.click();
  while (!document.querySelector(`.planbook-live .pb-pane[data-pane="${id}"] .pb-result`))
    await new Promise(r => requestAnimationFrame(r));
  return performance.now() - t0;
}"""


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require_chromium()
    root = tmp_path_factory.mktemp("nb7-root")
    server = start_lab(root, app="notebook")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
def test_a_finished_row_opens_while_the_run_goes(
    request: pytest.FixtureRequest, browser: Any, front_end: str
) -> None:
    """While %run_plan still runs, a click on a finished row opens its pane (in the browser,
    from what the kernel already sent); the Timeline and Graph tabs draw; no widget errors."""
    server: Lab = request.getfixturevalue("lab" if front_end == "lab" else "notebook7")
    name = f"live-{front_end}.ipynb"
    write_notebook(server.root / name, SLOW_CELLS)
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"{msg.text} ({msg.location.get('url')})") if msg.type == "error" else None)
    # Notebook 7 (7.5) throws "reading 'schema'" from its own notebook_core bundle on any
    # notebook, planbook or not: that one is the front end's, every other error counts
    page.on("pageerror", lambda exc: None if "/static/notebook/notebook_core." in (exc.stack or "")
            else errors.append(f"{exc} {exc.stack or ''}"))
    path = f"/lab/tree/{name}?token={server.token}&reset" if front_end == "lab" else f"/notebooks/{name}?token={server.token}"
    try:
        page.goto(server.url(path))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)
        _command(page, "notebook:run-all-cells")
        page.wait_for_selector(".planbook-live .pb-row.planbook-completed[data-step='s2']", timeout=RUN_TIMEOUT_MS)
        assert page.evaluate(RUNNING_JS), f"{front_end}: the run ended before the test could click"
        took = page.evaluate(CLICK_JS, "s1")
        TIMINGS[f"{front_end}_click_to_pane_ms"] = took
        pane = page.locator(".planbook-live .pb-pane[data-pane='s1']")
        assert "result of step 1\nsecond line" in pane.locator(".pb-result").inner_text()  # text, not a repr
        assert "working on 1" in pane.inner_text() and "slow(i=1)" in pane.inner_text()
        assert page.evaluate(RUNNING_JS), f"{front_end}: the pane opened only after the run ended"
        _shot(page, f"live-{front_end}-steps")
        page.click(".planbook-live .pb-tab[data-tab='timeline']")
        page.wait_for_selector(".planbook-live svg.pb-gantt rect.pb-bar-ex")
        _shot(page, f"live-{front_end}-timeline")
        page.click(".planbook-live .pb-tab[data-tab='graph']")
        page.wait_for_selector(".planbook-live svg.pb-graph .pb-node")
        assert page.locator(".planbook-live svg.pb-graph .pb-node").count() == 8
        assert page.locator(".planbook-live svg.pb-graph .pb-edge").count() == 7
        _shot(page, f"live-{front_end}-graph")
        print(f"{front_end}: a click on a finished row showed its pane in {took:.0f} ms while the run went on")
        assert took < 200, f"{front_end}: the pane took {took:.0f} ms to open"
        page.wait_for_function(DONE_JS, timeout=RUN_TIMEOUT_MS, polling=200)
        page.click(".planbook-live .pb-tab[data-tab='steps']")
        page.wait_for_function("() => document.querySelectorAll('.planbook-live .pb-row.planbook-completed').length === 8")
        page.click(".planbook-live .pb-tab[data-tab='timeline']")
        page.wait_for_selector(".planbook-live svg.pb-gantt .pb-critical")  # the finished run's critical path
        _shot(page, f"live-{front_end}-final")
        assert page.get_by_text("Error displaying widget").count() == 0
        assert not errors, f"{front_end}: console errors: {errors}"
    finally:
        context.close()
        server.delete_sessions()


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".planbook-live").first.screenshot(path=str(ARTIFACTS / f"browser-{name}.png"))
