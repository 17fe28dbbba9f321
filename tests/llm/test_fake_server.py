"""FakeOpenAIServer: a scripted chat-completions server for deterministic tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from planbook.llm import estimate_tokens
from planbook.testing import FakeOpenAIServer, Reply


@pytest.fixture(scope="module")
def module_server():
    with FakeOpenAIServer(strict=False) as server:
        yield server


@pytest.fixture
def server(module_server):
    return module_server.reset()


def test_it_serves_scripted_answers_to_the_real_client_and_records_requests(server):
    server.add(Reply.text("hello"), Reply.tool_call("lookup", {"q": "x"}))
    client = server.client(api_key="k-1")
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    second = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "look"}],
        tools=[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
    )
    assert first.choices[0].message.content == "hello" and first.choices[0].finish_reason == "stop"
    call = second.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("lookup", {"q": "x"})
    assert second.choices[0].finish_reason == "tool_calls"
    assert [r.messages[0]["content"] for r in server.requests] == ["hi", "look"]
    assert server.requests[1].tool_names == ["lookup"] and server.requests[0].headers["authorization"] == "Bearer k-1"
    asked = json.dumps(server.requests[0].messages, sort_keys=True) + json.dumps([], sort_keys=True)
    assert first.usage.prompt_tokens == estimate_tokens(asked) and first.usage.completion_tokens == estimate_tokens("hello")
    assert server.remaining == 0


def test_a_callable_script_item_answers_from_the_request(server):
    server.add(lambda request: Reply.text(f"you said {request.messages[-1]['content']}"))
    answer = server.client().chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
    assert answer.choices[0].message.content == "you said ping"


def test_error_statuses_reach_the_client_with_their_message(server):
    server.add(Reply.http_error(400, "bad request body"))
    with pytest.raises(openai.BadRequestError, match="bad request body"):
        server.client().chat.completions.create(model="m", messages=[])
    server.reset([Reply.http_error(503), Reply.text("back")])
    answer = server.client(max_retries=1).chat.completions.create(model="m", messages=[])
    assert answer.choices[0].message.content == "back" and len(server.requests) == 2


def test_a_slow_answer_times_the_client_out(server):
    server.add(Reply.slow(5))
    with pytest.raises(openai.APITimeoutError):
        server.client(max_retries=0, timeout=0.2).chat.completions.create(model="m", messages=[])


def test_a_required_key_gives_401_to_other_keys(server):
    server.api_key = "right"
    try:
        server.add(Reply.text("ok"))
        with pytest.raises(openai.AuthenticationError):
            server.client(api_key="wrong", max_retries=3).chat.completions.create(model="m", messages=[])
        assert len(server.requests) == 1 and server.remaining == 1  # no retry storm; the script is untouched
        assert server.client(api_key="right").chat.completions.create(model="m", messages=[]).choices[0].message.content == "ok"
    finally:
        server.api_key = None


def test_a_request_beyond_the_script_is_refused_and_reported():
    with pytest.raises(AssertionError, match="beyond its script"):
        with FakeOpenAIServer([Reply.text("only one")]) as server:
            client = server.client(max_retries=2)
            client.chat.completions.create(model="m", messages=[])
            with pytest.raises(openai.BadRequestError, match="no scripted reply left"):
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "more"}])
            assert len(server.requests) == 2  # x-should-retry: false stops the SDK's retries


def test_other_routes(server):
    with urllib.request.urlopen(server.base_url + "/models") as response:
        assert json.load(response)["data"][0]["id"] == "fake-model"
    request = urllib.request.Request(server.base_url + "/embeddings", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    caught.value.close()
    assert caught.value.code == 404


def test_base_url_needs_a_running_server():
    with pytest.raises(RuntimeError, match="not running"):
        FakeOpenAIServer().base_url


def test_the_pytest_plugin_fixture_hides_the_model_environment(fake_openai, monkeypatch):
    import os

    assert "OPENAI_API_KEY" not in os.environ and fake_openai.requests == []
    fake_openai.add(Reply.text("hi"))
    assert fake_openai.client().chat.completions.create(model="m", messages=[]).choices[0].message.content == "hi"


def test_a_scripted_reply_that_raises_answers_500_and_fails_the_test():
    def broken(request):
        raise KeyError("no such message")

    with pytest.raises(AssertionError) as failed:
        with FakeOpenAIServer([broken, Reply.text("the next answer")]) as server:
            with pytest.raises(openai.InternalServerError) as caught:
                server.client(max_retries=2).chat.completions.create(model="m", messages=[])
            assert "scripted reply #1 raised KeyError: 'no such message'" in str(caught.value)
            assert len(server.requests) == 1 and server.remaining == 1  # not retried: the script did not shift
            assert server.errors == ["scripted reply #1 raised KeyError: 'no such message'"]
    assert "scripted reply #1 raised KeyError: 'no such message'" in str(failed.value)
    assert "Traceback" in str(failed.value) and "broken" in str(failed.value)  # where it raised


@pytest.mark.slow
def test_the_pytest_fixture_fails_a_test_whose_scripted_reply_raised(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "conftest.py").write_text('pytest_plugins = ["planbook.testing.pytest_plugin"]\n')
    (tmp_path / "test_it.py").write_text(
        "import openai, pytest\n"
        "def test_it(fake_openai):\n"
        "    fake_openai.add(lambda request: 1 / 0)\n"
        "    with pytest.raises(openai.InternalServerError):\n"
        "        fake_openai.client().chat.completions.create(model='m', messages=[])\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed, 1 error" in done.stdout and "scripted reply #1 raised ZeroDivisionError" in done.stdout
