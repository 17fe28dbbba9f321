"""planbook.compare: the trip scenario through every design, as a table."""

from __future__ import annotations

import pytest

import planbook
from planbook.compat.compare import COLUMNS, Comparison
from planbook.compat.scenarios import trip


@pytest.fixture(scope="module")
def table() -> Comparison:
    return planbook.compare()


def test_every_design_runs_the_same_task(table: Comparison) -> None:
    labels = [r["strategy"] for r in table.records()]
    assert labels == ["planbook", "lesson", "openmanus", "openmanus:faithful", "agenticseek", "agenticseek:faithful"]
    assert all(set(r) == {k for k, _ in COLUMNS} for r in table.records())


def test_false_marks_only_in_faithful_openmanus(table: Comparison) -> None:
    assert {r["strategy"]: r["false_marks"] for r in table.records()} == {
        "planbook": 0, "lesson": 0, "openmanus": 0, "openmanus:faithful": 1, "agenticseek": 0, "agenticseek:faithful": 0}
    hotel = table.results["openmanus:faithful"].plan.step("1")
    assert hotel.status.value == "completed" and "full" in hotel.result


def test_the_counts_follow_each_design(table: Comparison) -> None:
    planbook_row, seek, seek_faithful = table["planbook"], table["agenticseek"], table["agenticseek:faithful"]
    assert (planbook_row["executed"], planbook_row["replans"], planbook_row["model_calls"]) == (5, 1, 0)
    assert planbook_row["status"] == "completed (goal_met)"
    assert table["openmanus"]["model_calls"] == 2 and table["openmanus:faithful"]["model_calls"] == 1
    assert (seek["model_calls"], seek["replans"]) == (6, 1)  # a plan and a review after each of 5 steps
    assert seek_faithful["prompt_tokens"] > 1.5 * seek["prompt_tokens"]  # the memory that only grows
    assert (seek["answers"], seek_faithful["answers"]) == (4, 1)  # only the last answer


def test_a_weak_reviewer_shows_the_soft_need() -> None:
    table = planbook.compare(strategies=["agenticseek", "agenticseek:faithful"],
                             scenario=trip(model_notices_failure=False))
    assert table["agenticseek"]["on_failed_need"] == 0 and table["agenticseek:faithful"]["on_failed_need"] == 1
    itinerary = table.results["agenticseek:faithful"].plan.step("3")
    assert itinerary.status.value == "completed" and "no hotel" in itinerary.result
    assert table.results["agenticseek"].plan.step("3").status.value == "blocked"


def test_a_given_plan_is_run_by_each_design(table: Comparison) -> None:
    given = planbook.compare(trip().plan(), strategies=["planbook", "openmanus", "agenticseek"])
    assert [r["status"] for r in given.records()] == ["completed (goal_met)", "completed (goal_met)",
                                                      "completed (steps_skipped)"]
    assert given["openmanus"]["model_calls"] == 1  # no plan to make: only the repair


def test_text_html_and_records(table: Comparison) -> None:
    text = str(table)
    assert text.splitlines()[0] == "scenario: trip" and "false ✓" in text.splitlines()[1]
    assert len({len(line) for line in text.splitlines()[1:3]}) <= 2
    html = table._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") == 7 and "openmanus:faithful" in html
    records = table.records()
    records[0]["executed"] = -1
    assert table.records()[0]["executed"] == 5  # a copy


def test_bad_strategy_names() -> None:
    with pytest.raises(ValueError, match="did you mean 'lesson'"):
        planbook.compare(strategies=["lessons"])
    with pytest.raises(ValueError, match="only ':faithful' may follow"):
        planbook.compare(strategies=["openmanus:strict"])
    with pytest.raises(ValueError, match="no pitfalls"):
        planbook.compare(strategies=["planbook:faithful"])
    with pytest.raises(KeyError, match="no strategy 'x'"):
        planbook.compare(strategies=["lesson"])["x"]
