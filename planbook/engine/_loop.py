"""The tick loop: begin or continue the run, take in decisions, submit what is ready, collect.

``run()`` ticks until the run ends, pauses or is interrupted; ``advance()`` ticks once. A
tick applies what :mod:`planbook.engine._algo` computes (hold, pause, wait, complete) and
hands each ended call to the recording (:mod:`planbook.engine._outcomes`). Part of
:class:`~planbook.engine.runner.Runner` (a mixin: the loop object of LangGraph's pregel).
"""

from __future__ import annotations

from typing import Any

from ..data.gcwindow import freeze_window
from ..data.lineage import CACHED_NOTE, kept_note
from ..data.models import RunResult, Status, Step, started_data
from ..data.refs import resolve
from ..data.stepmark import StepMark, unmarked
from ..workers.interrupts import checkpoint, interrupt_gate
from . import planchanges
from ._algo import NO_WINDOW, has_run, idle_move, mid_run, paused_after
from ._stop import Stopping
from .calls import stdout_routing, summarize
from .dispatch import Flight
from .persistence import UNCACHED_NOTE, uses_cache


class TickLoop(Stopping):
    """The runner's loop: ``run()``, ``advance()`` and the tick."""

    #: a fork with ``reuse="identical"``: step id -> the parent's (tool, resolved args, result)
    _parent_calls: dict[str, tuple[Any, Any, Any]]

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
            self._gc = NO_WINDOW
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
            control = self.control
            if control.pause_why is None and limit is not None:
                control.pause_after(paused_after(limit, self.state.executions, max_executions))
            if control.pause_why is not None and not self.dispatch.inflight:
                control.pause(control.take_pause() or "")
                return
            self._tick(limit=limit)
            checkpoint()
            if until is not None and control.pause_why is None and not self.finished \
                    and has_run(self.scheduler.by_id.get(until)):
                control.pause_after(f"paused after step {until}")

    # ------------------------------------------------------------- a tick
    def _start(self) -> bool:
        """Begin or continue the run; False when it ended here (no first plan)."""
        s = self.state
        if mid_run(s, self._stale, self._adopted, self.goal_only):
            return True  # a tick in the middle of a run: nothing to begin
        resumed = s.status in ("paused", "interrupted")
        if resumed:
            self._settle_leftovers()
            self.control.going_on()
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
                # who planned it, for `planbook runs` (runs that differ in it say so); a resume reads only the options
                config["planner"] = type(self.planner).__name__ if self.planner is not None else None
                model = getattr(self.planner, "model", None)  # a model-backed planner names its model (LLMPlanner)
                config["model"] = model if isinstance(model, str) else None
                if self.steering is not None and self.steering.rule.stored() is not None:
                    config["approve"] = self.steering.rule.stored()  # a resume asks about the same steps
                self.recorder.begin(s, config, self.run_id)
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
        s, control = self.state, self.control
        if self.finished or not self._start():
            return None
        if self.door is not None:
            self.door.apply_inbox()
        if self.dispatch.batching:
            self.dispatch.halt(control.holding)
        if s.pending_failures:  # a failure's policy was interrupted: apply it first
            pending, s.pending_failures = list(s.pending_failures), []
            for step_id in pending:
                failed = self.scheduler.by_id.get(step_id)
                if failed is not None and failed.status is Status.failed and not self.finished:
                    self._apply_policy(failed)
            return None
        if control.replan_for is not None and not self.dispatch.inflight:
            failed = control.take_replan()
            assert failed is not None
            planchanges.replan(self, failed)
            return None
        if control.end_if_due():
            return None
        self._submit_ready(limit)
        if not self.dispatch.inflight:
            move = idle_move(control.ending, self.door is not None and bool(self.door.steering.waiting),
                             control.replan_for, control.pause_why)
            if move == "finish":
                control.end_if_due()
            elif move == "wait":
                self.door.wait()  # type: ignore[union-attr]  # a decision, a pause, a stop or a deadline wakes it
            elif move == "complete":
                control.complete()
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
        while not self.control.holding \
                and (limit is None or s.executions < limit):
            step = self.scheduler.peek()
            if step is None or (batchable and not self._may_join(step)):
                return None
            if self._parent_calls and step.id in self._parent_calls and self._from_parent(step):
                continue
            if self.recorder is not None and step.tool is not None and self._from_cache(step):
                continue
            if self.door is not None:
                cleared = self.door.clear(step)
                if cleared is None:
                    return None  # one step at a time: nothing after a waiting step starts
                if not cleared:
                    continue  # it waits for a decision (or one was applied): look again
            refused = self.budget.execution_refused(s.executions, step.id, retry=bool(step.attempts))
            if refused is not None:
                self.control.end_later("failed", "step_budget", refused)
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
                self._uncount(flight, None)
            raise
        by_id = self.scheduler.by_id
        self.dispatch.start_batch(flights, [{n: by_id[n].result for n in f.step.needs} for f in flights])

    # ------------------------------------------------------------- submitting
    def _from_cache(self, step: Step) -> bool:
        """Complete ``step`` with a stored result of the same call, if the store has one."""
        assert self.recorder is not None
        tool = self.tools[step.tool or ""]
        if not uses_cache(tool, self.config.cache):  # the cache is off for this call: nothing to resolve or ask
            return False
        try:
            args = resolve(step.args, {n: self.scheduler.by_id[n].result for n in step.needs})
        except Exception:  # noqa: BLE001 - the call itself will report it
            return False
        key = self.recorder.cache_key(tool, args)
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
                       mark=StepMark.cached, from_run=hit.run_id, from_step=hit.step_id,
                       started_at=now, finished_at=now)
        self.scheduler.completed(step)
        self.emit("step.cached", step=step.id, from_run=hit.run_id, from_step=hit.step_id, result=summarize(hit.result))
        self.control.changed(step)
        return True

    def _from_parent(self, step: Step) -> bool:
        """A fork with ``reuse="identical"``: keep the parent's result of ``step`` when its call,
        resolved now, is the parent's call (same tool, the same arguments, type for type)."""
        tool, old_args, old_result = self._parent_calls.pop(step.id)
        if step.tool != tool:
            return False
        try:
            args = resolve(step.args, {n: self.scheduler.by_id[n].result for n in step.needs})
        except Exception:  # noqa: BLE001 - the call itself will report it
            return False
        if not same_call(args, old_args):
            return False
        parent = (self.state.lineage or {}).get("parent", "?")
        self.scheduler.take()
        now = self.clock()
        self._unshare(step)
        step.set_state(status=Status.completed, result=old_result, error=None, traceback=None, output="",
                       notes=f"{kept_note(parent, step)} (its call, resolved, was the parent's: reuse='identical')",
                       mark=StepMark.kept, from_run=parent, from_step=step.id,
                       started_at=now, finished_at=now)
        self.scheduler.completed(step)
        self.emit("step.cached", step=step.id, from_run=parent, from_step=step.id, kept=True,
                  result=summarize(old_result))
        self.control.changed(step)
        return True

    def _submit(self, step: Step, executor: Any) -> None:
        """Count the execution, mark the step in progress, record that, then start the call."""
        flight = self._begin(step, executor)
        try:
            by_id = self.scheduler.by_id
            self.dispatch.start(flight, executor, {n: by_id[n].result for n in step.needs})
        except KeyboardInterrupt:  # Ctrl-C inside an inline call: it did not complete
            self._uncount(flight, StepMark.interrupted)
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
            **unmarked(step.mark),  # it runs: a mark (and an interrupt's note) no longer holds
        )
        flight = Flight(step, s.executions)
        if self._cache_keys:
            flight.cache_key = self._cache_keys.pop(step.id, None)
        self.dispatch.prepare(flight, executor)
        try:
            self.bus.publish("step.started", step.id, started_data(step.attempts, s.executions, executor.name),
                             started)
        except KeyboardInterrupt:  # Ctrl-C in a view as the step starts: it has not started
            self._uncount(flight, None)
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
            self.dispatch.halt(self.control.holding)
        return last


def same_call(a: Any, b: Any) -> bool:
    """Equal, type for type (``1``, ``1.0`` and ``True`` are three calls), at any depth."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_call(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_call(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object that cannot be compared is not the same call
        return False
