"""Cassettes: record through the real SDK against the fake server, replay offline."""

from __future__ import annotations

import json

import pytest

import planbook
from planbook import CassetteMismatch, LLMConfigError, Toolbox
from planbook.llm import Cassette, LLMAgent, LLMPlanner
from planbook.testing import Reply

KEY = "sk-test-cassette-55555-secret"
STEPS = [{"id": "1", "tool": "add", "args": {"a": 1, "b": 2}}, {"id": "2", "agent": "writer", "task": "say it", "needs": ["1"]}]


@pytest.fixture
def box():
    tools = Toolbox()

    @tools.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return tools


def run_once(box, cassette, *, base_url=None, api_key=None, goal="add one and two"):
    planner = LLMPlanner("cassette-model", base_url=base_url, api_key=api_key, cassette=cassette)
    writer = LLMAgent("writer", "writes", model="cassette-model", base_url=base_url, api_key=api_key, cassette=cassette)
    return planbook.run(goal, planner=planner, tools=box, agents=[writer])


def script():
    return [Reply.http_error(500), Reply.plan(STEPS), Reply.finish("one and two make 3")]


def summary(result):
    return (result.status, result.outputs, [(e.data["purpose"], e.data["attempt"], e.data["prompt_tokens"])
                                            for e in result.events if e.kind == "llm.call"])


def test_record_then_replay_offline_gives_the_same_run(server, box, tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    server.add(*script())
    recorded = run_once(box, Cassette(path, mode="record"), base_url=server.base_url, api_key=KEY)
    assert recorded.status == "completed", recorded.error
    assert len(server.requests) == 3
    text = path.read_text()
    assert KEY not in text and "authorization" not in text.lower() and "cookie" not in text.lower()
    assert text.startswith('{\n  "interactions": [\n')  # readable: indented
    data = json.loads(text)
    assert data["real_model"] is False and "not a real model" in data["recorded_from"]
    assert data["models"] == ["cassette-model"]
    assert [i["response"]["status"] for i in data["interactions"]] == [500, 200, 200]
    assert set(data["interactions"][0]["request"]["body"]) == {"model", "messages", "tools", "tool_choice"}

    server.reset()  # replay never touches the server: it has no script and would answer 400
    replayed = run_once(box, str(path))  # auto: the file exists and there is no key
    assert summary(replayed) == summary(recorded)
    assert server.requests == []


def test_a_changed_prompt_names_the_cassette_and_the_first_differing_message(server, box, tmp_path):
    path = tmp_path / "c.json"
    server.add(*script())
    run_once(box, Cassette(path, mode="record"), base_url=server.base_url, api_key=KEY)
    result = run_once(box, Cassette(path), goal="add two and three")
    assert result.status == "failed"
    assert str(path) in result.error and "message 2 (user)" in result.error
    assert "Goal: add one and two" in result.error and "Goal: add two and three" in result.error
    cassette = Cassette(path, mode="replay")
    cassette.resolve(live=False)
    with pytest.raises(CassetteMismatch, match="has no recording"):
        cassette._replay({"model": "other-model", "messages": []}, "/chat/completions")


def test_identical_requests_are_replayed_in_order(server, tmp_path):
    import openai

    from planbook.llm.sdk import http_module

    http = http_module()  # httpx2 with openai 3, httpx before
    path = tmp_path / "c.json"
    server.add(Reply.text("first"), Reply.text("second"))
    cassette = Cassette(path, mode="record")
    assert cassette.resolve(live=True) == "record"
    ask = {"model": "m", "messages": [{"role": "user", "content": "same"}]}
    recording = http.Client(transport=cassette.transport(inner=http.HTTPTransport(), secrets=[KEY]))
    with recording, openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0, http_client=recording) as live:
        assert [live.chat.completions.create(**ask).choices[0].message.content for _ in range(2)] == ["first", "second"]
    replay = Cassette(path, mode="replay")
    replay.resolve(live=False)
    replaying = http.Client(transport=replay.transport())
    with replaying, openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", max_retries=0,
                                  http_client=replaying) as offline:
        assert [offline.chat.completions.create(**ask).choices[0].message.content for _ in range(2)] == ["first", "second"]
        with pytest.raises(Exception) as caught:  # openai 3 lets it through; older SDKs wrap it
            offline.chat.completions.create(**ask)
    mismatch = caught.value if isinstance(caught.value, CassetteMismatch) else caught.value.__cause__
    assert isinstance(mismatch, CassetteMismatch) and "all 2 recordings were used" in str(mismatch)


def test_auto_mode(server, tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    with pytest.raises(LLMConfigError, match="does not exist and there is no model") as caught:
        LLMPlanner(cassette=path)
    assert "OPENAI_API_KEY" in str(caught.value)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert Cassette(path).resolve(live=True) == "record"  # no file yet and a key: record
    path.write_text(json.dumps({"interactions": []}))
    assert Cassette(path).resolve(live=True) == "replay"  # a file: replay, whatever keys are set
    assert LLMPlanner(cassette=path).llm.mode == "replay"
    monkeypatch.delenv("OPENAI_API_KEY")
    planner = LLMPlanner(cassette=path)
    assert planner.llm.mode == "replay"
    with pytest.raises(LLMConfigError, match="cannot record"):
        Cassette(path, mode="record").resolve(live=False)
    with pytest.raises(ValueError, match="unknown cassette mode"):
        Cassette(path, mode="play")  # type: ignore[arg-type]


def test_a_shipped_cassette_replays_with_a_key_set_and_is_not_rewritten(server, box, tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    server.add(*script())
    recorded = run_once(box, Cassette(path, mode="record"), base_url=server.base_url, api_key=KEY)
    before = path.read_bytes()
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    replayed = run_once(box, str(path))
    assert summary(replayed) == summary(recorded)
    assert server.requests == [] and path.read_bytes() == before


@pytest.mark.parametrize("chosen, expected", [("record", "record"), ("off", "live"), ("replay", "replay"),
                                              (" Record ", "record")])
def test_planbook_cassette_mode_chooses_the_mode_of_auto_cassettes(tmp_path, monkeypatch, chosen, expected):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"interactions": []}))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("PLANBOOK_CASSETTE_MODE", chosen)
    assert LLMPlanner(cassette=path).llm.mode == expected
    assert LLMPlanner(cassette=Cassette(path, mode="replay")).llm.mode == "replay"  # a mode in code wins


def test_planbook_cassette_mode_errors(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"interactions": []}))
    monkeypatch.setenv("PLANBOOK_CASSETTE_MODE", "live")
    with pytest.raises(LLMConfigError, match="PLANBOOK_CASSETTE_MODE='live' is not a cassette mode"):
        LLMPlanner(cassette=path)
    monkeypatch.setenv("PLANBOOK_CASSETTE_MODE", "off")  # off without a key or server: nothing to call
    with pytest.raises(LLMConfigError, match="no API key, no server"):
        LLMPlanner(cassette=path)
    monkeypatch.setenv("PLANBOOK_CASSETTE_MODE", "record")
    with pytest.raises(LLMConfigError, match="cannot record"):
        LLMPlanner(cassette=path)


def test_a_failed_write_leaves_the_previous_cassette_whole(server, box, tmp_path, monkeypatch):
    import planbook.llm.cassette as cassette_module

    path = tmp_path / "c.json"
    server.add(*script())
    run_once(box, Cassette(path, mode="record"), base_url=server.base_url, api_key=KEY)
    before = path.read_bytes()

    def crash(data, f, **kwargs):
        f.write('{"interactions": [')  # half written, then the process "dies"
        raise OSError("disk full")

    monkeypatch.setattr(cassette_module.json, "dump", crash)
    cassette = Cassette(path)
    cassette.resolve(live=False)
    with pytest.raises(OSError, match="disk full"):
        cassette.save()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]  # no temporary file left behind


def test_mode_off_needs_a_model(tmp_path):
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        LLMPlanner(cassette=Cassette(tmp_path / "c.json", mode="off"), api_key=None, base_url=None)


def test_a_key_echoed_by_the_server_is_not_written(server, tmp_path):
    path = tmp_path / "c.json"
    server.add(Reply.text(f"your key is {KEY}"))
    planner = LLMPlanner("m", base_url=server.base_url, api_key=KEY, cassette=Cassette(path, mode="record"), max_attempts=1)
    with pytest.raises(planbook.PlanningError) as caught:
        planner("g", [], None)
    assert KEY not in path.read_text() and "***" in path.read_text()
    assert "your key is ***" in json.dumps(caught.value.attempts) and KEY not in str(caught.value.attempts)


def test_a_replay_asks_for_the_recorded_model_whatever_planbook_model_says(monkeypatch):
    from pathlib import Path

    cassette = Path(__file__).resolve().parents[2] / "notebooks" / "cassettes" / "04-llm-planner.json"
    monkeypatch.setenv("PLANBOOK_MODEL", "some-other-model")
    planner = LLMPlanner(cassette=str(cassette))
    assert planner.llm.model == "gpt-4o-mini" and planner.llm.mode == "replay"
    assert LLMPlanner("explicit-model", cassette=str(cassette)).llm.model == "explicit-model"  # explicit wins
