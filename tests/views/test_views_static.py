"""The saved tutorials tell the truth without a kernel: every live view's stored output is
the run's final state (text and HTML), and nbconvert's HTML shows it."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook.views.html import result_html, state_html
from planbook.views.marks import CACHED_MARK, cache_marks
from planbook.views.record import safe_markup
from planbook.views.state import ViewState

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
#: markup an HTML sanitizer removes (or that reaches outside the page)
class _Unsafe(HTMLParser):
    """Finds markup an HTML sanitizer removes (or that reaches outside the page), by parsing it:
    an attribute's text (a title that reads ``online='$online'``) is no attribute."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "iframe", "link", "svg"):
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            value = (value or "").strip().lower()
            if name.startswith("on") or value.startswith("javascript:") or (
                    name in ("src", "href") and value.startswith(("http:", "https:", "//"))):
                self.found.append(f"<{tag} {name}={value[:40]!r}>")


def unsafe(markup: str) -> list[str]:
    """What in ``markup`` a sanitizer would remove ([] when nothing)."""
    parser = _Unsafe()
    parser.feed(markup)
    parser.close()
    return parser.found


def run_outputs(path: Path) -> list[dict]:
    """The outputs that show a run (a live view's record, a result, a PlanView of a result)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
            if "planbook-verdict" in "".join(o.get("data", {}).get("text/html", ""))]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_run_is_stored_as_its_static_record(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert "widgets" not in nb["metadata"]  # no widget state saved (GitHub refuses a state-less entry)
    widgets = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
               if WIDGET in o.get("data", {})]
    assert not widgets, f"{path.name} stores a widget: reopened without its kernel it says 'Error displaying widget'"
    records = [o for o in run_outputs(path) if "planbook-record" in "".join(o["data"]["text/html"])]
    if path.name.startswith(("01-", "02-", "03-", "04-")):
        assert records, f"{path.name} shows no run"
    for out in records:
        text = "".join(out["data"]["text/plain"])
        html = "".join(out["data"]["text/html"])
        assert "\nRun " in text or text.startswith("Run "), f"{path.name}: a run's stored text is not a finished run"
        assert "mathjax_ignore" in html and "<details" in html and not unsafe(html)


def test_nbconvert_html_shows_each_runs_final_plan() -> None:
    nbconvert = pytest.importorskip("nbconvert")
    import nbformat

    path = ROOT / "notebooks" / "01-first-plan.ipynb"
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nbformat.read(path, as_version=4))
    assert body.count("Run completed (goal_met): steps 3/12, replans 0/5") >= 1
    assert "3/3 steps completed" in body

# ------------------------------------------------------------------ the static record of a run

#: the tool calls made (module level: a tool's closure values are part of its cache key)
CALLS: list[str] = []


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()

    @tools.tool
    def fetch(city: str) -> list[float]:
        "Readings."
        CALLS.append("fetch")
        print(f"fetching {city}")
        return [6.5, 7.0, 7.5]

    @tools.tool
    def mean(values: list[float]) -> float:
        "Their mean."
        CALLS.append("mean")
        return sum(values) / len(values)

    @tools.tool
    def report(value: float) -> str:
        "A line."
        CALLS.append("report")
        if value > 100:
            raise ValueError("too hot <to> report")
        return f"mean {value:.1f}"

    return tools


SPEC = """
goal: Report the mean
steps:
  - {id: fetch, task: Fetch the readings, tool: fetch, args: {city: Oslo}}
  - {id: mean, task: Average them, tool: mean, args: {values: $fetch}}
  - {id: report, task: Write the line, tool: report, args: {value: $mean}}
"""


def test_a_finished_run_is_a_static_record_with_a_pane_per_step() -> None:
    result = planbook.run(SPEC, tools=_tools())
    page = result_html(result)
    assert "planbook-record" in page
    # every step that ran opens its pane from its row: the call with its values, the result, the printed text
    assert page.count('<details class="planbook-pane">') == 3
    fetch_pane = re.search(r'data-pane="fetch".*?</details>', page, re.S).group(0)
    assert "fetch(city=&#x27;Oslo&#x27;)" in fetch_pane and "[6.5, 7.0, 7.5]" in fetch_pane
    assert "printed" in fetch_pane and "fetching Oslo" in fetch_pane
    assert "mean(values=[6.5, 7.0, 7.5])" in page and "&#x27;mean 7.0&#x27;" in page
    # the timeline and the graph as HTML that an untrusted notebook's sanitizer keeps (no SVG)
    assert '<div class="planbook-timeline"' in page and '<div class="planbook-graph"' in page and "<svg" not in page
    assert page.count('class="pb-bar pb-completed') == 3 and "3 executions in 1 lane" in page
    assert "[✓] mean · needs fetch</li>" in page and "[✓] report · needs mean</li>" in page  # fetch → mean → report
    assert not unsafe(page), unsafe(page)


def test_a_failed_run_records_its_error_and_traceback_in_the_pane() -> None:
    spec = SPEC.replace("{city: Oslo}", "{city: Oslo}").replace("args: {values: $fetch}", "args: {values: [500]}")
    result = planbook.run(spec, tools=_tools())
    assert result.status == "failed"
    page = result_html(result)
    pane = re.search(r'data-pane="report".*?</details>', page, re.S).group(0)
    assert "ValueError: too hot &lt;to&gt; report" in pane and "traceback" in pane
    assert "planbook-run-failed" in page and not unsafe(page)


def test_a_result_whose_html_has_a_script_is_recorded_as_text() -> None:
    class Sneaky:
        def _repr_html_(self) -> str:
            return '<b onclick="steal()">bold</b><script>alert(1)</script>'

        def __repr__(self) -> str:
            return "Sneaky()"

    tools = planbook.Toolbox()

    @tools.tool
    def make() -> Any:
        "A value with unsafe HTML."
        return Sneaky()

    page = result_html(planbook.run("steps: [{id: s, tool: make}]", tools=tools))
    assert not unsafe(page)
    assert "Sneaky()" in page and "shown as text" in page
    assert not safe_markup('<img src="https://example.com/x.png">') and safe_markup("<table><tr><td>1</td></tr></table>")
    for reaching_out in ('<img srcset="a.png 1x, https://example.com/b.png 2x">', '<style>@import "//example.com/x.css";</style>',
                         "<style>body{display:none}</style>", '<video poster="https://example.com/p.png"></video>',
                         '<button formaction="https://example.com/go">go</button>', '<table><tr><td background="//example.com/b.png">x</td></tr></table>'):
        assert not safe_markup(reaching_out), reaching_out  # loads something outside, or restyles the notebook
    assert not safe_markup('<img src="data/x.png" alt="local">')  # a relative URL loads from the notebook's server


def test_paused_and_interrupted_runs_are_records_too() -> None:
    plan = planbook.Plan.parse(SPEC)
    for status in ("paused", "interrupted", "failed", "completed"):
        state = ViewState(plan=plan, status=status, reason=status)
        assert "planbook-record" in state_html(state), status
    assert "planbook-record" not in state_html(ViewState(plan=plan, status="running"))
    assert "planbook-record" not in state_html(ViewState(plan=plan))


# ------------------------------------------------------------------ the cache is visible
def test_a_step_answered_from_the_cache_is_marked_everywhere(tmp_path: Path) -> None:
    CALLS.clear()
    store = tmp_path / "runs.sqlite"
    tools = _tools()
    first = planbook.run(SPEC, tools=tools, store=store, cache=True)
    again = planbook.run(SPEC, tools=tools, store=store, cache=True)
    assert CALLS == ["fetch", "mean", "report"]  # the second run ran nothing
    marks = cache_marks(again.events, again.plan)
    assert set(marks) == {"fetch", "mean", "report"} and {m.kind for m in marks.values()} == {"cached"}
    first_run = {m.from_run for m in marks.values()}
    assert len(first_run) == 1 and first_run <= {r.run_id for r in planbook.runs(store)}
    (run_id,) = first_run
    page = result_html(again)
    # the header counts them
    assert f"{CACHED_MARK} 3 cached" in page
    # each row: the mark, and "cached" where the time was (it read 0.0 ms)
    marked = re.findall(r'<tr data-step="\w+" class="planbook-step-cached" style="[^"]*"><td>'
                        r'\[✓\] <span class="planbook-cached" title="cached: [^"]*">' + CACHED_MARK, page)
    assert len(marked) == 3
    assert page.count("<td>cached</td>") == 3 and ">0.0 ms<" not in page
    # the pane says which run it came from
    assert f"cached: the result of step mean in run {run_id}, not run again" in page
    # the timeline draws them as bars of their own
    timeline = re.search(r'<div class="planbook-timeline".*?Bars: ', page).group(0)
    assert timeline.count('class="pb-bar pb-bar-cached"') == 3 and "3 answered without running" in timeline
    # the first run has no mark
    assert "planbook-step-cached" not in result_html(first) and "cached</span>" not in result_html(first)


def test_steps_completed_before_a_resume_are_marked_resumed(tmp_path: Path) -> None:
    tools = _tools()
    stop = {"mean"}

    @tools.tool(cache=False)
    def mean(values: list[float]) -> float:  # noqa: F811 - replaces the toolbox's mean
        "Their mean; interrupted on its first call."
        if stop:
            stop.clear()
            raise KeyboardInterrupt
        return sum(values) / len(values)

    store = tmp_path / "runs.sqlite"
    first = planbook.run(SPEC, tools=tools, store=store, cache=False)
    assert first.status == "interrupted"
    resumed = planbook.resume(store=store, tools=tools)
    assert resumed.status == "completed"
    marks = cache_marks(resumed.events, resumed.plan)
    assert {k: m.kind for k, m in marks.items()} == {"fetch": "resumed"}
    page = result_html(resumed)
    assert f"{CACHED_MARK} 1 resumed" in page and "resumed: completed before the run was resumed" in page


def test_steps_of_a_run_paused_and_continued_in_its_own_process_are_not_marked_resumed() -> None:
    """Continuing a paused run (--step, Pause in the view) is the same run going on: the steps
    it ran before the pause ran *in this run*, unlike a resume from the store."""
    from planbook import Runner

    runner = Runner(SPEC, tools=_tools())
    assert runner.run(until="fetch").status == "paused"
    result = runner.run()
    assert result.status == "completed"
    assert cache_marks(result.events, result.plan) == {}
    assert "resumed" not in result_html(result).replace("resumed=", "")


def test_the_widget_head_and_panes_carry_the_cache_marks(tmp_path: Path) -> None:
    from planbook.views.widget import PlanView

    store = tmp_path / "runs.sqlite"
    tools = _tools()
    planbook.run(SPEC, tools=tools, store=store, cache=True)
    again = planbook.run(SPEC, tools=tools, store=store, cache=True)
    view = PlanView(again)
    assert view.head["cached_count"] == "3 cached"
    assert set(view.head["cached"]) == {"fetch", "mean", "report"}
    kind, why, at = view.head["cached"]["mean"]
    assert kind == "cached" and "in run " in why and at is not None and at >= 0
    assert view.pane("mean")["cached"].startswith("cached: the result of step mean in run ")


def test_a_timeline_of_one_execution_says_one_execution() -> None:
    from planbook.data.timeline import Execution
    from planbook.views.charts import timeline_html

    page = timeline_html([Execution(1, "a", 1, 1, None, 0.0, 0.5, ok=True)], origin=0.0)
    assert "1 execution in 1 lane," in page
