"""The saved comparison of runs (``%diff_runs``) in an UNTRUSTED notebook, in JupyterLab's light
and dark themes, in headless Chromium.

A comparison is a static record, as a run's record is: a reader of the saved notebook (a clone,
a download) sees it through the front end's sanitizer, which strips SVG, ``<style>`` and every
CSS value using ``var()``. A notebook made here in a real kernel (nbclient) runs a plan of two
chains of three steps and a join, forks it at ``a1`` with ``x=5``, and compares the two runs
(``%diff_runs chains`` and ``--changed-only``); it is never signed. Opened in JupyterLab with
every ``<details>`` open, each comparison must show, from what the browser rendered:

- nothing stripped: the elements, texts, titles and style declarations the saved HTML wrote
  (a table's ``<tbody>`` the browser adds where the HTML left it implied counts as written);
- every visible text at WCAG AA (4.5:1) against what is behind it (opacity included);
- the first divergence's mark (⚑) visible, on the row of ``a1``, with its coloured rule;
- the baseline's column left of the fork's, in the totals, the first divergence and the steps;
- no text that reads ``var(`` or shows raw HTML (a tag or an escaped entity as text).

Every wait is on a DOM state (no sleeps). Run it with
``pytest -m browser tests/browser/test_rundiff_untrusted.py -p no:cacheprovider -o addopts=``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from browser_support import (
    ARTIFACTS,
    COLOUR_JS,
    Lab,
    _require_chromium,
    execute_notebook,
    launched_chromium,
    set_theme,
    start_lab,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    ("%load_ext planbook\nimport planbook\nbox = planbook.Toolbox()\n\n"
    "@box.tool\ndef add(x: int, by: int) -> int:\n    'Add by to x.'\n    return x + by\n\n"
    "@box.tool\ndef total(a: int, b: int) -> int:\n    'Join the two chains.'\n    return a + b"),
    "%plan_store diff-runs.sqlite",
    ("%%plan chains --tools box\ngoal: two chains of three additions, then their sum\nsteps:\n"
    "  - {id: a1, tool: add, args: {x: 0, by: 1}}\n"
    "  - {id: a2, tool: add, args: {x: $a1, by: 1}, needs: [a1]}\n"
    "  - {id: a3, tool: add, args: {x: $a2, by: 1}, needs: [a2]}\n"
    "  - {id: b1, tool: add, args: {x: 10, by: 1}}\n"
    "  - {id: b2, tool: add, args: {x: $b1, by: 1}, needs: [b1]}\n"
    "  - {id: b3, tool: add, args: {x: $b2, by: 1}, needs: [b2]}\n"
    "  - {id: join, tool: total, args: {a: $a3, b: $b3}, needs: [a3, b3]}"),
    "base = %run_plan chains --tools box --no-view",
    "child = %run_plan chains --tools box --no-view --fork-at a1 --set x=5",
    "%diff_runs chains",
    "%diff_runs chains --changed-only",
]
NAME = "rundiff-untrusted.ipynb"
THEMES = ("JupyterLab Light", "JupyterLab Dark")
ROOT_CLASS = "planbook-rundiff"  # the outer element of the comparison's HTML (views/rundiff.py: box("rundiff", ...))
#: raw HTML shown as text: a tag, or an entity the escaping left escaped twice
RAW_HTML = re.compile(r"</?[A-Za-z][A-Za-z0-9-]{0,20}[\s/>]|&(?:#x?[0-9A-Fa-f]{1,6}|[A-Za-z]{2,8});")


class Shape(HTMLParser):
    """What a comparison's saved HTML holds, read as the record test reads a record: elements by
    tag, titles, texts and each element's style declarations (property names), in document order.
    A ``<tr>`` directly in a ``<table>`` counts the ``<tbody>`` every HTML parser puts around it."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.titles: list[str] = []
        self.styles: list[list[str]] = []
        self.text: list[str] = []
        self._sections: list[str] = []  # open table, thead, tbody, tfoot (implied ones too)
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr" and self._sections and self._sections[-1] == "table":
            self.tags["tbody"] += 1
            self._sections.append("tbody")
        if tag in ("table", "thead", "tbody", "tfoot"):
            if tag != "table" and self._sections and self._sections[-1] != "table":
                self._sections.pop()  # an implied tbody ends where the next section starts
            self._sections.append(tag)
        self.tags[tag] += 1
        found = dict(attrs)
        if found.get("title"):
            self.titles.append(found["title"] or "")
        if found.get("style"):
            self.styles.append(declared(found["style"] or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("table", "thead", "tbody", "tfoot") and tag in self._sections:
            while self._sections and self._sections.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def declared(style: str) -> list[str]:
    return sorted(part.split(":", 1)[0].strip().lower() for part in style.split(";") if ":" in part)


def test_shape_counts_the_tbody_a_browser_implies() -> None:
    """The check's own reading: a bare ``<tr>`` in a table implies one ``<tbody>``, an explicit one none."""
    shape = Shape('<table><tr><td>a</td></tr><tr><td>b</td></tr></table>'
                  '<table><thead><tr><th>h</th></tr></thead><tbody><tr><td>c</td></tr></tbody></table>')
    assert shape.tags["tbody"] == 2 and shape.tags["table"] == 2 and shape.tags["tr"] == 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, list[str]]]:
    """The notebook executed in a kernel (never signed: untrusted), its two comparisons, and a Lab serving it."""
    _require_chromium()  # skips without a browser, fails under CI
    root = tmp_path_factory.mktemp("rundiff-untrusted")
    source = root / "source.ipynb"
    write_notebook(source, CELLS)
    nb = execute_notebook(source, root / NAME, store_widget_state=False)
    source.unlink()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, f"the notebook raised: {errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else ""
    diffs = [o["data"]["text/html"] for o in outputs if f'class="{ROOT_CLASS} ' in o.get("data", {}).get("text/html", "")]
    assert len(diffs) == 2, f"expected the two comparisons' HTML, found {len(diffs)}"
    assert (root / "diff-runs.sqlite").is_file(), "%plan_store did not keep the runs in the notebook's folder"
    lab = start_lab(root)
    try:
        yield lab, diffs
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def browser(server: tuple[Lab, list[str]]) -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium




# Everything the page shows of each comparison: trust, elements, styles, texts, contrast, the
# first divergence's row and where each run's column stands.
READ_JS = r"""(rootClass) => {
  const out = { trusted: null, diffs: [] };
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (panel && panel.content && panel.content.widgets)
    out.trusted = panel.content.widgets.some(c => c.model.type === 'code' && c.model.outputs.length && c.model.trusted);
""" + COLOUR_JS + r"""
  function opacity(el) {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
    return o;
  }
  const shown = el => {
    const cs = getComputedStyle(el), r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none' && opacity(el) > 0;
  };
  const contrast = el => {
    const bg = behind(el), c = parse(getComputedStyle(el).color);
    const fg = over([c[0], c[1], c[2], c[3] * opacity(el)], bg);
    return { ratio: ratio(fg, bg), fg: fg.slice(0, 3).map(Math.round), bg: bg.slice(0, 3).map(Math.round) };
  };
  const left = el => el ? el.getBoundingClientRect().left : null;
  for (const root of document.getElementsByClassName(rootClass)) {
    root.scrollIntoView({ block: 'start' });
    root.querySelectorAll('details').forEach(d => d.open = true);
    const tags = {};
    for (const e of [root, ...root.querySelectorAll('*')]) tags[e.tagName.toLowerCase()] = (tags[e.tagName.toLowerCase()] || 0) + 1;
    const styled = [root, ...root.querySelectorAll('[style]')].map(e => (e.getAttribute('style') || '').split(';')
      .filter(p => p.includes(':')).map(p => p.split(':')[0].trim().toLowerCase()).sort());
    const failures = [], hidden = []; let checked = 0;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    while (walker.nextNode()) {
      const node = walker.currentNode, el = node.parentElement;
      if (!node.textContent.trim() || !el || seen.has(el)) continue;
      seen.add(el);
      if (!shown(el)) { hidden.push(node.textContent.trim().slice(0, 40)); continue; }
      const c = contrast(el);
      checked++;
      if (c.ratio < 4.5) failures.push({ text: node.textContent.trim().slice(0, 40), ratio: +c.ratio.toFixed(2), fg: c.fg, bg: c.bg });
    }
    // the first divergence: its row in the steps table, and its mark's cell
    const steps = root.querySelector('table.planbook-rundiff-steps');
    const marked = Array.from(root.querySelectorAll('tr')).filter(tr => tr.querySelector(':scope > th, :scope > td')
      && tr.querySelector(':scope > th, :scope > td').textContent.trim().startsWith('\u2691'));
    let first = null;
    const row = root.querySelector('tr.planbook-first-divergence');
    if (row) {
      const th = row.querySelector(':scope > th');
      th.scrollIntoView({ block: 'center' });
      const r = th.getBoundingClientRect(), cs = getComputedStyle(th);
      const hit = document.elementFromPoint(r.left + Math.min(r.width / 2, 12), r.top + r.height / 2);
      first = { text: th.textContent.trim(), shown: shown(th), onTop: !!hit && th.contains(hit),
                inSteps: row.closest('table') === steps, ratio: +contrast(th).ratio.toFixed(2),
                rule: [cs.borderLeftStyle, parseFloat(cs.borderLeftWidth), cs.borderLeftColor] };
    }
    // each cell under its own column's heading (a row in a fold reads its nearest table heading)
    const misaligned = [];
    if (steps) for (const tr of [steps, ...steps.querySelectorAll('table')].flatMap(t => Array.from(t.rows))) {
      if (tr.parentElement.tagName === 'THEAD') continue;
      let headed = tr.closest('table');
      while (headed && !headed.tHead) headed = headed.parentElement.closest('table');
      const heading = headed && headed.tHead.rows[0];
      if (!heading || heading.cells.length !== tr.cells.length) continue;
      Array.from(tr.cells).forEach((cell, i) => {
        const c = cell.getBoundingClientRect(), h = heading.cells[i].getBoundingClientRect(), x = (c.left + c.right) / 2;
        if (x < h.left || x > h.right) misaligned.push({ row: tr.cells[0].textContent.trim(), cell: cell.textContent.trim(),
          under: heading.cells[i].textContent.trim() });
      });
    }
    const heads = t => t ? Array.from(t.tHead ? t.tHead.rows[0].cells : []).map(th => ({ text: th.textContent.trim(), left: left(th) })) : [];
    const box = root.querySelector('.planbook-first-divergence-box');
    out.diffs.push({
      tags, styled, failures, hidden, checked,
      svg: root.querySelectorAll('svg').length,
      titles: Array.from(root.querySelectorAll('[title]')).map(e => e.getAttribute('title')),
      text: root.textContent,
      first, misaligned, marked: marked.map(tr => tr.textContent.trim().slice(0, 40)),
      stepHeads: heads(steps), totalHeads: heads(root.querySelector('table.planbook-rundiff-totals')),
      firstCells: box ? Array.from(box.querySelectorAll('td')).map(td => ({ text: td.textContent.trim(), left: left(td) })) : [],
      openDetails: Array.from(root.querySelectorAll('tr.planbook-fold details')).map(d => d.open && shown(d.querySelector('table') || d)),
      panes: Array.from(root.querySelectorAll('tr.planbook-panes details')).map(d => d.open && shown(d.querySelector('table') || d)),
    });
  }
  return out;
}"""


def test_the_saved_comparison_reads_untrusted_in_light_and_dark(server: tuple[Lab, list[str]], browser: Any) -> None:
    lab, diffs = server
    shapes = [Shape(html) for html in diffs]
    for html in diffs:  # what the sanitizer would strip is not written at all
        assert "var(" not in html and "<svg" not in html and "<style" not in html and "<script" not in html
    base_id = re.search(r"Compare runs: base ([\w-]+)", diffs[0]).group(1)  # type: ignore[union-attr]
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        for theme in THEMES:
            light = "true" if "Light" in theme else "false"
            set_theme(lab, theme)
            page = context.new_page()
            page.goto(lab.url(f"/lab/tree/{NAME}?token={lab.token}&reset"))
            page.wait_for_function(f"() => document.getElementsByClassName('{ROOT_CLASS}').length === 2",
                                   timeout=60_000)
            page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=60_000)
            found = page.evaluate(READ_JS, ROOT_CLASS)
            assert found["trusted"] is False, f"{theme}: the notebook opened as trusted"
            assert len(found["diffs"]) == 2
            for got, shape, html, name in zip(found["diffs"], shapes, diffs, ("full", "changed-only")):
                at = f"{theme}, {name} comparison"
                _check_survived(got, shape, at)
                _check_readable(got, at)
                _check_first_divergence(got, at)
                _check_baseline_left(got, base_id, at)
            full, changed_only = found["diffs"]
            assert full["openDetails"] and all(full["openDetails"]), f"{theme}: the unchanged steps' fold did not open"
            assert "b1 … b3" in full["text"] and "b2" in full["text"].split("b1 … b3", 1)[1], theme
            assert not changed_only["openDetails"], f"{theme}: changed only still holds a fold to open"
            # each changed step after the first divergence (a2, a3, join) opens its runs side by side, in both
            for got in (full, changed_only):
                assert len(got["panes"]) == 3 and all(got["panes"]), f"{theme}: a changed step's panes did not open"
            for i, name in enumerate(("full", "changed-only")):
                page.locator(f".{ROOT_CLASS}").nth(i).screenshot(
                    path=str(_artifacts() / f"rundiff-untrusted-{'light' if light == 'true' else 'dark'}-{name}.png"))
            page.close()
            lab.delete_sessions()
    finally:
        set_theme(lab, THEMES[0])
        context.close()


def _check_survived(got: dict[str, Any], shape: Shape, at: str) -> None:
    """Nothing that carried meaning was stripped: elements, texts, titles, style declarations."""
    assert got["svg"] == 0
    assert got["tags"] == dict(shape.tags), f"{at}: elements changed: {got['tags']} != {dict(shape.tags)}"
    assert " ".join(got["text"].split()) == " ".join("".join(shape.text).split()), f"{at}: texts changed"
    assert got["titles"] == shape.titles, f"{at}: titles changed: {got['titles']} != {shape.titles}"
    assert got["styled"] == shape.styles, f"{at}: style declarations were dropped: " + str(
        [(a, b) for a, b in zip(got["styled"], shape.styles) if a != b][:3])


def _check_readable(got: dict[str, Any], at: str) -> None:
    """Every text shows, at 4.5:1; none reads var( or raw HTML."""
    assert not got["hidden"], f"{at}: texts not shown: {got['hidden'][:6]}"
    assert not got["failures"], f"{at}: text below WCAG AA 4.5:1: {got['failures'][:6]}"
    assert got["checked"] > 30, f"{at}: only {got['checked']} texts checked"
    assert "var(" not in got["text"], f"{at}: a text reads var("
    raw = RAW_HTML.search(got["text"])
    assert raw is None, f"{at}: raw HTML shown as text: {got['text'][max(0, raw.start() - 30):raw.end() + 30]!r}"


def _check_first_divergence(got: dict[str, Any], at: str) -> None:
    """The ⚑ stands on a1's row of the steps table, shown, uncovered, readable, with its rule."""
    first = got["first"]
    assert first is not None, f"{at}: no row is marked as the first divergence"
    assert first["text"] == "⚑ a1", f"{at}: the first divergence marks {first['text']!r}, not a1"
    assert first["inSteps"] and first["shown"] and first["onTop"], f"{at}: the ⚑ mark is not visible: {first}"
    assert first["ratio"] >= 4.5, f"{at}: the ⚑ mark reads at {first['ratio']}:1"
    style, width, colour = first["rule"]
    assert style == "solid" and width >= 3 and colour not in ("rgba(0, 0, 0, 0)", "transparent"), (at, first["rule"])
    assert got["marked"] == [got["marked"][0]] and got["marked"][0].startswith("⚑ a1"), (
        f"{at}: rows starting with ⚑: {got['marked']}")


def _check_baseline_left(got: dict[str, Any], base_id: str, at: str) -> None:
    """The baseline's column is the left one in the totals, the first divergence and the steps,
    and every step's cells stand under their own column's heading (an opened fold's rows too)."""
    steps = [h for h in got["stepHeads"] if h["text"] not in ("step", "time", "change", "Δ time", "Δ tokens")]
    totals = [h for h in got["totalHeads"] if h["text"]]
    cells = got["firstCells"]
    for where, runs in (("steps", steps), ("totals", totals), ("first divergence", cells)):
        assert len(runs) == 2, f"{at}: {where} shows {len(runs)} runs: {runs}"
        assert runs[0]["text"].startswith(f"base {base_id}"), f"{at}: {where}: the left run is not the base: {runs}"
        assert not runs[1]["text"].startswith("base "), f"{at}: {where}: two bases: {runs}"
        assert runs[0]["left"] < runs[1]["left"], f"{at}: {where}: the base stands right of the fork: {runs}"
    assert not got["misaligned"], f"{at}: cells stand under another column's heading: {got['misaligned'][:4]}"
    assert got["stepHeads"][0]["text"] == "step" and got["stepHeads"][1]["text"].startswith("base "), (
        f"{at}: the base is not the first run column of the steps: {got['stepHeads']}")


def _artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
