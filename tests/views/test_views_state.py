"""The view model: states from scripted runs (serial, parallel, replans, failures, 10,000
steps), the layout every view shares, and the registry models reach the views through."""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import pytest

import planbook
from helpers import Lab, fake_clock
from planbook import Event, Plan, Runner, RunResult, ScriptedPlanner, Status, Step
from planbook.data.timeline import TimelineBuilder, with_overlaps
from planbook.spec.formats import plan_from_dict
from planbook.views import ViewState, budget_line, row_window, verdict_line
from planbook.views.html import result_html, state_html
from planbook.views.state import critical_path, frontier

ROOT = Path(__file__).resolve().parents[2]


def ev(kind: str, t: float, step: str | None = None, revision: int = 1, **data: object) -> Event:
    return Event(kind=kind, time=t, step=step, revision=revision, data=data)  # type: ignore[arg-type]


# ------------------------------------------------------------------ timeline from events
def test_a_serial_run_gives_one_bar_per_execution_in_order() -> None:
    lab = Lab()
    plan = plan_from_dict({"goal": "g", "steps": [
        {"id": "a", "tool": "fetch", "args": {"source": "x"}},
        {"id": "b", "tool": "count", "args": {"text": "$a"}},
    ]})
    result = planbook.run(plan, tools=lab.tools, clock=fake_clock(0.5))
    state = ViewState.of(result)
    assert [(e.execution, e.step, e.attempt, e.ok) for e in state.timeline] == [(1, "a", 1, True), (2, "b", 1, True)]
    first, second = state.timeline
    assert first.end is not None and first.end <= second.start and first.overlaps == second.overlaps == []
    assert state.critical_path() == [1, 2]  # b needed a
    assert [e.as_dict()["execution"] for e in state.timeline] == [1, 2]
    assert set(first.as_dict()) == {"execution", "step", "attempt", "revision", "worker", "start", "end", "ok", "overlaps"}


def test_parallel_events_interleave_and_bars_overlap() -> None:
    """Events of different steps interleave (the rebuilt engine runs steps in parallel)."""
    plan = Plan(id="p", steps=[Step(id="a", tool="t"), Step(id="b", tool="t"), Step(id="c", tool="t", needs=["a", "b"])])
    events = [
        ev("run.started", 0.0),
        ev("step.started", 0.0, "a", attempt=1, execution=1, worker="w1"),
        ev("step.started", 0.1, "b", attempt=1, execution=2, worker="w2"),
        ev("step.finished", 2.0, "b", duration=1.9, result="2", execution=2),
        ev("step.finished", 3.0, "a", duration=3.0, result="1", execution=1),
        ev("step.started", 3.0, "c", attempt=1, execution=3, worker="w1"),
        ev("step.failed", 3.5, "c", duration=0.5, error="RuntimeError: no", execution=3),
        ev("run.finished", 3.5, status="failed", reason="aborted"),
    ]
    builder = TimelineBuilder().feed_all(events)
    bars = with_overlaps(builder.executions)
    assert [(b.execution, b.worker, b.start, b.end, b.ok) for b in bars] == [
        (1, "w1", 0.0, 3.0, True), (2, "w2", 0.1, 2.0, True), (3, "w1", 3.0, 3.5, False)]
    assert bars[0].overlaps == [2] and bars[1].overlaps == [1] and bars[2].overlaps == []
    assert bars[2].error == "RuntimeError: no"
    assert critical_path(bars, plan) == [1, 3]  # c waited for a (the longer one), not b


def test_without_execution_numbers_bars_are_numbered_by_order_and_a_stopped_step_is_closed() -> None:
    events = [ev("step.started", 1.0, "a"), ev("step.finished", 2.0, "a", duration=1.0),
              ev("step.started", 2.0, "b"), ev("run.finished", 2.5, status="interrupted")]
    bars = TimelineBuilder().feed_all(events).executions
    assert [(b.execution, b.step, b.end, b.ok) for b in bars] == [(1, "a", 2.0, True), (2, "b", 2.5, False)]


def test_retries_and_replans_are_separate_executions_with_their_revision() -> None:
    lab = Lab()
    lab.flaky_failures["k"] = 1
    planner = ScriptedPlanner({None: "steps:\n  - {id: f, tool: flaky, args: {key: k}}\n  - {id: x, tool: fail}\n",
                               "it broke": [{"id": "y", "tool": "ok"}]})
    runner = Runner("a goal", planner=planner, tools=lab.tools, on_failure=["retry", "replan"], clock=fake_clock())
    result = runner.run()
    state = ViewState.of(result)
    assert result.ok
    assert [(e.step, e.attempt, e.revision, e.ok) for e in state.timeline] == [
        ("f", 1, 1, False), ("f", 2, 1, True), ("x", 1, 1, False), ("x", 2, 1, False), ("y", 1, 2, True)]
    live = ViewState.of(runner)  # the same timeline from a runner's events
    assert [e.as_dict() for e in live.timeline] == [e.as_dict() for e in ViewState.of(result).timeline]


def test_a_10000_step_plan_builds_its_state_and_window_quickly() -> None:
    steps = [{"id": f"s{i}", "tool": "ok", "args": {"label": str(i)}} for i in range(10_000)]
    result = planbook.run(plan_from_dict({"goal": "many", "steps": steps}), tools=Lab().tools, max_steps=10_000)
    started = time.perf_counter()
    state = ViewState.of(result)
    page = state_html(state, max_rows=50)
    took = time.perf_counter() - started
    print(f"10,000 steps: state and a 50-row page in {took * 1000:.0f} ms")
    assert len(state.timeline) == 10_000 and state.done == 10_000
    assert page.count('<tr data-step=') == 50 and "… 9950 steps above" in page


# ------------------------------------------------------------------ shared layout
def test_the_window_holds_every_running_step() -> None:
    plan = Plan(id="w", steps=[Step(id=str(i), tool="t") for i in range(100)])
    for s in plan.steps[:40]:
        s.status = Status.completed
    for i in (40, 43, 47):  # three run at once
        plan.steps[i].status = Status.in_progress
    start, end = row_window(plan.steps, 10)
    assert start <= 40 and 47 < end and end - start == 10
    assert row_window(plan.steps[:8], 10) == (0, 8)
    for s in plan.steps:
        s.status = Status.completed
    assert row_window(plan.steps, 10) == (90, 100) and frontier(plan.steps) == 99


def test_budget_and_verdict_lines_are_written_once_for_every_view() -> None:
    result = planbook.run("steps: [{id: a, tool: ok}]", tools=Lab().tools)
    assert budget_line(result) == "steps 1/12, replans 0/5"
    assert verdict_line(result) == "Run completed (goal_met): steps 1/12, replans 0/5"
    assert verdict_line(ViewState(plan=result.plan)) == "Not run" and budget_line(ViewState(plan=result.plan)) == ""
    for path in (ROOT / "planbook" / "views").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "state.py":
            assert not re.search(r"f\"[^\"]*steps \{[^}]*executions", text), f"{path.name} writes the budget line again"


def test_a_run_that_skipped_steps_is_not_green() -> None:
    lab = Lab()
    result = planbook.run("steps: [{id: a, tool: fail}, {id: b, tool: ok}]", tools=lab.tools, on_failure="skip")
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    state = ViewState.of(result)
    assert state.tone == "warn"
    page = result_html(result)
    assert "planbook-tone-warn" in page and "border-left:4px solid #8a5300" in page and "solid #2e7d32;font-weight" not in page
    assert ViewState.of(planbook.run("steps: [{id: a, tool: ok}]", tools=lab.tools)).tone == "ok"


# ------------------------------------------------------------------ MathJax
def test_planbook_html_is_kept_from_mathjax() -> None:
    """Lab 4 typesets $...$ in HTML outputs: convert(prices='$load', rate='$rate') became maths."""
    plan = Plan.parse("steps:\n  - {id: load, tool: t}\n  - {id: rate, tool: t}\n"
                      "  - {id: c, tool: convert, args: {prices: $load, rate: $rate}}\n")
    diff = planbook.PlanDiff(from_revision=1, to_revision=2, added=["c"], steps={"c": "convert(prices='$load', rate='$rate')"})
    result = RunResult(status="failed", reason="aborted", plan=plan, revisions=[diff])
    for page in (plan._repr_mimebundle_()["text/html"], result._repr_mimebundle_()["text/html"],
                 diff._repr_mimebundle_()["text/html"]):
        outer = re.match(r'<div class="([^"]*)"', page)
        assert outer and {"mathjax_ignore", "tex2jax_ignore"} <= set(outer.group(1).split()), page[:120]


# ------------------------------------------------------------------ models reach views through one door
def test_models_import_no_view() -> None:
    tree = ast.parse((ROOT / "planbook" / "data" / "models.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"textview", "htmlview", "liveview", "widget", "termview", "views", "views.text", "views.html"}
    assert "render" in imported


def test_the_registry_names_its_renderers_and_refuses_others() -> None:
    from planbook.data import render as _render

    with pytest.raises(ValueError, match="unknown renderer name 'plan_pdf'"):
        _render.register("plan_pdf", str)
    plan = Plan(id="p", steps=[Step(id="a", tool="t")])
    assert _render.render("plan_text", plan) == str(plan)


def test_print_of_a_plan_works_from_a_bare_import(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys, planbook; p = planbook.Plan(id='p', steps=[planbook.Step(id='a', tool='t')]); print(p); "
            "print(sorted(m for m in ('IPython', 'ipywidgets', 'anywidget', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout
    assert out.startswith("Plan: p (ID: p)") and "a. [ ] t()" in out and out.rstrip().endswith("[]")
