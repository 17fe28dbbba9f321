"""Configuration of the model layer: arguments win over the environment; no secret is shown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from planbook import LLMConfigError
from planbook.llm import DEFAULT_MODEL, LLMAgent, LLMPlanner, resolve_config
from planbook.testing import FakeOpenAIServer, Reply
from planbook.testing.helpers import MODEL_ENV, model_env_removed

KEY = "sk-test-config-777-secret"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)


def test_explicit_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.example/v1")
    monkeypatch.setenv("PLANBOOK_MODEL", "env-model")
    assert resolve_config() == resolve_config("env-model", api_key="env-key", base_url="http://env.example/v1")
    config = resolve_config("arg-model", api_key="arg-key", base_url="http://arg.example/v1")
    assert (config.model, config.api_key, config.base_url) == ("arg-model", "arg-key", "http://arg.example/v1")


def test_the_default_model_and_a_repr_without_the_key():
    config = resolve_config(api_key=KEY)
    assert config.model == DEFAULT_MODEL and KEY not in repr(config)
    assert KEY not in repr(LLMPlanner(api_key=KEY))


@pytest.mark.parametrize("make", [lambda: LLMPlanner(), lambda: LLMAgent("a", "b")])
def test_no_key_no_server_no_cassette_says_how_to_set_one_up(make):
    with pytest.raises(LLMConfigError) as caught:
        make()
    message = str(caught.value)
    for word in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PLANBOOK_MODEL", "cassette"):
        assert word in message


def test_a_local_server_needs_no_key_and_gets_a_placeholder():
    with FakeOpenAIServer([Reply.plan([{"id": "1", "agent": "x", "task": "t"}])]) as server:
        planner = LLMPlanner("local-model", base_url=server.base_url)
        from planbook import PlanningContext

        planner.set_context(PlanningContext(tools={}, agents={"x": object()}, plan=None))
        assert [s.id for s in planner("g", [], None)] == ["1"]
    assert server.requests[0].headers["authorization"] == "Bearer no-key-needed"
    assert server.requests[0].body["model"] == "local-model"


def test_environment_configuration_is_used(monkeypatch):
    with FakeOpenAIServer([Reply.plan([{"id": "1", "agent": "x", "task": "t"}])]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("PLANBOOK_MODEL", "env-model")
        planner = LLMPlanner()
        from planbook import PlanningContext

        planner.set_context(PlanningContext(tools={}, agents={"x": object()}, plan=None))
        planner("g", [], None)
    assert server.requests[0].body["model"] == "env-model"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_model_env_removed_hides_and_restores(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    import os

    with model_env_removed():
        assert "OPENAI_API_KEY" not in os.environ
    assert os.environ["OPENAI_API_KEY"] == KEY


def test_importing_planbook_does_not_import_openai():
    code = (
        "import sys, planbook, planbook.llm, planbook.testing\n"
        "planner = planbook.LLMPlanner('m', api_key='k')\n"  # constructing needs no SDK either
        "assert 'openai' not in sys.modules and 'httpx2' not in sys.modules, sorted(m for m in sys.modules if 'openai' in m)\n"
        "planner.llm.openai_client()\n"
        "assert 'openai' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_your_own_openai_client_can_be_passed_in():
    with FakeOpenAIServer([Reply.plan([{"id": "1", "agent": "x", "task": "t"}])]) as server:
        planner = LLMPlanner("own-model", client=server.client(api_key="own-key"))
        from planbook import PlanningContext

        planner.set_context(PlanningContext(tools={}, agents={"x": object()}, plan=None))
        assert [s.id for s in planner("g", [], None)] == ["1"]
    assert server.requests[0].headers["authorization"] == "Bearer own-key"
    with pytest.raises(ValueError, match="not both"):
        LLMPlanner(client=object(), cassette="c.json")


SECRET_URL = "http://user:s3cretpw@127.0.0.1:9/v1?token=abc123xyz"


def test_credentials_in_the_base_url_are_masked_where_it_is_shown():
    from planbook.outbound.redact import redact_url

    assert redact_url(SECRET_URL) == "http://***@127.0.0.1:9/v1?token=***"
    assert redact_url("https://h.example:8443/v1?a=1&key=k%2Fx&flag#frag") == "https://h.example:8443/v1?a=***&key=***&flag#***"
    assert redact_url("http://localhost:11434/v1") == "http://localhost:11434/v1"  # nothing to hide: unchanged
    config = resolve_config(base_url=SECRET_URL, api_key=KEY)
    assert {"s3cretpw", "user:s3cretpw", "abc123xyz", KEY} <= set(config.secrets())
    assert "s3cretpw" not in repr(config) and "abc123xyz" not in repr(config) and KEY not in repr(config)
    short = resolve_config(base_url="http://127.0.0.1:9/v1?v=1&token=ollama", api_key="EMPTY")
    assert short.secrets() == []  # too short to hunt for in text: it would garble every "1", "ollama" or "EMPTY"


def test_a_connection_error_shows_neither_the_password_nor_the_token_of_the_url():
    import json

    import planbook

    planner = LLMPlanner("m", base_url=SECRET_URL, api_key=KEY, max_retries=0, timeout=5)
    assert "s3cretpw" not in repr(planner.llm.config)
    result = planbook.run("say hi", planner=planner, tools=planbook.Toolbox())
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert "could not connect to the model server at http://***@127.0.0.1:9/v1?token=***" in result.error
    (event,) = [e for e in result.events if e.kind == "llm.call"]
    shown = result.error + json.dumps([e.model_dump() for e in result.events], default=repr) + str(result)
    assert "http://***@127.0.0.1:9" in event.data["error"]
    for secret in ("s3cretpw", "abc123xyz", KEY):
        assert secret not in shown


def test_url_credentials_echoed_by_the_server_are_redacted(tmp_path):
    import json

    import planbook
    from planbook.llm import Cassette

    with FakeOpenAIServer([Reply.text("I was called with the password s3cretpw")]) as server:
        url = server.base_url.replace("http://", "http://user:s3cretpw@")
        path = tmp_path / "c.json"
        planner = LLMPlanner("m", base_url=url, cassette=Cassette(path, mode="record"), max_attempts=1)
        with pytest.raises(planbook.PlanningError) as caught:
            planner("g", [], None)
        assert server.requests[0].path == "/v1/chat/completions"
    # a server that echoes the URL it was asked for (openai 3 even moves the query into the path)
    with FakeOpenAIServer([lambda request: Reply.http_error(404, f"unknown route {request.path}")], strict=False) as echo:
        tokened = LLMPlanner("m", base_url=echo.base_url + "?token=abc123xyz", max_attempts=1, max_retries=0)
        with pytest.raises(planbook.PlanningError) as not_found:
            tokened("g", [], None)
    assert "the password ***" in json.dumps(caught.value.attempts)
    assert "token=***" in str(not_found.value) and "HTTP 404" in str(not_found.value)
    shown = str(caught.value) + json.dumps(caught.value.attempts) + path.read_text() + str(not_found.value)
    assert "s3cretpw" not in shown and "abc123xyz" not in shown


def test_model_env_lists_every_variable_that_selects_a_model_or_an_endpoint(monkeypatch):
    import os

    wanted = {"OPENAI_API_KEY", "OPENAI_BASE_URL", "PLANBOOK_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
              "OPENAI_ORGANIZATION", "OPENAI_PROJECT", "PLANBOOK_CASSETTE_MODE"}
    assert set(MODEL_ENV) == wanted
    for name in wanted:
        monkeypatch.setenv(name, "set-by-the-user")
    with model_env_removed():
        assert not wanted & set(os.environ)
    assert all(os.environ[name] == "set-by-the-user" for name in wanted)


def test_shared_helpers_have_one_definition():
    import planbook.testing.fake_server as fake_server
    from planbook.llm import cassette, estimate_tokens, prompts
    from planbook.llm.client import UsesModel

    assert fake_server.estimate_tokens is estimate_tokens
    assert "FAKE_SERVER_HEADER" not in vars(fake_server) or fake_server.FAKE_SERVER_HEADER is cassette.FAKE_SERVER_HEADER
    assert cassette.FAKE_SERVER_HEADER in cassette.KEPT_HEADERS
    assert not hasattr(cassette, "_short") and prompts.shorten.__module__ == "planbook.llm.text"
    for name in ("close", "__enter__", "__exit__"):
        assert getattr(LLMPlanner, name) is getattr(LLMAgent, name) is getattr(UsesModel, name)


def test_the_http_client_comes_from_the_sdk(tmp_path):
    import openai

    from planbook.llm.sdk import http_module

    with FakeOpenAIServer([]) as server:
        planner = LLMPlanner("m", base_url=server.base_url)
        client = planner.llm.openai_client()
        http = http_module()
        assert isinstance(client._client, openai.DefaultHttpxClient) and isinstance(client._client, http.Client)
        assert http.__name__ == next(c.__module__ for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
        with planner:  # UsesModel: leaving the block closes the connections
            pass
        assert client._client.is_closed
