"""The runner: the plan-execute state machine (EXEC → NEXT/REPLAN → DONE/FAILED).

Its state is plain data (:class:`~planbook.engine.state.RunState`, with the
:class:`~planbook.engine.config.RunConfig`), and a tick is four moves: take the ready steps
(:mod:`~planbook.engine.scheduler`), submit them (:mod:`~planbook.engine.executors`), collect their
outcomes, decide (:mod:`~planbook.engine.policies`, :mod:`~planbook.engine.budget`). A notebook can
step through a plan, stop at a step, be interrupted and continue; ``parallel=N`` runs
up to N independent steps at once.

This module holds the runner's making (its options checked, its parts built), its events
and its result. What it does is split by seam, as LangGraph's pregel splits deciding from
applying: :mod:`~planbook.engine._algo` computes what should happen from plain values;
:mod:`~planbook.engine.control` owns how the run ends, pauses and replans (the one writer of its
status); :mod:`~planbook.engine._outcomes` records a step's outcome and carries out the verdict of
its failure policy; :mod:`~planbook.engine._stop` interrupts a run and lets it continue;
:mod:`~planbook.engine._loop` is the tick loop that applies it all. Each builds on the one
before (``Runner(TickLoop(Stopping(Recording)))``): a part calls only what it or a part below
it defines, never a sibling's private method.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ..data import results
from ..data.errors import PlanError, Problem
from ..data.gcwindow import collector_paused, worth_keeping
from ..data.ids import new_run_id
from ..data.models import Event, EventKind, Plan, RunResult, Step
from ..data.wording import slug
from ..outbound import RunSecrets
from ..spec.formats import is_plan_spec
from ..spec.validate import checked_positions
from ..workers.agents import AgentsLike, as_agents
from ..workers.planners import Planner
from ..workers.tools import ToolsLike, as_toolbox
from . import _algo
from ._loop import TickLoop
from .approvals import ApproveLike
from .budget import Budget
from .config import DEFAULTS, RunConfig
from .control import RunControl
from .dispatch import Dispatcher
from .door import Door
from .eventbus import RUN_HOOKS, EventBus, EventHandler
from .liveoutput import OutputRelay
from .persistence import RunRecorder
from .scheduler import Scheduler
from .state import RunState
from .steering import Steering
from .steering import build as build_steering

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["Runner", "run"]

#: ``resolver(strategy, faithful, **options) -> options``: turns ``strategy=`` into plain run options.
#: The seed designs (:mod:`planbook.compat`) register it, so the engine never imports them.
_strategy_resolvers: list[Callable[..., Any]] = []


def register_strategies(resolver: Callable[..., Any]) -> None:
    """Let ``strategy=`` and ``faithful=`` be resolved by ``resolver`` (the last one registered wins)."""
    _strategy_resolvers.append(resolver)


def resolve_strategy(strategy: str | None, faithful: bool, **options: Any) -> Any:
    """The run options of ``strategy`` (an object with the options as attributes)."""
    if not _strategy_resolvers:
        raise ValueError(f"strategy={strategy!r} needs the seed designs: import planbook.compat first")
    return _strategy_resolvers[-1](strategy, faithful, **options)


#: ``after_step(goal, plan, step) -> steps | None``: None keeps the plan; steps replace
#: every step after ``step`` that has not run (a revision with a diff, counted as a replan)
AfterStep = Callable[[str, Plan, Step], Any]


class Runner(TickLoop):
    """Executes a plan under a failure policy and budgets, one step or N at a time.

    ``plan`` is a :class:`Plan`, a spec string, or — with a ``planner`` — a goal in
    words. An invalid plan or option raises here, before anything runs.
    """

    def __init__(
        self,
        plan: Plan | str,
        *,
        planner: Planner | None = None,
        tools: ToolsLike = None,
        agents: AgentsLike = None,
        on_failure: str | Sequence[str] | None = DEFAULTS.on_failure,
        retries: int | None = DEFAULTS.retries,
        max_steps: int = DEFAULTS.max_steps,
        max_replans: int = DEFAULTS.max_replans,
        step_timeout: float | None = DEFAULTS.step_timeout,
        parallel: int = DEFAULTS.parallel,
        executor: Any = DEFAULTS.executor,
        after_step: AfterStep | None = None,
        store: Any = DEFAULTS.store,
        cache: bool | None = DEFAULTS.cache,
        on_event: EventHandler | Iterable[EventHandler] | None = None,
        clock: Callable[[], float] = time.time,
        strategy: str | None = DEFAULTS.strategy,
        faithful: bool = DEFAULTS.faithful,
        approve: ApproveLike = DEFAULTS.approve,
        approve_timeout: float | None = DEFAULTS.approve_timeout,
    ) -> None:
        attach: list[Callable[[Runner], None]] = []
        if strategy is not None or faithful:  # a seed design's bundle of options, from the layer that knows them
            o = resolve_strategy(strategy, faithful, plan=plan, planner=planner, tools=tools, agents=agents,
                                 on_failure=on_failure, retries=retries, parallel=parallel, after_step=after_step,
                                 on_event=on_event)
            plan, planner, agents, on_failure, retries, after_step, on_event, attach = (
                o.plan, o.planner, o.agents, o.on_failure, o.retries, o.after_step, o.on_event, o.attach)
        #: the design this run follows (:mod:`planbook.compat.strategies`) and whether its pitfalls are on
        self.strategy, self.faithful = strategy or "planbook", faithful
        if after_step is not None and parallel != 1:
            raise ValueError("after_step reviews the plan after each step, so steps must run one at a time: "
                             "drop parallel, or the review")
        #: asked after each step whether the rest of the plan should change (AgenticSeek's review)
        self.after_step = after_step
        self.config = RunConfig.build(
            on_failure=on_failure, has_planner=planner is not None, retries=retries, max_steps=max_steps,
            max_replans=max_replans, step_timeout=step_timeout, parallel=parallel, executor=executor, cache=cache,
            store=store, strategy=strategy, faithful=faithful, approve=approve, approve_timeout=approve_timeout,
        )
        self.planner = planner
        self.tools = as_toolbox(tools)
        self.agents = as_agents(agents)
        self.clock = clock
        self.budget = Budget(self.config.max_steps, self.config.max_replans)
        self.bus = EventBus(self._record_event, on_event)

        self.goal_only: str | None = None
        # nothing here makes garbage: collecting would only rescan the new plan, which lives on
        # (reading a spec string does leave some: then the collector goes on as usual)
        with collector_paused(keep=isinstance(plan, Plan) and worth_keeping(len(plan.steps))):
            initial, positions = self._initial_plan(plan)
            scheduler = Scheduler(initial, self._blocked, position=positions)
        pinned: list[str] = []
        if self.config.step_timeout is not None:  # only a timeout cares (and this is a pass over the plan)
            pinned = sorted({st.tool for st in initial.steps if st.tool and self.tools[st.tool].main_thread})
        if pinned:
            raise ValueError(f"step_timeout cannot stop tools that run on the main thread ({', '.join(pinned)}): "
                             "drop main_thread=True from them or run without a timeout")
        policy = self.config.policy
        if retries and "retry" not in policy and not any(st.on_failure == "retry" for st in initial.steps):
            raise ValueError(f"retries={retries} only applies to the retry policy, and on_failure is "
                             f"{list(policy)}: add 'retry' (e.g. on_failure=['retry', '{policy[-1]}'])")
        self.state = RunState(plan=initial)
        #: the run's id (a store writes it under this id; a run without a store has one too)
        self._run_id = new_run_id()
        #: a fork with ``reuse="identical"`` (planbook.engine.fork): the parent's calls its dependents may match
        self._parent_calls: dict[str, tuple[Any, Any, Any]] = {}
        #: the run's gate: its secrets, learned from the plan and every change to it (planbook.outbound)
        self.secrets = RunSecrets()
        self.secrets.learn_plan(initial)
        #: where the run persists (None: nowhere); see planbook.engine.persistence
        self.recorder: RunRecorder | None = None
        #: the store was opened here from a path: release_store() closes it when the run has ended
        self._owns_store = isinstance(store, (str, os.PathLike))
        if self.config.cache and store is None:
            raise ValueError("cache=True reuses results stored by earlier runs, and this run has no store: "
                             "pass store='runs.sqlite' (or ':memory:'), or drop cache=True")
        if store is not None:
            from ..store import open_store  # here, not above: a run without a store never loads sqlite3

            self.recorder = RunRecorder(open_store(store), cache=self.config.cache, secrets=self.secrets)
        self.scheduler = scheduler
        #: where calls run and what is in flight
        self.dispatch = Dispatcher(self.config, self.tools, self.agents, self.bus, clock, lambda: self.state.plan)
        if self.after_step is not None:  # the review may rewrite what follows each step: nothing runs ahead of it
            self.dispatch.batching = False
        #: what steps running on worker threads print, announced as they print (planbook.engine.liveoutput)
        self.dispatch.relay = OutputRelay(self._announce_output, self.secrets.text, clock, self.dispatch.wake,
                                          secrets=self.secrets)
        self._stale = False  # the scheduler must be rebuilt before the next tick
        #: how the run ends, pauses or replans: the one writer of its status (planbook.engine.control)
        self.control = RunControl(self)
        #: the step ``run(until=...)`` stops after: no batch reaches past it
        self._until: str | None = None
        self._gc = _algo.NO_WINDOW
        self._adopted = False
        #: cache keys of steps about to run (their result is cached when they succeed)
        self._cache_keys: dict[str, str] = {}
        #: approvals from people (None: nothing asks; see planbook.engine.steering), and the one inbox
        #: every decision about the run arrives in, applied by the runner (planbook.engine.door)
        self.steering: Steering | None = None
        self.door: Door | None = None
        if approve not in (None, False) or approve_timeout is not None or any(
                getattr(t, "approve", False) for t in self.tools.values()):
            self.steer(approve, approve_timeout)
        #: history entries that are the plan's step itself (id(step) -> index), copied before it changes
        self._shared: dict[int, int] = {}
        for hook in (*attach, *RUN_HOOKS.values()):
            hook(self)

    def steer(self, approve: ApproveLike = None, approve_timeout: float | None = None) -> Steering:
        """The run's steering (made on first use: a background run always has one)."""
        if self.steering is None:
            self.steering = build_steering(approve, approve_timeout, self.tools, self.state.plan)
            self.door = Door(self, self.steering)
        return self.steering

    def _initial_plan(self, plan: Plan | str) -> tuple[Plan, dict[str, int] | None]:
        """The run's own copy of the plan, checked (or an empty plan awaiting its first one),
        and the position of each of its step ids (checking built it; None when not checked)."""
        if isinstance(plan, Plan):
            # a plan run again starts clean: only completed steps keep their run state
            initial = plan.copy_plan(fresh=True)
        elif isinstance(plan, str) and self.planner is not None and not is_plan_spec(plan):
            self.goal_only = plan.strip()
            initial = Plan(id=slug(plan) or "plan", goal=plan.strip(), steps=[], revision=0)
        elif isinstance(plan, str):
            initial = Plan.parse(plan)
        else:
            raise TypeError(f"run() takes a Plan, a plan spec or (with a planner) a goal; got {type(plan).__name__}")
        positions = None
        if self.goal_only is None:
            positions = checked_positions(initial, self.tools, self.agents)
            if self.planner is None:
                replanning = [st.id for st in initial.steps if st.on_failure == "replan"]
                if replanning:
                    raise PlanError([
                        Problem("on_failure 'replan' needs a planner: pass planner=... or choose abort, skip or retry",
                                step=sid, code="bad_policy", line=initial.line_of(sid))
                        for sid in replanning
                    ])
        return initial, positions

    # ------------------------------------------------------------ settings
    @property
    def policy(self) -> tuple[str, ...]:
        return self.config.policy

    @property
    def retries(self) -> int:
        return self.config.retries

    @property
    def max_steps(self) -> int:
        return self.config.max_steps

    @property
    def max_replans(self) -> int:
        return self.config.max_replans

    @property
    def step_timeout(self) -> float | None:
        return self.config.step_timeout

    @property
    def parallel(self) -> int:
        return self.config.parallel

    # -------------------------------------------------------------- events
    @property
    def handlers(self) -> list[EventHandler]:
        return self.bus.handlers

    @property
    def _heartbeats(self) -> dict[Callable[[], None], float]:
        return self.bus.heartbeats

    def subscribe(self, handler: EventHandler) -> None:
        """Call ``handler(event)`` for every event from now on (views use this)."""
        self.bus.handlers.append(handler)

    def unsubscribe(self, handler: EventHandler) -> None:
        """Stop calling ``handler`` (a view that is closed or replaced). Unknown handlers are ignored."""
        if handler in self.bus.handlers:
            self.bus.handlers.remove(handler)

    def add_heartbeat(self, callback: Callable[[], None], interval: float = 0.1) -> None:
        """Call ``callback()`` on the runner's thread about every ``interval`` s while steps run.

        A live view uses this to redraw during a slow step. While a heartbeat is set, a
        step's call runs in a worker thread (except tools marked ``main_thread=True``)
        and the runner's thread waits in slices; events the step emits (``llm.call``) are
        delivered on the runner's thread. Several views may each add one.
        """
        self.bus.add_heartbeat(callback, interval)

    def remove_heartbeat(self, callback: Callable[[], None]) -> None:
        """Stop calling ``callback`` (a view that closes). Unknown callbacks are ignored."""
        self.bus.remove_heartbeat(callback)

    def emit(self, kind: EventKind, step: str | None = None, **data: Any) -> Event:
        return self.bus.emit(kind, step, **data)

    def _record_event(self, kind: EventKind, step: str | None, data: dict[str, Any], at: float | None = None) -> Event:
        """Make an event and keep it in the run's record (the bus then delivers it). ``at``: its
        time, when the caller just read the clock (a step's start or end: one time, kept once)."""
        s = self.state
        if kind == "plan.created" or kind == "plan.diff":  # a new plan or an edit: its secret args are secrets
            self.secrets.learn_plan(s.plan)
            if self.goal_only is not None and s.plan.id == slug(self.goal_only):
                # an id made from a goal that names a secret (cut at 40 characters, it may keep a
                # part of it no redaction finds): made again from the goal as it may be shown
                hidden = self.secrets.text(self.goal_only)
                if hidden != self.goal_only:
                    s.plan.id = slug(hidden) or "plan"
        # an event is kept in the result, stored, delivered to views and exported: what it holds
        # passes the run's gate here, once, whoever built it (an edit's args, a reason quoting a value)
        event = Event.record(kind, self.clock() if at is None else at, step, s.plan.revision,
                             self.secrets.event_data(data))
        s.events.append(event)
        return event

    def _announce_output(self, step: Step, text: str) -> None:
        """A running step printed: tell the views (not recorded: see planbook.engine.liveoutput)."""
        if self.bus.handlers:
            self.bus.deliver(Event.record("step.output", self.clock(), step.id, self.state.plan.revision,
                                          {"output": text}))

    # --------------------------------------------------------------- state
    @property
    def plan(self) -> Plan:
        return self.state.plan

    @property
    def finished(self) -> bool:
        return self.state.status in ("completed", "failed")

    def result(self) -> RunResult:
        """A snapshot of the run so far (the runner may go on after a pause)."""
        s = self.state
        # a finished run's plan and record no longer change: share them (no second list of a
        # long run's events); a paused one goes on, so copy them
        done = self.finished
        return results.run_result(
            plan=s.plan if done else s.plan.copy_plan(),
            history=s.history if done else list(s.history),
            revisions=s.revisions if done else list(s.revisions),
            events=s.events if done else list(s.events),
            status=s.status, reason=s.reason, error=s.error, traceback=s.traceback,
            executions=s.executions, replans=s.replans, max_steps=self.max_steps, max_replans=self.max_replans,
            secrets=self.secrets, run_id=self.run_id, lineage=s.lineage,
        )

    # ------------------------------------------------------------- the stored run
    def adopt(self, state: RunState, run_id: str) -> None:
        """Continue a stored run: its state, written on under its id (see planbook.resume)."""
        self.state = state
        self._run_id = run_id
        self._stale = True
        self._adopted = True
        if self.recorder is not None:
            self.recorder.run_id = run_id

    def adopt_fork(self, lineage: dict[str, Any], parent_calls: dict[str, tuple[Any, Any, Any]], *,
                   owns_store: bool) -> None:
        """Run as a fork (planbook.engine.fork): its origin goes with its state (the store writes it
        with the run's row), ``parent_calls`` are the parent's calls a dependent may match
        (``reuse="identical"``), and a store the fork opened from a path is closed when the run ends."""
        self.state.lineage = lineage
        self._parent_calls = dict(parent_calls)
        self._owns_store = self._owns_store or owns_store

    @property
    def run_id(self) -> str:
        """The run's id: the one its store holds it under (``result.run_id``)."""
        recorder = self.recorder
        return recorder.run_id if recorder is not None and recorder.run_id else self._run_id

    def release_store(self) -> None:
        """Close a store this runner opened from a path, once its run has ended: not whenever the
        collector gets to it (an open connection keeps the write-ahead log beside the file, and
        one connection a run would pile up in a long session). A store object is the caller's."""
        if self._owns_store and self.recorder is not None:
            self.recorder.store.close()

    def count_planning(self, events: list[Event]) -> None:
        """Before the run starts: the model calls that planned it (``%%plan`` with a planner) count in its usage."""
        self.state.events[:0] = events


def run(plan: Plan | str, **options: Any) -> RunResult:
    """Run a plan (or a goal, with a planner) to the end and return the :class:`RunResult`.

    ``parallel=N`` runs up to N steps whose needs are complete at once (worker threads,
    or ``executor``: any ``concurrent.futures.Executor``, such as a Dask client's
    ``get_executor(pure=False)``). ``store``: a path, ``":memory:"`` or a store object
    where the run persists (default: none), so :func:`planbook.resume` can finish it after
    a crash. The cross-run step cache is off unless asked for: with a store, ``cache=True``
    answers a tool call made in an earlier run with the same arguments and code from that
    run's result (tools registered with ``cache=True`` are cached even without it;
    ``cache=False`` caches nothing; ``idempotent=False`` tools never). ``after_step``: see
    :data:`AfterStep`. Raises :class:`PlanError` if the plan is invalid
    (nothing runs); every other outcome — failures, budgets, interrupts — is in the result.
    ``strategy`` runs the plan as one of the seed designs (``"lesson"``, ``"openmanus"``,
    ``"agenticseek"``; ``"planbook"`` is the default), ``faithful=True`` with its pitfalls
    (:mod:`planbook.compat.strategies`). ``approve``: steps that wait for a decision before they
    start — ``True`` (every step), step ids or tool names, or a callable ``(step, context) ->
    Decision`` that decides (tools registered with ``approve=True`` always ask); a run in the
    foreground needs that callable (:func:`planbook.start` runs in the background and takes
    decisions from its handle). ``approve_timeout``: seconds a step may wait; then the run stops
    (``failed``, ``aborted``) and says so.

    The keywords are :class:`Runner`'s, written once there: ``help(planbook.run)`` and a
    notebook's tooltip show them all (see :func:`takes_runner_options`).
    """
    runner = Runner(plan, **options)
    try:
        return runner.run()
    finally:
        runner.release_store()


def takes_runner_options(*extra: inspect.Parameter, returns: Any) -> Callable[[F], F]:
    """Give ``fn(plan, **options)``, which hands its keywords to :class:`Runner`, the Runner's
    signature (plus ``extra`` keywords of its own), so ``help()``, ``inspect.signature`` and a
    notebook's tooltips list every option while the list is written once, in ``Runner.__init__``."""

    def apply(fn: F) -> F:
        init = inspect.signature(Runner.__init__)  # annotations as written: ToolsLike, not its expansion
        plan, *options = list(init.parameters.values())[1:]  # without self
        fn.__signature__ = inspect.Signature([plan, *extra, *options], return_annotation=returns)  # type: ignore[attr-defined]
        return fn

    return apply


run = takes_runner_options(returns=RunResult)(run)
