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
from planbook.engine.resume import load_run
from planbook.outbound import RunSecrets
from planbook.outbound.redact import echo_forms

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
    assert result.plan.id == "deploy-with-password-please"  # made again from the goal as it may be shown
    assert not _traces(_views(result), PASSWORD)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert PASSWORD.encode() not in raw and PASSWORD.lower().encode() not in raw
    stored = load_run(store=path)
    assert "***" in stored.plan.goal and stored.plan.id == "deploy-with-password-please"
    assert not _traces(_views(stored), PASSWORD)


def test_an_id_cut_inside_a_secret_keeps_no_part_of_it() -> None:
    def planner(goal: str, history: Any, last_error: Any) -> list[Step]:
        return [Step(id="in", tool="deploy", args={"env": "prod", "password": PASSWORD})]

    result = planbook.run(f"deploy the build to prod using {PASSWORD}", planner=planner, tools=_box(),
                          on_failure="skip")
    assert "hunter2" not in result.plan.id and not _traces(_views(result), PASSWORD)


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
    from planbook.cli.mcpserve import PlanbookServer

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
    assert gate.kept_secrets(edited, args) == {"to": "bob", "password": PASSWORD, "token": "$login"}
    assert gate.kept_secrets({"password": "new-one"}, args) == {"password": "new-one"}



# ------------------------------------------------------------- the review's findings
def test_a_secret_named_key_inside_an_argument_is_a_secret_of_the_run(tmp_path: Path) -> None:
    box = Toolbox()

    @box.tool(cache=False)
    def call(url: str, headers: dict) -> str:
        raise RuntimeError(f"401 from {url} with headers {headers}")

    @box.tool(cache=False)
    def login(user: str) -> str:
        return TOKEN

    plan = Plan(steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="c", tool="call", args={"url": "https://api.x/v1", "headers": {"X-Api-Key": "key-Zq81-abcdef"}}),
        Step(id="h", tool="call", args={"url": "https://api.x/v2", "headers": {"Authorization": "$login"}},
             needs=["login"]),
    ])
    result = planbook.run(plan, tools=box, on_failure="skip", store=tmp_path / "runs.sqlite")
    assert result.secrets.holders == {"login"}
    assert not _traces(_views(result) + str(result.plan), "key-Zq81-abcdef", TOKEN)
    assert TOKEN.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir())


def test_a_holder_whose_result_is_an_object_keeps_its_secret() -> None:
    from dataclasses import dataclass

    @dataclass
    class Token:
        value: str

    box = _box()

    @box.tool(cache=False)
    def login_object(user: str) -> Token:
        return Token(TOKEN)

    @box.tool(cache=False)
    def use_any(token: Any) -> str:
        return "used"

    @box.tool(cache=False)
    def echo_any(text: Any) -> str:
        return f"you said {text}"

    plan = Plan(steps=[
        Step(id="login", tool="login_object", args={"user": "ada"}),
        Step(id="use", tool="use_any", args={"token": "$login"}, needs=["login"]),
        Step(id="say", tool="echo_any", args={"text": "$login"}, needs=["login"]),
    ])
    result = planbook.run(plan, tools=box)
    assert result.ok and not _traces(_views(result), TOKEN)


def test_only_a_holder_s_secret_fields_are_learned_not_every_word_of_its_result() -> None:
    box = _box()

    @box.tool(cache=False)
    def oauth(user: str) -> dict:
        return {"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3600, "scope": "read write"}

    @box.tool(cache=False)
    def use_session(token: dict) -> str:
        return "used"

    plan = Plan(steps=[
        Step(id="login", tool="oauth", args={"user": "ada"}),
        Step(id="use", tool="use_session", args={"token": "$login"}, needs=["login"]),
        Step(id="say", tool="echo", args={"text": "cache TTL is 3600 seconds, scope read write"}),
    ])
    result = planbook.run(plan, tools=box)
    assert result.outputs["say"] == "you said cache TTL is 3600 seconds, scope read write"
    assert "3600 seconds, scope read write" in _views(result)  # not garbled into *** seconds, scope ***
    assert TOKEN not in _views(result)


def test_the_run_finished_event_carries_the_error_as_the_result_does() -> None:
    def planner(goal: str, history: Any, last_error: Any) -> list[Step]:
        if history:
            raise ValueError(f"cannot replan: the login used password={PASSWORD!r}")
        return [Step(id="d", tool="deploy", args={"env": "x", "password": PASSWORD}, on_failure="replan")]

    result = planbook.run("deploy it", planner=planner, tools=_box())
    assert result.status == "failed"
    finished = [e for e in result.events if e.kind == "run.finished"][-1]
    assert PASSWORD not in str(finished.data) and PASSWORD not in (result.error or "")


def test_a_url_encoded_secret_is_hidden() -> None:
    from urllib.parse import urlencode

    box = _box()
    secret = "s3cret pass@word/42"

    @box.tool(cache=False)
    def sign_in(user: str, password: str) -> str:
        raise ConnectionError(f"GET https://api.x/login?{urlencode({'user': user, 'pass': password})} -> 401")

    result = planbook.run(Plan(steps=[Step(id="l", tool="sign_in", args={"user": "bob", "password": secret})]),
                          tools=box)
    assert "s3cret+pass%40word%2F42" not in (result.error or "") and "pass=***" in (result.error or "")


class _Markup:
    def __init__(self, html: str = "", svg: str = "") -> None:
        self.html, self.svg = html, svg

    def _repr_html_(self) -> str | None:
        return self.html or None

    def _repr_svg_(self) -> str | None:
        return self.svg or None


def test_a_result_s_html_or_picture_that_shows_a_secret_is_shown_as_text_with_it_hidden() -> None:
    import base64

    picture = f"<svg xmlns='http://www.w3.org/2000/svg'><text>{PASSWORD}</text></svg>"
    encoded = base64.b64encode(picture.encode()).decode()
    box = _box()

    @box.tool(cache=False)
    def show(kind: str, password: str = "") -> _Markup:
        if kind == "split":  # the secret split by a tag: the browser shows it whole
            return _Markup(html="<p>conn: hunter2-Qx9-<b>staging</b></p>")
        if kind == "svg":
            return _Markup(svg=picture)
        return _Markup(html=f'<p>see</p><img src="data:image/svg+xml;base64,{encoded}">')

    plan = Plan(steps=[Step(id=k, tool="show", args={"kind": k, "password": PASSWORD}) for k in ("split", "svg", "img")])
    result = planbook.run(plan, tools=box)
    html = result._repr_mimebundle_()["text/html"]
    assert "staging</b>" not in html and encoded not in html
    assert base64.b64encode(picture.encode()).decode() not in html


def test_a_mistyped_secret_argument_is_not_echoed_by_the_plan_check() -> None:
    from planbook.data.errors import PlanError

    with pytest.raises(PlanError) as info:
        planbook.run(Plan(steps=[Step(id="d", tool="deploy", args={"env": "x", "password": [PASSWORD]})]),
                     tools=_box())
    assert PASSWORD not in str(info.value) and "got ***" in str(info.value)


def test_an_edit_from_the_live_view_keeps_a_password_the_editor_showed_as_stars() -> None:
    pytest.importorskip("anywidget")
    import json

    from planbook import Runner
    from planbook.notebook.handle import NotebookHandle
    from planbook.views.live import LiveView
    from planbook.views.steer import connect
    from planbook.views.widget import PlanView

    received: list[tuple[str, str]] = []
    box = Toolbox()

    @box.tool(cache=False)
    def deploy(env: str, password: str) -> str:
        received.append((env, password))
        return "ok"

    runner = Runner(Plan(steps=[Step(id="d", tool="deploy", args={"env": "staging", "password": PASSWORD})]),
                    tools=box, approve=["d"])
    target = PlanView(runner, note="live", controls=True)
    bridge = LiveView(runner, target)
    handle = NotebookHandle(runner, view=bridge)
    connect(bridge, handle)
    handle = handle.begin()
    try:
        handle.wait_for_approval(timeout=30)
        target.render(runner)
        shown = target.widget.waiting["d"]
        assert shown == {"env": "staging", "password": "***"}
        target._on_front_end(None, {"type": "control", "action": "edit", "step": "d",
                                    "args": json.dumps(dict(shown, env="prod"))}, [])
        assert not target.widget.errors
        result = handle.wait(30)
    finally:
        bridge.close()
        target.widget.close()
    assert result.ok and received == [("prod", PASSWORD)]


def test_a_render_hider_hides_what_text_hides_and_each_render_reads_the_environment_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A view built at once reads the environment's secrets once (``RunSecrets.hider``), but a
    key set after one render is hidden in the next: the text view of a plan is one render."""
    from planbook.views.text import format_markdown, format_plan

    plan = Plan(id="p", steps=[Step(id="a", tool="echo", task="send it to sk-live-0123456789abcdef")])
    gate = RunSecrets.of_plan(plan)
    hide = gate.hider()
    for text in ("plain", "password=hunter22 here", "Bearer abcdefghijklmnop", "", None):
        assert hide(text) == gate.text(text)
    monkeypatch.setenv("OPENAI_API_KEY", "key-set-between-renders-0042")
    step = Step(id="b", tool="echo", task="uses key-set-between-renders-0042")
    later = Plan(id="p", steps=[step])
    assert "key-set-between-renders-0042" not in format_plan(later, gate)
    assert "key-set-between-renders-0042" not in format_markdown(later, gate)


def test_the_gate_sees_every_change_of_the_model_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate tells a change of OPENAI_API_KEY / OPENAI_BASE_URL from os.environ's own mapping
    (cheaper than os.environ.get): set, changed and removed, each is seen at the next text."""
    gate = RunSecrets()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert gate.text("uses qqqq-1234567890-zz") == "uses qqqq-1234567890-zz"
    monkeypatch.setenv("OPENAI_API_KEY", "qqqq-1234567890-zz")
    assert gate.text("uses qqqq-1234567890-zz") == "uses ***"
    monkeypatch.setenv("OPENAI_API_KEY", "rrrr-0987654321-yy")
    assert gate.text("uses rrrr-0987654321-yy") == "uses ***"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pa55word-xyz@127.0.0.1:9/v1")
    assert "pa55word-xyz" not in gate.text("at pa55word-xyz")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert gate.text("uses rrrr-0987654321-yy") == "uses rrrr-0987654321-yy"
