"""What the views send out: revision diffs through the gate on every path (the widget's trait,
the terminal, a diff shown alone), a result's HTML kept inside its pane (the sanitiser's CSS
values, the record's clipping box), and texts bounded wherever a view shows them."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest

from planbook import Runner, Secret, Toolbox
from planbook.data.diff import diff_plans
from planbook.data.models import PlanDiff, Status
from planbook.outbound import remember
from planbook.outbound.html import STYLES_LEFT_OUT_NOTE, kept_style, sanitize_html
from planbook.spec.formats import plan_from_dict
from planbook.views import ViewState, format_state
from planbook.views.panes import PaneBudget, pane
from planbook.views.record import record_bundle

#: a secret the process knows (a run learned it), and a literal Secret
CANARY = "canary-exits-Hq73Lw2pZ"
remember([CANARY])
DB = Secret("canary-exits-secret-9XaRt", name="exits-db")


def leaked(text: Any) -> bool:
    text = str(text)
    return CANARY in text or DB.reveal() in text or "9XaRt" in text


def raw_diff() -> PlanDiff:
    """A diff as the engine may keep one (a refused replacement, an edit): raw texts that quote secrets."""
    return PlanDiff(from_revision=1, to_revision=2, added=["b"], revised=["a"],
                    reason=f"step a failed: login refused for {CANARY}",
                    steps={"b": f'fetch(url="https://bob:{CANARY}@example.com")', "a": f"login(note={CANARY!r})"},
                    rejected=f"the plan named {CANARY} in clear")


def made_diff() -> PlanDiff:
    old = plan_from_dict({"steps": [{"id": "a", "tool": "login", "args": {"user": "bob"}}]})
    new = plan_from_dict({"steps": [
        {"id": "a", "tool": "login", "args": {"user": "bob", "password": "canary-exits-pw-Rm28q"}},
        {"id": "b", "tool": "fetch", "args": {"value": DB, "token": DB}}]})
    new.revision = 2
    return diff_plans(old, new, reason=f"retry after {CANARY}")


# ------------------------------------------------------------------ revision diffs, every path
def test_the_widgets_revisions_trait_passes_the_gate() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    plan = plan_from_dict({"steps": [{"id": "a", "tool": "login"}, {"id": "b", "tool": "fetch"}]})
    view = PlanView(ViewState(plan=plan, status="running", revisions=[raw_diff(), made_diff()]))
    sent = view.widget.revisions
    assert not leaked(sent) and "canary-exits-pw" not in str(sent)
    first, second = sent
    assert first["reason"] == "step a failed: login refused for ***" and first["rejected"] == "the plan named *** in clear"
    assert first["steps"]["b"] == 'fetch(url="https://***@example.com")'
    assert second["steps"]["a"] == "login(user='bob', password=***)"
    assert second["steps"]["b"] == "fetch(value=Secret(***, name='exits-db'), token=***)"  # the reference, never the value


def test_a_diff_shown_alone_hides_secrets_in_its_str_bundle_and_repr() -> None:
    for diff in (raw_diff(), made_diff()):
        bundle = diff._repr_mimebundle_()
        for shown in (str(diff), bundle["text/plain"], bundle["text/html"], repr(diff)):
            assert not leaked(shown) and "canary-exits-pw" not in shown, shown
    assert "Secret(***, name='exits-db')" in str(made_diff()) and "password=***" in str(made_diff())
    # made by diff_plans, a diff holds no known secret at all (whatever dumps it later)
    assert not leaked(made_diff().model_dump_json())


def test_the_terminal_prints_a_replans_diff_through_the_gate_and_bounded() -> None:
    pytest.importorskip("rich")
    from rich.console import Console

    from planbook.views.terminal import TerminalView

    tools = Toolbox()

    @tools.tool
    def boom() -> None:
        """Always fails."""
        raise RuntimeError("boom")

    @tools.tool
    def inc(x: int) -> int:
        """Add one."""
        return x + 1

    long_task = f'retry with password="{CANARY}" ' + "padding " * 10_000
    planner = lambda goal, history, last_error: [{"id": "fix", "tool": "inc", "args": {"x": 1}, "task": long_task}]  # noqa: E731
    runner = Runner(plan_from_dict({"goal": "g", "steps": [{"id": "bad", "tool": "boom"}]}), planner=planner, tools=tools)
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    with TerminalView(runner, console=console):
        runner.run()
    text = console.file.getvalue()
    assert "Replanned Revision 1 → 2" in text and "+ fix: retry with password" in text
    assert not leaked(text)
    assert "characters left out" in text and len(text) < 40_000


# ------------------------------------------------------------------ a result's HTML stays in its pane
FORGED = ('<div style="margin-top:-900px;height:100vh;position:fixed;transform:scale(3);'
          'background-color:#fff;color:#2e7d32">Run completed (goal_met)</div>')


def test_the_sanitiser_strips_what_moves_a_result_out_of_its_pane() -> None:
    kept = sanitize_html(FORGED)
    assert kept is not None
    assert kept.html == '<div style="background-color:#fff;color:#2e7d32">Run completed (goal_met)</div>'
    assert kept.left_out == STYLES_LEFT_OUT_NOTE
    assert sanitize_html(kept.html) == (kept.html, "")  # a fixed point


@pytest.mark.parametrize("declaration", [
    "margin-top:-1px", "margin:0 -5px", "margin-left:- 5px", "text-indent:-9999px", "height:5000px",
    "min-height:100vh", "max-height:100dvh", "width:99999px", "width:1e5px", "font-size:1E4PX", "padding:calc(100vh)",
    "height:var(--x)", 'font-family:"a;margin-top:-9px"', "color:red!important", "margin:/**/-9px", "height:101%",
    "line-height:expression(1)",
])
def test_a_negative_page_sized_or_computed_css_value_is_dropped(declaration: str) -> None:
    assert kept_style(f"{declaration};color:red") == "color:red"


@pytest.mark.parametrize("declaration", [
    "margin:4px 0", "width:100%", "height:200px", "background-color:rgb(1,2,3)", "white-space:pre-wrap",
    "font-family:sans-serif", "border:1px solid #ccc", "line-height:1.4", "text-align:right",
])
def test_plain_css_values_are_kept(declaration: str) -> None:
    assert kept_style(f" {declaration} ; color : red ") == f"{declaration};color:red"


class Forged:
    """A result whose HTML pretends the run completed."""

    def _repr_html_(self) -> str:
        return FORGED


def test_the_records_pane_clips_a_results_html() -> None:
    tools = Toolbox()

    @tools.tool
    def forge() -> Forged:
        """Return the forged verdict."""
        return Forged()

    @tools.tool
    def fail() -> None:
        """Fail the run."""
        raise RuntimeError("the real failure")

    runner = Runner(plan_from_dict({"steps": [{"id": "a", "tool": "forge"}, {"id": "b", "tool": "fail", "needs": ["a"]}]}),
                    tools=tools)
    result = runner.run()
    assert result.status == "failed"
    page = record_bundle(ViewState.of_result(result), opened="a")["text/html"]
    assert "margin-top:-900px" not in page and "position:fixed" not in page and "100vh" not in page
    (pane_style,) = re.findall(r'class="planbook-pane-body" data-pane="a" style="([^"]*)"', page)
    assert "position:relative" in pane_style and "overflow:hidden" in pane_style
    (box_style,) = re.findall(r'class="planbook-returned" style="([^"]*)"', page)
    assert {"position:relative", "overflow:auto"} <= set(box_style.split(";"))
    assert re.search(r"max-height:\d+px", box_style)
    # the forged line is inside the clipping box, after the real verdict
    assert page.index("Run failed") < page.index('class="planbook-returned"') < page.index("Run completed (goal_met)")


# ------------------------------------------------------------------ bounded wherever shown
HUGE = "x" * 14_990 + CANARY + "y" * 300_000


def failed_state(n: int = 3) -> ViewState:
    plan = plan_from_dict({"goal": "g", "steps": [{"id": f"s{i}", "tool": "t", "task": f"task {i}"}
                                                  for i in range(1, n + 1)]})
    for step in plan.steps:
        step.status = Status.completed
    last = plan.steps[-1]
    last.status, last.error, last.task = Status.failed, HUGE, "t" * 50_000 + CANARY
    return ViewState(plan=plan, status="failed", reason="aborted", error=f"step {last.id} failed: {HUGE}")


def test_an_error_and_a_task_are_cut_wherever_a_view_shows_them_saying_so() -> None:
    state = failed_state()
    bundle = record_bundle(state)
    text, page = bundle["text/plain"], bundle["text/html"]
    assert len(text) < 60_000 and len(page) < 120_000
    assert "characters left out" in text and "characters left out" in page
    assert not leaked(text) and not leaked(page)
    assert len(format_state(state)) < 60_000  # print() too: every step, each one bounded
    data = pane(state.plan.steps[-1], {}, origin=None, budget=PaneBudget(), gate=state.gate)
    assert "characters left out" in data["error"] and len(data["error"]) <= PaneBudget().per_pane + 100
    assert not leaked(data)


def test_the_widget_bounds_its_rows_and_head() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    view = PlanView(failed_state())
    assert len(view.widget.head["error"]) < 25_000 and "characters left out" in view.widget.head["error"]
    assert all(len(row[2]) < 3_000 for row in view.widget.rows)
    assert not leaked(view.widget.head) and not leaked(view.widget.rows)


def test_a_20000_step_runs_record_text_lists_the_first_and_last_steps() -> None:
    n = 20_000
    plan = plan_from_dict({"steps": [{"id": f"s{i}", "tool": "t"} for i in range(1, n + 1)]})
    for step in plan.steps:
        step.status = Status.completed
    state = ViewState(plan=plan, status="completed", reason="goal_met")
    text = record_bundle(state)["text/plain"]
    lines = text.splitlines()
    assert len(lines) < 250
    assert any(line.startswith("s1. ") for line in lines) and any(line.startswith("s100. ") for line in lines)
    assert not any(line.startswith("s101. ") for line in lines) and not any(line.startswith("s19900. ") for line in lines)
    assert any(line.startswith("s19901. ") for line in lines) and lines[-3].startswith("s20000. ")
    assert "… 19,800 steps left out (print() lists every step)" in text
    assert len(format_state(state).splitlines()) > n  # print(result) lists every step
