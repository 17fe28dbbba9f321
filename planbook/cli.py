"""``planbook`` on the command line: run a plan spec with a live terminal view, or the demo.

Exit codes: 0 the run completed, 1 it failed or was interrupted, 2 a bad spec or usage.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from .errors import PlanError
from .models import Plan, RunResult
from .policies import POLICIES
from .runner import Runner
from .textview import format_result, summary_line
from .tools import Toolbox

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_OUTPUT_LINES = 20  # what a step printed is shown after the run, this much of it


class UsageProblem(Exception):
    """A command-line mistake: printed with the usage hint, exit code 2."""


def load_object(ref: str, what: str) -> Any:
    """``module:object`` (module importable from the current directory) → the object."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UsageProblem(f"--{what} takes module:object (e.g. mytools:toolbox), got {ref!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageProblem(f"--{what}: cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:  # a SyntaxError or a crash while the module runs: still a usage problem
        raise UsageProblem(f"--{what}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise UsageProblem(f"--{what}: module {module_name!r} has no {attr!r}") from None
    return obj


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
    run.add_argument("--timeout", type=float, default=None, help="seconds a step may take")
    run.add_argument("--parallel", type=int, default=1, metavar="N",
                     help="run up to N steps whose needs are done at once (default 1: one at a time, in plan order)")
    run.add_argument("--strategy", metavar="NAME", default=None,
                     help="run as a seed design: planbook (default), lesson, openmanus or agenticseek")
    run.add_argument("--faithful", action="store_true",
                     help="with --strategy openmanus or agenticseek: reproduce that design's pitfalls")
    run.add_argument("--plain", action="store_true", help="no live view; print the final result only")

    check = sub.add_parser("check", help="validate a plan spec without running it")
    check.add_argument("file")
    check.add_argument("--tools", metavar="MODULE:OBJECT")
    check.add_argument("--agents", metavar="MODULE:OBJECT")

    demo = sub.add_parser("demo", help="run the bundled offline demo (a failure, a replan, a diff)")
    demo.add_argument("--plain", action="store_true", help="no live view; print the final result only")
    demo.add_argument("--pace", type=float, default=0.0, metavar="SECONDS",
                      help="make each step take SECONDS longer, so the live view can be followed (for presenting)")
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
        print(format_result(result))
    else:
        from .termview import TerminalView

        with TerminalView(runner):
            result = runner.run()
        print(summary_line(result))
        if result.error:
            print(("Error: " if not result.ok else "Note: ") + result.error)
    for step in result.plan.steps:
        if step.output:
            lines = step.output.rstrip("\n").splitlines()
            shown = "\n".join(lines[:MAX_OUTPUT_LINES])
            more = f"\n… {len(lines) - MAX_OUTPUT_LINES} more lines" if len(lines) > MAX_OUTPUT_LINES else ""
            print(f"\nStep {step.id} printed:\n{shown}{more}")
    for step_id, value in final_outputs(result).items():
        print(f"\nResult of step {step_id}:\n{value}")
    return result


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
    return {sid: value for sid, value in result.outputs.items() if sid not in needed}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import demo_plan, demo_planner, demo_tools

            if args.pace < 0:
                raise UsageProblem(f"--pace takes seconds >= 0, got {args.pace}")
            tools = paced(demo_tools, args.pace) if args.pace else demo_tools
            runner = Runner(demo_plan(), planner=demo_planner, tools=tools)
            result = _execute(runner, args.plain)
            return EXIT_OK if result.ok else EXIT_FAILED
        tools = load_object(args.tools, "tools") if args.tools else None
        agents = load_object(args.agents, "agents") if args.agents else None
        plan = _read_spec(args.file)
        if args.command == "check":
            from .agents import as_agents
            from .tools import as_toolbox
            from .validate import validate_plan

            validate_plan(plan, as_toolbox(tools), as_agents(agents))
            print(f"{args.file}: valid plan with {len(plan.steps)} steps")
            return EXIT_OK
        planner = load_object(args.planner, "planner") if args.planner else None
        runner = Runner(
            plan, planner=planner, tools=tools, agents=agents, on_failure=args.on_failure, retries=args.retries,
            max_steps=args.max_steps, max_replans=args.max_replans, step_timeout=args.timeout,
            parallel=args.parallel, strategy=args.strategy, faithful=args.faithful,
        )
    except (PlanError, UsageProblem, ValueError, TypeError) as exc:
        print(f"planbook: {exc}", file=sys.stderr)
        if isinstance(exc, PlanError) and args.command != "demo" and not (args.tools or getattr(args, "agents", None)):
            codes = set(exc.codes)
            if "unknown_tool" in codes or "unknown_agent" in codes:
                print("planbook: hint: name the tools with --tools module:object (and agents with --agents module:object)",
                      file=sys.stderr)
        return EXIT_USAGE
    result = _execute(runner, args.plain)
    return EXIT_OK if result.ok else EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
