"""The plan-execute lesson's paths: linear success, one replan, two replans, the replan
budget, the step budget and the plan.diff event — with the lesson's deterministic
planner written as a ScriptedPlanner in a few lines."""

from __future__ import annotations

import pytest

from helpers import GOAL, Lab, X, Y, events_of, kinds, lesson_planner, step_trace
from planbook import Runner, ScriptedPlanner, run


def test_linear_success() -> None:
    lab, planner = Lab(), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools)
    assert (result.status, result.reason, result.error) == ("completed", "goal_met", None)
    assert step_trace(result) == [("1", "completed"), ("2", "completed"), ("3", "completed"), ("4", "completed")]
    assert result.outputs == {"1": "prepare", "2": "three words from primary", "3": 4, "4": "report"}
    assert (result.executions, result.replans, result.revisions) == (4, 0, [])
    assert planner.calls == [(GOAL, [], None)]
    assert "plan.diff" not in kinds(result)
    assert result.plan.step("2").expect == "a text"  # expected_outcome is the lesson's name for expect


def test_one_failure_one_replan_then_success() -> None:
    lab, planner = Lab(down={"primary": X}), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert step_trace(result) == [
        ("1", "completed"), ("2", "failed"), ("2", "completed"), ("3", "completed"), ("5", "completed"),
    ]
    assert [s.id for s in result.plan.steps] == ["1", "2", "3", "5"]
    assert result.plan.revision == 2
    assert (result.executions, result.replans) == (5, 1)
    # the planner saw the history and the error, as the lesson's planner signature says
    assert planner.calls[1] == (GOAL, ["1", "2"], "step 2 failed: ConnectionError: " + X)
    assert result.history[1].error == "ConnectionError: " + X
    assert result.outputs["3"] == 4 and lab.called("count") == ["three words from mirror"]
    assert lab.called("ok") == ["prepare", "report from the mirror"]  # step 1 ran once: kept, not re-run


def test_two_replans_then_graceful_give_up() -> None:
    lab, planner = Lab(down={"primary": X, "mirror": Y}), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert result.replans == 2 and result.plan.revision == 3
    assert [s.id for s in result.plan.steps] == ["1", "6", "7"]
    assert [(d.from_revision, d.to_revision) for d in result.revisions] == [(1, 2), (2, 3)]
    assert (result.revisions[1].removed, result.revisions[1].added) == (["2", "3", "5"], ["6", "7"])
    assert [c[2] for c in planner.calls] == [None, "step 2 failed: ConnectionError: " + X,
                                             "step 2 failed: ConnectionError: " + Y]
    assert result.executions == 5


def test_unmatched_error_means_no_plan() -> None:
    lab = Lab(down={"primary": "Z: something nobody planned for"})
    result = run(GOAL, planner=lesson_planner(), tools=lab.tools)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "Z: something nobody planned for" in result.error
    assert result.replans == 1 and result.revisions == []
    assert result.plan.step("2").status.value == "failed"


def test_replan_budget_exhausted() -> None:
    lab, planner = Lab(down={"primary": X, "mirror": Y}), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools, max_replans=1)
    assert (result.status, result.reason) == ("failed", "replan_budget")
    assert result.replans == 1 and len(result.revisions) == 1
    assert "replan budget used up: 1 of max_replans=1" in result.error and Y in result.error
    assert len(planner.calls) == 2  # the first plan and one replan: the budget is checked before asking


def test_replan_budget_zero_fails_on_first_failure() -> None:
    lab, planner = Lab(down={"primary": X}), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools, max_replans=0)
    assert (result.status, result.reason, result.replans) == ("failed", "replan_budget", 0)
    assert len(planner.calls) == 1


def test_a_planner_that_keeps_answering_the_same_bad_plan_hits_the_replan_budget() -> None:
    """The lesson: do not let the step budget slowly kill a broken planner."""
    lab = Lab(down={"primary": X})
    planner = ScriptedPlanner({None: [{"id": "a", "tool": "fetch", "args": {"source": "primary"}}], "down": [
        {"id": "a", "tool": "fetch", "args": {"source": "primary"}}]})
    result = run(GOAL, planner=planner, tools=lab.tools, max_replans=3, max_steps=100)
    assert (result.status, result.reason) == ("failed", "replan_budget")
    assert (result.executions, result.replans) == (4, 3)
    # the same step proposed again is not a revision, but each replan is still recorded
    assert [d.empty for d in result.revisions] == [True, True, True]


def test_step_budget_exhausted_is_checked_before_the_execution() -> None:
    lab, planner = Lab(down={"primary": X}), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools, max_steps=3)
    assert (result.status, result.reason) == ("failed", "step_budget")
    assert result.executions == 3  # == max_steps, never max_steps + 1
    assert len(lab.calls) == 3 and lab.called("count") == []
    assert "3 of max_steps=3" in result.error and "'3'" in result.error
    assert len(events_of(result, "step.started")) == 3
    assert result.plan.step("3").status.value == "not_started"


@pytest.mark.parametrize("max_steps", [0, 1, 2, 3, 4])
def test_executions_never_exceed_max_steps(max_steps: int) -> None:
    lab = Lab()
    result = run("steps: [{tool: ok}, {tool: ok}, {tool: ok}, {tool: ok}]", tools=lab.tools, max_steps=max_steps)
    assert result.executions == len(lab.calls) == min(max_steps, 4)
    expected = ("completed", "goal_met") if max_steps >= 4 else ("failed", "step_budget")
    assert (result.status, result.reason) == expected


def test_step_budget_counts_steps_added_by_replans() -> None:
    """The lesson: a 5-step plan that grows with every replan runs into max_steps=12."""
    tools = Lab(down={"primary": X, "mirror": Y}).tools
    first = [{"id": i, "tool": "ok"} for i in range(1, 5)] + [{"id": 5, "tool": "fetch", "args": {"source": "primary"}}]
    planner = ScriptedPlanner({
        None: first,
        "primary": [{"id": i, "tool": "ok"} for i in (6, 7, 8)] + [{"id": 9, "tool": "fetch", "args": {"source": "mirror"}}],
        "mirror": [{"id": i, "tool": "ok"} for i in (10, 11, 12, 13)],
    })
    result = run(GOAL, planner=planner, tools=tools)
    assert (result.status, result.reason) == ("failed", "step_budget")
    assert result.executions == 12 and result.replans == 2
    assert [s.id for s in result.history][-1] == "12"
    assert result.plan.step("13").status.value == "not_started"
    assert result.plan.revision == 3


def test_no_replan_is_asked_for_when_the_step_budget_is_used_up() -> None:
    lab, planner = Lab(down={"primary": X}), lesson_planner()
    result = run(GOAL, planner=planner, tools=lab.tools, max_steps=2)
    assert (result.status, result.reason, result.executions) == ("failed", "step_budget", 2)
    assert len(planner.calls) == 1 and result.replans == 0
    assert X in result.error


def test_plan_diff_event_fields() -> None:
    lab = Lab(down={"primary": X})
    result = run(GOAL, planner=lesson_planner(), tools=lab.tools)
    (diff_event,) = events_of(result, "plan.diff")
    assert diff_event.data == {
        "removed": ["4"],
        "added": ["5"],
        "revised": ["2"],
        "from_revision": 1,
        "to_revision": 2,
        "reason": "step 2 failed: ConnectionError: " + X,
    }
    assert diff_event.revision == 2  # the diff opens the new revision
    (diff,) = result.revisions
    assert (diff.removed, diff.added, diff.revised) == (["4"], ["5"], ["2"])
    assert diff.steps == {
        "4": "ok(label='report')",
        "5": "ok(label='report from the mirror')",
        "2": "fetch(source='mirror')",
    }
    # the diff is followed by the new plan, then execution goes on in revision 2
    i = kinds(result).index("plan.diff")
    assert kinds(result)[i + 1] == "plan.created"
    assert result.events[i + 1].data["steps"] == ["1", "2", "3", "5"]
    assert result.events[i + 2].kind == "step.started" and result.events[i + 2].revision == 2


def test_runner_advances_one_execution_at_a_time() -> None:
    lab = Lab(down={"primary": X})
    runner = Runner(GOAL, planner=lesson_planner(), tools=lab.tools)
    ran = []
    while not runner.finished:
        step = runner.advance()
        ran.append(step.id if step is not None else None)
    # the replan happens inside the failing tick; the last tick only finishes the run
    assert ran == ["1", "2", "2", "3", "5", None]
    assert runner.result().status == "completed" and runner.advance() is None
