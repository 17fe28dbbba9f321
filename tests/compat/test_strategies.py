"""Strategies: each seed design through planbook.run, Runner, %run_plan and the CLI; every
pitfall reproduced with faithful=True and absent by default."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Runner, ScriptedAgent, Status, run
from planbook.cli import main
from planbook.compat.agenticseek import AgenticSeekPlanner
from planbook.compat.model import ScriptedModel
from planbook.compat.openmanus_agents import ScriptedReActAgent
from planbook.compat.scenarios import trip
from planbook.compat.strategies import STRATEGIES, adjust, flow_of, strategy_named

MARKDOWN = """\
1. [WEB] find trains
2. [WEB] find a hotel in the old town
3. [WRITER] write the itinerary
"""


def team(**web: Any) -> dict[str, Any]:
    return {"web": ScriptedAgent("web", **web), "writer": ScriptedAgent("writer", default="itinerary")}


def seek_answer(*tasks: tuple[str, str, str, list[str]]) -> str:
    import json

    return "```json\n" + json.dumps({"plan": [{"agent": a, "id": i, "need": n, "task": t} for i, a, t, n in tasks]}) + "\n```"


SEEK_PLAN = seek_answer(("1", "Web", "find trains", []), ("2", "Web", "find a hotel in the old town", []),
                        ("3", "Writer", "write the itinerary", ["1", "2"]))


# ------------------------------------------------------------------- registry
def test_the_registry_documents_each_bundle() -> None:
    assert list(STRATEGIES) == ["planbook", "lesson", "openmanus", "agenticseek"]
    for strategy in STRATEGIES.values():
        text = strategy.describe()
        for part in ("replans:", "completed:", "results:", "routing:"):
            assert part in text
    assert "false ✓" in str(STRATEGIES["openmanus"]) and not STRATEGIES["planbook"].pitfalls


@pytest.mark.parametrize("name, hint", [("openmanu", "did you mean 'openmanus'?"), ("agentic-seek", "did you mean 'agenticseek'?"),
                                        ("nothing", "")])
def test_an_unknown_strategy_names_the_known_ones(name: str, hint: str) -> None:
    with pytest.raises(ValueError) as info:
        run(MARKDOWN, agents=team(), strategy=name)
    assert f"unknown strategy {name!r}" in str(info.value) and hint in str(info.value)
    assert "planbook, lesson, openmanus, agenticseek" in str(info.value)


@pytest.mark.parametrize("name", ["planbook", "lesson", None])
def test_faithful_needs_a_design_with_pitfalls(name: str | None) -> None:
    with pytest.raises(ValueError, match="has no pitfalls to reproduce.*openmanus or agenticseek"):
        run(MARKDOWN, agents=team(), strategy=name, faithful=True)


def test_planbook_is_the_default_and_changes_nothing() -> None:
    options = adjust("planbook", plan=MARKDOWN, agents=team())
    assert options.plan == MARKDOWN and options.on_failure is None and options.after_step is None
    result = run(MARKDOWN, agents=team(), strategy="planbook")
    assert result.ok and Runner(MARKDOWN, agents=team()).strategy == "planbook"


# --------------------------------------------------------------------- lesson
def test_the_lesson_is_serial_and_knows_abort_skip_replan() -> None:
    with pytest.raises(ValueError, match="one step at a time"):
        run(MARKDOWN, agents=team(), strategy="lesson", parallel=2)
    with pytest.raises(ValueError, match="continue is planbook's"):
        run(MARKDOWN, agents=team(), strategy="lesson", on_failure="continue")
    scenario = trip()
    result = run(scenario.goal, strategy="lesson", **scenario.setup("lesson"))
    assert (result.status, result.reason, result.replans) == ("completed", "goal_met", 1)
    assert [d.removed for d in result.revisions] == [["2"]]


# ------------------------------------------------------------------ openmanus
def test_openmanus_routes_by_tag_and_untagged_steps_go_to_the_first_agent() -> None:
    spec = "1. [WRITER] write it\n2. check it\n"
    agents = team()
    result = run(spec, agents=agents, strategy="openmanus")
    assert result.ok and [s.agent for s in result.plan.steps] == ["writer", "web"]
    assert "CURRENT PLAN STATUS" not in agents["web"].calls[0].plan_text  # the agent sees the plan text itself
    assert agents["web"].calls[0].plan_text.startswith("Plan: ")


def test_openmanus_unknown_tag_is_an_error_and_faithful_falls_back_silently() -> None:
    spec = "1. [PAINTER] draw a map\n2. [WRITER] write\n"
    with pytest.raises(planbook.PlanError, match=r"tagged \[PAINTER\], which names no agent; the agents are \[WEB\], \[WRITER\]"):
        run(spec, agents=team(), strategy="openmanus")
    agents = team()
    result = run(spec, agents=agents, strategy="openmanus", faithful=True)
    assert result.ok and result.plan.step("1").agent == "web" and agents["web"].calls[0].step.task == "draw a map"


def test_openmanus_completed_only_on_success_and_faithful_marks_every_return() -> None:
    result = run(MARKDOWN, agents=team(fail_on=["old town"]), strategy="openmanus", on_failure="skip")
    assert result.plan.step("2").status is Status.skipped and result.plan.step("3").status is Status.completed
    result = run(MARKDOWN, agents=team(fail_on=["old town"]), strategy="openmanus", faithful=True)
    hotel = result.plan.step("2")  # a false ✓: completed, its answer the agent's failure
    assert hotel.status is Status.completed and "could not do this task" in hotel.result
    assert (result.status, result.reason) == ("completed", "goal_met")


def test_openmanus_faithful_reruns_a_raising_step_and_blocked_is_never_written() -> None:
    spec = "steps:\n  - {id: a, agent: web, task: crash}\n  - {id: b, agent: writer, task: write, needs: [a]}\n"

    def crashing(task: str, context: Any) -> Any:
        raise RuntimeError("backend missing")

    agents = {"web": crashing, "writer": ScriptedAgent("writer")}
    result = run(spec, agents=agents, strategy="openmanus")
    assert (result.reason, result.plan.step("b").status) == ("aborted", Status.not_started)
    result = run(spec, agents=agents, strategy="openmanus", on_failure="skip")
    assert result.plan.step("b").status is Status.blocked
    result = run(spec, agents=agents, strategy="openmanus", faithful=True, max_steps=4)
    assert (result.reason, result.plan.step("a").attempts, result.plan.step("b").attempts) == ("step_budget", 4, 0)
    assert not any(s.status is Status.blocked for s in result.plan.steps)
    assert not any(e.kind == "step.blocked" for e in result.events)


def test_openmanus_finished_ends_the_run_and_faithful_never_notices() -> None:
    spec = "1. look up\n2. answer the question\n3. double check\n"
    worker = ScriptedReActAgent("manus", finish_on=["answer"])
    result = run(spec, agents=[worker], strategy="openmanus")
    assert (result.status, result.reason) == ("completed", "stopped")
    assert result.plan.step("3").status is Status.skipped and "finished the request" in result.plan.step("3").notes
    worker = ScriptedReActAgent("manus", finish_on=["answer"])
    result = run(spec, agents=[worker], strategy="openmanus", faithful=True)
    assert result.reason == "goal_met" and len(worker.calls) == 3


def test_openmanus_agent_budget_is_per_step_and_faithful_carries_it_over() -> None:
    spec = "1. step one\n2. step two\n3. step three\n"

    def worker() -> ScriptedReActAgent:
        return ScriptedReActAgent("manus", iterations={"one": 8, "two": 7, "three": 8})

    assert run(spec, agents=[worker()], strategy="openmanus").ok  # each step gets its own 20
    result = run(spec, agents=[worker()], strategy="openmanus", faithful=True)
    third = result.plan.step("3")  # 8 + 7 used: 5 left for a step that needs 8, and it is still ✓
    assert third.status is Status.completed and third.result == "Terminated: Reached max steps (5)"


def test_openmanus_plans_with_the_model_and_no_planning_call_is_no_plan_unless_faithful() -> None:
    model = ScriptedModel.planning(["[WEB] find trains", "[WRITER] write"])
    result = run("a weekend in Lyon", agents=team(), planner=model, strategy="openmanus")
    assert result.ok and result.usage.calls == 1 and [s.agent for s in result.plan.steps] == ["web", "writer"]
    result = run("a weekend in Lyon", agents=team(), planner=ScriptedModel(["Which city?"]), strategy="openmanus")
    assert (result.status, result.reason) == ("failed", "no_plan") and "did not call the planning tool" in result.error
    agents = team()
    result = run("a weekend in Lyon", agents=agents, planner=ScriptedModel(["Which city?"]), strategy="openmanus",
                 faithful=True)
    assert result.ok and [c.step.task for c in agents["web"].calls] == ["Analyze request", "Execute task", "Verify results"]


def test_openmanus_with_a_planbook_planner_writes_its_replan_into_the_tool() -> None:
    def planner(goal: str, history: list, last_error: str | None) -> list:
        if not last_error:
            return []
        return [planbook.Step(id="4", task="[WEB] find a hotel in Villeurbanne"),  # the tag anywhere in the text
                planbook.Step(id="5", task="write the itinerary", agent="writer")]

    runner = Runner(MARKDOWN, agents=team(fail_on=["old town"]), planner=planner, strategy="openmanus")
    result = runner.run()
    assert result.ok and result.replans == 1 and result.plan.step("4").agent == "web"
    flow = flow_of(runner)
    text = flow.tool.execute(command="get")
    assert "[✓] [WEB] find a hotel in Villeurbanne" in text and "[✓] [WRITER] write the itinerary" in text


# ---------------------------------------------------------------- agenticseek
def test_agenticseek_needs_a_model_and_refuses_replan() -> None:
    with pytest.raises(ValueError, match="asks its planner after every step: pass planner=a model"):
        run(MARKDOWN, agents=team(), strategy="agenticseek")
    with pytest.raises(ValueError, match="would ask twice"):
        run(MARKDOWN, agents=team(), planner=ScriptedModel(), strategy="agenticseek", on_failure="replan")


def test_agenticseek_no_update_never_fails_and_costs_no_replan() -> None:
    model = ScriptedModel([SEEK_PLAN, "NO_UPDATE", "NO_UPDATE", "NO_UPDATE"])
    result = run("a weekend in Lyon", agents=team(), planner=model, strategy="agenticseek")
    assert (result.status, result.reason, result.replans) == ("completed", "goal_met", 0)
    assert [r["purpose"] for r in model.requests] == ["plan", "review", "review", "review"]
    assert result.usage.calls == 4  # the reviews' calls are the run's


def test_agenticseek_review_changes_only_later_steps_and_counts_a_replan() -> None:
    rewritten = seek_answer(("1", "Web", "find trains", []), ("2", "Web", "find a hotel in the old town", []),
                            ("5", "Web", "find a hotel in Villeurbanne", []),
                            ("3", "Writer", "write the itinerary", ["1", "5"]))
    model = ScriptedModel([SEEK_PLAN, "NO_UPDATE", rewritten, "NO_UPDATE", "NO_UPDATE"])
    result = run("a weekend", agents=team(fail_on=["old town"]), planner=model, strategy="agenticseek")
    assert result.replans == 1 and [s.id for s in result.plan.steps] == ["1", "2", "5", "3"]
    assert result.plan.step("3").status is Status.completed and result.revisions[0].added == ["5"]
    too_long = seek_answer(*[(str(i), "Web", f"task {i}", []) for i in range(1, 7)])
    model = ScriptedModel([SEEK_PLAN] + [too_long] * 4)
    result = run("a weekend", agents=team(), planner=model, strategy="agenticseek")
    assert (result.status, result.reason) == ("failed", "no_plan") and "one more" in result.error


def test_agenticseek_gives_each_step_only_its_needs_with_success_lines() -> None:
    tasks: dict[str, str] = {}

    def agent(name: str) -> Any:
        def work(task: str, context: Any) -> str:
            tasks[context.step.id] = task
            return f"answer {context.step.id}"
        return planbook.FunctionAgent(work, name=name)

    plan = seek_answer(("1", "Web", "find trains", []), ("2", "Web", "find a hotel", []),
                       ("3", "Writer", "write the itinerary", ["2"]))
    model = ScriptedModel([plan] + ["NO_UPDATE"] * 3)
    assert run("a weekend", agents=[agent("web"), agent("writer")], planner=model, strategy="agenticseek").ok
    assert tasks["1"] == "You are given informations from your AI friends work:\nNo needed informations.\n\n" \
                         "Your task is:\nfind trains"
    assert "According to agent 2:\nanswer 2\nAgent succeeded with task." in tasks["3"]
    assert "answer 1" not in tasks["3"]  # only what the step declared it needs


def test_agenticseek_soft_need_only_with_faithful() -> None:
    seen: list[str] = []

    def writer(task: str, context: Any) -> str:
        seen.append(task)
        return "itinerary"

    def agents() -> dict[str, Any]:
        return {"web": ScriptedAgent("web", fail_on=["old town"]), "writer": writer}

    model = ScriptedModel([SEEK_PLAN] + ["NO_UPDATE"] * 4)
    result = run("a weekend", agents=agents(), planner=model, strategy="agenticseek")
    assert result.plan.step("2").status is Status.skipped and result.plan.step("3").status is Status.blocked
    assert seen == [] and result.status == "completed" and result.reason == "steps_skipped"
    model = ScriptedModel([SEEK_PLAN] + ["NO_UPDATE"] * 4)
    result = run("a weekend", agents=agents(), planner=model, strategy="agenticseek", faithful=True)
    assert result.plan.step("2").status is Status.failed and result.plan.step("3").status is Status.completed
    assert "- According to agent 1:\ndone\nAgent succeeded with task." in seen[0]
    assert "- According to agent 2:\n" in seen[0] and "Agent failed with task (Error detected)." in seen[0]
    assert seen[0].endswith("Your task is:\nwrite the itinerary")


def test_agenticseek_faithful_memory_grows_and_default_stays_bounded() -> None:
    def review_tokens(faithful: bool) -> list[int]:
        model = ScriptedModel([SEEK_PLAN] + ["NO_UPDATE"] * 3)
        run("a weekend", agents=team(), planner=model, strategy="agenticseek", faithful=faithful)
        return [c["prompt_tokens"] for c in model.calls if c["purpose"] == "review"]

    bounded, growing = review_tokens(False), review_tokens(True)
    assert max(bounded) - min(bounded) < 40  # about the same question each time
    assert growing[0] < growing[1] < growing[2] and growing[2] - growing[0] > 200


def test_agenticseek_faithful_returns_only_the_last_answer() -> None:
    strategy = strategy_named("agenticseek")
    result = run("a weekend", agents=team(), planner=ScriptedModel([SEEK_PLAN] + ["NO_UPDATE"] * 3),
                 strategy="agenticseek")
    assert strategy.returns(result, False) == {"1": "done", "2": "done", "3": "itinerary"}
    assert strategy.returns(result, True) == {"3": "itinerary"}


def test_agenticseek_accepts_its_planner_object_and_a_faithful_planner_reuses_an_example_id() -> None:
    planner = AgenticSeekPlanner(ScriptedModel([SEEK_PLAN] + ["NO_UPDATE"] * 3), agents=["web", "writer"])
    assert run("a weekend", agents=team(), planner=planner, strategy="agenticseek").ok
    options = adjust("agenticseek", True, plan="a weekend", agents=team(), planner=ScriptedModel())
    assert '"id": "3"' in options.planner.system_prompt and options.planner.system_prompt.count('"id": "3"') == 2


# ------------------------------------------------------------ magic and CLI
def cell(ip: Any, text: str) -> Any:
    result = ip.run_cell(text)
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return result.result


def test_run_plan_strategy_and_faithful(ip: Any) -> None:
    from IPython.core.error import UsageError

    ip.user_ns["team"] = team(fail_on=["old town"])
    ip.user_ns["trip"] = MARKDOWN
    result = cell(ip, "%run_plan trip --strategy openmanus --agents team --on-failure skip --no-view")
    assert result.plan.step("2").status is Status.skipped
    result = cell(ip, "%run_plan trip --strategy openmanus --faithful --agents team --no-view")
    assert result.plan.step("2").status is Status.completed and "could not do this task" in result.plan.step("2").result
    ip.user_ns["model"] = ScriptedModel([SEEK_PLAN] + ["NO_UPDATE"] * 4)
    ip.user_ns["goal"] = "a weekend"
    ip.user_ns["team"] = team(fail_on=["old town"])
    result = cell(ip, "%run_plan goal --strategy agenticseek --faithful --planner model --agents team --no-view")
    assert result.plan.step("3").status is Status.completed and result.plan.step("2").status is Status.failed
    with pytest.raises(UsageError, match="unknown strategy 'openmanu'; did you mean 'openmanus'"):
        cell(ip, "%run_plan trip --strategy openmanu --agents team --no-view")
    with pytest.raises(UsageError, match="no pitfalls"):
        cell(ip, "%run_plan trip --faithful --agents team --no-view")


AGENTS_MODULE = """
from planbook import ScriptedAgent
team = {"web": ScriptedAgent("web", fail_on=["old town"]), "writer": ScriptedAgent("writer", default="itinerary")}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    module = f"strategy_agents_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(AGENTS_MODULE)
    (tmp_path / "trip.md").write_text(MARKDOWN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return f"{module}:team"


def test_cli_strategy_and_faithful(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "trip.md", "--agents", project, "--strategy", "openmanus", "--plain"]) == 1
    out = capsys.readouterr().out
    assert "aborted" in out and "[✗]" in out
    assert main(["run", "trip.md", "--agents", project, "--strategy", "openmanus", "--faithful", "--plain"]) == 0
    out = capsys.readouterr().out
    assert "goal_met" in out and "[✗]" not in out
    assert main(["run", "trip.md", "--agents", project, "--strategy", "openmanu", "--plain"]) == 2
    assert "did you mean 'openmanus'?" in capsys.readouterr().err
