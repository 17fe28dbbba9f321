"""A run's secrets, wherever they travel (the gate, :mod:`planbook.outbound`).

A value given to a secret-named argument is a secret of the run: it is hidden in the goal,
the title and the plan id made from the goal, in errors, in every view (text, Markdown,
HTML), in revision diffs, in the store and in OpenTelemetry spans. A step whose result
feeds a secret-named argument of a later step (``token: $login``) holds a secret: its
result is ``***`` in the store, ``load_run``, the views and the spans.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, Step, Toolbox
from planbook.outbound import RunSecrets
from planbook.outbound.redact import echo_forms
from planbook.resume import load_run

TOKEN = "Tok-Zq81-secret-abc"
PASSWORD = "hunter2-Qx9-staging"


def _box() -> Toolbox:
    box = Toolbox()

    @box.tool(cache=False)
    def login(user: str) -> str:
        """Returns a session token (a secret, though no name says so)."""
        return TOKEN

    @box.tool(cache=False)
    def use(token: str) -> str:
        """Uses the token, and says how it went without repeating it."""
        return "used"

    @box.tool(cache=False)
    def echo(text: str) -> str:
        """A careless tool: returns what it is given."""
        return f"you said {text}"

    @box.tool(cache=False)
    def deploy(env: str, password: str) -> str:
        """Fails with credentials in a URL and a bearer token in its message."""
        raise ConnectionError("GET https://bob:hunter9-url-pw@deploy.example/x failed; "
                              "sent Authorization: Bearer abcDEF123456ghi")

    return box


def _traces(text: str, *secrets: str) -> list[str]:
    return sorted({f for s in secrets for f in echo_forms(s) if f in text})


def _views(result: Any) -> str:
    bundle = result._repr_mimebundle_()
    return "\n".join([str(result), bundle["text/plain"], bundle["text/markdown"], bundle["text/html"],
                      result.error or ""])


# -------------------------------------------------------------- the gate itself
def test_the_gate_learns_secret_args_and_the_steps_that_feed_them() -> None:
    plan = Plan(steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="use", tool="use", args={"token": "$login"}, needs=["login"]),
        Step(id="db", tool="deploy", args={"env": "x", "password": PASSWORD}),
        Step(id="hdr", tool="echo", args={"text": "x", "auth_header": "Bearer ${login}"}, needs=["login"]),
    ])
    gate = RunSecrets.of_plan(plan)
    assert gate.holders == {"login"}
    assert gate.text(f"pw is {PASSWORD}!") == "pw is ***!"
    plan.steps[0].set_state(result=TOKEN)
    gate.learn_result(plan.steps[0])
    assert gate.result(plan.steps[0]) == "***"
    assert gate.text(f"token {TOKEN} and its id form {TOKEN.lower()}") == "token *** and its id form ***"


# ----------------------------------------------------------- goal, title, id
def test_a_secret_named_in_the_goal_leaves_no_trace_in_goal_title_id_store_or_views(tmp_path: Path) -> None:
    def planner(goal: str, history: Any, last_error: Any) -> list[Step]:
        return [Step(id="in", tool="deploy", args={"env": "staging", "password": PASSWORD})]

    path = tmp_path / "runs.sqlite"
    result = planbook.run(f"deploy with password {PASSWORD} please", planner=planner, tools=_box(), store=path,
                          on_failure="skip")
    assert PASSWORD.lower() in result.plan.id  # the id is made from the goal (in memory it stays the run's own)
    assert not _traces(_views(result), PASSWORD)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert PASSWORD.encode() not in raw and PASSWORD.lower().encode() not in raw
    stored = load_run(store=path)
    assert "***" in stored.plan.goal and "***" in stored.plan.id
    assert not _traces(_views(stored), PASSWORD)


# ------------------------------------------------------------------- errors
def test_url_credentials_and_bearer_tokens_in_an_error_are_hidden_everywhere(tmp_path: Path) -> None:
    plan = Plan(steps=[Step(id="d", tool="deploy", args={"env": "prod", "password": PASSWORD})])
    result = planbook.run(plan, tools=_box(), store=tmp_path / "r.sqlite")
    assert result.status == "failed"
    for text in (result.plan.step("d").error or "", result.error or "", _views(result),
                 *[str(e.data) for e in result.events]):
        assert "hunter9-url-pw" not in text and "abcDEF123456ghi" not in text, text
    assert "https://***@deploy.example" in (result.plan.step("d").error or "")


# ------------------------------------------------------- secret by reference
def test_a_result_that_feeds_a_secret_argument_is_hidden_in_store_load_run_and_views(tmp_path: Path) -> None:
    plan = Plan(goal="log in and use it", steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="use", tool="use", args={"token": "$login"}, needs=["login"]),
        Step(id="say", tool="echo", args={"text": "$login"}, needs=["login"]),  # echoes it, under no secret name
    ])
    path = tmp_path / "runs.sqlite"
    result = planbook.run(plan, tools=_box(), store=path)
    assert result.ok and result.outputs["login"] == TOKEN  # the run itself has it
    assert not _traces(_views(result), TOKEN)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert TOKEN.encode() not in raw
    stored = load_run(store=path)
    assert stored.plan.step("login").result != TOKEN and TOKEN not in str(stored.plan.step("say").result)
    assert not _traces(_views(stored), TOKEN)


# ------------------------------------------------------------- edits and diffs
def test_an_edited_password_is_hidden_in_the_revision_diff() -> None:
    plan = Plan(steps=[
        Step(id="a", tool="echo", args={"text": "first"}),
        Step(id="d", tool="use", args={"token": "old-token-value-1"}, needs=["a"]),
    ])
    handle = planbook.start(plan, tools=_box(), approve=["d"])
    try:
        handle.edit("d", token="new-token-value-2")
        handle.approve("d")
        result = handle.wait()
    finally:
        handle.stop()
    assert result.ok, result.error
    assert result.revisions, "the edit is a revision with its diff"
    for text in (_views(result), *[str(d) for d in result.revisions],
                 *[d._repr_mimebundle_()["text/html"] for d in result.revisions]):
        assert "old-token-value-1" not in text and "new-token-value-2" not in text, text


# --------------------------------------------------------------- OpenTelemetry
@pytest.fixture
def spans() -> Any:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from planbook import otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider, otel
    otel.uninstrument()
    provider.shutdown()


def _span_texts(exporter: Any) -> str:
    parts: list[str] = []
    for span in exporter.get_finished_spans():
        parts += [span.name, repr(dict(span.attributes or {})), str(span.status.description or "")]
        parts += [f"{e.name} {dict(e.attributes or {})!r}" for e in span.events]
    return "\n".join(parts)


@pytest.mark.parametrize("capture_content", [False, True])
def test_spans_carry_what_the_store_keeps(spans: Any, capture_content: bool) -> None:
    exporter, provider, otel = spans
    otel.instrument(provider, capture_content=capture_content)
    plan = Plan(goal=f"log in, then deploy with {PASSWORD}", steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="use", tool="use", args={"token": "$login"}, needs=["login"]),
        Step(id="say", tool="echo", args={"text": PASSWORD}, needs=["use"]),
        Step(id="d", tool="deploy", args={"env": "prod", "password": PASSWORD}, needs=["say"]),
    ])
    result = planbook.run(plan, tools=_box(), on_failure="skip")
    assert result.outputs["say"] == f"you said {PASSWORD}"
    text = _span_texts(exporter)
    assert "invoke_workflow" in text
    assert not _traces(text, PASSWORD, TOKEN), _traces(text, PASSWORD, TOKEN)
    assert "hunter9-url-pw" not in text and "abcDEF123456ghi" not in text
    if capture_content:
        assert '"***"' in text  # the login step's result, as the store keeps it


# ------------------------------------------------------ the command line and MCP
ECHO_TOOLS = '''
import planbook

box = planbook.Toolbox()


@box.tool(cache=False)
def login(user: str) -> str:
    return "Tok-Zq81-secret-abc"


@box.tool(cache=False)
def use(token: str) -> str:
    return "used"


@box.tool(cache=False)
def echo(text: str, password: str = "") -> str:
    print(f"echoing {text} with {password}")
    return f"you said {text}"
'''

ECHO_PLAN = """steps:
  - {id: login, tool: login, args: {user: ada}}
  - {id: use, tool: use, args: {token: $login}, needs: [login]}
  - {id: say, tool: echo, args: {text: hunter2-Qx9-staging, password: hunter2-Qx9-staging}}
"""


def test_the_command_line_prints_answers_through_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "echo_tools.py").write_text(ECHO_TOOLS)
    (tmp_path / "plan.yaml").write_text(ECHO_PLAN)
    monkeypatch.syspath_prepend(str(tmp_path))
    from planbook.cli import main

    code = main(["run", str(tmp_path / "plan.yaml"), "--tools", "echo_tools:box", "--plain",
                 "--store", str(tmp_path / "runs.sqlite")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "Result of step say" in out and "you said ***" in out and "echoing *** with ***" in out
    assert not _traces(out + err, PASSWORD, TOKEN)


def test_the_mcp_server_answers_through_the_gate(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from planbook.mcp.server import PlanbookServer

    server = PlanbookServer(tools=_box(), store=str(tmp_path / "runs.sqlite"))
    spec = ECHO_PLAN.replace("echo, args: {text: hunter2-Qx9-staging, password: hunter2-Qx9-staging}",
                             "deploy, args: {env: staging, password: hunter2-Qx9-staging}") + \
        "  - {id: tell, tool: echo, args: {text: $login}, needs: [login]}\n"
    text, structured, failed = server.call("run_plan", {"spec": spec, "on_failure": "skip"})
    assert structured is not None and structured["outputs"]["tell"] == "you said ***"
    shown, _, _ = server.call("show_run", {})
    assert not _traces(text + repr(structured) + shown, PASSWORD, TOKEN)


# ------------------------------------------------------------------- the widget
def test_the_live_widget_sends_the_browser_nothing_secret() -> None:
    pytest.importorskip("anywidget")
    from planbook import Runner
    from planbook.views.live import LiveView
    from planbook.views.widget import PlanView

    plan = Plan(goal=f"use {PASSWORD}", steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="use", tool="use", args={"token": "$login"}, needs=["login"]),
        Step(id="say", tool="echo", args={"text": "$login"}, needs=["login"]),
        Step(id="d", tool="deploy", args={"env": "prod", "password": PASSWORD}, needs=["say"]),
    ])
    runner = Runner(plan, tools=_box(), on_failure="skip")
    view = PlanView(runner)
    bridge = LiveView(runner, view, rate=1000, burst=1000)
    try:
        runner.run()
    finally:
        bridge.close()
    sent = repr(view.widget.get_state()) + repr([view.pane(s.id) for s in plan.steps])
    assert "you said" in sent  # the panes were there to look at
    assert not _traces(sent, PASSWORD, TOKEN)
    view.widget.close()


def test_args_shown_to_the_editor_hide_secrets_and_an_unchanged_one_is_kept() -> None:
    gate = RunSecrets()
    args = {"to": "ann", "password": PASSWORD, "token": "$login"}
    shown = gate.shown_args(args)
    assert shown == {"to": "ann", "password": "***", "token": "$login"}
    edited = dict(shown, to="bob")
    assert RunSecrets.kept_secrets(edited, args) == {"to": "bob", "password": PASSWORD, "token": "$login"}
    assert RunSecrets.kept_secrets({"password": "new-one"}, args) == {"password": "new-one"}
