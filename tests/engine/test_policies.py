"""Failure policies (abort, skip, retry, replan, chains, per-step overrides) and what a
replan may and may not do to the plan."""

from __future__ import annotations

import pytest

from helpers import Lab, events_of, kinds, step_trace
from planbook import (
    Plan,
    PlanError,
    PlanningContext,
    PlanningError,
    Runner,
    ScriptedPlanner,
    Status,
    Step,
    make_plan,
    run,
)


def three_steps(middle: dict) -> str:
    """A YAML spec: a, the given middle step b, then c which needs b, then d (independent)."""
    import json

    return json.dumps({"goal": "policies", "steps": [
        {"id": "a", "tool": "ok", "args": {"label": "a"}},
        {"id": "b", **middle},
        {"id": "c", "tool": "ok", "args": {"label": "c"}, "needs": ["b"]},
        {"id": "d", "tool": "ok", "args": {"label": "d"}},
    ]})


FAILING = {"tool": "fail", "args": {"message": "b broke"}}


def test_abort_is_the_default_without_a_planner() -> None:
    lab = Lab()
    result = run(three_steps(FAILING), tools=lab.tools)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.error == "step b failed: RuntimeError: b broke"
    assert lab.called("ok") == ["a"]  # later steps did not run
    assert [s.status.value for s in result.plan.steps] == ["completed", "failed", "not_started", "not_started"]
    assert result.outputs == {"a": "a"}
    assert events_of(result, "run.finished")[0].data["reason"] == "aborted"


def test_explicit_abort_with_a_planner_does_not_replan() -> None:
    planner = ScriptedPlanner({None: three_steps(FAILING), "broke": [{"id": "z", "tool": "ok"}]})
    result = run("a goal in words", planner=planner, tools=Lab().tools, on_failure="abort")
    assert (result.status, result.reason, result.replans) == ("failed", "aborted", 0)
    assert len(planner.calls) == 1


def test_skip_goes_on_and_blocks_dependents() -> None:
    lab = Lab()
    result = run(three_steps(FAILING), tools=lab.tools, on_failure="skip")
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    statuses = {s.id: s.status.value for s in result.plan.steps}
    assert statuses == {"a": "completed", "b": "skipped", "c": "blocked", "d": "completed"}
    assert lab.called("ok") == ["a", "d"]
    assert result.plan.step("b").notes == "skipped after: RuntimeError: b broke"
    assert result.plan.step("c").notes == "blocked: needs b, which did not complete"
    (blocked,) = events_of(result, "step.blocked")
    assert (blocked.step, blocked.data["because"]) == ("c", ["b"])
    assert "without steps b, c" in result.error
    assert kinds(result).index("step.skipped") < kinds(result).index("step.blocked")


def test_blocking_is_transitive() -> None:
    spec = """steps:
  - {id: a, tool: fail}
  - {id: b, tool: ok, needs: [a]}
  - {id: c, tool: ok, needs: [b]}
  - {id: d, tool: ok}
"""
    lab = Lab()
    result = run(spec, tools=lab.tools, on_failure="skip")
    assert [s.status.value for s in result.plan.steps] == ["skipped", "blocked", "blocked", "completed"]
    assert [e.step for e in events_of(result, "step.blocked")] == ["b", "c"]
    assert lab.called("ok") == ["ok"]


def test_retry_then_success() -> None:
    lab = Lab()
    lab.flaky_failures["net"] = 2
    result = run(three_steps({"tool": "flaky", "args": {"key": "net"}}), tools=lab.tools, on_failure="retry", retries=2)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert step_trace(result)[:4] == [("a", "completed"), ("b", "failed"), ("b", "failed"), ("b", "completed")]
    assert result.plan.step("b").attempts == 3 and result.executions == 6
    retries = events_of(result, "step.retry")
    assert [(e.data["retry"], e.data["of"]) for e in retries] == [(1, 2), (2, 2)]
    assert [e.data["attempt"] for e in events_of(result, "step.started") if e.step == "b"] == [1, 2, 3]


def test_retry_exhausted_then_abort() -> None:
    lab = Lab()
    lab.flaky_failures["net"] = 5
    result = run(three_steps({"tool": "flaky", "args": {"key": "net"}}), tools=lab.tools, on_failure="retry", retries=2)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert lab.called("flaky") == ["net"] * 3
    assert "flaky net failed (3 failure(s) left)" in result.error


def test_retry_exhausted_then_the_next_policy_in_the_chain() -> None:
    lab = Lab()
    lab.flaky_failures["net"] = 5
    planner = ScriptedPlanner({
        None: three_steps({"tool": "flaky", "args": {"key": "net"}}),
        "flaky net": [{"id": "b2", "tool": "ok", "args": {"label": "b2"}}, {"id": "c", "tool": "ok", "needs": ["b2"]}],
    })
    result = run("goal", planner=planner, tools=lab.tools, on_failure=["retry", "replan"], retries=1)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert lab.called("flaky") == ["net", "net"]  # one try and one retry, then the replan
    assert result.replans == 1
    assert [s.id for s in result.plan.steps] == ["a", "b2", "c"]  # d was not started: replaced


def test_retry_then_skip_chain() -> None:
    lab = Lab()
    result = run(three_steps(FAILING), tools=lab.tools, on_failure=["retry", "skip"], retries=1)
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    assert lab.called("fail") == ["b broke", "b broke"]


def test_per_step_on_failure_overrides_the_run_policy() -> None:
    spec = """steps:
  - {id: a, tool: fail, args: {message: a broke}, on_failure: skip}
  - {id: b, tool: ok}
  - {id: c, tool: fail, args: {message: c broke}}
  - {id: d, tool: ok}
"""
    lab = Lab()
    result = run(spec, tools=lab.tools, on_failure="abort")
    assert (result.status, result.reason) == ("failed", "aborted")
    assert [s.status.value for s in result.plan.steps] == ["skipped", "completed", "failed", "not_started"]
    assert result.error == "step c failed: RuntimeError: c broke"


def test_per_step_retry_then_the_run_policy() -> None:
    spec = """steps:
  - {id: a, tool: fail, on_failure: retry}
  - {id: b, tool: ok}
"""
    lab = Lab()
    result = run(spec, tools=lab.tools, on_failure="skip", retries=2)
    assert lab.called("fail") == ["it broke"] * 3
    assert [s.status.value for s in result.plan.steps] == ["skipped", "completed"]


def test_per_step_replan_without_a_planner_is_a_plan_error() -> None:
    with pytest.raises(PlanError) as info:
        Runner("steps:\n  - {id: a, tool: ok, on_failure: replan}\n", tools=Lab().tools)
    (problem,) = info.value.problems
    assert (problem.step, problem.code, problem.line) == ("a", "bad_policy", 2)
    assert "needs a planner" in problem.message


@pytest.mark.parametrize("bad", ["explode", ["retry", "pray"]])
def test_unknown_policy_is_an_error(bad: object) -> None:
    with pytest.raises(ValueError, match="unknown failure policy .*; choose from abort, skip, retry, replan"):
        Runner("steps: [{tool: ok}]", tools=Lab().tools, on_failure=bad)  # type: ignore[arg-type]


def test_replan_policy_without_a_planner_is_an_error() -> None:
    with pytest.raises(ValueError, match="needs a planner"):
        Runner("steps: [{tool: ok}]", tools=Lab().tools, on_failure="replan")


def test_planner_returning_nothing_fails_no_plan() -> None:
    planner = ScriptedPlanner({None: three_steps(FAILING)})  # no rule for the error: []
    result = run("goal", planner=planner, tools=Lab().tools)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert result.error == "the planner had no new plan after: step b failed: RuntimeError: b broke"


def test_first_plan_empty_fails_no_plan() -> None:
    result = run("a goal", planner=lambda goal, history, last_error: [], tools=Lab().tools)
    assert (result.status, result.reason, result.executions) == ("failed", "no_plan", 0)
    assert "the planner returned no steps for the goal 'a goal'" in result.error


def test_planner_raising_fails_no_plan_with_the_exception() -> None:
    first = three_steps(FAILING)

    def planner(goal, history, last_error):
        if last_error is None:
            return first
        raise LookupError("the planner lost its notes")

    result = run("goal", planner=planner, tools=Lab().tools)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert result.error == "the planner raised LookupError: the planner lost its notes"

    def broken_first(goal, history, last_error):
        raise LookupError("nothing at all")

    result = run("goal", planner=broken_first, tools=Lab().tools)
    assert (result.status, result.reason, result.error) == ("failed", "no_plan", "the planner raised LookupError: nothing at all")


def test_invalid_replan_is_no_plan_with_the_problems() -> None:
    planner = ScriptedPlanner({None: three_steps(FAILING), "broke": [{"id": "z", "tool": "teleport"}]})
    result = run("goal", planner=planner, tools=Lab().tools)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert result.error.startswith("the planner's new plan is invalid: step z: unknown tool 'teleport'")


def test_a_replan_cannot_rewrite_a_completed_step() -> None:
    planner = ScriptedPlanner({
        None: three_steps(FAILING),
        "broke": [{"id": "a", "tool": "ok", "args": {"label": "a, rewritten"}}, {"id": "b", "tool": "ok"}],
    })
    lab = Lab()
    result = run("goal", planner=planner, tools=lab.tools)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "the replan would rewrite step 'a', which is already completed" in result.error
    assert result.plan.step("a").args == {"label": "a"} and result.plan.step("a").result == "a"
    assert lab.called("ok") == ["a"]


def test_a_replan_that_repeats_a_completed_step_keeps_it_without_rerunning() -> None:
    planner = ScriptedPlanner({
        None: three_steps(FAILING),
        "broke": [{"id": "a", "tool": "ok", "args": {"label": "a"}}, {"id": "b", "tool": "ok", "args": {"label": "b2"}},
                  {"id": "c", "tool": "ok", "args": {"label": "c"}, "needs": ["a", "b"]}],
    })
    lab = Lab()
    result = run("goal", planner=planner, tools=lab.tools)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert lab.called("ok") == ["a", "b2", "c"]
    assert result.plan.step("a").attempts == 1
    (diff,) = result.revisions
    assert (diff.removed, diff.added, diff.revised) == (["d"], [], ["b"])


def test_completed_steps_keep_their_results_and_times_across_replans() -> None:
    planner = ScriptedPlanner({None: three_steps(FAILING), "broke": [{"id": "e", "tool": "ok", "args": {"label": "e"}}]})
    runner = Runner("goal", planner=planner, tools=Lab().tools, clock=iter(range(1000)).__next__)
    result = runner.run()
    a = result.plan.step("a")
    first_a = result.history[0]
    assert (a.result, a.attempts, a.started_at, a.finished_at) == ("a", 1, first_a.started_at, first_a.finished_at)
    assert a.started_at is not None and a.finished_at > a.started_at
    assert [s.id for s in result.plan.steps] == ["a", "e"]


def test_a_replanned_step_gets_its_retries_back() -> None:
    lab = Lab()
    lab.flaky_failures["net"] = 3
    planner = ScriptedPlanner({
        None: [{"id": "b", "tool": "flaky", "args": {"key": "net"}}],
        "flaky": [{"id": "b", "tool": "flaky", "args": {"key": "net"}, "task": "same call, new plan"}],
    })
    result = run("goal", planner=planner, tools=lab.tools, on_failure=["retry", "replan"], retries=1)
    # revision 1: try + retry fail; replan; revision 2: try fails, its own retry works
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert lab.called("flaky") == ["net"] * 4 and result.replans == 1


def test_skipped_steps_are_kept_by_a_replan() -> None:
    spec = """steps:
  - {id: a, tool: fail, args: {message: a broke}, on_failure: skip}
  - {id: b, tool: fail, args: {message: b broke}}
"""
    planner = ScriptedPlanner({None: spec, "b broke": [{"id": "c", "tool": "ok"}]})
    result = run("goal", planner=planner, tools=Lab().tools)
    assert [(s.id, s.status.value) for s in result.plan.steps] == [("a", "skipped"), ("c", "completed")]
    assert result.reason == "steps_skipped"


def test_plan_objects_are_not_changed_by_a_run() -> None:
    plan = Plan.parse(three_steps(FAILING))
    run(plan, tools=Lab().tools, on_failure="skip")
    assert [s.status.value for s in plan.steps] == ["not_started"] * 4
    assert all(s.result is None and s.attempts == 0 for s in plan.steps)


def test_a_completed_step_in_a_given_plan_is_not_run_again() -> None:
    """Rerun from a step: pass a plan whose first steps are already completed."""
    plan = Plan.parse(three_steps({"tool": "ok", "args": {"label": "b"}}))
    first = run(plan, tools=Lab().tools).plan
    first.step("c").status = first.step("d").status = "not_started"  # a string is stored as the Status
    assert first.step("c").status is Status.not_started
    lab = Lab()
    again = run(first, tools=lab.tools)
    assert again.status == "completed" and lab.called("ok") == ["c", "d"]
    assert again.outputs == {"a": "a", "b": "b", "c": "c", "d": "d"}


def test_steps_built_directly_with_refs_wait_for_them() -> None:
    """A ``$id`` in a Step's args is a need even when the Step is built in Python."""
    plan = Plan(steps=[Step(id="x", tool="echo", args={"value": "$y"}), Step(id="y", tool="ok", args={"label": "Y"})])
    assert plan.steps[0].needs == ["y"]
    lab = Lab()
    result = run(plan, tools=lab.tools)
    assert result.status == "completed" and result.outputs["x"] == "Y"
    assert [s.id for s in result.history] == ["y", "x"]


def test_marking_a_step_completed_by_hand_skips_it() -> None:
    plan = Plan.parse(three_steps({"tool": "ok", "args": {"label": "b"}}))
    plan.step("a").status = "completed"
    plan.step("a").result = "from yesterday"
    lab = Lab()
    result = run(plan, tools=lab.tools)
    assert lab.called("ok") == ["b", "c", "d"] and result.outputs["a"] == "from yesterday"
    with pytest.raises(ValueError, match="'done' is not a step status; use one of not_started, in_progress, completed"):
        plan.step("a").status = "done"


# ------------------------------------------------------------------ planners
def test_invalid_first_plan_is_no_plan_naming_the_problem() -> None:
    result = run("goal", planner=ScriptedPlanner({None: [{"id": "a", "tool": "teleport"}]}), tools=Lab().tools)
    assert (result.status, result.reason, result.executions) == ("failed", "no_plan", 0)
    assert result.error.startswith("the planner could not make a plan: invalid plan: step a: unknown tool 'teleport'")


def test_make_plan() -> None:
    planner = ScriptedPlanner({None: "1. [writer] Draft\n2. [writer] Polish"})
    plan = make_plan("Write a short note", planner, agents={"writer": lambda t: t}, title="Note")
    assert (plan.id, plan.goal, plan.title, plan.revision) == ("write-a-short-note", "Write a short note", "Note", 1)
    assert [s.id for s in plan.steps] == ["1", "2"]
    with pytest.raises(PlanningError, match="the planner returned no steps for the goal 'x'"):
        make_plan("x", lambda goal, history, last_error: [])
    with pytest.raises(PlanError, match="unknown agent 'writer'"):
        make_plan("x", planner, agents={})


class ContextPlanner:
    """A planner that keeps what the runner tells it, as a model-backed planner would."""

    def __init__(self) -> None:
        self.contexts: list[PlanningContext] = []

    def set_context(self, context: PlanningContext) -> None:
        self.contexts.append(context)

    def __call__(self, goal, history, last_error):
        context = self.contexts[-1]
        context.emit("llm.call", model="fake", purpose="plan", prompt_tokens=3, completion_tokens=2)
        if last_error is None:
            return [{"id": "a", "tool": "ok"}, {"id": "b", "tool": "fail"}]
        rewrite = [{"id": "a", "tool": "ok", "args": {"label": "new"}}]
        assert [p.code for p in context.validate([Step(**s) for s in rewrite])] == ["rewrites_done_step"]
        assert [p.code for p in context.validate([Step(id="c", tool="nope")])] == ["unknown_tool"]
        assert context.validate([Step(id="c", tool="ok", needs=["a"])]) == []
        return [{"id": "c", "tool": "ok", "needs": ["a"]}]


def test_a_context_aware_planner_is_told_the_tools_plan_and_kept_steps() -> None:
    planner = ContextPlanner()
    result = run("goal", planner=planner, tools=Lab().tools)
    assert (result.status, result.reason) == ("completed", "goal_met")
    first, second = planner.contexts
    assert first.plan is None and first.kept_ids == [] and "ok" in first.tools
    assert first.validate([Step(id="x", tool="nope")])[0].code == "unknown_tool"
    assert second.kept_ids == ["a"] and [s.id for s in second.plan.steps] == ["a", "b"]
    assert second.plan.step("b").status is Status.failed
    # both planning calls' model usage is in the run, the first plan's too
    assert [e.data["purpose"] for e in result.events if e.kind == "llm.call"] == ["plan", "plan"]
    assert result.usage.calls == 2 and result.usage.total_tokens == 10


def test_scripted_planner_rules() -> None:
    with pytest.raises(ValueError, match="needs a first plan"):
        ScriptedPlanner({"x": "1. [a] b"})
    import re

    with pytest.raises(re.error):
        ScriptedPlanner({None: "1. [a] b", "(unclosed": "1. [a] c"})
    planner = ScriptedPlanner(first="1. [a] first").when("timeout", "1. [a] shorter").when("TIME", "1. [a] never")
    assert [s.task for s in planner("g", [], None)] == ["first"]
    assert [s.task for s in planner("g", [], "step 1 failed: Timeout!")] == ["shorter"]  # case-insensitive, first wins
    assert planner("g", [], "something else") == []
    one, two = planner("g", [], None), planner("g", [], None)
    assert one[0] is not two[0]  # fresh steps every call: the planner stays pure
    assert planner.calls[1] == ("g", [], "step 1 failed: Timeout!")


def test_a_failed_plan_run_again_starts_its_unfinished_steps_clean() -> None:
    lab = Lab()
    lab.flaky_failures["k"] = 1
    spec = "steps: [{id: a, tool: ok}, {id: b, tool: flaky, args: {key: k}}]"
    failed = run(spec, tools=lab.tools)
    assert failed.plan.step("b").attempts == 1 and failed.plan.step("b").error
    again = run(failed.plan, tools=lab.tools)
    b = again.plan.step("b")
    assert (again.status, b.attempts, b.error, b.notes) == ("completed", 1, None, "")
    assert lab.called("ok") == ["ok"]  # the completed step kept its result and did not run again


def test_retries_count_against_the_step_budget() -> None:
    lab = Lab()
    result = run("steps: [{id: a, tool: fail}]", tools=lab.tools, on_failure="retry", retries=5, max_steps=3)
    assert (result.status, result.reason, result.executions) == ("failed", "step_budget", 3)
    assert lab.called("fail") == ["it broke"] * 3


def test_an_empty_policy_chain_is_an_error() -> None:
    with pytest.raises(ValueError, match="on_failure is empty"):
        Runner("steps: [{tool: ok}]", tools=Lab().tools, on_failure=[])


@pytest.mark.parametrize("chain", [["abort", "skip"], ["replan", "skip"], ["skip", "retry"]])
def test_a_policy_after_one_that_ends_the_handling_is_rejected(chain: list[str]) -> None:
    planner = ScriptedPlanner({None: three_steps(FAILING)})
    with pytest.raises(ValueError, match=rf"'{chain[0]}' ends the handling of a failure, so \['{chain[1]}'\] after it"):
        Runner(three_steps(FAILING), tools=Lab().tools, planner=planner, on_failure=chain)


def test_retry_without_retries_retries_once() -> None:
    lab = Lab()
    result = run(three_steps(FAILING), tools=lab.tools, on_failure=["retry", "skip"])
    assert result.plan.step("b").attempts == 2 and result.plan.step("b").status is Status.skipped
    assert [e.data["of"] for e in events_of(result, "step.retry")] == [1]


def test_retry_with_zero_retries_is_an_error_not_a_silent_abort() -> None:
    with pytest.raises(ValueError, match="retries=0, so nothing would be retried"):
        Runner(three_steps(FAILING), tools=Lab().tools, on_failure="retry", retries=0)


def test_until_the_last_step_completes_the_run_instead_of_pausing() -> None:
    runner = Runner(three_steps({"tool": "ok", "args": {"label": "b"}}), tools=Lab().tools)
    result = runner.run(until="d")
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert "run.paused" not in kinds(result)


def test_until_a_middle_step_pauses() -> None:
    runner = Runner(three_steps({"tool": "ok", "args": {"label": "b"}}), tools=Lab().tools)
    assert runner.run(until="b").status == "paused"
    assert runner.run().reason == "goal_met"
