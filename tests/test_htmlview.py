"""The static HTML view: escaped, self-contained, deterministic, coloured by status."""

from __future__ import annotations

import html
import json
import re
from configparser import ConfigParser
from pathlib import Path

import planbook
from planbook import Plan, PlanDiff, RunResult, ScriptedPlanner, Status, Toolbox, Usage
from planbook.views.html import diff_html, format_duration, plan_html, result_html, revisions_html
from planbook.views.text import format_diff

EVIL = "<script>alert('x')</script> & \"quotes\""


def tools(fail: set[str] = frozenset()) -> Toolbox:  # type: ignore[assignment]
    tb = Toolbox()

    @tb.tool
    def fetch(source: str) -> str:
        """Fetch a source."""
        if source in fail:
            raise ConnectionError(f"{source} <down> & out")
        return source

    return tb


def spec(task: str = "Fetch alpha") -> str:
    return (
        f"goal: {json.dumps(EVIL)}\ntitle: Sources\nsteps:\n"
        f"  - {{id: a, tool: fetch, args: {{source: alpha}}, task: {json.dumps(task)}}}\n"
        "  - {id: b, tool: fetch, args: {source: beta}, needs: [a]}\n"
    )


def clock(step: float = 0.25) -> object:
    now = [0.0]

    def read() -> float:
        now[0] += step
        return now[0]

    return read


def test_plan_html_is_an_escaped_self_contained_table() -> None:
    plan = Plan.parse(spec(task=EVIL), id="p")
    page = plan_html(plan)
    assert "<script" not in page and "<style" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quotes&quot;" in page
    assert "Plan: Sources" in page and "(ID: p)" in page
    assert page.count('<tr class="planbook-step ') == 2
    assert 'data-step="a"' in page and 'data-step="b"' in page
    assert "needs a" in page
    assert 'class="planbook-progress"' in page and "width:0.0%" in page
    assert "[ ] 2 not started" in page


def test_rows_are_coloured_by_status_and_show_errors() -> None:
    result = planbook.run(spec(), tools=tools({"beta"}), clock=clock())
    page = plan_html(result.plan)
    assert '<tr class="planbook-step planbook-completed"' in page and "background:#e8f5e9" in page
    assert '<tr class="planbook-step planbook-failed"' in page and "background:#fdecea" in page
    assert "ConnectionError: beta &lt;down&gt; &amp; out" in page
    assert "width:50.0%" in page
    assert page.count("250.0 ms") == 2  # a step's start and end are two readings of the fake clock (0.25 s apart)


def test_result_html_has_the_verdict_budgets_and_revisions() -> None:
    planner = ScriptedPlanner({None: spec(), "beta": [{"id": "c", "tool": "fetch", "args": {"source": "gamma"}}]})
    result = planbook.run("Fetch things", planner=planner, tools=tools({"beta"}), clock=clock())
    page = result_html(result)
    assert "Run completed (goal_met): steps 3/12, replans 1/5" in page
    assert "model calls" not in page
    assert "Revision history" in page
    assert "<del>b: fetch(source=&#x27;beta&#x27;)</del>" in page
    assert re.search(r"<ins[^>]*>c: fetch\(source=&#x27;gamma&#x27;\)</ins> \(added\)", page)
    assert result._repr_mimebundle_()["text/html"] == page  # the engine's text view uses it


def test_failed_result_is_red_with_its_error_and_model_usage() -> None:
    result = planbook.run(spec(), tools=tools({"alpha"}), clock=clock())
    result = result.model_copy(update={"usage": Usage(calls=2, prompt_tokens=100, completion_tokens=20)})
    page = result_html(result)
    assert 'class="planbook-verdict planbook-run-failed planbook-tone-bad" style="color:#b71c1c' in page
    assert "Run failed (aborted): steps 1/12, replans 0/5, model calls 2, tokens 120" in page
    assert "Error: step a failed: ConnectionError: alpha &lt;down&gt; &amp; out" in page


def test_diff_html_matches_the_text_diff() -> None:
    diff = PlanDiff(from_revision=1, to_revision=2, removed=["x"], added=["y"], revised=["z"], reason="x <failed>",
                    steps={"x": "old <x>", "y": "new y", "z": "changed z"})
    page = diff_html(diff)
    text = format_diff(diff)
    assert text.splitlines()[0] == "Revision 1 → 2 (after: x <failed>)"
    assert "Revision 1 → 2" in page and "(after: x &lt;failed&gt;)" in page
    assert "<del>x: old &lt;x&gt;</del> (removed)" in page
    assert re.search(r"<ins[^>]*>y: new y</ins> \(added\)", page)
    assert re.search(r"~ <span[^>]*>z: changed z</span> \(revised\)", page)
    empty = PlanDiff(from_revision=2, to_revision=3)
    assert "(no change)" in diff_html(empty) and "(no change)" in format_diff(empty)
    assert revisions_html([]) == ""


def test_a_diff_displays_as_text_and_html() -> None:
    """A PlanDiff on its own in a cell (``result.revisions[0]``) shows the coloured HTML diff."""
    diff = PlanDiff(from_revision=1, to_revision=2, removed=["x"], added=["y"], reason="x failed",
                    steps={"x": "old x", "y": "new y"})
    bundle = diff._repr_mimebundle_()
    assert bundle == {"text/plain": format_diff(diff), "text/html": diff_html(diff)}
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(diff)
    assert data["text/html"] == diff_html(diff) and data["text/plain"] == format_diff(diff)


def test_html_is_deterministic_up_to_durations() -> None:
    """The only times in the HTML are durations, which the notebooks' sanitize file replaces."""
    cfg = ConfigParser()
    cfg.read(Path(__file__).resolve().parent.parent / "notebooks" / "nbval-sanitize.cfg")
    patterns = [(cfg[s]["regex"], cfg[s]["replace"]) for s in cfg.sections()]

    def sanitize(text: str) -> str:
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    fast = result_html(planbook.run(spec(), tools=tools({"beta"}), clock=clock(0.0001)))
    slow = result_html(planbook.run(spec(), tools=tools({"beta"}), clock=clock(3.5)))
    assert fast != slow
    assert sanitize(fast) == sanitize(slow)
    assert fast == result_html(planbook.run(spec(), tools=tools({"beta"}), clock=clock(0.0001)))


def test_format_duration() -> None:
    assert format_duration(None) == ""
    assert format_duration(0.0123) == "12.3 ms"
    assert format_duration(1.5) == "1.50 s"


def test_plan_mimebundle_uses_plan_html() -> None:
    plan = Plan.parse(spec(), id="p")
    bundle = plan._repr_mimebundle_()
    assert bundle["text/html"] == plan_html(plan)
    assert plan.steps[0].status is Status.not_started


def test_result_of_an_unstarted_budget() -> None:
    plan = Plan.parse(spec(), id="p")
    result = RunResult(status="paused", reason="paused", plan=plan, max_steps=3, max_replans=0)
    assert "Run paused: steps 0/3, replans 0/0" in result_html(result)


def test_live_html_of_a_long_plan_shows_a_window_around_the_running_step() -> None:
    from planbook.views.html import state_html
    from planbook.views.state import frontier
    from planbook.views.state import ViewState

    plan = Plan(id="long", steps=[planbook.Step(id=str(i), tool="fetch", args={"source": "s"}) for i in range(120)])
    for step in plan.steps[:60]:
        step.status = Status.completed
    plan.steps[60].status = Status.in_progress
    assert frontier(plan.steps) == 60
    state = ViewState(plan=plan, status="running", max_steps=200, max_replans=5)
    page = state_html(state, max_rows=10)
    assert re.findall(r'data-step="(\d+)"', page) == [str(i) for i in range(57, 67)]  # a third above the running step
    assert "… 57 steps above" in page and "… 53 steps below" in page
    assert page.count('<tr class="planbook-step ') == 10
    assert state_html(state).count('<tr class="planbook-step ') == 120
    plan.steps[60].status = Status.not_started
    assert frontier(plan.steps) == 59


# ------------------------------------------------------------------ timelines you can read
from planbook.views.state import Execution  # noqa: E402
from planbook.views.svg import CHAR_W, MIN_BAR, clip_label, dominated, graph_svg, linear_ticks, timeline_svg  # noqa: E402


def _bars(svg: str) -> list[tuple[str, float, float, float]]:
    """(step, x, y, width) of each execution bar."""
    return [(m[0], float(m[1]), float(m[2]), float(m[3])) for m in re.findall(
        r'<g class="pb-bar-ex[^"]*" data-step="([^"]+)"[^>]*><title>[^<]*</title><rect x="([\d.]+)" y="(\d+)" '
        r'width="([\d.]+)"', svg)]


def _labels(svg: str) -> list[tuple[float, float, str]]:
    """(x, y, text) of each label drawn on a bar."""
    return [(float(x), float(y), html.unescape(t)) for x, y, t in
            re.findall(r'<text x="([\d.]+)" y="(\d+)" font-size="10" class="pb-on-bar"[^>]*>([^<]*)</text>', svg)]


def test_timeline_has_a_time_axis_with_ticks() -> None:
    ex = [Execution(1, "a", 1, 1, None, 0.0, 0.4, True), Execution(2, "b", 1, 1, None, 0.4, 1.0, True)]
    svg = timeline_svg(ex, origin=0.0)
    ticks = re.findall(r'class="pb-tick-label"[^>]*>([^<]+)</text>', svg)
    assert ticks[0] == "0" and "200.0 ms" in ticks and "1.00 s" in ticks
    assert svg.count('class="pb-tick"') == len(linear_ticks(1.0)) >= 5
    assert [round(t, 6) for t in linear_ticks(1.0)] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_an_instant_step_is_still_a_bar_and_labels_never_overlap() -> None:
    ex = [Execution(1, "rate", 1, 1, None, 0.0, 0.0001, False),
          Execution(2, "rate_backup_with_a_long_name", 1, 1, None, 0.0001, 0.0002, True),
          Execution(3, "slow", 1, 1, None, 0.0002, 1.0, True)]
    svg = timeline_svg(ex, origin=0.0, scale="linear")
    bars = _bars(svg)
    assert all(width >= MIN_BAR for _, _, _, width in bars)
    # bars in one lane never overlap (an instant bar drawn MIN_BAR wide pushes the next one to another lane)
    for i, (_, x1, y1, w1) in enumerate(bars):
        for _, x2, y2, w2 in bars[i + 1:]:
            assert y1 != y2 or x1 + w1 <= x2 or x2 + w2 <= x1
    # a label fits inside its bar (so two labels never overlap), cut with an ellipsis; the full name is the title
    for x, y, text in _labels(svg):
        bar = next(b for b in bars if abs(b[1] + 3 - x) < 0.01 and abs(b[2] + 10 - y) < 0.01)
        assert len(text) * CHAR_W <= bar[3] - 6 + 0.01
    assert "<title>#2 step rate_backup_with_a_long_name" in svg
    assert clip_label("rate_backup", 50) == "rate_b…" and clip_label("rate", 50) == "rate" and clip_label("x", 5) == ""


def test_revision_markers_stack_instead_of_overlapping() -> None:
    ex = [Execution(1, "a", 1, 1, None, 0.0, 1.0, False), Execution(2, "b", 1, 2, None, 1.0, 1.001, False),
          Execution(3, "c", 1, 3, None, 1.001, 1.002, False), Execution(4, "d", 1, 4, None, 1.002, 2.0, True)]
    svg = timeline_svg(ex, origin=0.0, scale="linear")
    labels = [(float(x), float(y)) for x, y in
              re.findall(r'<g class="pb-replan">.*?<text x="([\d.]+)" y="([\d.]+)"[^>]*>revision \d</text>', svg)]
    assert len(labels) == 3
    assert len({y for _, y in labels}) == 3  # at the same x: three rows, not "revrevi"


def test_a_log_scale_when_one_step_dominates() -> None:
    ex = [Execution(i, f"s{i}", 1, 1, None, i * 0.001, i * 0.001 + 0.001, True) for i in range(1, 6)]
    ex.append(Execution(6, "slow", 1, 1, None, 0.006, 10.0, True))
    assert dominated([0.001] * 5 + [10.0]) and not dominated([0.001, 0.002, 0.0015])
    auto = timeline_svg(ex, origin=0.0)
    assert 'data-scale="log"' in auto and "log time scale (one step dominates)" in auto
    linear = timeline_svg(ex, origin=0.0, scale="linear")
    assert 'data-scale="linear"' in linear and "log time scale" not in linear
    # on the log scale the fast steps are told apart; on the linear one they are squashed into a sliver
    xs_log = [x for step, x, _, _ in _bars(auto) if step != "slow"]
    xs_lin = [x for step, x, _, _ in _bars(linear) if step != "slow"]
    assert max(xs_log) - min(xs_log) > 50 and max(xs_lin) - min(xs_lin) < 5


def test_graph_edges_have_arrowheads_without_markers() -> None:
    plan = Plan.parse("steps:\n  - {id: a, tool: t}\n  - {id: b, tool: t, needs: [a]}\n  - {id: c, tool: t, needs: [a, b]}\n")
    svg = graph_svg(plan)
    assert svg.count('class="pb-edge"') == 3 and svg.count('class="pb-arrowhead"') == 3
    assert "<marker" not in svg and "url(#" not in svg  # ids collide between outputs; a hidden marker draws nothing
