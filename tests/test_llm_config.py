"""Configuration of the model layer: arguments win over the environment; no secret is shown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from planbook.llm import DEFAULT_MODEL, LLMAgent, LLMConfigError, LLMPlanner, resolve_config
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
