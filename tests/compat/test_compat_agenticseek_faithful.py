"""AgenticSeek faithful mode reads and runs answers as ``sources/agents/planner_agent.py`` and
``sources/tools/tools.py`` do; each expected value is what the upstream code returned."""

from __future__ import annotations

import json

import pytest

from planbook import Plan, PlanError
from planbook.compat.agenticseek_answers import SeedTask, json_blocks, parse_answer


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
    with pytest.raises(PlanError, match="nested too deeply"):
        parse_answer(answer)
    with pytest.raises(PlanError, match="nested too deeply"):
        Plan.parse(answer)
    from planbook import UpstreamCrash

    with pytest.raises(UpstreamCrash) as raised:  # upstream's json.loads raised it, and only JSONDecodeError is caught
        parse_answer(answer, faithful=True)
    assert (type(raised.value.upstream).__name__, str(raised.value.upstream)) == (
        "RecursionError", "maximum recursion depth exceeded while decoding a JSON array from a unicode string")


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


# ------------------------------------------------------------------ running faithfully
from typing import Any  # noqa: E402

from planbook import AgentReply, Status, run  # noqa: E402
from planbook.compat.model import ScriptedModel  # noqa: E402


class Recorder:
    """An agent that writes down every prompt it is given and answers with its task's last word."""

    def __init__(self, name: str, fail_on: str = "") -> None:
        self.name, self.description, self.fail_on = name, f"the {name} agent", fail_on
        self.prompts: list[str] = []

    def __call__(self, task: str, context: Any) -> AgentReply:
        self.prompts.append(task)
        ok = not (self.fail_on and self.fail_on in task)
        return AgentReply(answer=f"answer of {task.split()[-1]}", ok=ok)


def seek(*tasks: dict, reviews: list[str] | None = None, faithful: bool = True, **options: Any) -> tuple[Any, dict, ScriptedModel]:
    agents = {"web": Recorder("web"), "coder": Recorder("coder")}
    model = ScriptedModel([block(*tasks)] + (reviews if reviews is not None else ["NO_UPDATE"] * len(tasks)))
    result = run("goal", agents=agents, planner=model, strategy="agenticseek", faithful=faithful, **options)
    return result, agents, model


def test_a_text_need_is_read_character_by_character() -> None:
    result, agents, _ = seek(task("web", "1", "a"), task("web", "2", "b"), task("coder", "3", "c", need="12"))
    assert result.ok
    prompt = agents["coder"].prompts[0]
    assert "According to agent 1:\nanswer of a" in prompt and "According to agent 2:\nanswer of b" in prompt


def test_integer_ids_with_text_needs_silently_lose_their_context() -> None:
    result, agents, _ = seek(task("web", 1, "a"), task("coder", 2, "c", need=["1"]))
    assert result.ok and "No needed informations." in agents["coder"].prompts[0]
    result, agents, _ = seek(task("web", 1, "a"), task("coder", 2, "c", need=[1]))
    assert "According to agent 1:\nanswer of a" in agents["coder"].prompts[0]


@pytest.mark.parametrize(("need", "crash"), [(None, "'NoneType' object is not iterable"), (5, "'int' object is not iterable")])
def test_a_need_upstream_cannot_iterate_ends_the_run_before_that_task(need: object, crash: str) -> None:
    # upstream's loop looks the need up before it runs the task: the request raises there
    result, agents, _ = seek(task("web", "1", "a"), task("coder", "2", "c", need=need))
    assert not result.ok and f"upstream raises here: TypeError: {crash}" in result.error
    assert [s.status for s in result.plan.steps] == [Status.completed, Status.not_started]
    assert agents["coder"].prompts == []


def test_needs_holding_null_booleans_or_lists_are_accepted_and_match_as_upstream() -> None:
    result, agents, _ = seek(task("web", 1, "a"), task("coder", "2", "c", need=[None, True]))
    assert result.ok and "According to agent True:\nanswer of a" in agents["coder"].prompts[0]  # True == 1
    result, _, _ = seek(task("web", "1", "a"), task("coder", "2", "c", need=[[1]]))
    assert not result.ok and "upstream raises here: TypeError: unhashable type: 'list'" in result.error


def test_an_id_with_spaces_is_kept_and_a_need_must_match_it_exactly() -> None:
    result, agents, _ = seek(task("web", " 1 ", "a"), task("coder", "2", "c", need=["1"]),
                             task("coder", "3", "d", need=[" 1 "]))
    assert result.ok and "No needed informations." in agents["coder"].prompts[0]
    assert "According to agent  1 :\nanswer of a" in agents["coder"].prompts[1]


def test_duplicate_ids_run_every_task_and_the_later_answer_wins() -> None:
    tasks = [task("web", "1", "a"), task("web", "2", "b", need=["1"]), task("web", "3", "c"),
             task("web", "3", "d"), task("coder", "4", "e", need=["2", "3"])]
    result, agents, _ = seek(*tasks)
    assert result.ok and [s.id for s in result.plan.steps] == ["1", "2", "3", "3_2", "4"]
    assert "According to agent 3:\nanswer of d" in agents["coder"].prompts[0]
    assert "answer of c" not in agents["coder"].prompts[0]
    default, _, _ = seek(*tasks, faithful=False)
    assert default.reason == "no_plan"


def test_tasks_run_in_array_order_even_when_an_earlier_one_needs_a_later_one() -> None:
    result, agents, _ = seek(task("web", "1", "a", need=["3"]), task("web", "2", "b"), task("web", "3", "c"))
    assert [p.split()[-1] for p in agents["web"].prompts] == ["a", "b", "c"]
    assert "No needed informations." in agents["web"].prompts[0]
    default, agents, _ = seek(task("web", "1", "a", need=["3"]), task("web", "2", "b"), task("web", "3", "c"),
                              faithful=False)
    assert [p.split()[-1] for p in agents["web"].prompts] == ["b", "c", "a"]


def test_a_review_that_never_parses_keeps_the_plan_and_the_run_goes_on() -> None:
    result, _, model = seek(task("web", "1", "a"), task("web", "2", "b"), reviews=["no plan"] * 4 + ["NO_UPDATE"])
    assert result.ok and [s.status for s in result.plan.steps] == [Status.completed] * 2
    assert [r["purpose"] for r in model.requests] == ["plan"] + ["review"] * 5
    default, _, _ = seek(task("web", "1", "a"), task("web", "2", "b"), reviews=["no plan"] * 4 + ["NO_UPDATE"],
                         faithful=False)
    assert not default.ok


def test_no_update_with_a_plan_keeps_the_plan() -> None:
    other = "NO_UPDATE\n" + block(task("web", "1", "a"), task("web", "2", "changed"))
    result, agents, _ = seek(task("web", "1", "a"), task("web", "2", "b"), reviews=[other, "NO_UPDATE"])
    assert result.ok and [p.split()[-1] for p in agents["web"].prompts] == ["a", "b"]
    default, _, _ = seek(task("web", "1", "a"), task("web", "2", "b"), reviews=[other] * 4, faithful=False)
    assert not default.ok


def test_a_first_answer_saying_no_update_gives_up() -> None:
    agents = {"web": Recorder("web")}
    model = ScriptedModel(["NO_UPDATE " + block(task("web", "1", "a"))])
    result = run("goal", agents=agents, planner=model, strategy="agenticseek", faithful=True)
    assert result.reason == "no_plan" and "Failed to parse the tasks." in result.error
    assert len(model.requests) == 1


def test_non_integer_ids_are_never_reviewed() -> None:
    result, _, model = seek(task("web", "a1", "a"), task("web", "b2", "b"), reviews=[])
    assert result.ok and [r["purpose"] for r in model.requests] == ["plan"]


def test_a_faithful_review_replaces_the_rest_unchecked() -> None:
    new = block(task("web", "9", "rewritten"), task("web", "2", "b2"), task("web", "5", "more"))
    result, agents, _ = seek(task("web", "1", "a"), task("web", "2", "b"), reviews=[new, "NO_UPDATE", "NO_UPDATE"])
    assert result.ok and [p.split()[-1] for p in agents["web"].prompts] == ["a", "b2", "more"]


def test_the_seeds_own_example_answer_runs_all_five_tasks() -> None:
    """The example in upstream's planner prompt: five tasks, id "3" twice, the last needing "3"."""
    example = block(task("Web", "1", "search weather APIs", need=[]), task("Web", "2", "obtain a key", need=["1"]),
                    task("File", "3", "set up the folder", need=[]), task("Coder", "4", "write the app", need=["2", "3"]),
                    task("Casual", "3", "sum up and conclude", need=["2", "3", "4"]))
    for faithful in (True, False):
        agents = {name: Recorder(name) for name in ("web", "file", "coder", "casual")}
        model = ScriptedModel([example] + ["NO_UPDATE"] * 5)
        result = run("make a weather app", agents=agents, planner=model, strategy="agenticseek", faithful=faithful)
        if faithful:
            assert result.ok and result.executions == 5
            assert "According to agent 3:\nanswer of folder" in agents["casual"].prompts[0]
        else:
            assert result.reason == "no_plan" and "'3'" in result.error
