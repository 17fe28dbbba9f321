"""A fork's run span says where it came from: the parent's run id always, and a span link to the
parent's run span when that span was made in this process (else the parent's derived trace id:
a link to a span whose context is unknown cannot be made)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import planbook  # noqa: E402
from planbook import Toolbox, otel  # noqa: E402
from planbook.engine.fork import fork  # noqa: E402

SPEC = ("goal: chains\nsteps:\n  - {id: a1, tool: inc, args: {x: 0}}\n  - {id: a2, tool: inc, args: {x: $a1}}\n"
        "  - {id: b1, tool: inc, args: {x: 10}}\n")
BOX = Toolbox()


@BOX.tool
def inc(x: int) -> int:
    """One more."""
    return x + 1


@pytest.fixture
def spans() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    otel.uninstrument()
    provider.shutdown()


def workflows(exporter: InMemorySpanExporter) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow")]


def test_a_fork_links_to_its_parents_run_span_made_in_this_process(spans: Any, tmp_path: Path) -> None:
    exporter, provider = spans
    otel.instrument(provider)
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(SPEC, tools=BOX, store=store)
    child = fork(parent.run_id, at="a1", args={"x": 5}, tools=BOX, store=store)
    assert child.plan.step("a2").result == 7
    first, second = workflows(exporter)
    assert first.attributes["planbook.run_id"] == parent.run_id
    assert "planbook.fork.parent" not in first.attributes and not first.links
    assert second.attributes["planbook.fork.parent"] == parent.run_id
    assert list(second.attributes["planbook.fork.at"]) == ["a1"] and second.attributes["planbook.fork.how"] == "args"
    (link,) = second.links
    assert link.context == first.context  # the parent's own span: trace id and span id
    assert link.attributes["planbook.fork.parent"] == parent.run_id
    assert second.context.trace_id == otel.trace_id_of(child.run_id) != first.context.trace_id  # its own trace
    assert "planbook.fork.parent_trace_id" not in second.attributes
    # only the re-run steps have tool spans in the child: a1 and a2, not the kept b1
    steps = [s.attributes["planbook.step.id"] for s in exporter.get_finished_spans()
             if s.context.trace_id == second.context.trace_id and s.name.startswith("execute_tool")]
    assert sorted(steps) == ["a1", "a2"]


def test_a_parent_traced_elsewhere_is_named_with_its_trace_id_and_no_link(spans: Any, tmp_path: Path) -> None:
    exporter, provider = spans
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(SPEC, tools=BOX, store=store)  # not traced here: as if run by another process
    otel.instrument(provider)
    assert otel.run_span_context(parent.run_id) is None
    child = fork(parent.run_id, at="b1", args={"x": 20}, tools=BOX, store=store)
    (span,) = workflows(exporter)
    assert span.attributes["planbook.run_id"] == child.run_id
    assert span.attributes["planbook.fork.parent"] == parent.run_id
    assert span.attributes["planbook.fork.parent_trace_id"] == format(otel.trace_id_of(parent.run_id), "032x")
    assert not span.links


def test_a_fork_of_an_unstored_result_links_too(spans: Any) -> None:
    exporter, provider = spans
    otel.instrument(provider)
    parent = planbook.run(SPEC, tools=BOX)
    fork(parent, at="a1", args={"x": 1}, tools=BOX)
    first, second = workflows(exporter)
    assert second.links[0].context == first.context
    assert second.attributes["planbook.fork.parent"] == parent.run_id


def test_remembered_contexts_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel, "KNOWN_RUNS", 3)
    for i in range(5):
        otel._remember(f"run-{i}", i)
    assert otel.run_span_context("run-0") is None and otel.run_span_context("run-1") is None
    assert otel.run_span_context("run-4") == 4
    otel._remember("run-4", 99)  # the first span of a run is the one kept
    assert otel.run_span_context("run-4") == 4
