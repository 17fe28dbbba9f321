"""Cost of MCP tools and OpenTelemetry spans, measured as ratios in one process.

1. An MCP tool call through planbook (the Tool, the private loop thread, the result
   unpacked) over the SDK's own ``session.call_tool`` on the same session and loop, both
   from this thread. Target: at most 1.2x. Also: a 100-step plan of MCP calls run by
   planbook over 100 SDK calls (what the engine adds on top of the call).
2. OpenTelemetry: CPU per step of a 2,000-step plan of no-op tools with ``instrument()``
   (SDK provider, batch processor, an exporter that drops the spans) over the same run
   without it. Target: at most 30 us per step.

Rounds are interleaved and the medians compared, so other load disturbs the ratios less.
Needs mcp-server-time and the otel extra. Run: python benchmarks/mcp_otel.py [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import planbook
from planbook.models import Plan, Step

ARGS = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def wall(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def mcp_call_ratio(calls: int = 200, rounds: int = 5, steps: int = 100) -> None:
    from planbook.mcp import connect

    with connect([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]) as box:
        conn = box._connection  # the same session and loop the tools use
        tool = box["convert_time"]

        def sdk() -> None:
            for _ in range(calls):
                asyncio.run_coroutine_threadsafe(conn.session.call_tool("convert_time", ARGS), conn.loop).result()

        def through_planbook() -> None:
            for _ in range(calls):
                tool(**ARGS)

        plan = Plan(id="mcp", goal="calls", steps=[Step(id=f"s{i}", tool="convert_time", args=ARGS) for i in range(steps)])

        def run_plan() -> None:
            result = planbook.run(plan, tools=box, max_steps=2 * steps)
            assert result.status == "completed", result

        def sdk_100() -> None:
            for _ in range(steps):
                asyncio.run_coroutine_threadsafe(conn.session.call_tool("convert_time", ARGS), conn.loop).result()

        sdk(), through_planbook()  # warm up
        direct, wrapped, planned, bare = [], [], [], []
        for _ in range(rounds):
            direct.append(wall(sdk))
            wrapped.append(wall(through_planbook))
            bare.append(wall(sdk_100))
            planned.append(wall(run_plan))
    per_sdk, per_tool = statistics.median(direct) / calls, statistics.median(wrapped) / calls
    print(f"MCP call: SDK {per_sdk * 1e3:.2f} ms, through planbook's tool {per_tool * 1e3:.2f} ms "
          f"-> {per_tool / per_sdk:.2f}x (target <= 1.2x)")
    per_bare, per_step = statistics.median(bare) / steps, statistics.median(planned) / steps
    print(f"MCP step in a run: {per_step * 1e3:.2f} ms over an SDK call's {per_bare * 1e3:.2f} ms "
          f"-> {per_step / per_bare:.2f}x ({(per_step - per_bare) * 1e6:.0f} us of engine per step)")


def otel_overhead(steps: int = 2000, rounds: int = 5) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from planbook import otel

    class Drop(SpanExporter):
        def export(self, spans: Sequence[object]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    def noop(x: int) -> int:
        """Return x."""
        return x

    tools = planbook.Toolbox([noop])
    plan = Plan(id="bench", goal="spans", steps=[Step(id=str(i), tool="noop", args={"x": i}) for i in range(steps)])
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop(), max_queue_size=max(steps * 2, 2048)))

    def run() -> None:
        planbook.run(plan, tools=tools, max_steps=steps)

    def traced() -> None:
        otel.instrument(provider)
        try:
            run()
        finally:
            otel.uninstrument()
            provider.force_flush()

    run(), traced()  # warm up
    plain, with_spans = [], []
    for _ in range(rounds):
        plain.append(cpu(run))
        with_spans.append(cpu(traced))
    extra = (statistics.median(with_spans) - statistics.median(plain)) / steps
    print(f"OpenTelemetry: {statistics.median(plain) / steps * 1e6:.1f} us CPU per step without spans, "
          f"{statistics.median(with_spans) / steps * 1e6:.1f} us with -> {extra * 1e6:.1f} us per step "
          "(target <= 30 us)")
    provider.shutdown()


if __name__ == "__main__":
    if "--quick" in sys.argv[1:]:
        mcp_call_ratio(calls=5, rounds=1, steps=5)
        otel_overhead(steps=100, rounds=1)
    else:
        mcp_call_ratio()
        otel_overhead()
