"""Cassettes under bad input: damaged files, one path shared by a planner and an agent,
streams, what a replay matches on, and credentials that JSON escapes."""

from __future__ import annotations

import json

import openai
import pytest

import planbook
from planbook import CassetteMismatch, LLMConfigError, ScriptedAgent, Toolbox
from planbook.llm import Cassette, LLMAgent, LLMPlanner
from planbook.llm.sdk import http_module
from planbook.testing import FakeOpenAIServer, Reply

KEY = "sk-test-cassette-hardening-secret"
STEPS = [{"id": "1", "tool": "add", "args": {"a": 1, "b": 2}}, {"id": "2", "agent": "writer", "task": "say it", "needs": ["1"]}]
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def box():
    tools = Toolbox()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return tools


def interaction(**response) -> dict:
    return {"request": {"method": "POST", "path": "/v1/chat/completions", "body": dict(ASK)},
            "response": {"status": 200, "headers": {}, "body": {"choices": []}, **response}}


def cassette_file(**response) -> str:
    return json.dumps({"planbook_cassette": 1, "interactions": [interaction(**response)]}, indent=2)


GOOD = cassette_file()
LINES = GOOD.splitlines()
STATUS_LINE = next(n for n, line in enumerate(LINES, 1) if '"status": 200' in line)
CONFLICTED = "\n".join(LINES[: STATUS_LINE - 1] + ["<<<<<<< HEAD", LINES[STATUS_LINE - 1], "=======",
                                                   LINES[STATUS_LINE - 1].replace("200", "201"), ">>>>>>> theirs"]
                       + LINES[STATUS_LINE:])
DAMAGED = {
    "truncated": (GOOD[: len(GOOD) // 2].encode(), "it stops early (cut off after"),
    "conflict_markers": (CONFLICTED.encode(), f"merge conflict markers (line {STATUS_LINE}: '<<<<<<< HEAD')"),
    "comment": (GOOD.replace('"status": 200,', '"status": 200, // was 201').encode(),
                f"it is not valid JSON (line {STATUS_LINE}, column"),
    "not_an_object": (b"[]", "it is a JSON list, not a planbook cassette (an object with 'interactions')"),
    "no_interactions": (b'{"recorded_from": "x"}', "it has no 'interactions'"),
    "interactions_not_a_list": (b'{"interactions": {}}', "'interactions' is a JSON object, not a list"),
    "no_response": (json.dumps({"interactions": [{"request": interaction()["request"]}]}).encode(),
                    "interaction #1: 'response' is missing"),
    "status_as_text": (cassette_file(status="200").encode(), "interaction #1: 'response.status' is \"200\", not an HTTP status"),
    "body_a_list": (json.dumps({"interactions": [dict(interaction(), request={"method": "POST", "path": "/v1/chat/completions",
                                                                            "body": [1]})]}).encode(),
                    "interaction #1: 'request.body' is a JSON list, not an object"),
    "headers_a_list": (cassette_file(headers=["x"]).encode(), "interaction #1: 'response.headers' is a JSON list"),
    "no_body": (json.dumps({"interactions": [{"request": interaction()["request"], "response": {"status": 200}}]}).encode(),
                "interaction #1: 'response' has neither 'body' nor 'text'"),
    "latin_1": (GOOD.replace('"hi"', '"h\u00e9"').encode("latin-1"), "it is not UTF-8 text (byte 0xe9 at position"),
    "utf_16": (GOOD.encode("utf-16"), "it is UTF-16 text, not UTF-8"),
    "streamed": (json.dumps({"interactions": [dict(interaction(), request={"method": "POST", "path": "/v1/chat/completions",
                                                                         "body": dict(ASK, stream=True)})]}).encode(),
                 "interaction #1 is a streamed answer (stream=true), which cassettes do not replay"),
    "newer_format": (json.dumps({"planbook_cassette": 99, "interactions": []}).encode(), "format 99"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_cassette_is_one_error_at_load_naming_the_file_and_the_problem(tmp_path, case):
    data, problem = DAMAGED[case]
    path = tmp_path / "damaged.json"
    path.write_bytes(data)
    with pytest.raises(LLMConfigError) as caught:
        LLMPlanner(cassette=path)  # replay (the file exists): loaded now, not at the first call
    message = str(caught.value)
    assert message.startswith(f"cassette {str(path)!r} cannot be replayed: ") and problem in message, message
    assert "re-record it" in message
    with pytest.raises(LLMConfigError, match="cannot be replayed"):
        LLMAgent("a", "b", cassette=Cassette(path, mode="replay"))


def test_a_utf8_bom_from_an_editor_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert LLMPlanner(cassette=path).llm.mode == "replay"


def run_once(box, cassette, **kwargs):
    planner = LLMPlanner("cassette-model", cassette=cassette, **kwargs)
    writer = LLMAgent("writer", "writes", model="cassette-model", cassette=cassette, **kwargs)
    return planbook.run("add one and two", planner=planner, tools=box, agents=[writer])


def test_a_planner_and_an_agent_given_one_path_share_one_cassette(server, box, tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    server.add(Reply.plan(STEPS), Reply.finish("one and two make 3"))
    monkeypatch.setenv("PLANBOOK_CASSETTE_MODE", "record")
    recorded = run_once(box, str(path), base_url=server.base_url, api_key=KEY)
    assert recorded.status == "completed", recorded.error
    data = json.loads(path.read_text())
    assert [i["response"]["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"]
            for i in data["interactions"]] == ["submit_plan", "finish"]  # both survive
    monkeypatch.delenv("PLANBOOK_CASSETTE_MODE")
    server.reset()
    replayed = run_once(box, path)
    assert replayed.status == "completed" and replayed.outputs == recorded.outputs and server.requests == []
    again = run_once(box, path)  # a new planner and agent (a cell run again) replay from the start
    assert again.status == "completed", again.error


def test_an_older_recorder_of_a_path_refuses_to_overwrite_a_newer_one(server, tmp_path):
    path = tmp_path / "c.json"
    server.add(Reply.text("first"), Reply.text("second"))
    first = LLMPlanner("m", base_url=server.base_url, api_key=KEY, cassette=Cassette(path, mode="record"), max_attempts=1)
    with pytest.raises(planbook.PlanningError):
        first("g", [], None)  # a text answer: no plan, but recorded
    second = LLMAgent("w", "writes", model="m", base_url=server.base_url, api_key=KEY, cassette=Cassette(path, mode="record"))
    assert second.llm.cassette is not first.llm.cassette
    with pytest.raises(LLMConfigError, match="is now recorded by a newer Cassette for the same file"):
        first("g", [], None)
    assert len(server.requests) == 1  # refused before anything was sent


def recorder(cassette):
    http = http_module()
    return http.Client(transport=cassette.transport(inner=http.HTTPTransport(), secrets=[KEY]))


def replayer(path):
    http = http_module()
    cassette = Cassette(path, mode="replay")
    cassette.resolve(live=False)
    return http.Client(transport=cassette.transport())


def cause(error: BaseException) -> BaseException:
    return error.__cause__ if isinstance(error, openai.APIConnectionError) and error.__cause__ else error


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_stream_true_is_refused_clearly(server, tmp_path, mode):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"interactions": []}))
    cassette = Cassette(path, mode=mode)
    cassette.resolve(live=True)
    http_client = recorder(cassette) if mode == "record" else replayer(path)
    with http_client, openai.OpenAI(api_key="x", base_url=server.base_url, max_retries=0, http_client=http_client) as sdk:
        with pytest.raises(Exception) as caught:
            sdk.chat.completions.create(**ASK, stream=True)
    assert isinstance(cause(caught.value), LLMConfigError)
    assert "stream=True" in str(cause(caught.value)) and "not streamed" in str(cause(caught.value))
    assert server.requests == []


@pytest.mark.parametrize("field, recorded, sent", [
    ("seed", 1, 2), ("n", 1, 2), ("max_tokens", 10, 20), ("max_completion_tokens", 10, 20), ("stream", False, None),
])
def test_a_replay_matches_on_seed_n_token_limits_and_stream(server, tmp_path, field, recorded, sent):
    path = tmp_path / "c.json"
    server.add(Reply.text("recorded"))
    cassette = Cassette(path, mode="record")
    cassette.resolve(live=True)
    with recorder(cassette) as http_client, openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0,
                                                          http_client=http_client) as sdk:
        sdk.chat.completions.create(**ASK, **{field: recorded})
    with replayer(path) as http_client, openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", max_retries=0,
                                                      http_client=http_client) as sdk:
        with pytest.raises(Exception) as caught:
            sdk.chat.completions.create(**ASK, **({} if sent is None else {field: sent}))
    mismatch = cause(caught.value)
    assert isinstance(mismatch, CassetteMismatch) and f"{field}: recorded {json.dumps(recorded)}" in str(mismatch)


def test_a_replay_matches_on_the_endpoint_but_not_on_the_base_path(server, tmp_path):
    path = tmp_path / "c.json"
    server.add(Reply.text("recorded"))
    cassette = Cassette(path, mode="record")
    cassette.resolve(live=True)
    with recorder(cassette) as http_client, openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0,
                                                          http_client=http_client) as sdk:
        sdk.chat.completions.create(**ASK)
    with replayer(path) as http_client:  # the same body to another endpoint
        with pytest.raises(CassetteMismatch, match="endpoint: recorded /chat/completions, sent /completions"):
            http_client.post("http://127.0.0.1:9/v1/completions", json=ASK)
    # a server mounted elsewhere replays the same endpoint (Binder has no OPENAI_BASE_URL)
    with replayer(path) as http_client, openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/api/openai/v1",
                                                      max_retries=0, http_client=http_client) as sdk:
        assert sdk.chat.completions.create(**ASK).choices[0].message.content == "recorded"


def test_url_credentials_that_json_escapes_are_not_written_to_a_cassette(tmp_path):
    password = 'p\u00e4ss"w\\\u00f6rd-\u00df\u00fc\u00df'
    encoded = "p%C3%A4ss%22w%5C%C3%B6rd-%C3%9F%C3%BC%C3%9F"
    with FakeOpenAIServer([Reply.text(f"you logged in with {password}")]) as server:
        url = server.base_url.replace("http://", f"http://user:{encoded}@")
        path = tmp_path / "c.json"
        planner = LLMPlanner("m", base_url=url, cassette=Cassette(path, mode="record"), max_attempts=1)
        with pytest.raises(planbook.PlanningError):
            planner("g", [], None)
    text = path.read_text(encoding="utf-8")
    for form in (password, json.dumps(password), json.dumps(password, ensure_ascii=False), encoded):
        assert form.strip('"') not in text
    assert "you logged in with ***" in text


def test_an_agent_created_after_the_planner_recorded_is_refused_rather_than_overwrite_it(server, box, tmp_path,
                                                                                         monkeypatch):
    path = tmp_path / "c.json"
    server.add(Reply.plan(STEPS), Reply.finish("one and two make 3"))
    monkeypatch.setenv("PLANBOOK_CASSETTE_MODE", "record")
    planner = LLMPlanner("cassette-model", base_url=server.base_url, api_key=KEY, cassette=path)
    plan = planbook.make_plan("add one and two", planner, tools=box, agents={"writer": ScriptedAgent("writer")})
    with pytest.raises(LLMConfigError, match=r"is being recorded by a planner or agent created earlier \(1 recording"):
        LLMAgent("writer", "writes", model="cassette-model", base_url=server.base_url, api_key=KEY, cassette=path)
    writer = LLMAgent("writer", "writes", model="cassette-model", base_url=server.base_url, api_key=KEY,
                      cassette=planner.llm.cassette)  # what the message says to do
    assert planbook.run(plan, tools=box, agents=[writer]).status == "completed"
    assert len(json.loads(path.read_text())["interactions"]) == 2  # the plan's recording was not overwritten
    monkeypatch.delenv("PLANBOOK_CASSETTE_MODE")
    assert LLMPlanner(cassette=path).llm.mode == "replay"  # replaying the same file is no conflict
