"""A run's record in an UNTRUSTED notebook (a fresh clone, a download, GitHub's "open"), in
JupyterLab and Notebook 7, in the light and the dark theme, in headless Chromium.

An untrusted notebook's outputs pass the front end's sanitizer: it strips SVG, ``<style>`` and
every CSS value that uses ``var()`` or ``color-mix()``. The record must survive it whole. A
notebook made here by running plans in a real kernel (nbclient: a serial run with a failure and
a replan, and a parallel run), never signed, is opened in both front ends and both themes from
one server, and the test checks, from what the browser rendered:

- the timeline's bars and the graph's nodes are elements with a size (not run-on text), a
  serial run is one lane and the parallel run more;
- every text of the record (step rows, bar labels, badges, verdict, panes) meets WCAG AA
  (4.5:1) against what is behind it, from computed styles (opacity included);
- nothing that carried meaning was stripped: the same elements, the same texts, the same
  titles and every style declaration the record wrote are still there.

Run it with ``pytest -m browser tests/browser/test_record_untrusted.py -p no:cacheprovider``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from browser_support import (
    TEXT_CONTRAST_JS,
    Lab,
    chromium_path,
    execute_notebook,
    launched_chromium,
    set_theme,
    start_lab,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "%load_ext planbook\nimport time, planbook\nfrom planbook import ScriptedPlanner\n"
    "@planbook.tool\ndef fetch(source: str) -> str:\n"
    "    'Fetch a source (beta is down).'\n    if source == 'beta':\n"
    "        raise ConnectionError('beta is down')\n    return source.upper()\n\n"
    "@planbook.tool\ndef nap(seconds: float) -> str:\n    'Sleep a little.'\n    time.sleep(seconds)\n    return 'rested'\n\n"
    "planner = ScriptedPlanner({None: [], 'beta': [{'id': 'gamma', 'tool': 'fetch', 'args': {'source': 'gamma'}},\n"
    "    {'id': 'delta', 'task': 'Fetch beta again', 'tool': 'fetch', 'args': {'source': 'beta'}, 'on_failure': 'abort'}]})",
    "%%plan serial\ngoal: fetch sources one at a time (beta is replanned, then fails the run)\nsteps:\n"
    "  - {id: alpha, task: Fetch alpha, tool: fetch, args: {source: alpha}}\n"
    "  - {id: beta, task: Fetch beta, tool: fetch, args: {source: beta}, needs: [alpha]}\n"
    "  - {id: delta, task: Fetch delta, tool: fetch, args: {source: delta}}",
    "# NBVAL_RAISES_EXCEPTION\ntry:\n    %run_plan serial --planner planner --on-failure replan\nexcept Exception as exc:\n"
    "    print(type(exc).__name__)",
    "%%plan wide\ngoal: four naps, two at a time\nsteps:\n"
    + "".join(f"  - {{id: nap{i}, task: Nap {i}, tool: nap, args: {{seconds: 0.15}}}}\n" for i in range(1, 5))
    + "  - {id: wake, task: Wake up, tool: fetch, args: {source: done}, needs: [nap1, nap2, nap3, nap4]}",
    "w = %run_plan wide --parallel 2",
]
NAME = "untrusted-record.ipynb"
FRONT_ENDS = ("lab", "notebook7")
THEMES = ("JupyterLab Light", "JupyterLab Dark")


class Shape(HTMLParser):
    """What a record's HTML holds: its elements by tag, its titles, its texts and each element's
    style declarations (property names), in document order."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.titles: list[str] = []
        self.styles: list[list[str]] = []
        self.text: list[str] = []
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        found = dict(attrs)
        if found.get("title"):
            self.titles.append(found["title"] or "")
        if found.get("style"):
            self.styles.append(declared(found["style"] or ""))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def declared(style: str) -> list[str]:
    return sorted(part.split(":", 1)[0].strip().lower() for part in style.split(";") if ":" in part)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, list[str]]]:
    """The notebook, executed in a kernel (not signed: untrusted), and one server for both front ends."""
    chromium = chromium_path()
    if not (chromium.is_file() and os.access(chromium, os.X_OK)):
        if os.environ.get("CI"):
            pytest.fail(f"no Chromium at {chromium} and CI is set", pytrace=False)
        pytest.skip(f"no Chromium at {chromium}")
    root = tmp_path_factory.mktemp("untrusted")
    source = root / "source.ipynb"
    write_notebook(source, CELLS)
    nb = execute_notebook(source, root / NAME, store_widget_state=False)
    source.unlink()
    records = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "planbook-record" in o.get("data", {}).get("text/html", "")]
    assert len(records) == 2, "the two runs did not leave their records"
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    lab = start_lab(root)
    try:
        yield lab, records
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def browser(server: tuple[Lab, list[str]]) -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium




# Everything the page shows of each record: trust, sizes, lanes, styles, texts, contrast.
READ_JS = r"""() => {
  const out = { trusted: null, records: [] };
  if (window.jupyterapp && window.jupyterapp.shell.currentWidget && window.jupyterapp.shell.currentWidget.content) {
    const cells = window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.model.type === 'code' && c.model.outputs.length);
    out.trusted = cells.some(c => c.model.trusted);
  }
  out.light = document.body.dataset.jpThemeLight;
""" + TEXT_CONTRAST_JS + r"""
  const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  for (const root of document.querySelectorAll('.planbook-record')) {
    root.querySelectorAll('details').forEach(d => d.open = true);
    const tags = {};
    for (const e of root.querySelectorAll('*')) tags[e.tagName.toLowerCase()] = (tags[e.tagName.toLowerCase()] || 0) + 1;
    tags['div'] = (tags['div'] || 0) + 1;  // the root itself
    const styled = [root, ...root.querySelectorAll('[style]')].map(e => (e.getAttribute('style') || '').split(';')
      .filter(p => p.includes(':')).map(p => p.split(':')[0].trim().toLowerCase()).sort());
    const shown = texts(root), checked = shown.length;
    const failures = shown.filter(t => t.ratio < 4.5).map(t => ({ text: t.text.slice(0, 40), ratio: +t.ratio.toFixed(2),
                                                                  fg: t.fg, bg: t.bg }));
    const rows = Array.from(root.querySelectorAll('table.planbook-steps > tbody > tr'));
    out.records.push({
      svg: root.querySelectorAll('svg').length, tags, styled,
      titles: Array.from(root.querySelectorAll('[title]')).map(e => e.getAttribute('title')),
      text: root.textContent,
      lanes: root.querySelectorAll('.planbook-timeline .pb-lane').length,
      bars: Array.from(root.querySelectorAll('.planbook-timeline .pb-bar')).map(e => ({ size: box(e),
        display: getComputedStyle(e).display, fill: getComputedStyle(e).backgroundColor, text: e.textContent })),
      nodes: Array.from(root.querySelectorAll('.planbook-graph .pb-node')).map(e => ({ size: box(e),
        display: getComputedStyle(e).display, fill: getComputedStyle(e).backgroundColor })),
      rows: rows.map(r => ({ size: box(r), mark: r.querySelector('td').textContent, bg: getComputedStyle(r).backgroundColor })),
      checked, failures,
    });
  }
  return out;
}"""


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_an_untrusted_record_survives_the_sanitizer_in_light_and_dark(
        server: tuple[Lab, list[str]], browser: Any, front_end: str) -> None:
    lab, records = server
    shapes = [Shape(html) for html in records]
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        for theme in THEMES:
            where = f"{front_end}, {theme}"
            page, found = _open_untrusted(context, lab, front_end, NAME, theme, records=2, where=where)
            light = "true" if "Light" in theme else "false"
            serial, wide = found["records"]
            for got, shape, name in ((serial, shapes[0], "serial"), (wide, shapes[1], "parallel")):
                at = f"{where}, {name} run"
                assert got["svg"] == 0 and shape.tags["svg"] == 0
                # nothing that carried meaning was stripped: elements, texts, titles, style declarations
                assert got["tags"] == dict(shape.tags), f"{at}: elements changed: {got['tags']} != {dict(shape.tags)}"
                assert " ".join(got["text"].split()) == " ".join("".join(shape.text).split()), at
                assert got["titles"] == shape.titles, f"{at}: titles changed"
                assert got["styled"] == shape.styles, f"{at}: style declarations were dropped: " + str(
                    [(a, b) for a, b in zip(got["styled"], shape.styles) if a != b][:3])
                # bars and nodes are drawn boxes with a fill, not run-on text
                assert got["bars"] and got["nodes"] and got["rows"]
                for item in got["bars"] + got["nodes"]:
                    assert item["size"][0] > 0 and item["size"][1] > 0 and item["display"] == "inline-block", (at, item)
                    assert item["fill"] not in ("rgba(0, 0, 0, 0)", "transparent"), (at, item)
                assert all(r["size"][1] > 0 for r in got["rows"])
                assert not got["failures"], f"{at}: text below WCAG AA 4.5:1: {got['failures'][:6]}"
                assert got["checked"] > 20, f"{at}: only {got['checked']} texts checked"
            assert serial["lanes"] == 1, f"{where}: a serial run drawn in {serial['lanes']} lanes"
            assert wide["lanes"] >= 2, f"{where}: two naps at a time drawn in one lane"
            failed = [r for r in serial["rows"] if r["mark"] == "[✗]"]
            assert failed and all(r["bg"] not in ("rgba(0, 0, 0, 0)", "transparent") for r in failed), where
            for i, name in enumerate(("serial", "parallel")):
                page.locator(".planbook-record").nth(i).screenshot(
                    path=str(_artifacts() / f"record-untrusted-{front_end}-{'light' if light == 'true' else 'dark'}-{name}.png"))
            page.close()
            lab.delete_sessions()
    finally:
        set_theme(lab, THEMES[0])
        context.close()


def _artifacts() -> Path:
    path = Path(__file__).resolve().parents[2] / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


#: the committed tutorials whose records hold a timeline and a graph people read: the lesson of
#: chapter 2 (failures and replans) and of chapter 3 (one at a time against parallel lanes)
COMMITTED = ("02-failure-and-replanning.ipynb", "03-dependencies.ipynb")


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_the_committed_tutorials_records_read_untrusted_in_light_and_dark(
        server: tuple[Lab, list[str]], browser: Any, front_end: str) -> None:
    """What a student opens first: the committed notebooks as a clone gives them (untrusted,
    never executed here). Every record's timeline and graph are drawn boxes, not run-on text,
    every text reads at 4.5:1 in both themes, and no record lost an element to the sanitizer."""
    lab, _ = server
    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        for name in COMMITTED:
            source = notebooks / name
            target = lab.root / f"clone-{front_end}-{name}"
            target.write_bytes(source.read_bytes())  # as cloned: no signature in this server's database
            nb = json.loads(source.read_text(encoding="utf-8"))
            stored = [Shape("".join(o["data"]["text/html"])) for c in nb["cells"] if c["cell_type"] == "code"
                      for o in c.get("outputs", []) if "planbook-record" in "".join(o.get("data", {}).get("text/html", ""))]
            assert stored, f"{name} holds no run record"
            for theme in THEMES:
                where = f"{name}, {front_end}, {theme}"
                page, found = _open_untrusted(context, lab, front_end, target.name, theme, records=len(stored),
                                              where=where)
                assert page.get_by_text("Error displaying widget").count() == 0, where
                with_timeline = 0
                for i, (got, shape) in enumerate(zip(found["records"], stored)):
                    at = f"{where}, record {i + 1}"
                    assert got["svg"] == 0 and got["tags"] == dict(shape.tags), f"{at}: elements changed"
                    assert got["styled"] == shape.styles, f"{at}: style declarations were dropped"
                    for item in got["bars"] + got["nodes"]:
                        assert item["size"][0] > 0 and item["size"][1] > 0 and item["display"] == "inline-block", (at, item)
                    assert not got["failures"], f"{at}: text below WCAG AA 4.5:1: {got['failures'][:6]}"
                    with_timeline += bool(got["bars"]) and bool(got["nodes"])
                assert with_timeline, f"{where}: no record drew a timeline and a graph"
                page.close()
                lab.delete_sessions()
    finally:
        set_theme(lab, THEMES[0])
        context.close()


def _open_untrusted(context: Any, lab: Lab, front_end: str, name: str, theme: str, *, records: int,
                    where: str) -> tuple[Any, dict[str, Any]]:
    """Open notebook ``name`` in ``front_end`` with ``theme`` set, wait for its ``records`` records
    and the theme, and read what the page shows (READ_JS); it must have opened untrusted."""
    set_theme(lab, theme)
    path = f"/lab/tree/{name}?token={lab.token}&reset" if front_end == "lab" else f"/notebooks/{name}?token={lab.token}"
    page = context.new_page()
    page.goto(lab.url(path))
    page.wait_for_function(f"() => document.querySelectorAll('.planbook-record').length === {records}", timeout=30_000)
    light = "true" if "Light" in theme else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=30_000)
    found = page.evaluate(READ_JS)
    if found["trusted"] is not None:
        assert found["trusted"] is False, f"{where}: the notebook opened as trusted"
    return page, found
