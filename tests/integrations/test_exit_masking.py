"""The integrations' exits mask structurally: every span is made through a tracer whose spans mask
what is set on them (with and without ``capture_content``), and the values a toolbox is started
with (secret-named env values, Authorization-like headers, a URL's credentials, ``planbook.Secret``)
are secrets of the process before its server starts, so its log lines quoted in ``MCPError``, the
step's error, the record and the store show ``***``."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import planbook
import planbook.mcp
from planbook.outbound import VAULT, mask_text


def fragments(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def assert_clean(text: str, *secrets: str) -> None:
    leaked = [f for s in secrets for f in fragments(s) if f in text]
    assert not leaked, f"fragments of a secret left the process: {leaked}"


# ------------------------------------------------------------------------------------ spans
otel_sdk = pytest.importorskip("opentelemetry.sdk")


@pytest.fixture
def spans() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from planbook import otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    otel.uninstrument()
    provider.shutdown()


def exported(exporter: Any) -> str:
    """Every span as the exporter would send it (OTLP's JSON form of each)."""
    return "\n".join(span.to_json() for span in exporter.get_finished_spans())


@pytest.mark.parametrize("capture", [False, True])
def test_a_secret_in_what_no_handler_masks_is_not_exported(spans: Any, capture: bool) -> None:
    from planbook import otel

    exporter, provider = spans
    secret = "otelcanary7Hq72Ls08"
    planbook.Secret(secret, name="otel-step")
    otel.instrument(provider, capture_content=capture)
    box = planbook.Toolbox()

    @box.tool
    def fetch(what: str) -> str:
        """Answers with what it fetched."""
        return f"fetched {what}"

    @box.tool
    def broken() -> None:
        """Fails quoting the secret."""
        raise ValueError(f"{secret}: refused")

    # the step's id holds the secret: ids go on spans as they are (planbook.step.id, the tool call's id)
    result = planbook.run(f"steps:\n  - {{id: use_{secret}, tool: fetch, args: {{what: {secret}}}}}\n"
                          f"  - {{id: b, tool: broken, needs: [use_{secret}]}}\n", tools=box)
    assert result.status == "failed"
    text = exported(exporter)
    assert "execute_tool fetch" in text and "use_***" in text
    assert_clean(text, secret)


def test_the_tracer_masks_every_way_a_span_is_given_text(spans: Any) -> None:
    from opentelemetry.trace import Status, StatusCode

    from planbook.otel import MaskedTracer

    exporter, provider = spans
    secret = "otelcanary9Pw41Rt33"
    planbook.Secret(secret, name="otel-tracer")
    tracer = MaskedTracer(provider.get_tracer("test"))
    parent = tracer.start_span(f"parent {secret}", attributes={"a": secret, "list": ["x", secret], "n": 3})
    from opentelemetry import trace

    child = tracer.start_span("child", context=trace.set_span_in_context(parent))  # type: ignore[arg-type]
    child.set_attribute("b", f"said {secret}")
    child.set_attribute("x_api_key", "not known, but named a key")
    child.set_attributes({"c": secret})
    child.add_event(f"event {secret}", attributes={"d": secret})
    child.update_name(f"renamed {secret}")
    child.record_exception(RuntimeError(f"failed on {secret}"))
    child.set_status(Status(StatusCode.ERROR, f"because {secret}"))
    child.end()
    parent.set_status(StatusCode.ERROR, f"because {secret}")
    parent.end()
    finished = {s.name: s for s in exporter.get_finished_spans()}
    assert set(finished) == {"parent ***", "renamed ***"}
    assert finished["renamed ***"].parent.span_id == finished["parent ***"].context.span_id
    assert finished["renamed ***"].attributes["x_api_key"] == "***"
    assert finished["parent ***"].attributes["n"] == 3 and finished["parent ***"].attributes["list"] == ("x", "***")
    assert_clean(exported(exporter), secret)


# ------------------------------------------------------------------------------- toolboxes
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("mcp") is None,
                               reason='needs the mcp extra: pip install -e ".[test-mcp]"')

#: a stdio server that says what it was started with on stderr (not under the variable's name), then
#: either fails before it answers, or serves one tool whose answer quotes it
ECHO_SERVER = textwrap.dedent('''
    import os, sys
    token = os.environ.get("GITHUB_TOKEN", "")
    print("starting with", token, "and", os.environ.get("PLAIN_SETTING", ""), file=sys.stderr, flush=True)
    if "fail" in sys.argv[1:]:
        sys.exit(3)
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("echo")

    @server.tool()
    def whoami() -> str:
        """Says who it is logged in as, quoting its token."""
        return "logged in with " + token

    server.run()
''')


@pytest.fixture
def echo_script(tmp_path: Path) -> Path:
    path = tmp_path / "echo_server.py"
    path.write_text(ECHO_SERVER)
    return path


@needs_sdk
def test_a_server_that_echoes_its_env_and_fails_is_quoted_masked(echo_script: Path) -> None:
    token = "ghp_canaryEnv5Jk20Lw77Qa"
    with pytest.raises(planbook.MCPError) as raised:
        planbook.mcp.connect([sys.executable, str(echo_script), "fail"],
                             env={"GITHUB_TOKEN": token, "PLAIN_SETTING": "visible-setting"}, start_timeout=30)
    message = str(raised.value)
    assert "starting with ***" in message and "visible-setting" in message  # not secret-named: kept
    assert_clean(message, token)


@needs_sdk
def test_a_toolbox_env_secret_echoed_by_its_tool_is_masked_in_the_run_the_record_and_the_store(
        echo_script: Path, tmp_path: Path) -> None:
    token = "ghp_canaryRun6Tz19Kc83Pw"
    store = tmp_path / "runs.sqlite"
    with planbook.mcp.connect([sys.executable, str(echo_script)], env={"GITHUB_TOKEN": token},
                              start_timeout=30) as box:
        result = planbook.run("steps:\n  - {id: who, tool: whoami}\n", tools=box, store=store)
        log = box.server_log
    assert result.status == "completed", result.error
    assert result.outputs["who"] == {"result": f"logged in with {token}"}  # the run itself has the value
    assert "starting with ***" in log
    shown = "\n".join([str(result), log, json.dumps([e.data for e in result.events], default=repr),
                       result._repr_html_() if hasattr(result, "_repr_html_") else ""])
    assert_clean(shown, token)
    assert_clean(store.read_bytes().decode("utf-8", "replace"), token)


@needs_sdk
def test_a_Secret_given_as_env_is_revealed_only_to_the_server_it_starts(
        echo_script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "ghp_canarySec8Mn31Bv64Xs"
    monkeypatch.setenv("CANARY_GH_TOKEN", token)
    secret = planbook.Secret.env("CANARY_GH_TOKEN")
    with planbook.mcp.connect([sys.executable, str(echo_script)], env={"GITHUB_TOKEN": secret},
                              start_timeout=30) as box:
        assert box._connection.env == {"GITHUB_TOKEN": secret}  # held as the reference
        raw = box._connection.log_text()  # what the server itself wrote: it got the real value
        assert f"starting with {token}" in raw and "starting with ***" in box.server_log
        result = planbook.run("steps:\n  - {id: who, tool: whoami}\n", tools=box)
    assert result.outputs["who"] == {"result": f"logged in with {token}"}
    assert_clean(str(result), token)


@needs_sdk
def test_headers_and_url_credentials_are_secrets_before_the_connection_is_tried() -> None:
    with socket.socket() as free:  # a port nothing listens on: the connection is refused
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    header_token = "canaryHdr4Tq90Zm12Lp"
    api_key = "canaryKey6Vb38Nc57Rd"
    password = "canaryPw2Xe71Ks45Jf"
    named = planbook.Secret("canarySecretHdr3Gy66", name="header-secret")
    with pytest.raises(planbook.MCPError) as raised:
        planbook.mcp.connect(url=f"http://user:{password}@127.0.0.1:{port}/mcp?token=canaryQry9Wn24Hb",
                             headers={"Authorization": f"Bearer {header_token}", "X-Api-Key": api_key,
                                      "X-Other": named, "Accept": "application/json"}, start_timeout=10)
    for value in (header_token, f"Bearer {header_token}", api_key, password, "canaryQry9Wn24Hb"):
        assert value in VAULT and mask_text(f"echo {value}") == "echo ***"
    assert_clean(str(raised.value), header_token, api_key, password, "canaryQry9Wn24Hb")
    from planbook.mcp.client import MCPToolbox
    from planbook.mcp.connection import Connection

    unstarted = MCPToolbox(Connection(f"http://user:{password}@127.0.0.1:{port}/mcp", command=None, env=None,
                                      cwd=None, url=f"http://user:{password}@127.0.0.1:{port}/mcp", headers=None))
    assert_clean(repr(unstarted), password)
    unstarted.close()


@needs_sdk
def test_a_secret_named_flag_of_the_command_is_a_secret_before_the_server_starts(echo_script: Path) -> None:
    token = "canaryArg1Dd58Pq30Ws"
    with pytest.raises(planbook.MCPError) as raised:
        planbook.mcp.connect([sys.executable, str(echo_script), "fail", "--api-key", token], start_timeout=30)
    assert token in VAULT
    assert_clean(str(raised.value), token)
