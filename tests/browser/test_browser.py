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

Run it alone with ``pytest -m browser tests/browser/test_browser.py -p no:cacheprovider``.
It needs a Chromium binary: ``$PLANBOOK_CHROMIUM``, else ``/usr/bin/chromium`` (Debian's
``chromium`` package); Playwright's own browser downloads are never used. Without it the
test is skipped, except with ``CI`` set, where it fails.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from browser_support import (
    ARTIFACTS,
    CHROMIUM_ENV,
    COLOUR_JS,
    KERNEL_IDLE_JS,
    ROOT,
    RUN_TIMEOUT_MS,
    TIMINGS,
    WIDGET_MIME,
    Lab,
    _command,
    _require_chromium,
    _shot,
    chromium_path,
    copy_notebooks,
    execute_notebook,
    trust,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TUTORIALS = ["01-first-plan.ipynb", "02-failure-and-replanning.ipynb", "03-dependencies.ipynb"]
OPTIONAL = sorted(p.name for p in (ROOT / "notebooks").glob("04-*.ipynb"))
NOTEBOOKS = TUTORIALS + OPTIONAL


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
PROGRESS_JS = """() => Array.from(document.querySelectorAll('.planbook-record .planbook-progress > div')).map(b => b.style.width)"""


def _open(page: Any, lab: Lab, name: str) -> None:
    page.goto(lab.url(f"/lab/tree/{name}?token={lab.token}&reset"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
    page.wait_for_function(IDLE_JS, timeout=30_000)  # the toolbar's idle can precede the kernel


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
        # the first run's live view, or the record it leaves when the run ends at once
        page.wait_for_selector(".planbook-live .pb-bar, .planbook-record", timeout=RUN_TIMEOUT_MS)
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
        # every run's live view ended as its static record: no widget is left in the notebook
        # (saved, it would say "Error displaying widget" once its kernel is gone)
        assert widget_outputs == 0, f"{name}: {widget_outputs} widget output(s) left after the runs ended"
        records = page.locator(".jp-OutputArea-output .planbook-record")
        if name in TUTORIALS:  # they run plans with %run_plan, which leaves the run's record
            assert records.count() > 0, f"{name} shows no run record: %run_plan should leave one"
        assert page.get_by_text("Error displaying widget").count() == 0, f"{name}: a widget failed to render"
        news = page.get_by_text("Jupyter news").count()
        assert news == 0, f"{name}: the news prompt is showing: binder/postBuild's overrides.json did not apply"
        if records.count():
            assert page.locator(".planbook-record .planbook-progress").count() > 0, f"{name}: a record has no progress bar"
            assert page.locator(f"{RECORD_ROWS}").count() > 0, f"{name}: a record shows no step rows"
        if name.startswith("01-"):
            _check_first_notebook(page)
        if name.startswith("02-"):  # the replans' revision history: removed struck through, added highlighted
            assert page.locator(".planbook-record .planbook-removed del").count() > 0, "02: no struck-through removed step"
            assert page.locator(".planbook-record .planbook-added ins").count() > 0, "02: no highlighted added step"
        _screenshot(page, name, records.count())
    finally:
        context.close()
        lab.delete_sessions()
        TIMINGS[f"{name}_s"] = time.monotonic() - started


def _screenshot(page: Any, name: str, records: int) -> None:
    """Scroll to the most telling run (a revision history if any, else a run record) and save."""
    if records:
        history = page.locator(".planbook-record .planbook-revisions .planbook-diff")
        target = history.first if history.count() else page.locator(".planbook-record").first
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
    assert rows, "01: no step rows found in the run records"
    unfinished = [r for r in rows if r["mark"] != "[✓]" or r["cls"]]  # a completed row has no class: its mark says it
    assert not unfinished, f"01: step rows that did not reach ✓: {unfinished}"
    # the result pane opened from code (view.open("fetch")) is open and shows what the tool printed
    pane = page.locator(".planbook-record details[open] [data-pane='fetch']", has_text="fetched 'Fog': 7 lines")
    assert pane.count() == 1, "01: step fetch's result pane does not show the tool's printed line"
    assert pane.is_visible()


# Step rows of the run records (planbook/views/record.py writes them: a completed row carries no
# class, its mark says it; a row that needs a look has its status's class)
RECORD_ROWS = ".planbook-record table.planbook-steps > tbody > tr"
STEP_ROWS_JS = """() => Array.from(document.querySelectorAll('.planbook-record table.planbook-steps > tbody > tr')).map(r => ({
  step: r.dataset.step, cls: r.className, mark: r.querySelector('td').textContent.trim()}))"""
#: the record's rows whose mark is [✓]
COMPLETED_ROWS_JS = ("() => Array.from(document.querySelectorAll('.planbook-record table.planbook-steps > tbody > tr'))"
                     ".filter(r => r.cells[0].textContent.startsWith('[✓]'))")


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
        page.wait_for_selector(".planbook-live svg.pb-gantt .pb-bar-ex rect")
        _shot(page, f"live-{front_end}-timeline")
        page.click(".planbook-live .pb-tab[data-tab='graph']")
        page.wait_for_selector(".planbook-live svg.pb-graph .pb-node")
        assert page.locator(".planbook-live svg.pb-graph .pb-node").count() == 8
        assert page.locator(".planbook-live svg.pb-graph .pb-edge").count() == 7
        _shot(page, f"live-{front_end}-graph")
        print(f"{front_end}: a click on a finished row showed its pane in {took:.0f} ms while the run went on")
        assert took < 200, f"{front_end}: the pane took {took:.0f} ms to open"
        page.wait_for_function(DONE_JS, timeout=RUN_TIMEOUT_MS, polling=200)
        # the run ended: its live view is now the static record (rows, panes, timeline without a kernel)
        page.wait_for_function(f"() => ({COMPLETED_ROWS_JS})().length === 8")
        assert page.locator(".planbook-live").count() == 0
        page.click(".planbook-record .planbook-timeline-box > summary")
        page.wait_for_selector(".planbook-record .planbook-timeline .pb-bar")
        assert page.locator(".planbook-record .planbook-timeline .pb-lane").count() == 1  # a serial run: one lane
        page.locator(".planbook-record").first.screenshot(path=str(ARTIFACTS / f"browser-live-{front_end}-final.png"))
        assert page.get_by_text("Error displaying widget").count() == 0
        assert not errors, f"{front_end}: console errors: {errors}"
    finally:
        context.close()
        server.delete_sessions()


# ------------------------------------------------------------------ saved runs reopen, without a kernel
#: the tutorials reopened: a first plan (with a pane opened from code) and failures with replans
SAVED = ["01-first-plan.ipynb", "02-failure-and-replanning.ipynb"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tutorials executed by nbclient, with and without stored widget state (as a teacher
    hands them out), by name ``state-NAME`` / ``nostate-NAME``."""
    _require_chromium()
    src = tmp_path_factory.mktemp("saved-src")
    copy_notebooks(src)
    out: dict[str, Path] = {}
    for name in SAVED:
        for state in (False, True):
            target = src / f"{'state' if state else 'nostate'}-{name}"
            execute_notebook(src / name, target, store_widget_state=state)
            out[target.name] = target
    return out


def _records_in(path: Path) -> int:
    nb = json.loads(path.read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})], f"{path.name} stored a widget output"
    return sum("planbook-record" in "".join(o.get("data", {}).get("text/html", "")) for o in outputs)


TRUSTED_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code' && c.model.outputs.length);
  return cells.length > 0 && cells.every(c => c.model.trusted);
}"""


def _open_any(page: Any, server: Lab, front_end: str, name: str) -> None:
    path = f"/lab/tree/{name}?token={server.token}&reset" if front_end == "lab" else f"/notebooks/{name}?token={server.token}"
    page.goto(server.url(path))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)


def _artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
@pytest.mark.parametrize("state", ["nostate", "state"])
def test_a_saved_trusted_notebook_reopens_with_every_run(
    request: pytest.FixtureRequest, browser: Any, saved: dict[str, Path], front_end: str, state: str
) -> None:
    """nbclient-executed tutorials, trusted (so the front end would render a widget if one were
    stored), reopened without their kernel: every run shows its final state and its marks."""
    server: Lab = request.getfixturevalue("lab" if front_end == "lab" else "notebook7")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        for name in SAVED:
            source = saved[f"{state}-{name}"]
            target = server.root / f"reopen-{front_end}-{source.name}"
            target.write_bytes(source.read_bytes())
            trust(server, target)
            expected = _records_in(target)
            assert expected > 0, f"{name}: no run record stored"
            _open_any(page, server, front_end, target.name)
            assert page.evaluate(TRUSTED_JS), f"{front_end}: {target.name} did not open as trusted"
            page.wait_for_function(f"() => document.querySelectorAll('.planbook-record').length >= {expected}",
                                   timeout=20_000)
            assert page.get_by_text("Error displaying widget").count() == 0, f"{front_end} {target.name}"
            assert page.locator(".planbook-record").count() == expected
            done = page.locator(f"{RECORD_ROWS}:not([class])", has_text="[✓]")
            assert done.count() > 0
            done.first.scroll_into_view_if_needed()  # cells off screen are painted lazily
            done.first.wait_for(state="visible")
            # its mark is painted (a cell scrolled into view is rendered on a later frame)
            page.wait_for_function(f"() => ({COMPLETED_ROWS_JS})()[0].innerText.includes('[✓]')", timeout=10_000)
            if name.startswith("02-"):  # failed steps and the revision history are there too
                assert page.locator(".planbook-record tr.planbook-failed").count() > 0
                assert page.locator(".planbook-record .planbook-added ins").count() > 0
            page.screenshot(path=str(_artifacts() / f"browser-reopen-{front_end}-{source.stem}.png"))
            server.delete_sessions()
    finally:
        context.close()
        server.delete_sessions()


def test_nbconvert_html_shows_every_run_with_javascript_off(browser: Any, saved: dict[str, Path]) -> None:
    """GitHub and nbviewer run no JavaScript: a notebook saved with widget state, exported by
    nbconvert, still shows every run (no blank output where a widget was)."""
    import nbformat
    from nbconvert import HTMLExporter

    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    try:
        for key in (f"state-{SAVED[1]}", f"state-{SAVED[0]}", f"nostate-{SAVED[0]}"):
            path = saved[key]
            expected = _records_in(path)
            body, _ = HTMLExporter().from_notebook_node(nbformat.read(str(path), as_version=4))
            html_path = path.with_suffix(".html")
            html_path.write_text(body, encoding="utf-8")
            page.goto(html_path.as_uri())
            records = page.locator(".planbook-record")
            assert records.count() == expected, f"{key}: {records.count()} of {expected} runs shown"
            for i in range(expected):
                box = records.nth(i).bounding_box()
                assert box and box["height"] > 40, f"{key}: run {i + 1} is blank"
                assert "Run " in records.nth(i).inner_text()
            # a pane opens without JavaScript (a <details>)
            page.locator(".planbook-record details.planbook-pane > summary").first.click()
            assert page.locator(".planbook-record details.planbook-pane[open] .planbook-pane-body").first.is_visible()
            assert page.get_by_text("Error displaying widget").count() == 0
            page.screenshot(path=str(_artifacts() / f"browser-nbconvert-{path.stem}.png"))
    finally:
        context.close()


# ------------------------------------------------------------------ the cache, the timeline and the contrast
#: a first run stores a and b; the second answers them from the cache, fails f, and waits in
#: gate until the test creates the file "release" (an event, not a sleep) so the live view can be read
CACHE_CELLS = [
    "import os, time, planbook\nfrom planbook.engine.runner import Runner\nfrom planbook.views import watch\n"
    "tools = planbook.Toolbox()\n\n@tools.tool\ndef quick(x: int) -> int:\n    'A fast step.'\n    return x + 1\n\n"
    "@tools.tool(cache=False)\ndef broken(x: int) -> int:\n    'Fails.'\n    raise ValueError('broken on purpose')\n\n"
    "@tools.tool(cache=False)\ndef gate(x: int) -> int:\n    'Waits for the test.'\n"
    "    while not os.path.exists('release'):\n        time.sleep(0.02)\n    return x * 10\n",
    "spec = '''goal: cached steps, a failure, a wait\nsteps:\n"
    "  - {id: a_first_step_with_a_long_name, tool: quick, args: {x: 1}}\n"
    "  - {id: b, tool: quick, args: {x: $a_first_step_with_a_long_name}}\n"
    "  - {id: f, tool: broken, args: {x: 1}}\n  - {id: g, tool: gate, args: {x: $b}}\n"
    "  - {id: h, tool: quick, args: {x: $g}}\n'''\n"
    "first = planbook.run(spec.replace('tool: broken', 'tool: quick').replace('tool: gate', 'tool: quick'), "
    "tools=tools, store='runs.sqlite', cache=True)\nfirst.status",
    "runner = Runner(planbook.Plan.parse(spec), tools=tools, store='runs.sqlite', cache=True, on_failure='skip')\n"
    "with watch(runner):\n    result = runner.run()",
    "from planbook.views.live import shown_live\nshown_live(result)  # the one-line verdict %run_plan returns",
]

# WCAG contrast of every rendered text against what is behind it, from computed styles
CONTRAST_JS = r"""(selector) => {
""" + COLOUR_JS + r"""
  const failures = []; let checked = 0;
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    while (walker.nextNode()) {
      const node = walker.currentNode, el = node.parentElement;
      if (!node.textContent.trim() || !el || seen.has(el)) continue;
      seen.add(el);
      if (el.closest('style, title') || !el.getClientRects().length) continue;
      const cs = getComputedStyle(el);
      if (cs.visibility === 'hidden' || cs.display === 'none') continue;
      let bg, fg;
      if (el instanceof SVGElement) {
        bg = behind(el.ownerSVGElement);
        const rect = el.classList.contains('pb-on-bar') ? el.previousElementSibling : null;
        if (rect) bg = over(parse(getComputedStyle(rect).fill), bg);
        fg = parse(cs.fill);
      } else {
        bg = behind(el);
        fg = parse(cs.color);
      }
      if (!fg) { failures.push({ text: node.textContent.trim().slice(0, 40), problem: 'colour not read: ' + (cs.fill || cs.color) }); continue; }
      fg = over(fg, bg);
      const r = ratio(fg, bg);
      checked++;
      if (r < 4.5) failures.push({ text: node.textContent.trim().slice(0, 40), ratio: +r.toFixed(2),
        fg: fg.slice(0, 3).map(Math.round), bg: bg.slice(0, 3).map(Math.round) });
    }
  }
  return { checked, failures };
}"""

THEME_JS = """async (theme) => {
  await window.jupyterapp.commands.execute('apputils:change-theme', { theme });
}"""

# the timeline's axis, bars and labels, measured from the drawing
TIMELINE_JS = """(sel) => {
  const svg = document.querySelector(sel);
  const box = e => e.getBBox();
  const bars = Array.from(svg.querySelectorAll('.pb-bar-ex rect, .pb-bar-cached rect')).map(box);
  const labels = Array.from(svg.querySelectorAll('text.pb-on-bar')).map(t => [box(t), box(t.previousElementSibling)]);
  const outside = labels.filter(([t, r]) => t.x < r.x - 0.5 || t.x + t.width > r.x + r.width + 0.5).length;
  let overlaps = 0;
  for (let i = 0; i < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
    const [a] = labels[i], [b] = labels[j];
    if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) overlaps++;
  }
  return { ticks: svg.querySelectorAll('.pb-tick-label').length, bars: bars.length,
           narrowest: Math.min(...bars.map(b => b.width)), outside, overlaps,
           cached: svg.querySelectorAll('.pb-bar-cached').length };
}"""


# the record's timeline (HTML, planbook/views/charts.py), measured from the page
RECORD_TIMELINE_JS = """(sel) => {
  const root = document.querySelector(sel);
  const bars = Array.from(root.querySelectorAll('.pb-bar'));
  let overlaps = 0;
  for (const lane of root.querySelectorAll('.pb-lane')) {
    const boxes = Array.from(lane.querySelectorAll('.pb-bar')).map(b => b.getBoundingClientRect());
    for (let i = 1; i < boxes.length; i++) if (boxes[i].left < boxes[i - 1].right - 0.5) overlaps++;
  }
  const clipped = bars.filter(b => getComputedStyle(b).overflow !== 'hidden').length;
  return { ticks: root.querySelectorAll('.pb-tick').length, bars: bars.length, overlaps, clipped,
           narrowest: Math.min(...bars.map(b => b.getBoundingClientRect().width)),
           cached: root.querySelectorAll('.pb-bar-cached').length };
}"""


def _check_record_timeline(page: Any, selector: str, where: str) -> None:
    """Ticks; bars at least the minimum width, clipping their labels, never over each other in a lane."""
    found = page.evaluate(RECORD_TIMELINE_JS, selector)
    assert found["ticks"] >= 2, f"{where}: no time axis ticks: {found}"
    assert found["narrowest"] >= 3.9, f"{where}: a bar narrower than the minimum: {found}"
    assert found["overlaps"] == 0 and found["clipped"] == 0, f"{where}: labels overflow or bars overlap: {found}"
    assert found["cached"] == 2, f"{where}: the two cached steps are not drawn: {found}"


def _contrast(page: Any, selector: str, where: str) -> int:
    found = page.evaluate(CONTRAST_JS, selector)
    assert not found["failures"], f"{where}: text below WCAG AA 4.5:1: {found['failures'][:8]}"
    assert found["checked"] > 10, f"{where}: only {found['checked']} texts checked"
    return found["checked"]


def _set_theme(page: Any, theme: str) -> None:
    light = "true" if "Light" in theme else "false"
    page.evaluate(THEME_JS, theme)
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=20_000)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _check_timeline(page: Any, svg: str, where: str) -> None:
    """Ticks on a time axis; labels inside their bars (so they never overlap); the min bar width."""
    found = page.evaluate(TIMELINE_JS, svg)
    assert found["ticks"] >= 2, f"{where}: no time axis ticks: {found}"
    assert found["narrowest"] >= 3.9, f"{where}: a bar narrower than the minimum: {found}"
    assert found["outside"] == 0 and found["overlaps"] == 0, f"{where}: labels overflow or overlap: {found}"
    assert found["cached"] == 2, f"{where}: the two cached steps are not drawn: {found}"


@pytest.mark.parametrize("front_end", ["lab", "notebook7"])
def test_cached_steps_timeline_and_contrast_in_light_and_dark(
    request: pytest.FixtureRequest, browser: Any, front_end: str
) -> None:
    """Steps answered from the cache are marked in the live view and in the record (row, header,
    pane, timeline); the timeline has an axis and readable labels; every text in both views
    meets WCAG AA in the light and the dark theme."""
    server: Lab = request.getfixturevalue("lab" if front_end == "lab" else "notebook7")
    name = f"cache-{front_end}.ipynb"
    for leftover in ("release", "runs.sqlite"):
        (server.root / leftover).unlink(missing_ok=True)
    write_notebook(server.root / name, CACHE_CELLS)
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    checked: dict[str, int] = {}
    live, record = ".planbook-live", ".planbook-record"
    try:
        _open_any(page, server, front_end, name)
        _set_theme(page, "JupyterLab Light")
        _command(page, "notebook:run-all-cells")
        page.wait_for_selector(f"{live} .pb-row.planbook-in_progress[data-step='g']", timeout=RUN_TIMEOUT_MS)
        # the cache, in the live view: marks on the rows, the count in the header, the pane
        assert page.locator(f"{live} .pb-row.planbook-step-cached").count() == 2
        assert "2 cached" in page.locator(f"{live} .pb-cached-count").inner_text()
        assert page.locator(f"{live} .pb-row[data-step='b'] .d").inner_text() == "cached"
        page.click(f"{live} .pb-row[data-step='b']")
        assert "cached: the result of step b in run" in page.locator(f"{live} .pb-pane[data-pane='b']").inner_text()
        checked["live light steps"] = _contrast(page, live, f"{front_end} live view, light")
        page.click(f"{live} .pb-tab[data-tab='timeline']")
        page.wait_for_selector(f"{live} svg.planbook-timeline .pb-bar-cached")
        _check_timeline(page, f"{live} svg.planbook-timeline", f"{front_end} live timeline")
        checked["live light timeline"] = _contrast(page, live, f"{front_end} live timeline, light")
        _set_theme(page, "JupyterLab Dark")
        checked["live dark timeline"] = _contrast(page, live, f"{front_end} live timeline, dark")
        page.click(f"{live} .pb-tab[data-tab='steps']")
        checked["live dark steps"] = _contrast(page, live, f"{front_end} live view, dark")
        page.locator(live).first.screenshot(path=str(_artifacts() / f"browser-cache-{front_end}-live-dark.png"))
        (server.root / "release").write_text("go", encoding="utf-8")  # the run goes on and ends
        page.wait_for_function(DONE_JS, timeout=RUN_TIMEOUT_MS, polling=200)
        page.wait_for_selector(f"{record} tr.planbook-step-cached")
        assert page.locator(f"{record} tr.planbook-step-cached").count() == 2
        assert "2 cached" in page.locator(f"{record} .planbook-cached-count").inner_text()
        page.evaluate("() => document.querySelectorAll('.planbook-record details').forEach(d => d.open = true)")
        assert "cached: the result of step b in run" in page.locator(f"{record} [data-pane='b']").inner_text()
        _check_record_timeline(page, f"{record} .planbook-timeline", f"{front_end} record timeline")
        # the graph's edges are the badges' "needs": b needs a, g needs b, h needs g
        assert page.locator(f"{record} .planbook-graph .pb-node", has_text="· needs").count() == 3
        verdicts = f"{record}, div.planbook-verdict.mathjax_ignore"  # and the verdict line of the cell's value
        assert page.locator("div.planbook-verdict.mathjax_ignore").count() == 1
        checked["record dark"] = _contrast(page, verdicts, f"{front_end} record, dark")
        page.locator(record).first.screenshot(path=str(_artifacts() / f"browser-cache-{front_end}-record-dark.png"))
        _set_theme(page, "JupyterLab Light")
        checked["record light"] = _contrast(page, verdicts, f"{front_end} record, light")
        page.locator(record).first.screenshot(path=str(_artifacts() / f"browser-cache-{front_end}-record-light.png"))
        print(f"{front_end}: texts checked for contrast: {checked}")
    finally:
        (server.root / "release").write_text("go", encoding="utf-8")
        context.close()
        server.delete_sessions()
