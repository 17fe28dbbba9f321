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
    assert page.count('<tr data-step=') == 2
    assert 'data-step="a"' in page and 'data-step="b"' in page
    assert "needs a" in page
    assert 'class="planbook-progress"' in page and "width:0.0%" in page
    assert "[ ] 2 not started" in page


def test_rows_are_coloured_by_status_and_show_errors() -> None:
    result = planbook.run(spec(), tools=tools({"beta"}), clock=clock())
    page = plan_html(result.plan)
    # a completed row carries no class and no style (its mark says it); a failed one a faint red tint
    assert '<tr data-step="a"><td>[✓]</td>' in page
    assert '<tr data-step="b" class="planbook-failed" style="background-color:rgba(183,28,28,0.15)"><td>[✗]</td>' in page
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
    assert 'class="planbook-verdict planbook-run-failed planbook-tone-bad" style="border-left:4px solid #b71c1c' in page
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
    cfg.read(Path(__file__).resolve().parents[2] / "notebooks" / "nbval-sanitize.cfg")
    patterns = [(cfg[s]["regex"], cfg[s]["replace"]) for s in cfg.sections()]

    def sanitize(text: str) -> str:
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    fast = result_html(planbook.run(spec(), tools=tools({"beta"}), clock=clock(0.0001)))
    slow = result_html(planbook.run(spec(), tools=tools({"beta"}), clock=clock(3.5)))
    assert fast != slow
    assert sanitize(fast) == sanitize(slow)
    # the same clock, the same HTML but for the run's id (a pane's fork line names the run)
    run_id = re.compile(cfg["run-ids"]["regex"])
    again = result_html(planbook.run(spec(), tools=tools({"beta"}), clock=clock(0.0001)))
    assert run_id.sub("RUN_ID", fast) == run_id.sub("RUN_ID", again)


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
    from planbook.views.state import ViewState, frontier

    plan = Plan(id="long", steps=[planbook.Step(id=str(i), tool="fetch", args={"source": "s"}) for i in range(120)])
    for step in plan.steps[:60]:
        step.status = Status.completed
    plan.steps[60].status = Status.in_progress
    assert frontier(plan.steps) == 60
    state = ViewState(plan=plan, status="running", max_steps=200, max_replans=5)
    page = state_html(state, max_rows=10)
    assert re.findall(r'data-step="(\d+)"', page) == [str(i) for i in range(57, 67)]  # a third above the running step
    assert "… 57 steps above" in page and "… 53 steps below" in page
    assert page.count('<tr data-step=') == 10
    assert state_html(state).count('<tr data-step=') == 120
    plan.steps[60].status = Status.not_started
    assert frontier(plan.steps) == 59


# ------------------------------------------------------------------ timelines you can read
from planbook.data.timeline import Execution  # noqa: E402
from planbook.views.charts import (  # noqa: E402
    BUCKETS,
    MAX_BARS,
    MAX_NODES,
    MIN_BAR,
    graph_html,
    lanes_of,
    linear_ticks,
    timeline_html,
)


def _bars(page: str) -> list[tuple[str, int, float, float, str]]:
    """(step, lane, margin %, width %, label) of each execution bar, lane by lane."""
    out = []
    for lane, body in enumerate(re.findall(r'<div class="pb-lane"[^>]*>(.*?)</div>(?=<div class="pb-(?:lane|axis)")', page)):
        for step, margin, width, label in re.findall(
                r'<div class="pb-bar pb-\w+[^"]*" data-step="([^"]+)" title="[^"]*" style="[^"]*margin-left:([\d.]+)%;'
                r'width:([\d.]+)%[^"]*">([^<]*)</div>', body):
            out.append((step, lane, float(margin), float(width), html.unescape(label)))
    return out


def test_timeline_has_a_time_axis_with_ticks() -> None:
    ex = [Execution(1, "a", 1, 1, None, 0.0, 0.4, True), Execution(2, "b", 1, 1, None, 0.4, 1.0, True)]
    page = timeline_html(ex, origin=0.0)
    ticks = re.findall(r'class="pb-tick"[^>]*>([^<]+)</div>', page)
    assert ticks == ["0", "200.0 ms", "400.0 ms", "600.0 ms", "800.0 ms"]  # the last, at the very end, has no room
    assert [round(t, 6) for t in linear_ticks(1.0)] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_a_serial_run_is_one_lane_whatever_the_minimum_width() -> None:
    """Lanes by real overlap in time: instant steps one after another stay in one lane (the old SVG
    put them in lanes by drawn extent, so a one-at-a-time run looked parallel)."""
    ex = [Execution(1, "rate", 1, 1, None, 0.0, 0.0001, False),
          Execution(2, "rate_backup_with_a_long_name", 1, 1, None, 0.0001, 0.0002, True),
          Execution(3, "slow", 1, 1, None, 0.0002, 1.0, True)]
    page = timeline_html(ex, origin=0.0)
    bars = _bars(page)
    assert [(step, lane) for step, lane, *_ in bars] == [("rate", 0), ("rate_backup_with_a_long_name", 0), ("slow", 0)]
    assert "3 executions in 1 lane," in page and 'data-scale="linear"' in page
    assert all(width >= MIN_BAR for *_, width, _ in bars)
    # bars of a lane follow each other in the flow, never over each other; a bar after one widened to
    # the minimum starts where that one ends, and the lane never runs past its width
    assert sum(margin + width for _, _, margin, width, _ in bars) <= 100.01
    # each bar's label is inside it (clipped by the bar), and its title says it all
    assert [label for *_, label in bars] == ["rate 0.1 ms", "rate_backup_with_a_long_name 0.1 ms", "slow 999.8 ms"]
    assert 'title="#2 step rate_backup_with_a_long_name, attempt 1, revision 1: +0.1 ms → +0.2 ms (0.1 ms, completed)"' in page
    assert "overflow:hidden" in page and "white-space:nowrap" in page


def test_executions_that_ran_at_once_take_lanes_of_their_own() -> None:
    ex = [Execution(1, "a", 1, 1, "w1", 0.0, 1.0, True), Execution(2, "b", 1, 1, "w2", 0.5, 1.5, True),
          Execution(3, "c", 1, 1, "w1", 1.0, 2.0, True)]
    assert lanes_of([(e.start, e.end) for e in ex]) == [0, 1, 0]
    page = timeline_html(ex, origin=0.0)
    assert "3 executions in 2 lanes" in page
    assert [(step, lane) for step, lane, *_ in _bars(page)] == [("a", 0), ("c", 0), ("b", 1)]


def test_one_linear_scale_even_when_one_step_dominates() -> None:
    ex = [Execution(i, f"s{i}", 1, 1, None, i * 0.001, i * 0.001 + 0.001, True) for i in range(1, 6)]
    ex.append(Execution(6, "slow", 1, 1, None, 0.006, 10.0, True))
    page = timeline_html(ex, origin=0.0)
    assert 'data-scale="linear"' in page and "log" not in page
    widths = {step: width for step, _, _, width, _ in _bars(page)}
    assert widths["slow"] > 99 - 6 * MIN_BAR and all(widths[f"s{i}"] == MIN_BAR for i in range(1, 6))


def test_revision_markers_stack_instead_of_overlapping() -> None:
    ex = [Execution(1, "a", 1, 1, None, 0.0, 1.0, False), Execution(2, "b", 1, 2, None, 1.0, 1.001, False),
          Execution(3, "c", 1, 3, None, 1.001, 1.002, False), Execution(4, "d", 1, 4, None, 1.002, 2.0, True)]
    page = timeline_html(ex, origin=0.0)
    rows = re.findall(r'<div style="[^"]*">((?:<div class="pb-replan"[^>]*>[^<]*</div>)+)</div>', page)
    assert [re.findall(r">(revision \d)<", row) for row in rows] == [["revision 2"], ["revision 3"], ["revision 4"]]


def test_a_long_timeline_is_summarised_in_slices_of_time() -> None:
    ex = [Execution(i, f"s{i}", 1, 1, None, i * 0.01, i * 0.01 + 0.01, i % 97 != 5) for i in range(1, 2 * MAX_BARS)]
    page = timeline_html(ex, origin=0.0)
    assert 'data-scale="summary"' in page and f"{len(ex):,} executions" in page and "too many to draw" in page
    widths = [int(w) for w in re.findall(r'class="pb-bar pb-\w+" title="[^"]*" style="display:inline-block;'
                                         r'(?:margin-left:\d+%;)?width:(\d+)%', page)]
    assert sum(widths) <= BUCKETS and len(widths) < MAX_BARS
    assert page.count('class="pb-bar pb-failed"') == 5  # the failed executions' slices are red, the others green
    assert 'title="1 execution, steps s102..s102' in page or "worst: failed" in page


def test_the_graph_is_badges_by_level_with_their_needs() -> None:
    plan = Plan.parse("steps:\n  - {id: a, tool: t}\n  - {id: b, tool: t, needs: [a]}\n  - {id: c, tool: t, needs: [a, b]}\n")
    page = graph_html(plan)
    levels = re.findall(r'<div class="pb-level"><span[^>]*>(level \d)</span><ul[^>]*>(.*?)</ul></div>', page)
    assert [(level, re.findall(r">\[ \] ([^<]*)</li>", nodes)) for level, nodes in levels] == [
        ("level 1", ["a"]), ("level 2", ["b · needs a"]), ("level 3", ["c · needs a, b"])]
    assert "<svg" not in page and 'title="c (not_started): t()"' in page


def test_a_large_graph_is_summarised_by_level() -> None:
    n = MAX_NODES + 50
    steps = "\n".join(f"  - {{id: s{i}, tool: t{', needs: [s' + str(i - 1) + ']' if i else ''}}}" for i in range(n))
    page = graph_html(Plan.parse(f"steps:\n{steps}"))
    assert "planbook-graph-summary" in page and "pb-node" not in page
    assert f"{n} steps in {n} dependency levels" in page
    assert f"levels 1–{n}: 1 step each ({n} not started): s0, s1 … s{n - 1}" in page


def test_no_style_the_untrusted_sanitizer_drops() -> None:
    """An untrusted notebook's sanitizer drops every CSS value with var() or color-mix(): the
    static views use none (plain colours that read on light and dark pages), and no SVG."""
    planner = ScriptedPlanner({None: spec(), "beta": [{"id": "c", "tool": "fetch", "args": {"source": "gamma"}}]})
    result = planbook.run("Fetch things", planner=planner, tools=tools({"beta"}), clock=clock())
    diff = PlanDiff(from_revision=1, to_revision=2, removed=["x"], added=["y"], revised=["z"], steps={})
    for page in (result_html(result), plan_html(result.plan), diff_html(diff)):
        assert "var(" not in page and "color-mix" not in page and "<svg" not in page and "<style" not in page
        # text keeps the theme's colour: the only colour set on text is white, on a status fill
        assert set(re.findall(r"(?<![-\w])color:([^;\"]+)", page)) <= {"#fff"}


def test_with_its_styles_stripped_the_record_reads_as_lists() -> None:
    """GitHub strips every style: the timeline is then one block per execution that says which step
    ran and how long, the graph a list of steps with their needs, the rows a plain table."""
    result = planbook.run(spec(), tools=tools({"beta"}), clock=clock())
    bare = re.sub(r' style="[^"]*"', "", result_html(result))
    timeline = re.search(r'<div class="planbook-timeline".*?(?=<div>Bars: )', bare).group(0)
    bars = re.findall(r'<div class="pb-bar [^"]*" data-step="[^"]*" title="([^"]*)">([^<]*)</div>', timeline)
    assert [label for _, label in bars] == ["a 250.0 ms", "b 250.0 ms"]  # divs: one line each
    assert bars[1][0].startswith("#2 step b, attempt 1, revision 1, main: +") and bars[1][0].endswith("failed)")
    nodes = re.findall(r'<li class="pb-node [^"]*" data-step="[^"]*" title="[^"]*">([^<]*)</li>', bare)
    assert nodes == ["[✓] a", "[✗] b · needs a"]  # list items: one line each
    assert "<tr data-step=\"b\" class=\"planbook-failed\"><td>[✗]</td><th>b</th>" in bare
