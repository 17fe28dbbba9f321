"""Secrets never reach a store: keys, Authorization headers, secret-named args, model events."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from planbook.data.models import Event, Plan, Status, Step
from planbook.engine.state import RunState
from planbook.outbound.redact import Redactor, is_secret_name
from planbook.store import MemoryStore, Redacted, Unrestorable
from planbook.store.sqlite import SQLiteStore

ENV_KEY = "sk-envkey0123456789abcdefXYZ"
URL_PASSWORD = "urlpass9876"
URL_QUERY_KEY = "querykey5555"
ARG_SECRET = "hunter2-arg-secret"
HEADER_TOKEN = "hdr-token-abcdef"
GIVEN = "given-secret-4242"
ALL = (ENV_KEY, URL_PASSWORD, URL_QUERY_KEY, ARG_SECRET, HEADER_TOKEN, GIVEN)


@dataclass
class Holder:
    token: str


@pytest.fixture(autouse=True)
def model_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"https://me:{URL_PASSWORD}@models.example/v1?key={URL_QUERY_KEY}")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Iterator[Any]:
    s = MemoryStore(secrets=[GIVEN]) if request.param == "memory" else SQLiteStore(tmp_path / "r.sqlite", secrets=[GIVEN])
    yield s
    s.close()


def write_secret_run(store: Any) -> str:
    plan = Plan(id="p", goal=f"call the API with {ENV_KEY}", steps=[
        Step(id="a", tool="fetch", task=f"use {GIVEN}", args={
            "url": "https://api.example/x", "api_key": ARG_SECRET, "n": 2,
            "headers": {"Authorization": f"Bearer {HEADER_TOKEN}", "Accept": "json"},
            "logins": [{"user": "me", "password": ARG_SECRET}],
        }),
        Step(id="b", tool="fetch", args={"url": f"https://me:{URL_PASSWORD}@host/"}),
        Step(id="c", tool="fetch", args={"x": "$a"}),
    ])
    state = RunState(plan=plan)
    run_id = store.create_run(plan, config={"model": "m", "api_key": ARG_SECRET, "max_steps": 3})
    a, b, _ = plan.steps
    a.set_state(status=Status.completed, result={"echo": f"the key is {ENV_KEY}"},
                output=f"Authorization: Bearer {HEADER_TOKEN}\n", notes=f"{GIVEN}")
    b.set_state(status=Status.failed, error=f"401 for key {ENV_KEY}", result=Holder(token=ENV_KEY),
                traceback=f"Traceback ...\nValueError: token={HEADER_TOKEN}")
    state.history += [a.snapshot(), b.snapshot()]
    state.executions, state.last_error = 2, f"b failed: 401 for key {ENV_KEY}"
    state.error = f"see {URL_QUERY_KEY}"
    state.events += [
        Event(kind="llm.call", time=1.0, data={"model": "m", "prompt_tokens": 12, "completion_tokens": 3,
                                               "content": f"echo {ENV_KEY}", "api_key": ARG_SECRET,
                                               "request": {"headers": {"authorization": f"Bearer {HEADER_TOKEN}"}}}),
        Event(kind="step.failed", time=2.0, step="b", data={"error": f"401 for {ENV_KEY} Bearer {HEADER_TOKEN}"}),
    ]
    store.save_state(run_id, state)
    return run_id


def everything_loaded(store: Any, run_id: str) -> str:
    loaded = store.load_run(run_id)
    if isinstance(store, MemoryStore):
        # the memory store keeps objects by reference, unencoded: an object holding a key is
        # the caller's own object in the same process (nothing is written anywhere)
        assert isinstance(loaded.plan.steps[1].result, Holder)
        loaded.plan.steps[1].result = loaded.history[1].result = None
    return repr((loaded.goal, loaded.config, loaded.plan.model_dump(), [h.model_dump() for h in loaded.history],
                 [e.model_dump() for e in loaded.events], loaded.counters, loaded.revisions))


def test_no_secret_reaches_the_store(store: Any) -> None:
    run_id = write_secret_run(store)
    shown = everything_loaded(store, run_id)
    for secret in ALL:
        assert secret not in shown, secret
    if isinstance(store, SQLiteStore):  # the bytes on disk: the database and its write-ahead log
        raw = b"".join(p.read_bytes() for p in store.path.parent.iterdir() if p.name.startswith("r.sqlite"))
        assert raw and b"fetch" in raw
        for secret in ALL:
            assert secret.encode() not in raw, secret


def test_secret_args_load_as_markers_and_the_rest_is_kept(store: Any) -> None:
    loaded = store.load_run(write_secret_run(store))
    a, b, c = loaded.plan.steps
    assert a.args["api_key"] is not None and isinstance(a.args["api_key"], Redacted)
    assert isinstance(a.args["headers"]["Authorization"], Redacted) and a.args["headers"]["Accept"] == "json"
    assert isinstance(a.args["logins"][0]["password"], Redacted) and a.args["logins"][0]["user"] == "me"
    assert a.args["n"] == 2 and a.args["url"] == "https://api.example/x"
    assert isinstance(b.args["url"], Redacted)  # a URL with a password would be a wrong argument
    assert c.args == {"x": "$a"}
    assert loaded.missing_args() == {"b": ["url"]}  # a is completed: its args are not needed again


def test_results_holding_a_known_secret_are_not_kept(store: Any) -> None:
    loaded = store.load_run(write_secret_run(store))
    a_result = loaded.plan.steps[0].result
    assert isinstance(a_result, Unrestorable) and "held a secret" in a_result.reason
    assert ENV_KEY not in a_result.repr and "***" in a_result.repr
    if isinstance(store, SQLiteStore):  # pickled objects are searched too
        assert isinstance(loaded.plan.steps[1].result, Unrestorable)
    assert not store.cache_put("k", {"x": ENV_KEY}, tool="fetch", run_id=loaded.run_id, step_id="a")
    assert store.cache_get("k") is None


def test_texts_keep_what_is_not_secret(store: Any) -> None:
    loaded = store.load_run(write_secret_run(store))
    a, b, _ = loaded.plan.steps
    assert a.output == "Authorization: ***\n" and a.task == "use ***"
    assert b.error == "401 for key ***" and b.traceback.endswith("ValueError: token=***")
    assert loaded.counters["last_error"] == "b failed: 401 for key ***"
    llm = loaded.events[0].data
    assert llm["prompt_tokens"] == 12 and llm["completion_tokens"] == 3  # counts are not secrets
    assert llm["api_key"] == "***" and llm["request"]["headers"]["authorization"] == "***"
    assert llm["content"] == "echo ***"
    assert loaded.result().usage.total_tokens == 15
    assert loaded.config == {"model": "m", "api_key": "***", "max_steps": 3}


def test_a_key_set_after_the_store_was_opened_is_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLiteStore(tmp_path / "late.sqlite")
    later = "sk-later-key-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", later)
    plan = Plan(id="p", goal=f"goal {later}", steps=[Step(id="a", tool="t")])
    run_id = store.create_run(plan, config={})
    assert later not in store.load_run(run_id).goal


@pytest.mark.parametrize("name", [
    "api_key", "apiKey", "OPENAI_API_KEY", "x-api-key", "token", "access_token", "accessToken", "refresh-token",
    "secret", "client_secret", "password", "db_password", "passwd", "Authorization", "proxy-authorization",
    "cookie", "credentials", "key", "private_key", "passphrase", "secrets",
    # any case, any separator: auth, basic_auth, proxy_auth, pw, passwd, credentials, cookie, session
    "auth", "AUTH", "Auth", "basic_auth", "BASIC-AUTH", "basic.auth", "basicAuth", "BasicAuth", "basicauth",
    "proxy_auth", "Proxy-Auth", "proxyAuth", "PROXYAUTH", "pw", "PW", "db_pw", "dbPw", "Passwd", "PASSWD",
    "user-passwd", "Credentials", "AWS_CREDENTIALS", "awscredentials", "Cookie", "set-cookie", "SESSION_COOKIE",
    "session", "Session", "SESSION", "user_session", "x-session", "sessionToken",
])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "prompt_tokens", "completion_tokens", "max_tokens", "tokens", "token_count", "keys", "key_name", "secret_path",
    "password_file", "monkey", "turkey", "keyword", "n", "url", "api_key_env", "token_limit",
    "author", "authority", "auth_url", "session_id", "sessionId", "session_timeout", "pwd_path",
])
def test_names_that_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("text, expected", [
    ("Authorization: Bearer abc.def-ghi", "Authorization: ***"),
    ('curl -H "Authorization: Basic dXNlcjpwYXNz" x', 'curl -H "Authorization: ***" x'),
    ("sent bearer eyJhbGciOi.J9 to", "sent bearer *** to"),
    ("key sk-abcdefghijklmnopqrstuv used", "key sk-*** used"),
    ("https://user:pa55@host/path?api_key=zzz&q=1", "https://***@host/path?api_key=***&q=1"),
    ('{"password": "pw1", "n": 1}', '{"password": "***", "n": 1}'),
    ("OPENAI_API_KEY=abc123 PLANBOOK_MODEL=m", "OPENAI_API_KEY=*** PLANBOOK_MODEL=m"),
    ("the key: turn it twice", "the key: turn it twice"),
    ("max_tokens=100 token_count=3", "max_tokens=100 token_count=3"),
])
def test_secret_shapes_in_text(text: str, expected: str) -> None:
    assert Redactor(env={}).text(text) == expected


def test_known_secrets_are_replaced_longest_first() -> None:
    redactor = Redactor(["abcd", "abcdefgh", "ab"], env={})
    assert redactor.text("x abcdefgh y abcd z ab") == "x *** y *** z ab"  # "ab" is too short to hunt for


def test_redacting_plain_data_copies_only_what_changed() -> None:
    redactor = Redactor(env={})
    clean = {"a": [1, {"b": "c"}], "n": None}
    assert redactor.data(clean) is clean
    dirty = {"a": [1, {"token": "t"}], "keep": clean}
    out = redactor.data(dirty)
    assert out == {"a": [1, {"token": "***"}], "keep": clean} and out["keep"] is clean
    assert dirty["a"][1]["token"] == "t"


def test_the_fast_path_looks_for_every_word_it_names() -> None:
    from planbook.outbound.redact import SUSPECT_WORDS, suspicious

    for word in SUSPECT_WORDS:
        assert suspicious(f"xx {word.upper()} yy"), word
    assert not suspicious('{"id":"s1","task":"step 1","status":"completed","attempts":1}')


def test_a_known_secret_escaped_in_json_is_still_found() -> None:
    odd = 'pa"ss\\word-9'
    redactor = Redactor([odd], env={})
    assert odd not in redactor.json_text({"note": f"it is {odd}"})
    assert redactor.json_text({"note": f"it is {odd}"}) == '{"note":"it is ***"}'


def test_every_secret_word_is_suspicious() -> None:
    from planbook.outbound.redact import HOLDING_SUFFIXES, HOLDING_WORDS, suspicious

    for word in (*HOLDING_WORDS, *HOLDING_SUFFIXES):
        assert suspicious(word), word
