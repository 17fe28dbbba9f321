"""Requests to the model and cassette writes are exits with a checkpoint: a secret the process knows,
carried by a replan prompt (a step's result in "executed so far") or echoed by the model's answer,
arrives masked at the (fake) server and in the cassette file; the model's key and the base URL's
credentials are secrets of the process; a cassette recorded so replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planbook
from planbook import Toolbox
from planbook.llm import LLMPlanner
from planbook.llm.cassette import Cassette
from planbook.llm.sdk import mask_body
from planbook.outbound import VAULT
from planbook.testing import FakeOpenAIServer, Reply

KEY = "sk-model-exit-Lp40Qz77Wm12Rt"
SECRET = "canary-model-Vd93Hs26Kx"


def fragments(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def assert_clean(text: str, *secrets: str) -> None:
    leaked = [f for s in secrets for f in fragments(s) if f in text]
    assert not leaked, f"fragments of a secret left the process: {leaked}"


def toolbox() -> Toolbox:
    box = Toolbox()

    @box.tool
    def fetch() -> str:
        """Fetches the deploy token."""
        return f"the deploy token is {SECRET}"

    @box.tool
    def deploy(target: str) -> str:
        """Deploys (the deploy server is down)."""
        raise ConnectionError(f"the deploy server for {target} is unreachable")

    @box.tool
    def report(text: str) -> str:
        """Reports."""
        return f"reported {text}"

    return box


FIRST = [{"id": "f", "tool": "fetch"}, {"id": "d", "tool": "deploy", "args": {"target": "prod"}, "needs": ["f"]}]
#: the model's answer echoes the secret it should not have seen
REPLAN = [{"id": "r", "tool": "report", "args": {"text": f"could not deploy with {SECRET}"}, "needs": ["f"]}]


def planner(server: FakeOpenAIServer, cassette: Cassette) -> LLMPlanner:
    return LLMPlanner("test-model", base_url=server.base_url, api_key=KEY, cassette=cassette, max_attempts=1)


def test_a_secret_a_replan_prompt_carries_arrives_masked_at_the_server_and_in_the_cassette(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    planbook.Secret(SECRET, name="model-exit")  # a secret the process knows
    path = tmp_path / "replan.json"
    server.add(Reply.plan(FIRST), Reply.plan(REPLAN))
    result = planbook.run("deploy the app", planner=planner(server, Cassette(path, mode="record")), tools=toolbox())
    assert result.status == "completed", result.error
    assert result.replans == 1 and len(server.requests) == 2
    replan = server.requests[1].text()
    assert "the deploy token is ***" in replan and "unreachable" in replan  # the prompt still says what happened
    assert_clean(json.dumps([r.body for r in server.requests]), SECRET, KEY)
    recorded = path.read_text(encoding="utf-8")
    assert_clean(recorded, SECRET, KEY)
    assert "could not deploy with ***" in recorded  # the model's answer, masked where it is written
    # the model's key is a secret of the process: any exit hides it
    assert KEY in VAULT

    # recorded masked, replayed masked: the requests match again
    replayed = planbook.run("deploy the app", planner=planner(server, Cassette(path, mode="replay")), tools=toolbox())
    assert replayed.status == "completed", replayed.error
    assert len(server.requests) == 2  # nothing went to the server


def test_a_request_body_keeps_its_json_and_its_tool_schemas_whatever_is_masked() -> None:
    planbook.Secret(SECRET, name="model-exit-body")
    body = {"model": "m", "messages": [{"role": "user", "content": f'say "{SECRET}"\\ and {SECRET}'}],
            "tools": [{"type": "function", "function": {"name": "login", "parameters": {
                "type": "object", "properties": {"token": {"type": "string"}, "password": {"type": "string"}}}}}]}
    raw = json.dumps(body).encode()
    hidden = json.loads(mask_body(raw))
    assert hidden["messages"][0]["content"] == 'say "***"\\ and ***'
    assert hidden["tools"] == body["tools"]  # a schema's argument names are not secrets
    clean = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()
    assert mask_body(clean) is clean  # nothing to hide: the bytes as they were
    assert b"***" in mask_body(f"not json {SECRET}".encode())


def test_the_base_urls_credentials_are_secrets_of_the_process(server: FakeOpenAIServer) -> None:
    password = "canaryUrlPw5Fg82Hj"
    url = server.base_url.replace("http://", f"http://user:{password}@")
    LLMPlanner("test-model", base_url=url, api_key=KEY)
    assert password in VAULT


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANBOOK_CASSETTE_MODE", raising=False)


def test_a_replan_prompt_keeps_its_references_and_tool_schemas_while_the_held_token_is_masked(
        server: FakeOpenAIServer) -> None:
    token = "tok-held-Qm58Zr04Yc"
    box = Toolbox()

    @box.tool
    def login() -> str:
        """Logs in."""
        return token

    @box.tool
    def fetch(token: str, page: int) -> str:
        """Fetches a page (the first is down)."""
        if page == 1:
            raise ConnectionError("page 1 is down")
        return "ok"

    plan = [{"id": "login", "tool": "login"},
            {"id": "f", "tool": "fetch", "args": {"token": "$login", "page": 1}, "needs": ["login"]},
            {"id": "g", "tool": "fetch", "args": {"token": "$login", "page": 2}, "needs": ["f"]}]
    server.add(Reply.plan(plan), Reply.plan([{"id": "g2", "tool": "fetch", "args": {"token": "$login", "page": 2},
                                               "needs": ["login"]}]))
    result = planbook.run("fetch the pages", tools=box,
                          planner=LLMPlanner("test-model", base_url=server.base_url, api_key=KEY, max_attempts=1))
    assert result.status == "completed", result.error
    sent = json.dumps([r.body for r in server.requests])
    replan = server.requests[1].text()
    assert '"token": "$login"' in replan  # a reference names a step: the model keeps it
    assert '"token": {"type": "string"}' in replan  # the tool's schema as it is
    assert_clean(sent, token)
