"""``$id`` / ``${id}`` references: finding, resolving, and what reaches tools and agents."""

from __future__ import annotations

import json

import pytest

from helpers import Lab
from planbook import AgentReply, Plan, Runner, ScriptedAgent, run
from planbook.data.refs import args_with_refs, find_refs, resolve


def test_find_refs_whole_inline_nested_and_escaped() -> None:
    args = {
        "a": "$load",
        "b": "total: ${sum} of ${count}",
        "c": ["$x", {"deep": "${y}"}],
        "d": "costs $5 and $$10",  # a bare $id inside a longer string is not a reference
        "e": "$$z",  # escaped whole value
        "f": 42,
    }
    assert find_refs(args) == ["load", "sum", "count", "x", "y"]
    assert args_with_refs(args) == {"a", "b", "c"}


def test_one_never_matches_inside_ten() -> None:
    results = {"1": "one", "10": "ten"}
    assert resolve("${1} and ${10}", results) == "one and ten"
    assert resolve("${10}${1}", results) == "tenone"
    assert resolve("$1", results) == "one" and resolve("$10", results) == "ten"
    assert find_refs("${10}") == ["10"] and find_refs("$10") == ["10"]
    assert resolve("$1 and $10 stay literal inside text", results) == "$1 and $10 stay literal inside text"


def test_whole_value_ref_is_the_object_itself() -> None:
    table = {"rows": [1, 2, 3]}
    assert resolve("$t", {"t": table}) is table
    assert resolve(["$t", ("$t",)], {"t": table}) == [table, (table,)]
    assert resolve("${t}", {"t": table}) == str(table)


def test_dollar_escape() -> None:
    assert resolve("$$", {}) == "$"
    assert resolve("price: $$5 (${n} items)", {"n": 3}) == "price: $5 (3 items)"
    assert resolve("$$n", {"n": 3}) == "$n"


def test_missing_ref_is_a_key_error_naming_it() -> None:
    with pytest.raises(KeyError, match="gone"):
        resolve("${gone}", {})


def test_refs_add_to_needs_in_a_spec() -> None:
    plan = Plan.parse("steps:\n  - {id: a, tool: ok}\n  - {id: b, tool: echo, args: {value: '${a}!'}, needs: [a]}\n"
                      "  - {id: c, tool: echo, args: {value: [$a, $b]}}\n")
    assert [s.needs for s in plan.steps] == [[], ["a"], ["a", "b"]]


def test_eleven_steps_dollar_one_versus_ten_through_the_runner() -> None:
    steps = [{"id": i, "tool": "ok", "args": {"label": f"r{i}"}} for i in range(1, 11)]
    steps.append({"id": 11, "tool": "echo", "args": {"value": {"whole": "$1", "inline": "${10}|${1}", "list": ["$10"]}}})
    lab = Lab()
    result = run(json.dumps({"steps": steps}), tools=lab.tools)
    assert result.status == "completed"
    assert result.outputs["11"] == {"whole": "r1", "inline": "r10|r1", "list": ["r10"]}
    assert result.plan.step("11").needs == ["1", "10"]


def test_whole_value_refs_pass_dicts_and_lists_to_tools() -> None:
    lab = Lab()
    tools = lab.tools

    @tools.tool
    def make() -> dict:
        """Make a structured result."""
        return {"rows": [1, 2], "name": "t"}

    @tools.tool
    def rows(table: dict) -> list:
        """The rows of a table."""
        return table["rows"]

    @tools.tool
    def total(values: list[int]) -> int:
        """Sum of values."""
        return sum(values)

    result = run("steps:\n  - {id: t, tool: make}\n  - {id: r, tool: rows, args: {table: $t}}\n"
                 "  - {id: s, tool: total, args: {values: $r}}\n", tools=tools)
    assert result.status == "completed"
    assert result.outputs == {"t": {"rows": [1, 2], "name": "t"}, "r": [1, 2], "s": 3}
    assert result.outputs["r"] is result.outputs["t"]["rows"]  # the object itself, not a copy


def test_a_resolved_value_of_the_wrong_type_fails_the_step_naming_the_arg() -> None:
    lab = Lab()
    result = run("steps:\n  - {id: w, tool: ok, args: {label: words}}\n  - {id: n, tool: add, args: {a: $w}}\n",
                 tools=lab.tools)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "bad arguments for tool 'add': a:" in result.error and "'words'" in result.error
    assert lab.called("add") == []


def test_agents_get_only_their_declared_needs() -> None:
    spec = """goal: write a report
steps:
  - {id: facts, tool: ok, args: {label: the facts}}
  - {id: numbers, tool: add, args: {a: 2, b: 3}}
  - {id: secret, tool: ok, args: {label: not for the writer}}
  - {id: draft, agent: writer, task: Draft the report, needs: [facts, numbers]}
"""
    seen: list[str] = []

    def write(task, ctx):
        seen.append(ctx.plan_text)  # the plan text is built when the agent reads it, during its call
        return f"{task} from {sorted(ctx.needs)}"

    writer = ScriptedAgent("writer", default=write)
    result = run(spec, tools=Lab().tools, agents=[writer])
    assert result.status == "completed"
    (ctx,) = writer.calls
    assert ctx.needs == {"facts": "the facts", "numbers": 5}
    assert "secret" not in ctx.needs and "not for the writer" not in repr(ctx.needs)
    assert ctx.goal == "write a report"
    assert ctx.step.id == "draft" and ctx.step.status.value == "in_progress"
    assert "secret. [✓]" in seen[0] and "draft. [→] [WRITER] Draft the report" in seen[0]
    assert result.outputs["draft"] == "Draft the report from ['facts', 'numbers']"


def test_agent_needs_in_a_replanned_plan_include_kept_steps() -> None:
    from planbook import ScriptedPlanner

    seen = []

    def writer(task, ctx):
        seen.append(dict(ctx.needs))
        return AgentReply(answer="ok")

    planner = ScriptedPlanner({
        None: "steps:\n  - {id: a, tool: ok, args: {label: A}}\n  - {id: b, tool: fail}\n",
        "broke": [{"id": "w", "agent": "writer", "task": "use a", "needs": ["a"]}],
    })
    result = run("goal", planner=planner, tools=Lab().tools, agents={"writer": writer})
    assert result.status == "completed" and seen == [{"a": "A"}]


def test_runner_result_of_a_need_reaches_the_tool_through_the_ref_only() -> None:
    lab = Lab()
    runner = Runner("steps:\n  - {id: '1', tool: fetch, args: {source: s}}\n  - {id: '2', tool: count, args: {text: $1}}\n",
                    tools=lab.tools)
    result = runner.run()
    assert lab.called("count") == ["three words from s"] and result.outputs["2"] == 4
