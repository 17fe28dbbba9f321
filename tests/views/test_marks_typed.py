"""The views read a step's typed mark, never the words of its note: a note that reads like a mark
marks nothing, a mark with no note is shown, and a reused result's note is no error."""

from __future__ import annotations

from pathlib import Path

import planbook
from planbook import Plan, Step
from planbook.data.models import Status
from planbook.data.rundiff import diff_runs
from planbook.data.stepmark import StepMark
from planbook.engine.state import INTERRUPTED_NOTE
from planbook.views.html import result_html, row_kind, step_row_html
from planbook.views.marks import cache_marks
from planbook.views.panes import INTERRUPTED_STATUS, PaneBudget, pane
from planbook.views.text import format_plan


@planbook.tool(cache=True)
def double(x: int) -> int:
    return 2 * x


def test_a_cached_step_s_note_is_not_in_the_record_s_error_column(tmp_path: Path) -> None:
    """Issue 37: 'cached: the result of step a in run …' appeared in the error column of a run
    the cache answered (every row of notebook 06's second run read as an error)."""
    plan = Plan(steps=[Step(id="a", tool="double", args={"x": 2}), Step(id="b", tool="double", args={"x": "$a"})])
    store = str(tmp_path / "runs.sqlite")
    planbook.run(plan, tools=[double], store=store, cache=True)
    again = planbook.run(plan, tools=[double], store=store, cache=True)
    assert again.plan.step("a").mark is StepMark.cached
    page = result_html(again)
    marks = cache_marks(again.events, again.plan)
    for step in again.plan.steps:
        assert step.notes.startswith("cached: the result of step ")  # the note is still there, for people
        assert f">{step.notes}<" not in page  # but no cell of the record holds it
        row = step_row_html(step, mark=marks[step.id])
        assert row.count("<td") == 4 and row.endswith("<td>cached</td></tr>"), row  # no error cell
    assert 'title="cached: the result of step a in run ' in page  # the mark's own words, on its ⟲


def test_a_note_that_reads_like_a_mark_marks_nothing() -> None:
    done = Step(id="d", tool="t", status="completed", result=1, notes="cached: by hand, said a person")
    cut = Step(id="n", tool="t", notes=INTERRUPTED_NOTE)  # a person pasted the words
    plan = Plan(steps=[done, cut])
    assert cache_marks([], plan) == {}
    assert row_kind(cut) == "not_started" and "status_text" not in pane(cut, {}, origin=None, budget=PaneBudget())
    assert "⟲" not in step_row_html(done)
    assert "by hand" not in format_plan(plan)  # a completed step's note is shown only for a reused result


def test_a_mark_with_no_note_is_shown() -> None:
    kept = Step(id="k", tool="t", status="completed", result=1, mark=StepMark.kept, from_run="P-1", from_step="k")
    cut = Step(id="n", tool="t", mark=StepMark.interrupted)
    plan = Plan(steps=[kept, cut])
    marks = cache_marks([], plan)
    assert list(marks) == ["k"] and (marks["k"].kind, marks["k"].from_run) == ("kept", "P-1")
    assert "kept: the result of step k in run P-1" in marks["k"].describe()
    assert row_kind(cut) == "interrupted"
    assert pane(cut, {}, origin=None, budget=PaneBudget())["status_text"] == INTERRUPTED_STATUS


def test_a_comparison_tells_a_pinned_step_by_its_mark(tmp_path: Path) -> None:
    plan = Plan(steps=[Step(id="a", tool="double", args={"x": 1}), Step(id="b", tool="double", args={"x": "$a"})])
    store = str(tmp_path / "runs.sqlite")
    base = planbook.run(plan, tools=[double], store=store)
    child = planbook.fork(base.run_id, at="a", result=5, tools=[double], store=store)
    child.plan.step("a").notes = "a person's words"  # prose: the comparison does not read it
    rows = {row.step: row for row in diff_runs(base, child).steps}
    assert rows["a"].sides[1].how == "pinned"
    assert child.plan.step("a").status is Status.completed
