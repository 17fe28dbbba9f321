"""The model layer under bad input: short keys, odd tool-call arguments, answers that are
not chat completions, and tools that call ``sys.exit``. Every case through the real
``openai`` client against the scripted FakeOpenAIServer on 127.0.0.1."""

from __future__ import annotations

import json
import sys

import pytest

import planbook
from planbook import PlanningError, ScriptedAgent, Toolbox
from planbook.llm import Cassette, LLMAgent, LLMPlanner
from planbook.testing import Reply

KEY = "sk-test-hardening-0123456789-secret"


@pytest.fixture
def box():
    tools = Toolbox()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tools.tool
    def leave(code: int = 3) -> str:
        """Ends the process (a badly written tool)."""
        sys.exit(code)

    return tools


def writer() -> ScriptedAgent:
    return ScriptedAgent("writer", default="a summary", description="writes short summaries")


def completion(message: dict, *, finish_reason: str = "tool_calls", usage: dict | None = None) -> dict:
    """A chat completion written by hand (what an odd server sends)."""
    body = {"id": "chatcmpl-odd", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None, **message},
                         "finish_reason": finish_reason}]}
    if usage is not None:
        body["usage"] = usage
    return body


def object_call(name: str, arguments: object, call_id: str = "call_1") -> dict:
    """A tool call whose ``arguments`` is sent as it is (an object, a number, ...), not as a JSON string."""
    return {"tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


PLAN = [
    {"id": "1", "task": "add the numbers", "tool": "add", "args": {"a": 1, "b": 2}},
    {"id": "2", "task": "say the sum", "agent": "writer", "needs": ["1"], "expect": "a short text"},
]


def make_plan(server, box, **kwargs):
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("max_attempts", 2)
    planner = LLMPlanner("test-model", base_url=server.base_url, **kwargs)
    return planbook.make_plan("add one and two", planner, tools=box, agents=[writer()])


# ------------------------------------------------------------------ redaction
@pytest.mark.parametrize("key", ["k", "EMPTY", "ollama", "none", "sk"])
def test_a_short_key_never_garbles_the_answer(server, box, key):
    server.add(Reply.plan(PLAN))
    plan = make_plan(server, box, api_key=key)
    assert [(s.id, s.task, s.tool, s.args, s.needs, s.expect) for s in plan.steps] == [
        ("1", "add the numbers", "add", {"a": 1, "b": 2}, [], ""),
        ("2", "say the sum", None, {}, ["1"], "a short text"),
    ]


def test_a_short_key_does_not_garble_a_recording_and_it_replays(server, box, tmp_path):
    path = tmp_path / "c.json"
    server.add(Reply.plan(PLAN))
    planner = LLMPlanner("ollama-small", base_url=server.base_url, api_key="ollama", cassette=Cassette(path, mode="record"))
    recorded = planbook.make_plan("add one and two", planner, tools=box, agents=[writer()])
    data = json.loads(path.read_text())
    assert "***" not in path.read_text() and data["models"] == ["ollama-small"]
    replayed = planbook.make_plan("add one and two", LLMPlanner(cassette=path), tools=box, agents=[writer()])
    assert [s.task for s in replayed.steps] == [s.task for s in recorded.steps] == ["add the numbers", "say the sum"]


def test_a_long_key_echoed_by_the_model_is_kept_out_of_errors_but_the_answer_is_read_whole(server, box):
    echoed = [dict(PLAN[0], task=f"add with key {KEY}")]
    server.add(Reply.text(f"first, my key is {KEY}"), Reply.plan(echoed))
    plan = make_plan(server, box)
    assert plan.steps[0].task == f"add with key {KEY}"  # what the model wrote is what was parsed
    server.reset([Reply.text(f"my key is {KEY}")])
    with pytest.raises(PlanningError) as caught:
        make_plan(server, box, max_attempts=1)
    shown = str(caught.value) + json.dumps(caught.value.attempts)
    assert KEY not in shown and "my key is ***" in shown


def test_an_agent_answer_that_echoes_the_key_is_redacted_in_the_output(server):
    server.add(Reply.finish(f"the key is {KEY}"))
    agent = LLMAgent("writer", "writes", model="m", base_url=server.base_url, api_key=KEY)
    result = planbook.run(planbook.Plan(steps=[planbook.Step(id="1", agent="writer", task="t")]), agents=[agent])
    assert result.outputs == {"1": "the key is ***"}


# ------------------------------------------------- tool-call arguments as an object
def test_the_planner_accepts_plan_arguments_sent_as_an_object(server, box):
    server.add(Reply.raw_body(completion(object_call("submit_plan", {"steps": PLAN}))))
    plan = make_plan(server, box)
    assert [s.id for s in plan.steps] == ["1", "2"] and plan.steps[0].args == {"a": 1, "b": 2}


@pytest.mark.parametrize("arguments, problem", [
    (["not", "an", "object"], "must be a JSON object"),
    (42, "must be a JSON object"),
    (None, "not valid JSON"),
])
def test_other_plan_arguments_are_fed_back_to_the_model(server, box, arguments, problem):
    server.add(Reply.raw_body(completion(object_call("submit_plan", arguments))), Reply.plan(PLAN))
    plan = make_plan(server, box)
    assert [s.id for s in plan.steps] == ["1", "2"]
    feedback = server.requests[1].messages[-1]
    assert feedback["role"] == "tool" and feedback["tool_call_id"] == "call_1" and problem in feedback["content"]
    sent_back = server.requests[1].messages[-2]["tool_calls"][0]["function"]["arguments"]
    assert isinstance(sent_back, str)  # the conversation stays valid for the next request


def test_the_agent_accepts_tool_and_finish_arguments_sent_as_objects(server, box):
    server.add(
        Reply.raw_body(completion(object_call("add", {"a": 2, "b": 3}))),
        Reply.raw_body(completion(object_call("add", [2, 3], "call_2"))),
        Reply.raw_body(completion(object_call("finish", {"status": "success", "answer": "5"}, "call_3"))),
    )
    agent = LLMAgent("calc", "adds", tools=box, model="m", base_url=server.base_url, api_key=KEY)
    result = planbook.run(planbook.Plan(steps=[planbook.Step(id="1", agent="calc", task="add 2 and 3")]), agents=[agent])
    assert result.status == "completed", result.error
    assert result.outputs == {"1": "5"}
    assert server.requests[1].messages[-1]["content"] == "5"
    assert "must be a JSON object, got list" in server.requests[2].messages[-1]["content"]


# ------------------------------------------------------- SystemExit in a tool
def test_a_tool_that_calls_sys_exit_is_a_tool_error_the_model_reads(server, box):
    server.add(Reply.tool_call("leave", {"code": 3}), Reply.finish("the tool ended the process; reported", status="failure"))
    agent = LLMAgent("calc", "adds", tools=box, model="m", base_url=server.base_url, api_key=KEY)
    result = planbook.run(planbook.Plan(steps=[planbook.Step(id="1", agent="calc", task="t")]), agents=[agent],
                          on_failure="skip")
    assert len(server.requests) == 2
    assert server.requests[1].messages[-1]["content"] == "error: SystemExit: 3"
    assert "reported failure" in result.history[-1].error or "reported failure" in (result.history[-1].notes or "")


# ------------------------------------------------- answers that are not chat completions
GOOD_MESSAGE = {"content": "hi"}
NOT_COMPLETIONS = {
    "html": (Reply.raw_body("<!DOCTYPE html><html><body>Welcome to nginx!</body></html>", content_type="text/html"),
             "an HTML page (it starts '<!DOCTYPE html><html><body>Welcome to nginx!"),
    "sse": (Reply.raw_body('data: {"object": "chat.completion.chunk", "choices": []}\n\ndata: [DONE]\n\n',
                           content_type="text/event-stream"), "a stream of server-sent events"),
    "list": (Reply.raw_body([{"choices": []}]), "a JSON list ([{\"choices\": []}]), not a chat completion"),
    "string": (Reply.raw_body('"hello there"'), "a JSON string (\"hello there\"), not a chat completion"),
    "plain_text": (Reply.raw_body("hello there", content_type="text/plain"), "text/plain text (Expecting value"),
    "empty": (Reply.raw_body(b""), "an empty body"),
    "truncated": (Reply.raw_body('{"id": "chatcmpl-1", "choices": [{"message": {"content": "hel'),
                  "JSON that stops early after 61 bytes"),
    "no_choices": (Reply.raw_body({"id": "x", "object": "chat.completion"}), "a JSON object without 'choices'"),
    "empty_choices": (Reply.raw_body({"choices": []}), "an empty 'choices' list"),
    "error_200": (Reply.raw_body({"error": {"message": "model is loading"}}), "an error object (\"model is loading\")"),
    "tokens_as_words": (Reply.raw_body(completion(GOOD_MESSAGE, finish_reason="stop",
                                                  usage={"prompt_tokens": "twelve", "completion_tokens": 3})),
                        "a chat completion whose 'usage.prompt_tokens' is \"twelve\", not a number of tokens"),
    "message_missing": (Reply.raw_body({"choices": [{"text": "hi"}]}), "an object whose 'choices[0].message' is missing"),
}


@pytest.mark.parametrize("case", sorted(NOT_COMPLETIONS))
def test_an_answer_that_is_not_a_chat_completion_is_one_clear_error(server, box, case):
    reply, what = NOT_COMPLETIONS[case]
    server.add(reply)
    url = server.base_url.replace("http://", "http://user:pw-0123456789@")
    planner = LLMPlanner("m", base_url=url, max_attempts=3)
    result = planbook.run("add one and two", planner=planner, tools=box, agents=[writer()])
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert len(server.requests) == 1  # one error, no retry, no second attempt
    port = server.base_url.split(":")[2].split("/")[0]
    assert f"the model server at http://***@127.0.0.1:{port}/v1/chat/completions answered HTTP 200 with {what}" \
        in result.error, result.error
    assert "pw-0123456789" not in result.error
    (call,) = [e for e in result.events if e.kind == "llm.call"]
    assert call.data["error"] in result.error


def test_an_agent_reports_an_answer_that_is_not_a_chat_completion_as_its_failure(server):
    server.add(Reply.raw_body("<html>login page</html>", content_type="text/html"))
    agent = LLMAgent("writer", "writes", model="m", base_url=server.base_url, api_key=KEY)
    result = planbook.run(planbook.Plan(steps=[planbook.Step(id="1", agent="writer", task="t")]), agents=[agent])
    assert result.status == "failed" and "answered HTTP 200 with an HTML page" in result.error


def test_token_counts_sent_as_digits_are_read(server, box):
    body = completion(object_call("submit_plan", {"steps": PLAN}), usage={"prompt_tokens": "12", "completion_tokens": 3.0})
    server.add(Reply.raw_body(body))
    planner = LLMPlanner("m", base_url=server.base_url, api_key=KEY)
    planbook.make_plan("g", planner, tools=box, agents=[writer()])
    assert (planner.calls[0]["prompt_tokens"], planner.calls[0]["completion_tokens"]) == (12, 3)


def test_a_429_that_asks_to_wait_an_hour_says_it_was_not_retried(server, box):
    from openai import _base_client

    if not hasattr(_base_client, "MAX_RETRY_AFTER_DELAY"):  # older SDKs retry anyway, with their own backoff
        server.add(*[Reply.http_error(429, "rate limited", headers={"retry-after": "3600"}, retry_after_ms=None)] * 2)
        with pytest.raises(PlanningError, match=r"HTTP 429 \(rate limited\) after 1 retry$"):
            make_plan(server, box, max_retries=1)
        assert len(server.requests) == 2  # the message says what the SDK did
        return
    server.add(Reply.http_error(429, "rate limited", headers={"retry-after": "3600"}, retry_after_ms=None))
    with pytest.raises(PlanningError) as caught:
        make_plan(server, box)
    message = str(caught.value)
    assert len(server.requests) == 1
    assert "HTTP 429 (rate limited) and was not retried: the server asked to wait 3600 s (retry-after: 3600)" in message
    assert "retries" not in message


def test_the_retries_a_message_counts_are_the_retries_made(server, box):
    server.add(Reply.http_error(503, "busy"), Reply.http_error(503, "still busy"))
    with pytest.raises(PlanningError, match=r"HTTP 503 \(still busy\) after 1 retry$"):
        make_plan(server, box, max_retries=1)
    server.reset([Reply.http_error(500, "broken", headers={"x-should-retry": "false"})])
    with pytest.raises(PlanningError, match=r"HTTP 500 \(broken\) and was not retried: the server said not to"):
        make_plan(server, box)
    server.reset([Reply.http_error(502, "gateway")])
    with pytest.raises(PlanningError, match=r"HTTP 502 \(gateway\) and was not retried \(max_retries=0\)"):
        make_plan(server, box, max_retries=0)
