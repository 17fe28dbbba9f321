"""``%%plan`` and ``%run_plan``: plans as notebook cells.

``%load_ext planbook`` calls :func:`register`. The cell *is* the plan: ``%%plan NAME``
validates its body and stores the :class:`~planbook.data.models.Plan` as ``NAME``;
``%run_plan NAME`` runs it with a live view and returns the
:class:`~planbook.data.models.RunResult`. One runner is kept per NAME, so ``--step`` and
``--until`` pause a run that a later ``%run_plan NAME`` continues.

The magics take their text literally: ``{x}`` and ``$x`` are not expanded by IPython,
in the line or in the cell body (plans use ``$id`` references and braces in tasks).
"""

from __future__ import annotations

import builtins
import keyword
import math
import os
import re
import shlex
import sys
import textwrap
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from ..data.errors import PlanError, Problem, RunFailed, closest
from ..data.models import Event, Plan, RunResult, Status
from ..outbound import one_line
from ..workers.planners import make_plan
from ..engine.policies import POLICIES
from ..engine.runner import Runner
from ..spec.formats import is_plan_spec
from ..workers.tools import as_toolbox, default_toolbox
from ..spec.validate import validate_plan
from ..views.text import format_planning

LLM = "llm"
CACHE_HELP = ("answer a tool call from an earlier run's result of the same call (same tool code, same arguments): "
              "off by default, since a tool that reads a clock, a price or a file would give yesterday's answer; "
              "tools registered with cache=True are cached anyway, cache=False and idempotent=False never")
NO_CACHE_HELP = "reuse no earlier run's results, not even for tools registered with cache=True"


class CellPlanError(PlanError):
    """A :class:`PlanError` about a ``%%plan`` cell: its short traceback quotes the cell's lines."""

    def __init__(self, problems: list[Problem], *, source: str | None = None, offset: int = 0) -> None:
        shifted = [
            Problem(magic_words(p.message), step=p.step, code=p.code, line=p.line + offset if p.line is not None else None)
            for p in problems
        ]
        super().__init__(shifted, source=source)

    def _render_traceback_(self) -> list[str]:
        lines = [f"PlanError: {self._message()}"]
        cell = self.source.splitlines() if self.source is not None else []
        quoted = sorted({p.line for p in self.problems if p.line is not None and 1 <= p.line <= len(cell)})
        if quoted:
            lines.append("")
            width = len(str(quoted[-1]))
            lines += [f"  {n:>{width}} | {cell[n - 1]}" for n in quoted]
        if self.source is not None:
            lines.append("Fix the plan in the cell and run it again.")
        return lines


#: the Python API's words in the engine's messages → the options that say the same in a magic
_MAGIC_WORDS = (
    ("on_failure='replan'", "--on-failure replan"),
    ("pass planner=...", "add --planner VAR (a planner in the namespace) or --planner llm"),
)


_MAGIC_PATTERNS = (
    (re.compile(r"on_failure=\[([^\]]*)\]"), lambda m: "--on-failure " + ",".join(re.findall(r"'(\w+)'", m.group(1)))),
    (re.compile(r"\bon_failure\b"), lambda m: "--on-failure"),
    (re.compile(r"\bretries=(\w+)"), lambda m: f"--retries {m.group(1)}"),
    (re.compile(r"\bleave retries out\b"), lambda m: "leave --retries out"),
    (re.compile(r"\bstep_timeout\b"), lambda m: "--timeout"),
    (re.compile(r"\bmax_steps\b"), lambda m: "--max-steps"),
    (re.compile(r"\bmax_replans\b"), lambda m: "--max-replans"),
    (re.compile(r"\bmain_thread=True\b"), lambda m: "main_thread=True (in @planbook.tool)"),
)


def _with_hints(exc: PlanError, args: Any) -> list[Problem]:
    """The problems, with what to add to the magic line when names are unknown because none were passed."""
    import dataclasses

    hints = {
        "unknown_agent": None if getattr(args, "agents", None) else "pass your agents with --agents VAR",
        "unknown_tool": None if getattr(args, "tools", None) else "pass your tools with --tools VAR, or register them with @planbook.tool",
    }
    return [
        dataclasses.replace(p, message=f"{p.message}: {hints[p.code]}") if hints.get(p.code) else p
        for p in exc.problems
    ]


def magic_words(message: str) -> str:
    """An engine message as a magic user should read it: ``--planner VAR``, not ``planner=...``."""
    for python, magic in _MAGIC_WORDS:
        message = message.replace(python, magic)
    for pattern, replace in _MAGIC_PATTERNS:
        message = pattern.sub(replace, message)
    return message


class RunInterrupted(KeyboardInterrupt):
    """The kernel's interrupt stopped a run. Raised (not returned) so "run all" stops too;
    the run is kept and ``%run_plan NAME`` continues it."""

    def __init__(self, name: str, result: RunResult, *, stored: bool = True) -> None:
        self.name = name
        self.result = result
        done = sum(1 for s in result.plan.steps if s.status.value == "completed")
        # after a kernel restart this kernel's run is gone: only the store can continue it
        after_restart = (f" (after a kernel restart: %run_plan {name} --resume)" if stored
                         else " (a kernel restart loses it: this notebook keeps no runs in a file)")
        super().__init__(
            f"plan {name!r} was interrupted ({done}/{len(result.plan.steps)} steps completed); "
            f"run %run_plan {name} to continue it{after_restart}, or %run_plan {name} --restart to start again"
        )

    def _render_traceback_(self) -> list[str]:
        return [f"RunInterrupted: {self}"]


@dataclass
class _Origin:
    """What a ``%%plan`` cell used, so ``%run_plan NAME`` can use the same by default."""

    plan: Plan
    tools: str | None = None
    agents: str | None = None
    planner: str | None = None
    model: str | None = None
    planner_obj: Any = None
    #: the model calls that made the plan, counted in the usage of its first run
    planning: list[Event] = field(default_factory=list)


@dataclass
class _Run:
    value: Any
    key: tuple[Any, ...]
    runner: Runner
    objects: list[Any] = field(default_factory=list)  # keeps looked-up objects alive for the identity key


def _readable_help(func: Any) -> Any:
    """``%run_plan?`` opens with the usage, not with the ``::`` that IPython's magic_arguments
    writes for Sphinx; a cell magic's usage says ``%%``. Goes above ``@ma.magic_arguments()``."""
    doc = func.__doc__ or ""
    if doc.startswith("::\n\n"):
        usage, _, rest = doc[4:].partition("\n\n")
        usage = textwrap.dedent(usage)
        if getattr(func, "magic_type", None) == "cell" or usage.startswith("%plan "):
            usage = "%" + usage.replace("\n", "\n ")  # the continuation lines follow the longer name
        func.__doc__ = usage + "\n\n" + rest
    return func


@magics_class
class PlanMagics(Magics):
    """The planbook magics. One instance per shell keeps the runs that can continue."""

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)
        self.runs: dict[str, _Run] = {}
        self.origins: dict[str, _Origin] = {}
        #: where runs persist: None is the default file (opened on the first run), "off" is nowhere
        self.store_choice: str | None = None
        self._store: Any = None
        #: the cross-run step cache of this notebook's runs: None (only tools registered with
        #: ``cache=True``), True (``%plan_store --cache``: every tool that allows it), False (none)
        self.cache: bool | None = None
        #: the review cell inserted per NAME (a review cell run again inserts nothing more)
        self.reviewed: dict[str, str] = {}
        #: the MCP servers each %plan_tools NAME started (closed when the cell runs again)
        self.tool_servers: dict[str, list[Any]] = {}
        #: the runner %run_plan NAME --background started last in this kernel
        #: (held weakly: a finished run's plan and history must not live as long as the kernel; a
        #: run nobody holds can only be continued with --resume, as after a restart)
        self.background: dict[str, weakref.ref[Runner]] = {}

    @property
    def ip(self) -> Any:
        """The shell (always set once registered)."""
        if self.shell is None:
            raise RuntimeError("the planbook magics are not registered in an IPython shell")
        return self.shell

    # ------------------------------------------------------------------ %%plan
    @no_var_expand
    @_readable_help
    @ma.magic_arguments()
    @ma.argument("name", help="the variable the plan is stored in (also the plan's id)")
    @ma.argument("--planner", metavar="VAR|llm", help="a planner in the namespace, or 'llm' for planbook.llm.LLMPlanner: a body in words is the goal it plans for; a spec body is the plan, and the planner is kept for replans")
    @ma.argument("--model", metavar="M", help="the model for --planner llm (default: $PLANBOOK_MODEL)")
    @ma.argument("--review", action="store_true", help="also insert a new %%%%plan cell below holding the planner's plan as YAML (with the same --planner, --tools and --agents), to edit and run; the plan is stored as NAME right away")
    @ma.argument("--tools", metavar="VAR", help="a Toolbox (or mapping/list of functions) in the namespace; default: the @planbook.tool functions")
    @ma.argument("--agents", metavar="VAR", help="agents in the namespace: a {name: agent} mapping or a list")
    @ma.argument("--title", metavar="T", help="the plan's title")
    @cell_magic
    def plan(self, line: str, cell: str) -> None:
        """Define a plan from the cell: a spec (YAML/JSON mapping with ``steps``, or a
        Markdown list where ``[TAG]`` names the agent) or, with ``--planner``, a goal in
        words (a spec with ``--planner`` is the plan; the planner does the replans).

        The plan is validated, stored as NAME and shown; it is not run (``%run_plan NAME``).
        """
        args = _parse(self.plan, line)
        name = _check_name(args.name)
        _refuse_shadowing(name, self.ip)
        if args.model and args.planner != LLM:
            raise UsageError("--model chooses the model of --planner llm; add --planner llm (or drop --model)")
        if args.review and not args.planner:
            raise UsageError("--review shows a planner's plan for you to edit: add --planner VAR or --planner llm")
        planning: list[Event] = []  # the planner's llm.call events: the plan's first run counts them
        tools = self._lookup(args.tools, "--tools") if args.tools else default_toolbox
        agents = self._lookup(args.agents, "--agents") if args.agents else None
        toolbox, agent_map = _toolbox(tools), _agents(agents)
        planner = self._planner(args.planner, args.model) if args.planner else None
        # a spec body with --planner is the plan (the cell --review inserts); the planner does replans
        if planner is not None and not is_plan_spec(cell):
            goal = cell.strip()
            if not goal:
                raise UsageError(f"write the goal in the cell body: %%plan {name} --planner {args.planner}, then the goal")
            before = len(_attempts_log(planner))
            try:
                plan = make_plan(goal, planner, tools=toolbox, agents=agent_map, plan_id=name, title=args.title or "",
                                 emit=lambda kind, **data: planning.append(Event.record(kind, time.time(), None, 0, data)))
            except CellPlanError:
                raise
            except PlanError as exc:  # the planner's plan: no cell lines to point at
                raise CellPlanError(_with_hints(exc, args)) from None
            # each attempt, accepted or sent back (an LLMPlanner keeps them); else the calls' events
            calls = _attempts_log(planner)[before:] or [e.data for e in planning if e.kind == "llm.call"]
            if calls:
                print(format_planning(calls))
        else:
            source = f"%%plan {line}\n{cell}"
            try:
                plan = Plan.parse(cell, id=name)
                if args.title:
                    plan.title = args.title
                validate_plan(plan, toolbox, agent_map)
            except PlanError as exc:
                raise CellPlanError(_with_hints(exc, args), source=source, offset=1) from None
        self.ip.user_ns[name] = plan
        self.origins[name] = _Origin(
            plan=plan, tools=args.tools, agents=args.agents, planner=args.planner, model=args.model, planner_obj=planner,
            planning=[e for e in planning if e.kind == "llm.call"],
        )
        if args.review:
            from ..spec.write import plan_spec

            # the same planner (for replans), model, tools and agents: running the cell keeps them
            kept = (("planner", args.planner), ("model", args.model), ("tools", args.tools), ("agents", args.agents))
            options = "".join(f" --{opt} {shlex.quote(val)}" for opt, val in kept if val)
            text = f"%%plan {name}{options}\n{plan_spec(plan)}".rstrip("\n")
            if self.reviewed.get(name) == text:  # run again (Run All): the cell below already holds this plan
                print(f"The planner's plan is stored as {name} (%run_plan {name} runs it). The cell inserted below "
                      f"when this cell first ran holds it as a spec (not inserted again): edit it there and run it "
                      f"to replace {name}.")
            else:
                self.reviewed[name] = text
                self.ip.set_next_input(text, replace=False)
                print(f"The planner's plan is stored as {name} (%run_plan {name} runs it). The new cell below holds "
                      f"it as a spec: edit it there and run that cell to replace {name}.")
        from IPython.display import display

        display(plan)

    # ------------------------------------------------------------- %plan_store
    @no_var_expand
    @_readable_help
    @ma.magic_arguments()
    @ma.argument("where", nargs="?", default=None, help="a file path, ':memory:' (this kernel only), 'default' or 'off'")
    @ma.argument("--cache", action="store_true", help=CACHE_HELP)
    @ma.argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    @line_magic
    def plan_store(self, line: str) -> None:
        """Choose where %run_plan keeps runs, and whether it reuses earlier runs' results.

        By default runs are kept in ``$PLANBOOK_HOME/runs.sqlite``, else in
        ``.planbook/runs.sqlite`` under the current directory, so ``%run_plan NAME --resume``
        finishes a run after a kernel restart without running its completed steps again.

        The step cache (answering a new run's step with an earlier run's result of the same
        call) is off unless asked for: re-running a cell means "run it again", and a tool
        that reads a clock, a price or a file would otherwise give yesterday's answer.
        ``--cache`` turns it on for every tool (except those registered with ``cache=False``
        or ``idempotent=False``); without it only tools registered with
        ``@planbook.tool(cache=True)`` are cached; ``--no-cache`` turns even those off.
        With no argument, says where runs go (and changes nothing); choosing a store without
        ``--cache`` or ``--no-cache`` goes back to the default.
        """
        args = _parse(self.plan_store, line)
        if args.cache and args.no_cache:
            raise UsageError("--cache and --no-cache contradict each other: give one of them")
        choice = self.store_choice if args.where is None else None if args.where == "default" else args.where
        cache = self.cache
        if args.where is not None or args.cache or args.no_cache:
            cache = True if args.cache else False if args.no_cache else None
        if cache and choice == "off":
            raise UsageError("--cache reuses results kept in a run store, and %plan_store off keeps none: "
                             "choose a store (%plan_store default --cache)")
        if args.where is not None:
            self.store_choice, self._store = (os.path.expanduser(choice) if choice else choice), None  # ~: home
        self.cache = cache
        where = {"off": "nowhere (runs are not kept)", ":memory:": "in memory (until the kernel stops)"}
        from ..store import default_store_path

        place = where.get(self.store_choice or "", str(self.store_choice or default_store_path()))
        reuse = {None: "earlier results of the same tool calls are reused only for tools registered with cache=True",
                 True: "earlier results of the same tool calls are reused",
                 False: "earlier results of the same tool calls are not reused"}[self.cache]
        print(f"planbook keeps runs {place if self.store_choice in where else 'in ' + place}; {reuse}")

    # ------------------------------------------------------------- %plan_tools
    @no_var_expand
    @ma.magic_arguments()
    @ma.argument("name", help="the variable the toolbox is stored in (then: --tools NAME in %%%%plan and %%run_plan)")
    @ma.argument("--mcp", metavar='"CMD ARGS"', action="append", default=[], help="an MCP server's command line (stdio) or http(s) URL; repeatable")
    @ma.argument("--cache", action="store_true", help="let runs with a store reuse these tools' earlier results (off by default: a server's answers may change)")
    @line_magic
    def plan_tools(self, line: str) -> None:
        """Register the tools of MCP servers as NAME, for ``%%plan ... --tools NAME``.

        Run again, it stops the servers NAME held before starting new ones (one server per
        cell, not one per run of the cell); the servers stop when the kernel does.
        """
        args = _parse(self.plan_tools, line)
        name = _check_name(args.name)
        if not args.mcp:
            raise UsageError(f'%plan_tools {name}: name a server with --mcp "CMD ARGS" (e.g. --mcp "mcp-server-time")')
        from ..mcp.client import with_servers

        for server in self.tool_servers.pop(name, []):
            server.close()
        try:
            box, servers = with_servers(None, args.mcp, cache=args.cache)
        except ValueError as exc:
            raise UsageError(f"%plan_tools {name}: {exc}") from None
        self.tool_servers[name] = servers
        self.ip.user_ns[name] = box
        # a server names itself and its tools: what it says reaches the notebook inert, on one line
        print(one_line(f"{name}: {len(box)} tools from {', '.join(s.server for s in servers)}: {', '.join(box)}"))

    def store(self) -> Any:
        """The run store of this session (opened when first needed), or None when it is off."""
        if self.store_choice == "off":
            return None
        if self._store is None:
            from ..store import default_store_path, open_store

            try:
                self._store = open_store(self.store_choice or default_store_path())
            except Exception as exc:  # noqa: BLE001 - a damaged store must not hide behind a traceback
                raise UsageError(f"{exc} (%plan_store PATH chooses another file; %plan_store off keeps no runs)") from None
        return self._store

    def _resumed(self, name: str, plan: Any, tools: Any, agents: Any, planner: Any, rerun: list[str],
                 executor: Any, force: bool = False) -> Any:
        """The latest stored run of plan NAME, ready to continue (or its result, if it ended)."""
        from ..engine.resume import NothingToResume, ResumeError, resume

        store = self.store()
        if store is None:
            raise UsageError("--resume needs a run store, and %plan_store is off: %plan_store default turns it on")
        run_id = store.latest_run_id(plan_id=name)  # one indexed query, whatever the store holds
        if run_id is None:
            raise UsageError(f"no stored run of plan {name!r} in {store.location}: %run_plan {name} starts one")
        try:
            return resume(run_id, store=store, tools=tools, agents=agents, planner=planner,
                          plan=plan if isinstance(plan, Plan) else None, rerun=rerun, executor=executor, run=False,
                          force=force)
        except NothingToResume:
            return store.load_run(run_id).result()
        except ResumeError as exc:
            raise UsageError(magic_words(str(exc))) from None

    def _refuse_over_stored(self, name: str, background: bool = False) -> None:
        """After a kernel restart the kernel has no run of NAME, but the store may hold one
        that did not finish: a plain ``%run_plan NAME`` (or ``--background``) would start over
        from step 1 and repeat its work. Refused before anything runs, saying how to continue or
        start over (the same way it was asked: in the foreground or in the background)."""
        store = self.store()
        if store is None:
            return
        run_id = store.latest_run_id(plan_id=name)
        if run_id is None:
            return
        held = self.background.get(name)
        mine = held() if held is not None else None
        if mine is not None and mine.recorder is not None and mine.recorder.run_id == run_id:
            return  # this kernel's own background run (paused, or waiting): not left over by a restart
        summary = next((s for s in store.list_runs() if s.run_id == run_id), None)
        if summary is None or summary.damage:
            return
        if summary.status in ("interrupted", "paused"):
            how = summary.status
        elif summary.writer_gone:  # its kernel (or process) died while it ran
            how = "cut short (its kernel stopped while it ran)"
        else:  # completed, failed, or running in a process that is alive (a background run of this kernel)
            return
        also = " --background" if background else ""
        raise UsageError(
            f"plan {name!r} has an unfinished run in the store: run {run_id}, {how}, "
            f"{summary.steps_done}/{summary.steps_total} steps completed. %run_plan {name} --resume{also} continues "
            f"it (completed steps are not run again); %run_plan {name} --restart{also} starts a new run from the "
            "first step"
        )

    # --------------------------------------------------------------- %run_plan
    def _background(self, value: Any, args: Any, **options: Any) -> Any:
        """``--background``: start the run on its own thread and return its handle (displayed as the
        live view); with ``--resume``, the plan's latest stored run goes on there."""
        from .handle import start_runner

        if args.resume:
            runner = self._resumed(args.name, value, options["tools"], options["agents"], options["planner"],
                                   args.rerun, options["executor"], args.force)
            if isinstance(runner, RunResult):  # the stored run had ended: say so, return it
                print(f"plan {args.name!r}: its latest stored run already {runner.status} ({runner.reason}); "
                      f"%run_plan {args.name} --background starts a new run")
                return runner
        else:
            if not args.restart:
                self._refuse_over_stored(args.name, background=True)  # a kernel restart forgot the run; the store did not
            approve = args.approve.split(",") if isinstance(args.approve, str) else args.approve
            try:
                runner = Runner(value, step_timeout=args.timeout, retries=args.retries, store=self.store(),
                                strategy=args.strategy, faithful=args.faithful, approve=approve,
                                approve_timeout=args.approve_timeout, **options)
            except PlanError as exc:
                raise CellPlanError(exc.problems) from None
            except (ValueError, TypeError) as exc:
                raise UsageError(magic_words(str(exc))) from None
        handle = start_runner(runner, view=False if args.no_view else None)
        # a paused background run of this kernel is stored unfinished, yet no restart left it behind;
        # the latest is enough: only the store's latest run of NAME is checked
        self.background[args.name] = weakref.ref(runner)
        return handle

    @no_var_expand
    @_readable_help
    @ma.magic_arguments()
    @ma.argument("name", help="a Plan (from %%%%plan) or a plan spec string in the namespace")
    @ma.argument("--on-failure", metavar="POLICY", help="abort, skip, retry or replan, or a chain such as retry,replan (default: replan with a planner, else abort)")
    @ma.argument("--retries", type=int, default=None, metavar="N", help="retries per step for the retry policy (default 1)")
    @ma.argument("--max-steps", type=int, default=None, metavar="N", help="step budget: executions, including after replans (default 12)")
    @ma.argument("--max-replans", type=int, default=None, metavar="N", help="replan budget (default 5)")
    @ma.argument("--planner", metavar="VAR|llm", help="the planner for replans (default: the one %%%%plan used)")
    @ma.argument("--model", metavar="M", help="the model for --planner llm")
    @ma.argument("--tools", metavar="VAR", help="tools in the namespace (default: as in %%%%plan, else the @planbook.tool functions)")
    @ma.argument("--agents", metavar="VAR", help="agents in the namespace (default: as in %%%%plan)")
    @ma.argument("--step", action="store_true", help="execute the next step only, then pause")
    @ma.argument("--until", metavar="ID", help="pause after step ID has run")
    @ma.argument("--timeout", type=float, metavar="SECONDS", help="time limit per step")
    @ma.argument("--parallel", type=int, default=None, metavar="N", help="run up to N steps whose needs are done at once (default 1: one at a time, in plan order)")
    @ma.argument("--executor", metavar="VAR", help="a concurrent.futures.Executor in the namespace that runs tool calls (e.g. a Dask client's get_executor(pure=False))")
    @ma.argument("--resume", action="store_true", help="continue this plan's latest stored run (after a kernel restart or a crash): completed steps are not run again")
    @ma.argument("--rerun", metavar="ID", action="append", default=[], help="with --resume: run step ID again although its tool is idempotent=False and it was in progress when the run stopped")
    @ma.argument("--force", action="store_true", help="with --resume: take the run over although the store says another process writes it (when that process is gone)")
    @ma.argument("--cache", action="store_true", help=CACHE_HELP)
    @ma.argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    @ma.argument("--strategy", metavar="NAME", help="run as a seed design: planbook (default), lesson, openmanus or agenticseek (planbook.compat.strategies)")
    @ma.argument("--faithful", action="store_true", help="with --strategy openmanus or agenticseek: reproduce that design's pitfalls, for teaching")
    @ma.argument("--check", action="store_true", help="raise planbook.RunFailed if the run ends failed (for pipelines)")
    @ma.argument("--restart", action="store_true", help="start a new run even if the last one paused or was interrupted (in this kernel, or stored before a kernel restart)")
    @ma.argument("--no-view", action="store_true", help="no live view (the result is still returned)")
    @ma.argument("--background", action="store_true", help="run on a thread of its own and return a RunHandle at once: other cells run meanwhile, and the live view's Pause / Continue / Stop and Approve / Skip / Edit buttons reach the run (handle.status, handle.wait(), handle.approve(ID))")
    @ma.argument("--approve", nargs="?", const=True, default=None, metavar="IDS|TOOLS", help="with --background: steps wait for your decision before they start (every step, or the step ids / tool names given, comma-separated); tools registered with approve=True always ask")
    @ma.argument("--approve-timeout", type=float, default=None, metavar="SECONDS", help="seconds a step may wait for a decision; then the run stops (failed, aborted)")
    @line_magic
    def run_plan(self, line: str) -> Any:
        """Run plan NAME with a live view and return its RunResult.

        A paused (``--step``, ``--until``) or interrupted run continues with the next
        ``%run_plan NAME`` (with no options, or the same ones) as long as NAME still holds
        the same plan; other options need ``--restart``. A finished run starts again. After a
        kernel restart, when the store holds an unfinished run of NAME, ``%run_plan NAME``
        (with or without ``--background``) refuses before anything runs: ``--resume``
        continues it, ``--restart`` starts over (both also with ``--background``).

        While the view is shown, each step's work runs in a worker thread so the view can
        redraw; a tool that must run on the main thread is registered with
        ``@planbook.tool(main_thread=True)``, or use ``--no-view``. ``--retries`` goes with
        ``--on-failure retry``; ``--timeout`` stops a step's Python code when it runs out
        (a call blocked in C finishes in the background and is ignored).

        Running it again means running it again: a step is answered from an earlier run's
        result of the same call only with ``--cache`` (or ``%plan_store PATH --cache``, or
        for a tool registered with ``@planbook.tool(cache=True)``), since a tool that reads a
        clock, a price or a file would otherwise give yesterday's answer. ``--no-cache``
        turns even those off. ``--resume`` never runs a completed step again, cache or not.
        """
        args = _parse(self.run_plan, line)
        name = _check_name(args.name)
        if (args.approve or args.approve_timeout is not None) and not args.background:
            raise UsageError("--approve makes steps wait for your decision, and a run in the foreground keeps the "
                             "notebook busy, so no click or cell could give it: add --background (%run_plan "
                             f"{name} --background --approve ...) and decide in the live view or with "
                             "handle.approve(ID)")
        if args.background and (args.step or args.until):
            raise UsageError("--background runs the plan to its end on its own thread (pause it with handle.pause() "
                             "or the view's Pause button): drop --step, --until (they pause a run in the foreground)")
        if args.force and not args.resume:
            raise UsageError("--force goes with --resume (it takes over a stored run another process was writing)")
        if args.rerun and not args.resume:
            raise UsageError("--rerun goes with --resume (it names steps of the stored run to run again)")
        if args.resume and (args.restart or args.step or args.until):
            raise UsageError("--resume continues the stored run to its end: drop --restart, --step and --until")
        cache = self._cache_choice(args)
        value = self._plan_value(name)
        origin = self.origins.get(name)
        if origin is not None and origin.plan is not value:
            origin = None  # NAME was reassigned outside %%plan: its options no longer apply
        tools_var = args.tools or (origin.tools if origin else None)
        agents_var = args.agents or (origin.agents if origin else None)
        planner_var = args.planner or (origin.planner if origin else None)
        model = args.model if args.planner else (args.model or (origin.model if origin else None))
        if args.model and planner_var != LLM:
            raise UsageError("--model chooses the model of --planner llm; add --planner llm (or drop --model)")
        for opt, number in (("--retries", args.retries), ("--max-steps", args.max_steps), ("--max-replans", args.max_replans)):
            if number is not None and number < 0:
                raise UsageError(f"{opt} must be a whole number >= 0, got {number}")
        if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):  # nan: no limit
            raise UsageError(f"--timeout must be a positive number of seconds (leave it out for no limit), got {args.timeout:g}")
        if args.parallel is not None and args.parallel < 1:
            raise UsageError(f"--parallel must be a whole number >= 1, got {args.parallel}")
        parallel = 1 if args.parallel is None else args.parallel
        executor = self._lookup(args.executor, "--executor") if args.executor else None
        on_failure = _policy(args.on_failure)
        tools = self._lookup(tools_var, "--tools") if tools_var else None
        agents = self._lookup(agents_var, "--agents") if agents_var else None
        if planner_var is None:
            planner = None
        elif not args.planner and origin is not None and origin.planner_obj is not None and model == origin.model:
            planner = origin.planner_obj
        else:
            planner = self._planner(planner_var, model)
        planner_key: Any = (LLM, model) if planner_var == LLM else planner
        max_steps = 12 if args.max_steps is None else args.max_steps
        max_replans = 5 if args.max_replans is None else args.max_replans
        key = (on_failure, args.retries, max_steps, max_replans, args.timeout, parallel, _ident(executor),
               _ident(tools), _ident(agents), _ident(planner_key), args.strategy, args.faithful, cache)
        options_given = args.faithful or any(
            v is not None for v in (args.on_failure, args.retries, args.max_steps, args.max_replans, args.timeout,
                                    args.parallel, args.executor, args.planner, args.model, args.tools, args.agents,
                                    args.strategy)
        ) or args.cache or args.no_cache
        if args.background:
            return self._background(value, args, planner=planner, tools=tools, agents=agents, on_failure=on_failure,
                                    max_steps=max_steps, max_replans=max_replans, parallel=parallel,
                                    executor=executor, cache=cache)
        run = self.runs.get(name)
        unfinished = (
            run is not None
            and not args.restart
            and _same(run.value, value)
            and run.runner.state.started
            and run.runner.state.status in ("paused", "interrupted")
        )
        if unfinished and options_given and run is not None and run.key != key:
            raise UsageError(
                f"plan {name!r} has a {run.runner.state.status} run that was started with other options: "
                f"run %run_plan {name} without options to continue it, or add --restart to start a new run "
                "with these options"
            )
        resumable = unfinished  # with no options, or the same ones: continue where it stopped
        if run is None and not args.resume and not args.restart:
            self._refuse_over_stored(name)  # a kernel restart forgot the run; the store did not
        if args.resume:
            if run is not None:
                run.runner.settle()
            runner = self._resumed(name, value, tools, agents, planner, args.rerun, executor, args.force)
            if isinstance(runner, RunResult):  # the stored run had ended: say so, return it
                print(f"plan {name!r}: its latest stored run already {runner.status} ({runner.reason}); "
                      f"%run_plan {name} starts a new run")
                return runner
            run = _Run(value=value, key=key, runner=runner, objects=[tools, agents, planner])
            self.runs[name] = run
        elif not resumable:
            if run is not None:
                run.runner.settle()  # a call still running from the old run must end before its step runs again
            try:
                runner = Runner(
                    value, planner=planner, tools=tools, agents=agents, on_failure=on_failure, retries=args.retries,
                    max_steps=max_steps, max_replans=max_replans, step_timeout=args.timeout, parallel=parallel,
                    executor=executor, store=self.store(), cache=cache,
                    strategy=args.strategy, faithful=args.faithful,
                )
            except PlanError as exc:
                raise CellPlanError(exc.problems) from None
            except (ValueError, TypeError) as exc:
                raise UsageError(magic_words(str(exc))) from None
            run = _Run(value=value, key=key, runner=runner, objects=[tools, agents, planner])
            self.runs[name] = run
            origin = self.origins.get(name)
            if origin is not None and origin.plan is value and origin.planning:
                runner.count_planning(origin.planning)  # the run's usage counts the calls that planned it
                origin.planning = []
        assert run is not None
        runner = run.runner
        if args.until is not None and runner.plan.steps:
            ids = [s.id for s in runner.plan.steps]
            if args.until not in ids:
                raise UsageError(f"--until {args.until}: plan {name!r} has no step {args.until!r}{closest(args.until, ids)}; its steps are {', '.join(ids)}")
            done = runner.plan.step(args.until)
            if done.status is not Status.not_started:
                raise UsageError(
                    f"--until {args.until}: step {args.until} already ran in this run ({done.status}), so the run "
                    f"would not stop there; choose a later step, or add --restart to run from the beginning"
                )
        if runner.steering is not None and not runner.finished:
            try:  # a step that asks could never be answered while this cell blocks
                runner.steering.check_askers(runner)
            except ValueError as exc:
                raise UsageError(f"{exc}. In a notebook: %run_plan {name} --background") from None
        bridge = None
        if not args.no_view:
            from ..views.show import show_live

            bridge = show_live(runner)
        try:
            result = runner.run(until=args.until, max_executions=1 if args.step else None)
        finally:
            if bridge is not None:
                bridge.close()
        if result.status == "interrupted":
            # a run kept in memory (or nowhere) is gone after a kernel restart: no --resume then
            raise RunInterrupted(name, result, stored=self.store_choice not in ("off", ":memory:"))
        if args.check and result.status == "failed":
            raise RunFailed(result)
        if bridge is not None:  # the live view shows the plan: the cell's value need not show it again
            from ..views.live import shown_live

            return shown_live(result)
        return result

    # ------------------------------------------------------------------ helpers
    def _cache_choice(self, args: Any) -> bool | None:
        """The step cache of this run: its own flag, else the notebook's (``%plan_store``)."""
        if args.cache and args.no_cache:
            raise UsageError("--cache and --no-cache contradict each other: give one of them")
        if args.resume and (args.cache or args.no_cache):
            raise UsageError("--resume finishes the stored run with the cache choice it started with (its completed "
                             "steps never run again): drop --cache/--no-cache")
        cache = True if args.cache else False if args.no_cache else self.cache
        if cache and self.store_choice == "off":
            raise UsageError("--cache reuses results kept in a run store, and %plan_store off keeps none: "
                             "%plan_store default turns it on")
        return cache

    def _plan_value(self, name: str) -> Plan | str:
        ns = self.ip.user_ns
        if name not in ns:
            plans = [k for k, v in ns.items() if isinstance(v, Plan) and not k.startswith("_")]
            raise UsageError(
                f"no plan named {name!r}{closest(name, plans)}: define it with a '%%plan {name}' cell "
                "(or assign a Plan or a plan spec string to it)"
            )
        value = ns[name]
        if not isinstance(value, (Plan, str)):
            raise UsageError(
                f"{name!r} is a {type(value).__name__}, not a plan: define it with a '%%plan {name}' cell "
                "(or assign a Plan or a plan spec string to it)"
            )
        return value

    def _lookup(self, var: str, option: str) -> Any:
        ns = self.ip.user_ns
        if var not in ns:
            known = [k for k in ns if not k.startswith("_")]
            raise UsageError(f"{option} {var}: there is no variable {var!r} in the namespace{closest(var, known)}")
        return ns[var]

    def _planner(self, var: str, model: str | None) -> Any:
        if var == LLM:
            from ..llm import LLMPlanner  # imports openai: only when asked for

            return LLMPlanner(model=model)
        planner = self._lookup(var, "--planner")
        if not callable(planner) and not hasattr(planner, "chat"):  # a model drives --strategy openmanus/agenticseek
            raise UsageError(
                f"--planner {var}: {var!r} is a {type(planner).__name__}; a planner is a callable "
                "(goal, history, last_error) -> steps, or use --planner llm"
            )
        return planner



def _attempts_log(planner: Any) -> list[dict[str, Any]]:
    """An LLMPlanner's record of its calls (each marked accepted or with the problems sent
    back); [] for other planners. Never imports the model layer: if it is not loaded, the
    planner is not an LLMPlanner."""
    llm = sys.modules.get("planbook.llm")
    if llm is not None and isinstance(planner, getattr(llm, "LLMPlanner", ())):
        return [c for c in getattr(planner, "calls", ()) if isinstance(c, dict)]
    return []


def _parse(magic: Any, line: str) -> Any:
    """Parse the line like a shell would (quotes removed), so ``--title "A b"`` is ``A b``."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot read the options {line!r}: {exc}") from None
    return magic.parser.parse_args(argv)


def _check_name(name: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"{name!r} cannot be a variable name: use letters, digits and _ (not starting with a digit)")
    return name


def _refuse_shadowing(name: str, ip: Any) -> None:
    """A plan stored as ``print`` or ``In`` would hide the builtin (or IPython's name) for the
    rest of the session, far from the cell that did it: refused, not warned about."""
    if name in vars(builtins):
        what = f"Python's builtin {name}"
    elif name in getattr(ip, "user_ns_hidden", {}):
        what = f"IPython's {name}"
    else:
        return
    raise UsageError(f"%%plan {name}: storing the plan as {name!r} would hide {what} for the rest of the session; "
                     f"choose another name, e.g. %%plan {name}_plan")


def _policy(text: str | None) -> str | list[str] | None:
    if text is None:
        return None
    chain = [p.strip() for p in text.split(",") if p.strip()]
    for policy in chain:
        if policy not in POLICIES:
            raise UsageError(f"--on-failure {text}: unknown policy {policy!r}{closest(policy, POLICIES)}; choose from {', '.join(POLICIES)}")
    if not chain:
        raise UsageError(f"--on-failure needs a policy: {', '.join(POLICIES)}")
    return chain[0] if len(chain) == 1 else chain


def _toolbox(tools: Any) -> Any:
    try:
        return as_toolbox(tools)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--tools: {exc}") from None


def _agents(agents: Any) -> Any:
    from ..workers.agents import as_agents

    try:
        return as_agents(agents)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--agents: {exc}") from None


def _ident(obj: Any) -> Any:
    """Options compare by identity (a redefined toolbox is a different run), strings by value."""
    if obj is None or isinstance(obj, (str, tuple)):
        return obj
    return ("id", id(obj))


def _same(old: Any, new: Any) -> bool:
    return old is new or (isinstance(old, str) and old == new)


def register(ipython: Any) -> PlanMagics:
    """Register the magics (``%load_ext planbook``). Returns the magics object holding the runs."""
    magics = PlanMagics(ipython)
    ipython.register_magics(magics)
    return magics


def unregister(ipython: Any) -> None:
    """Remove the magics (``%unload_ext planbook``)."""
    manager = ipython.magics_manager
    for kind, names in (("cell", ("plan",)), ("line", ("run_plan", "plan_store", "plan_tools"))):
        for magic_name in names:
            fn = manager.magics[kind].get(magic_name)
            if fn is not None and isinstance(getattr(fn, "__self__", None), PlanMagics):
                del manager.magics[kind][magic_name]
    manager.registry.pop(PlanMagics.__name__, None)


def magics_of(ipython: Any) -> PlanMagics | None:
    """The registered :class:`PlanMagics` (its ``runs`` hold the runners kept per NAME)."""
    found = ipython.magics_manager.registry.get(PlanMagics.__name__)
    return found if isinstance(found, PlanMagics) else None


__all__ = ["CellPlanError", "PlanMagics", "RunInterrupted", "magics_of", "register", "unregister"]
