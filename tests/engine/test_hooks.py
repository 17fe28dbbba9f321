"""The engine's hooks for other designs: the ``continue`` policy (a soft need), an agent
ending the run (OpenManus's FINISHED), and a review after every step (AgenticSeek)."""

from __future__ import annotations

import pytest

import planbook
from planbook import AgentReply, Runner, Toolbox, run


def tools() -> Toolbox:
    box = Toolbox()

    @box.tool
    def fail(label: str) -> str:
        """Always fails."""
        raise RuntimeError(f"{label} is down")

    @box.tool
    def echo(text: str = "") -> str:
        """Returns its text."""
        return text

    return box


def test_continue_leaves_the_step_failed_and_lets_its_dependents_run() -> None:
    spec = """steps:
  - {id: a, tool: fail, args: {label: a}}
  - {id: b, tool: echo, args: {text: after}, needs: [a]}
"""
    result = run(spec, tools=tools(), on_failure="continue")
    assert result.plan.step("a").status.value == "failed"
    assert result.plan.step("b").status.value == "completed"
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    assert "dependents run anyway" in result.plan.step("a").notes


def test_continue_is_a_policy_a_step_can_name_and_skip_still_blocks() -> None:
    spec = """steps:
  - {id: a, tool: fail, args: {label: a}, on_failure: continue}
  - {id: b, tool: echo, needs: [a]}
  - {id: c, tool: fail, args: {label: c}}
  - {id: d, tool: echo, needs: [c]}
"""
    result = run(spec, tools=tools(), on_failure="skip")
    statuses = {s.id: s.status.value for s in result.plan.steps}
    assert statuses == {"a": "failed", "b": "completed", "c": "skipped", "d": "blocked"}


def test_an_agent_can_end_the_run_and_the_rest_is_skipped_with_its_reason() -> None:
    def finisher(task, context):
        return AgentReply(answer="all done", stop="the goal is reached")

    spec = """steps:
  - {id: a, agent: finisher, task: do it all}
  - {id: b, tool: echo, args: {text: never}}
"""
    result = run(spec, tools=tools(), agents={"finisher": finisher})
    assert (result.status, result.reason) == ("completed", "stopped")
    assert result.plan.step("b").status.value == "skipped"
    assert "the goal is reached" in result.plan.step("b").notes
    assert result.executions == 1 == len(result.history)


def test_a_review_after_each_step_can_keep_or_replace_the_rest_of_the_plan() -> None:
    seen: list[str] = []

    def review(goal, plan, step):
        seen.append(step.id)
        if step.id == "one":  # replace what follows
            return [{"id": "two", "tool": "echo", "args": {"text": "revised"}}]
        return None  # NO_UPDATE: no change, no replan counted

    spec = """steps:
  - {id: one, tool: echo, args: {text: first}}
  - {id: two, tool: echo, args: {text: original}}
"""
    result = run(spec, tools=tools(), after_step=review, max_replans=1)
    assert result.ok and result.outputs == {"one": "first", "two": "revised"}
    assert seen == ["one", "two"]
    assert result.replans == 1 and result.revisions[0].revised == ["two"]


def test_a_review_cannot_rewrite_a_completed_step() -> None:
    def review(goal, plan, step):
        return [{"id": "one", "tool": "echo", "args": {"text": "rewritten"}}] if step.id == "one" else None

    result = run("steps: [{id: one, tool: echo, args: {text: first}}]", tools=tools(), after_step=review)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "would rewrite step 'one'" in (result.error or "")


def test_a_review_needs_steps_one_at_a_time() -> None:
    with pytest.raises(ValueError, match="one at a time"):
        Runner("steps: [{id: a, tool: echo}]", tools=tools(), after_step=lambda *a: None, parallel=2)


def test_policies_are_one_class_each_looked_up_by_name() -> None:
    from planbook.engine.policies import REGISTRY, Policy

    assert set(REGISTRY) == {"abort", "skip", "retry", "replan", "continue"}
    assert all(isinstance(p, Policy) for p in REGISTRY.values())
    with pytest.raises(ValueError, match="unknown failure policy 'retyr'"):
        planbook.run("steps: [{id: a, tool: echo}]", tools=tools(), on_failure="retyr")


def test_a_long_run_hands_every_object_back_to_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run freezes its records out of the collector's full scans while it goes (see
    planbook/data/gcwindow.py) and unfreezes them when it returns, however it ends."""
    import gc

    from planbook.data import gcwindow

    monkeypatch.setattr(gcwindow, "EVERY", 3)
    frozen: list[int] = []

    box = tools()

    @box.tool
    def look() -> int:
        """How many objects are frozen while the run goes."""
        frozen.append(gc.get_freeze_count())
        return 0

    spec = "steps:\n" + "".join(f"  - {{id: s{i}, tool: look}}\n" for i in range(10))
    assert gc.get_freeze_count() == 0
    result = run(spec, tools=box)
    assert result.ok and max(frozen) > 0  # frozen while it went
    assert gc.get_freeze_count() == 0  # all handed back
