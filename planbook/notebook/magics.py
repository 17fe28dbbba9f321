"""``%%plan`` and ``%run_plan``: plans as notebook cells.

``%load_ext planbook`` calls :func:`register`. The cell *is* the plan: ``%%plan NAME``
validates its body and stores the :class:`~planbook.data.models.Plan` as ``NAME``;
``%run_plan NAME`` runs it with a live view and returns the
:class:`~planbook.data.models.RunResult`. One runner is kept per NAME, so ``--step`` and
``--until`` pause a run that a later ``%run_plan NAME`` continues.

The magics take their text literally: ``{x}`` and ``$x`` are not expanded by IPython,
in the line or in the cell body (plans use ``$id`` references and braces in tasks).
What the magics remember between cells is the :class:`~planbook.notebook.session.Session`;
the run options' flags come from :mod:`planbook.notebook.magicargs`; the errors they raise
speak in flags (:mod:`planbook.notebook.words`).
"""

from __future__ import annotations

import shlex
import sys
import time
from typing import Any

from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from ..data.errors import CellPlanError, PlanError, RunFailed, closest
from ..data.models import Event, Plan, RunResult, Status
from ..engine.config import NO_CACHE_HELP
from ..engine.runner import Runner
from ..outbound import one_line
from ..spec.formats import is_plan_spec
from ..spec.validate import validate_plan
from ..views.text import format_planning
from ..workers.planners import make_plan
from ..workers.tools import as_toolbox, default_toolbox
from . import forkmagic, replaymagic
from .magicargs import (
    CACHE_HELP,
    check_name,
    given_options,
    ident,
    parse,
    readable_help,
    refuse_shadowing,
    resolved_options,
    run_arguments,
    same,
)
from .session import Origin, Run, Session
from .words import RunInterrupted, cell_plan_error, magic_words, with_hints

LLM = "llm"


def _kept(name: str) -> property:
    """An attribute of the session, read and written through the magics (``magics.runs``)."""
    return property(lambda self: getattr(self.session, name), lambda self, value: setattr(self.session, name, value),
                    doc=f"the session's ``{name}`` (planbook.notebook.session.Session)")


@magics_class
class PlanMagics(Magics):
    """The planbook magics. One instance per shell keeps the runs that can continue (its :attr:`session`)."""

    runs = _kept("runs")
    origins = _kept("origins")
    store_choice = _kept("store_choice")
    _store = _kept("_store")
    cache = _kept("cache")
    background = _kept("background")
    reviewed = _kept("reviewed")
    tool_servers = _kept("tool_servers")

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)
        #: what the magics remember between cells
        self.session = Session()

    @property
    def ip(self) -> Any:
        """The shell (always set once registered)."""
        if self.shell is None:
            raise RuntimeError("the planbook magics are not registered in an IPython shell")
        return self.shell

    def store(self) -> Any:
        """The run store of this session (opened when first needed), or None when it is off."""
        return self.session.store()

    # ------------------------------------------------------------------ %%plan
    @no_var_expand
    @readable_help
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
        args = parse(self.plan, line)
        name = check_name(args.name)
        refuse_shadowing(name, self.ip)
        if args.model and args.planner != LLM:
            raise UsageError("--model chooses the model of --planner llm; add --planner llm (or drop --model)")
        if args.review and not args.planner:
            raise UsageError("--review shows a planner's plan for you to edit: add --planner VAR or --planner llm")
        planning: list[Event] = []  # the planner's llm.call events: the plan's first run counts them
        tools = self.lookup(args.tools, "--tools") if args.tools else default_toolbox
        agents = self.lookup(args.agents, "--agents") if args.agents else None
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
                raise cell_plan_error(with_hints(exc, args)) from None
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
                raise cell_plan_error(with_hints(exc, args), source=source, offset=1) from None
        self.ip.user_ns[name] = plan
        self.session.origins[name] = Origin(
            plan=plan, tools=args.tools, agents=args.agents, planner=args.planner, model=args.model, planner_obj=planner,
            planning=[e for e in planning if e.kind == "llm.call"],
        )
        if args.review:
            from ..spec.write import plan_spec

            # the same planner (for replans), model, tools and agents: running the cell keeps them
            kept = (("planner", args.planner), ("model", args.model), ("tools", args.tools), ("agents", args.agents))
            options = "".join(f" --{opt} {shlex.quote(val)}" for opt, val in kept if val)
            text = f"%%plan {name}{options}\n{plan_spec(plan)}".rstrip("\n")
            if self.session.reviewed.get(name) == text:  # run again (Run All): the cell below already holds this plan
                print(f"The planner's plan is stored as {name} (%run_plan {name} runs it). The cell inserted below "
                      f"when this cell first ran holds it as a spec (not inserted again): edit it there and run it "
                      f"to replace {name}.")
            else:
                self.session.reviewed[name] = text
                self.ip.set_next_input(text, replace=False)
                print(f"The planner's plan is stored as {name} (%run_plan {name} runs it). The new cell below holds "
                      f"it as a spec: edit it there and run that cell to replace {name}.")
        from ..views.publish import display

        display(plan)

    # ------------------------------------------------------------- %plan_store
    @no_var_expand
    @readable_help
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
        args = parse(self.plan_store, line)
        print(self.session.choose_store(args.where, args.cache, args.no_cache))

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
        args = parse(self.plan_tools, line)
        name = check_name(args.name)
        if not args.mcp:
            raise UsageError(f'%plan_tools {name}: name a server with --mcp "CMD ARGS" (e.g. --mcp "mcp-server-time")')
        from ..mcp.client import with_servers

        for server in self.session.tool_servers.pop(name, []):
            server.close()
        try:
            box, servers = with_servers(None, args.mcp, cache=args.cache)
        except ValueError as exc:
            raise UsageError(f"%plan_tools {name}: {exc}") from None
        self.session.tool_servers[name] = servers
        self.ip.user_ns[name] = box
        # a server names itself and its tools: what it says reaches the notebook inert, on one line
        print(one_line(f"{name}: {len(box)} tools from {', '.join(s.server for s in servers)}: {', '.join(box)}"))

    # --------------------------------------------------------------- %run_plan
    @no_var_expand
    @ma.magic_arguments()
    @ma.argument("runs", nargs="+", metavar="RUN", help="NAME alone: NAME's latest fork against its parent; else runs to compare, the first the baseline: RunResult variables, run ids or plan names (their latest stored run)")
    @ma.argument("--changed-only", action="store_true", help="show only the steps whose call or result differs")
    @line_magic
    def diff_runs(self, line: str) -> Any:
        """Compare runs side by side: ``%diff_runs NAME`` (NAME's latest fork against its parent) or
        ``%diff_runs A B [C ...]``; returns the :class:`~planbook.data.rundiff.RunDiff`."""
        from ..data.rundiff import diff_runs

        args = parse(self.diff_runs, line)
        runs = (forkmagic.latest_fork(self, args.runs[0]) if len(args.runs) == 1
                else forkmagic.run_ids(self, list(args.runs)))
        diff = diff_runs(*runs)
        return diff.only_changed() if args.changed_only else diff

    @no_var_expand
    @readable_help
    @ma.magic_arguments()
    @ma.argument("name", help="a Plan (from %%%%plan) or a plan spec string in the namespace")
    @run_arguments("on_failure", "retries", "max_steps", "max_replans")
    @ma.argument("--planner", metavar="VAR|llm", help="the planner for replans (default: the one %%%%plan used)")
    @ma.argument("--model", metavar="M", help="the model for --planner llm")
    @ma.argument("--tools", metavar="VAR", help="tools in the namespace (default: as in %%%%plan, else the @planbook.tool functions)")
    @ma.argument("--agents", metavar="VAR", help="agents in the namespace (default: as in %%%%plan)")
    @ma.argument("--step", action="store_true", help="execute the next step only, then pause")
    @ma.argument("--until", metavar="ID", help="pause after step ID has run")
    @run_arguments("step_timeout", "parallel", "executor", extra_help={"executor": "a variable in the namespace"})
    @ma.argument("--fork-at", metavar="STEP", help="fork the plan's latest stored run at STEP: the steps the change cannot reach are kept (not run again), STEP and what depends on it run again (with --set / --result; alone, a control fork)")
    @ma.argument("--set", metavar="K=V", action="append", default=[], help="with --fork-at: run STEP with argument K set to V (JSON when it reads as JSON, else text); repeat for more")
    @ma.argument("--result", metavar="VAR", help="with --fork-at: pin STEP's result to the variable VAR, without running it")
    @ma.argument("--reuse", choices=("independent", "identical", "ancestors"), help="with --fork-at: what is kept — independent (default: every step the change does not reach), identical (also a dependent whose call is unchanged), ancestors (only STEP's needs, as LangGraph)")
    @ma.argument("--resume", action="store_true", help="continue this plan's latest stored run (after a kernel restart or a crash): completed steps are not run again")
    @ma.argument("--rerun", metavar="ID", action="append", default=[], help="with --resume or --fork-at: run step ID again although its tool is idempotent=False (it was in progress when the run stopped, or it ran in the forked run)")
    @ma.argument("--force", action="store_true", help="with --resume: take the run over although the store says another process writes it (when that process is gone)")
    @ma.argument("--cache", action="store_true", help=CACHE_HELP)
    @ma.argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    @run_arguments("strategy", "faithful")
    @ma.argument("--check", action="store_true", help="raise planbook.RunFailed if the run ends failed (for pipelines)")
    @ma.argument("--restart", action="store_true", help="start a new run even if the last one paused or was interrupted (in this kernel, or stored before a kernel restart)")
    @ma.argument("--no-view", action="store_true", help="no live view (the result is still returned)")
    @ma.argument("--background", action="store_true", help="run on a thread of its own and return a RunHandle at once: other cells run meanwhile, and the live view's Pause / Continue / Stop and Approve / Skip / Edit buttons reach the run (handle.status, handle.wait(), handle.approve(ID))")
    @run_arguments("approve", "approve_timeout", extra_help={
        "approve": "With --background: decide in the live view or with handle.approve(ID)"})
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
        args = parse(self.run_plan, line)
        name = check_name(args.name)
        forking = forkmagic.wants_fork(args)
        if forking:
            forkmagic.refuse_fork_contradictions(args)
        _refuse_contradictions(args, name, forking)
        cache = self.session.cache_choice(args.cache, args.no_cache, args.resume)
        value = self._plan_value(name)
        names = self._names(name, value, args)
        # the run options are checked, and --executor looked up, before the collaborators are
        # (a planner is made there: --planner llm without its setup must not hide a bad option)
        given = given_options(args)
        options = resolved_options(given)
        options["executor"] = self.lookup(args.executor, "--executor") if args.executor else None
        options["cache"] = cache
        who = self._collaborators(args, *names)
        if forking:
            return self._fork(name, value, args, who, {**given, "executor": options["executor"], "cache": cache})
        key = (*(ident(options[n]) for n in sorted(options)), *(ident(who[n]) for n in ("tools", "agents", "key")))
        if args.background:
            return self._background(name, value, args, who, options)
        options_given = bool(given) or args.cache or args.no_cache or any(
            v is not None for v in (args.planner, args.model, args.tools, args.agents))
        run = self._run_of(name, value, args, who, options, key, options_given)
        if isinstance(run, RunResult):  # --resume: the stored run had ended: say so, return it
            print(f"plan {name!r}: its latest stored run already {run.status} ({run.reason}); "
                  f"%run_plan {name} starts a new run")
            return run
        return self._drive(name, run.runner, args)

    # ------------------------------------------------------------------ %run_plan's parts
    def _fork(self, name: str, value: Any, args: Any, who: dict[str, Any], options: dict[str, Any]) -> Any:
        """``--fork-at``: the child of NAME's latest stored run, driven as any run (view, --background)."""
        runner = forkmagic.fork_runner(self, name, value, args, who, options)
        if args.background:
            from .handle import start_runner

            return start_runner(runner, view=False if args.no_view else None)
        return self._drive(name, runner, args)

    def _names(self, name: str, value: Any, args: Any) -> tuple[Any, str | None, str | None, str | None, str | None]:
        """``(origin, tools, agents, planner, model)``: the names the line gives, else those ``%%plan NAME`` used."""
        origin = self.session.origin_of(name, value)
        tools_var = args.tools or (origin.tools if origin else None)
        agents_var = args.agents or (origin.agents if origin else None)
        planner_var = args.planner or (origin.planner if origin else None)
        model = args.model if args.planner else (args.model or (origin.model if origin else None))
        if args.model and planner_var != LLM:
            raise UsageError("--model chooses the model of --planner llm; add --planner llm (or drop --model)")
        return origin, tools_var, agents_var, planner_var, model

    def _collaborators(self, args: Any, origin: Any, tools_var: str | None, agents_var: str | None,
                       planner_var: str | None, model: str | None) -> dict[str, Any]:
        """The tools, agents and planner of the run, looked up from their names (see :meth:`_names`)
        (``key``: the planner as the run's options compare it)."""
        tools = self.lookup(tools_var, "--tools") if tools_var else None
        agents = self.lookup(agents_var, "--agents") if agents_var else None
        if planner_var is None:
            planner = None
        elif not args.planner and origin is not None and origin.planner_obj is not None and model == origin.model:
            planner = origin.planner_obj
        else:
            planner = self._planner(planner_var, model)
        key: Any = (LLM, model) if planner_var == LLM else planner
        return {"tools": tools, "agents": agents, "planner": planner, "key": key}

    def _new_runner(self, value: Any, who: dict[str, Any], options: dict[str, Any]) -> Runner:
        """A runner for a new run; its errors said as the magic's (a plan error quotes no cell)."""
        try:
            return Runner(value, planner=who["planner"], tools=who["tools"], agents=who["agents"],
                          store=self.session.store(), **options)
        except PlanError as exc:
            raise cell_plan_error(exc.problems) from None
        except (ValueError, TypeError) as exc:
            raise UsageError(magic_words(str(exc))) from None

    def _resumed(self, name: str, value: Any, args: Any, who: dict[str, Any], executor: Any) -> Any:
        return self.session.resumed(name, value, tools=who["tools"], agents=who["agents"], planner=who["planner"],
                                    rerun=args.rerun, executor=executor, force=args.force)

    def _run_of(self, name: str, value: Any, args: Any, who: dict[str, Any], options: dict[str, Any],
                key: tuple[Any, ...], options_given: bool) -> Any:
        """The run ``%run_plan NAME`` drives: the kept one going on, the stored one resumed, or a new one
        (or, when ``--resume`` finds the stored run ended, its result)."""
        run = self.session.runs.get(name)
        unfinished = (
            run is not None
            and not args.restart
            and same(run.value, value)
            and run.runner.state.started
            and run.runner.state.status in ("paused", "interrupted")
        )
        if unfinished and options_given and run is not None and run.key != key:
            raise UsageError(
                f"plan {name!r} has a {run.runner.state.status} run that was started with other options: "
                f"run %run_plan {name} without options to continue it, or add --restart to start a new run "
                "with these options"
            )
        if unfinished and not args.resume:  # with no options, or the same ones: continue where it stopped
            assert run is not None
            return run
        if run is None and not args.resume and not args.restart:
            self.session.refuse_over_stored(name)  # a kernel restart forgot the run; the store did not
        objects = [who["tools"], who["agents"], who["planner"]]
        if run is not None:
            run.runner.settle()  # a call still running from the old run must end before its step runs again
        if args.resume:
            runner = self._resumed(name, value, args, who, options["executor"])
            if isinstance(runner, RunResult):
                return runner
            run = Run(value=value, key=key, runner=runner, objects=objects)
            self.session.runs[name] = run
            return run
        runner = self._new_runner(value, who, options)
        run = Run(value=value, key=key, runner=runner, objects=objects)
        self.session.runs[name] = run
        origin = self.session.origin_of(name, value)
        if origin is not None and origin.planning:
            runner.count_planning(origin.planning)  # the run's usage counts the calls that planned it
            origin.planning = []
        return run

    def _drive(self, name: str, runner: Runner, args: Any) -> Any:
        """Run (to its end, one step, or until a step) with the live view; the result, or why not."""
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
            raise RunInterrupted(name, result, stored=self.session.keeps_runs_on_disk)
        if args.check and result.status == "failed":
            raise RunFailed(result)
        if bridge is not None:  # the live view shows the plan: the cell's value need not show it again
            from ..views.live import shown_live

            return shown_live(result)
        return result

    def _background(self, name: str, value: Any, args: Any, who: dict[str, Any], options: dict[str, Any]) -> Any:
        """``--background``: start the run on its own thread and return its handle (displayed as the
        live view); with ``--resume``, the plan's latest stored run goes on there."""
        from .handle import start_runner

        if args.resume:
            runner = self._resumed(name, value, args, who, options["executor"])
            if isinstance(runner, RunResult):  # the stored run had ended: say so, return it
                print(f"plan {name!r}: its latest stored run already {runner.status} ({runner.reason}); "
                      f"%run_plan {name} --background starts a new run")
                return runner
        else:
            if not args.restart:
                self.session.refuse_over_stored(name, background=True)  # a kernel restart forgot the run
            runner = self._new_runner(value, who, options)
        handle = start_runner(runner, view=False if args.no_view else None)
        self.session.started_in_background(name, runner)
        return handle

    # ------------------------------------------------------------------ helpers
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

    def lookup(self, var: str, option: str) -> Any:
        """The value of the user's variable ``var`` a flag names (``--tools box``); a UsageError naming
        ``option`` and the nearest name if there is none. The fork magic reads ``--result`` with it."""
        ns = self.ip.user_ns
        if var not in ns:
            known = [k for k in ns if not k.startswith("_")]
            raise UsageError(f"{option} {var}: there is no variable {var!r} in the namespace{closest(var, known)}")
        return ns[var]

    def _planner(self, var: str, model: str | None) -> Any:
        if var == LLM:
            from ..llm import LLMPlanner  # imports openai: only when asked for

            return LLMPlanner(model=model)
        planner = self.lookup(var, "--planner")
        if not callable(planner) and not hasattr(planner, "chat"):  # a model drives --strategy openmanus/agenticseek
            raise UsageError(
                f"--planner {var}: {var!r} is a {type(planner).__name__}; a planner is a callable "
                "(goal, history, last_error) -> steps, or use --planner llm"
            )
        return planner


def _refuse_contradictions(args: Any, name: str, forking: bool = False) -> None:
    """Flags that cannot go together, refused before anything is looked up or runs."""
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
    if args.rerun and not (args.resume or forking):
        raise UsageError("--rerun goes with --resume or --fork-at (it names steps of the stored run to run again)")
    if args.resume and (args.restart or args.step or args.until):
        raise UsageError("--resume continues the stored run to its end: drop --restart, --step and --until")


def _attempts_log(planner: Any) -> list[dict[str, Any]]:
    """An LLMPlanner's record of its calls (each marked accepted or with the problems sent
    back); [] for other planners. Never imports the model layer: if it is not loaded, the
    planner is not an LLMPlanner."""
    llm = sys.modules.get("planbook.llm")
    if llm is not None and isinstance(planner, getattr(llm, "LLMPlanner", ())):
        return [c for c in getattr(planner, "calls", ()) if isinstance(c, dict)]
    return []


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


def register(ipython: Any) -> PlanMagics:
    """Register the magics (``%load_ext planbook``) and put the checkpoint on everything the kernel
    publishes (:func:`planbook.views.publish.install_checkpoint`). Returns the magics object holding the runs."""
    from ..views.publish import install_checkpoint

    install_checkpoint(ipython)
    magics = PlanMagics(ipython)
    ipython.register_magics(magics)
    replaymagic.register(ipython, magics)  # %replay
    return magics


def unregister(ipython: Any) -> None:
    """Remove the magics (``%unload_ext planbook``)."""
    manager = ipython.magics_manager
    for kind, names in (("cell", ("plan",)), ("line", ("run_plan", "plan_store", "plan_tools", "diff_runs"))):
        for magic_name in names:
            fn = manager.magics[kind].get(magic_name)
            if fn is not None and isinstance(getattr(fn, "__self__", None), PlanMagics):
                del manager.magics[kind][magic_name]
    manager.registry.pop(PlanMagics.__name__, None)
    replaymagic.unregister(ipython)


def magics_of(ipython: Any) -> PlanMagics | None:
    """The registered :class:`PlanMagics` (its ``runs`` hold the runners kept per NAME)."""
    found = ipython.magics_manager.registry.get(PlanMagics.__name__)
    return found if isinstance(found, PlanMagics) else None


__all__ = ["PlanMagics", "magics_of", "register", "unregister"]
