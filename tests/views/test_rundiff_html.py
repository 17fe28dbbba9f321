"""The comparison of runs as static HTML: readable untrusted and without JavaScript, in light and
dark themes, small enough to keep in a notebook, with the first divergent row marked."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest

import planbook
from planbook.data.models import Event, Usage
from planbook.data.rundiff import RunDiff, diff_runs
from planbook.engine.fork import fork
from planbook.outbound.html import CSS_PROPERTIES
from planbook.views.rundiff import UNCHANGED_ROWS

VOID = frozenset({"br", "col", "hr", "img", "wbr"})


@planbook.tool
def inc(x: int, by: int = 1) -> int:
    return x + by


@planbook.tool
def join(a: int, b: int) -> int:
    return a * 1000 + b


def chains() -> planbook.Plan:
    steps: list[dict[str, Any]] = [{"id": f"{c}{i}", "tool": "inc", "args": {"x": 0} if i == 1 else {"x": f"${c}{i - 1}"}}
                                   for c in "ab" for i in range(1, 11)]
    steps.append({"id": "join", "tool": "join", "args": {"a": "$a10", "b": "$b10"}})
    return planbook.Plan.model_validate({"id": "chains", "goal": "two chains", "steps": steps})


def chain(n: int) -> planbook.Plan:
    return planbook.Plan.model_validate({"id": f"chain-{n}", "goal": "a chain", "steps": [
        {"id": f"s{i}", "tool": "inc", "args": {"x": 0} if i == 1 else {"x": f"$s{i - 1}"}} for i in range(1, n + 1)]})


@pytest.fixture(scope="module")
def args_fork() -> RunDiff:
    base = planbook.run(chains(), tools=[inc, join], max_steps=100)
    return diff_runs(base, fork(base, at="a1", args={"x": 5}, tools=[inc, join]))


def chain_diff(n: int, at: int) -> RunDiff:
    base = planbook.run(chain(n), tools=[inc], max_steps=n + 10)
    return diff_runs(base, fork(base, at=f"s{at}", args={"x": 1000}, tools=[inc], max_steps=n + 10))


class Balanced(HTMLParser):
    """Every end tag closes the element on top (a fold or a row that leaks breaks it)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.styles: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.styles += [v or "" for k, v in attrs if k == "style"]
        assert not any(k.startswith("on") for k, _ in attrs), attrs
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()


def parsed(html: str) -> Balanced:
    parser = Balanced()
    parser.feed(html)
    parser.close()
    assert parser.stack == []
    return parser


def test_the_html_reads_untrusted_no_script_style_svg_or_var(args_fork: RunDiff) -> None:
    for html in (args_fork.html(), args_fork.html(changed_only=True)):
        low = html.lower()
        for banned in ("<script", "<style", "<svg", "var(", "url(", "javascript:", "color-mix("):
            assert banned not in low, banned
        for style in parsed(html).styles:
            for declaration in filter(None, style.split(";")):
                assert declaration.split(":", 1)[0].strip() in CSS_PROPERTIES, declaration


def _luminance(rgb: tuple[float, float, float]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _over(tint: tuple[int, int, int, float], page: tuple[int, int, int]) -> tuple[float, float, float]:
    r, g, b, a = tint
    return (r * a + page[0] * (1 - a), g * a + page[1] * (1 - a), b * a + page[2] * (1 - a))


def test_tinted_cells_keep_the_themes_text_readable_in_light_and_dark(args_fork: RunDiff) -> None:
    html = args_fork.html()
    assert not re.search(r"(?<![-\w])color:", html)  # text keeps the theme's colour: only fills and tints are set
    tints = {(int(r), int(g), int(b), float(a)) for r, g, b, a in
             re.findall(r"rgba\((\d+),(\d+),(\d+),([\d.]+)\)", html)}
    assert tints
    light_page, light_text = (255, 255, 255), (33, 33, 33)  # JupyterLab's light theme
    dark_page, dark_text = (17, 17, 17), (222, 222, 222)  # and its dark one
    for tint in tints:
        assert _contrast(_over(tint, light_page), light_text) >= 4.5, tint
        assert _contrast(_over(tint, dark_page), dark_text) >= 4.5, tint


def test_the_first_divergent_row_is_marked_and_its_calls_stand_side_by_side(args_fork: RunDiff) -> None:
    html = args_fork.html()
    assert html.count('class="planbook-first-divergence"') == 1
    row = html.split('class="planbook-first-divergence"')[1].split("</tr>")[0]
    assert "⚑ a1" in row and "edited" in row
    box = html.split('planbook-first-divergence-box')[1].split("</table>")[0]
    assert box.index("inc(x=0)") < box.index("inc(x=5)") and "→ 1" in box and "→ 6" in box


def test_the_header_tells_the_fork_and_the_baseline_stands_left(args_fork: RunDiff) -> None:
    html = args_fork.html()
    assert "fork of run" in html and "x: 0 → 5; kept 10, re-running 11" in html
    head = html.split('class="planbook-rundiff-steps"')[1].split("</thead>")[0]
    assert head.index(f"base {args_fork.base.run_id}") < head.index(args_fork.others[0].run_id)


def test_unchanged_rows_fold_into_a_details_and_changed_only_leaves_them_out(args_fork: RunDiff) -> None:
    html = args_fork.html()
    fold = html.split('class="planbook-fold"')[1].split("</details>")[0]
    assert "<details>" in fold and "b1 … b10: 10 steps the same in every run" in fold and "<th>b5</th>" in fold
    only = args_fork.html(changed_only=True)
    assert '<tr class="planbook-fold"><td colspan="6" style="text-align:left"><details>' not in only
    assert "<th>b5</th>" not in only
    assert "b1 … b10: 10 steps the same in every run" in only and "changed only: 10 unchanged steps" in only.lower()


def test_many_unchanged_rows_fold_into_a_count_that_says_so() -> None:
    diff = chain_diff(UNCHANGED_ROWS + 50, UNCHANGED_ROWS + 40)
    html = diff.html()
    folds = html.split('class="planbook-fold"')[1:]
    assert folds and not any(fold.split("</tr>")[0].count("<details>") for fold in folds)
    assert f"{UNCHANGED_ROWS + 39} unchanged steps (more than {UNCHANGED_ROWS}) are folded into counts" in html


@pytest.mark.parametrize(("n", "at", "limit"), [(100, 50, 40_000), (100, 1, 40_000), (1000, 500, 150_000),
                                                (1000, 1, 150_000)])
def test_the_html_stays_small(n: int, at: int, limit: int) -> None:
    diff = chain_diff(n, at)
    assert len(diff.html().encode()) <= limit
    # the worst case: every call took long enough for its delta to be tinted
    for k, row in enumerate(diff.steps):
        for j, side in enumerate(row.sides):
            if side.seconds is not None:
                side.seconds = 0.1 + 0.05 * ((k + j) % 3)
    html = diff.html()
    assert len(html.encode()) <= limit and "▲" in html and "▼" in html
    if n == 1000 and at == 1:
        assert "this record keeps" in html.lower() and "diff.rows()" in html


def test_token_deltas_are_coloured_by_direction(args_fork: RunDiff) -> None:
    base, child = args_fork.base, args_fork.others[0]
    events = [*child.events, Event.record("llm.call", child.events[-1].time, "a2", 1, {"prompt_tokens": 5})]
    more = diff_runs(base, child.model_copy(update={"events": events, "usage": Usage.from_events(events)}))
    cell = more.html().split("<th>a2</th>")[1].split("</tr>")[0]
    assert "+5 ▲" in cell and "rgba(183,28,28," in cell  # more tokens: red


def test_the_notebook_bundle_has_text_without_times_and_the_html(args_fork: RunDiff) -> None:
    bundle = args_fork._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert " ms" not in bundle["text/plain"] and "⚑ a1" in bundle["text/plain"]
    assert bundle["text/html"] == args_fork.html()


def test_runs_that_are_no_fork_of_the_base_read_run_vs_run() -> None:
    one = planbook.run(chains(), tools=[inc, join], max_steps=100)
    two = planbook.run(chains(), tools=[inc, join], max_steps=100)
    html = diff_runs(one, two).html()
    assert f"run {one.run_id} vs run {two.run_id}" in html and "identical" in html


def test_changed_steps_offer_each_runs_call_and_result_side_by_side(args_fork: RunDiff) -> None:
    """A changed step's row has a fold under it: its call and result in each run, the baseline left
    (the first divergence has its own box, so it needs none); only the first PANE_ROWS get one."""
    from planbook.views.rundiff import PANE_ROWS

    html = args_fork.html()
    panes = html.split('<tr class="planbook-panes">')[1:]
    assert len(panes) == min(10, PANE_ROWS)  # a2..a10 and the join: a1 is the first divergence
    first = panes[0].split("</tr></table>")[0]
    assert "a2: each run's call and result" in first
    assert first.index(f"base {args_fork.base.run_id}") < first.index(args_fork.others[0].run_id)
    assert "→ 2" in first and "→ 7" in first
    long = chain_diff(200, 1)
    assert long.html().count('<tr class="planbook-panes">') == PANE_ROWS

