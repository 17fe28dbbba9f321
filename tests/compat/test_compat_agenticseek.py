"""planbook.compat.agenticseek: the answer format, retries, context by need, the review rules."""

from __future__ import annotations

import pytest

import planbook
from planbook import Plan, PlanError, PlanningError, ScriptedAgent, Status, Step, validate_plan
from planbook.compat.agenticseek import (
    NO_UPDATE,
    RETRY_PROMPT,
    AgenticSeekPlanner,
    all_answers,
    last_answer,
    need_context,
    need_prompt,
    planner_prompt,
    review_update,
    update_prompt,
    work_result,
)
from planbook.compat.agenticseek_answers import looks_like_answer, need_report, parse_answer
from planbook.compat.model import OpenAIChatModel, ScriptedModel
from planbook.spec.formats import is_plan_spec
from planbook.testing import FakeOpenAIServer, Reply

#: The example answer of the seed (002), as it prints it: two headlines, four tasks.
SEED_ANSWER = """\
## Task 1: I will search for available weather api with the help of the web agent.

## Task 2: I will create an api key for the weather api using the web agent

```json
{
  "plan": [
    { "agent": "Web",  "id": "1", "need": [],          "task": "Search for reliable weather APIs" },
    { "agent": "Web",  "id": "2", "need": ["1"],       "task": "Obtain API key from the selected service" },
    { "agent": "File", "id": "3", "need": [],          "task": "Create and setup a web app folder…" },
    { "agent": "Coder","id": "4", "need": ["2", "3"], "task": "Develop a Python application using the API…" }
  ]
}
```
"""

#: Pitfall 3 of the seed: the prompt's example ends with a Casual step whose id is "3" again
#: (the seed describes that step; its need is not given there, so it needs the coder's step).
SEED_ANSWER_DUPLICATE = SEED_ANSWER.replace(
    '"task": "Develop a Python application using the API…" }\n',
    '"task": "Develop a Python application using the API…" },\n'
    '    { "agent": "Casual", "id": "3", "need": ["4"], "task": "resume what has been done and conclude" }\n',
)


def plan_answer(tasks, headlines=()):
    import json

    heads = "".join(f"## Task {i}: {h}\n\n" for i, h in enumerate(headlines, start=1))
    return f"{heads}```json\n{json.dumps({'plan': tasks})}\n```\n"


T = [
    {"agent": "Web", "id": "1", "need": [], "task": "find papers"},
    {"agent": "File", "id": "2", "need": [], "task": "make a folder"},
    {"agent": "Coder", "id": "3", "need": ["1", "2"], "task": "write the app"},
]


# ------------------------------------------------------------------ parsing
def test_the_seed_example_answer_parses_with_the_task_fallback_for_titles():
    parsed = parse_answer(SEED_ANSWER)
    assert [(s.id, s.agent, s.needs, s.task) for s in parsed.steps] == [
        ("1", "web", [], "Search for reliable weather APIs"),
        ("2", "web", ["1"], "Obtain API key from the selected service"),
        ("3", "file", [], "Create and setup a web app folder…"),
        ("4", "coder", ["2", "3"], "Develop a Python application using the API…"),
    ]
    assert parsed.titles == [s.task for s in parsed.steps]  # 2 headlines for 4 tasks: the seed falls back
    assert parsed.report == []


def test_headlines_are_kept_as_titles_when_the_counts_match():
    parsed = parse_answer(plan_answer(T, ["I will search", "I will make a folder", "I will code"]))
    assert parsed.titles == ["## Task 1: I will search", "## Task 2: I will make a folder", "## Task 3: I will code"]
    numbered = "1. search\n2. folder\n3. code\n" + plan_answer(T)
    assert parse_answer(numbered).titles == ["1. search", "2. folder", "3. code"]


def test_the_seed_example_with_its_duplicate_id_parses_and_reports_it():
    parsed = parse_answer(SEED_ANSWER_DUPLICATE)
    assert [s.id for s in parsed.steps] == ["1", "2", "3", "4", "3"]
    assert [(p.code, p.step) for p in parsed.report] == [("duplicate_id", "3")]
    assert "tasks 3 and 5" in parsed.report[0].message and "replaces the earlier one" in parsed.report[0].message
    plan = Plan.parse(SEED_ANSWER_DUPLICATE)  # planbook refuses to run it, naming the problem
    with pytest.raises(PlanError) as err:
        validate_plan(plan, {}, ["web", "file", "coder", "casual"])
    assert "duplicate_id" in err.value.codes


def test_needs_pointing_forward_nowhere_or_to_itself_are_reported():
    steps = [Step(id="1", task="a", agent="web", needs=["2"]), Step(id="2", task="b", agent="web", needs=["9"]),
             Step(id="3", task="c", agent="web", needs=["3"])]
    assert [(p.code, p.step) for p in need_report(steps)] == [("need_forward", "1"), ("unknown_need", "2"), ("cycle", "3")]
    assert "comes later (task 2)" in need_report(steps)[0].message


@pytest.mark.parametrize("tasks, fragment", [
    ([{**T[0], "agent": "Painter"}], "agent 'Painter' does not exist; the agents are coder, file, web, casual"),
    ([{k: v for k, v in T[0].items() if k != "task"}], "task 3 has no 'task'"),
    ([{k: v for k, v in T[0].items() if k != "id"}], "task 3 has no 'id'"),
    ([{k: v for k, v in T[0].items() if k != "agent"}], "task 3 has no 'agent'"),
    ([{**T[0], "task": "  "}], "task 3 has no 'task'"),
    ([{**T[0], "need": {"1": True}}], "'need' must be a list of task ids"),
    (["just a string"], "must be an object with agent, id, need and task"),
])
def test_the_whole_plan_is_rejected_never_half(tasks, fragment):
    with pytest.raises(PlanError) as err:
        parse_answer(plan_answer(T[1:] + tasks))
    assert fragment in str(err.value)


def test_invalid_json_in_any_block_rejects_the_whole_answer_and_blocks_add_up():
    good = plan_answer(T[:1])
    with pytest.raises(PlanError, match="json block 2 is not valid JSON"):
        parse_answer(good + '```json\n{"plan": [\n```\n')
    assert [s.id for s in parse_answer(plan_answer(T[:1]) + plan_answer(T[1:])).steps] == ["1", "2", "3"]
    with pytest.raises(PlanError, match="no ```json block"):
        parse_answer("What kind of app do you want?")
    with pytest.raises(PlanError, match="no \"plan\" list"):
        parse_answer('```json\n{"steps": []}\n```')


def test_agents_match_without_regard_to_case_and_need_may_be_a_string_or_null():
    parsed = parse_answer(plan_answer([{**T[0], "agent": "WEB", "need": None}, {**T[2], "need": "1, 2", "id": 2}]))
    assert [(s.id, s.agent, s.needs) for s in parsed.steps] == [("1", "web", []), ("2", "coder", ["1", "2"])]
    custom = parse_answer(plan_answer([{**T[0], "agent": "researcher"}]), agents={"Researcher": "reads"})
    assert custom.steps[0].agent == "Researcher"


def test_plan_parse_reads_the_whole_answer_and_a_bare_plan_object():
    plan = Plan.parse(SEED_ANSWER, goal="a weather app")
    assert [s.agent for s in plan.steps] == ["web", "web", "file", "coder"] and plan.goal == "a weather app"
    bare = '{"plan": [{"agent": "coder", "id": "1", "need": [], "task": "write it"}]}'
    assert Plan.parse(bare).steps[0].task == "write it"
    assert is_plan_spec(SEED_ANSWER) and is_plan_spec(bare) and looks_like_answer(bare)
    assert not looks_like_answer("steps:\n  - {tool: add}") and not is_plan_spec("write a weather app")
    with pytest.raises(PlanError, match="has no 'task'"):
        Plan.parse('{"plan": [{"agent": "coder", "id": "1"}]}')


# --------------------------------------------------------- context by need
def test_context_holds_only_the_needs_in_the_seed_words_with_success():
    plan = parse_answer(plan_answer(T)).plan()
    plan.steps[0].status, plan.steps[0].result = Status.completed, "3 papers"
    plan.steps[1].status, plan.steps[1].result = Status.failed, None
    plan.steps[1].error = "disk full"
    text = need_context(plan.steps[2], plan)
    assert text == (
        "You are given informations from your AI friends work:\n"
        "- According to agent 1:\n3 papers\nAgent succeeded with task.\n\n"
        "- According to agent 2:\ndisk full\nAgent failed with task (Error detected).\n\n"
        "Your task is:\nwrite the app"
    )
    lonely = Step(id="9", task="t", agent="web", needs=["7", "3"])
    assert "- According to agent 7:\n(no result: no task has this id)" in need_context(lonely, plan)
    assert "- According to agent 3:\n(no result: task 3 is not_started)" in need_context(lonely, plan)
    assert need_prompt("t", {}) == "You are given informations from your AI friends work:\nNo needed informations.\n\nYour task is:\nt"
    assert work_result("x", False) == "x\nAgent failed with task (Error detected)."
    plan.steps[0].result = "p" * 50
    assert "p" * 9 + "…" in need_context(plan.steps[2], plan, limit=10)


# ---------------------------------------------------------------- the review
def test_no_update_keeps_the_plan():
    plan = parse_answer(plan_answer(T)).plan()
    assert review_update(plan, "1", NO_UPDATE) is None
    assert review_update(plan, "1", "The work was good: NO_UPDATE") is None
    with pytest.raises(PlanError, match="also gives a plan"):
        review_update(plan, "1", NO_UPDATE + "\n" + plan_answer(T))


def test_the_update_may_change_only_the_steps_after_the_current_one():
    plan = parse_answer(plan_answer(T)).plan()
    retry = [T[0], T[1], {**T[2], "task": "write the app, with tests"}, {"agent": "Casual", "id": "4", "need": ["3"], "task": "sum up"}]
    tail = review_update(plan, "2", plan_answer(retry))
    assert [(s.id, s.task) for s in tail] == [("3", "write the app, with tests"), ("4", "sum up")]
    changed = [{**T[0], "task": "find other papers"}, T[1], T[2]]
    with pytest.raises(PlanError) as err:
        review_update(plan, "2", plan_answer(changed))
    assert err.value.codes == ["rewrites_done_step"] and "only the tasks after task 2 may change" in str(err.value)
    with pytest.raises(PlanError, match="drops task '2'"):
        review_update(plan, "2", plan_answer(T[:1]))


def test_the_update_may_grow_by_one_step_at_most_and_keeps_ids_unique():
    plan = parse_answer(plan_answer(T)).plan()
    extra = [{"agent": "Casual", "id": str(i), "need": [], "task": f"more {i}"} for i in (4, 5)]
    assert len(review_update(plan, "1", plan_answer(T + extra[:1]))) == 3
    with pytest.raises(PlanError, match="the new plan has 5 tasks; the plan had 3: write the same number or one more"):
        review_update(plan, "1", plan_answer(T + extra))
    with pytest.raises(PlanError) as err:
        review_update(plan, "1", plan_answer([T[0], T[1], {**T[2], "id": "1"}]))
    assert "duplicate_id" in err.value.codes
    with pytest.raises(KeyError, match="no step '7'"):
        review_update(plan, "7", NO_UPDATE)


def test_update_prompt_has_the_seed_rules_and_a_bounded_answer():
    plan = parse_answer(plan_answer(T)).plan()
    text = update_prompt("an app", plan, "2", "x" * 10_000, False, limit=500)
    for line in ("Agent 2 work was a failure according to system interpreter.",
                 "If agent work was good: answer NO_UPDATE",
                 "You need to rewrite the whole plan, but only change the tasks after task 2.",
                 "Make the plan the same length as the original one or with only one additional step.",
                 "Next task is: write the app."):
        assert line in text
    assert len(text) < 1500 and '"id": "3"' in text
    assert len(update_prompt("an app", plan, "2", "x" * 10_000, True, limit=None, with_plan=False)) > 10_000


# ---------------------------------------------------------------- the planner
def test_retries_with_the_seed_prompt_then_succeeds():
    model = ScriptedModel(["What kind of app do you want?", '```json\n{"plan": [\n```', plan_answer(T)])
    planner = AgenticSeekPlanner(model)
    steps = planner(goal="an app", history=[], last_error=None)
    assert [s.id for s in steps] == ["1", "2", "3"]
    second = model.requests[1]["messages"][-1]["content"]
    assert second.startswith(RETRY_PROMPT) and "no ```json block" in second
    faithful = ScriptedModel(["What?", plan_answer(T)])
    AgenticSeekPlanner(faithful, faithful=True)("an app", [], None)
    assert faithful.requests[1]["messages"][-1]["content"] == RETRY_PROMPT


def test_four_bad_answers_fail_with_every_attempt():
    model = ScriptedModel(["What?", "Which API?", NO_UPDATE, plan_answer([{**T[0], "agent": "Painter"}])])
    with pytest.raises(PlanningError) as err:
        AgenticSeekPlanner(model)("an app", [], None)
    assert len(err.value.attempts) == 4 and "Painter" in str(err.value)
    assert [a["content"] for a in err.value.attempts][:3] == ["What?", "Which API?", NO_UPDATE]
    result = planbook.run("an app", planner=AgenticSeekPlanner(ScriptedModel(["What?"] * 4)), agents={"web": ScriptedAgent("web")})
    assert (result.status, result.reason) == ("failed", "no_plan") and not result.history  # no empty plan as success


def test_the_planner_drives_a_planbook_run_with_usage_counted():
    team = {name: ScriptedAgent(name) for name in ("web", "file", "coder", "casual")}
    result = planbook.run("an app", planner=AgenticSeekPlanner(ScriptedModel([plan_answer(T)])), agents=team)
    assert result.ok and result.usage.calls == 1
    assert [a["id"] for a in all_answers(result)] == ["1", "2", "3"]
    assert last_answer(result) == "done"


def test_the_review_after_a_step_and_the_planner_prompt():
    plan = parse_answer(plan_answer(T)).plan()
    model = ScriptedModel([NO_UPDATE, plan_answer([{**T[0], "task": "changed"}, T[1], T[2]]), plan_answer(T)])
    planner = AgenticSeekPlanner(model)
    assert planner.review("an app", plan, "1", "3 papers", True) is None
    tail = planner.review("an app", plan, "2", "folder made", True)  # rejected once, then the same plan
    assert [(s.id, s.task) for s in tail] == [("3", "write the app")]
    assert "Your plan was rejected" in model.requests[2]["messages"][-1]["content"]
    assert '"id": "3"' in planner_prompt() and planner_prompt().count('"id": "3"') == 1
    assert AgenticSeekPlanner(ScriptedModel(), faithful=True).system_prompt.count('"id": "3"') == 2  # pitfall 3


def test_the_planner_context_stays_bounded_and_faithful_memory_grows():
    plan = parse_answer(plan_answer(T)).plan()

    def sizes(faithful):
        model = ScriptedModel([NO_UPDATE] * 6)
        planner = AgenticSeekPlanner(model, faithful=faithful)
        for _ in range(6):
            planner.review("an app", plan, "1", "r" * 5000, True)
        return [c["prompt_tokens"] for c in model.calls]

    bounded, grows = sizes(False), sizes(True)
    assert max(bounded) == min(bounded)
    assert all(a < b for a, b in zip(grows, grows[1:])) and grows[-1] > 4 * grows[0]


def test_every_answer_is_returned_not_only_the_last():
    team = {"web": ScriptedAgent("web", {"find": "3 papers"}), "file": ScriptedAgent("file", fail_on=["folder"]),
            "coder": ScriptedAgent("coder"), "casual": ScriptedAgent("casual")}
    tasks = [T[0], {**T[1], "need": []}, {"agent": "Casual", "id": "3", "need": ["1"], "task": "sum up"}]
    result = planbook.run(Plan.parse(plan_answer(tasks)), agents=team, on_failure="skip")
    answers = all_answers(result)
    assert [(a["id"], a["status"], a["answer"]) for a in answers] == [
        ("1", "completed", "3 papers"), ("2", "skipped", answers[1]["answer"]), ("3", "completed", "done")]
    assert "could not do this task" in answers[1]["answer"]
    assert last_answer(result) == "done"  # the seed's return value: the last step's words only


def test_the_planner_with_the_real_openai_client_against_a_fake_server():
    with FakeOpenAIServer([Reply.text(SEED_ANSWER)]) as server:
        planner = AgenticSeekPlanner(OpenAIChatModel(base_url=server.base_url, api_key="test-key"))
        steps = planner("a weather app", [], None)
    assert len(steps) == 4 and planner.titles == [s.task for s in steps]
    system, user = server.requests[0].messages
    assert system["role"] == "system" and "## Task 1:" in system["content"] and user["content"] == "a weather app"
    assert not server.requests[0].tools
