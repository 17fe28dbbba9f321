"""The runner: the plan-execute state machine (EXEC → NEXT/REPLAN → DONE/FAILED).

Its state is plain data (:class:`~planbook.engine.state.RunState`, with the
:class:`~planbook.engine.config.RunConfig`), and a tick is four moves: take the ready steps
(:mod:`~planbook.engine.scheduler`), submit them (:mod:`~planbook.engine.executors`), collect their
outcomes, decide (:mod:`~planbook.engine.policies`, :mod:`~planbook.engine.budget`). A notebook can
step through a plan, stop at a step, be interrupted and continue; ``parallel=N`` runs
up to N independent steps at once.
"""

from __future__ import annotations

import os
import time
import traceback as traceback_module
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..workers.agents import AgentsLike, as_agents
from .approvals import ApproveLike
from .budget import Budget
from .config import DEFAULTS, RunConfig
from . import decisions, planchanges
from .dispatch import Dispatcher, Flight
from ..data.errors import PlanError, Problem
from .eventbus import RUN_HOOKS, EventBus, EventHandler
from .execute import stdout_routing, summarize
from .executors import NotReached
from ..data.gcwindow import FreezeWindow, collector_paused, freeze_window, worth_keeping
from ..workers.interrupts import checkpoint, interrupt_gate
from .liveoutput import OutputRelay
from ..data import results
from ..data.models import (Event, EventKind, Execution, Plan, RunReason, RunResult, RunStatus, Status, Step,
                     finished_data, started_data)
from ..outbound import RunSecrets
from .persistence import UNCACHED_NOTE, RunRecorder, uses_cache
from ..workers.planners import Planner
from .policies import chain_for, handle_failure
from ..data.refs import resolve
from .scheduler import Scheduler
from ..spec.formats import is_plan_spec, slug
from .steering import Steering, build as build_steering
from ..data.wording import plural
from .state import CACHED_NOTE, INTERRUPTED_NOTE, KEPT_NOTE, STILL_RUNNING_NOTE, RunState, failure_line
from ..workers.tools import ToolsLike, as_toolbox
from ..spec.validate import checked_positions

__all__ = ["INTERRUPTED_NOTE", "RunState", "Runner", "run"]

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


class Runner:
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
            from ..store import open_store

            self.recorder = RunRecorder(open_store(store), cache=self.config.cache, secrets=self.secrets)
        self.scheduler = scheduler
        #: where calls run and what is in flight
        self.dispatch = Dispatcher(self.config, self.tools, self.agents, self.bus, clock, lambda: self.state.plan)
        if self.after_step is not None:  # the review may rewrite what follows each step: nothing runs ahead of it
            self.dispatch.batching = False
        #: what steps running on worker threads print, announced as they print (planbook.engine.liveoutput)
        self.dispatch.relay = OutputRelay(self._announce_output, self.secrets.text, clock, self.dispatch.wake)
        self._stale = False  # the scheduler must be rebuilt before the next tick
        #: set while running steps are allowed to finish before the run ends or replans
        self._ending: tuple[Any, ...] | None = None  # (status, reason, error[, exception])
        self._replan_for: Step | None = None
        self._pause_why: str | None = None
        #: the step ``run(until=...)`` stops after: no batch reaches past it
        self._until: str | None = None
        self._gc = _NO_WINDOW
        self._adopted = False
        #: cache keys of steps about to run (their result is cached when they succeed)
        self._cache_keys: dict[str, str] = {}
        #: approvals from people (None: nothing asks; see planbook.engine.steering), and the one inbox
        #: every decision about the run arrives in, applied by the runner (planbook.engine.decisions)
        self.steering: Steering | None = None
        self.door: decisions.Door | None = None
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
            self.door = decisions.Door(self, self.steering)
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
        event = Event.record(kind, self.clock() if at is None else at, step, s.plan.revision, data)
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

    def _finish(
        self, status: RunStatus, reason: RunReason, error: str | None = None, exc: BaseException | None = None
    ) -> None:
        """End the run. ``exc``: the exception behind it (a crashing planner), kept as a traceback."""
        self.state.status, self.state.reason, self.state.error = status, reason, error and self.secrets.text(error)
        if exc is not None:
            self.state.traceback = self.secrets.text(
                "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__)))
        if self.door is not None:  # a stop given as it ended is recorded, refused: this is what ended it
            self.door.ending(self.state.error or f"{status}: {reason}")
        self.emit("run.finished", status=status, reason=reason, error=self.state.error, executions=self.state.executions,
                  replans=self.state.replans)
        if self.recorder is not None:
            self.recorder.flush(self.state)

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
            records=s.records if done else list(s.records),
            secrets=self.secrets,
        )

    # ------------------------------------------------------------- running
    def run(self, *, until: str | None = None, max_executions: int | None = None) -> RunResult:
        """Advance until the run ends, step ``until`` has run, or ``max_executions`` were made."""
        if until is not None and self.plan.steps:
            self.plan.step(until)  # KeyError names the known ids
        if max_executions is not None and (isinstance(max_executions, bool) or max_executions < 1):
            raise ValueError(f"max_executions must be a whole number >= 1, got {max_executions!r}")
        if self.steering is not None and not self.finished:
            self.steering.check_askers(self)
        try:
            with interrupt_gate(), stdout_routing(), freeze_window() as self._gc:
                try:
                    self._loop(until, max_executions)
                except KeyboardInterrupt as exc:
                    self._interrupt(str(exc))
        finally:
            self._gc = _NO_WINDOW
            self._until = None
            self.dispatch.close()
            if self.finished:  # nothing runs again: the indexes over the plan are not kept with it
                if self.door is not None:  # no deadline outlives the run; what waits for an answer is refused
                    self.door.close()
                self.scheduler.clear()
                self._stale = True
                self._shared = {}  # nor changes a step: the history may keep sharing them
            else:  # the run may go on, and the plan may be edited by hand meanwhile: the past is copied
                self._unshare_history()
        return self.result()

    def _unshare(self, step: Step) -> None:
        """``step`` is about to change: if the history holds it, the history gets a copy."""
        if self._shared:
            index = self._shared.pop(id(step), None)
            if index is not None:
                self.state.history[index] = step.snapshot()

    def _unshare_history(self) -> None:
        history = self.state.history
        for index in self._shared.values():
            history[index] = history[index].snapshot()
        self._shared = {}

    def advance(self) -> Step | None:
        """One tick: plan if needed, submit what is ready, collect, decide.

        Returns the last step whose call was recorded (None when the tick only planned,
        applied a policy or finished).
        """
        try:
            with interrupt_gate(), stdout_routing():
                try:
                    return self._tick(limit=None)
                except KeyboardInterrupt as exc:
                    self._interrupt(str(exc))
                    return None
        finally:
            if not self.dispatch.inflight:
                self.dispatch.close()

    def _loop(self, until: str | None, max_executions: int | None) -> None:
        submitted_before = self.state.executions
        self._until = until
        while not self.finished:
            limit = None if max_executions is None else submitted_before + max_executions
            if self._pause_why is None and limit is not None and self.state.executions >= limit:
                self._pause_why = f"paused after {plural(max_executions, 'execution')}"
            if self._pause_why is not None and not self.dispatch.inflight:
                why, self._pause_why = self._pause_why, None
                self._pause(why)
                return
            self._tick(limit=limit)
            checkpoint()
            if until is not None and self._pause_why is None and not self.finished and self._has_run(until):
                self._pause_why = f"paused after step {until}"

    def _has_run(self, step_id: str) -> bool:
        """Step ``step_id`` is done for ``until``: it ran (whatever the outcome) or was blocked."""
        step = self.scheduler.by_id.get(step_id)
        return step is not None and step.status in (Status.completed, Status.skipped, Status.failed, Status.blocked)

    def _pause(self, why: str) -> None:
        if not self.state.pending_failures and self.scheduler.peek() is None and not self._replan_for \
                and not (self.steering is not None and self.steering.waiting):
            self._complete()  # nothing is left to run: the run is over, not paused
            return
        if self.door is not None:
            self.door.paused()  # sets the status with the door's phase, under its lock
        else:
            self.state.status, self.state.reason = "paused", "paused"
        self.emit("run.paused", why=why)
        if self.recorder is not None:
            self.recorder.flush(self.state)

    def _start(self) -> bool:
        """Begin or continue the run; False when it ended here (no first plan)."""
        s = self.state
        if s.started and s.status == "running" and not self._stale and not self._adopted \
                and (self.goal_only is None or s.plan.revision != 0):
            return True  # a tick in the middle of a run: nothing to begin
        resumed = s.status in ("paused", "interrupted")
        if resumed:
            self._settle_leftovers()
            s.status, s.reason, s.error = "running", None, None
            self._stale = True  # a paused plan may have been edited by hand
            # stored=True: continued from the store (planbook.resume), so the steps completed
            # before did not run in this process; False: a pause in this process, going on
            self.emit("run.started", resumed=True, stored=self._adopted)
        if not s.started:
            s.started = True
            self.emit("run.started", resumed=False, max_steps=self.max_steps, max_replans=self.max_replans,
                      parallel=self.parallel)
            if self.goal_only is None:
                self.emit("plan.created", steps=[st.id for st in s.plan.steps])
            if self.recorder is not None:
                config = self.config.model_dump(mode="json")
                if self.steering is not None and self.steering.rule.stored() is not None:
                    config["approve"] = self.steering.rule.stored()  # a resume asks about the same steps
                self.recorder.begin(s, config)
        elif resumed and self.recorder is not None and not self._adopted:
            self.recorder.save(s)  # a paused plan may have been edited by hand
        # a run resumed from its store writes nothing before its first call: the steps a crash
        # cut short stay "in progress" there until they run again, so a second crash still
        # finds them (and asks again about idempotent=False tools)
        self._adopted = False
        if self.goal_only is not None and s.plan.revision == 0:  # no first plan yet (or it was interrupted)
            if not planchanges.first_plan(self):
                return False
            self._stale = True
            self.emit("plan.created", steps=[st.id for st in s.plan.steps])
            if self.recorder is not None:
                self.recorder.save(s)
        if self._stale:
            self.scheduler.rebuild(s.plan, s.pending_failures)
            self._stale = False
        return True

    def _tick(self, limit: int | None) -> Step | None:
        s = self.state
        if self.finished or not self._start():
            return None
        if self.door is not None:
            self.door.apply_inbox()
        if self.dispatch.batching:
            self.dispatch.halt(self._ending is not None or self._replan_for is not None or self._pause_why is not None)
        if s.pending_failures:  # a failure's policy was interrupted: apply it first
            pending, s.pending_failures = list(s.pending_failures), []
            for step_id in pending:
                failed = self.scheduler.by_id.get(step_id)
                if failed is not None and failed.status is Status.failed and not self.finished:
                    self._apply_policy(failed)
            return None
        if self._replan_for is not None and not self.dispatch.inflight:
            failed, self._replan_for = self._replan_for, None
            planchanges.replan(self, failed)
            return None
        if self._ending is not None and not self.dispatch.inflight:
            self._finish(*self._ending)
            return None
        self._submit_ready(limit)
        if not self.dispatch.inflight:
            if self._ending is not None:
                self._finish(*self._ending)
            elif self.door is not None and self.door.steering.waiting and self._replan_for is None \
                    and self._pause_why is None:
                self.door.wait()  # a decision, a pause, a stop or a deadline wakes it
            elif self._replan_for is None and self._pause_why is None:
                self._complete()
            return None
        return self._collect()

    def _submit_ready(self, limit: int | None) -> None:
        dispatch, parallel = self.dispatch, self.config.parallel
        while dispatch.lanes() < parallel:
            step = self._next_ready(limit)
            if step is None:
                return
            executor = dispatch.executor_for(step)
            if dispatch.batching:
                size = dispatch.batch_size(step, executor, self.scheduler.ready_count() + 1,
                                           parallel - dispatch.lanes())
                if size > 1:
                    self._submit_batch(step, executor, size, limit)
                    continue
            self._submit(step, executor)

    def _next_ready(self, limit: int | None, *, batchable: bool = False) -> Step | None:
        """Take the next step to start, if the run may start one (cached steps complete here).

        ``batchable``: only a step that may join a batch (otherwise it waits for its own turn).
        """
        s = self.state
        while (self._ending is None and self._replan_for is None and self._pause_why is None
               and (limit is None or s.executions < limit)):
            step = self.scheduler.peek()
            if step is None or (batchable and not self._may_join(step)):
                return None
            if self.recorder is not None and step.tool is not None and self._from_cache(step):
                continue
            if self.door is not None:
                cleared = self.door.clear(step)
                if cleared is None:
                    return  # one step at a time: nothing after a waiting step starts
                if not cleared:
                    continue  # it waits for a decision (or one was applied): look again
            refused = self.budget.execution_refused(s.executions, step.id, retry=bool(step.attempts))
            if refused is not None:
                self._ending = ("failed", "step_budget", refused)
                return None
            return self.scheduler.take_peeked()
        return None

    def _may_join(self, step: Step) -> bool:
        """May ``step`` join the batch being formed? Only when nothing is decided about it on joining.

        The batch's earlier calls have no outcome yet, and a plain run decides about
        ``step`` only after them: the budget ending the run, a stored result completing
        it, a person asked to approve it. Decided now, a failure's policy finds them done
        (a skip or replan not applied because the run is already ending, a budget message
        counting calls the failure left unreached, a question asked twice); so the batch
        stops growing, and ``step`` meets those decisions on its own turn.
        """
        return (self.dispatch.batchable(step)
                and not (self.recorder is not None and uses_cache(self.tools[step.tool or ""], self.config.cache))
                and not (self.steering is not None and self.steering.rule.asks(step))
                and self.budget.execution_refused(self.state.executions, step.id, retry=False) is None)

    def _submit_batch(self, first: Step, executor: Any, size: int, limit: int | None) -> None:
        """Start ``first`` and up to ``size - 1`` more ready tool steps as one task on the executor.

        Each step is counted and marked started as it joins (so budgets hold exactly as
        one at a time); the batch holds one lane and runs its calls one after another.
        """
        flights: list[Flight] = []
        step: Step | None = first
        try:
            while step is not None:
                flights.append(self._begin(step, executor))
                if len(flights) >= size or step.id == self._until:
                    break
                step = self._next_ready(limit, batchable=True)
        except KeyboardInterrupt:  # Ctrl-C as steps join: none of them has started
            for flight in flights:
                self._uncount(flight, "")
            raise
        by_id = self.scheduler.by_id
        self.dispatch.start_batch(flights, [{n: by_id[n].result for n in f.step.needs} for f in flights])

    # ------------------------------------------------------------- submitting
    def _from_cache(self, step: Step) -> bool:
        """Complete ``step`` with a stored result of the same call, if the store has one."""
        assert self.recorder is not None
        try:
            args = resolve(step.args, {n: self.scheduler.by_id[n].result for n in step.needs})
        except Exception:  # noqa: BLE001 - the call itself will report it
            return False
        key = self.recorder.cache_key(self.tools[step.tool or ""], args)
        if key is None:
            if self.recorder.uncached:  # the cache was asked for: say why this call does not use it
                step.set_state(notes=f"{UNCACHED_NOTE}{self.recorder.uncached}")
            return False
        hit = self.recorder.cached(key)
        if hit is None:
            self._cache_keys[step.id] = key
            return False
        self.scheduler.take()
        now = self.clock()
        self._unshare(step)
        step.set_state(status=Status.completed, result=hit.result, error=None, traceback=None, output="",
                       notes=f"{CACHED_NOTE}the result of step {hit.step_id} in run {hit.run_id}",
                       started_at=now, finished_at=now)
        self.scheduler.completed(step)
        self.emit("step.cached", step=step.id, from_run=hit.run_id, from_step=hit.step_id, result=summarize(hit.result))
        self._changed(step)
        return True

    def _submit(self, step: Step, executor: Any) -> None:
        """Count the execution, mark the step in progress, record that, then start the call."""
        flight = self._begin(step, executor)
        try:
            by_id = self.scheduler.by_id
            self.dispatch.start(flight, executor, {n: by_id[n].result for n in step.needs})
        except KeyboardInterrupt:  # Ctrl-C inside an inline call: it did not complete
            self._uncount(flight, INTERRUPTED_NOTE)
            raise

    def _begin(self, step: Step, executor: Any) -> Flight:
        """Count the execution, mark the step in progress and record that (the call is not started yet)."""
        s = self.state
        s.__dict__["executions"] += 1  # not through pydantic's __setattr__: this is every execution
        self._unshare(step)
        started = self.clock()
        step.set_state(
            attempts=step.attempts + 1, status=Status.in_progress, error=None, traceback=None, output="",
            started_at=started, finished_at=None,
            **({"notes": ""} if step.notes in (INTERRUPTED_NOTE, STILL_RUNNING_NOTE) else {}),
        )
        flight = Flight(step, s.executions)
        if self._cache_keys:
            flight.cache_key = self._cache_keys.pop(step.id, None)
        self.dispatch.prepare(flight, executor)
        try:
            self.bus.publish("step.started", step.id, started_data(step.attempts, s.executions, executor.name),
                             started)
        except KeyboardInterrupt:  # Ctrl-C in a view as the step starts: it has not started
            self._uncount(flight, "")
            raise
        if self.recorder is not None:
            self.recorder.before_call(step, s)
        return flight

    # -------------------------------------------------------------- collecting
    def _collect(self) -> Step | None:
        """Wait for at least one call to end (redrawing views, enforcing timeouts); record it."""
        done = self.dispatch.wait_for_one()
        self.bus.drain()
        last: Step | None = None
        if len(done) > 1:  # recorded in plan order, whatever order they ended in
            order = self.scheduler.position
            done.sort(key=lambda f: order.get(f.step.id, 0))
        for flight in done:
            self.dispatch.inflight.remove(flight)
            self._record(flight)
            last = flight.step
        if self.dispatch.batching:  # a batch in another lane starts no call a plain run would not
            self.dispatch.halt(self._ending is not None or self._replan_for is not None
                               or self._pause_why is not None)
        return last

    def _record(self, flight: Flight, *, kept: bool = False) -> None:
        """Record a finished call and apply the policy to a failure.

        ``kept``: a call that completed around an interrupt; what it decides (its failure's
        policy, a review, an agent's stop) waits until the run continues.
        """
        s, step = self.state, flight.step
        self.dispatch.ended(flight)
        outcome = self.dispatch.outcome_of(flight)
        if outcome is None:
            # a batch's call after a failure never started: it is simply ready again
            self._uncount(flight, "" if isinstance(flight.future.exception(), NotReached) else INTERRUPTED_NOTE)
            if isinstance(flight.future.exception(), KeyboardInterrupt):
                # the call itself was interrupted (a tool raised it, on any thread or executor): so is the run
                raise KeyboardInterrupt(f"the call of step {step.id!r} raised KeyboardInterrupt")
            return
        # an inline call (no worker) ended just now: its end, read where it ran, is the time
        now = outcome.finished if flight.timed and not outcome.worker and outcome.finished is not None \
            else self.clock()
        if not outcome.ok or outcome.output:  # an echoed secret (a secret arg, a token, the model key) leaves no trace
            self.secrets.scrub(outcome)
        if flight.live is not None:  # what it printed since the last step.output, before its end is told
            self.dispatch.relay.finish(flight.live, outcome.output)  # type: ignore[union-attr]
        # a step's time is its call's, read where it ran: what the run did around it (the views' first
        # draw, a store write, the hand-over to a thread) is not the step's; a kept call ended when it
        # returned, not when the run continued
        began, ended = step.started_at, now
        if outcome.finished is not None and (flight.timed or kept):
            ended = outcome.finished
            if flight.timed and outcome.started is not None:
                began = outcome.started
        if not outcome.ok and outcome.worker.startswith(("planbook-worker", "planbook-async")) \
                and "thread" in (outcome.error or "").lower():
            outcome.error = (f"{outcome.error} (this step ran in a worker thread, as it does while a live view is "
                             "shown or steps run in parallel: register the tool with main_thread=True, or run "
                             "without a view)")
        step.set_state(
            status=Status.completed if outcome.ok else Status.failed,
            result=outcome.result,
            error=outcome.error,
            traceback=outcome.traceback,
            output=outcome.output,
            started_at=began,
            finished_at=ended,
            **({"notes": outcome.notes} if outcome.notes else {"notes": KEPT_NOTE} if kept else {}),
        )
        if step.id in self.secrets.holders:  # it feeds a secret-named argument: its result is a secret
            self.secrets.learn_result(step)
        self._gc.tick()
        if self._gc is _NO_WINDOW:  # a tick outside run() (advance): the caller may edit the plan next
            s.history.append(step.snapshot())
        else:
            # during run() the history holds the step itself until the run changes it again
            # (_unshare): a finished run keeps one object per execution, not two
            self._unshare(step)
            self._shared[id(step)] = len(s.history)
            s.history.append(step)
        if self.recorder is not None:
            self.recorder.changed(step)
            if outcome.ok and flight.cache_key is not None:
                self.recorder.remember(flight.cache_key, step.result, tool=step.tool or "", step_id=step.id)
        s.records.append(Execution(  # positional: this runs once per execution
            flight.execution, step.id, step.attempts, s.plan.revision, outcome.worker or "main",
            outcome.started if outcome.started is not None else step.started_at or now,
            outcome.finished if outcome.finished is not None else now, outcome.ok,
        ))
        if outcome.ok:
            self.scheduler.completed(step)
            finished = finished_data(step.duration, flight.execution,
                                     outcome.summary if outcome.summary is not None else summarize(outcome.result))
            if kept:
                finished["kept"] = True
            self.bus.publish("step.finished", step.id, finished, now)
            if kept or self._ending is not None:
                return
            if outcome.stop is not None:
                planchanges.stop_after(self, step, outcome.stop)
            elif self.after_step is not None:
                planchanges.review(self, step)
            return
        s.last_error = failure_line(step.id, outcome.error)
        s.pending_failures.append(step.id)  # until its policy is applied (Ctrl-C may come first)
        failed = {"duration": step.duration, "error": outcome.error, "execution": flight.execution}
        if kept:
            failed["kept"] = True
        self.bus.publish("step.failed", step.id, failed, now)
        if kept:
            return  # its policy is applied when the run continues
        s.pending_failures.remove(step.id)
        if self._ending is not None:
            return  # the run is ending: running steps only finish
        self._apply_policy(step)
        if self.after_step is not None and not self.finished and self._ending is None \
                and step.status in (Status.failed, Status.skipped) and self._replan_for is None:
            planchanges.review(self, step)

    def _uncount(self, flight: Flight, note: str) -> None:
        """An execution that did not complete did not happen: it runs again."""
        step = flight.step
        if flight.token is not None:
            self.bus.live.discard(flight.token)
        if flight.live is not None:
            self.dispatch.relay.drop(flight.live)  # type: ignore[union-attr]
        self._unshare(step)
        self.state.executions -= 1
        step.set_state(attempts=max(step.attempts - 1, 0), status=Status.not_started, notes=note)
        self.scheduler.again(step)
        self._changed(step)

    # --------------------------------------------------------------- policies
    def _apply_policy(self, step: Step) -> None:
        handle_failure(step, chain_for(step, self.policy), self)

    def retries_used(self, step: Step) -> int:
        return self.state.retries_used.get(step.id, 0)

    def retry(self, step: Step) -> None:
        used = self.state.retries_used[step.id] = self.retries_used(step) + 1
        self._unshare(step)
        step.status = Status.not_started
        step.notes = f"retry {used}/{self.retries} after: {step.error}"
        self.scheduler.again(step)
        self.emit("step.retry", step=step.id, retry=used, of=self.retries, error=step.error)
        self._changed(step)

    def skip(self, step: Step) -> None:
        self._unshare(step)
        step.status = Status.skipped
        step.notes = f"skipped after: {step.error}"
        self.emit("step.skipped", step=step.id, error=step.error)
        self._changed(step)
        self.scheduler.ended_without_result(step)

    def replan(self, step: Step) -> None:
        if self._replan_for is None:
            self._replan_for = step  # after the running steps finish; they are part of what happened
        if not self.dispatch.inflight:
            failed, self._replan_for = self._replan_for, None
            planchanges.replan(self, failed)

    def keep_going(self, step: Step) -> None:
        self._unshare(step)
        step.notes = f"failed; its dependents run anyway (on_failure continue): {step.error}"
        self.scheduler.release(step)
        self._changed(step)

    def abort(self, step: Step) -> None:
        self._ending = ("failed", "aborted", f"step {step.id} failed: {step.error}")
        if not self.dispatch.inflight:
            self._finish(*self._ending)

    def _blocked(self, step: Step, dead: list[str]) -> None:
        self.emit("step.blocked", step=step.id, because=dead)
        self._changed(step)

    def _changed(self, step: Step) -> None:
        if self.recorder is not None:
            self.recorder.changed(step)

    # -------------------------------------------------------------- planning
    def _complete(self) -> None:
        counts = self.plan.counts()
        if counts[Status.completed] == len(self.plan.steps):
            self._finish("completed", "goal_met")
        else:
            undone = [st.id for st in self.plan.steps if st.status is not Status.completed]
            self._finish("completed", "steps_skipped", f"the run reached the end without steps {', '.join(undone)}")

    # ------------------------------------------------------------- interrupts
    def _interrupt(self, why: str = "") -> None:
        """Ctrl-C (or a call that raised KeyboardInterrupt: ``why``): keep every call that completed;
        leave running calls to finish in the background."""
        for flight in list(self.dispatch.inflight):
            if flight.future.done():
                self.dispatch.inflight.remove(flight)
                try:
                    self._record(flight, kept=True)
                except KeyboardInterrupt as exc:  # that call raised it too: it runs again, like the rest
                    why = why or str(exc)
        for flight in self.dispatch.inflight:
            if flight.handle is not None:
                flight.handle.cancel()  # an awaited coroutine stops at its next await
            self._uncount(flight, STILL_RUNNING_NOTE)
            self.dispatch.leftovers.append(flight)
        self.dispatch.inflight = []
        self._ending = None if self.finished else self._ending
        if self.finished:  # Ctrl-C while the end was being reported: the run did end that way
            return
        self._pause_why = None
        s = self.state
        s.status, s.reason, s.error = "interrupted", "interrupted", f"interrupted: {why}" if why else "interrupted by the user"
        self.emit("run.finished", status="interrupted", reason="interrupted", error=s.error,
                  executions=s.executions, replans=s.replans)
        if self.recorder is not None:
            self.recorder.save(s)

    def _settle_leftovers(self) -> None:
        """Before a run continues, wait for calls still running from before the interrupt.

        Waits on each call's own future (never on a thread's ``is_alive``), so a step
        never runs twice at the same time; a call that completed is kept, not run again.
        """
        while self.dispatch.leftovers:
            flight = self.dispatch.leftovers[0]
            if not flight.future.done():
                print(f"planbook: waiting for the interrupted call of step {flight.step.id!r} to return "
                      "(interrupt again to stop waiting)", file=__import__("sys").stderr)
                while not flight.future.done():
                    self.dispatch.wait(0.25)
            self.dispatch.leftovers.pop(0)
            if flight.step.status is not Status.not_started or self.dispatch.outcome_of(flight) is None:
                continue  # interrupted (it runs again), or the step was changed by hand meanwhile
            self.state.executions += 1
            self._unshare(flight.step)
            flight.step.set_state(attempts=flight.step.attempts + 1, notes="")
            self._stale = True
            self._record(flight, kept=True)

    def adopt(self, state: RunState, run_id: str) -> None:
        """Continue a stored run: its state, written on under its id (see planbook.resume)."""
        self.state = state
        self._stale = True
        self._adopted = True
        if self.recorder is not None:
            self.recorder.run_id = run_id

    def release_store(self) -> None:
        """Close a store this runner opened from a path, once its run has ended: not whenever the
        collector gets to it (an open connection keeps the write-ahead log beside the file, and
        one connection a run would pile up in a long session). A store object is the caller's."""
        if self._owns_store and self.recorder is not None:
            self.recorder.store.close()

    def settle(self) -> None:
        """Wait for calls still running from an interrupted run (``--restart`` does this first)."""
        self._settle_leftovers()

    def count_planning(self, events: list[Event]) -> None:
        """Before the run starts: the model calls that planned it (``%%plan`` with a planner) count in its usage."""
        self.state.events[:0] = events


_NO_WINDOW = FreezeWindow(active=False)  # outside run(): advance() keeps nothing frozen


def run(
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
) -> RunResult:
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
    """
    runner = Runner(
        plan, planner=planner, tools=tools, agents=agents, on_failure=on_failure, retries=retries,
        max_steps=max_steps, max_replans=max_replans, step_timeout=step_timeout, parallel=parallel,
        executor=executor, after_step=after_step, store=store, cache=cache, on_event=on_event, clock=clock,
        strategy=strategy, faithful=faithful, approve=approve, approve_timeout=approve_timeout,
    )
    try:
        return runner.run()
    finally:
        runner.release_store()
