"""Behaviours fixed after review: goals are not misread as specs, pasted Markdown
checklists read back, agent names match without regard to case, and failures explain
themselves."""

from __future__ import annotations

import pytest

from helpers import Lab
from planbook import Plan, PlanError, Runner, ScriptedAgent, ScriptedPlanner, run
from planbook.spec.formats import is_plan_spec
from planbook.views.text import format_plan, summary_line


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("Explain the install steps: download, then run", False),
        ("[draft] a blog post about planning", False),
        ("Write a poem", False),
        ("steps: [{tool: ok}]", True),
        ('{"steps": [{"tool": "ok"}]}', True),
        ("1. [writer] draft\n2. [writer] send", True),
        ("- {tool: ok}\n- {tool: ok}", True),
        ("goal: x\nsteps:\n  - tool: ok", True),
    ],
)
def test_goal_or_spec(text: str, spec: bool) -> None:
    assert is_plan_spec(text) is spec


def test_a_goal_that_mentions_steps_goes_to_the_planner() -> None:
    planner = ScriptedPlanner({None: [{"id": "a", "tool": "ok", "args": {"label": "a"}}]})
    result = run("Explain the install steps: download, then run", planner=planner, tools=Lab().tools)
    assert result.ok and planner.calls[0][0] == "Explain the install steps: download, then run"


def test_markdown_checkboxes_and_status_marks_are_not_agent_tags() -> None:
    plan = Plan.parse("- [ ] [WRITER] draft\n- [x] [writer] send\n- [✓] [editor] check\n")
    assert [(s.agent, s.task) for s in plan.steps] == [("writer", "draft"), ("writer", "send"), ("editor", "check")]


def test_the_plan_text_reads_back_as_a_plan() -> None:
    agents = {"writer": ScriptedAgent("writer")}
    result = run("1. [writer] draft\n2. [writer] send\n", agents=agents)
    steps_text = format_plan(result.plan).split("Steps:\n", 1)[1]
    again = Plan.parse(steps_text)
    assert [(s.id, s.agent, s.task) for s in again.steps] == [("1", "writer", "draft"), ("2", "writer", "send")]


def test_agent_names_match_without_regard_to_case() -> None:
    agents = {"DATA_ANALYSIS": ScriptedAgent("DATA_ANALYSIS", default="analysed")}
    assert run("1. [DATA_ANALYSIS] load\n2. [data_analysis] sum\n", agents=agents).outputs == {"1": "analysed", "2": "analysed"}
    with pytest.raises(PlanError, match=r"unknown agent 'data_analysi'; did you mean 'DATA_ANALYSIS'\?"):
        run("1. [DATA_ANALYSI] load\n", agents=agents)
    with pytest.raises(ValueError, match="differ only in case"):
        run("1. [a] x\n", agents={"a": ScriptedAgent("a"), "A": ScriptedAgent("A")})


def test_json_with_tabs_and_a_yaml_list_of_flow_mappings_parse() -> None:
    assert Plan.parse('{\n\t"steps": [{"id": "a", "tool": "ok"}]\n}').steps[0].id == "a"
    assert [s.tool for s in Plan.parse("- {tool: ok}\n- {tool: fail}\n").steps] == ["ok", "fail"]


def test_an_empty_id_is_an_error() -> None:
    with pytest.raises(PlanError, match=r"step 1 \(line 2\): the id is empty"):
        Plan.parse("steps:\n  - {id: null, tool: ok}\n")


def test_retries_without_the_retry_policy_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"retries=3 only applies to the retry policy.*\['retry', 'abort'\]"):
        Runner("steps: [{tool: ok}]", tools=Lab().tools, retries=3)


def test_until_a_step_that_gets_blocked_pauses_there() -> None:
    spec = """steps:
  - {id: a, tool: fail, args: {message: boom}}
  - {id: b, tool: ok, args: {label: b}, needs: [a]}
  - {id: c, tool: ok, args: {label: c}}
"""
    lab = Lab()
    runner = Runner(spec, tools=lab.tools, on_failure="skip")
    result = runner.run(until="b")
    assert (result.status, result.plan.step("b").status.value) == ("paused", "blocked")
    assert lab.called("ok") == []
    assert runner.run().reason == "steps_skipped" and lab.called("ok") == ["c"]


def test_a_crashing_planner_leaves_its_traceback_in_the_result() -> None:
    def planner(goal, history, last_error):
        return {"not": "steps"}["steps"]

    result = run("a goal", planner=planner, tools=Lab().tools)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert result.error == "the planner raised KeyError: 'steps'"
    assert 'return {"not": "steps"}["steps"]' in result.traceback


def test_a_paused_run_reads_well() -> None:
    runner = Runner("steps: [{tool: ok}, {tool: ok}]", tools=Lab().tools)
    assert summary_line(runner.run(max_executions=1)).startswith("Run paused: steps 1/12")


def test_the_step_budget_message_says_when_a_retry_did_not_run() -> None:
    result = run("steps: [{id: a, tool: fail}]", tools=Lab().tools, on_failure="retry", retries=3, max_steps=2)
    assert result.reason == "step_budget"
    assert "the retry of step 'a' and what follows did not run" in result.error


def test_editing_the_callers_plan_does_not_change_a_paused_run() -> None:
    plan = Plan.parse("steps:\n  - {id: a, tool: ok, args: {label: a}}\n  - {id: b, tool: ok, args: {label: b}}\n")
    lab = Lab()
    runner = Runner(plan, tools=lab.tools)
    runner.run(max_executions=1)
    plan.step("b").args["label"] = "edited"
    runner.run()
    assert lab.called("ok") == ["a", "b"]
