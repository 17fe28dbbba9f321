"""A secret given to a tool leaves no trace, in any form a careless tool echoes it in: not
in the store file or its write-ahead log, an event, the step, ``RunResult.error``, or what
the CLI prints — the new secret names, values inside a secret argument's tuple, repr's
escapes, numbers and list items as text, and the model base URL's password."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import planbook
from planbook import Plan, RunResult, Step, Toolbox
from planbook.outbound.redact import Redactor, echo_forms

ROOT = Path(__file__).resolve().parents[2]
#: a password with everything repr escapes: a backslash, both quotes, a newline, a tab
PASSWORD = 'pa\\ss\'w"o\nrd\t-Zq81'
PIN = 739142
USER = "ada-lovelace"
ITEMS = ["alpha-item-one", "beta-item-two"]


def _box() -> Toolbox:
    box = Toolbox()

    @box.tool(cache=False)
    def login(user: str, password: str) -> str:
        """Refuses, echoing what it was given, as careless error messages do."""
        print(f"trying {user} with {password!r}")
        raise PermissionError(f"login refused for {user!r} with password {password!r} ({password})")

    @box.tool(cache=False)
    def fetch(url: str, auth: tuple, pw: int, credentials: list, session: str, basic_auth: dict) -> str:
        """requests-style auth, a PIN, a list of keys: echoed in every shape."""
        raise ConnectionError(f"GET {url} with auth={auth!r} pin {pw} creds {', '.join(credentials)} "
                              f"{credentials} session={session!r} basic={basic_auth}")

    return box


def _plan() -> Plan:
    return Plan(id="secrets", goal="log in", steps=[
        Step(id="in", tool="login", args={"user": "ada", "password": PASSWORD}),
        Step(id="get", tool="fetch", args={
            "url": "https://api.example/x", "auth": (USER, "tuple-secret-77"), "pw": PIN, "credentials": ITEMS,
            "session": "sess-cookie-9191", "basic_auth": {"user": "bob", "password": "dict-secret-31"},
        }),
    ])


SECRETS = [PASSWORD, str(PIN), "tuple-secret-77", *ITEMS, "sess-cookie-9191", "dict-secret-31"]


def _traces(text: str) -> list[str]:
    """The forms of any secret found in ``text``."""
    return sorted({form for secret in SECRETS for form in echo_forms(secret) if form in text})


def _traces_bytes(raw: bytes) -> list[str]:
    return sorted({form for secret in SECRETS for form in echo_forms(secret)
                   if form.encode() in raw or form.encode("unicode_escape") in raw})


def _everything_in_memory(result: RunResult) -> str:
    return "\n".join([str(result.error), repr(result.error), str(result),
                      *(f"{e.kind} {e.data!r}" for e in result.events),
                      *(f"{st.error}\n{st.traceback}\n{st.output}" for st in [*result.plan.steps, *result.history])])


def test_an_echoed_secret_leaves_no_trace_in_the_store_or_the_result(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    result = planbook.run(_plan(), tools=_box(), store=store, on_failure="skip")
    assert result.plan.step("in").error and result.plan.step("get").error  # both ran and failed
    assert "login refused for 'ada' with password" in (result.plan.step("in").error or "")  # the rest is kept
    assert "GET https://api.example/x" in (result.plan.step("get").error or "")
    assert _traces(_everything_in_memory(result)) == []
    stored = planbook.load_run(store=store)
    assert _traces(_everything_in_memory(stored)) == []
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite"))
    assert Path(f"{store}-wal").exists() and b"login refused" in raw
    assert _traces_bytes(raw) == []


def test_an_aborted_run_error_holds_no_secret() -> None:
    result = planbook.run(_plan(), tools=_box())  # no store: the run's own error and events
    assert result.status == "failed" and "login refused" in (result.error or "")
    assert _traces(_everything_in_memory(result)) == []


TOOLS = '''
import planbook

box = planbook.Toolbox()


@box.tool(cache=False)
def login(user: str, password: str) -> str:
    """Refuses, echoing the password's repr."""
    print(f"trying {password!r}")
    raise PermissionError(f"login refused for {user} with password {password!r}")
'''


def test_the_cli_prints_no_trace_of_an_echoed_secret(tmp_path: Path) -> None:
    (tmp_path / "login_tools.py").write_text(TOOLS)
    (tmp_path / "plan.json").write_text(
        '{"goal": "log in", "steps": [{"id": "in", "tool": "login", "args": {"user": "ada", "password": %s}}]}'
        % __import__("json").dumps(PASSWORD))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}", "PLANBOOK_HOME": str(tmp_path / "home")}
    outputs = []
    for args in (["run", "plan.json", "--tools", "login_tools:box", "--plain"], ["show"], ["runs"]):
        done = subprocess.run([sys.executable, "-m", "planbook.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        outputs.append(done.stdout + done.stderr)
    assert "login refused for ada" in outputs[0] and "login refused for ada" in outputs[1]
    assert _traces("\n".join(outputs)) == []


def test_the_base_url_password_with_a_backslash_is_hidden_in_every_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "ur\\lpa'ss-4417"
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://bob:{secret}@127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key-0000")
    box = Toolbox()

    @box.tool(cache=False)
    def connect() -> str:
        """Echoes the model server's password, as a debugging print would."""
        password = os.environ["OPENAI_BASE_URL"].split(":")[2].split("@")[0]
        raise ConnectionError(f"server refused password {password!r} / {password}")

    store = tmp_path / "runs.sqlite"
    result = planbook.run(Plan(id="u", goal="connect", steps=[Step(id="c", tool="connect")]), tools=box, store=store)
    assert "server refused password" in (result.error or "")
    forms = echo_forms(secret)
    assert [f for f in forms if f in _everything_in_memory(result)] == []
    assert [f for f in forms if f in _everything_in_memory(planbook.load_run(store=store))] == []
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite"))
    assert [f for f in forms if f.encode() in raw] == []


def test_a_redactor_knows_every_echoed_form_of_a_learned_value() -> None:
    redactor = Redactor(env={})
    redactor.learn([("user-name-1", PASSWORD), PIN, {"inner": ["list-item-secret"]}])
    for text in (f"{PASSWORD!r}", f"{[PASSWORD]}", f"{PASSWORD}", ascii(PASSWORD), f"pin {PIN}",
                 __import__("json").dumps({"p": PASSWORD}), "x list-item-secret y", repr(f"both ' \" {PASSWORD}")):
        shown = redactor.text(text)
        assert not [f for s in (PASSWORD, str(PIN), "list-item-secret") for f in echo_forms(s) if f in shown], text
