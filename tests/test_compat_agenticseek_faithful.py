"""AgenticSeek faithful mode reads and runs answers as ``sources/agents/planner_agent.py`` and
``sources/tools/tools.py`` do; each expected value is what the upstream code returned."""

from __future__ import annotations

import json

import pytest

from planbook import Plan, PlanError
from planbook.compat.agenticseek import SeedTask, json_blocks, parse_answer


def task(agent: str, id: object, text: str, **more: object) -> dict:
    return {"agent": agent, "id": id, "task": text, **more}


def block(*tasks: dict, opening: str = "```json\n") -> str:
    return f"{opening}{json.dumps({'plan': list(tasks)})}\n```"


# upstream's load_exec_block on these texts
UPSTREAM_BLOCKS = [
    ('x\n```json {"plan": [1]}```\n```json\n{"plan": [2]}\n```', [' {"plan": [1]}', '\n{"plan": [2]}\n']),
    ('```json:plan.json\n{"plan": []}\n```', ['{"plan": []}\n']),
    ('```json {"plan": [\n1]}\n```', ['1]}\n']),  # a first line with ':' is dropped, even when it is JSON
    ("```JSON\n{}\n```", []),
    ("```jsonc\n{}\n```", ["c\n{}\n"]),
    ("no block", []),
    ("```json\n{}", []),
    ('  ```json\n  {"a": 1}\n  ```', ['\n{"a": 1}\n']),
    (":```json:```", [""]),
    ("x```jsonx```JSON", [""]),  # 'x' before the tag is taken off the line 'x'
]


@pytest.mark.parametrize(("text", "expected"), UPSTREAM_BLOCKS)
def test_faithful_json_blocks_are_upstreams(text: str, expected: list[str]) -> None:
    assert json_blocks(text, faithful=True) == expected


def test_a_block_with_text_after_its_tag_is_read_in_both_modes() -> None:
    first = block(task("web", "1", "search"), opening="```json ").replace("\n```", "```")
    answer = f"## Task 1: search\n{first}\n## Task 2: write\n" + block(task("coder", "2", "write", need=["1"]))
    assert [s.task for s in parse_answer(answer).steps] == ["search", "write"]  # never half a plan
    assert [s.task for s in parse_answer(answer, faithful=True).steps] == ["search", "write"]
    path = "```json:plan.json\n" + json.dumps({"plan": [task("web", "1", "search")]}) + "\n```"
    assert [s.task for s in parse_answer(path).steps] == ["search"]
    assert [s.task for s in parse_answer(path, faithful=True).steps] == ["search"]


def test_an_upper_case_tag_is_no_block_upstream() -> None:
    answer = block(task("web", "1", "search"), opening="```JSON\n")
    assert [s.task for s in parse_answer(answer).steps] == ["search"]
    with pytest.raises(PlanError, match="no ```json block"):
        parse_answer(answer, faithful=True)


def test_a_first_line_with_a_colon_is_dropped_upstream_so_the_plan_is_refused() -> None:
    answer = '```json {"plan": [\n{"agent": "web", "id": "1", "task": "search"}]}\n```'
    assert [s.task for s in parse_answer(answer).steps] == ["search"]
    with pytest.raises(PlanError, match="not valid JSON"):
        parse_answer(answer, faithful=True)


@pytest.mark.parametrize("where", ["plan", "task"])
def test_deeply_nested_answers_are_a_plan_error(where: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    body = deep if where == "plan" else json.dumps([task("web", "1", "x")])[:-2] + ', "extra": ' + deep + "}]"
    answer = '```json\n{"plan": ' + body + "}\n```"
    for faithful in (False, True):
        with pytest.raises(PlanError, match="nested too deeply"):
            parse_answer(answer, faithful=faithful)
    with pytest.raises(PlanError, match="nested too deeply"):
        Plan.parse(answer)


def test_a_deep_but_readable_task_value_is_a_plan_error_not_a_recursion_error() -> None:
    deep = "[" * 950 + "]" * 950  # json reads it; turning it into text recurses deeper
    answer = '```json\n{"plan": [{"agent": "web", "id": "1", "task": ' + deep + "}]}\n```"
    try:
        parsed = parse_answer(answer)
    except PlanError as exc:
        assert "nested too deeply" in str(exc)
    else:
        assert parsed.steps[0].task.startswith("[[")


def test_faithful_keeps_ids_and_needs_as_written() -> None:
    answer = block(task("web", " 1 ", "a"), task("web", 2, "b", need="12"), task("coder", "3", "c", need=[None, True, [1]]),
                   task("coder", "3", "d"))
    parsed = parse_answer(answer, faithful=True)
    assert parsed.seeds == [SeedTask(" 1 ", None, False), SeedTask(2, "12", True),
                            SeedTask("3", [None, True, [1]], True), SeedTask("3", None, False)]
    assert [s.id for s in parsed.steps] == ["t1", "t2", "t3", "t4"] and all(not s.needs for s in parsed.steps)


def test_faithful_refuses_only_what_upstream_refuses() -> None:
    with pytest.raises(PlanError, match="Agent Painter does not exist."):
        parse_answer(block(task("web", "1", "a"), task("Painter", "2", "b")), faithful=True)
    with pytest.raises(PlanError, match="Missing field in json plan."):
        parse_answer(block({"agent": "web", "task": "a"}), faithful=True)
    assert len(parse_answer(block(task("Web", "", "")), faithful=True).steps) == 1  # empty values pass upstream
    with pytest.raises(PlanError, match="has no 'id'"):
        parse_answer(block(task("Web", "", "")))
