"""Plan specs under bad or surprising input: every case a PlanError with its line, never a
crash, a silent choice or a changed id; errors in words; one parse per spec."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
import yaml

from planbook import Plan, PlanError, Step, Toolbox
from planbook.data.ids import id_problem, is_step_id
from planbook.spec import load as specload
from planbook.spec.formats import steps_from_dicts
from planbook.spec.validate import plan_problems


def problem(spec: str) -> Any:
    with pytest.raises(PlanError) as info:
        Plan.parse(spec)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0]


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both YAML parsers: libyaml's C parser (used when PyYAML has it) and PyYAML's own."""
    if request.param == "pure-python":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    specload._loader_class.cache_clear()
    yield request.param
    specload._loader_class.cache_clear()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ------------------------------------------------------------------ nesting and size
@pytest.mark.parametrize("depth", [150, 600, 5000])
def test_deeply_nested_yaml_args_are_a_plan_error_with_the_line(depth: int, yaml_loader: str) -> None:
    p = problem(f"steps:\n  - id: a\n    tool: t\n    args:\n      x: {nested(depth)}\n")
    assert (p.code, p.line) == ("too_deep", 5)
    assert p.message == "values are nested more than 100 levels deep: flatten the data, or load it in a tool"


@pytest.mark.parametrize("depth", [150, 900, 100_000])
def test_deeply_nested_json_args_are_a_plan_error_with_the_line(depth: int) -> None:
    p = problem('{"steps": [\n  {"id": "a", "tool": "t",\n   "args": {"x": ' + nested(depth) + "}}\n]}")
    assert (p.code, p.line) == ("too_deep", 3)


def test_deep_block_style_yaml_names_the_line_where_it_gets_too_deep() -> None:
    body = "".join("  " * (i + 3) + f"k{i}:\n" for i in range(120))
    p = problem("steps:\n  - id: a\n    tool: t\n    args:\n" + body)
    # the root, the steps, the step and the args are levels 1-4; the mapping on line 5 + j is level 4 + j
    assert p.code == "too_deep" and p.line == 5 + 97


def test_nesting_up_to_the_limit_reads() -> None:
    plan = Plan.parse(f"steps:\n  - id: a\n    tool: t\n    args:\n      x: {nested(90)}\n")
    value = plan.steps[0].args["x"]
    for _ in range(89):
        (value,) = value
    assert value == []


def test_deep_args_from_a_model_or_planner_are_a_problem_not_a_crash() -> None:
    args = json.loads('{"x": ' + nested(900) + "}")
    steps, problems = steps_from_dicts([{"id": "a", "tool": "t", "args": args}])
    assert [(p.step, p.code) for p in problems] == [("a", "too_deep")]


@pytest.mark.parametrize("spec", [
    "steps:\n  - id: a\n    tool: t\n    args:\n      x: {digits}\n",
    '{{"steps": [\n{{"id": "a", "tool": "t", "args": {{"x": {digits}}}}}]}}',
    "steps:\n  - id: a\n    tool: t\n    args:\n      x: [1, 2, {digits}]\n",
])
def test_a_number_longer_than_python_reads_is_a_plan_error(spec: str, yaml_loader: str) -> None:
    p = problem(spec.format(digits="7" * 5001))
    assert p.code == "too_big" and p.line == spec.format(digits="7").count("\n", 0, spec.index("{digits}")) + 1
    assert p.message == ("a whole number with 5001 digits is longer than Python reads (4300 digits): "
                         "put it in quotes to keep it as text")


def test_a_yaml_alias_inside_itself_is_an_error(yaml_loader: str) -> None:
    p = problem("steps:\n  - id: a\n    tool: t\n    args: {x: &loop [1, *loop]}\n")
    assert (p.code, p.line) == ("syntax", 4)
    assert "a YAML alias refers to the value that holds it" in p.message


def test_yaml_aliases_that_expand_to_millions_of_values_are_refused() -> None:
    levels = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    p = problem("\n".join(levels) + "\nsteps: []\n")
    assert p.code == "too_big" and "more than 1,000,000 values" in p.message


def test_yaml_anchors_and_merge_keys_still_read() -> None:
    plan = Plan.parse(textwrap.dedent("""\
        steps:
          - &fetch {id: a, tool: fetch, args: {source: web}}
          - <<: *fetch
            id: b
            args: {source: disk}
        """))
    assert [(s.id, s.tool, s.args) for s in plan.steps] == [("a", "fetch", {"source": "web"}), ("b", "fetch", {"source": "disk"})]
    assert plan.line_of("b") == 3


# ------------------------------------------------------------------ ids as written
def test_unquoted_yaml_ids_are_read_as_written(yaml_loader: str) -> None:
    plan = Plan.parse(textwrap.dedent("""\
        steps:
          - {id: 1.1, tool: t}
          - {id: 1.10, tool: t, needs: [1.1]}
          - {id: 010, tool: t, needs: 1.10}
          - {id: yes, tool: t, needs: [010, 1.10]}
          - {id: 1e3, tool: t}
        """))
    assert [(s.id, s.needs) for s in plan.steps] == [
        ("1.1", []), ("1.10", ["1.1"]), ("010", ["1.10"]), ("yes", ["010", "1.10"]), ("1e3", [])]
    assert [plan.line_of(i) for i in ("1.1", "1.10", "010", "yes")] == [2, 3, 4, 5]


def test_json_number_ids_are_read_as_written() -> None:
    plan = Plan.parse('{"steps": [{"id": 1.1, "tool": "t"}, {"id": 1.10, "tool": "t", "needs": [1.1, 2]},'
                      ' {"id": 2, "tool": "t", "needs": 1.10}, {"id": true, "tool": "t"}]}')
    assert [(s.id, s.needs) for s in plan.steps] == [("1.1", []), ("1.10", ["1.1", "2"]), ("2", ["1.10"]), ("true", [])]


def test_goal_task_and_other_text_fields_are_read_as_written() -> None:
    plan = Plan.parse("goal: 3.10\ntitle: no\nsteps:\n  - {id: a, task: 1.50, tool: t, expect: 0x10}\n")
    assert (plan.goal, plan.title, plan.steps[0].task, plan.steps[0].expect) == ("3.10", "no", "1.50", "0x10")


# ------------------------------------------------------------------ duplicate keys
@pytest.mark.parametrize(("spec", "line", "step"), [
    ("goal: x\nsteps:\n  - id: a\n    tool: t\n    tool: u\n", 5, "a"),
    ("goal: x\ngoal: y\nsteps:\n  - {id: a, tool: t}\n", 2, None),
    ("steps:\n  - id: a\n    tool: t\n    args:\n      x: {k: 1, k: 2}\n", 5, "a"),
    ('{"steps": [\n  {"id": "a",\n   "tool": "t",\n   "tool": "u"}\n]}', 4, "a"),
    ('{"goal": "x",\n "steps": [{"id": "a", "tool": "t", "args": {"x": {"k": 1, "k": 2}}}]}', 2, None),
])
def test_duplicate_keys_are_reported_with_their_line(spec: str, line: int, step: str | None) -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse(spec)
    (p,) = [p for p in info.value.problems if p.code == "duplicate_key"]
    assert (p.line, p.step) == (line, step)
    assert "appears twice in one mapping" in p.message and "keep one" in p.message


# ------------------------------------------------------------------ what an id may hold
@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "tab\there", "esc\x1b[31m", "bidi\u202eevil", "two words", "$a", "a,b"])
def test_ids_with_control_characters_or_spaces_are_refused_in_specs(bad: str) -> None:
    p = problem("steps:\n  - {tool: t}\n  - id: " + json.dumps(bad) + "\n    tool: t\n")
    assert (p.code, p.line, p.step) == ("bad_id", 3, "2")
    assert "an id is letters and digits of any script" in p.message


@pytest.mark.parametrize("bad", ["a\x00b", "line\nbreak", "two words"])
def test_ids_with_control_characters_are_refused_by_validation(bad: str) -> None:
    box = Toolbox()
    box.add(lambda: 1, name="t")
    problems = plan_problems(Plan(steps=[Step(id=bad, tool="t")]), box, [])
    assert [p.code for p in problems] == ["bad_id"]


@pytest.mark.parametrize("good", ["1", "données", "数据", "हिन्दी", "e\u0301tape", "fetch_data", "step-2.b", "_x"])
def test_ids_in_any_script_are_accepted(good: str) -> None:
    assert is_step_id(good) and id_problem(good) is None
    assert Plan.parse("steps:\n  - id: " + good + "\n    tool: t\n").steps[0].id == good


def test_the_id_problem_names_the_character() -> None:
    assert id_problem("a\x00b") == ("the id 'a\\x00b' holds U+0000 (a control character): an id is letters and "
                                    "digits of any script, '_', '.' and '-', starting with a letter, digit or '_'")
    assert id_problem("-a") is not None and "starts with '-'" in str(id_problem("-a"))
    assert "U+0020 (space)" in str(id_problem("a b"))


# ------------------------------------------------------------------ words, not jargon
@pytest.mark.parametrize(("spec", "line", "words"), [
    ("goal: x\nsteps:\n  - id: a\n    tool: ok\n   - id: b\n", 5, "this line is not indented like the lines above it"),
    ("goal: x\nsteps:\n  - id: a\n  tool: ok\n", 4, "this line is not indented like the lines above it"),
    ("goal: Note: this\nsteps: []\n", 1, "a ':' where YAML does not expect one: put text that holds ': ' in quotes"),
    ("steps:\n\t- id: a\n", 2, "a tab character: YAML indents with spaces only"),
    ("goal: @home\nsteps: []\n", 1, "'@' cannot start a value: put the text in quotes"),
    ('goal: "open\nsteps: []\n', 3, "a text in quotes (opened on line 1) is not closed"),
    ("steps: [a, b\n", 2, "a '[' list (opened on line 1) is not closed with ']', or a ',' is missing"),
    ("steps: *nope\n", 1, "an alias (*name) without an anchor (&name) before it"),
    ("steps: []\n---\nsteps: []\n", 2, "more than one YAML document ('---'): a spec is one document"),
])
def test_bad_yaml_is_said_in_words_with_the_line(spec: str, line: int, words: str, yaml_loader: str) -> None:
    p = problem(spec)
    assert (p.code, p.line) == ("syntax", line)
    assert p.message.startswith("not valid YAML: " + words), p.message
    assert "<block" not in p.message and "expected" not in p.message


@pytest.mark.parametrize(("spec", "line", "words"), [
    ('{"steps": [\n  {"id": "a" "tool": "t"}\n]}', 2, "a ',' is missing between two items"),
    ('{"steps": [\n  {"id": "a", "tool": }\n]}', 2, "a value is missing"),
    ('{"steps": []}\n{"steps": []}', 2, "there is more after the end of the JSON value"),
])
def test_bad_json_is_said_in_words_with_the_line(spec: str, line: int, words: str) -> None:
    p = problem(spec)
    assert (p.code, p.line) == ("syntax", line)
    assert p.message.startswith("not valid JSON: " + words), p.message


def test_a_typo_in_on_failure_gets_did_you_mean_not_a_pydantic_error() -> None:
    p = problem("steps:\n  - id: a\n    tool: t\n    on_failure: replna\n")
    assert (p.step, p.code, p.line) == ("a", "bad_policy", 4)
    assert p.message == "unknown policy 'replna' in on_failure; did you mean 'replan'? (choose from abort, skip, retry, replan, continue)"


def test_other_wrong_types_are_said_without_a_url() -> None:
    with pytest.raises(PlanError) as info:
        Plan.parse("steps:\n  - id: a\n    tool: t\n    args: {1: x}\n    task: [1]\n")
    text = str(info.value)
    assert "https://" not in text and "errors.pydantic.dev" not in text
    assert {(p.code, p.line) for p in info.value.problems} == {("syntax", 5), ("syntax", 4)}


# ------------------------------------------------------------------ the offending line
SPEC = """\
goal: g
steps:
  - id: a
    tool: t
  - id: b
    task: uses a
    tool: t
    needs:
      - a
      - nope
    args:
      x: 1
      y: $missing
  - id: c
    agent: writer
    args: {z: 1}
"""


def test_problems_quote_the_offending_line_not_the_steps_first() -> None:
    box = Toolbox()

    @box.tool
    def t(x: int = 0, y: str = "") -> int:
        """A tool."""
        return x

    problems = plan_problems(Plan.parse(SPEC), box, ["writer"])
    assert {(p.step, p.code, p.line) for p in problems} == {
        ("b", "unknown_need", 10),  # the '- nope' item
        ("b", "unknown_ref", 13),  # 'y: $missing'
        ("c", "bad_args", 16),  # 'args: {z: 1}'
    }
    unknown_tool = plan_problems(Plan.parse(SPEC.replace("    tool: t\n  - id: b", "    tool: tt\n  - id: b")), box, ["writer"])
    assert ("a", "unknown_tool", 4) in {(p.step, p.code, p.line) for p in unknown_tool}


def test_json_problems_quote_the_field_line() -> None:
    spec = '{\n  "steps": [\n    {\n      "id": "a",\n      "tool": "t",\n      "needs": ["nope"]\n    }\n  ]\n}'
    box = Toolbox()
    box.add(lambda: 1, name="t")
    (p,) = plan_problems(Plan.parse(spec), box, [])
    assert (p.code, p.line) == ("unknown_need", 6)


def test_lines_survive_the_copy_a_runner_makes() -> None:
    plan = Plan.parse(SPEC).copy_plan(fresh=True)
    box = Toolbox()
    box.add(lambda x=0, y="": 1, name="t")
    assert ("b", "unknown_need", 10) in {(p.step, p.code, p.line) for p in plan_problems(plan, box, ["writer"])}


# ------------------------------------------------------------------ one parse, editors' lines
def test_json_is_parsed_once_without_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_yaml(text: str) -> Any:
        raise AssertionError("a JSON spec went through the YAML parser")

    monkeypatch.setattr(specload, "_load_yaml", no_yaml)
    monkeypatch.setattr(yaml, "compose", no_yaml)
    plan = Plan.parse('{\n  "goal": "g",\n  "steps": [\n    {"id": "a", "tool": "t"},\n    {"id": "b", "tool": "t"}\n  ]\n}')
    assert [plan.line_of(i) for i in ("a", "b")] == [4, 5]


def test_yaml_uses_libyaml_when_pyyaml_has_it() -> None:
    specload._loader_class.cache_clear()
    if getattr(yaml, "__with_libyaml__", False):
        assert issubclass(specload._loader_class(), yaml.CSafeLoader)


def test_editor_schema_lines_are_accepted() -> None:
    plan = Plan.parse("# yaml-language-server: $schema=plan.schema.json\ngoal: g\nsteps:\n  - {id: a, tool: t}\n")
    assert plan.goal == "g" and plan.line_of("a") == 4
    assert Plan.parse('{"$schema": "plan.schema.json", "steps": [{"id": "a", "tool": "t"}]}').steps[0].id == "a"


def test_telling_a_spec_from_a_goal_survives_hostile_input() -> None:
    from planbook.spec.formats import is_plan_spec

    assert is_plan_spec("steps:\n  - id: a\n    args: {x: " + nested(600) + "}\n")
    assert is_plan_spec("steps:\n  - id: a\n    args: {x: " + "9" * 5001 + "}\n")
    assert not is_plan_spec("Plan a trip: two days\nin Lyon")
    assert not is_plan_spec('{"steps": [1,}')


def test_reading_a_spec_leaves_the_garbage_collector_as_it_was() -> None:
    import gc

    assert gc.isenabled()
    Plan.parse('{"steps": [{"id": "a", "tool": "t"}]}')
    assert gc.isenabled()
    with pytest.raises(PlanError):
        Plan.parse('{"steps": [{"id": "a", "tool": }]}')
    assert gc.isenabled()
    gc.disable()
    try:
        Plan.parse("steps: [{id: a, tool: t}]")
        assert not gc.isenabled()
    finally:
        gc.enable()
