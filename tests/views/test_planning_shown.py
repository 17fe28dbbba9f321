"""The model behind a plan is visible: ``%%plan NAME --planner llm`` lists each planning
attempt (accepted, or the problems sent back), the run's ``usage`` counts those calls, and an
agent's pane lists its model calls. A real kernel and the fake OpenAI server: no network."""

from __future__ import annotations

import json
from typing import Any

import pytest

import planbook
from helpers import Kernel, started_kernel
from planbook import Toolbox
from planbook.testing import FakeOpenAIServer, Reply
from planbook.views.text import format_planning

KEY = "sk-test-planning-shown-0123456789"
WRONG = [{"id": "1", "tool": "add_numbers", "args": {"a": 1, "b": 1}}]  # no such tool
RIGHT = [{"id": "1", "tool": "add", "args": {"a": 1, "b": 1}, "task": "one plus one"}]


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel()


def _stdout(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream"
                   and m["content"]["name"] == "stdout")


def _ok(kernel: Kernel, code: str) -> str:
    reply, messages = kernel.execute(code, timeout=120)
    errors = [m["content"] for m in messages if m["msg_type"] == "error"]
    assert reply["status"] == "ok", (reply, errors)
    return _stdout(messages)


def test_plan_magic_lists_each_attempt_and_the_run_counts_the_planning_calls(kernel: Kernel) -> None:
    with FakeOpenAIServer([Reply.plan(WRONG), Reply.plan(RIGHT)], api_key=KEY) as server:
        _ok(kernel, f"import os\nos.environ['OPENAI_BASE_URL'] = {server.base_url!r}\n"
                    f"os.environ['OPENAI_API_KEY'] = {KEY!r}\n"
                    "import planbook\n%load_ext planbook\n"
                    "tb = planbook.Toolbox()\n"
                    "@tb.tool\ndef add(a: int, b: int) -> int:\n    'Add two numbers.'\n    return a + b\n")
        out = _ok(kernel, "%%plan sums --planner llm --model tiny --tools tb\nAdd one and one")
        assert len(server.requests) == 2
    lines = out.splitlines()
    assert lines[0].startswith("Planned by tiny in 2 model calls (") and "prompt +" in lines[0]
    assert lines[1].startswith("  attempt 1: sent back: ") and "add_numbers" in lines[1]
    assert lines[2] == "  attempt 2: accepted"
    assert KEY not in out
    usage = _ok(kernel, "r = %run_plan sums --no-view\nprint(r.ok, r.usage.calls, r.usage.total_tokens > 0)\n"
                        "r2 = %run_plan sums --no-view --restart\nprint(r2.usage.calls)")
    assert usage.split() == ["True", "2", "True", "0"]  # the plan's first run counts the calls that made it


def test_the_planning_summary_says_why_an_attempt_failed() -> None:
    text = format_planning([{"model": "m", "attempt": 1, "prompt_tokens": 10, "completion_tokens": 0,
                             "error": "the server answered HTTP 500"}])
    assert text == ("Planned by m in 1 model call (10 prompt + 0 completion tokens):\n"
                    "  attempt 1: the call failed: the server answered HTTP 500")
    assert format_planning([]) == ""


def test_an_agents_pane_lists_its_model_calls() -> None:
    from planbook.llm import LLMAgent
    from planbook.views.panes import PaneBudget, pane

    box = Toolbox()

    @box.tool
    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    with FakeOpenAIServer([Reply.tool_call("word_count", {"text": "a b c"}), Reply.finish("three words")],
                          api_key=KEY) as server:
        writer = LLMAgent("writer", "writes", tools=box, model="agent-model", base_url=server.base_url, api_key=KEY)
        result = planbook.run(planbook.Plan(steps=[planbook.Step(id="w", agent="writer", task="count")]),
                              tools=Toolbox(), agents=[writer])
    assert result.ok, result.error
    step = result.plan.step("w")
    notes = step.notes.splitlines()
    assert notes[0] == "2 model calls; tools: word_count"
    assert notes[1].startswith("  call 1: ") and notes[1].endswith("→ word_count")
    assert notes[2].startswith("  call 2: ") and notes[2].endswith("→ finish")
    calls = [e.data for e in result.events if e.kind == "llm.call"]
    assert f"{calls[0]['prompt_tokens']} prompt + {calls[0]['completion_tokens']} completion tokens" in notes[1]
    assert pane(step, {}, origin=None, budget=PaneBudget())["notes"] == step.notes
    json.dumps(pane(step, {}, origin=None, budget=PaneBudget()))


def test_a_planner_of_its_own_with_a_calls_attribute_is_not_read_as_a_model(ip: Any, capsys: Any) -> None:
    """Notebook 02's lesson planner keeps ``calls`` (tuples): only an LLMPlanner's log is read."""
    from planbook import ScriptedPlanner

    planner = ScriptedPlanner({None: [{"id": "1", "tool": "echo", "args": {"text": "hi"}}]})
    planner.calls = [("goal", 0)]  # type: ignore[attr-defined]
    tools = Toolbox()

    @tools.tool
    def echo(text: str) -> str:
        """Return the text."""
        return text

    ip.run_line_magic("load_ext", "planbook")
    ip.user_ns.update(own_planner=planner, own_tools=tools)
    ip.run_cell_magic("plan", "own --planner own_planner --tools own_tools", "Say hi")
    assert "Planned by" not in capsys.readouterr().out and ip.user_ns["own"].steps[0].id == "1"
