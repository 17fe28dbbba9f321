"""The tick's rules (planbook.engine._algo) decide from plain values, with no runner at hand."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from planbook.data.models import Plan, Status, Step
from planbook.engine import _algo
from planbook.engine.calls import Outcome
from planbook.engine.state import RunState


def _plan(*statuses: Status) -> Plan:
    plan = Plan(id="p", steps=[Step(id=f"s{i}", tool="t") for i in range(len(statuses))])
    for step, status in zip(plan.steps, statuses):
        step.status = status
    return plan


def test_the_rules_never_see_the_runner() -> None:
    """Functions of what the runner knows, never of the runner: none takes it or imports it."""
    tree = ast.parse(Path(_algo.__file__).read_text(encoding="utf-8"))
    imported = {(n.module or "").split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"runner", "_loop", "_record", "_stop", "decisions", "planchanges"}
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions and not [n for n in tree.body if isinstance(n, ast.ClassDef)]
    for fn in functions:
        for arg in [*fn.args.args, *fn.args.kwonlyargs]:
            assert arg.arg not in ("runner", "run", "self"), fn.name
            assert "Runner" not in ast.unparse(arg.annotation or ast.Constant(None)), fn.name


@pytest.mark.parametrize("ending, replan_for, pause_why, held", [
    (None, None, None, False), (("failed", "aborted", "x"), None, None, True),
    (None, Step(id="a", tool="t"), None, True), (None, None, "paused by you (api)", True),
])
def test_a_run_ending_replanning_or_pausing_starts_nothing_new(ending: object, replan_for: object,
                                                               pause_why: str | None, held: bool) -> None:
    assert _algo.holding(ending, replan_for, pause_why) is held


def test_with_nothing_in_flight_the_tick_finishes_waits_completes_or_lets_the_next_move_come() -> None:
    assert _algo.idle_move(("failed", "aborted", "x"), True, None, None) == "finish"
    assert _algo.idle_move(None, True, None, None) == "wait"
    assert _algo.idle_move(None, False, None, None) == "complete"
    assert _algo.idle_move(None, True, Step(id="a", tool="t"), None) == "nothing"
    assert _algo.idle_move(None, False, None, "paused after step a") == "nothing"


def test_the_end_of_the_plan_is_goal_met_only_when_every_step_completed() -> None:
    assert _algo.completion(_plan(Status.completed, Status.completed)) == ("completed", "goal_met", None)
    assert _algo.completion(_plan(Status.completed, Status.skipped)) == (
        "completed", "steps_skipped", "the run reached the end without steps s1")


def test_a_tick_in_the_middle_of_a_run_begins_nothing() -> None:
    state = RunState(plan=_plan(Status.not_started), started=True, status="running")
    assert _algo.mid_run(state, stale=False, adopted=False, goal_only=None)
    assert not _algo.mid_run(state, stale=True, adopted=False, goal_only=None)
    assert not _algo.mid_run(state, stale=False, adopted=True, goal_only=None)
    assert _algo.mid_run(state, stale=False, adopted=False, goal_only="a goal")  # planned already
    state.plan.revision = 0
    assert not _algo.mid_run(state, stale=False, adopted=False, goal_only="a goal")  # no first plan yet
    assert not _algo.mid_run(RunState(plan=_plan(), status="paused", started=True), False, False, None)


def test_pauses_after_max_executions_and_until() -> None:
    assert _algo.paused_after(3, 2, 3) is None
    assert _algo.paused_after(3, 3, 1) == "paused after 1 execution"
    assert _algo.paused_after(None, 99, None) is None
    assert not _algo.has_run(None)
    for status, ran in [(Status.not_started, False), (Status.in_progress, False), (Status.completed, True),
                        (Status.failed, True), (Status.skipped, True), (Status.blocked, True)]:
        assert _algo.has_run(_plan(status).steps[0]) is ran


def test_a_steps_time_is_its_calls_own() -> None:
    outcome = Outcome(ok=True)
    outcome.started, outcome.finished = 10.0, 12.0
    assert _algo.step_times(9.5, outcome, timed=True, kept=False, now=13.0) == (10.0, 12.0)
    assert _algo.step_times(9.5, outcome, timed=False, kept=False, now=13.0) == (9.5, 13.0)
    assert _algo.step_times(9.5, outcome, timed=False, kept=True, now=13.0) == (9.5, 12.0)  # kept: ended then
    assert _algo.step_times(9.5, Outcome(ok=True), timed=True, kept=False, now=13.0) == (9.5, 13.0)


def test_a_thread_error_in_a_worker_says_what_to_do() -> None:
    hinted = _algo.thread_hint("RuntimeError: must be called from the main thread", "planbook-worker-2")
    assert hinted is not None and "main_thread=True" in hinted
    assert _algo.thread_hint("RuntimeError: must be called from the main thread", "MainThread") is None
    assert _algo.thread_hint("ValueError: bad", "planbook-worker-2") is None
