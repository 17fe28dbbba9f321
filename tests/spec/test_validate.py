"""Validation before anything runs: every problem, its message, its step and its line."""

from __future__ import annotations

import pytest

from helpers import Lab
from planbook import Plan, PlanError, Problem, Runner, Step, validate_plan
from planbook.data.errors import closest
from planbook.spec.validate import check_replacement, find_cycle, plan_problems

TOOLS = Lab().tools
AGENTS = ["writer", "analyst"]


def problems(spec: str | Plan, **kwargs) -> list[Problem]:
    plan = Plan.parse(spec) if isinstance(spec, str) else spec
    return plan_problems(plan, TOOLS, AGENTS, **kwargs)


def only(spec: str | Plan) -> Problem:
    found = problems(spec)
    assert len(found) == 1, found
    return found[0]


def test_a_valid_plan_has_no_problems() -> None:
    assert problems("steps:\n  - {id: a, tool: ok}\n  - {id: b, agent: writer, task: t, needs: [a]}\n") == []


def test_duplicate_id_points_at_the_repeat() -> None:
    found = problems("steps:\n  - {id: a, tool: ok}\n  - {id: b, tool: ok}\n  - {id: a, tool: ok, args: {label: again}}\n"
                     "  - {id: a, tool: ok}\n")
    assert [(p.message, p.step, p.code, p.line) for p in found] == [
        ("duplicate step id 'a': every step needs its own id", "a", "duplicate_id", 4),
        ("duplicate step id 'a': every step needs its own id", "a", "duplicate_id", 5),
    ]
    built = only(Plan(steps=[Step(id="a", tool="ok"), Step(id="a", tool="ok")]))  # no spec: no line
    assert (built.code, built.line) == ("duplicate_id", None)


def test_unknown_need_suggests_the_closest_id() -> None:
    p = only("steps:\n  - {id: load, tool: ok}\n  - {id: b, tool: ok, needs: [lod]}\n")
    assert (p.message, p.step, p.code, p.line) == (
        "needs 'lod', but no step has that id; did you mean 'load'?", "b", "unknown_need", 3)


def test_unknown_need_without_a_close_id() -> None:
    p = only("steps:\n  - {id: load, tool: ok}\n  - {id: b, tool: ok, needs: [zzz]}\n")
    assert p.message == "needs 'zzz', but no step has that id"


def test_unknown_ref_is_one_problem() -> None:
    p = only("steps:\n  - {id: total, tool: ok}\n  - {id: b, tool: echo, args: {value: 'sum: ${totl}'}}\n")
    assert (p.message, p.code, p.step) == (
        "args refer to $totl, but no step has that id; did you mean 'total'? (write $$ for a literal $)", "unknown_ref", "b")


def test_a_dollar_meant_literally_gets_the_escape_hint() -> None:
    p = only("steps:\n  - {id: a, tool: echo, args: {value: $HOME}}\n")
    assert p.message == "args refer to $HOME, but no step has that id (write $$ for a literal $)"
    assert problems("steps:\n  - {id: a, tool: echo, args: {value: $$HOME}}\n") == []


def test_known_ids_allow_needs_outside_the_plan() -> None:
    plan = Plan(steps=[Step(id="b", tool="echo", args={"value": "$a"})])
    assert [p.code for p in problems(plan)] == ["unknown_ref"]
    assert problems(plan, known_ids=["a"]) == []


def test_cycle_names_the_cycle() -> None:
    p = only("steps:\n  - {id: a, tool: ok, needs: [c]}\n  - {id: b, tool: ok, needs: [a]}\n  - {id: c, tool: ok, needs: [b]}\n")
    assert p.code == "cycle" and p.step == "a" and p.line == 2
    assert p.message == "dependency cycle: a → c → b → a (→ reads 'needs'); remove one of these needs"


def test_a_cycle_through_a_reference() -> None:
    p = only("steps:\n  - {id: a, tool: echo, args: {value: $b}}\n  - {id: b, tool: echo, args: {value: $a}}\n")
    assert p.code == "cycle" and "a → b → a" in p.message


def test_self_need() -> None:
    p = only("steps:\n  - {id: a, tool: ok, needs: [a]}\n")
    assert (p.message, p.code) == ("step 'a' needs itself", "cycle")


def test_both_tool_and_agent() -> None:
    p = only("steps:\n  - {id: a, tool: ok, agent: writer}\n")
    assert (p.message, p.code) == ("names both tool 'ok' and agent 'writer'; a step has exactly one", "tool_and_agent")


def test_neither_tool_nor_agent() -> None:
    p = only("steps:\n  - {id: a, task: think hard}\n")
    assert p.code == "no_executor"
    assert p.message == "names neither a tool nor an agent (Markdown: start the line with [AGENT])"


def test_unknown_tool_lists_known_names_and_suggests_the_closest() -> None:
    p = only("steps:\n  - {id: a, tool: fecth, args: {source: s}}\n")
    assert p.code == "unknown_tool"
    assert p.message == "unknown tool 'fecth'; did you mean 'fetch'? (known tools: add, count, echo, fail, fetch, flaky, ok)"


def test_unknown_tool_with_no_tools_registered() -> None:
    from planbook import Toolbox

    found = plan_problems(Plan.parse("steps: [{tool: x}]"), Toolbox(), [])
    assert [p.message for p in found] == ["unknown tool 'x' (known tools: none registered)"]


def test_unknown_agent() -> None:
    p = only("1. [WRITR] Draft it\n")
    assert (p.step, p.code, p.line) == ("1", "unknown_agent", 1)
    assert p.message == "unknown agent 'writr'; did you mean 'writer'? (known agents: analyst, writer)"


def test_missing_arg() -> None:
    p = only("steps:\n  - {id: a, tool: add, args: {b: 1}}\n")
    assert (p.message, p.code) == ("tool 'add' needs argument 'a' (int)", "bad_args")


def test_unknown_arg() -> None:
    p = only("steps:\n  - {id: a, tool: ok, args: {lable: x}}\n")
    assert p.message == "tool 'ok' has no argument 'lable' (it takes label: str)"


def test_wrong_arg_type_names_step_arg_and_expected_type() -> None:
    p = only("steps:\n  - {id: s, tool: add, args: {a: many}}\n")
    assert p.step == "s" and p.code == "bad_args"
    assert p.message.startswith("argument 'a' of tool 'add' expects int, got 'many' (")
    assert str(p).startswith("step s (line 2): argument 'a' of tool 'add' expects int")


def test_wrong_type_of_a_generic_arg_names_the_full_type() -> None:
    from planbook import Toolbox

    box = Toolbox()

    @box.tool
    def total(values: list[int]) -> int:
        return sum(values)

    (p,) = plan_problems(Plan.parse("steps: [{tool: total, args: {values: [1, x]}}]"), box, [])
    assert p.message.startswith("argument 'values' of tool 'total' expects list[int], got 'x'")


def test_args_holding_refs_are_checked_at_run_time_only() -> None:
    assert problems("steps:\n  - {id: w, tool: ok}\n  - {id: n, tool: add, args: {a: $w}}\n") == []


def test_agent_step_with_args() -> None:
    p = only("steps:\n  - {id: a, agent: writer, task: t, args: {tone: dry}}\n")
    assert (p.message, p.code) == ("an agent step takes no args (put what it needs in its task and needs)", "bad_args")


def test_empty_plan() -> None:
    (p,) = plan_problems(Plan(), TOOLS, AGENTS)
    assert (p.message, p.step, p.code, p.line) == ("the plan has no steps: add at least one (a tool call or a task for an agent)", None, "empty", None)
    assert str(p) == "plan: the plan has no steps: add at least one (a tool call or a task for an agent)"
    with pytest.raises(PlanError, match="the plan spec is empty"):
        Plan.parse("  \n")


def test_empty_step_id() -> None:
    (p,) = problems(Plan(steps=[Step(id=" ", tool="ok")]))
    assert (p.message, p.code) == ("a step id must not be empty", "empty_id")


def test_all_problems_are_reported_at_once_with_lines() -> None:
    spec = """goal: everything wrong
steps:
  - {id: a, tool: ok}
  - {id: b, tool: ok, needs: [aa]}
  - {id: c, tool: fecth}
  - {id: d, agent: writr}
  - {id: e, tool: add}
"""
    with pytest.raises(PlanError) as info:
        validate_plan(Plan.parse(spec), TOOLS, AGENTS)
    err = info.value
    assert [(p.step, p.code, p.line) for p in err.problems] == [
        ("b", "unknown_need", 4), ("c", "unknown_tool", 5), ("d", "unknown_agent", 6), ("e", "bad_args", 7)]
    assert err.codes == ["unknown_need", "unknown_tool", "unknown_agent", "bad_args"]
    lines = str(err).splitlines()
    assert lines[0] == "invalid plan (4 problems):"
    assert lines[1] == "  - step b (line 4): needs 'aa', but no step has that id; did you mean 'a'?"
    assert lines[4] == "  - step e (line 7): tool 'add' needs argument 'a' (int)"
    assert err._render_traceback_() == [f"PlanError: {err}"]
    assert isinstance(err, ValueError)


def test_markdown_line_numbers() -> None:
    spec = "# Write it up\n\n1. [writer] Draft\n   with care\n2. [critic] Review\n3. [writer] Fix\n"
    (p,) = problems(spec)
    assert (p.step, p.line, p.code) == ("2", 5, "unknown_agent")
    assert str(p).startswith("step 2 (line 5): unknown agent 'critic'")


def test_json_line_numbers() -> None:
    spec = '{"steps": [\n  {"id": "a", "tool": "ok"},\n  {"id": "b", "tool": "nope"}\n]}'
    (p,) = problems(spec)
    assert (p.step, p.line) == ("b", 3)


def test_plan_error_from_a_string_and_single_problem_message() -> None:
    err = PlanError("something is off")
    assert err.problems == [Problem("something is off")]
    assert str(err) == "invalid plan: plan: something is off"
    one = PlanError([Problem("bad", step="x", code="c", line=4)])
    assert str(one) == "invalid plan: step x (line 4): bad"


def test_the_runner_refuses_an_invalid_plan_before_anything_runs() -> None:
    lab = Lab()
    with pytest.raises(PlanError) as info:
        Runner("steps:\n  - {id: a, tool: ok}\n  - {id: b, tool: add, args: {a: x}}\n", tools=lab.tools)
    assert info.value.codes == ["bad_args"]
    assert lab.calls == []


def test_find_cycle_returns_a_closed_path_or_none() -> None:
    steps = [Step(id="a", tool="t", needs=["b"]), Step(id="b", tool="t", needs=["c"]), Step(id="c", tool="t")]
    assert find_cycle(steps) is None
    steps[2].needs = ["a"]
    assert find_cycle(steps) == ["a", "b", "c", "a"]


def test_check_replacement() -> None:
    done = Step(id="a", tool="ok", args={"label": "x"}, status="completed")
    same = Step(id="a", tool="ok", args={"label": "x"})
    changed = Step(id="a", tool="ok", args={"label": "y"})
    new = Step(id="n", tool="ok")
    assert check_replacement([done], [same, new]) == ([new], [])
    kept, found = check_replacement([done], [changed, new])
    assert kept == [new]
    assert [(p.step, p.code) for p in found] == [("a", "rewrites_done_step")]
    assert "would rewrite step 'a', which is already completed" in found[0].message


def test_closest() -> None:
    assert closest("fecth", ["fetch", "count"]) == "; did you mean 'fetch'?"
    assert closest("WRITER", ["writer"]) == "; did you mean 'writer'?"
    assert closest("zzz", ["fetch"]) == ""
