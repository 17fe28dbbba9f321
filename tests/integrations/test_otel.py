"""OpenTelemetry spans from a run's events, checked with the SDK's in-memory exporter (names,
parents, attributes, overlapping parallel steps, redaction, errors, the trace id of a stored
run) and with one OTLP/HTTP post to a receiver on 127.0.0.1."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import planbook  # noqa: E402
from planbook import (  # noqa: E402
    AgentReply,
    Step,
    Toolbox,
    otel,  # noqa: E402
)


@pytest.fixture
def spans() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    otel.uninstrument()
    provider.shutdown()


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


def test_a_run_is_a_workflow_span_with_a_tool_span_per_step_and_errors_marked(spans: Any) -> None:
    exporter, provider = spans
    otel.instrument(provider)
    box = Toolbox()

    @box.tool
    def double(x: int) -> int:
        """Doubles."""
        return 2 * x

    @box.tool
    def broken() -> int:
        """Fails."""
        raise ValueError("the sensor is unplugged")

    result = planbook.run("steps:\n  - {id: a, tool: double, args: {x: 2}}\n  - {id: b, tool: broken, needs: [a]}",
                          tools=box)
    assert result.status == "failed"
    found = by_name(exporter)
    assert set(found) == {"invoke_workflow plan", "execute_tool double", "execute_tool broken"}
    root, ok, bad = found["invoke_workflow plan"], found["execute_tool double"], found["execute_tool broken"]
    assert root.parent is None and root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert ok.parent.span_id == root.context.span_id and bad.parent.span_id == root.context.span_id
    assert {s.context.trace_id for s in (root, ok, bad)} == {root.context.trace_id}
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "double" and ok.attributes["planbook.step.id"] == "a"
    assert "gen_ai.tool.call.arguments" not in ok.attributes  # content only when opted in
    assert bad.status.status_code.name == "ERROR" and bad.attributes["error.type"] == "ValueError"
    assert "the sensor is unplugged" in bad.status.description
    assert root.status.status_code.name == "ERROR" and root.attributes["planbook.reason"] == "aborted"
    # the events' own times: a step's span lies within the run's
    events = {(e.kind, e.step): e.time for e in result.events}
    assert ok.start_time == int(events[("step.started", "a")] * 1e9)
    assert root.start_time <= ok.start_time <= ok.end_time <= bad.start_time <= bad.end_time <= root.end_time


def test_parallel_steps_overlap_and_content_is_captured_redacted_when_asked(spans: Any) -> None:
    exporter, provider = spans
    otel.instrument(provider, capture_content=True)
    both_running = threading.Barrier(2, timeout=60)
    box = Toolbox()

    @box.tool
    def fetch(url: str, api_key: str) -> str:
        """Waits until the other call runs too, so the two overlap for certain."""
        both_running.wait()
        return f"page of {url}"

    spec = """steps:
  - {id: a, tool: fetch, args: {url: "https://a.example", api_key: sk-abcdefghijklmnopqrstuvwx}}
  - {id: b, tool: fetch, args: {url: "https://b.example", api_key: hunter2-secret}}
"""
    result = planbook.run(spec, tools=box, parallel=2)
    assert result.status == "completed"
    a, b = sorted((s for s in exporter.get_finished_spans() if s.name == "execute_tool fetch"),
                  key=lambda s: s.attributes["planbook.step.id"])
    assert a.start_time < b.end_time and b.start_time < a.end_time  # they overlap
    assert a.attributes["gen_ai.tool.call.arguments"] == '{"url":"https://a.example","api_key":"***"}'
    assert "hunter2" not in b.attributes["gen_ai.tool.call.arguments"]
    assert a.attributes["gen_ai.tool.call.result"] == '"page of https://a.example"'


class Chatty:
    """An agent that reports one model call, as planbook.llm agents do."""

    name = "writer"

    def __call__(self, task: str, ctx: Any) -> AgentReply:
        ctx.emit("llm.call", model="gpt-test", purpose="agent", prompt_tokens=12, completion_tokens=5, latency=0.25,
                 finish_reason="stop")
        return AgentReply(answer="a poem", ok=True)


def test_plan_agent_and_chat_spans_follow_the_genai_conventions(spans: Any) -> None:
    exporter, provider = spans
    otel.instrument(provider)


    def planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        if last_error is None:
            return [Step(id="w", agent="writer", task="write"), Step(id="x", tool="fail", args={})]
        return [Step(id="w", agent="writer", task="write"), Step(id="y", agent="writer", task="again")]

    box = Toolbox()

    @box.tool
    def fail() -> None:
        """Fails."""
        raise RuntimeError("down")

    result = planbook.run("write a poem", planner=planner, tools=box, agents={"writer": Chatty()})
    assert result.status == "completed", result
    finished = exporter.get_finished_spans()
    root = next(s for s in finished if s.name.startswith("invoke_workflow"))
    plans = [s for s in finished if s.attributes["gen_ai.operation.name"] == "plan"]
    assert [p.attributes["planbook.planning"] for p in plans] == ["plan", "replan"]
    assert all(p.parent.span_id == root.context.span_id for p in plans)
    assert plans[1].attributes["planbook.data.diff.added"] == ("y",) and plans[1].attributes["planbook.plan.revision"] == 2
    agents = [s for s in finished if s.name == "invoke_agent writer"]
    assert len(agents) == 2 and all(s.attributes["gen_ai.agent.name"] == "writer" for s in agents)
    chats = [s for s in finished if s.name == "chat gpt-test"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent.span_id in {a.context.span_id for a in agents}
        assert chat.attributes["gen_ai.request.model"] == "gpt-test"
        assert (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"]) == (12, 5)
        assert abs(chat.end_time - chat.start_time - 250_000_000) < 1_000  # the latency it reported (float ns)


class ModelPlanner:
    """A planner that reports one model call per plan, as planbook.llm's planner does."""

    def __init__(self) -> None:
        self.context: Any = None

    def set_context(self, context: Any) -> None:
        self.context = context

    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        self.context.emit("llm.call", model="planner-model", purpose="plan", prompt_tokens=100, completion_tokens=20,
                          latency=0.5)
        return [Step(id="w", agent="writer", task=goal)]


def test_a_planners_model_calls_are_chat_spans_inside_its_plan_span(spans: Any) -> None:
    exporter, provider = spans
    otel.instrument(provider)
    result = planbook.run("write a haiku", planner=ModelPlanner(), agents={"writer": Chatty()})
    assert result.status == "completed", result
    found = exporter.get_finished_spans()
    plan = next(s for s in found if s.attributes["gen_ai.operation.name"] == "plan")
    chat = next(s for s in found if s.name == "chat planner-model")
    assert chat.parent.span_id == plan.context.span_id
    assert chat.attributes["gen_ai.usage.input_tokens"] == 100 and chat.attributes["planbook.purpose"] == "plan"
    assert plan.start_time <= chat.end_time <= plan.end_time


def test_a_stored_run_is_one_trace_whose_id_comes_from_the_run_id(spans: Any, tmp_path: Path) -> None:
    exporter, provider = spans
    otel.instrument(provider)
    box = Toolbox()
    box.add(lambda: "ok", name="ok")
    runner = planbook.Runner("steps:\n  - {id: a, tool: ok}", tools=box, store=tmp_path / "runs.sqlite")
    runner.run()
    root = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow"))
    run_id = runner.recorder.run_id
    assert root.attributes["planbook.run_id"] == run_id
    assert root.context.trace_id == otel.trace_id_of(run_id)
    otel.uninstrument()
    planbook.run("steps:\n  - {id: a, tool: ok}", tools=box)
    assert len(exporter.get_finished_spans()) == 2  # nothing new once uninstrumented


def test_one_otlp_http_post_reaches_a_local_receiver() -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, str, bytes]] = []
    arrived = threading.Event()

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            arrived.set()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=f"http://127.0.0.1:{server.server_address[1]}/v1/traces")))
    try:
        otel.instrument(provider)
        box = Toolbox()
        box.add(lambda: "ok", name="ok")
        planbook.run("steps:\n  - {id: a, tool: ok}", tools=box)
        assert arrived.wait(60)
    finally:
        otel.uninstrument()
        provider.shutdown()
        server.shutdown()
        server.server_close()
    names = []
    for path, content_type, body in received:
        assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
        request = ExportTraceServiceRequest.FromString(body)
        names += [span.name for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
        assert {ss.scope.name for rs in request.resource_spans for ss in rs.scope_spans} == {"planbook"}
    assert sorted(names) == ["execute_tool ok", "invoke_workflow plan"]


def test_planbook_otel_env_turns_tracing_on_without_importing_otel_at_import_time(tmp_path: Path) -> None:
    script = tmp_path / "traced.py"
    script.write_text(
        "import sys\n"
        "import planbook\n"
        "assert 'opentelemetry' not in sys.modules and 'mcp' not in sys.modules, 'imported at import time'\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter(); provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter)); trace.set_tracer_provider(provider)\n"
        "box = planbook.Toolbox(); box.add(lambda: 1, name='one')\n"
        "planbook.run('steps:\\n  - {id: a, tool: one}', tools=box)\n"
        "print(sorted(s.name for s in exporter.get_finished_spans()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(planbook.__file__).parent.parent)}
    on = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env={**env, "PLANBOOK_OTEL": "1"},
                        timeout=120)
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "['execute_tool one', 'invoke_workflow plan']"
    off = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env={k: v for k, v in env.items() if k != "PLANBOOK_OTEL"}, timeout=120)
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip() == "[]"


def test_without_the_extra_instrument_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(otel.OTelMissing, match=r'pip install "planbook\[otel\]"'):
        otel.instrument()
