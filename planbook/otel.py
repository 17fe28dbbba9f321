"""OpenTelemetry spans for every run, following the GenAI semantic conventions.

``planbook.otel.instrument()`` (or ``PLANBOOK_OTEL=1`` before ``import planbook``) makes
each run's events into spans: one ``invoke_workflow`` span per run, a ``plan`` span per
planning or replanning call, ``execute_tool`` spans for tool steps, ``invoke_agent``
spans for agent steps and ``chat`` spans for model calls. The engine knows nothing of
this: a hook registered in :data:`planbook.engine.eventbus.RUN_HOOKS` subscribes to each new
run's events. Spans carry the events' own timestamps (parallel steps overlap), and a
stored run's trace id is derived from its run id, so the same run is the same trace.

Spans get exactly what a store would keep, through the run's gate (:mod:`planbook.outbound`):
the goal, tasks, errors and event texts with the run's secrets and every secret shape hidden.
And every span is made through :class:`MaskedTracer`, whose spans mask each name, attribute,
event and status as it is set (the checkpoint of the span exit): a handler that forgets the
gate still exports nothing secret.
Arguments and results go on spans only with ``capture_content=True`` (they may be large or
private), redacted as a store redacts them (a step whose result feeds a secret-named argument
shows ``***``). Needs the ``otel`` extra.

A fork's run span (:func:`planbook.fork`) says where it came from: ``planbook.fork.parent`` (the
parent's run id), ``planbook.fork.at`` and ``planbook.fork.how`` always, and a span **link** to the
parent's run span when that span's context is known, i.e. the parent was traced in this process
(its context is remembered, :func:`run_span_context`). A parent traced in another process has a
span id nobody kept (span ids are random; only a stored run's *trace* id is derived from its run
id), and a link needs a valid span context, so then the span carries
``planbook.fork.parent_trace_id``: the trace id a stored parent's spans have, for a viewer's search.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .data.errors import OTelMissing
from .data.models import Event
from .engine.eventbus import RUN_HOOKS
from .outbound import REDACTED_TEXT, RunSecrets, is_secret_name, mask_text

#: the instrumentation scope's name (what a trace viewer shows as the library)
SCOPE = "planbook"
#: longest captured argument or result text (the rest is cut, with "…")
CONTENT_LIMIT = 4000
_ERROR_TYPE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*):")


def instrument(tracer_provider: Any = None, *, capture_content: bool = False) -> None:
    """Trace every run from now on (until :func:`uninstrument`).

    ``tracer_provider``: an OpenTelemetry ``TracerProvider`` (default: the global one,
    which the OTel SDK or ``opentelemetry-instrument`` configures). ``capture_content``:
    put tool arguments and results on the spans (redacted like a store's records).
    """
    try:
        from opentelemetry import trace
    except ImportError:
        raise OTelMissing('tracing needs OpenTelemetry: pip install "planbook[otel]"') from None
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    from importlib.metadata import PackageNotFoundError, version

    try:
        own_version = version("planbook")
    except PackageNotFoundError:
        own_version = None
    tracer: Any = provider.get_tracer(SCOPE, own_version)  # the API's Tracer, or the SDK's (with an id_generator)
    ids = _RunTraceIds(getattr(tracer, "id_generator", None))
    if ids.inner is not None:
        tracer.id_generator = ids  # the SDK's tracer: a stored run's trace id comes from its run id
    masked = MaskedTracer(tracer)  # every span of every run is made through it: nothing unmasked is exported

    def hook(runner: Any) -> None:
        runner.subscribe(RunSpans(runner, masked, ids, capture_content=capture_content))

    RUN_HOOKS["otel"] = hook


def uninstrument() -> None:
    """Stop tracing new runs (runs already going keep their spans)."""
    RUN_HOOKS.pop("otel", None)


def instrument_from_environment() -> None:
    """``PLANBOOK_OTEL=1``: instrument with the global provider (``PLANBOOK_OTEL=content``: with content)."""
    value = os.environ.get("PLANBOOK_OTEL", "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return
    instrument(capture_content=value == "content")


#: how many runs' span contexts are remembered for their forks' links (the oldest forgotten first)
KNOWN_RUNS = 4096
_RUN_CONTEXTS: OrderedDict[str, Any] = OrderedDict()
_CONTEXTS_LOCK = threading.Lock()


def _remember(run_id: str, context: Any) -> None:
    """A run's first run span context (a paused run's later spans are in the same trace)."""
    with _CONTEXTS_LOCK:
        if run_id in _RUN_CONTEXTS:
            return
        _RUN_CONTEXTS[run_id] = context
        while len(_RUN_CONTEXTS) > KNOWN_RUNS:
            _RUN_CONTEXTS.popitem(last=False)


def run_span_context(run_id: str) -> Any:
    """The span context of run ``run_id``'s first run span, if it was traced in this process; else None."""
    with _CONTEXTS_LOCK:
        return _RUN_CONTEXTS.get(run_id)


def trace_id_of(run_id: str) -> int:
    """The 128-bit trace id of a stored run (the same id gives the same trace)."""
    return int.from_bytes(hashlib.sha256(run_id.encode("utf-8")).digest()[:16], "big") or 1


class _RunTraceIds:
    """The SDK's id generator, except that a run's root span takes the trace id it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.local = threading.local()
        if inner is not None:
            # the instance takes the SDK's bound method over the class's: one call less per span
            self.generate_span_id = inner.generate_span_id  # type: ignore[method-assign]

    def is_trace_id_random(self) -> bool:
        return False  # a run's trace id is a hash of its run id, not random bits

    def generate_span_id(self) -> int:
        return int(self.inner.generate_span_id())

    def generate_trace_id(self) -> int:
        wanted = getattr(self.local, "trace_id", None)
        return int(wanted) if wanted else int(self.inner.generate_trace_id())

    def start_root(self, tracer: Any, trace_id: int | None, *args: Any, **kwargs: Any) -> Any:
        self.local.trace_id = trace_id if self.inner is not None else None
        try:
            return tracer.start_span(*args, **kwargs)
        finally:
            self.local.trace_id = None


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _masked_value(key: str, value: Any) -> Any:
    """An attribute's value as it may be exported: texts through the checkpoint, a secret-named
    attribute's text as ``***``; numbers and flags as they are."""
    if isinstance(value, str):
        return REDACTED_TEXT if value and is_secret_name(key) else mask_text(value)
    if isinstance(value, (list, tuple)):
        return [_masked_value(key, item) for item in value]
    return value


def _masked(attributes: Any) -> Any:
    if not attributes:
        return attributes
    return {key: _masked_value(key, value) for key, value in dict(attributes).items()}


@functools.lru_cache(maxsize=None)
def masked_span_class() -> type:
    """The class of :class:`MaskedTracer`'s spans: made on first use, as a subclass of the API's
    ``Span`` (a context holds it as the parent of the next span only if it is one; the otel
    extra is imported only when tracing)."""
    from opentelemetry import trace

    class MaskedSpan(trace.Span):
        """A span whose name, attributes, events, links' attributes and status pass the checkpoint
        (:func:`~planbook.outbound.mask_text`) as they are set: what the exporter later reads was
        masked on its way in, whichever handler set it."""

        def __init__(self, span: Any) -> None:
            self._span = span

        def set_attribute(self, key: str, value: Any) -> None:
            self._span.set_attribute(key, _masked_value(key, value))

        def set_attributes(self, attributes: Any) -> None:
            self._span.set_attributes(_masked(attributes))

        def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
            self._span.add_event(mask_text(name), attributes=_masked(attributes), timestamp=timestamp)

        def add_link(self, context: Any, attributes: Any = None) -> None:
            self._span.add_link(context, attributes=_masked(attributes))

        def update_name(self, name: str) -> None:
            self._span.update_name(mask_text(name))

        def set_status(self, status: Any, description: str | None = None) -> None:
            if isinstance(status, trace.Status):
                status = trace.Status(status.status_code, mask_text(status.description) if status.description else None)
            self._span.set_status(status, mask_text(description) if description else description)

        def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: int | None = None,
                             escaped: bool = False) -> None:
            """As the SDK records one (an ``exception`` event), with its message and traceback masked."""
            import traceback

            event = {"exception.type": type(exception).__qualname__, "exception.message": str(exception),
                     "exception.stacktrace": "".join(traceback.format_exception(exception)),
                     "exception.escaped": str(escaped), **dict(attributes or {})}
            self.add_event("exception", attributes=event, timestamp=timestamp)

        def end(self, end_time: int | None = None) -> None:
            self._span.end(end_time=end_time)

        def get_span_context(self) -> Any:
            return self._span.get_span_context()

        def is_recording(self) -> bool:
            return bool(self._span.is_recording())

        def __getattr__(self, name: str) -> Any:  # the SDK span's own parts (attributes, name, ...)
            return getattr(self._span, name)

    return MaskedSpan


class MaskedTracer:
    """The one tracer this module makes spans with: its spans mask what is set on them
    (:func:`masked_span_class`), and a span's name and first attributes are masked here."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    def start_span(self, name: str, *args: Any, attributes: Any = None, links: Any = None, **kwargs: Any) -> Any:
        if links:
            from opentelemetry.trace import Link

            links = [Link(link.context, _masked(link.attributes)) for link in links]
        return masked_span_class()(self.tracer.start_span(mask_text(name), *args, attributes=_masked(attributes),
                                                          links=links, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracer, name)


class RunSpans:
    """The spans of one run, made from its events on the runner's thread."""

    def __init__(self, runner: Any, tracer: Any, ids: _RunTraceIds, *, capture_content: bool = False) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        self._trace, self._status, self._code = trace, Status, StatusCode
        self.runner, self.tracer, self.ids, self.capture = runner, tracer, ids, capture_content
        #: the run's gate: every text and value put on a span goes through it
        self.secrets: RunSecrets = getattr(runner, "secrets", None) or RunSecrets.of_plan(runner.state.plan)
        self.workflow: Any = None
        self._root_context: Any = None  # the context holding the workflow span (made once per run)
        self.steps: dict[str, Any] = {}
        self._started_at: float | None = None
        #: when the planner was last called (the start of the next plan span)
        self._plan_from: float | None = None
        #: the planner's model calls, waiting for the plan span they belong to
        self._planner_calls: list[Event] = []
        self._handlers: dict[str, Callable[[Event], None]] = {
            "run.started": self._run_started, "plan.created": self._plan_created, "plan.diff": self._plan_diff,
            "step.started": self._step_started, "step.finished": self._step_ended, "step.failed": self._step_ended,
            "step.cached": self._step_cached, "step.retry": self._mark, "step.skipped": self._mark,
            "step.blocked": self._mark, "llm.call": self._llm_call, "run.paused": self._run_ended,
            "run.finished": self._run_ended,
        }

    def __call__(self, event: Event) -> None:
        handler = self._handlers.get(event.kind)
        if handler is not None:
            handler(event)

    # ------------------------------------------------------------- the run
    def _run_started(self, event: Event) -> None:
        self._started_at = event.time
        self._plan_from = event.time

    def _root(self) -> Any:
        """The run's ``invoke_workflow`` span, opened late so a stored run's id is known."""
        if self.workflow is None:
            plan = self.runner.state.plan
            recorder = getattr(self.runner, "recorder", None)
            run_id = getattr(recorder, "run_id", None)
            plan_id = self._text(plan.id)
            attributes = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.provider.name": "planbook",
                          "planbook.plan.id": plan_id, "planbook.strategy": getattr(self.runner, "strategy", "planbook")}
            if plan.goal:
                attributes["planbook.goal"] = self._text(plan.goal)
            if run_id:
                attributes["planbook.run_id"] = run_id
            links = self._fork_parent(attributes)
            start = self._started_at if self._started_at is not None else self.runner.clock()
            self.workflow = self.ids.start_root(
                self.tracer, trace_id_of(run_id) if run_id else None, f"invoke_workflow {plan_id}",
                context=self._trace.set_span_in_context(self._trace.INVALID_SPAN),
                kind=self._trace.SpanKind.INTERNAL, attributes=attributes, links=links, start_time=_ns(start))
            self._root_context = self._in(self.workflow)
            own_id = run_id or getattr(self.runner, "run_id", None)
            if own_id:
                _remember(str(own_id), self.workflow.get_span_context())
        return self.workflow

    def _in(self, span: Any) -> Any:
        return self._trace.set_span_in_context(span)

    def _fork_parent(self, attributes: dict[str, Any]) -> list[Any] | None:
        """A fork's origin on its run span: the parent's id, fork points and how, and a link to the
        parent's run span when its context is known here (else the parent's derived trace id)."""
        lineage = getattr(self.runner.state, "lineage", None)
        if not isinstance(lineage, dict) or not lineage.get("parent"):
            return None
        parent = lineage["parent"]
        attributes["planbook.fork.parent"] = str(parent)
        attributes["planbook.fork.at"] = [str(x) for x in lineage.get("at") or ()]
        attributes["planbook.fork.how"] = str(lineage.get("how") or "control")
        context = run_span_context(str(parent))
        if context is None:
            attributes["planbook.fork.parent_trace_id"] = format(trace_id_of(str(parent)), "032x")
            return None
        from opentelemetry.trace import Link

        return [Link(context, {"planbook.link": "fork parent", "planbook.fork.parent": str(parent)})]

    def _run_ended(self, event: Event) -> None:
        root = self._root()
        self._flush_planner_calls(root)
        for step_id, span in list(self.steps.items()):  # calls cut short by an interrupt
            span.set_status(self._status(self._code.ERROR, "the run ended while the step ran"))
            span.set_attribute("error.type", "interrupted")
            span.end(end_time=_ns(event.time))
            del self.steps[step_id]
        data = event.data
        if event.kind == "run.paused":
            root.set_attribute("planbook.paused", self._text(str(data.get("why") or "paused")))
        else:
            root.set_attribute("planbook.status", str(data.get("status")))
            root.set_attribute("planbook.reason", str(data.get("reason")))
            root.set_attribute("planbook.executions", int(data.get("executions") or 0))
            if data.get("status") != "completed":
                root.set_attribute("error.type", str(data.get("reason") or "failed"))
                root.set_status(self._status(self._code.ERROR, self._text(str(data.get("error") or data.get("reason")))))
        root.end(end_time=_ns(event.time))
        self.workflow = None  # a paused run continued later gets a new span in the same trace
        self._started_at = None

    # ------------------------------------------------------------ planning
    def _plan_created(self, event: Event) -> None:
        """Only a planner's first plan is a planning call (a given plan was not planned; a
        replan's plan.created follows the plan.diff that made its span)."""
        if self.runner.goal_only is not None and self.runner.state.plan.revision <= 1:
            self._plan_span(event, "plan")

    def _plan_diff(self, event: Event) -> None:
        self._plan_span(event, "replan")

    def _plan_span(self, event: Event, what: str) -> None:
        root = self._root()
        plan = self.runner.state.plan
        start = self._plan_from if self._plan_from is not None else event.time
        attributes: dict[str, Any] = {"gen_ai.operation.name": "plan", "planbook.plan.revision": plan.revision,
                                      "planbook.plan.steps": len(plan.steps), "planbook.planning": what}
        for field in ("removed", "added", "revised"):
            if field in event.data:
                attributes[f"planbook.data.diff.{field}"] = [str(x) for x in event.data[field]]
        span = self.tracer.start_span(f"plan {self._text(plan.id)}", context=self._in(root), attributes=attributes,
                                      start_time=_ns(min(start, event.time)))
        self._flush_planner_calls(span)
        span.end(end_time=_ns(event.time))
        self._plan_from = event.time

    def _flush_planner_calls(self, parent: Any) -> None:
        calls, self._planner_calls = self._planner_calls, []
        for call in calls:
            self._chat(call, parent)

    # --------------------------------------------------------------- steps
    def _step_started(self, event: Event) -> None:
        step_id = event.step or ""
        if self.workflow is None:
            self._root()
        step = self._step(step_id)
        data = event.data
        attributes: dict[str, Any] = {"planbook.step.id": step_id}
        if data.get("attempt", 1) != 1:
            attributes["planbook.step.attempt"] = data["attempt"]
        if step is not None and step.agent:
            name = f"invoke_agent {step.agent}"
            attributes.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": step.agent})
        else:
            tool = step.tool if step is not None else "?"
            name = f"execute_tool {tool}"
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = tool
            attributes["gen_ai.tool.call.id"] = f"{step_id}#{data.get('execution', '')}"
            if self.capture and step is not None:
                attributes["gen_ai.tool.call.arguments"] = self._content(step.args)
        if step is not None and step.task:
            attributes["planbook.step.task"] = self._text(step.task)
        self.steps[step_id] = self.tracer.start_span(name, context=self._root_context, attributes=attributes,
                                                     start_time=_ns(event.time))

    def _step(self, step_id: str) -> Any:
        """The step by id: the scheduler's index (a plan's own lookup is a scan of its steps)."""
        by_id = getattr(getattr(self.runner, "scheduler", None), "by_id", None)
        if by_id is not None and step_id in by_id:
            return by_id[step_id]
        try:
            return self.runner.state.plan.step(step_id)
        except KeyError:
            return None

    def _step_ended(self, event: Event) -> None:
        span = self.steps.pop(event.step or "", None)
        if span is None:
            return
        if event.kind == "step.failed":
            error = str(event.data.get("error") or "failed")
            match = _ERROR_TYPE.match(error)
            span.set_attribute("error.type", match.group(1) if match else "StepFailed")
            span.set_status(self._status(self._code.ERROR, self._text(error)))
        elif self.capture:
            step = self._step(event.step or "")
            result = self.secrets.result(step) if step is not None else event.data.get("result")
            span.set_attribute("gen_ai.tool.call.result", self._content(result))
        span.end(end_time=_ns(event.time))
        self._plan_from = event.time

    def _step_cached(self, event: Event) -> None:
        step = self._step(event.step or "")
        tool = (step.tool if step is not None else None) or "?"
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                      "planbook.step.id": event.step or "", "planbook.cached": True,
                      "planbook.cached.from_run": str(event.data.get("from_run")),
                      "planbook.cached.from_step": str(event.data.get("from_step"))}
        span = self.tracer.start_span(f"execute_tool {tool}", context=self._in(self._root()), attributes=attributes,
                                      start_time=_ns(event.time))
        span.end(end_time=_ns(event.time))

    def _mark(self, event: Event) -> None:
        """Retries, skips and blocks: events on the run's span (they take no time of their own)."""
        attributes: dict[str, str | int | float | bool] = {"planbook.step.id": event.step or ""}
        for key, value in event.data.items():
            if isinstance(value, (str, int, float, bool)):
                attributes[f"planbook.{key}"] = value if not isinstance(value, str) else self._text(value)
        self._root().add_event(event.kind, attributes=attributes, timestamp=_ns(event.time))

    # -------------------------------------------------------------- models
    def _llm_call(self, event: Event) -> None:
        if event.step is None:
            self._planner_calls.append(event)  # the planner's: its plan span is made when the plan is
            return
        self._chat(event, self.steps.get(event.step) or self._root())

    def _chat(self, event: Event, parent: Any) -> None:
        data = event.data
        model = str(data.get("model") or "")
        latency = float(data.get("latency") or 0.0)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                      "gen_ai.request.model": model,
                                      "gen_ai.usage.input_tokens": int(data.get("prompt_tokens") or 0),
                                      "gen_ai.usage.output_tokens": int(data.get("completion_tokens") or 0)}
        if data.get("purpose"):
            attributes["planbook.purpose"] = str(data["purpose"])
        if data.get("finish_reason"):
            attributes["gen_ai.response.finish_reasons"] = [str(data["finish_reason"])]
        span = self.tracer.start_span(f"chat {model}".strip(), context=self._in(parent), attributes=attributes,
                                      kind=self._trace.SpanKind.CLIENT, start_time=_ns(event.time - latency))
        if data.get("error"):
            error = str(data["error"])
            match = _ERROR_TYPE.match(error)
            span.set_attribute("error.type", match.group(1) if match else "ModelCallError")
            span.set_status(self._status(self._code.ERROR, self._text(error)))
        span.end(end_time=_ns(event.time))

    def _text(self, text: str) -> str:
        """A text of the run as a span may carry it: through the gate, then cut."""
        text = self.secrets.text(text)
        return text if len(text) <= CONTENT_LIMIT else text[: CONTENT_LIMIT - 1] + "…"

    def _content(self, value: Any) -> str:
        """An argument or result (``capture_content=True``), redacted as a store redacts it."""
        redactor = self.secrets.redactor
        redactor.refresh()
        try:
            text = redactor.json_text(value)
        except (TypeError, ValueError):
            text = redactor.text(repr(value))
        return text if len(text) <= CONTENT_LIMIT else text[: CONTENT_LIMIT - 1] + "…"


__all__ = ["MaskedTracer", "RunSpans", "instrument", "instrument_from_environment", "run_span_context",
           "trace_id_of", "uninstrument"]
