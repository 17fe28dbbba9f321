"""``planbook`` on the command line: run a plan spec with a live terminal view, or the demo.

Exit codes: 0 the run completed, 1 it failed or was interrupted, 2 a bad spec or usage.
Everything it prints from a run or a store (results, printed output, errors, run lists)
goes through the gate (:func:`~planbook.outbound.text.neutralise`): stored text cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import functools
import importlib
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from . import runs as cli_runs
from ..data.errors import PlanbookError, PlanError, closest
from ..data.models import Plan, RunResult
from ..outbound import RunSecrets, neutralise, one_line, plain_gate
from ..engine.policies import POLICIES
from ..engine.runner import Runner
from ..views.text import format_result, summary_line
from ..workers.tools import Toolbox

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_OUTPUT_LINES = 20  # what a step printed is shown after the run, this much of it


class UsageProblem(Exception):
    """A command-line mistake: printed with the usage hint, exit code 2."""


def load_object(ref: str, what: str, *, label: str | None = None) -> Any:
    """``module:object`` (module importable from the current directory) → the object.
    ``label`` starts each error instead of ``--WHAT`` (``mcp serve`` names the ref too)."""
    label = label or f"--{what}"
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UsageProblem(f"{label}: not module:object (e.g. mytools:toolbox)" if label != f"--{what}" else
                           f"{label} takes module:object (e.g. mytools:toolbox), got {ref!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = closest(module_name, _local_modules()) if getattr(exc, "name", None) == module_name else ""
        raise UsageProblem(f"{label}: cannot import module {module_name!r}: {exc}{hint}") from None
    except Exception as exc:  # a SyntaxError or a crash while the module runs: still a usage problem
        raise UsageProblem(f"{label}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    obj, where, parts = module, f"module {module_name!r}", attr.split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            public = [name for name in dir(obj) if not name.startswith("_")]
            raise UsageProblem(f"{label}: {where} has no {part!r}{closest(part, public)}")
        obj, where = getattr(obj, part), f"{module_name}:{'.'.join(parts[: i + 1])}"
    return obj


def _local_modules() -> list[str]:
    """Modules importable from the current directory (for "did you mean" on a module name)."""
    try:
        names = os.listdir(os.getcwd())
    except OSError:
        return []
    return [n[:-3] if n.endswith(".py") else n for n in names
            if n.endswith(".py") or os.path.isfile(os.path.join(n, "__init__.py"))]


def _seconds(text: str, *, zero_ok: bool = False, option: str = "--timeout") -> float:
    """A finite number of seconds, positive (``--timeout``) or at least 0 (``--pace``):
    ``nan`` and ``inf`` would silently mean "no limit"."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and (value >= 0 if zero_ok else value > 0)):
        wanted = "a number of seconds >= 0" if zero_ok else f"a positive number of seconds (leave {option} out for no limit)"
        raise argparse.ArgumentTypeError(f"{text!r}: {option} takes {wanted}")
    return value


def _policy_chain(text: str) -> list[str]:
    """``retry,replan`` → ["retry", "replan"]; each name checked (argparse reports the error)."""
    chain = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [p for p in chain if p not in POLICIES]
    if not chain or unknown:
        raise argparse.ArgumentTypeError(f"unknown policy {', '.join(unknown) or text!r}; choose from {', '.join(POLICIES)}")
    return chain


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="planbook", description="Run plan-and-execute plans.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a plan spec (YAML/JSON mapping or Markdown list)")
    run.add_argument("file", help="the plan spec file ('-' reads standard input)")
    run.add_argument("--tools", metavar="MODULE:OBJECT", help="a Toolbox, {name: function} mapping or list of functions")
    run.add_argument("--agents", metavar="MODULE:OBJECT", help="a {name: agent} mapping or list of agents")
    run.add_argument("--planner", metavar="MODULE:OBJECT", help="a planner function, used to replan after failures")
    run.add_argument("--on-failure", type=_policy_chain, metavar="POLICY",
                     help=f"{', '.join(POLICIES)}, or a chain such as retry,replan "
                          "(default: replan with a planner, else abort)")
    run.add_argument("--retries", type=int, default=None, help="extra attempts for --on-failure retry (default 1)")
    run.add_argument("--max-steps", type=int, default=12, help="cap on step executions (default 12)")
    run.add_argument("--max-replans", type=int, default=5, help="cap on replans (default 5)")
    run.add_argument("--timeout", type=_seconds, default=None, help="seconds a step may take")
    run.add_argument("--parallel", type=int, default=1, metavar="N",
                     help="run up to N steps whose needs are done at once (default 1: one at a time, in plan order)")
    run.add_argument("--strategy", metavar="NAME", default=None,
                     help="run as a seed design: planbook (default), lesson, openmanus or agenticseek")
    run.add_argument("--faithful", action="store_true",
                     help="with --strategy openmanus or agenticseek: reproduce that design's pitfalls")
    run.add_argument("--plain", action="store_true", help="no live view; print the final result only")
    run.add_argument("--approve", nargs="?", const=True, default=None, metavar="IDS|TOOLS",
                     help="ask before steps start: every step, or the step ids / tool names given (comma-separated); "
                          "tools registered with approve=True always ask. The prompt is [a]pprove [s]kip [e]dit "
                          "[q]uit on the terminal (quit stops the run: failed, aborted); with standard input not a "
                          "terminal it is an error. The live table pauses while the prompt asks")
    run.add_argument("--approve-timeout", type=functools.partial(_seconds, option="--approve-timeout"), default=None, metavar="SECONDS",
                     help="seconds a step may wait for a decision; then the run stops (failed, aborted)")
    run.add_argument("--store", metavar="PATH", help=cli_runs.STORE_HELP)
    run.add_argument("--no-store", action="store_true", help="keep no record of the run (it cannot be resumed)")
    cache = run.add_mutually_exclusive_group()
    cache.add_argument("--cache", dest="cache", action="store_const", const=True, default=None,
                       help="answer a tool call made in an earlier stored run with the same arguments and code "
                            "from that run's result (off by default: a tool that reads a clock, a price or a file "
                            "would give yesterday's answer; tools registered with cache=True are cached anyway)")
    cache.add_argument("--no-cache", dest="cache", action="store_const", const=False,
                       help="reuse no earlier results, not even for tools registered with cache=True "
                            "(without either flag, only those are)")
    run.add_argument("--mcp", action="append", default=[], metavar='"CMD ARGS"',
                     help="also use the tools of this MCP server (a stdio command line, or an http(s) URL); repeatable")

    check = sub.add_parser("check", help="validate a plan spec without running it")
    check.add_argument("file")
    check.add_argument("--tools", metavar="MODULE:OBJECT")
    check.add_argument("--agents", metavar="MODULE:OBJECT")
    check.add_argument("--mcp", action="append", default=[], metavar='"CMD ARGS"', help="also the tools of this MCP server")

    demo = sub.add_parser("demo", help="run the bundled offline demo (a failure, a replan, a diff)")
    demo.add_argument("--plain", action="store_true", help="no live view; print the final result only")
    demo.add_argument("--pace", type=functools.partial(_seconds, zero_ok=True, option="--pace"), default=0.0, metavar="SECONDS",
                      help="make each step take SECONDS longer, so the live view can be followed (for presenting)")

    sub.add_parser("schema", help="print the JSON Schema of plan files (for editors: see the README)")
    mcp = sub.add_parser("mcp", help="planbook as an MCP server (needs planbook[mcp])")
    serve = mcp.add_subparsers(dest="mcp_command", required=True).add_parser(
        "serve", help="serve planning, run_plan, list_runs and show_run over stdio")
    serve.add_argument("--tools", metavar="MODULE:OBJECT", help="the tools run_plan's steps may call")
    serve.add_argument("--store", metavar="PATH", help=cli_runs.STORE_HELP)
    cli_runs.add_commands(sub, {"tools": "the tools the run used", "agents": "the agents the run used",
                                "planner": "the planner the run used, for replans"})
    return parser


def _read_spec(path: str) -> Plan:
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise UsageProblem(f"cannot read plan spec {path!r}: {exc.strerror}") from None
    return Plan.parse(text)


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


def printable(value: Any, gate: RunSecrets | None = None) -> str:
    """``str(value)`` through the gate (``gate``: the run's secrets) with its control characters
    shown as escapes; a result whose ``__str__`` raises is described instead (the run is done:
    printing its answers must not turn it into a crash)."""
    hide = (gate or plain_gate()).text
    try:
        return neutralise(hide(str(value)))
    except Exception as exc:
        try:
            text = repr(value)
        except Exception:
            text = f"a {type(value).__name__} object"
        return neutralise(hide(f"{text} (printing it failed: {type(exc).__name__}: {exc})"))


#: the marks and signs planbook prints, as ASCII, for a stream whose encoding lacks them
ASCII_MARKS = {"✓": "v", "✗": "x", "→": "->", "…": "...", "—": "--", "–": "-", "≥": ">=", "≤": "<="}
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


def final_outputs(result: RunResult) -> dict[str, Any]:
    """Results of the completed steps no other step needs: the run's answers.

    (AgenticSeek returns only the last agent's answer; a plan can have several leaves.)
    """
    needed = {n for step in result.plan.steps for n in step.needs}
    gate = result.secrets  # a step that feeds a secret-named argument answers ***
    return {sid: gate.value(sid, value) for sid, value in result.outputs.items() if sid not in needed}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with ascii_fallback(sys.stdout, sys.stderr):
            return _main(argv)
    except BrokenPipeError:  # `planbook runs | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "schema":
        import json

        from ..spec.schema import plan_schema

        print(json.dumps(plan_schema(), indent=2, ensure_ascii=False))
        return EXIT_OK
    if args.command in ("runs", "show"):
        try:
            if args.command == "runs":
                print(neutralise(cli_runs.list_runs(args)))
            else:
                print(printable(cli_runs.show_run(args)))
        except PlanbookError as exc:  # no store there, no such run, a damaged run: one line each
            print(one_line(f"planbook: {exc}"), file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK
    if args.command == "resume":
        return _resume(args)
    if args.command == "mcp":
        from .mcpserve import serve

        try:
            return serve(tools=args.tools, store=args.store)
        except UsageProblem as exc:  # raised before the server starts: nothing was served
            print(one_line(f"planbook: {exc}"), file=sys.stderr)
            return EXIT_USAGE
    if args.command == "demo":  # the demo's plan is known good: an error in its run is not a usage error
        from .demo import demo_plan, demo_planner, demo_tools

        tools = paced(demo_tools, args.pace) if args.pace else demo_tools
        result = _execute(Runner(demo_plan(), planner=demo_planner, tools=tools), args.plain)
        return EXIT_OK if result.ok else EXIT_FAILED
    servers: list[Any] = []  # MCP servers started for --mcp: stopped when the run ends
    try:
        tools = load_object(args.tools, "tools") if args.tools else None
        if getattr(args, "mcp", None):
            from ..mcp.client import with_servers

            tools, servers = with_servers(tools, args.mcp)
        agents = load_object(args.agents, "agents") if args.agents else None
        plan = _read_spec(args.file)
        if args.command == "check":
            from ..workers.agents import as_agents
            from ..workers.tools import as_toolbox
            from ..spec.validate import validate_plan

            try:
                validate_plan(plan, as_toolbox(tools), as_agents(agents))
            finally:
                for server in servers:
                    server.close()
            print(f"{args.file}: valid plan with {len(plan.steps)} steps")
            return EXIT_OK
        planner = load_object(args.planner, "planner") if args.planner else None
        if args.cache and args.no_store:
            raise UsageProblem("--cache reuses results stored by earlier runs, and --no-store keeps no store: "
                               "drop one of them")
        runner = Runner(
            plan, planner=planner, tools=tools, agents=agents, on_failure=args.on_failure, retries=args.retries,
            max_steps=args.max_steps, max_replans=args.max_replans, step_timeout=args.timeout,
            parallel=args.parallel, strategy=args.strategy, faithful=args.faithful,
            store=None if args.no_store else cli_runs.store_path(args), cache=args.cache,
            approve=args.approve.split(",") if isinstance(args.approve, str) else args.approve,
            approve_timeout=args.approve_timeout,
        )
        from .prompt import attach_prompt

        attach_prompt(runner)
    except (PlanbookError, UsageProblem, ValueError, TypeError) as exc:  # a bad spec, option or --store
        for server in servers:
            server.close()
        print(neutralise(f"planbook: {exc}"), file=sys.stderr)
        if isinstance(exc, PlanError) and not (args.tools or args.agents or getattr(args, "mcp", None)):
            codes = set(exc.codes)
            if "unknown_tool" in codes or "unknown_agent" in codes:
                print("planbook: hint: name the tools with --tools module:object (and agents with --agents module:object)",
                      file=sys.stderr)
        return EXIT_USAGE
    try:
        result = _execute(runner, args.plain)
    finally:
        for server in servers:
            server.close()
    return EXIT_OK if result.ok else EXIT_FAILED


def _resume(args: argparse.Namespace) -> int:
    from ..engine.resume import NothingToResume, resume

    try:
        runner = resume(
            args.run_id, store=cli_runs.store_path(args), rerun=args.rerun,
            tools=load_object(args.tools, "tools") if args.tools else None,
            agents=load_object(args.agents, "agents") if args.agents else None,
            planner=load_object(args.planner, "planner") if args.planner else None,
            plan=_read_spec(args.plan) if args.plan else None, run=False, force=args.force,
        )
        from .prompt import attach_prompt

        attach_prompt(runner)  # a step that was waiting asks again, on the terminal
    except NothingToResume:  # a finished run: say so, show it
        result = cli_runs.show_run(args)
        print(f"run {args.run_id or 'latest'} already ended; nothing to resume\n{printable(result)}")
        return EXIT_OK if result.ok else EXIT_FAILED
    except PlanbookError as exc:
        print(neutralise(f"planbook: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except (UsageProblem, ValueError, TypeError) as exc:
        print(neutralise(f"planbook: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    result = _execute(runner, args.plain)
    return EXIT_OK if result.ok else EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    # ``python -m planbook.cli.main``: run the module planbook.cli.main, not this second copy of it named
    # __main__, so that a UsageProblem raised by a module that imports planbook.cli.main (mcp serve's
    # --tools) is the class the command catches
    from .main import main as _main_of_the_module

    sys.exit(_main_of_the_module())
