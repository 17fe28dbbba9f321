"""``planbook mcp serve``: planbook as an MCP server over stdio.

Any MCP client (an IDE, a desktop assistant, another agent) can then plan with planbook:

- ``planning``: OpenManus's planning tool (its seven commands and the exact schema its
  ``to_param()`` gives), over planbook plans;
- ``run_plan``: a plan spec in; the run's result text, its status and outputs back (a
  progress notification per finished step when the client asks for progress);
- ``list_runs`` / ``show_run``: the run store;
- ``fork_run``: fork a stored run at a step with new arguments or a pinned result (``planbook fork``);
- ``diff_runs``: compare stored runs step by step (``planbook diff``).

Tool errors (a bad command, an invalid plan, a failed run) come back as results with
``is_error`` set and the message, so the client's model can read them and try again.
Every answer, an error included, passes the checkpoint in one place (:meth:`PlanbookServer.call`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..compat.openmanus import PlanningTool
from ..data.errors import PlanbookError
from ..data.lineage import REUSE_CHOICES
from ..engine.config import from_json, json_properties
from ..engine.runner import Runner
from ..outbound import RunSecrets, bounded, mask_data, mask_text, neutralise
from ..views.text import format_result
from ..workers.tools import Toolbox, as_toolbox
from .common import UsageProblem, final_outputs, load_object, printable

#: the run options a client may give ``run_plan`` (the schema is generated from
#: planbook.engine.config.OPTIONS); the server's tools and store are its own, objects no JSON names
RUN_OPTIONS = ("on_failure", "retries", "max_steps", "step_timeout", "parallel")
RUN_PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "string", "description": "the plan: a YAML/JSON mapping with `steps`, or a numbered "
                                                  "Markdown list; each step names a tool of this server's toolbox"},
        **json_properties(RUN_OPTIONS),
    },
    "required": ["spec"],
}
LIST_RUNS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"limit": {"type": "integer", "minimum": 0, "description": "at most this many runs (default 20; 0: all)"}},
}
FORK_RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run": {"type": "string", "description": "the run to fork: a run id, or a plan name meaning its latest run"},
        "at": {"type": "string", "description": "the fork point: the step to change (with neither `args` nor "
                                                "`result`: a control fork from it)"},
        "args": {"type": "object", "description": "new arguments of the `at` step, merged over its old ones "
                                                  "(a value {\"$secret\": \"env:VAR\"} is a secret by reference)"},
        "result": {"description": "pin the `at` step's result to this value without running it (not with `args`)"},
        "reuse": {"type": "string", "enum": list(REUSE_CHOICES),
                  "description": "what is kept: " + "; ".join(f"{k}: {v}" for k, v in REUSE_CHOICES.items())},
        "rerun": {"type": "array", "items": {"type": "string"},
                  "description": "steps whose tool is declared idempotent=False to run again anyway"},
        **json_properties(RUN_OPTIONS),
    },
    "required": ["run"],
}
DIFF_RUNS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "runs": {"type": "array", "items": {"type": "string"}, "minItems": 2,
                 "description": "two or more runs (run ids, or plan names meaning their latest run); the first is "
                                "the base"},
        "changed_only": {"type": "boolean", "description": "only the steps that differ (default false)"},
    },
    "required": ["runs"],
}
SHOW_RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"run_id": {"type": "string", "description": "the run (default: the latest)"}},
}


#: one tool's answer: its text, its structured content (or None), whether it is an error
Answer: TypeAlias = tuple[str, dict[str, Any] | None, bool]
#: a tool's function: the server, the call's arguments, ``progress(done, total, message)`` or None
Handler: TypeAlias = Callable[["PlanbookServer", dict[str, Any], Any], Answer]


@dataclass(frozen=True)
class ServerTool:
    """A tool the server offers: what the client's listing shows of it, and the function that answers it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler

    def spec(self) -> dict[str, Any]:
        """The tool as the listing shows it (a copy: a caller cannot change the server's schema)."""
        return {"name": self.name, "description": self.description, "input_schema": copy.deepcopy(self.input_schema)}


#: the server's tools, in the order they are listed: the one table :meth:`PlanbookServer.tool_specs`
#: lists and :meth:`PlanbookServer.call` answers from (as the MCP SDK's FastMCP keeps its ``@mcp.tool()``s)
TOOLS: dict[str, ServerTool] = {}


def _serves(name: str, description: str, input_schema: dict[str, Any]) -> Callable[[Handler], Handler]:
    """Register a method of :class:`PlanbookServer` as the function of the tool ``name``."""
    def register(handler: Handler) -> Handler:
        if name in TOOLS:
            raise ValueError(f"the MCP tool {name!r} is registered twice: give each tool one function")
        TOOLS[name] = ServerTool(name, description, input_schema, handler)
        return handler

    return register


_PLANNING = PlanningTool().to_param()["function"]


class PlanbookServer:
    """The tools a client sees, and what each call does (no MCP types: testable alone)."""

    def __init__(self, *, tools: Any = None, store: Any = None) -> None:
        self.tools = tools
        self.store = store
        self.planning = PlanningTool()

    def tool_specs(self) -> list[dict[str, Any]]:
        """Every tool of :data:`TOOLS`: name, description and input schema."""
        return [tool.spec() for tool in TOOLS.values()]

    def call(self, name: str, args: dict[str, Any], progress: Any = None) -> Answer:
        """``(text, structured, is_error)`` for one call; ``progress(done, total, message)`` per finished step.

        The one door every answer leaves by: its text and its structured content pass the
        checkpoint (:func:`~planbook.outbound.mask_text`, :func:`~planbook.outbound.mask_data`) here,
        an error of any kind included, so a handler that forgets the gate cannot answer a secret.
        A bad call (a bad command, an invalid plan: :data:`~planbook.cli.common.USAGE_ERRORS`,
        the planning tool's ``ToolError``) and a fault of a handler are both error answers."""
        tool = TOOLS.get(name)
        try:
            if tool is None:
                text, structured, is_error = f"unknown tool {name!r}; this server has {', '.join(TOOLS)}", None, True
            else:
                text, structured, is_error = tool.handler(self, args, progress)
        except Exception as exc:  # noqa: BLE001 - an error answer, masked like the rest, for the model to read
            text, structured, is_error = neutralise(f"{type(exc).__name__}: {exc}"), None, True
        shown = mask_text(text)
        return bounded(shown) if is_error else shown, mask_data(structured), is_error

    def _store_path(self) -> Any:
        from ..store import default_store_path

        return self.store or default_store_path()

    # ------------------------------------------------------------------ the tools, one function each
    @_serves("planning", _PLANNING["description"], _PLANNING["parameters"])
    def _planning(self, args: dict[str, Any], progress: Any) -> Answer:
        """OpenManus's ``planning`` tool: its seven commands over planbook plans."""
        return self.planning.execute(**args), None, False

    @_serves("run_plan", "Run a plan spec with planbook and return the result: each step's status and the "
                         "outputs.", RUN_PLAN_SCHEMA)
    def _run_plan(self, args: dict[str, Any], progress: Any) -> Answer:
        """``run_plan``: a plan spec run with this server's tools and store."""
        spec = args.get("spec")
        if not isinstance(spec, str) or not spec.strip():
            raise ValueError("run_plan needs `spec`: the plan as YAML/JSON text or a numbered list")
        runner = Runner(spec, tools=self.tools, store=self._store_path(), **from_json(args, RUN_OPTIONS))
        _report_progress(runner, progress)
        result = runner.run()
        outputs = {k: _jsonable(v, result.secrets) for k, v in final_outputs(result).items()}
        run_id = getattr(runner.recorder, "run_id", None)
        structured = {"status": result.status, "reason": result.reason, "run_id": run_id, "outputs": outputs}
        return format_result(result), structured, result.status != "completed"

    @_serves("list_runs", "List the runs in planbook's run store, newest first.", LIST_RUNS_SCHEMA)
    def _list_runs(self, args: dict[str, Any], progress: Any) -> Answer:
        """``list_runs``: the text of ``planbook runs``."""
        import argparse

        from .runs import list_runs

        limit = int(args.get("limit", 20))
        return neutralise(list_runs(argparse.Namespace(store=self._store_path(), limit=limit))), None, False

    @_serves("show_run", "Show a stored run: its plan with marks, the verdict, every diff.", SHOW_RUN_SCHEMA)
    def _show_run(self, args: dict[str, Any], progress: Any) -> Answer:
        """``show_run``: the text of ``planbook show``."""
        from ..engine.resume import load_run

        return printable(load_run(args.get("run_id"), store=self._store_path())), None, False

    @_serves("fork_run", "Fork a stored run at a step with new arguments or a pinned result: the steps the "
                         "change cannot reach are kept, the rest run again.", FORK_RUN_SCHEMA)
    def _fork_run(self, args: dict[str, Any], progress: Any) -> Answer:
        """``fork_run``: :func:`planbook.engine.fork.fork` over this server's store and tools."""
        from ..data.lineage import Lineage
        from ..data.secret import from_json_refs
        from ..engine.fork import UNSET, fork

        run = args.get("run")
        if not isinstance(run, str) or not run.strip():
            raise ValueError("fork_run needs `run`: a run id, or a plan name meaning its latest run")
        edits = args.get("args")
        if edits is not None and not isinstance(edits, dict):
            raise ValueError(f"fork_run's `args` is an object of the arguments to change, not {type(edits).__name__}")
        rerun = args.get("rerun") or []
        if not isinstance(rerun, list) or not all(isinstance(s, str) for s in rerun):
            raise ValueError("fork_run's `rerun` is a list of step ids")
        runner = fork(run, at=args.get("at"), args=from_json_refs(edits) if edits is not None else None,
                      result=args["result"] if "result" in args else UNSET, reuse=args.get("reuse", "independent"),
                      store=self._store_path(), tools=self.tools, rerun=rerun, start=False,
                      **from_json(args, RUN_OPTIONS))
        try:
            _report_progress(runner, progress)
            result = runner.run()
        finally:
            runner.release_store()
        gate = result.secrets
        headline = gate.text(Lineage(**result.lineage).headline()) if result.lineage else ""
        outputs = {k: _jsonable(v, gate) for k, v in final_outputs(result).items()}
        structured = {"status": result.status, "reason": result.reason, "run_id": result.run_id,
                      "parent": result.parent, "headline": headline, "lineage": gate.data(result.lineage),
                      "outputs": outputs}
        return f"{headline}\n{format_result(result)}", structured, result.status != "completed"

    @_serves("diff_runs", "Compare stored runs step by step: what differs, the first divergence, edits told "
                          "apart from replay noise, a verdict.", DIFF_RUNS_SCHEMA)
    def _diff_runs(self, args: dict[str, Any], progress: Any) -> Answer:
        """``diff_runs``: the comparison's text, and its JSON (as ``planbook diff --json``)."""
        from ..data.rundiff import diff_runs
        from .forking import changed, diff_json, load_runs, regressed

        names = args.get("runs")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("diff_runs needs `runs`: a list of two or more run ids or plan names")
        results = load_runs(self._store_path(), names)
        diff = diff_runs(results[0], *results[1:])
        only = bool(args.get("changed_only", False))
        data = diff_json(diff, only, changed(diff), any(regressed(results[0], r) for r in results[1:]))
        return diff.hider()(diff.text(changed_only=only)), data, False


def _report_progress(runner: Runner, progress: Any) -> None:
    """A progress notification per finished step (when the client asked for progress)."""
    if progress is None:
        return
    total = len(runner.state.plan.steps)

    def report(event: Any) -> None:
        if event.kind in ("step.finished", "step.failed", "step.skipped", "step.cached"):
            done = sum(1 for st in runner.state.plan.steps if st.status.value != "not_started"
                       and st.status.value != "in_progress")
            progress(done, total, f"step {event.step}: {event.kind.split('.')[1]}")

    runner.subscribe(report)


def _jsonable(value: Any, gate: RunSecrets) -> Any:
    """An answer as JSON, through the run's gate (``final_outputs`` redacted the plain data)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return gate.text(repr(value))


def build_server(app: PlanbookServer) -> Any:
    """The MCP SDK's low-level server over ``app`` (the schemas are given, not derived)."""
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[types.Tool(**spec) for spec in app.tool_specs()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        def progress(done: int, total: int, message: str) -> None:
            anyio.from_thread.run(ctx.session.report_progress, float(done), float(total), mask_text(message))

        # a run blocks: off the server's loop, so progress and other requests still flow
        text, structured, is_error = await anyio.to_thread.run_sync(
            lambda: app.call(params.name, dict(params.arguments or {}), progress))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=structured, is_error=is_error)

    from ..data.version import __version__

    return Server("planbook", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def load_tools(ref: str) -> Toolbox:
    """``--tools MODULE:OBJECT`` as the toolbox ``run_plan`` uses: checked before the server
    starts, so a bad ref is one :class:`~planbook.cli.common.UsageProblem` naming it (exit code 2),
    not a server that fails at the first call."""
    label = f"--tools {ref}"
    obj = load_object(ref, "tools", label=label)
    try:
        return as_toolbox(obj)
    except (TypeError, ValueError, PlanbookError) as exc:
        problem = str(exc) if isinstance(obj, (Mapping, list, tuple, set)) else f"is {_a(type(obj).__name__)}, not tools"
        raise UsageProblem(f"{label}: {problem}: give a Toolbox, a {{name: function}} mapping or a list of functions") \
            from None


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def serve(tools: str | None = None, store: str | None = None) -> int:
    """Serve over stdio until the client closes the connection. A bad ``tools`` ref raises
    :class:`~planbook.cli.common.UsageProblem` before anything is served."""
    app = PlanbookServer(tools=load_tools(tools) if tools else None, store=store)
    try:
        import anyio
        from mcp.server.stdio import stdio_server

        server = build_server(app)
    except ImportError as exc:  # the optional extra is not installed
        raise UsageProblem(f"mcp serve needs the MCP SDK ({exc}): pip install 'planbook[mcp]'") from None

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0
