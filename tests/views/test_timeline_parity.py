"""The live view's timeline (``static/planview.js``) keeps the record's rules (``charts.py``).

The JavaScript cannot import the Python constants, so it mirrors them as named constants; these
tests read ``planview.js`` and check each against the Python one it names, and the wording of a
summarised timeline against the caption ``charts.timeline_html`` writes, so the two cannot drift.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from planbook import Plan, Runner, Toolbox
from planbook.data.timeline import Execution
from planbook.views import charts, html, marks

JS = (Path(charts.__file__).parent / "static" / "planview.js").read_text(encoding="utf-8")


def _const(name: str) -> str:
    """The literal of a top-level ``const NAME = …;`` of planview.js (up to the ``;`` that ends a line)."""
    found = re.search(rf"^const {name} = (.+?);[ \t]*(?://[^\n]*)?$", JS, re.M | re.S)
    assert found, f"planview.js has no top-level `const {name} = …;`"
    return found.group(1)


@pytest.mark.parametrize("name", ["MIN_BAR", "MAX_BARS", "BUCKETS"])
def test_numbers_match(name: str) -> None:
    assert float(_const(name)) == getattr(charts, name)


def test_worst_order_fills_and_marks_match() -> None:
    assert re.findall(r'"(\w+)"', _const("WORST")) == list(charts._WORST)
    fills = dict(re.findall(r'(\w+): "(#[0-9a-fA-F]{6})"', _const("FILLS")))
    assert fills == html.FILLS  # interrupted amber, cached purple: the record's fills
    assert _const("CRITICAL") == f'"{re.search(r"#[0-9a-f]{6}", charts._CRITICAL).group(0)}"'  # type: ignore[union-attr]
    assert _const("CACHED_MARK") == f'"{marks.CACHED_MARK}"'


def test_a_summary_says_what_the_record_says() -> None:
    """Past MAX_BARS executions, the live caption is the record's, word for word after the figures."""
    executions = [Execution(i + 1, f"s{i}", 1, 1, None, float(i), i + 0.5, True) for i in range(charts.MAX_BARS + 1)]
    page = charts.timeline_html(executions, origin=0.0)
    assert 'data-scale="summary"' in page
    caption = re.search(r": (too many to draw one by one[^<]*)</div>", page)
    assert caption, page[:400]
    live = _const("SUMMARY_WORDS").strip("`").replace("${BUCKETS}", _const("BUCKETS"))
    assert live == unescape(caption.group(1))
    assert re.search(r"executions\$\{withCached\}, \$\{duration\(span\)\}: \$\{SUMMARY_WORDS\}`", JS)


def test_the_widget_sends_an_interrupted_bar_and_the_run_again() -> None:
    """The live view colours a bar by the record's rule 5, so its bars say which were interrupted; and
    the call an interrupt cut runs again under the same execution number, so the live view keeps both
    bars, as the record does (it kept only the second one: the interrupted bar vanished)."""
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    tools = Toolbox()
    calls: list[str] = []

    @tools.tool
    def tick(label: str) -> str:
        """Stops the run (Ctrl-C) at its first call."""
        calls.append(label)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return label

    runner = Runner(Plan.parse("steps:\n  - {id: a, tool: tick, args: {label: a}}\n"), tools=tools)
    assert runner.run().status == "interrupted"
    bars = list(PlanView(runner).batch["bars"].values())
    assert [(b[0], b[6], b[7]) for b in bars] == [("a", False, True)], bars
    assert runner.run().status == "completed"
    bars = sorted(PlanView(runner).batch["bars"].values(), key=lambda b: b[4])
    assert [(b[0], b[6], b[7], b[8]) for b in bars] == [("a", False, True, 1), ("a", True, False, 1)], bars
