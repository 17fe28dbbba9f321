"""LLMAgent against the scripted FakeOpenAIServer, through the real openai client."""

from __future__ import annotations

import json

import pytest

import planbook
from planbook import Toolbox
from planbook.llm import LLMAgent
from planbook.testing import Reply

KEY = "sk-test-agent-9876543210-secret"


@pytest.fixture
def seen():
    return []


@pytest.fixture
def tools(seen):
    box = Toolbox()

    @box.tool
    def word_count(text: str) -> int:
        """Count the words in a text."""
        seen.append(text)
        return len(text.split())

    @box.tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk full")

    return box


@pytest.fixture
def values():
    box = Toolbox()

    @box.tool
    def alpha() -> str:
        """First value."""
        return "ALPHA-RESULT"

    @box.tool
    def beta() -> str:
        """Second value."""
        return "BETA-RESULT"

    return box


def agent(server, tools=None, **kwargs) -> LLMAgent:
    return LLMAgent("writer", "writes short texts", tools=tools, model="agent-model", base_url=server.base_url,
                    api_key=KEY, **kwargs)


def run_agent_step(server, the_agent, values, *, needs=("b",), task="write a line about the result"):
    plan = planbook.Plan(goal="write about values", steps=[
        planbook.Step(id="a", tool="alpha"),
        planbook.Step(id="b", tool="beta"),
        planbook.Step(id="w", agent="writer", task=task, needs=list(needs), expect="one sentence"),
    ])
    box = Toolbox(list(values.values()))
    return planbook.run(plan, tools=box, agents=[the_agent])


def test_the_prompt_holds_the_plan_status_the_task_and_only_the_needed_results(server, values, tools, seen):
    server.add(Reply.tool_call("word_count", {"text": "BETA-RESULT is here"}), Reply.finish("BETA-RESULT is here."))
    result = run_agent_step(server, agent(server, tools), values)
    assert result.status == "completed", result.error
    assert result.outputs["w"] == "BETA-RESULT is here." and seen == ["BETA-RESULT is here"]
    prompt = server.requests[0].messages[1]["content"]
    assert "CURRENT PLAN STATUS:" in prompt and "[→] [WRITER] write a line about the result" in prompt
    assert "YOUR CURRENT TASK (step w): write a line about the result" in prompt and "one sentence" in prompt
    assert "- step b: BETA-RESULT" in prompt and "ALPHA-RESULT" not in prompt  # only what it declared
    assert server.requests[0].tool_names == ["word_count", "broken", "finish"]
    assert server.requests[1].messages[-1] == {"role": "tool", "tool_call_id": "call_1_0", "content": "3"}
    events = [e for e in result.events if e.kind == "llm.call"]
    assert [(e.step, e.data["purpose"], e.data["attempt"]) for e in events] == [("w", "agent", 1), ("w", "agent", 2)]
    assert result.usage.calls == 2


def test_finish_with_failure_fails_the_step(server, values):
    server.add(Reply.finish("the values make no sense", status="failure"))
    result = run_agent_step(server, agent(server), values)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "reported failure: the values make no sense" in result.error


def test_ending_without_finish_is_a_failure_with_a_clear_note(server, values):
    server.add(Reply.text("Here is your sentence: values are nice."))
    result = run_agent_step(server, agent(server), values)
    assert result.status == "failed"
    assert "stopped without calling finish" in result.error and "values are nice" in result.error


def test_running_out_of_iterations_is_a_failure(server, values, tools):
    server.add(*[Reply.tool_call("word_count", {"text": "again"})] * 3)
    result = run_agent_step(server, agent(server, tools, max_iterations=3), values)
    assert result.status == "failed"
    assert "used all 3 iterations of this step without calling finish" in result.error
    assert len(server.requests) == 3


def test_the_iteration_budget_resets_for_every_step(server, tools):
    """The OpenManus pitfall: a budget that leaks across steps starves later ones."""
    the_agent = agent(server, tools, max_iterations=2)
    plan = planbook.Plan(goal="two texts", steps=[
        planbook.Step(id="1", agent="writer", task="first text"),
        planbook.Step(id="2", agent="writer", task="second text"),
    ])
    server.add(Reply.tool_call("word_count", {"text": "one"}), Reply.finish("first"),
               Reply.tool_call("word_count", {"text": "two"}), Reply.finish("second"))
    result = planbook.run(plan, agents=[the_agent])
    assert result.status == "completed", result.error
    assert result.outputs == {"1": "first", "2": "second"}
    assert [e.data["attempt"] for e in result.events if e.kind == "llm.call"] == [1, 2, 1, 2]


def test_tool_errors_are_fed_back_and_the_agent_goes_on(server, values, tools):
    server.add(
        Reply.tool_call("word_count", {"text": 42, "extra": 1}),
        Reply.tool_call("missing_tool", {}),
        Reply.tool_call("word_count", "{not json"),
        Reply.tool_call("broken", {}),
        Reply.tool_call("finish", {"status": "maybe"}),
        Reply.finish("done anyway"),
    )
    result = run_agent_step(server, agent(server, tools), values)
    assert result.status == "completed", result.error
    answers = [r.messages[-1]["content"] for r in server.requests[1:]]
    assert "argument 'text' of tool 'word_count' expects str" in answers[0] and "has no argument 'extra'" in answers[0]
    assert "there is no tool 'missing_tool'" in answers[1]
    assert "not valid JSON" in answers[2]
    assert answers[3] == "error: RuntimeError: disk full"
    assert "finish needs status 'success' or 'failure'" in answers[4]


def test_several_tool_calls_in_one_answer_each_get_a_result(server, tools):
    server.add(Reply.calls([("word_count", {"text": "a b"}), ("word_count", {"text": "c"})]), Reply.finish("3 words"))
    plan = planbook.Plan(goal="g", steps=[planbook.Step(id="1", agent="writer", task="count")])
    result = planbook.run(plan, agents=[agent(server, tools)])
    assert result.status == "completed", result.error
    assert [m["content"] for m in server.requests[1].messages if m["role"] == "tool"] == ["2", "1"]


def test_a_401_fails_the_step_without_showing_the_key(server, values):
    server.add(Reply.http_error(401, f"Incorrect API key provided: {KEY}"))
    result = run_agent_step(server, agent(server), values)
    assert result.status == "failed" and len(server.requests) == 1
    assert "refused the API key" in result.error
    assert KEY not in json.dumps([e.model_dump() for e in result.events], default=repr) and KEY not in str(result)


def test_a_tool_named_finish_is_refused(server):
    box = Toolbox()
    box.add(lambda: None, name="finish")
    with pytest.raises(ValueError, match="may not be called 'finish'"):
        agent(server, box)


def test_an_agent_called_with_no_step_says_so() -> None:
    """Called directly with a context that has no step: a clear ValueError, not an AttributeError on None."""
    from planbook import AgentContext
    from planbook.llm import LLMAgent

    agent = LLMAgent("writer", "writes", model="m", api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match=r"AgentContext\(step=\.\.\.\)"):
        agent("task", AgentContext(goal="a goal"))
