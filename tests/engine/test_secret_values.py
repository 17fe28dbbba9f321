"""A :class:`planbook.Secret` through the engine: only the call boundary gives the tool the
real value (inline, on worker threads, on a given executor, for an async tool); the plan,
the events, the cache key and the step's error hold the reference; a secret that is not set
fails its step, saying how to set it; a run with a Secret and a model-planned step, killed
with SIGKILL, resumes from its store alone and reads the secret again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

import planbook
from helpers import store_files
from planbook import Plan, Secret, Step, Toolbox
from planbook.data.models import Status
from planbook.spec.formats import parse_plan

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = "PLANBOOK_TEST_SECRET_TOKEN"
VALUE = "ghp-canary-Zq81-value-7f3e91bd"
#: a generous bound for a busy machine; the crash test waits on the log, never on the clock
PATIENCE = 120.0


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(VARIABLE, VALUE)
    return VALUE


class Seen:
    """Tools that keep what they were given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.box = Toolbox()
        seen = self

        @self.box.tool(cache=True, version="1")
        def fetch(url: str, token: str, headers: dict | None = None, keys: list | None = None) -> str:
            """Fetch with a token."""
            seen.calls.append(("fetch", (token, headers, keys)))
            return f"fetched {url}"

        @self.box.tool
        def echo_fail(token: str) -> str:
            """Echo the token everywhere a careless tool does: printed, in the error."""
            seen.calls.append(("echo_fail", token))
            print(f"using {token}")
            raise PermissionError(f"refused token {token!r}")

        @self.box.tool
        def echo_back(token: str) -> str:
            seen.calls.append(("echo_back", token))
            return f"token was {token}"

        @self.box.tool
        def short(token: Annotated[str, Field(max_length=8)]) -> str:
            seen.calls.append(("short", token))
            return token

        @self.box.tool
        async def afetch(token: str) -> str:
            await asyncio.sleep(0)
            seen.calls.append(("afetch", token))
            return "async ok"

        @self.box.tool
        def login(user: str) -> Secret:
            """A login whose answer is a secret by type."""
            seen.calls.append(("login", user))
            return Secret(f"session-{user}-Kq71-xy", name=f"session-{user}")

    def given(self, tool: str) -> list[Any]:
        return [args for name, args in self.calls if name == tool]


def _events_text(result: planbook.RunResult) -> str:
    return json.dumps([e.model_dump(mode="json") for e in result.events], default=repr)


def test_a_secret_reaches_the_tool_and_the_run_holds_only_its_reference(token: str) -> None:
    seen = Seen()
    plan = Plan(id="p", goal="fetch", steps=[Step(id="a", tool="fetch", args={
        "url": "https://api.example/x", "token": Secret.env(VARIABLE),
        "headers": {"Authorization": Secret.env(VARIABLE), "Accept": "json"}, "keys": ["k", Secret.env(VARIABLE)],
    })])
    result = planbook.run(plan, tools=seen.box)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert seen.given("fetch") == [(token, {"Authorization": token, "Accept": "json"}, ["k", token])]
    args = result.plan.steps[0].args
    assert args["token"] == Secret.env(VARIABLE) and args["headers"]["Authorization"] == Secret.env(VARIABLE)
    assert args["keys"][1] == Secret.env(VARIABLE)
    assert token not in _events_text(result) and token not in result.plan.model_dump_json()
    assert token not in repr(result.plan.steps[0])


def test_what_a_tool_echoes_of_a_secret_is_masked_in_its_error_output_and_summary(token: str) -> None:
    seen = Seen()
    plan = Plan(id="p", steps=[Step(id="a", tool="echo_back", args={"token": Secret.env(VARIABLE)}),
                               Step(id="b", tool="echo_fail", args={"token": Secret.env(VARIABLE)})])
    result = planbook.run(plan, tools=seen.box)
    assert seen.given("echo_fail") == [token] and result.status == "failed"
    failed = result.plan.step("b")
    assert failed.error == "PermissionError: refused token '***'"
    for text in (failed.error, failed.traceback or "", failed.output, _events_text(result)):
        assert token not in text
    assert "using ***" in failed.output
    assert result.outputs["a"] == f"token was {token}"  # the result is the tool's own (doors hide it)


def test_an_error_of_coercion_that_quotes_the_value_is_masked(token: str) -> None:
    seen = Seen()
    result = planbook.run(Plan(id="p", steps=[Step(id="a", tool="short", args={"token": Secret.env(VARIABLE)})]),
                          tools=seen.box)
    step = result.plan.step("a")
    assert step.status is Status.failed and "bad arguments for tool 'short'" in (step.error or "")
    assert token not in (step.error or "") and token not in (step.traceback or "") and seen.given("short") == []


def test_an_unset_variable_fails_its_step_saying_how_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    seen = Seen()
    plan = Plan(id="p", steps=[Step(id="a", tool="fetch", args={"url": "u", "token": Secret.env(VARIABLE)})])
    result = planbook.run(plan, tools=seen.box)
    assert (result.status, result.reason) == ("failed", "aborted") and seen.calls == []
    assert result.plan.step("a").error == (f"SecretError: Secret.env('{VARIABLE}') is not set: set the environment "
                                           f"variable {VARIABLE} before running (or resuming) this run")


def test_a_plan_spec_names_a_secret_as_a_reference(token: str) -> None:
    seen = Seen()
    spec = f"""
goal: fetch
steps:
  - id: a
    tool: fetch
    args:
      url: u
      token: {{$secret: env:{VARIABLE}}}
      headers: {{Authorization: {{$secret: env:{VARIABLE}}}, Accept: json}}
"""
    as_json = json.dumps({"goal": "fetch", "steps": [{"id": "a", "tool": "fetch", "args": {
        "url": "u", "token": {"$secret": f"env:{VARIABLE}"}}}]})
    for text in (spec, as_json):
        plan = parse_plan(text)
        assert plan.steps[0].args["token"] == Secret.env(VARIABLE)
        assert planbook.run(plan, tools=seen.box).status == "completed"
    assert seen.given("fetch") == [(token, {"Authorization": token, "Accept": "json"}, None), (token, None, None)]


@pytest.mark.parametrize("where", ["threads", "futures", "async"])
def test_a_secret_reaches_a_tool_on_worker_threads_an_executor_and_an_event_loop(token: str, where: str) -> None:
    seen = Seen()
    tool = "afetch" if where == "async" else "fetch"
    steps = [Step(id=f"s{i}", tool=tool, args={"token": Secret.env(VARIABLE)} if tool == "afetch" else
                  {"url": f"u{i}", "token": Secret.env(VARIABLE)}) for i in range(4)]
    steps.append(Step(id="bad", tool="echo_fail", args={"token": Secret.env(VARIABLE)}))
    options: dict[str, Any] = {"parallel": 2}
    with ThreadPoolExecutor(2) as pool:
        if where == "futures":
            options["executor"] = pool
        result = planbook.run(Plan(id="p", steps=steps), tools=seen.box, on_failure="skip", **options)
    assert [args if tool == "afetch" else args[0] for args in seen.given(tool)] == [token] * 4
    assert result.outputs.keys() >= {"s0", "s1", "s2", "s3"}
    bad = result.plan.step("bad")
    assert bad.error == "PermissionError: refused token '***'" and token not in (bad.output + (bad.traceback or ""))
    assert token not in _events_text(result)


def test_a_result_that_is_a_secret_is_revealed_only_for_the_call_that_references_it() -> None:
    seen = Seen()
    plan = Plan(id="p", steps=[Step(id="login", tool="login", args={"user": "ada"}),
                               Step(id="a", tool="fetch", args={"url": "u", "token": "$login",
                                                                "headers": {"Authorization": "Bearer ${login}"}},
                                    needs=["login"])])
    result = planbook.run(plan, tools=seen.box)
    assert seen.given("fetch") == [("session-ada-Kq71-xy", {"Authorization": "Bearer session-ada-Kq71-xy"}, None)]
    assert result.outputs["login"] == Secret.from_ref("session-ada")
    assert "session-ada-Kq71-xy" not in _events_text(result)


def test_the_cache_keys_a_secret_by_its_reference(token: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store, seen = tmp_path / "runs.sqlite", Seen()

    def plan() -> Plan:
        return Plan(id="p", steps=[Step(id="a", tool="fetch", args={"url": "u", "token": Secret.env(VARIABLE)})])

    first = planbook.run(plan(), tools=seen.box, store=store, cache=True)
    assert first.status == "completed" and len(seen.given("fetch")) == 1
    monkeypatch.setenv(VARIABLE, "a-rotated-token-Wq19")  # rotating a secret is not a change of the call
    again = planbook.run(plan(), tools=seen.box, store=store, cache=True)
    assert [e.kind for e in again.events if e.step == "a"] == ["step.cached"] and len(seen.given("fetch")) == 1
    other = Plan(id="p", steps=[Step(id="a", tool="fetch", args={"url": "u", "token": Secret.env(VARIABLE + "_2")})])
    monkeypatch.setenv(VARIABLE + "_2", "another-token-Pz55")
    planbook.run(other, tools=seen.box, store=store, cache=True)  # another secret: another call
    assert [args[0] for args in seen.given("fetch")] == [token, "another-token-Pz55"]
    written = b"".join(store_files(tmp_path).values())
    assert token.encode() not in written and b"another-token-Pz55" not in written


# ----------------------------------------------------------- a real crash, and resume

CRASH_TOOLS = '''
"""``use`` logs "LABEL TOKEN" to $SECRET_LOG; ``gate`` logs "gate-waiting" and, with $SECRET_GATE
set, waits for stdin (until killed): the test kills the run there, with a Secret-taking step done
and another still to run."""
import os
import sys

from planbook import Toolbox

tools = Toolbox()


def _log(line):
    with open(os.environ["SECRET_LOG"], "a") as log:
        log.write(line + "\\n")


@tools.tool(cache=False)
def use(label: str, token: str) -> str:
    _log(f"{label} {token}")
    return "used " + label


@tools.tool(cache=False)
def gate(after: str) -> str:
    if os.environ.get("SECRET_GATE"):
        _log("gate-waiting")
        sys.stdin.read()
    return "passed"
'''

CRASH_MAIN = r"""
import json, sys
import planbook, secrettools

store = sys.argv[2]
if sys.argv[1] == "run":
    from planbook import LLMPlanner
    from planbook.testing.fake_server import FakeOpenAIServer, Reply
    secret = {"$secret": "env:%s"}
    steps = [{"id": "first", "tool": "use", "task": "use the token", "args": {"label": "first", "token": secret}},
             {"id": "hold", "tool": "gate", "task": "wait", "args": {"after": "$first"}, "needs": ["first"]},
             {"id": "last", "tool": "use", "task": "use it again", "args": {"label": "last", "token": secret},
              "needs": ["hold"]}]
    with FakeOpenAIServer([Reply.plan(steps)]) as server:
        planner = LLMPlanner("scripted", base_url=server.base_url, api_key="test-key")
        # abort: a failure would need the model again (replan), and the resume is given none
        result = planbook.run("use the token twice", planner=planner, tools=secrettools.tools, store=store,
                              on_failure="abort")
else:
    result = planbook.resume(sys.argv[3], store=store, tools=secrettools.tools)
print(json.dumps({"status": result.status, "reason": result.reason, "outputs": result.outputs}))
""" % VARIABLE


def _start(tmp_path: Path, *args: str, value: str, gate: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "SECRET_LOG": str(tmp_path / "calls.log"), VARIABLE: value}
    env.pop("SECRET_GATE", None)
    if gate:
        env["SECRET_GATE"] = "1"
    return subprocess.Popen([sys.executable, "-c", CRASH_MAIN, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _store_bytes(store: Path) -> bytes:
    """The store file and its write-ahead log, as a reader finds them."""
    return b"".join(data for name, data in store_files(store.parent).items() if name.startswith(store.name))


def _log(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_model_planned_run_with_a_secret_killed_mid_run_resumes_from_the_store_alone(tmp_path: Path) -> None:
    (tmp_path / "secrettools.py").write_text(CRASH_TOOLS)
    store = tmp_path / "runs.sqlite"
    proc = _start(tmp_path, "run", str(store), value=VALUE, gate=True)
    deadline = time.monotonic() + PATIENCE
    try:
        while "gate-waiting" not in _log(tmp_path):
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it was killed: {proc.communicate()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the run did not reach its gate in {PATIENCE:g} s")
            time.sleep(0.01)  # a poll interval, not a synchronisation
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=PATIENCE)
    assert proc.returncode == -signal.SIGKILL
    assert _log(tmp_path) == [f"first {VALUE}", "gate-waiting"]

    # what the kill left: the reference, never the value (the file and its write-ahead log)
    written = _store_bytes(store)
    assert VALUE.encode() not in written
    assert f'{{"$secret":"env:{VARIABLE}"}}'.encode() in written
    stored = planbook.load_run(store=store)
    assert stored.plan.step("last").args["token"] == Secret.env(VARIABLE)
    assert stored.plan.step("first").status is Status.completed

    # a new process, given only the store and the tools; the secret was rotated meanwhile
    rotated = "ghp-rotated-Lm42-value-0c0ffee"
    [listed] = planbook.runs(store)
    proc = _start(tmp_path, "resume", str(store), listed.run_id, value=rotated, gate=False)
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "completed", out
    assert _log(tmp_path) == [f"first {VALUE}", "gate-waiting", f"last {rotated}"]  # read again; first not rerun
    written = _store_bytes(store)
    assert VALUE.encode() not in written and rotated.encode() not in written


def test_a_step_taking_a_reference_under_a_secret_name_resumes_from_the_store_alone(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", Seen()
    box = Toolbox()
    tokens: list[str] = []

    @box.tool
    def login(user: str) -> str:
        return f"tok-{user}-Hh27-session"

    @box.tool
    def fetch(url: str, token: str) -> str:
        tokens.append(token)
        if len(tokens) == 1:
            raise KeyboardInterrupt  # Ctrl-C during the call: the run stops, fetch did not complete
        return "fetched"

    plan = Plan(id="p", goal="fetch as ada", steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="get", tool="fetch", args={"url": "u", "token": "$login"}, needs=["login"])])
    assert planbook.run(plan, tools=box, store=store).status == "interrupted"
    assert planbook.load_run(store=store).plan.step("get").args == {"url": "u", "token": "$login"}
    resumed = planbook.resume(store=store, tools=box)  # no plan= needed
    assert (resumed.status, resumed.reason) == ("completed", "goal_met")
    assert tokens == ["tok-ada-Hh27-session"] * 2
    assert b"tok-ada-Hh27-session" not in _store_bytes(store)
    del seen


# ------------------------------------------------------------------- an MCP server's tool

ECHO_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def whoami(token: str) -> str:
    """Says which token it got."""
    return "token " + token


@server.tool()
def refuse(token: str) -> str:
    """Refuses, echoing the token."""
    raise ValueError("bad token " + token)


server.run()
'''


def test_an_mcp_tool_gets_the_value_and_the_step_holds_the_reference(token: str, tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason='needs the test-mcp extra: pip install -e ".[test-mcp]"')
    from planbook.mcp import connect

    script = tmp_path / "echo_server.py"
    script.write_text(ECHO_SERVER)
    spec = (f"steps:\n  - {{id: a, tool: whoami, args: {{token: {{$secret: env:{VARIABLE}}}}}}}\n"
            f"  - {{id: b, tool: refuse, args: {{token: {{$secret: env:{VARIABLE}}}}}}}\n")
    with connect([sys.executable, str(script)]) as box:
        result = planbook.run(spec, tools=box, on_failure="skip")
    assert result.outputs["a"] in (f"token {token}", {"result": f"token {token}"})  # the server got the value
    assert result.plan.step("a").args == {"token": Secret.env(VARIABLE)}
    refused = result.plan.step("b")
    assert refused.status is Status.skipped and "refuse" in (refused.error or ""), refused.error
    assert token not in (refused.error or "") + (refused.traceback or "") and token not in _events_text(result)
