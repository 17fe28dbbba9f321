"""The live view's timeline follows the record's rules (planbook/views/charts.py), in JupyterLab.

Lanes by real overlap in time: a serial run of many instant steps is one lane, however wide
its bars are drawn (the view used to place bars by drawn extent, so a serial run of fast steps
looked parallel), and two steps that really ran at once take two. One linear scale: no log scale
switched on by itself. Checked while the run goes (the live view), on its timeline's caption.
Past ``charts.MAX_BARS`` executions the live timeline is summarised in the record's words, and an
interrupted execution is amber (the record's fill), not red. (The constants the JavaScript mirrors
are checked against charts.py without a browser: tests/views/test_timeline_parity.py.)

Run it alone with ``pytest -m browser tests/browser/test_browser_live_timeline.py -p no:cacheprovider``.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from browser_support import RUN_TIMEOUT_MS, Lab, _command, notebook_page, write_notebook
from planbook.data.timeline import Execution
from planbook.views import charts, html

pytestmark = [pytest.mark.browser, pytest.mark.slow]

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
    with notebook_page(browser, lab, "live-timeline.ipynb") as (page, errors):
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
        assert not errors, errors


def _summary_cells() -> list[str]:
    """201 executions (one over the record's MAX_BARS) then a run interrupted at its first step."""
    steps = "".join(f"  - {{id: q{i}, tool: fast, args: {{i: {i}}}}}\n" for i in range(charts.MAX_BARS))
    return [
        "%load_ext planbook\n%plan_store off\nimport pathlib, time, planbook\n\n@planbook.tool\ndef fast(i: int) -> int:\n"
        "    return i\n\n@planbook.tool\ndef waits(gate: str) -> str:\n"
        "    while not pathlib.Path('release-' + gate).exists():  # the test creates it once it has looked\n"
        "        time.sleep(0.05)\n    return gate\n\n@planbook.tool\ndef cut(label: str) -> str:\n"
        "    if not pathlib.Path('cut-once').exists():  # the user's Ctrl-C, at its first call\n"
        "        pathlib.Path('cut-once').write_text('x')\n        raise KeyboardInterrupt\n    return label",
        f"%%plan many\nsteps:\n{steps}  - {{id: w, tool: waits, args: {{gate: many}}}}\n",
        "%%plan cutplan\nsteps:\n  - {id: c, tool: cut, args: {label: c}}\n"
        "  - {id: w2, tool: waits, args: {gate: cut}, needs: [c]}\n",
        f"r1 = %run_plan many --max-steps {charts.MAX_BARS + 5}",
        "try:\n    %run_plan cutplan\nexcept KeyboardInterrupt as stopped:\n    print(type(stopped).__name__)",
        "r2 = %run_plan cutplan",
    ]


def _rgb(color: str) -> str:
    return "rgb({}, {}, {})".format(*(int(color[i:i + 2], 16) for i in (1, 3, 5)))


def test_a_long_run_is_summarised_and_an_interrupted_bar_is_amber(browser: Any, lab: Lab) -> None:  # noqa: F811
    for leftover in ("release-many", "release-cut", "cut-once"):
        (lab.root / leftover).unlink(missing_ok=True)
    write_notebook(lab.root / "live-summary.ipynb", _summary_cells())
    with notebook_page(browser, lab, "live-summary.ipynb") as (page, errors):
        _command(page, "notebook:run-all-cells")
        page.wait_for_selector(".planbook-live .pb-row.planbook-in_progress[data-step='w']", timeout=RUN_TIMEOUT_MS)
        # the record's words (charts.timeline_html), past MAX_BARS executions
        words = (f"{charts.MAX_BARS + 1} executions, ", f": too many to draw one by one, so the run's time is cut in "
                 f"{charts.BUCKETS} slices, each coloured by the worst status in it (side by side slices alike are "
                 f"one bar; a bar's title lists its steps)")
        caption = _caption(page, 0)
        assert caption.startswith(words[0]) and caption.endswith(words[1]), caption
        live = page.locator(".planbook-live").first
        assert live.locator("svg.pb-gantt[data-scale='summary']").count() == 1
        slices = live.locator("svg.pb-gantt .pb-slice")
        assert 1 <= slices.count() <= charts.BUCKETS
        # w runs from its start to now: the slices it spans are running (a bar is at most a tenth of the run)
        fills = live.locator("svg.pb-gantt .pb-slice.pb-running rect").evaluate_all(
            "rects => rects.map(r => getComputedStyle(r).fill)")
        assert fills and set(fills) == {_rgb(html.FILLS["running"])}, fills
        (lab.root / "release-many").write_text("go", encoding="utf-8")
        # the continued run shows the interrupted execution of c (amber) and its second one (green)
        page.wait_for_selector(".planbook-live .pb-row.planbook-in_progress[data-step='w2']", timeout=RUN_TIMEOUT_MS)
        caption = _caption(page, 0)
        assert caption.startswith("3 executions in 1 lane,"), caption
        live = page.locator(".planbook-live").first
        cut = live.locator("svg.pb-gantt .pb-bar-ex.pb-interrupted[data-step='c'] rect")
        assert cut.count() == 1
        assert cut.evaluate("r => getComputedStyle(r).fill") == _rgb(html.FILLS["interrupted"])
        assert live.locator("svg.pb-gantt .pb-bar-ex.pb-completed[data-step='c']").count() == 1
        (lab.root / "release-cut").write_text("go", encoding="utf-8")
        page.wait_for_function("() => document.querySelectorAll('.planbook-record').length === 3",
                               timeout=RUN_TIMEOUT_MS)
        assert not errors, errors


# planview.js as a module of its own, with its timeline's helpers exported (no Lab: the functions alone)
HELPERS_JS = """async ([source, lanes, items, span]) => {
  const blob = new Blob([source + '\\nexport { fit, summarise };'], { type: 'text/javascript' });
  const js = await import(URL.createObjectURL(blob));
  const fitted = lanes.map((lane) => { const bars = lane.map(([x0, w]) => ({ x0, w })); js.fit(bars);
    return bars.map((b) => [b.x0, b.w]); });
  const slices = js.summarise(items.map(([start, end, state, step]) => ({ start, end, state, step })), span)
    .map((s) => [s.k, s.end, s.n, s.state, s.first, s.last]);
  return { fitted, slices };
}"""

_STATES = {"completed": dict(ok=True), "failed": dict(ok=False), "interrupted": dict(ok=False, interrupted=True),
           "running": dict()}


def _record_slices(items: list[tuple[float, float, Execution]], span: float) -> list[list[Any]]:
    """charts._summary's bars as [first slice, end slice, executions, state, first step, last step]."""
    out, k = [], 0
    for state, n, first, last, gap, width in re.findall(
            r'class="pb-bar pb-(\w+)" title="(\d+) executions?, steps (\S+)\.\.(\S+), [^"]*" '
            r'style="display:inline-block;(?:margin-left:(\d+)%;)?width:(\d+)%', charts._summary(items, span)):
        k += int(gap or 0)
        out.append([k, k + int(width), int(n), state, first, last])
        k += int(width)
    return out


def test_the_live_placement_and_summary_are_the_records(browser: Any) -> None:
    """planview.js's fit and summarise give what charts.fit and charts._summary give, on the same input."""
    rng = random.Random(27)
    lanes = [[(rng.uniform(0, 100), max(charts.MIN_BAR, rng.expovariate(1 / 8))) for _ in range(rng.randint(1, 12))]
             for _ in range(40)]
    for lane in lanes:
        lane.sort()
    lanes.append([(99.9, 0.1), (99.95, 0.05)])  # bars at the very end: pulled back from the last
    items: list[tuple[float, float, Execution]] = []
    for i in range(500):
        start, state = rng.uniform(0, 60), rng.choices(list(_STATES), weights=(94, 2, 2, 2))[0]
        end = start + rng.expovariate(1 / 0.4)
        ex = Execution(i + 1, f"s{i}", 1, 1, None, start, None if state == "running" else end, **_STATES[state])
        items.append((start, end, ex))
    items.sort(key=lambda item: item[0])
    span = max(end for _, end, _ in items)
    record = [[list(bar[:2]) for bar in charts.fit([(x0, w, None, None, None) for x0, w in lane])] for lane in lanes]
    source = (Path(charts.__file__).parent / "static" / "planview.js").read_text(encoding="utf-8")
    page = browser.new_context().new_page()
    try:
        live = page.evaluate(HELPERS_JS, [source, lanes, [[s, e, charts._state(ex), ex.step] for s, e, ex in items], span])
    finally:
        page.context.close()
    flat = [[x for bar in lane for x in bar] for lane in live["fitted"]]
    assert flat == [pytest.approx([x for bar in lane for x in bar]) for lane in record]
    assert live["slices"] == _record_slices(items, span)
