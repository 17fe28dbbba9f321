"""The last differences between ``faithful=True`` and the upstream code (issue "Faithful to the
last case"): where upstream raises, the run ends there, once, saying "upstream raises here";
an OpenManus agent gets upstream's step prompt; ``execute()`` returns upstream's texts.

Every expected value is what the upstream code (OpenManus ``52a13f2a57d8``, AgenticSeek
``ae57a2357745``) returned or raised for the same input, run outside this repository with its
imports stubbed; the counts are the questions it asked and the tasks it ran.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from planbook import AgentReply, PlanError, UpstreamCrash, run
from planbook.compat.agenticseek import SEED_EXAMPLE_IDS, planner_prompt
from planbook.compat.agenticseek_answers import parse_answer, task_names
from planbook.compat.model import ScriptedModel
from planbook.compat.openmanus import PlanningTool, ToolError
from planbook.compat.openmanus_agents import ScriptedReActAgent
from planbook.compat.openmanus_flow import PlanningFlow
from planbook.compat.strategies import strategy_named

#: Python 3.11 added the index type to this message; upstream's text is the interpreter's
STRING_INDICES = "string indices must be integers" + ("" if sys.version_info < (3, 11) else ", not 'str'")


def block(obj: object) -> str:
    return "```json\n" + json.dumps(obj) + "\n```"


def task(agent: object, id: object, text: object, **more: object) -> dict:
    return {"agent": agent, "id": id, "task": text, **more}


# ------------------------------------------------------------ AgenticSeek: reading answers
# (the answer's plan, the exception upstream's parse_agent_tasks raised)
UPSTREAM_PARSE_CRASHES = [
    ({"plan": [task(1, "1", "a")]}, "AttributeError", "'int' object has no attribute 'lower'"),  # row 2
    ({"plan": [{"id": "1", "task": "a"}]}, "KeyError", "'agent'"),  # row 2
    ({"plan": "search, then code"}, "TypeError", STRING_INDICES),  # row 3
    (42, "TypeError", "argument of type 'int' is not iterable"),  # row 3
    ({"plan": None}, "TypeError", "'NoneType' object is not iterable"),  # row 3
    ({"plan": 5}, "TypeError", "'int' object is not iterable"),
    ({"plan": {"a": 1}}, "TypeError", STRING_INDICES),
    (["plan"], "TypeError", "list indices must be integers or slices, not str"),
    ("my plan", "TypeError", STRING_INDICES),
    (None, "TypeError", "argument of type 'NoneType' is not iterable"),
    ({"plan": [None]}, "TypeError", "'NoneType' object is not subscriptable"),
    ({"plan": [[1]]}, "TypeError", "list indices must be integers or slices, not str"),
    ({"plan": [7]}, "TypeError", "'int' object is not subscriptable"),
]


@pytest.mark.parametrize(("plan", "kind", "message"), UPSTREAM_PARSE_CRASHES)
def test_faithful_parse_raises_where_upstream_raises(plan: object, kind: str, message: str) -> None:
    with pytest.raises(UpstreamCrash) as raised:
        parse_answer(block(plan), faithful=True)
    assert (type(raised.value.upstream).__name__, str(raised.value.upstream)) == (kind, message)
    assert str(raised.value).startswith(f"upstream raises here: {kind}: {message}")
    with pytest.raises(PlanError):  # the default refuses it, naming the problem, and asks again
        parse_answer(block(plan))


def test_faithful_parse_stops_at_the_first_refusal_as_upstream() -> None:
    # upstream returned [] (refused, asked again): the unknown agent comes before the crash
    with pytest.raises(PlanError, match="Agent Painter does not exist."):
        parse_answer(block({"plan": [task("Painter", "1", "a"), {"id": "2", "task": "b"}]}), faithful=True)
    with pytest.raises(PlanError, match='no "plan" list'):  # upstream: {"plan": {}} has no task, []
        parse_answer(block({"plan": {}}), faithful=True)


def test_faithful_headlines_break_at_newlines_only() -> None:
    text = "## Task 1: a\u2028## Task 2: b"
    assert task_names(text, faithful=True) == ["## Task 1: a\u2028## Task 2: b"]  # upstream's get_task_names
    assert task_names(text) == ["## Task 1: a", "## Task 2: b"]  # planbook: every line break (README table)


# ------------------------------------------------------------ AgenticSeek: running
class Recorder:
    def __init__(self, name: str) -> None:
        self.name, self.description = name, f"the {name} agent"
        self.prompts: list[str] = []

    def __call__(self, task: str, context: Any) -> AgentReply:
        self.prompts.append(task)
        return AgentReply(answer=f"answer {len(self.prompts)}")


def seek(replies: list[str], *, faithful: bool = True) -> tuple[Any, int, int, Recorder]:
    """The run, the questions asked, the tasks run, and the web agent."""
    agents = {"web": Recorder("web"), "coder": Recorder("coder")}
    model = ScriptedModel(replies)
    result = run("goal", agents=agents, planner=model, strategy="agenticseek", faithful=faithful)
    return result, len(model.requests), sum(len(a.prompts) for a in agents.values()), agents["web"]


# (the answers, upstream's exception, the questions it asked, the tasks it ran)
UPSTREAM_RUN_CRASHES = [
    pytest.param([block({"plan": [{"id": "1", "task": "a"}]})], "KeyError: 'agent'", 1, 0, id="row4-first-answer"),
    pytest.param([block({"plan": [task("web", "1", "a"), task("web", "2", "b")]}),
                  block({"plan": [task("web", "1", "a"), {"id": "2", "task": "b"}]})],
                 "KeyError: 'agent'", 2, 1, id="row5-review-answer"),
    pytest.param([block({"plan": "first search, then code"})], f"TypeError: {STRING_INDICES}", 1, 0, id="row6"),
    pytest.param([block({"plan": [task("web", "1", "a"), task("web", "2", 42)]}), "NO_UPDATE"],
                 "AttributeError: 'int' object has no attribute 'lower'", 2, 1, id="row7-title-42"),
    pytest.param([block({"plan": [task("web", "1", 42), task("web", "2", "b")]})],
                 "AttributeError: 'int' object has no attribute 'lower'", 1, 0, id="row7-first-title-42"),
    pytest.param([block({"plan": [task("web", [1], "a"), task("web", "2", "b")]}), "NO_UPDATE"],
                 "TypeError: unhashable type: 'list'", 1, 1, id="row8-list-id"),
    pytest.param([block({"plan": [task("web", "1", "a", need=None)]})],
                 "TypeError: 'NoneType' object is not iterable", 1, 0, id="need-null-first"),
]


@pytest.mark.parametrize(("replies", "raised", "questions", "tasks"), UPSTREAM_RUN_CRASHES)
def test_a_faithful_run_ends_where_upstream_raises(replies: list[str], raised: str, questions: int, tasks: int) -> None:
    result, asked, ran, _ = seek(replies + ["NO_UPDATE"] * 6)
    assert (result.status, asked, ran) == ("failed", questions, tasks)
    assert f"upstream raises here: {raised}" in result.error


def test_the_default_mode_asks_again_or_runs_on() -> None:
    result, asked, _, _ = seek([block({"plan": [{"id": "1", "task": "a"}]})] * 4, faithful=False)
    assert (result.reason, asked) == ("no_plan", 4)
    result, asked, ran, _ = seek([block({"plan": [task("web", "1", "a"), task("web", "2", 42)]}), "NO_UPDATE", "NO_UPDATE"],
                                 faithful=False)
    assert result.ok and ran == 2


def test_a_task_that_is_not_text_runs_when_headlines_give_the_titles() -> None:
    answer = "## Task 1: a\n## Task 2: b\n" + block({"plan": [task("web", "1", "a"), task("web", "2", 42)]})
    result, asked, ran, web = seek([answer, "NO_UPDATE", "NO_UPDATE"])
    assert (result.status, asked, ran) == ("completed", 3, 2)  # upstream: returned after 3 questions, 2 tasks
    assert web.prompts[1].endswith("Your task is:\n42")


# ------------------------------------------------------------ OpenManus: the planning tool

TWO_STEPS = ("Plan: T (ID: p)\n================\n\nProgress: 0/2 steps completed (0.0%)\n"
             "Status: 0 completed, 0 in progress, 0 blocked, 2 not started\n\nSteps:\n0. [ ] a\n1. [ ] b\n")


def test_row1_a_float_index_with_nothing_to_set_is_updated_as_upstream() -> None:
    tool = PlanningTool(faithful=True)
    tool.execute(command="create", plan_id="p", title="T", steps=["a", "b"])
    assert tool.execute(command="mark_step", plan_id="p", step_index=1.0) == "Step 1.0 updated in plan 'p'.\n\n" + TWO_STEPS
    with pytest.raises(TypeError, match=r"^list indices must be integers or slices, not float$"):  # upstream, with a status
        tool.execute(command="mark_step", plan_id="p", step_index=1.0, step_status="completed")
    default = PlanningTool()
    default.execute(command="create", plan_id="p", title="T", steps=["a", "b"])
    with pytest.raises(ToolError, match="must be an integer, got 1.0"):  # planbook checks the schema (row 2)
        default.execute(command="mark_step", plan_id="p", step_index=1.0)


def test_a_missing_command_and_a_null_command_in_upstreams_words() -> None:
    tool = PlanningTool(faithful=True)
    with pytest.raises(TypeError) as raised:
        tool.execute(plan_id="p")
    assert str(raised.value) == "PlanningTool.execute() missing 1 required keyword-only argument: 'command'"
    with pytest.raises(ToolError) as refused:
        tool.execute(command=None)
    assert str(refused.value) == ("Unrecognized command: None. Allowed commands are: create, update, list, get, "
                                  "set_active, mark_step, delete")
    for args in ({}, {"command": None}):  # planbook: one ToolError for both (README table)
        with pytest.raises(ToolError, match=r"^Parameter `command` is required"):
            PlanningTool().execute(**args)


# ------------------------------------------------------------ OpenManus: the flow
class Worker:
    """An OpenManus agent stand-in: keeps what ``run()`` was given."""

    name, description = "manus", "does the work"

    def __init__(self) -> None:
        self.received: list[str] = []

    def __call__(self, task: str, context: Any) -> AgentReply:
        self.received.append(task)
        return AgentReply(answer="worked")


def planning(arguments: object) -> dict:
    return {"name": "planning", "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


def flow(replies: list, *, faithful: bool = True) -> tuple[PlanningFlow, Worker]:
    worker = Worker()
    return PlanningFlow({"manus": worker}, planner=ScriptedModel(replies), plan_id="p", faithful=faithful), worker


#: what upstream's agent.run() received for the one step "[MANUS] collect the data"
UPSTREAM_STEP_PROMPT = (
    '\n        CURRENT PLAN STATUS:\n        Plan: T (ID: p)\n================\n\nProgress: 0/1 steps completed (0.0%)\n'
    'Status: 0 completed, 1 in progress, 0 blocked, 0 not started\n\nSteps:\n0. [→] [MANUS] collect the data\n\n\n'
    '        YOUR CURRENT TASK:\n        You are now working on step 0: "[MANUS] collect the data"\n\n'
    "        Please only execute this current step using the appropriate tools. When you're done, provide a summary "
    "of what you accomplished.\n        ")


def test_row9_the_agent_receives_upstreams_step_prompt() -> None:
    made, worker = flow([[planning({"command": "create", "title": "T", "steps": ["[MANUS] collect the data"]})]])
    result = made.run("do it")
    assert worker.received == [UPSTREAM_STEP_PROMPT] and result.step_prompts == [UPSTREAM_STEP_PROMPT]
    made, worker = flow([[planning({"command": "create", "title": "T", "steps": ["[MANUS] collect the data"]})]],
                        faithful=False)
    made.run("do it")
    assert worker.received == ["collect the data"]  # planbook: the task; the plan text is in the context


# (the planning call's arguments, what upstream's execute("do it") returned)
UPSTREAM_NO_PLAN = [
    ({"command": "update", "steps": ["a"]}, "Execution failed: No plan found with ID: p"),
    ({"command": "create", "title": "T"}, "Execution failed: Parameter `steps` must be a non-empty list of strings "
                                          "for command: create"),
    (["create"], "Execution failed: list indices must be integers or slices, not str"),
    ('"x"', "Execution failed: 'str' object does not support item assignment"),
    ({"command": "get"}, "Execution failed: No plan found with ID: p"),
    ({"title": "T", "steps": ["a"]}, "Execution failed: PlanningTool.execute() missing 1 required keyword-only "
                                     "argument: 'command'"),
    ({"command": None, "title": "T"}, "Execution failed: Unrecognized command: None. Allowed commands are: create, "
                                      "update, list, get, set_active, mark_step, delete"),
    ({"command": "list"}, "Failed to create plan for: do it"),
]


@pytest.mark.parametrize(("arguments", "upstream"), UPSTREAM_NO_PLAN)
def test_row10_execute_returns_upstreams_failure_text(arguments: object, upstream: str) -> None:
    made, worker = flow([[planning(json.dumps(arguments) if not isinstance(arguments, str) else arguments)]])
    result = made.run("do it")
    assert result.text() == upstream and worker.received == []
    assert flow([[planning(json.dumps(arguments) if not isinstance(arguments, str) else arguments)]])[0].execute("do it") \
        == upstream
    assert result.status == "failed" and result.summary is None
    if upstream.startswith("Execution failed: "):  # upstream raised: the run says so
        assert "upstream raises here: " in result.run.error
        assert upstream[len("Execution failed: "):] in result.run.error


def test_row11_arguments_that_are_not_json_are_skipped_and_the_default_plan_runs() -> None:
    for arguments in ("{not json", ""):
        made, worker = flow([[planning(arguments)]])
        result = made.run("do it")
        assert result.ok and len(worker.received) == 3  # upstream: "Analyze request", "Execute task", "Verify results"
        assert result.plan_text.startswith("Plan: Plan for: do it (ID: p)\n")
        assert 'step 0: "Analyze request"' in worker.received[0]
    made, worker = flow([[planning("{not json"), planning({"command": "create", "title": "T", "steps": ["x"]})]])
    assert made.run("do it").ok and len(worker.received) == 1  # upstream: the next call is carried out
    made, _ = flow([[planning("{not json")]], faithful=False)
    assert made.run("do it").reason == "no_plan"


# ------------------------------------------------------------ the table's rows, against upstream


class Says:
    """An agent that answers the same words every time, and may call them a failure."""

    name, description = "manus", "does the work"

    def __init__(self, answer: str, ok: bool = True) -> None:
        self.answer, self.ok = answer, ok

    def __call__(self, task: str, context: Any) -> AgentReply:
        return AgentReply(answer=self.answer, ok=self.ok)


def test_table_row7_a_step_is_completed_whenever_the_agent_returns() -> None:
    made = PlanningFlow({"manus": Says("I could not do it", ok=False)},
                        planner=ScriptedModel([[planning({"command": "create", "title": "T", "steps": ["a", "b"]})]]),
                        plan_id="p", faithful=True)
    result = made.run("do it")
    # upstream's plan and execute() text for an agent whose run() returned "I could not do it" twice
    assert result.plan_text == ("Plan: T (ID: p)\n================\n\nProgress: 2/2 steps completed (100.0%)\n"
                                "Status: 2 completed, 0 in progress, 0 blocked, 0 not started\n\nSteps:\n0. [✓] a\n1. [✓] b\n")
    assert result.text().startswith("I could not do it\nI could not do it\nPlan completed:\n\n")


def four_steps(worker: Any, *, faithful: bool = True) -> Any:
    model = ScriptedModel([[planning({"command": "create", "title": "T", "steps": ["one", "two", "three", "four"]})]])
    return PlanningFlow({"manus": worker}, planner=model, plan_id="p", faithful=faithful, agent_max_steps=20).run("do it")


def test_table_row12_the_agent_step_budget_carries_over_as_upstream() -> None:
    # upstream's BaseAgent(max_steps=20) on tasks needing 8, 7, 8, 3 steps: (steps left when run() starts,
    # steps taken); the third run hits the maximum ("Terminated: Reached max steps") and the counter resets
    upstream = [(20, 8), (12, 7), (5, 5), (20, 3)]
    result = four_steps(ScriptedReActAgent("manus", iterations={"one": 8, "two": 7, "three": 8, "four": 3}))
    assert [(given, spent) for _, _, given, spent in result.budgets] == upstream
    assert result.run.plan.step("2").result.startswith("Terminated: Reached max steps")
    fixed = four_steps(ScriptedReActAgent("manus", iterations={"one": 8, "two": 7, "three": 8, "four": 3}), faithful=False)
    assert [given for _, _, given, _ in fixed.budgets] == [20, 20, 20, 20]


def test_table_row13_finished_is_never_noticed() -> None:
    worker = ScriptedReActAgent("manus", finish_on=["one", "two", "three", "four"])
    result = four_steps(worker)
    assert (result.reason, len(worker.calls)) == ("goal_met", 4)  # upstream: every run() ended FINISHED; 4 runs
    worker = ScriptedReActAgent("manus", finish_on=["one", "two", "three", "four"])
    assert four_steps(worker, faithful=False).reason == "stopped" and len(worker.calls) == 1


def test_table_row14_a_second_request_reuses_the_plan_id() -> None:
    replies = [[planning({"command": "create", "title": "T", "steps": ["a"]})],
               [planning({"command": "create", "title": "T2", "steps": ["b"]})]]
    made = PlanningFlow({"manus": Says("ok")}, planner=ScriptedModel(replies), plan_id="p", faithful=True)
    assert made.execute("do it").startswith("ok\nPlan completed:\n\n")
    assert made.execute("again") == ("Execution failed: A plan with ID 'p' already exists. "
                                      "Use 'update' to modify existing plans.")  # upstream's execute("again")
    fixed = PlanningFlow({"manus": Says("ok")}, planner=ScriptedModel(replies), plan_id="p")
    assert fixed.run("do it").ok and fixed.run("again").ok and list(fixed.tool.plans) == ["p", "p_2"]


def test_table_row26_every_question_resends_the_whole_conversation() -> None:
    agents = {"web": Recorder("web")}
    model = ScriptedModel([block({"plan": [task("web", "1", "a"), task("web", "2", "b")]}), "NO_UPDATE", "NO_UPDATE"])
    run("goal", agents=agents, planner=model, strategy="agenticseek", faithful=True)
    # the roles upstream's planner sent for its plan and its two reviews
    assert [[m["role"] for m in r["messages"]] for r in model.requests] == [
        ["system", "user"], ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user", "assistant", "user"]]


def test_table_row27_the_example_reuses_an_id_as_upstreams() -> None:
    def ids(prompt: str) -> list[str]:
        example = prompt.split("```json\n", 1)[1].split("\n```", 1)[0]
        return [t["id"] for t in json.loads(example)["plan"]]

    assert ids(planner_prompt(example_ids=SEED_EXAMPLE_IDS)) == ["1", "2", "3", "4", "3"]  # upstream's planner prompt
    assert ids(planner_prompt()) == ["1", "2", "3", "4"]


def test_table_row28_only_the_last_answer_is_returned() -> None:
    agents = {"web": Recorder("web")}
    model = ScriptedModel([block({"plan": [task("web", "1", "a"), task("web", "2", "b")]}), "NO_UPDATE", "NO_UPDATE"])
    result = run("goal", agents=agents, planner=model, strategy="agenticseek", faithful=True)
    # upstream's process() returned ("answer 2\nAgent succeeded with task.", ""): task 2's answer alone
    assert list(strategy_named("agenticseek").returns(result, True).values()) == ["answer 2"]
    assert list(strategy_named("agenticseek").returns(result, False).values()) == ["answer 1", "answer 2"]


# ------------------------------------------------------------ default-mode rows of the table
class Named:
    def __init__(self, name: str) -> None:
        self.name, self.description = name, f"the {name} agent"
        self.tasks: list[str] = []

    def __call__(self, task: str, context: Any) -> AgentReply:
        self.tasks.append(context.step.task)
        return AgentReply(answer="ok")


def test_table_row35_an_untagged_step_goes_to_the_first_executor_upstream() -> None:
    def made(faithful: bool) -> tuple[Any, dict[str, Named]]:
        agents = {name: Named(name) for name in ("manus", "data_analysis", "web")}
        model = ScriptedModel([[planning({"command": "create", "title": "T", "steps": ["plain", "[MANUS] tagged"]})]])
        flow_ = PlanningFlow(agents, planner=model, plan_id="p", executor_keys=["data_analysis", "web"], faithful=faithful)
        return flow_.run("do it"), agents

    result, agents = made(True)  # upstream: "plain" to data_analysis (the first executor), "[MANUS]" to manus
    assert result.ok and (agents["manus"].tasks, agents["data_analysis"].tasks, agents["web"].tasks) == (
        ["tagged"], ["plain"], [])
    result, agents = made(False)
    assert result.reason == "no_plan" and "[MANUS], which names no agent" in result.run.error


def test_table_row36_agents_given_as_a_list() -> None:
    def made(faithful: bool) -> tuple[Any, list[Named], ScriptedModel]:
        agents = [Named("manus"), Named("data_analysis")]
        model = ScriptedModel([[planning({"command": "create", "title": "T", "steps": ["[DATA_ANALYSIS] chart it", "plain"]})]])
        PlanningFlow(agents, planner=model, plan_id="p", faithful=faithful).run("do it")
        return model.requests[0]["messages"][0]["content"], agents, model

    prompt, agents, _ = made(True)  # upstream: both steps to agent_0; the prompt offers AGENT_0 and AGENT_1
    assert [len(a.tasks) for a in agents] == [2, 0]
    assert '[{"name": "AGENT_0", "description": "the manus agent"}, {"name": "AGENT_1", ' in prompt
    prompt, agents, _ = made(False)
    assert [a.tasks for a in agents] == [["plain"], ["chart it"]] and '"name": "DATA_ANALYSIS"' in prompt


@pytest.mark.parametrize("faithful", [True, False])
def test_agent_names_match_by_lower_as_upstream(faithful: bool) -> None:
    # upstream: "Web" is web; "ﬁle" and "caſual" name no agent (the answer is refused and asked again)
    assert parse_answer(block({"plan": [task("Web", "1", "a")]}), faithful=faithful).steps[0].agent == "web"
    for name in ("ﬁle", "caſual"):
        with pytest.raises(PlanError, match="does not exist"):
            parse_answer(block({"plan": [task(name, "1", "a")]}), faithful=faithful)


def test_default_rows_30_to_33() -> None:
    with pytest.raises(PlanError, match="'plan' must be a list of tasks"):  # row 31
        parse_answer(block({"plan": "search, then code"}))
    bare = json.dumps({"plan": [task("web", "1", "a")]})
    assert [s.task for s in parse_answer(bare).steps] == ["a"]  # row 32
    with pytest.raises(PlanError, match="no ```json block"):
        parse_answer(bare, faithful=True)
    assert parse_answer(block({"plan": [task("web", "1", 42)]})).steps[0].task == "42"  # row 33
    result, asked, ran, _ = seek([block({"plan": [task("web", [1], "a")]})] * 4, faithful=False)  # row 30
    assert (result.reason, asked, ran) == ("no_plan", 1, 0) and "the id '[1]' starts with '['" in result.error
