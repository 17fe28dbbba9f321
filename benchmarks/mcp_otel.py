"""Cost of MCP tools and OpenTelemetry spans, each against its SDK's own work, in one run.

1. MCP, one server and one session. The same tool is called three ways, interleaved call by
   call (the order turns every call, so a change in the machine's load falls on all three):
   the SDK's ``await session.call_tool(...)`` on the session's own loop, timed there (what
   async code using the SDK pays: no thread handoff); the SDK's ``call_tool`` from this
   thread through ``run_coroutine_threadsafe`` (what sync code using the SDK pays); and
   planbook's tool (what a step's call pays). Min and median per call, and planbook's
   ratios to both. Target: at most 1.2x the SDK awaited on its loop. Then runs of a
   plan of MCP calls, interleaved with as many SDK calls: what the engine adds per step.
2. OpenTelemetry, a 2,000-step plan of no-op tools, each step with a task (as plans have),
   in interleaved rounds: the run without spans; with ``instrument()`` (SDK provider, batch
   processor, an exporter that drops the spans); with a subscriber that makes the same
   spans with the least work there is (names and attributes made beforehand, one SDK span
   started and ended per step: the SDK's own cost in a run, the bar); and with the API's
   no-op provider (planbook's own work: events into spans, texts through the run's gate);
   and, for comparison, the same spans made in a bare loop with no run around them.
   CPU per step, min and median. Target: spans add at most 30 us per step, or at most
   1.5x what the SDK's own spans add.

Needs mcp-server-time and the otel extra. Run: python benchmarks/mcp_otel.py [--quick]

``--quick``: tiny sizes, one round (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import planbook
from planbook.data.models import Plan, Step

ARGS = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def spread(values: Sequence[float], scale: float = 1.0) -> tuple[float, float]:
    """(min, median) of ``values``, times ``scale``."""
    return min(values) * scale, statistics.median(values) * scale


# --------------------------------------------------------------------------- MCP
def mcp_call_ratio(calls: int = 1000, rounds: int = 30, steps: int = 25) -> None:
    from planbook.mcp import connect

    with connect([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]) as box:
        conn = box._connection  # the same session and loop the tools use
        tool = box["convert_time"]
        session, loop = conn.session, conn.loop

        async def awaited(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                await session.call_tool("convert_time", ARGS)
            return time.perf_counter() - start

        def sdk_awaited() -> float:  # timed on the loop: the handoff to it is not counted
            return asyncio.run_coroutine_threadsafe(awaited(1), loop).result()

        def sdk_from_thread() -> float:
            start = time.perf_counter()
            asyncio.run_coroutine_threadsafe(session.call_tool("convert_time", ARGS), loop).result()
            return time.perf_counter() - start

        def through_planbook() -> float:
            start = time.perf_counter()
            tool(**ARGS)
            return time.perf_counter() - start

        ways = [sdk_awaited, sdk_from_thread, through_planbook]
        times: dict[Callable[[], float], list[float]] = {way: [] for way in ways}
        for i in range(min(calls, 50)):  # warm up
            ways[i % 3]()
        for i in range(calls):
            for way in ways[i % 3:] + ways[:i % 3]:
                times[way].append(way())
        (a_min, a_med), (t_min, t_med), (p_min, p_med) = (spread(times[way], 1e3) for way in ways)
        print(f"MCP calls, {calls} of each way, interleaved one by one (same server, session and loop):")
        print(f"  SDK awaited on its own loop          min {a_min:.2f} ms   median {a_med:.2f} ms")
        print(f"  SDK call_tool from this thread       min {t_min:.2f} ms   median {t_med:.2f} ms")
        print(f"  planbook's tool                      min {p_min:.2f} ms   median {p_med:.2f} ms")
        print(f"MCP call: SDK {a_med:.2f} ms, through planbook's tool {p_med:.2f} ms -> {p_med / a_med:.2f}x at the "
              f"median, {p_min / a_min:.2f}x at the min (target <= 1.2x); over the SDK called from this thread "
              f"{p_med / t_med:.2f}x median, {p_min / t_min:.2f}x min")

        plan = Plan(id="mcp", goal="calls", steps=[Step(id=f"s{i}", tool="convert_time", args=ARGS)
                                                   for i in range(steps)])

        def run_plan() -> float:
            start = time.perf_counter()
            result = planbook.run(plan, tools=box, max_steps=steps)
            elapsed = time.perf_counter() - start
            assert result.status == "completed", result
            return elapsed

        def sdk_calls() -> float:
            return asyncio.run_coroutine_threadsafe(awaited(steps), loop).result()

        run_plan()  # warm up
        planned: list[float] = []
        bare: list[float] = []
        for i in range(rounds):
            for way, into in ((run_plan, planned), (sdk_calls, bare))[:: 1 if i % 2 == 0 else -1]:
                into.append(way())
    (r_min, r_med), (b_min, b_med) = spread(planned, 1e3 / steps), spread(bare, 1e3 / steps)
    print(f"  a {steps}-step plan of MCP calls, {rounds} runs interleaved with {steps} SDK calls awaited on the loop, "
          f"per step: run min {r_min:.2f} ms median {r_med:.2f} ms; SDK min {b_min:.2f} ms median {b_med:.2f} ms")
    print(f"MCP step in a run: {r_med:.2f} ms over an SDK call's {b_med:.2f} ms -> {r_med / b_med:.2f}x at the median, "
          f"{r_min / b_min:.2f}x at the min ({(r_med - b_med) * 1e3:.0f} us of engine and handoff per step at the "
          f"median, {(r_min - b_min) * 1e3:.0f} us at the min)")


# ------------------------------------------------------------------ OpenTelemetry
def otel_overhead(steps: int = 2000, rounds: int = 15) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from planbook import otel
    from planbook.engine.eventbus import RUN_HOOKS

    class Drop(SpanExporter):
        def export(self, spans: Sequence[object]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    def noop(x: int) -> int:
        """Return x."""
        return x

    tools = planbook.Toolbox([noop])
    plan = Plan(id="bench", goal="spans", steps=[Step(id=str(i), tool="noop", args={"x": i}, task=f"pass {i} on")
                                                 for i in range(steps)])
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop(), max_queue_size=max(steps * 2, 2048)))
    tracer = provider.get_tracer(otel.SCOPE)

    def run() -> None:
        planbook.run(plan, tools=tools, max_steps=steps)

    def traced_with(chosen: Any) -> Callable[[], None]:
        def traced() -> None:
            otel.instrument(chosen)
            try:
                run()
            finally:
                otel.uninstrument()
                if chosen is provider:
                    provider.force_flush()  # the export thread's work is counted too
        return traced

    # the spans a traced run makes: their names, kinds and attributes, by step
    kept = InMemorySpanExporter()
    capture = TracerProvider()
    capture.add_span_processor(SimpleSpanProcessor(kept))
    traced_with(capture)()
    made = kept.get_finished_spans()
    root = next(s for s in made if s.parent is None)
    root_args = (root.name, root.kind, dict(root.attributes or {}))
    by_step = {str(s.attributes["planbook.step.id"]): (s.name, s.kind, dict(s.attributes or {}))
               for s in made if s.parent is not None}
    capture.shutdown()

    class SameSpans:
        """The least an integration can do to make those spans in a run: names and attributes
        made beforehand, one SDK span started on each step.started and ended on its step.finished."""

        def __init__(self) -> None:
            self.top: Any = None
            self.inside: Any = None
            self.open: dict[str, Any] = {}

        def __call__(self, event: Any) -> None:
            if event.kind == "step.started":
                if self.top is None:
                    name, kind, attributes = root_args
                    self.top = tracer.start_span(name, context=trace.set_span_in_context(trace.INVALID_SPAN),
                                                 kind=kind, attributes=attributes, start_time=int(event.time * 1e9))
                    self.inside = trace.set_span_in_context(self.top)
                name, kind, attributes = by_step[event.step]
                self.open[event.step] = tracer.start_span(name, context=self.inside, kind=kind, attributes=attributes,
                                                          start_time=int(event.time * 1e9))
            elif event.kind == "step.finished":
                self.open.pop(event.step).end(end_time=int(event.time * 1e9))
            elif event.kind == "run.finished":
                self.top.end(end_time=int(event.time * 1e9))

    def sdk_in_a_run() -> None:
        RUN_HOOKS["bench"] = lambda runner: runner.subscribe(SameSpans())
        try:
            run()
        finally:
            del RUN_HOOKS["bench"]
            provider.force_flush()

    def sdk_bare() -> None:
        name, kind, attributes = root_args
        top = tracer.start_span(name, context=trace.set_span_in_context(trace.INVALID_SPAN), kind=kind,
                                attributes=attributes, start_time=1)
        inside = trace.set_span_in_context(top)
        for name, kind, attributes in by_step.values():
            tracer.start_span(name, context=inside, kind=kind, attributes=attributes, start_time=1).end(end_time=2)
        top.end(end_time=2)
        provider.force_flush()

    ways: list[tuple[str, Callable[[], None]]] = [
        ("run without spans", run), ("run with instrument()", traced_with(provider)),
        ("run making the same spans, least work", sdk_in_a_run),
        ("run with the API's no-op provider", traced_with(trace.NoOpTracerProvider())),
        ("the same spans in a bare loop, no run", sdk_bare)]
    for _, way in ways:  # warm up
        way()
    times: dict[str, list[float]] = {label: [] for label, _ in ways}
    for i in range(rounds):
        for label, way in ways[i % len(ways):] + ways[:i % len(ways)]:
            times[label].append(cpu(way))
    per = {label: spread(values, 1e6 / steps) for label, values in times.items()}
    print(f"OpenTelemetry, a {steps}-step plan ({len(by_step)} step spans), {rounds} rounds interleaved, CPU per step:")
    for label, (low, mid) in per.items():
        print(f"  {label:40s} min {low:6.1f} us   median {mid:6.1f} us")
    plain_min, plain_med = per["run without spans"]
    extra_min, extra_med = (x - y for x, y in zip(per["run with instrument()"], (plain_min, plain_med)))
    sdk_min, sdk_med = (x - y for x, y in zip(per["run making the same spans, least work"], (plain_min, plain_med)))
    own_min, own_med = (x - y for x, y in zip(per["run with the API's no-op provider"], (plain_min, plain_med)))
    print(f"  the SDK's own span start+end in a run: {sdk_min:.1f} us per step at the min, {sdk_med:.1f} us at the "
          f"median; planbook's own work (the no-op provider): {own_min:.1f} us at the min, {own_med:.1f} us at the "
          "median")
    print(f"OpenTelemetry: {extra_min / sdk_min:.2f}x the SDK's own spans at the min, {extra_med / sdk_med:.2f}x at "
          f"the median (target <= 1.5x, or <= 30 us) -> {extra_min:.1f} us per step at the min, {extra_med:.1f} us "
          "at the median")
    provider.shutdown()


if __name__ == "__main__":
    if "--quick" in sys.argv[1:]:
        mcp_call_ratio(calls=6, rounds=2, steps=3)
        otel_overhead(steps=50, rounds=1)
    else:
        mcp_call_ratio()
        otel_overhead()
