"""planbook.compat.openmanus: the planning tool, its text, and PlanningFlow on the runner.

Every pitfall of the seed is shown with ``faithful=True`` and shown absent by default.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from planbook import AgentReply, Plan, PlanError, ScriptedAgent, Status, Step
from planbook import format_plan as planbook_text
from planbook.compat.model import OpenAIChatModel, ScriptedModel
from planbook.compat.openmanus import DESCRIPTION, PlanningTool, ToolError
from planbook.compat.openmanus_agents import ScriptedReActAgent
from planbook.compat.openmanus_flow import PLANNING_REQUEST, PLANNING_SYSTEM, SUMMARY_SYSTEM, PlanningFlow
from planbook.compat.openmanus_text import format_plan, parse_plan_text, step_from_text, step_text
from planbook.llm import LLMPlanner
from planbook.testing import FakeOpenAIServer, Reply

# The parameters schema as the seed (003) prints it, with its typographic quotes made straight.
SEED_SCHEMA_TEXT = '''
{
"type": "object",
"properties": {
"command": {
"description": "The command to execute. Available commands: create, update, list, get, set_active, mark_step, delete.",
"enum": [
"create",
"update",
"list",
"get",
"set_active",
"mark_step",
"delete",
],
"type": "string",
},
"plan_id": {
"description": "Unique identifier for the plan. Required for create, update, set_active, and delete commands. Optional for get and mark_step (uses active plan if not specified).",
"type": "string",
},
"title": {
"description": "Title for the plan. Required for create command, optional for update command.",
"type": "string",
},
"steps": {
"description": "List of plan steps. Required for create command, optional for update command.",
"type": "array",
"items": {"type": "string"},
},
"step_index": {
"description": "Index of the step to update (0-based). Required for mark_step command.",
"type": "integer",
},
"step_status": {
"description": "Status to set for a step. Used with mark_step command.",
"enum": ["not_started", "in_progress", "completed", "blocked"],
"type": "string",
},
"step_notes": {
"description": "Additional notes for a step. Optional for mark_step command.",
"type": "string",
},
},
"required": ["command"],
"additionalProperties": False,
}'''


def seed_schema() -> dict:
    return ast.literal_eval(SEED_SCHEMA_TEXT)


# ------------------------------------------------------------------ to_param
def test_to_param_is_the_seed_function_definition_field_by_field():
    param = PlanningTool().to_param()
    assert param["type"] == "function"
    function = param["function"]
    assert function["name"] == "planning"
    assert function["description"] == DESCRIPTION
    assert function["description"].strip().startswith("A planning tool that allows the agent to create and manage plans")
    ours, seed = function["parameters"], seed_schema()
    assert ours["type"] == seed["type"] == "object"
    assert ours["required"] == seed["required"] == ["command"]
    assert ours["additionalProperties"] is seed["additionalProperties"] is False
    assert list(ours["properties"]) == list(seed["properties"])
    for name, field in seed["properties"].items():
        assert ours["properties"][name]["description"] == field["description"], name
        assert ours["properties"][name]["type"] == field["type"], name
        assert ours["properties"][name].get("enum") == field.get("enum"), name
        assert ours["properties"][name].get("items") == field.get("items"), name
        assert set(ours["properties"][name]) == set(field), name
    assert ours["properties"]["command"]["enum"] == ["create", "update", "list", "get", "set_active", "mark_step", "delete"]
    assert ours["properties"]["step_status"]["enum"] == ["not_started", "in_progress", "completed", "blocked"]
    assert ours == seed


def test_to_param_returns_a_copy():
    tool = PlanningTool()
    tool.to_param()["function"]["parameters"]["properties"].clear()
    assert tool.to_param()["function"]["parameters"] == seed_schema()


# ------------------------------------------------------------------ commands
def make_tool(**kw) -> PlanningTool:
    tool = PlanningTool(**kw)
    tool.execute(command="create", plan_id="p1", title="Sales", steps=["[CODE] read", "[CODE] group", "report"])
    return tool


def test_create_returns_the_seed_text_with_its_rule_and_blank_lines():
    tool = PlanningTool()
    out = tool.execute(command="create", plan_id="p1", title="Sales", steps=["[CODE] read the CSV", "write report"])
    header = "Plan: Sales (ID: p1)"
    assert out == (
        "Plan created successfully with ID: p1\n\n"
        f"{header}\n{'=' * (len(header) + 1)}\n\n"  # the seed's rule: len(header + "\\n")
        "Progress: 0/2 steps completed (0.0%)\n"
        "Status: 0 completed, 0 in progress, 0 blocked, 2 not started\n\n"
        "Steps:\n"
        "0. [ ] [CODE] read the CSV\n"
        "1. [ ] write report\n"
    )
    assert tool.active_plan_id == "p1"
    assert isinstance(tool.plans["p1"], Plan)
    assert [(s.id, s.agent, s.task) for s in tool.plans["p1"].steps] == [("0", "code", "read the CSV"), ("1", None, "write report")]


def test_an_empty_plan_shows_zero_percent_as_the_seed_code_does():
    tool = PlanningTool()
    tool.write(Plan(id="e", title="Empty"))
    assert "Progress: 0/0 steps completed (0%)\n" in tool.execute(command="get")


@pytest.mark.parametrize("args, message", [
    ({"title": "t", "steps": ["a"]}, "Parameter `plan_id` is required for command: create"),
    ({"plan_id": "p1", "title": "t", "steps": ["a"]}, "A plan with ID 'p1' already exists. Use 'update' to modify existing plans."),
    ({"plan_id": "p2", "steps": ["a"]}, "Parameter `title` is required for command: create"),
    ({"plan_id": "p2", "title": "t", "steps": []}, "Parameter `steps` must be a non-empty list of strings for command: create"),
    ({"plan_id": "p2", "title": "t"}, "Parameter `steps` must be a non-empty list of strings for command: create"),
    ({"plan_id": "p2", "title": "t", "steps": ["a", 3]}, "Parameter `steps` must be a list of strings"),
])
def test_create_argument_rules(args, message):
    tool = make_tool()
    with pytest.raises(ToolError) as err:
        tool.execute(command="create", **args)
    assert message in str(err.value)
    assert list(tool.plans) == ["p1"]


def test_get_and_mark_step_default_to_the_active_plan():
    tool = make_tool()
    tool.execute(command="create", plan_id="p2", title="Other", steps=["x"])
    assert tool.execute(command="get").startswith("Plan: Other (ID: p2)")
    out = tool.execute(command="mark_step", step_index=0, step_status="completed", step_notes="did x")
    assert out.startswith("Step 0 updated in plan 'p2'.\n\n")
    assert "0. [✓] x\n   Notes: did x\n" in out  # notes of a completed step are shown
    tool.execute(command="set_active", plan_id="p1")
    assert tool.execute(command="get").startswith("Plan: Sales (ID: p1)")


def test_no_active_plan_is_a_clear_error():
    tool = make_tool()
    tool.execute(command="delete", plan_id="p1")
    assert tool.active_plan_id is None
    for command in ("get", "mark_step"):
        with pytest.raises(ToolError, match="No active plan. Please specify a plan_id or set an active plan."):
            tool.execute(command=command, step_index=0)


@pytest.mark.parametrize("args, message", [
    ({}, "Parameter `step_index` is required for command: mark_step"),
    ({"step_index": 3}, "Invalid step_index: 3. Valid indices range from 0 to 2."),
    ({"step_index": -1}, "Invalid step_index: -1. Valid indices range from 0 to 2."),
    ({"step_index": "1"}, "Parameter `step_index` must be an integer"),
    ({"step_index": True}, "Parameter `step_index` must be an integer"),
    ({"step_index": 0, "step_status": "failed"}, "Invalid step_status: failed. Valid statuses are: not_started, in_progress, completed, blocked"),
    ({"step_index": 0, "plan_id": "nope"}, "No plan found with ID: nope"),
])
def test_mark_step_argument_rules(args, message):
    tool = make_tool()
    with pytest.raises(ToolError) as err:
        tool.execute(command="mark_step", **args)
    assert message in str(err.value)


@pytest.mark.parametrize("status, mark", [("not_started", "[ ]"), ("in_progress", "[→]"), ("completed", "[✓]"), ("blocked", "[!]")])
def test_the_four_statuses_and_their_marks(status, mark):
    tool = make_tool()
    out = tool.execute(command="mark_step", step_index=1, step_status=status)
    assert f"1. {mark} [CODE] group\n" in out
    assert tool.plans["p1"].steps[1].status is Status(status)


def test_status_line_counts_every_status():
    tool = make_tool()
    tool.execute(command="mark_step", step_index=0, step_status="completed")
    tool.execute(command="mark_step", step_index=1, step_status="in_progress")
    tool.execute(command="mark_step", step_index=2, step_status="blocked")
    out = tool.execute(command="get")
    assert "Progress: 1/3 steps completed (33.3%)\nStatus: 1 completed, 1 in progress, 1 blocked, 0 not started\n" in out


def test_list_set_active_delete_and_bad_commands():
    tool = PlanningTool()
    assert tool.execute(command="list") == "No plans available. Create a plan with the 'create' command."
    tool.execute(command="create", plan_id="a", title="A", steps=["x", "y"])
    tool.execute(command="create", plan_id="b", title="B", steps=["z"])
    tool.execute(command="mark_step", plan_id="a", step_index=0, step_status="completed")
    assert tool.execute(command="list") == "Available plans:\n• a: A - 1/2 steps completed\n• b (active): B - 0/1 steps completed\n"
    assert tool.execute(command="set_active", plan_id="a").startswith("Plan 'a' is now the active plan.\n\nPlan: A (ID: a)")
    with pytest.raises(ToolError, match="Parameter `plan_id` is required for command: set_active"):
        tool.execute(command="set_active")
    with pytest.raises(ToolError, match="Parameter `plan_id` is required for command: delete"):
        tool.execute(command="delete")
    assert tool.execute(command="delete", plan_id="b") == "Plan 'b' has been deleted."
    assert tool.active_plan_id == "a"
    with pytest.raises(ToolError, match="No plan found with ID: b; the plans are a"):
        tool.execute(command="get", plan_id="b")
    with pytest.raises(ToolError, match="Unrecognized command: make. Allowed commands are: create, update, list"):
        tool.execute(command="make")
    with pytest.raises(ToolError, match="Parameter `command` is required"):
        tool.execute()
    with pytest.raises(ToolError, match=r"Unknown parameter\(s\) step: .*additionalProperties is false"):
        tool.execute(command="get", step=1)


def test_update_keeps_progress_of_a_moved_step_by_default_and_only_in_place_with_position():
    for preserve, kept in (("text", True), ("position", False)):
        tool = make_tool(preserve=preserve)
        tool.execute(command="mark_step", step_index=0, step_status="completed", step_notes="read 120 rows")
        tool.execute(command="mark_step", step_index=1, step_status="completed")
        out = tool.execute(command="update", plan_id="p1", title="Sales v2",
                           steps=["[CODE] check the file", "[CODE] read", "[CODE] group", "report"])
        assert out.startswith("Plan updated successfully: p1\n\nPlan: Sales v2 (ID: p1)")
        statuses = [s.status.value for s in tool.plans["p1"].steps]
        if kept:  # planbook: the unchanged texts keep their progress wherever they moved
            assert statuses == ["not_started", "completed", "completed", "not_started"]
            assert "1. [✓] [CODE] read\n   Notes: read 120 rows\n" in out
            assert len({s.id for s in tool.plans["p1"].steps}) == 4
        else:  # the seed: inserting a step resets everything after it
            assert statuses == ["not_started"] * 4


def test_update_in_place_keeps_progress_in_both_modes_and_checks_its_arguments():
    for preserve in ("text", "position"):
        tool = make_tool(preserve=preserve)
        tool.execute(command="mark_step", step_index=0, step_status="completed")
        tool.execute(command="update", plan_id="p1", steps=["[CODE] read", "[CODE] group by month", "report"])
        assert [s.status.value for s in tool.plans["p1"].steps] == ["completed", "not_started", "not_started"]
        with pytest.raises(ToolError, match="Parameter `plan_id` is required for command: update"):
            tool.execute(command="update", steps=["x"])
        with pytest.raises(ToolError, match="non-empty list"):
            tool.execute(command="update", plan_id="p1", steps=[])


def test_plans_are_planbook_plans_read_and_written():
    tool = PlanningTool()
    plan = Plan(id="trip", title="Trip", steps=[Step(id="a", task="book", agent="travel"), Step(id="b", task="pack")])
    assert tool.write(plan) == "trip"
    tool.execute(command="mark_step", step_index=0, step_status="completed")
    assert plan.steps[0].status is Status.not_started  # the tool holds a copy
    back = tool.read()
    assert isinstance(back, Plan) and back.steps[0].status is Status.completed
    back.steps[1].status = "blocked"
    assert tool.plans["trip"].steps[1].status is Status.not_started
    assert "0. [✓] [TRAVEL] book\n1. [ ] pack\n" in tool.execute(command="get")


# ------------------------------------------------------------------ the text
def test_an_untagged_step_without_a_tool_is_shown_as_its_text():
    plan = Plan(id="p", title="T", steps=[Step(id="1", task="Write the report")])
    assert "0. [ ] Write the report\n" in format_plan(plan)
    assert "(None)" not in format_plan(plan)
    tool_step = Step(id="2", task="Add", tool="add", args={"a": 1})
    assert step_text(tool_step) == "Add (add)"
    assert step_text(Step(id="3", tool="add", args={"a": 1})) == "add(a=1)"


def test_a_tag_anywhere_in_the_text_names_the_agent_and_the_text_is_kept():
    step = step_from_text("Chart the sales [DATA_ANALYSIS] by month", "0")
    assert step.agent == "data_analysis"
    assert step_text(step) == "Chart the sales [DATA_ANALYSIS] by month"
    lead = step_from_text("[DATA_ANALYSIS] Chart", "1")
    assert (lead.agent, lead.task, step_text(lead)) == ("data_analysis", "Chart", "[DATA_ANALYSIS] Chart")
    assert step_from_text("[Data Analysis] Chart", "2").agent is None  # the seed's regex reads [A-Z_]+ only


def test_pasting_the_text_back_keeps_statuses_and_notes():
    tool = make_tool()
    tool.execute(command="mark_step", step_index=0, step_status="completed", step_notes="120 rows")
    tool.execute(command="mark_step", step_index=1, step_status="blocked", step_notes="no month column")
    text = tool.execute(command="get")
    plan = parse_plan_text(text)
    assert (plan.id, plan.title) == ("p1", "Sales")
    assert [(s.id, s.status.value, s.agent, s.task, s.notes) for s in plan.steps] == [
        ("0", "completed", "code", "read", "120 rows"),
        ("1", "blocked", "code", "group", "no month column"),
        ("2", "not_started", None, "report", ""),
    ]
    assert format_plan(plan) == text  # the text reads back to the same text
    other = PlanningTool()
    other.load_text(text, plan_id="copy")
    assert other.execute(command="get").startswith("Plan: Sales (ID: copy)")
    assert [s.status for s in other.plans["copy"].steps][:2] == [Status.completed, Status.blocked]


def test_planbook_plan_text_reads_back_with_failed_and_skipped_steps():
    plan = Plan(id="p", title="T", steps=[Step(id="a", task="one", agent="w"), Step(id="b", task="two", agent="w", needs=["a"])])
    plan.steps[0].status, plan.steps[0].error = Status.failed, "boom"
    plan.steps[1].status = Status.skipped
    back = parse_plan_text(planbook_text(plan))
    assert [(s.id, s.status, s.needs) for s in back.steps] == [("a", Status.failed, []), ("b", Status.skipped, ["a"])]
    assert back.steps[0].error == "boom"


def test_unreadable_plan_text_names_each_line():
    with pytest.raises(PlanError) as err:
        parse_plan_text("Plan: T (ID: x)\n0. [?] one\nhello there\n1. [ ] two\n1. [ ] again\n")
    assert [(p.line, p.code) for p in err.value.problems] == [(2, "syntax"), (3, "syntax"), (5, "duplicate_id")]
    assert "unknown mark [?]" in err.value.problems[0].message
    with pytest.raises(PlanError, match="no step lines"):
        parse_plan_text("Plan: T (ID: x)\n")


def test_import_does_not_load_openai_or_the_notebook_stack():
    code = ("import sys, planbook.compat.openmanus, planbook.compat.openmanus_flow, planbook.compat.agenticseek;"
            "print(sorted(m for m in ('openai', 'IPython', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------------------------ the flow
def agents():
    return {
        "manus": ScriptedAgent("manus", description="A versatile agent"),
        "data_analysis": ScriptedAgent("data_analysis", description="An agent for data", fail_on=["chart"]),
    }


def planning(steps, title="Sales report", command="create", **more):
    return {"name": "planning", "arguments": {"command": command, "title": title, "steps": steps, **more}}


def test_flow_with_the_real_openai_client_against_a_fake_server():
    with FakeOpenAIServer([
        Reply.tool_call("planning", planning(["[DATA_ANALYSIS] read sales.csv", "write the report"])["arguments"]),
        Reply.text("The data was read and the report written."),
    ]) as server:
        planner = LLMPlanner(base_url=server.base_url, api_key="test-key")
        team = agents()
        flow = PlanningFlow(team, planner=planner)
        result = flow.run("analyse sales.csv")
    assert result.ok and result.reason == "goal_met"
    first = server.requests[0]
    assert first.tool_names == ["planning"] and first.tools == [PlanningTool().to_param()]
    system, user = first.messages
    assert system["role"] == "system" and system["content"].startswith(PLANNING_SYSTEM)
    described = [{"name": "MANUS", "description": "A versatile agent"}, {"name": "DATA_ANALYSIS", "description": "An agent for data"}]
    assert f"Now we have {described} agents. The infomation of them are below: {json.dumps(described)}\n" in system["content"]
    assert "please specify the agent names using the format '[agent_name]'" in system["content"]
    assert user == {"role": "user", "content": PLANNING_REQUEST.format(request="analyse sales.csv")}
    summary = server.requests[1]
    assert summary.messages[0]["content"] == SUMMARY_SYSTEM and not summary.tools
    assert "Progress: 2/2 steps completed (100.0%)" in summary.messages[1]["content"]
    assert result.summary == "The data was read and the report written."
    assert [c.step.task for c in team["data_analysis"].calls] == ["read sales.csv"]
    assert [c.step.task for c in team["manus"].calls] == ["write the report"]  # untagged: the primary agent
    assert result.run.usage.calls == 1 and result.run.usage.prompt_tokens > 0  # the planning call is in the run
    assert result.summary_call["purpose"] == "summary"
    assert result.text().endswith("Plan completed:\n\nThe data was read and the report written.")


def test_the_agent_sees_the_seed_step_prompt_and_plan_text():
    flow = PlanningFlow(agents(), planner=ScriptedModel([planning(["[DATA_ANALYSIS] read", "[MANUS] write"])]))
    result = flow.run("report")
    prompt = result.step_prompts[1]
    assert prompt.startswith("CURRENT PLAN STATUS:\nPlan: Sales report (ID: plan_1)\n")
    assert "0. [✓] [DATA_ANALYSIS] read\n1. [→] [MANUS] write\n" in prompt
    assert 'YOUR CURRENT TASK:\nYou are now working on step 1: "[MANUS] write"\n' in prompt
    assert flow.agents["manus"].calls[0].plan_text.startswith("Plan: Sales report (ID: plan_1)")


@pytest.mark.parametrize("given", ["single", "list", "dict"])
def test_one_agent_a_list_or_a_dict(given):
    manus = ScriptedAgent("manus", description="A versatile agent")
    other = ScriptedAgent("browser", description="Browses")
    team = {"single": manus, "list": [manus, other], "dict": {"manus": manus, "browser": other}}[given]
    flow = PlanningFlow(team, planner=ScriptedModel([planning(["step one", "[MANUS] step two"])]))
    assert flow.primary_agent == "manus"
    assert flow.run("go").ok
    assert len(manus.calls) == 2
    faithful = PlanningFlow(team, planner=ScriptedModel([planning(["x"])]), faithful=True)
    assert list(faithful.agents)[0] == {"single": "default", "list": "agent_0", "dict": "manus"}[given]


def test_unknown_tag_is_an_error_naming_the_agents_and_faithful_falls_back_silently():
    steps = ["[DATA_ANALYSIS] read", "[ANALYSIS] chart the trend", "[MANUS] write"]
    team = agents()
    result = PlanningFlow(team, planner=ScriptedModel([planning(steps)])).run("report")
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "tagged [ANALYSIS], which names no agent; the agents are [MANUS], [DATA_ANALYSIS]" in result.run.error
    assert not team["manus"].calls and not team["data_analysis"].calls  # nothing ran
    team = agents()
    result = PlanningFlow(team, planner=ScriptedModel([planning(steps)]), faithful=True).run("report")
    assert result.ok
    assert [c.step.task for c in team["manus"].calls] == ["chart the trend", "write"]  # silently the first executor


def test_a_tag_with_a_space_is_caught_by_default():
    steps = ["[DATA ANALYSIS] read", "write"]
    result = PlanningFlow(agents(), planner=ScriptedModel([planning(steps)])).run("report")
    assert result.reason == "no_plan" and "write [DATA_ANALYSIS]" in result.run.error
    team = agents()
    assert PlanningFlow(team, planner=ScriptedModel([planning(steps)]), faithful=True).run("report").ok
    assert len(team["manus"].calls) == 2 and not team["data_analysis"].calls
    team = agents()  # a known name in another case is that agent
    assert PlanningFlow(team, planner=ScriptedModel([planning(["[data_analysis] read"])])).run("r").ok
    assert len(team["data_analysis"].calls) == 1


def test_untagged_steps_go_to_the_primary_agent_and_executor_keys_limit_routing():
    team = agents()
    flow = PlanningFlow(team, planner=ScriptedModel([planning(["read", "[MANUS] write"])]),
                        executor_keys=["data_analysis"], primary_agent="data_analysis")
    assert "Now we have" not in flow.system_prompt()  # one executor: the seed lists no agents
    result = flow.run("r")
    assert result.reason == "no_plan" and "the agents are [DATA_ANALYSIS]" in result.run.error
    with pytest.raises(ValueError, match="'nobody' is not one of the agents"):
        PlanningFlow(team, planner=ScriptedModel(), primary_agent="nobody")


def test_completed_only_when_the_agent_succeeded_and_faithful_marks_every_step():
    steps = ["[DATA_ANALYSIS] read", "[DATA_ANALYSIS] chart it", "[MANUS] write"]
    result = PlanningFlow(agents(), planner=ScriptedModel([planning(steps)])).run("r", on_failure="abort")
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "1. [✗] [DATA_ANALYSIS] chart it\n   Notes: the agent could not do this task" in result.plan_text
    assert "2. [!] [MANUS] write\n   Notes: not run: the run ended (aborted)" in result.plan_text  # blocked is written
    result = PlanningFlow(agents(), planner=ScriptedModel([planning(steps)]), faithful=True).run("r", on_failure="abort")
    assert result.ok  # the seed: completed whenever run() returned
    assert "Progress: 3/3 steps completed (100.0%)" in result.plan_text and "[✗]" not in result.plan_text
    charted = result.run.plan.step("1")  # a false ✓: completed, and its answer is the agent's failure
    assert charted.status is Status.completed and "the agent could not do this task" in charted.result


def test_failures_follow_the_run_policy():
    steps = ["[DATA_ANALYSIS] read", "[DATA_ANALYSIS] chart it", "[MANUS] write"]
    result = PlanningFlow(agents(), planner=ScriptedModel([planning(steps)])).run("r", on_failure="skip")
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    assert "1. [-] [DATA_ANALYSIS] chart it" in result.plan_text and "2. [✓] [MANUS] write" in result.plan_text


def test_replan_updates_the_plan_through_the_tool_and_keeps_done_steps():
    steps = ["[DATA_ANALYSIS] read", "[DATA_ANALYSIS] chart it", "[MANUS] write"]
    model = ScriptedModel([
        planning(steps),
        {"name": "planning", "arguments": {"command": "update", "steps": ["[DATA_ANALYSIS] read", "[MANUS] describe the trend", "[MANUS] write"]}},
    ])
    result = PlanningFlow(agents(), planner=model).run("r", on_failure="replan")
    assert result.ok and result.run.replans == 1
    assert "0. [✓] [DATA_ANALYSIS] read\n1. [✓] [MANUS] describe the trend\n2. [✓] [MANUS] write\n" in result.plan_text
    replan = model.requests[1]
    assert replan["purpose"] == "replan" and "step 1 failed" in replan["messages"][1]["content"]
    assert replan["tools"] == [PlanningTool().to_param()]


def test_no_planning_call_is_a_no_plan_failure_and_faithful_makes_the_default_plan():
    team = agents()
    result = PlanningFlow(team, planner=ScriptedModel(["What kind of report do you want?"])).run("analyse sales.csv")
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "did not call the planning tool; it answered 'What kind of report do you want?'" in result.run.error
    assert not team["manus"].calls and result.summary is None and result.plan_text == ""
    team = agents()
    request = "analyse sales.csv and write a long report about every region of the company"
    result = PlanningFlow(team, planner=ScriptedModel(["What kind of report do you want?"]), faithful=True).run(request)
    assert result.ok
    assert result.plan_text.startswith(f"Plan: Plan for: {request[:50]}... (ID: plan_1)\n")
    assert [c.step.task for c in team["manus"].calls] == ["Analyze request", "Execute task", "Verify results"]


def test_a_second_attempt_gets_the_tool_error_when_asked_for():
    model = ScriptedModel([planning([], title="x"), planning(["[MANUS] go"])])
    result = PlanningFlow(agents(), planner=model, max_attempts=2).run("r")
    assert result.ok
    assert "Parameter `steps` must be a non-empty list" in model.requests[1]["messages"][-1]["content"]
    result = PlanningFlow(agents(), planner=ScriptedModel([planning([], title="x")])).run("r")
    assert result.reason == "no_plan" and "non-empty list" in result.run.error


def test_each_step_gets_its_own_agent_budget_and_faithful_carries_it_over():
    def run(faithful):
        worker = ScriptedReActAgent("manus", iterations={"one": 8, "two": 7, "three": 8, "four": 3})
        model = ScriptedModel([planning(["step one", "step two", "step three", "step four"])])
        result = PlanningFlow(worker, planner=model, faithful=faithful, agent_max_steps=20).run("r", on_failure="abort")
        return result, worker

    result, worker = run(faithful=False)
    assert result.ok and [b[2] for b in result.budgets] == [20, 20, 20, 20]
    assert worker.max_iterations == 20  # restored after each step
    result, worker = run(faithful=True)  # the seed: 8 of 20, then 12 left, then 5 left, then reset
    assert [(b[2], b[3]) for b in result.budgets] == [(20, 8), (12, 7), (5, 5), (20, 3)]
    assert result.ok and "3. [✓] step four" in result.plan_text
    third = result.run.plan.step("2")
    assert third.status is Status.completed and third.result == "Terminated: Reached max steps (5)"


def test_an_agent_that_finished_the_request_ends_the_flow_and_faithful_never_notices():
    def run(faithful):
        worker = ScriptedReActAgent("manus", finish_on=["answer"])
        model = ScriptedModel([planning(["look up", "answer the question", "double check", "format"])])
        return PlanningFlow(worker, planner=model, faithful=faithful).run("r"), worker

    result, worker = run(faithful=False)
    assert (result.status, result.reason) == ("completed", "stopped")  # AgentReply(stop=...), not statuses set by hand
    assert [c["task"] for c in worker.calls] == ["look up", "answer the question"]
    assert "2. [-] double check\n   Notes: not run: step 1 ended the run (agent 'manus' finished the request)" in result.plan_text
    assert result.run.plan.step("2").notes == "not run: step 1 ended the run (agent 'manus' finished the request)"
    assert [e.step for e in result.run.events if e.kind == "step.skipped"] == ["2", "3"]
    assert worker.state == "IDLE"
    result, worker = run(faithful=True)
    assert result.reason == "goal_met" and len(worker.calls) == 4  # the FINISHED check never fires


def test_blocked_is_never_written_in_faithful_mode():
    class Crashing:
        name, description = "manus", "crashes on charts"

        def __call__(self, task, context):
            if "chart" in context.step.task:  # faithful: task is the seed's step prompt
                raise RuntimeError("plotting backend missing")
            return AgentReply(answer="ok")

    steps = ["read", "chart", "write"]
    result = PlanningFlow(Crashing(), planner=ScriptedModel([planning(steps)]), faithful=True).run("r", on_failure="abort")
    assert "1. [→] chart\n" in result.plan_text and "2. [ ] write\n" in result.plan_text and "[!]" not in result.plan_text
    result = PlanningFlow(Crashing(), planner=ScriptedModel([planning(steps)])).run("r", on_failure="abort")
    assert "1. [✗] chart\n   Notes: RuntimeError: plotting backend missing" in result.plan_text
    assert "2. [!] write" in result.plan_text


def test_faithful_reruns_a_raising_step_until_max_steps_runs_out_and_nothing_is_blocked():
    """Upstream's _get_current_step_info picks the first step not completed; a step whose agent
    raised stays in progress, so it is picked again: forever, here until the step budget ends."""
    class Crashing:
        name, description = "manus", "crashes on charts"

        def __init__(self):
            self.tasks = []

        def __call__(self, task, context):
            self.tasks.append(context.step.task)
            if "chart" in context.step.task:  # faithful: task is the seed's step prompt
                raise RuntimeError("plotting backend missing")
            return AgentReply(answer="ok")

    steps = ["read", "chart", "write"]
    agent = Crashing()
    result = PlanningFlow(agent, planner=ScriptedModel([planning(steps)]), faithful=True).run("r", max_steps=6)
    assert agent.tasks == ["read"] + ["chart"] * 5  # never "write": the seed does not move on
    assert (result.status, result.reason) == ("failed", "step_budget")
    assert "1. [→] chart\n" in result.plan_text and "2. [ ] write\n" in result.plan_text and "[!]" not in result.plan_text
    assert [p.split("You are now working on step ")[1].split(":")[0] for p in result.step_prompts] == ["0"] + ["1"] * 5
    result = PlanningFlow(Crashing(), planner=ScriptedModel([planning(steps)])).run("r")  # default: replan (no reply left)
    assert result.reason == "no_plan" and "2. [!] write" in result.plan_text


def test_faithful_a_step_that_stops_raising_completes_and_the_flow_goes_on():
    class Flaky:
        name, description = "manus", "fails once"

        def __init__(self):
            self.calls = 0

        def __call__(self, task, context):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("flaky")
            return AgentReply(answer=context.step.task)

    result = PlanningFlow(Flaky(), planner=ScriptedModel([planning(["a", "b", "c"])]), faithful=True).run("r")
    assert result.ok and [s for s, _ in result.answers] == ["0", "1", "1", "2"]
    assert result.plan_text.endswith("0. [✓] a\n1. [✓] b\n2. [✓] c\n")
    assert result.text().startswith("a\nError executing step 1: flaky\nb\nc\nPlan completed:\n\n")


def test_step_prompt_and_summary_request_are_upstreams():
    model = ScriptedModel([planning(["[MANUS] one"])])
    result = PlanningFlow(agents(), planner=model, faithful=True).run("r")
    prompt = result.step_prompts[0]
    assert prompt.startswith("\n        CURRENT PLAN STATUS:\n        Plan: ")
    assert prompt.endswith('\n\n        YOUR CURRENT TASK:\n        You are now working on step 0: "[MANUS] one"\n\n'
                           "        Please only execute this current step using the appropriate tools. When you're done, "
                           "provide a summary of what you accomplished.\n        ")
    asked = model.requests[-1]
    assert asked["purpose"] == "summary"
    assert asked["messages"][-1]["content"] == (
        "The plan has been completed. Here is the final plan status:\n\n" + result.plan_text
        + "\n\nPlease provide a summary of what was accomplished and any final thoughts.")


def test_a_second_request_on_the_same_flow():
    model = ScriptedModel([planning(["[MANUS] one"]), planning(["[MANUS] two"])])
    flow = PlanningFlow(agents(), planner=model)
    assert flow.run("a").ok and flow.run("b").ok
    assert list(flow.tool.plans) == ["plan_1", "plan_2"]
    model = ScriptedModel([planning(["[MANUS] one"]), planning(["[MANUS] two"])])
    flow = PlanningFlow(agents(), planner=model, faithful=True)
    assert flow.run("a").ok
    second = flow.run("b")  # the seed reuses its plan id: create refuses it
    assert second.reason == "no_plan" and "already exists" in second.run.error


def test_execute_returns_the_seed_text_and_scripted_summaries_are_deterministic():
    flow = PlanningFlow(agents(), planner=ScriptedModel([planning(["[MANUS] one", "[MANUS] two"], title="Demo")]))
    text = flow.execute("go")
    assert text == "done\ndone\nPlan completed:\n\nDemo: 2 of 2 steps completed."


def test_openai_chat_model_accepts_an_openai_client():
    with FakeOpenAIServer([Reply.tool_call("planning", planning(["[MANUS] go"])["arguments"]), Reply.text("ok")]) as server:
        model = OpenAIChatModel("fake-model", client=server.client())
        assert PlanningFlow(agents(), planner=model).run("r").summary == "ok"


def test_the_flows_planner_and_agents_called_without_what_they_need_say_so():
    """Called directly (not by the runner): a planner of a flow with no model and an agent given
    no step are a clear ValueError, not an AttributeError on None."""
    from planbook import AgentContext
    from planbook.compat.openmanus_flow import OpenManusPlanner

    flow = PlanningFlow(agents(), planner=None)
    with pytest.raises(ValueError, match="planner=a model"):
        OpenManusPlanner(flow)("report", [], None)
    routed = flow.runner_options(None, {})["agents"]["manus"]
    with pytest.raises(ValueError, match=r"AgentContext\(step=\.\.\.\)"):
        routed("task", AgentContext(goal="report"))
