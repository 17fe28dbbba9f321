"""What becomes secret, and when: the routes a secret takes into a run.

A step that feeds a step holding a secret holds one too, however far upstream (by a ``$id``
reference, whole or inline, or as an agent's need). A holder's result is learned before
anything about its call is written, shown or sent; its live output waits for its end. Live
output never shows a fragment of a secret. An edit keeps the secrets it does not change, key
by key and inside a text. A plan refused before any run exists does not quote a secret.

Each test uses secrets of its own: the process's vault keeps what earlier tests learned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, ScriptedAgent, Step, Toolbox
from planbook.data.errors import PlanError
from planbook.engine.liveoutput import OUTPUT_TAIL, OutputRelay
from planbook.engine.resume import load_run
from planbook.outbound import RunSecrets
from planbook.outbound.redact import echo_forms


def _fragments(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def _leaks(text: str, *secrets: str) -> list[str]:
    """Every form, or 8-character fragment, of ``secrets`` found in ``text``."""
    return sorted({f for s in secrets for f in echo_forms(s) | _fragments(s) if f in text})


def _chain_box(token: str, printed: list[str] | None = None) -> Toolbox:
    box = Toolbox()

    @box.tool(cache=False)
    def login(user: str) -> str:
        print(f"logged in, token {token}")
        return token

    @box.tool(cache=False)
    def pick(x: str) -> str:
        print(f"picked {x}")
        return x

    @box.tool(cache=False)
    def fetch(token: str) -> str:
        if printed is not None:
            printed.append(token)
        return "fetched"

    return box


def _everything(result: Any) -> str:
    bundle = result._repr_mimebundle_()
    return "\n".join([str(result), bundle["text/plain"], bundle["text/html"], bundle["text/markdown"],
                      *(f"{e.kind} {e.data!r}" for e in result.events),
                      *(f"{s.output}\n{s.error}" for s in [*result.plan.steps, *result.history])])


# ------------------------------------------------------------ holders, any number of steps up
def test_a_step_that_feeds_a_holder_holds_a_secret_through_any_number_of_steps(tmp_path: Path) -> None:
    token = "Tok-Chain-route1-9q8w7e"
    got: list[str] = []
    plan = Plan(steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="pick", tool="pick", args={"x": "$login"}),
        Step(id="fetch", tool="fetch", args={"token": "$pick"}),
    ])
    path = tmp_path / "runs.sqlite"
    result = planbook.run(plan, tools=_chain_box(token, got), store=path)
    assert result.ok and got == [token]  # the tool itself gets the real value
    assert result.secrets.holders == {"login", "pick"}
    assert not _leaks(_everything(result), token)
    assert token.encode() not in b"".join(p.read_bytes() for p in tmp_path.iterdir())
    stored = load_run(store=path)
    assert stored.plan.step("login").result != token and not _leaks(_everything(stored), token)


def test_inline_references_and_an_agent_s_needs_carry_a_holder_upstream() -> None:
    token = "Tok-Chain-route2-5r4t3y"
    box = _chain_box(token)
    writer = ScriptedAgent("writer", {".": lambda task, ctx: f"note: {ctx.needs['pick']}"})
    plan = Plan(steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="pick", tool="pick", args={"x": "got ${login} here"}),
        Step(id="note", agent="writer", task="write it down", needs=["pick"]),
        Step(id="fetch", tool="fetch", args={"token": "$note"}),
    ])
    result = planbook.run(plan, tools=box, agents=[writer])
    assert result.ok, result.error
    assert result.secrets.holders == {"login", "pick", "note"}
    assert not _leaks(_everything(result), token)


def test_a_later_revision_makes_an_earlier_step_a_holder_and_learns_its_result() -> None:
    gate = RunSecrets()
    first = Plan(steps=[Step(id="a", tool="t", args={"x": 1}), Step(id="b", tool="t", args={"x": "$a"})])
    first.steps[0].set_state(result="Result-of-a-route3-77")
    gate.learn_plan(first)
    assert gate.holders == set()
    later = Plan(steps=[*first.steps, Step(id="c", tool="t", args={"api_key": "$b"})])
    gate.learn_plan(later)
    assert gate.holders == {"a", "b"} and gate.text("Result-of-a-route3-77") == "***"


# ------------------------------------------------------- known before anything is told
def test_a_holder_s_output_and_finished_summary_never_carry_its_result() -> None:
    token = "Tok-Chain-route4-1u2i3o"
    announced: list[str] = []

    def on_event(event: Any) -> None:
        announced.append(f"{event.kind} {event.data!r}")

    plan = Plan(steps=[
        Step(id="login", tool="login", args={"user": "ada"}),
        Step(id="pick", tool="pick", args={"x": "$login"}),
        Step(id="fetch", tool="fetch", args={"token": "$pick"}),
    ])
    result = planbook.run(plan, tools=_chain_box(token), parallel=2, on_event=on_event)  # on worker threads
    assert result.ok, result.error
    assert any(a.startswith("step.output") for a in announced)  # live output was told
    finished = [e for e in result.events if e.kind == "step.finished" and e.step in ("login", "pick")]
    assert [e.data.get("result") for e in finished] == ["***", "***"]
    assert result.plan.step("login").output.startswith("logged in, token ***")
    assert not _leaks("\n".join(announced) + _everything(result), token)


def _relay(gate: RunSecrets) -> tuple[OutputRelay, list[str], list[float]]:
    shown: list[str] = []
    now = [0.0]
    relay = OutputRelay(lambda step, text: shown.append(text), gate.text, lambda: now[0], lambda: None, secrets=gate)
    return relay, shown, now


def test_a_holder_s_live_output_waits_for_its_result_then_shows_masked() -> None:
    token = "Tok-Held-route5-abcdef12"
    gate = RunSecrets()
    gate.learn_plan(Plan(steps=[Step(id="login", tool="t", args={}), Step(id="use", tool="t", args={"token": "$login"})]))
    relay, shown, now = _relay(gate)
    step = Step(id="login", tool="t")
    live = relay.buffer(step)
    live.write(f"token is {token}\n")
    relay.poll()
    assert shown == []  # not known yet: nothing is told
    gate.learn_outcome("login", token)
    relay.finish(live, gate.text(live.text()))
    assert shown == ["token is ***\n"]


# ------------------------------------------------------------- live output, never a fragment
def test_a_secret_printed_over_two_prints_reaches_the_live_view_as_stars() -> None:
    password = "Split-Print-Password-route6-0123456"  # 35 characters, printed half by half
    gate = RunSecrets()
    gate.learn([password])
    relay, shown, now = _relay(gate)
    live = relay.buffer(Step(id="s", tool="t"))
    half = len(password) // 2
    live.write(f"connecting with {password[:half]}")
    relay.poll()
    now[0] += 1
    live.write(f"{password[half:]} now\n")
    relay.poll()
    assert shown and shown[-1] == "connecting with *** now\n"
    assert not _leaks("\n".join(shown), password) and not any(password[:6] in s for s in shown)


def test_the_tail_of_a_long_output_keeps_no_fragment_of_a_cut_secret() -> None:
    password = "Tail-Cut-Password-route7-0123456789ab"  # 37 characters
    gate = RunSecrets()
    gate.learn([password])
    relay, shown, now = _relay(gate)
    live = relay.buffer(Step(id="s", tool="t"))
    # the secret many times over: masking shortens the text by thousands of characters, so a
    # window cut before masking ends up inside the shown tail
    line = f"{password}\n"
    live.write(line * ((OUTPUT_TAIL + 8_192) // len(line) + 1))
    for cut in range(1, len(password)):  # wherever the window's start falls in a copy
        live.write("x" * 1)
        now[0] += 1
        relay.poll()
    assert shown and all(len(s) <= OUTPUT_TAIL for s in shown)
    assert not _leaks("\n".join(shown), password)


def test_the_carry_holds_back_only_the_start_of_a_known_secret() -> None:
    gate = RunSecrets()
    gate.learn(["Carry-Secret-route8-xyz"])
    assert gate.unfinished_tail("plain line\n") == 0
    assert gate.unfinished_tail("using Carry-Sec") == len("Carry-Sec")
    assert gate.unfinished_tail("using ***") == 0


# -------------------------------------------------------------------------- edits
def test_an_edit_of_one_header_keeps_the_hidden_authorization() -> None:
    gate = RunSecrets()
    current = {"url": "https://api.example/v1", "headers": {"Authorization": "Bearer edit-route9-secret-1",
                                                           "Accept": "application/json"}}
    shown = gate.shown_args(current)
    assert shown["headers"] == {"Authorization": "***", "Accept": "application/json"}
    edited = {"url": "https://api.example/v1", "headers": dict(shown["headers"], Accept="text/csv")}
    assert gate.kept_secrets(edited, current)["headers"] == {"Authorization": "Bearer edit-route9-secret-1",
                                                             "Accept": "text/csv"}


def test_an_edit_of_a_url_s_path_keeps_its_hidden_credentials() -> None:
    gate = RunSecrets()
    current = {"url": "https://bob:edit-route10-pw@db.example/old/path"}
    shown = gate.shown_args(current)
    assert shown == {"url": "https://***@db.example/old/path"}
    assert gate.kept_secrets({"url": "https://***@db.example/new/path"}, current) == \
        {"url": "https://bob:edit-route10-pw@db.example/new/path"}
    # the credentials taken out: nothing to put back
    assert gate.kept_secrets({"url": "https://db.example/new"}, current) == {"url": "https://db.example/new"}
    with pytest.raises(ValueError, match=r"hid 1 part\(s\) as \*\*\* and the edit shows 2"):
        gate.kept_secrets({"url": "https://***@***.example/new"}, current)


def test_hidden_parts_are_cut_one_way_or_not_at_all() -> None:
    from planbook.outbound import hidden_parts

    assert hidden_parts("a S1 b S2 c", "a *** b *** c") == ["S1", "S2"]
    assert hidden_parts("p x-y-z q", "p ***-*** q") is None  # x | y-z or x-y | z: not guessed
    assert hidden_parts("other text", "a *** b") is None


def test_an_edit_from_the_live_view_keeps_the_hidden_header() -> None:
    received: list[dict[str, Any]] = []
    box = Toolbox()

    @box.tool(cache=False)
    def call(url: str, headers: dict) -> str:
        received.append(headers)
        return "ok"

    plan = Plan(steps=[Step(id="c", tool="call", args={
        "url": "https://api.example", "headers": {"X-Api-Key": "edit-route11-key-abcd", "Accept": "json"}})])
    handle = planbook.start(plan, tools=box, approve=["c"])
    try:
        handle.wait_for_approval(timeout=30)
        gate = handle.runner.secrets
        shown = gate.shown_args(handle.runner.plan.step("c").args)
        edited = dict(shown, headers=dict(shown["headers"], Accept="xml"))
        handle.edit("c", gate.kept_secrets(edited, handle.runner.plan.step("c").args))
        handle.approve("c")
        result = handle.wait(30)
    finally:
        handle.stop()
    assert result.ok and received == [{"X-Api-Key": "edit-route11-key-abcd", "Accept": "xml"}]


# ------------------------------------------------------------- errors before a run exists
def _deploy_box() -> Toolbox:
    box = Toolbox()

    @box.tool(cache=False)
    def call(url: str, headers: dict[str, str]) -> str:
        return "ok"

    @box.tool(cache=False)
    def deploy(env: str, password: str) -> str:
        return "ok"

    return box


def test_a_refused_plan_does_not_quote_a_mistyped_secret_inside_a_dict_argument() -> None:
    plan = Plan(steps=[Step(id="c", tool="call", args={"url": "u", "headers": {"X-Api-Key": ["err-route12-key-a1b2"]}})])
    with pytest.raises(PlanError) as info:
        planbook.run(plan, tools=_deploy_box())
    text = str(info.value) + repr(info.value) + "".join(str(p) for p in info.value.problems)
    assert "expects dict[str, str]" in text and not _leaks(text, "err-route12-key-a1b2")


def test_a_password_starting_with_a_dollar_is_not_quoted_as_an_unknown_reference() -> None:
    plan = Plan(steps=[Step(id="d", tool="deploy", args={"env": "x", "password": "$Dollar-route13-pw"})])
    with pytest.raises(PlanError) as info:
        planbook.run(plan, tools=_deploy_box())
    text = str(info.value) + "".join(str(p) for p in info.value.problems)
    assert "argument 'password' is named like a secret" in text and "$$" in text
    assert not _leaks(text, "$Dollar-route13-pw", "Dollar-route13-pw")


def test_a_spec_refused_while_read_does_not_quote_its_secrets() -> None:
    # the password also pasted where no name says it is one: known from its secret-named use
    spec = ("steps:\n  - {id: a, tool: deploy, args: {env: x, password: err-route14-tok-9z8y}}\n"
            "  - {id: c, tool: call, args: {url: u}, needs: {a: err-route14-tok-9z8y}}\n")
    with pytest.raises(PlanError) as info:
        Plan.parse(spec)
    text = str(info.value) + repr(info.value)
    assert "'needs' must be a list" in text and not _leaks(text, "err-route14-tok-9z8y")


def test_planbook_check_and_the_mcp_answer_do_not_quote_a_refused_plan_s_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "route_tools.py").write_text(
        "import planbook\nbox = planbook.Toolbox()\n\n\n@box.tool(cache=False)\n"
        "def call(url: str, headers: dict[str, str]) -> str:\n    return 'ok'\n\n\n@box.tool(cache=False)\n"
        "def deploy(env: str, password: str) -> str:\n    return 'ok'\n")
    spec = ("steps:\n  - {id: c, tool: call, args: {url: u, headers: {X-Api-Key: [err-route15-key-c3d4]}}}\n"
            "  - {id: d, tool: deploy, args: {env: x, password: $Dollar-route15-pw}}\n")
    (tmp_path / "plan.yaml").write_text(spec)
    monkeypatch.syspath_prepend(str(tmp_path))
    from planbook.cli import main

    code = main(["check", str(tmp_path / "plan.yaml"), "--tools", "route_tools:box"])
    out, err = capsys.readouterr()
    assert code != 0 and "expects dict[str, str]" in out + err and "named like a secret" in out + err
    assert not _leaks(out + err, "err-route15-key-c3d4", "Dollar-route15-pw")
    pytest.importorskip("mcp")
    import route_tools  # type: ignore[import-not-found]

    from planbook.cli.mcpserve import PlanbookServer

    text, structured, failed = PlanbookServer(tools=route_tools.box).call("run_plan", {"spec": spec})
    assert failed and not _leaks(text + repr(structured), "err-route15-key-c3d4", "Dollar-route15-pw")
