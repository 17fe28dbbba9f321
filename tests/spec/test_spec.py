"""Plan specs: YAML, JSON, numbered and bulleted Markdown, the seed designs' field names."""

from __future__ import annotations

import pytest

from planbook import Plan, PlanError, Step
from planbook.spec.formats import plan_from_dict, steps_from_dicts
from planbook.workers.planners import planner_steps, to_steps


def table(plan: Plan) -> list[tuple]:
    return [(s.id, s.tool, s.agent, s.task, s.args, s.needs, s.expect) for s in plan.steps]


def test_yaml_mapping() -> None:
    plan = Plan.parse("""goal: Count the words
title: Word count
steps:
  - id: fetch
    task: Get the text
    tool: fetch
    args: {source: web}
    expect: some text
  - tool: count
    args:
      text: $fetch
    on_failure: skip
""")
    assert (plan.goal, plan.title, plan.id, plan.revision) == ("Count the words", "Word count", "word-count", 1)
    assert table(plan) == [
        ("fetch", "fetch", None, "Get the text", {"source": "web"}, [], "some text"),
        ("2", "count", None, "", {"text": "$fetch"}, ["fetch"], ""),  # id defaults to the 1-based position
    ]
    assert plan.steps[1].on_failure == "skip"
    assert all(s.status.value == "not_started" for s in plan.steps)


def test_json_mapping_with_an_id() -> None:
    plan = Plan.parse('{"id": "p7", "goal": "g", "steps": [{"id": 1, "tool": "ok", "needs": []}, {"id": 2, "tool": "ok", "needs": [1]}]}')
    assert plan.id == "p7" and [s.id for s in plan.steps] == ["1", "2"] and plan.steps[1].needs == ["1"]


def test_parse_overrides_id_and_goal() -> None:
    plan = Plan.parse("steps: [{tool: ok}]", id="mine", goal="the goal")
    assert (plan.id, plan.goal) == ("mine", "the goal")
    assert Plan.parse("steps: [{tool: ok}]").id == "plan"


def test_a_top_level_list_of_steps() -> None:
    plan = Plan.parse("- {id: a, tool: ok}\n- id: b\n  tool: ok\n  needs: a\n")
    assert [(s.id, s.needs) for s in plan.steps] == [("a", []), ("b", ["a"])]
    assert plan.line_of("b") == 2


def test_seed_aliases() -> None:
    """AgenticSeek's ``need``, the lesson's ``tool_name`` / ``expected_outcome``."""
    plan = Plan.parse("""steps:
  - {id: 1, tool_name: fetch, args: {source: s}, expected_outcome: a text}
  - {id: 2, agent: writer, task: write, need: [1]}
  - {id: 3, description: tidy up, tool_name: ok, arguments: {label: x}, need: 2}
""")
    assert table(plan) == [
        ("1", "fetch", None, "", {"source": "s"}, [], "a text"),
        ("2", None, "writer", "write", {}, ["1"], ""),
        ("3", "ok", None, "tidy up", {"label": "x"}, ["2"], ""),
    ]


def test_agenticseek_plan_pastes_in_unchanged() -> None:
    spec = """[
  {"agent": "Web", "id": "1", "need": [], "task": "Search for the best libraries"},
  {"agent": "Coder", "id": "2", "need": ["1"], "task": "Write the script"}
]"""
    plan = Plan.parse(spec)
    assert [(s.id, s.agent, s.needs) for s in plan.steps] == [("1", "Web", []), ("2", "Coder", ["1"])]


def test_markdown_numbered_openmanus_style() -> None:
    spec = """Goal: Analyse sales.csv
0. [DATA_ANALYSIS] Load the CSV
1. [MANUS] Chart the totals
   by month, as a bar chart
2. [MANUS] Write the report
"""
    plan = Plan.parse(spec)
    assert plan.goal == "Analyse sales.csv" and plan.id == "analyse-sales-csv"
    assert [(s.id, s.agent, s.task) for s in plan.steps] == [
        ("0", "data_analysis", "Load the CSV"),  # OpenManus numbers from 0: the author's numbers are the ids
        ("1", "manus", "Chart the totals by month, as a bar chart"),
        ("2", "manus", "Write the report"),
    ]
    assert [plan.line_of(i) for i in ("0", "1", "2")] == [2, 3, 5]


def test_markdown_bulleted_with_a_heading_and_untagged_steps() -> None:
    plan = Plan.parse("# Weekly report\n\n- [analyst] Collect numbers\n* [Writer] Draft\n+ Proofread\n")
    assert plan.goal == "Weekly report"
    assert [(s.id, s.agent, s.task) for s in plan.steps] == [
        ("1", "analyst", "Collect numbers"), ("2", "writer", "Draft"), ("3", None, "Proofread")]


def test_markdown_with_parenthesis_numbers() -> None:
    plan = Plan.parse("3) [a] three\n7) [b] seven\n")
    assert [s.id for s in plan.steps] == ["3", "7"]


def test_markdown_duplicate_numbers_are_an_error_with_the_line() -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse("1. [a] one\n2. [a] two\n2. [a] two again\n")
    (p,) = info.value.problems
    assert (p.step, p.code, p.line) == ("2", "duplicate_id", 3)
    assert p.message == "duplicate step number 2: number the steps 1, 2, 3, ..."


def test_unknown_step_field_suggests_the_closest() -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse("steps:\n  - id: a\n    tool: ok\n    neds: [b]\n")
    (p,) = info.value.problems
    assert (p.step, p.code, p.line) == ("a", "unknown_field", 4)  # the line of the typo, not of "- id: a"
    assert p.message.startswith("unknown field 'neds'; did you mean 'needs'? (a step has id, task, tool, args,")


def test_unknown_plan_field_suggests_the_closest() -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse("gaol: x\nsteps: [{tool: ok}]\n")
    (p,) = info.value.problems
    assert p.message == "unknown plan field 'gaol'; did you mean 'goal'? (a plan has goal, title, id, steps)"


def test_bad_yaml_names_the_line() -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse("goal: x\nsteps:\n  - {id: a, tool: ok\n  - {id: b, tool: ok}\n")
    (p,) = info.value.problems
    assert p.code == "syntax" and p.line == 4
    assert p.message == "not valid YAML: a '{' mapping (opened on line 3) is not closed with '}', or a ',' is missing"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("goal: x\nsteps: 3\n", "'steps' must be a list of steps"),
        ("goal: x\n", "'steps' must be a list of steps"),
        ("just some words", "a plan spec must be a mapping with 'steps' (YAML or JSON) or a Markdown list of steps "
         "(a goal in plain words needs a planner: pass planner=...)"),
        ("steps:\n  - [1, 2]\n", "step 1 must be a mapping, got [1, 2]"),
        ("steps:\n  - {tool: ok, needs: {a: 1}}\n", "'needs' must be a list of step ids, got {'a': 1}"),
        ("steps:\n  - {tool: ok, args: [1]}\n", "'args' must be a mapping of name to value, got [1]"),
        ("steps:\n  - {tool: ok, on_failure: pray}\n", "on_failure"),
    ],
)
def test_malformed_specs(spec: str, message: str) -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse(spec)
    assert any(message in p.message for p in info.value.problems), info.value.problems


def test_a_spec_must_be_text() -> None:
    with pytest.raises(TypeError, match="a plan spec is text; got dict"):
        Plan.parse({"steps": []})  # type: ignore[arg-type]


def test_plan_from_dict_and_steps_from_dicts() -> None:
    plan = plan_from_dict({"goal": "g", "steps": [{"tool": "ok"}, "a bare task"]})
    assert [(s.id, s.tool, s.task) for s in plan.steps] == [("1", "ok", ""), ("2", None, "a bare task")]
    steps, problems = steps_from_dicts([{"id": "x", "tool": "echo", "args": {"value": "${y}"}}, {"id": "y", "bogus": 1}])
    assert [s.id for s in steps] == ["x", "y"] and steps[0].needs == ["y"]
    assert [(p.step, p.code) for p in problems] == [("y", "unknown_field")]


def test_steps_given_as_step_objects_are_fresh_copies() -> None:
    done = Step(id="a", tool="ok", status="completed", result=1, attempts=2)
    (copy,) = to_steps([done])
    assert copy is not done and (copy.status.value, copy.result, copy.attempts) == ("not_started", None, 0)


def test_planner_steps_normalises_every_shape() -> None:
    plan = Plan.parse("steps: [{id: a, tool: ok}]")
    assert [s.id for s in planner_steps(plan)] == ["a"]
    assert [s.id for s in planner_steps("1. [w] x")] == ["1"]
    assert [s.id for s in planner_steps([{"id": "q", "tool": "ok"}])] == ["q"]
    assert planner_steps(None) == [] and planner_steps("  ") == [] and planner_steps([]) == []
    with pytest.raises(TypeError, match="a planner must return a list of steps, got int"):
        planner_steps(3)


def test_markdown_nested_items_continue_the_step_above() -> None:
    plan = Plan.parse("1. [a] Clean the data\n   - drop empty rows\n   * fix the dates\n2. [a] Chart it\n")
    assert [(s.id, s.task) for s in plan.steps] == [
        ("1", "Clean the data - drop empty rows * fix the dates"), ("2", "Chart it")]


def test_markdown_heading_after_the_steps_is_an_error_not_part_of_a_task() -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse("# Plan\n1. [a] x\n2. [a] y\n\n## Notes\n")
    (p,) = info.value.problems
    assert (p.line, p.code) == (5, "syntax")
    assert p.message == ("'## Notes' comes after the steps: put the goal or heading before the list "
                         "(or indent the line to continue step 2)")
