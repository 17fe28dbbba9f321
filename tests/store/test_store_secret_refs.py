"""A store keeps a :class:`planbook.Secret` as its reference, ``{"$secret": ref}``, never its
value nor ``***``, and gives it back as a Secret; a whole ``$id`` under a secret-named
argument is kept as written (it names a step); a plain value there is still never written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import planbook
from helpers import store_files
from planbook import Plan, ResumeError, Secret, Step, Toolbox
from planbook.outbound.redact import Redactor
from planbook.store import REDACTED, MemoryStore
from planbook.store.values import decode, encode_args

VARIABLE = "PLANBOOK_TEST_STORE_SECRET"
VALUE = "sk-store-canary-Qw31-e5c9a7d2"
REF = f'{{"$secret":"env:{VARIABLE}"}}'


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(VARIABLE, VALUE)
    return VALUE


def _store_bytes(store: Path) -> bytes:
    """The store file and its write-ahead log, as a reader finds them."""
    return b"".join(data for name, data in store_files(store.parent).items() if name.startswith(store.name))


def _plan() -> Plan:
    secret = Secret.env(VARIABLE)
    return Plan(id="refs", goal="fetch with a token", steps=[
        Step(id="a", tool="fetch", args={"url": "u", "token": secret, "headers": {"Authorization": secret}}),
        Step(id="b", tool="pair", args={"auth": ("ada", secret)}, needs=["a"]),
        Step(id="c", tool="look", args={"after": "$b"}, needs=["b"]),
    ])


def _box(seen: list[Any], store: Path | None = None) -> Toolbox:
    box = Toolbox()

    @box.tool
    def fetch(url: str, token: str, headers: dict) -> str:
        seen.append((token, headers))
        return "fetched"

    @box.tool
    def pair(auth: tuple) -> str:
        seen.append(auth)
        return "paired"

    @box.tool
    def look(after: str) -> str:
        if store is not None:  # the run is live: its write-ahead log holds what it wrote so far
            seen.append(_store_bytes(store))
        return "looked"

    return box


def test_a_sqlite_store_holds_the_reference_never_the_value_and_gives_a_secret_back(token: str,
                                                                                    tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    result = planbook.run(_plan(), tools=_box(seen, store), store=store)
    assert result.status == "completed"
    assert seen[:2] == [(token, {"Authorization": token}), ("ada", token)]
    live, written = seen[2], _store_bytes(store)
    assert (tmp_path / "runs.sqlite-wal").exists() or live  # the live read saw the file with its log
    for data in (live, written):
        assert token.encode() not in data
        assert REF.encode() in data  # JSON args: the reference as the plan's JSON writes it
        assert b'"token":"***"' not in data
    loaded = planbook.load_run(store=store).plan
    assert loaded.step("a").args == {"url": "u", "token": Secret.env(VARIABLE),
                                     "headers": {"Authorization": Secret.env(VARIABLE)}}
    # a tuple is pickled: the reference kept, the plain value beside it under a secret's name is not
    assert loaded.step("b").args == {"auth": (REDACTED, Secret.env(VARIABLE))}
    assert isinstance(loaded.step("a").args["token"], Secret)


def test_a_memory_store_gives_the_secret_back(token: str) -> None:
    store, seen = MemoryStore(), []
    result = planbook.run(_plan(), tools=_box(seen), store=store)
    [listed] = store.list_runs()
    loaded = store.load_run(listed.run_id).plan
    assert result.status == "completed" and loaded.step("a").args["token"] == Secret.env(VARIABLE)
    assert loaded.step("b").args["auth"] == (REDACTED, Secret.env(VARIABLE))


def test_args_are_encoded_with_references_kept_and_plain_secrets_marked() -> None:
    redactor = Redactor()
    secret = Secret.env(VARIABLE)
    enc, paths = encode_args({"token": secret, "keys": [1, secret]}, redactor)
    assert (enc.kind, json.loads(enc.payload), paths) == (
        "json", {"token": {"$secret": f"env:{VARIABLE}"}, "keys": [1, {"$secret": f"env:{VARIABLE}"}]}, [])
    enc, paths = encode_args({"token": "$login", "api_key": "${login}", "password": "hunter2-Zq81"}, redactor)
    assert json.loads(enc.payload) == {"token": "$login", "api_key": "***", "password": "***"}
    assert paths == [("api_key",), ("password",)]  # only a whole $id names a step: a template is text
    enc, paths = encode_args({"credentials": {"user": "ada", "token": "$login"}}, redactor)
    assert json.loads(enc.payload) == {"credentials": {"user": "***", "token": "$login"}}
    named = Secret("db-password-Xy77-named", name="store-test-db")
    enc, _ = encode_args({"password": named}, redactor)
    assert json.loads(enc.payload) == {"password": {"$secret": "store-test-db"}}
    assert b"db-password-Xy77-named" not in (enc.payload if isinstance(enc.payload, bytes) else enc.payload.encode())
    enc, paths = encode_args({"auth": ("ada", named)}, redactor)  # a tuple: pickled, the reference kept
    assert enc.kind == "pickle" and b"db-password-Xy77-named" not in enc.payload
    assert decode(enc.kind, enc.payload) == {"auth": (REDACTED, Secret.from_ref("store-test-db"))}
    assert paths == [("auth", 0)]


def test_a_reference_under_a_secret_name_needs_nothing_given_again(tmp_path: Path) -> None:
    store, tokens = tmp_path / "runs.sqlite", []
    box = Toolbox()

    @box.tool
    def login(user: str) -> str:
        return f"tok-{user}-Jj42-session"

    @box.tool
    def fetch(token: str) -> str:
        tokens.append(token)
        if len(tokens) == 1:
            raise KeyboardInterrupt
        return "ok"

    plan = Plan(id="p", steps=[Step(id="login", tool="login", args={"user": "ada"}),
                               Step(id="get", tool="fetch", args={"token": "$login"}, needs=["login"])])
    planbook.run(plan, tools=box, store=store)
    with planbook.store.SQLiteStore(store) as opened:
        stored = opened.load_run(opened.latest_run_id() or "")
        assert stored.missing_args() == {} and stored.plan.step("get").args == {"token": "$login"}
    assert planbook.resume(store=store, tools=box).status == "completed"
    assert tokens == ["tok-ada-Jj42-session"] * 2


def test_a_plain_secret_is_never_written_and_resume_suggests_a_secret_value(tmp_path: Path) -> None:
    store, box = tmp_path / "runs.sqlite", Toolbox()
    calls: list[str] = []

    @box.tool
    def enter(password: str) -> str:
        calls.append(password)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return "in"

    plan = Plan(id="p", steps=[Step(id="in", tool="enter", args={"password": "open-sesame-Vb19"})])
    planbook.run(plan, tools=box, store=store)
    assert b"open-sesame-Vb19" not in _store_bytes(store)
    with pytest.raises(ResumeError, match=r"in: password.*planbook\.Secret.*Secret\.env\('NAME'\)"):
        planbook.resume(store=store, tools=box)


def test_an_unnamed_secret_stored_by_one_process_never_names_another_process_secret(tmp_path: Path) -> None:
    """A run resumed in a new process must not call a tool with some other secret of that process."""
    import subprocess
    import sys

    code = ("import sys, planbook\n"
            "from planbook import Secret\n"
            "if sys.argv[1] == 'make':\n"
            "    print(Secret('first-process-value-Nm20').ref)\n"
            "else:\n"
            "    other = Secret('second-process-value-Pq31')\n"
            "    try:\n"
            "        print(Secret.from_ref(sys.argv[2]).reveal())\n"
            "    except planbook.SecretError as exc:\n"
            "        print('refused:', exc)\n")
    run = [sys.executable, "-c", code]
    ref = subprocess.run([*run, "make"], capture_output=True, text=True, check=True).stdout.strip()
    out = subprocess.run([*run, "resolve", ref], capture_output=True, text=True, check=True).stdout
    assert "second-process-value-Pq31" not in out and out.startswith("refused:")
    assert "is not known in this process" in out
