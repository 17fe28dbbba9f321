"""Every execution has its pane (issue 37 §3), a pane's times are its bar's, and a waiting step
looks waiting everywhere (§5): the record, the live view's JSON and the graph, without a browser."""

from __future__ import annotations

import re

import pytest

import planbook
from helpers import lines_run_in
from planbook import Plan, ScriptedPlanner, Status, Toolbox
from planbook.data.stepmark import StepMark
from planbook.views import charts
from planbook.views.record import record_html
from planbook.views.state import ViewState

PLAN = ("steps:\n  - {id: alpha, tool: fetch, args: {source: alpha}}\n"
        "  - {id: beta, tool: fetch, args: {source: beta}, needs: [alpha]}\n")


def tools() -> Toolbox:
    tb = Toolbox()

    @tb.tool
    def fetch(source: str) -> str:
        """Fetch a source (beta is down)."""
        print("fetching", source, "now")
        if source == "beta":
            raise ConnectionError("beta is down today")
        return source.upper()

    return tb


def replanned() -> planbook.RunResult:
    planner = ScriptedPlanner({None: PLAN, "beta": [{"id": "gamma", "tool": "fetch", "args": {"source": "gamma"}}]})
    result = planbook.run("Fetch", planner=planner, tools=tools(), on_failure="replan")
    assert result.status == "completed" and [s.id for s in result.plan.steps] == ["alpha", "gamma"]
    return result


def test_the_record_lists_a_removed_step_under_its_revision_with_its_execution_pane() -> None:
    page = record_html(ViewState.of_result(replanned()))
    group = re.search(r'<div class="planbook-removed-steps" data-revision="2".*?</details>', page, re.S)
    assert group, "the record does not list the step revision 2 removed"
    body = group.group(0)
    assert "Removed in revision 2" in body and "after: step beta failed: ConnectionError: beta is down today" in body
    assert 'planbook-execution-pane" data-execution="2" data-pane="beta"' in body
    assert "Traceback (most recent call last)" in body and "fetching beta now" in body  # traceback, printed
    assert "fetch(source=&#x27;beta&#x27;)" in body and "started +" in body


def test_a_retrys_earlier_attempt_has_its_pane_under_the_timeline() -> None:
    calls = {"n": 0}
    tb = Toolbox()

    @tb.tool
    def flaky() -> str:
        """Fails once."""
        calls["n"] += 1
        print("attempt", calls["n"])
        if calls["n"] == 1:
            raise TimeoutError("first try times out")
        return "ok"

    result = planbook.run("steps:\n  - {id: f, tool: flaky}\n", tools=tb, on_failure="retry", retries=1)
    assert result.status == "completed"
    page = record_html(ViewState.of_result(result))
    earlier = re.search(r'<details class="planbook-execution" data-execution="1" data-step="f">(.*?)</details>', page, re.S)
    assert earlier, "the failed first attempt has no pane"
    assert "TimeoutError: first try times out" in earlier.group(1) and "attempt 1" in earlier.group(1)
    assert "attempt 2" not in earlier.group(1)  # its own printed text, not the step's latest


def test_the_live_view_sends_the_removed_executions_pane_and_lists_it() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    view = PlanView(replanned())
    try:
        sent = view.batch["executions"]
        assert list(sent) == ["2"], sent  # beta's execution: alpha and gamma open their steps' panes
        beta = sent["2"]
        assert beta["status"] == "failed" and beta["step"] == "beta" and beta["revision"] == 1
        assert "ConnectionError: beta is down today" in beta["traceback"] and beta["output"] == "fetching beta now\n"
        assert view.head["removed"] == [[2, "step beta failed: ConnectionError: beta is down today",
                                         [["beta", "fetch(source='beta')", 2]]]]
        view.resend()
        assert "2" in view.batch["executions"]
    finally:
        view.close()


def test_a_panes_start_is_its_bars_start() -> None:
    """A call handed to an executor keeps the run's times on its step and its own in its event: the
    bar showed the call's, the pane the step's (the committed notebook 01's record: pane +5.2 ms, bar
    +1.7 ms). Both now show the execution's."""
    result = planbook.run(PLAN.replace("beta", "b2"), tools=tools())
    for event in result.events:
        if event.kind == "step.finished" and event.step == "alpha":  # the call's own times, as an executor sends
            event.data["call_start"] = result.plan.step("alpha").started_at + 0.003  # type: ignore[operator]
            event.data["call_end"] = event.data["call_start"] + 0.0005
    state = ViewState.of_result(result)
    page = record_html(state)
    pane = re.search(r'data-pane="alpha"[^>]*>(?:(?!data-pane=).)*?started \+([\d.]+ ms)', page, re.S)
    bar = re.search(r'data-step="alpha" title="#1 step alpha[^"]*?: \+([\d.]+ ms) ', page)
    assert pane and bar and pane.group(1) == bar.group(1), (pane and pane.group(1), bar and bar.group(1))


def waiting_plan() -> Plan:
    plan = Plan.parse("steps:\n  - {id: write, tool: echo, args: {text: hello}}\n"
                      "  - {id: send, tool: echo, args: {text: $write}, needs: [write]}\n")
    plan.step("write").set_state(status=Status.completed, result="hello world")
    plan.step("send").set_state(mark=StepMark.waiting)
    return plan


def test_a_waiting_step_is_waiting_in_its_row_pane_and_graph() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    plan = waiting_plan()
    view = PlanView(plan)
    try:
        assert view.statuses == "cw"  # not "n": the row, pane and graph read it as waiting ([?])
        row = next(r for r in view.rows if r[0] == "send")
        assert row[2] == "echo(text='hello world')", row  # the value it will be passed, as its pane shows
        pane = view.pane("send") or view.open("send")
        assert pane.get("status_text", "").startswith("waiting for your decision"), pane
        assert view.head["counts"] == {"completed": 1, "not_started": 1}
    finally:
        view.close()
    graph = charts.graph_html(plan)
    node = re.search(r'<li class="pb-node planbook-not_started" data-step="send"[^>]*>([^<]*)', graph)
    assert node and node.group(1).startswith("[?] send"), graph
    assert "background-color:#8a5300" in re.search(r'data-step="send"[^>]*', graph).group(0)  # type: ignore[union-attr]


def test_a_run_of_many_retries_keeps_a_bounded_few_execution_panes_in_its_record() -> None:
    """200 steps that fail twice with a long error before they complete: the record keeps 12 earlier
    executions' panes within RECORD_EXECUTION_TOTAL, and counts the rest. Once that total was spent a
    pane's texts were kept whole (a cut to 0 characters kept all of them)."""
    from planbook.views.record import RECORD_EXECUTION_PANES, RECORD_EXECUTION_TOTAL, RECORD_PANE_CAP

    calls: dict[int, int] = {}
    tb = Toolbox()

    @tb.tool(cache=False)
    def flaky(i: int) -> str:
        """Fails twice, then works."""
        calls[i] = calls.get(i, 0) + 1
        if calls[i] < 3:
            raise RuntimeError(f"boom {i} " + "x" * 3000)
        return "ok"

    n = 200
    spec = "steps:\n" + "".join(f"  - {{id: s{i}, tool: flaky, args: {{i: {i}}}}}\n" for i in range(n))
    result = planbook.run(spec, tools=tb, on_failure="retry", retries=3, max_steps=4 * n)
    assert result.status == "completed" and result.executions == 3 * n
    page = record_html(ViewState.of_result(result))
    section = page[page.index('<div class="planbook-executions"'):]
    section = section[:section.index("more earlier executions")]
    assert section.count('<details class="planbook-execution"') == RECORD_EXECUTION_PANES
    assert f"and {2 * n - RECORD_EXECUTION_PANES:,} more earlier executions" in page
    kept = len(re.findall("x", section))
    # the total, and the one pane that crosses it (its texts each within the pane's cap)
    assert kept <= RECORD_EXECUTION_TOTAL + 5 * RECORD_PANE_CAP, kept



def test_a_replan_that_removes_many_steps_lists_a_few_of_them_live_and_in_the_record() -> None:
    """A replan that replaces a 300-step plan: the steps it removed that never ran were each listed
    under their revision, in the record (beside the revision's diff, which lists them all) and in the
    live view's head, which is sent again with every draw."""
    from planbook.views.panes import REMOVED_LINES

    tb = Toolbox()

    @tb.tool
    def work(i: int) -> str:
        """Step 0 fails."""
        if i == 0:
            raise RuntimeError("down")
        return "ok"

    n = 300
    first = "steps:\n" + "".join(f"  - {{id: s{i}, tool: work, args: {{i: {i}}}}}\n" for i in range(n))
    planner = ScriptedPlanner({None: first, "down": [{"id": "g", "tool": "work", "args": {"i": 1}}]})
    result = planbook.run("Work", planner=planner, tools=tb, on_failure="replan", max_steps=n)
    assert [s.id for s in result.plan.steps] == ["g"] and len(result.revisions[0].removed) == n
    page = record_html(ViewState.of_result(result))
    assert page.count('class="planbook-removed-step"') == REMOVED_LINES
    assert f"and {n - 1 - REMOVED_LINES:,} more that never ran" in page
    assert 'data-pane="s0"' in page  # the one that ran keeps its row and pane
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    view = PlanView(result)
    try:
        ((revision, _, listed),) = view.head["removed"]
        assert revision == 2 and len(listed) == 1 + REMOVED_LINES + 1, len(listed)
        assert listed[0][0] == "s0" and listed[0][2] is not None  # it ran: a click opens its execution
        assert listed[-1][2] is None and listed[-1][1] == f"and {n - 1 - REMOVED_LINES:,} more"
    finally:
        view.close()


def test_a_view_of_many_retried_steps_finds_their_earlier_executions_in_linear_work() -> None:
    """Each earlier execution's history entry was found by a pass over the executions before it (a view
    of 16,000 steps retried once: 27 s, now under 2). Counted in lines of panes.py run, not timed."""

    pytest.importorskip("anywidget")
    from planbook.views import panes
    from planbook.views.widget import PlanView

    def lines_run(n: int) -> int:
        failed: set[int] = set()
        tb = Toolbox()

        @tb.tool(cache=False)
        def flaky(i: int) -> str:
            """Fails once."""
            if i not in failed:
                failed.add(i)
                raise RuntimeError("once")
            return "ok"

        spec = "steps:\n" + "".join(f"  - {{id: s{i}, tool: flaky, args: {{i: {i}}}}}\n" for i in range(n))
        result = planbook.run(spec, tools=tb, on_failure="retry", retries=1, max_steps=2 * n)
        assert result.executions == 2 * n
        views: list[PlanView] = []
        count = lines_run_in(panes, lambda: views.append(PlanView(result)))
        assert len(views[0].executions.panes) == n  # each step's failed first attempt
        views[0].close()
        return count

    small, large = lines_run(50), lines_run(400)
    assert large < 12 * small, (small, large)  # 8× the steps: about 8× the work, not 64×
