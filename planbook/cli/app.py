"""``planbook`` on the command line: run a plan spec with a live terminal view, or the demo.

Exit codes: 0 the run completed, 1 it failed or was interrupted, 2 a bad spec or usage.
Each subcommand is one function, found in one table (:data:`COMMANDS`, as pip's ``commands_dict``);
what a command starts (the ``--mcp`` servers, a run's store) is registered with the one
:class:`~contextlib.ExitStack` :func:`_main` holds, and stopped there once, however the command ends
(as click's ``Context.with_resource``).
Everything it prints from a run or a store (results, printed output, errors, run lists)
goes through the gate (:func:`~planbook.outbound.text.neutralise`): stored text cannot drive the terminal.
And every byte written to ``sys.stdout``/``sys.stderr`` while the command runs, by planbook or
by a tool, is masked on its way out (:mod:`.streams`: the one writer).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import functools
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from ..data.errors import NothingToResume, PlanbookError, PlanError
from ..data.models import Plan, RunResult
from ..engine.runner import Runner
from ..outbound import neutralise, one_line
from ..views.text import format_result, summary_line
from ..workers.tools import Toolbox
from . import forking
from . import runs as cli_runs
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    USAGE_ERRORS,
    UsageProblem,
    final_outputs,
    load_given,
    printable,
    read_spec,
)
from .options import RUN_FLAGS, add_run_options, run_options
from .streams import masked_streams

MAX_OUTPUT_LINES = 20  # what a step printed is shown after the run, this much of it


def _pace(text: str) -> float:
    """``--pace``: a finite number of seconds >= 0 (``nan`` and ``inf`` are no pace)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: --pace takes a number of seconds >= 0")
    return value


#: what the command line says about an option beyond its one line of help
_MORE_HELP = {
    "approve": "The prompt is [a]pprove [s]kip [e]dit [q]uit on the terminal (quit stops the run: failed, "
               "aborted); with standard input not a terminal it is an error. The live table pauses while the "
               "prompt asks",
}


def build_parser() -> argparse.ArgumentParser:
    """The ``planbook`` parser: one subcommand per entry of :data:`COMMANDS` (a test holds them equal)."""
    parser = argparse.ArgumentParser(prog="planbook", description="Run plan-and-execute plans.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a plan spec (YAML/JSON mapping or Markdown list)")
    run.add_argument("file", help="the plan spec file ('-' reads standard input)")
    run.add_argument("--tools", metavar="MODULE:OBJECT", help="a Toolbox, {name: function} mapping or list of functions")
    run.add_argument("--agents", metavar="MODULE:OBJECT", help="a {name: agent} mapping or list of agents")
    run.add_argument("--planner", metavar="MODULE:OBJECT", help="a planner function, used to replan after failures")
    add_run_options(run, RUN_FLAGS, extra_help=_MORE_HELP)
    run.add_argument("--plain", action="store_true", help="no live view; print the final result only")
    run.add_argument("--store", metavar="PATH", help=cli_runs.STORE_HELP)
    run.add_argument("--no-store", action="store_true", help="keep no record of the run (it cannot be resumed)")
    run.add_argument("--mcp", action="append", default=[], metavar='"CMD ARGS"',
                     help="also use the tools of this MCP server (a stdio command line, or an http(s) URL); repeatable")

    check = sub.add_parser("check", help="validate a plan spec without running it")
    check.add_argument("file")
    check.add_argument("--tools", metavar="MODULE:OBJECT")
    check.add_argument("--agents", metavar="MODULE:OBJECT")
    check.add_argument("--mcp", action="append", default=[], metavar='"CMD ARGS"', help="also the tools of this MCP server")

    demo = sub.add_parser("demo", help="run the bundled offline demo (a failure, a replan, a diff)")
    demo.add_argument("--plain", action="store_true", help="no live view; print the final result only")
    demo.add_argument("--pace", type=_pace, default=0.0, metavar="SECONDS",
                      help="make each step take SECONDS longer, so the live view can be followed (for presenting)")

    sub.add_parser("schema", help="print the JSON Schema of plan files (for editors: see the README)")
    mcp = sub.add_parser("mcp", help="planbook as an MCP server (needs planbook[mcp])")
    serve = mcp.add_subparsers(dest="mcp_command", required=True).add_parser(
        "serve", help="serve planning, run_plan, list_runs and show_run over stdio")
    serve.add_argument("--tools", metavar="MODULE:OBJECT", help="the tools run_plan's steps may call")
    serve.add_argument("--store", metavar="PATH", help=cli_runs.STORE_HELP)
    load_help = {"tools": "the tools the run used", "agents": "the agents the run used",
                 "planner": "the planner the run used, for replans"}
    cli_runs.add_commands(sub, load_help)
    forking.add_commands(sub, load_help)
    return parser


def _execute(runner: Runner, plain: bool) -> RunResult:
    if plain or not sys.stdout.isatty():
        result = runner.run()
        print(neutralise(format_result(result)))
    else:
        from ..views.terminal import TerminalView

        with TerminalView(runner) as view:
            _pause_view_to_ask(runner, view)
            result = runner.run()
        print(neutralise(summary_line(result)))
        if result.error:
            print(result.secrets.terminal(("Error: " if not result.ok else "Note: ") + result.error))
        for step in result.plan.steps:  # the table has no notes: why a step did not run (a skip at the prompt)
            if step.status.value in ("skipped", "blocked") and step.notes:
                print(result.secrets.terminal(f"Step {step.id} {step.status.value}: {step.notes}"))
    gate = result.secrets
    for step in result.plan.steps:
        if step.output:
            lines = step.output.rstrip("\n").splitlines()
            shown = "\n".join(lines[:MAX_OUTPUT_LINES])
            more = f"\n… {len(lines) - MAX_OUTPUT_LINES} more lines" if len(lines) > MAX_OUTPUT_LINES else ""
            print(gate.terminal(f"\nStep {step.id} printed:\n{shown}{more}"))
    for step_id, value in final_outputs(result).items():
        print(neutralise(f"\nResult of step {step_id}:\n{printable(value, gate)}"))
    return result


def _pause_view_to_ask(runner: Runner, view: Any) -> None:
    """The live table stays on when steps may ask (a tool registered with ``approve=True`` is
    in the toolbox, used or not): while the prompt asks, the table stops redrawing (it stays
    on the screen as it was), and it starts again below the answer. The prompt runs on the
    runner's thread, the only one that redraws the table."""
    steering = runner.steering
    prompt = steering.prompt if steering is not None else None
    if steering is None or prompt is None or prompt is steering.rule.callback:
        return

    def redraw() -> None:
        if view.bridge is not None:  # the state now, not the last throttled drawing
            view.render(view.bridge.state())

    def asking(step: Any, context: Any) -> Any:
        redraw()
        view.live.stop()
        try:
            return prompt(step, context)
        finally:
            view.live.start()
            redraw()

    steering.ask_with(asking)


#: the marks and signs planbook prints, as ASCII, for a stream whose encoding lacks them
ASCII_MARKS = {"✓": "v", "✗": "x", "→": "->", "…": "...", "—": "--", "–": "-", "≥": ">=", "≤": "<=", "└": "`", "─": "-"}
_ASCII_HANDLER = "planbook-ascii"


def _ascii_replace(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(ASCII_MARKS.get(ch) or ch.encode("ascii", "backslashreplace").decode() for ch in text), error.end


codecs.register_error(_ASCII_HANDLER, _ascii_replace)


@contextlib.contextmanager
def ascii_fallback(*streams: TextIO) -> Iterator[None]:
    """While the command runs, a stream that cannot encode the marks (``[✓]``; a cp1252 console,
    Windows' redirected output) writes them as ASCII (``[v]``) instead of raising. The one place
    that decides it: everything the command prints goes through these streams."""
    changed: list[tuple[Any, str | None]] = []
    for stream in streams:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            "".join(ASCII_MARKS).encode(encoding)
            continue
        except (UnicodeEncodeError, LookupError):
            pass
        if hasattr(stream, "reconfigure"):
            changed.append((stream, stream.errors))
            stream.reconfigure(errors=_ASCII_HANDLER)
    try:
        yield
    finally:
        for stream, errors in changed:
            stream.reconfigure(errors=errors)


def paced(tools: Toolbox, seconds: float) -> Toolbox:
    """The same tools, each taking ``seconds`` longer: a step then shows as running in the
    live view for that long (for presenting), and its time includes the pause."""
    box = Toolbox()
    for name, tool in tools.items():
        box.add(_slowed(tool.fn, seconds), name=name, description=tool.description)
    return box


def _slowed(fn: Any, seconds: float) -> Any:
    @functools.wraps(fn)  # keeps the signature and type hints the tool's arguments are checked against
    def slowed(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            time.sleep(seconds)

    return slowed


def main(argv: Sequence[str] | None = None) -> int:
    """The command; everything it prints passes the one writer (:func:`.streams.masked_streams`)."""
    try:
        with ascii_fallback(sys.stdout, sys.stderr), masked_streams():
            try:
                return _main(argv)
            except (KeyboardInterrupt, SystemExit, BrokenPipeError):
                raise
            except Exception:  # a fault no command expected: its traceback through the masking stderr,
                traceback.print_exc()  # not printed by Python after the streams are put back
                return EXIT_FAILED
    except BrokenPipeError:  # `planbook runs | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _main(argv: Sequence[str] | None) -> int:
    """Parse, then run the command's function. What the command started is stopped here, once,
    whether it returned, failed or was interrupted (argparse has already refused a name not in
    :data:`COMMANDS`, naming the known ones)."""
    args = build_parser().parse_args(argv)
    with contextlib.ExitStack() as resources:
        return COMMANDS[args.command](args, resources)


# ------------------------------------------------------------------ the commands, one function each
#: a command: the parsed arguments, and the stack that stops what it starts when it ends; its exit code
Command = Callable[[argparse.Namespace, contextlib.ExitStack], int]


def _verdict(result: RunResult) -> int:
    return EXIT_OK if result.ok else EXIT_FAILED


def _refuse(line: str) -> int:
    """A usage problem, said in one line on stderr: exit code 2."""
    print(line, file=sys.stderr)
    return EXIT_USAGE


def _ready(runner: Runner, resources: contextlib.ExitStack) -> Runner:
    """Every runner a command builds: its store is released when the command ends (an open
    connection keeps the write-ahead log beside the file), and a step that asks for approval
    asks on the terminal."""
    resources.callback(runner.release_store)
    from .prompt import attach_prompt

    attach_prompt(runner)
    return runner


def _loaded(args: argparse.Namespace, resources: contextlib.ExitStack) -> tuple[Any, Any, Plan]:
    """``run``'s and ``check``'s tools (with the tools of each ``--mcp`` server, stopped when the
    command ends), agents and plan spec."""
    tools = load_given(args.tools, "tools")
    if args.mcp:
        from ..mcp.client import with_servers

        tools, servers = with_servers(tools, args.mcp)
        for server in servers:
            resources.callback(server.close)
    return tools, load_given(args.agents, "agents"), read_spec(args.file)


def _bad_spec(args: argparse.Namespace, exc: Exception) -> int:
    """A bad spec, option or ``--store`` of ``run``/``check``; unknown tools with none given: the flags' hint."""
    print(neutralise(f"planbook: {exc}"), file=sys.stderr)
    if isinstance(exc, PlanError) and not (args.tools or args.agents or args.mcp):
        codes = set(exc.codes)
        if "unknown_tool" in codes or "unknown_agent" in codes:
            print("planbook: hint: name the tools with --tools module:object (and agents with --agents module:object)",
                  file=sys.stderr)
    return EXIT_USAGE


def _run(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook run``: the plan spec, run with the live view (or ``--plain``)."""
    try:
        tools, agents, plan = _loaded(args, resources)
        planner = load_given(args.planner, "planner")
        if args.cache and args.no_store:
            raise UsageProblem("--cache reuses results stored by earlier runs, and --no-store keeps no store: "
                               "drop one of them")
        runner = _ready(Runner(plan, planner=planner, tools=tools, agents=agents,
                               store=None if args.no_store else cli_runs.store_path(args),
                               **run_options(args, RUN_FLAGS)), resources)
    except USAGE_ERRORS as exc:
        return _bad_spec(args, exc)
    return _verdict(_execute(runner, args.plain))


def _check(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook check``: the spec validated against the tools and agents, nothing run."""
    from ..spec.validate import validate_plan
    from ..workers.agents import as_agents
    from ..workers.tools import as_toolbox

    try:
        tools, agents, plan = _loaded(args, resources)
        validate_plan(plan, as_toolbox(tools), as_agents(agents))
    except USAGE_ERRORS as exc:
        return _bad_spec(args, exc)
    print(f"{args.file}: valid plan with {len(plan.steps)} steps")
    return EXIT_OK


def _demo(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook demo``: its plan is known good, so an error in its run is not a usage error."""
    from .demo import demo_plan, demo_planner, demo_tools

    toolbox = paced(demo_tools, args.pace) if args.pace else demo_tools
    return _verdict(_execute(Runner(demo_plan(), planner=demo_planner, tools=toolbox), args.plain))


def _schema(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook schema``: the JSON Schema of plan files."""
    import json

    from ..spec.schema import plan_schema

    print(json.dumps(plan_schema(), indent=2, ensure_ascii=False))
    return EXIT_OK


def _mcp(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook mcp serve``: until the client closes the connection."""
    from .mcpserve import serve

    try:
        return serve(tools=args.tools, store=args.store)
    except UsageProblem as exc:  # raised before the server starts: nothing was served
        return _refuse(one_line(f"planbook: {exc}"))


def _from_store(read: Callable[[], str]) -> int:
    """What ``read`` says of the store; no store there, no such run, a damaged run: one line each."""
    try:
        text = read()
    except PlanbookError as exc:
        return _refuse(one_line(f"planbook: {exc}"))
    print(text)
    return EXIT_OK


def _runs(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook runs``: the store's runs, newest first."""
    return _from_store(lambda: neutralise(cli_runs.list_runs(args)))


def _show(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook show``: a stored run, or one step's pane."""
    return _from_store(lambda: printable(cli_runs.show_run(args)))


def _resume(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook resume``: a stored run finished; a run that already ended is shown."""
    from ..engine.resume import resume

    try:
        runner = _ready(resume(args.run_id, store=cli_runs.store_path(args), rerun=args.rerun,
                               tools=load_given(args.tools, "tools"), agents=load_given(args.agents, "agents"),
                               planner=load_given(args.planner, "planner"),
                               plan=read_spec(args.plan) if args.plan else None, run=False, force=args.force),
                        resources)
    except NothingToResume:  # a finished run: say so, show it
        result = cli_runs.show_run(args)
        print(f"run {args.run_id or 'latest'} already ended; nothing to resume\n{printable(result)}")
        return _verdict(result)
    except USAGE_ERRORS as exc:
        return _refuse(neutralise(f"planbook: {exc}"))
    return _verdict(_execute(runner, args.plain))


def _fork(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook fork``: the lineage headline, then the child's run as ``planbook run`` shows it."""
    try:
        runner = _ready(forking.fork_runner(args), resources)
    except USAGE_ERRORS as exc:
        return _refuse(one_line(f"planbook: {forking.with_flags(str(exc))}"))
    print(forking.headline(runner))
    return _verdict(_execute(runner, args.plain))


def _diff(args: argparse.Namespace, resources: contextlib.ExitStack) -> int:
    """``planbook diff``: stored runs compared; ``--fail-on`` sets the exit code."""
    return forking.diff_command(args)


#: each subcommand's function: the one place a command's name meets its code
COMMANDS: dict[str, Command] = {
    "run": _run, "check": _check, "demo": _demo, "schema": _schema, "mcp": _mcp,
    "runs": _runs, "show": _show, "resume": _resume, "fork": _fork, "diff": _diff,
}
