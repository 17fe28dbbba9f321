"""The runner: the plan-execute state machine (EXEC → NEXT/REPLAN → DONE/FAILED).

Its state is explicit and serialisable (:class:`RunState`: a plan, counters, history,
revisions, events), and it advances one execution per :meth:`Runner.advance`, so a
notebook can step through a plan, stop at a step, be interrupted and continue — and a
store or a parallel scheduler can take over the same state later.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .agents import AgentContext, AgentsLike, as_agents
from .diff import diff_plans
from .errors import PlanError, PlanningError, Problem
from .execute import Outcome, execute, stdout_routing
from .stepthreads import StepThreads
from .models import (
    Event,
    EventKind,
    Plan,
    PlanDiff,
    PolicyName,
    RunReason,
    RunResult,
    RunStatus,
    Status,
    Step,
    Usage,
)
from .planners import Planner, PlanningContext, make_plan, planner_steps, tell_planner
from .policies import normalise_policy
from .spec import is_plan_spec, slug
from .textview import format_plan
from .tools import ToolsLike, as_toolbox
from .validate import check_replacement, plan_problems, validate_plan

EventHandler = Callable[[Event], None]
INTERRUPTED_NOTE = "interrupted; it runs again when the run continues"


class RunState(BaseModel):
    """Everything a run knows; enough to show it, store it or continue it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    plan: Plan
    status: RunStatus = "running"
    reason: RunReason | None = None
    error: str | None = None
    executions: int = 0
    replans: int = 0
    retries_used: dict[str, int] = Field(default_factory=dict)
    last_error: str | None = None
    history: list[Step] = Field(default_factory=list)
    revisions: list[PlanDiff] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    started: bool = False
    #: id of a failed step whose failure policy was interrupted (Ctrl-C in a view or the
    #: planner): the policy is applied when the run continues, never silently dropped
    pending_failure: str | None = None
    #: traceback of the exception that ended the run (a planner that raised), for debugging
    traceback: str | None = None


class Runner(StepThreads):
    """Executes a plan step by step under a failure policy and budgets.

    ``plan`` is a :class:`Plan`, a spec string, or — with a ``planner`` — a goal in
    words. An invalid plan raises :class:`PlanError` here, before anything runs.
    """

    def __init__(
        self,
        plan: Plan | str,
        *,
        planner: Planner | None = None,
        tools: ToolsLike = None,
        agents: AgentsLike = None,
        on_failure: str | Sequence[str] | None = None,
        retries: int | None = None,
        max_steps: int = 12,
        max_replans: int = 5,
        step_timeout: float | None = None,
        on_event: EventHandler | Iterable[EventHandler] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (("max_steps", max_steps), ("max_replans", max_replans), ("retries", retries or 0)):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        if step_timeout is not None and step_timeout <= 0:
            raise ValueError(f"step_timeout must be a positive number of seconds, got {step_timeout!r}")
        self.planner = planner
        self.tools = as_toolbox(tools)
        self.agents = as_agents(agents)
        self.policy = normalise_policy(on_failure, has_planner=planner is not None)
        if retries == 0 and "retry" in self.policy:
            raise ValueError("on_failure includes 'retry' but retries=0, so nothing would be retried: "
                             "pass retries=N (N >= 1), or leave retries out for one retry")
        #: extra attempts per step for the retry policy (one when not given)
        self.retries = 1 if retries is None else retries
        self.max_steps = max_steps
        self.max_replans = max_replans
        self.step_timeout = step_timeout
        self.clock = clock
        self.handlers: list[EventHandler] = []
        if callable(on_event):
            self.handlers.append(on_event)
        elif on_event is not None:
            self.handlers.extend(on_event)

        self.goal_only: str | None = None
        if isinstance(plan, Plan):
            # a plan run again starts clean: only completed steps keep their run state
            initial = plan.copy_plan(fresh=True)
        elif isinstance(plan, str) and planner is not None and not is_plan_spec(plan):
            self.goal_only = plan.strip()
            initial = Plan(id=slug(plan) or "plan", goal=plan.strip(), steps=[], revision=0)
        elif isinstance(plan, str):
            initial = Plan.parse(plan)
        else:
            raise TypeError(f"run() takes a Plan, a plan spec or (with a planner) a goal; got {type(plan).__name__}")
        if self.goal_only is None:
            validate_plan(initial, self.tools, self.agents)
            if planner is None:
                replanning = [st.id for st in initial.steps if st.on_failure == "replan"]
                if replanning:
                    raise PlanError([
                        Problem("on_failure 'replan' needs a planner: pass planner=... or choose abort, skip or retry",
                                step=sid, code="bad_policy", line=initial.line_of(sid))
                        for sid in replanning
                    ])
        pinned = sorted({st.tool for st in initial.steps if st.tool and self.tools[st.tool].main_thread})
        if step_timeout is not None and pinned:
            raise ValueError(f"step_timeout cannot stop tools that run on the main thread ({', '.join(pinned)}): "
                             "drop main_thread=True from them or run without a timeout")
        if retries and "retry" not in self.policy and not any(st.on_failure == "retry" for st in initial.steps):
            raise ValueError(f"retries={retries} only applies to the retry policy, and on_failure is "
                             f"{list(self.policy)}: add 'retry' (e.g. on_failure=['retry', '{self.policy[-1]}'])")
        self.state = RunState(plan=initial)
        self._index_key: tuple[int, int] | None = None
        self._index_dirty = True
        self._by_id: dict[str, Step] = {}
        self._pending: list[Step] = []
        self._init_step_threads()

    # ----------------------------------------------------------------- events
    def subscribe(self, handler: EventHandler) -> None:
        """Call ``handler(event)`` for every event from now on (views use this)."""
        self.handlers.append(handler)

    def unsubscribe(self, handler: EventHandler) -> None:
        """Stop calling ``handler`` (a view that is closed or replaced). Unknown handlers are ignored."""
        if handler in self.handlers:
            self.handlers.remove(handler)

    def emit(self, kind: EventKind, step: str | None = None, **data: Any) -> Event:
        event = Event(kind=kind, time=self.clock(), step=step, revision=self.state.plan.revision, data=data)
        self.state.events.append(event)
        for handler in list(self.handlers):
            try:
                handler(event)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # a broken view must not lose the run; say so once
                warnings.warn(f"event handler {handler!r} failed on {kind}: {exc!r}; it is removed", stacklevel=2)
                self.handlers.remove(handler)
        return event

    # ------------------------------------------------------------------ state
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
        self.state.status, self.state.reason, self.state.error = status, reason, error
        if exc is not None:
            import traceback

            self.state.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.emit("run.finished", status=status, reason=reason, error=error, executions=self.state.executions,
                  replans=self.state.replans)

    def result(self) -> RunResult:
        """A snapshot of the run so far (the runner may go on after a pause)."""
        s = self.state
        usage = Usage.from_events(s.events)
        # a finished run's plan no longer changes: share it; a paused one goes on, so copy it
        plan = s.plan if self.finished else s.plan.copy_plan()
        # model_construct: this data was validated on the way in; re-validating thousands
        # of steps and events on every snapshot would dominate the cost of long runs
        return RunResult.model_construct(
            status=s.status,
            reason=s.reason,
            plan=plan,
            history=list(s.history),
            revisions=list(s.revisions),
            events=list(s.events),
            outputs={st.id: st.result for st in plan.steps if st.status is Status.completed},
            error=s.error,
            traceback=s.traceback,
            executions=s.executions,
            replans=s.replans,
            max_steps=self.max_steps,
            max_replans=self.max_replans,
            usage=usage,
        )

    # -------------------------------------------------------------- running
    def run(self, *, until: str | None = None, max_executions: int | None = None) -> RunResult:
        """Advance until the run ends, step ``until`` has run, or ``max_executions`` were made."""
        if until is not None and self.plan.steps:
            self.plan.step(until)  # KeyError names the known ids
        done_before = self.state.executions
        try:
            with stdout_routing():
                self._loop(until, max_executions, done_before)
        except KeyboardInterrupt:
            self._interrupt()
        return self.result()

    def _loop(self, until: str | None, max_executions: int | None, done_before: int) -> None:
        """Advance until finished, paused by ``until`` or by ``max_executions``."""
        while not self.finished:
            if max_executions is not None and self.state.executions - done_before >= max_executions:
                self._pause(f"paused after {max_executions} execution(s)")
                break
            self.advance()
            if until is not None and not self.finished:
                self._next_step()  # blocks the dependents of a skipped step now, so `until` sees it
            if until is not None and not self.finished and self._has_run(until):
                self._pause(f"paused after step {until}")
                break

    def _has_run(self, step_id: str) -> bool:
        """Step ``step_id`` is done for ``until``: it ran (whatever the outcome) or was blocked."""
        step = next((st for st in self.plan.steps if st.id == step_id), None)
        return step is not None and step.status in (Status.completed, Status.skipped, Status.failed, Status.blocked)

    def _pause(self, why: str) -> None:
        if self.state.pending_failure is None and self._next_step() is None:
            self._complete()  # nothing is left to run: the run is over, not paused
            return
        self.state.status, self.state.reason = "paused", "paused"
        self.emit("run.paused", why=why)

    def _interrupt(self) -> None:
        if self.finished:  # Ctrl-C while the end was being reported: the run did end that way
            return
        for step in self.plan.steps:
            if step.status is Status.in_progress:  # it did not finish: it runs again on continue
                step.status = Status.not_started
                step.notes = INTERRUPTED_NOTE
        self._index_dirty = True
        self.state.status, self.state.reason, self.state.error = "interrupted", "interrupted", "interrupted by the user"
        self.emit("run.finished", status="interrupted", reason="interrupted", error=self.state.error,
                  executions=self.state.executions, replans=self.state.replans)

    def advance(self) -> Step | None:
        """One tick: plan if needed, then execute the next ready step and apply the policy.

        Returns the step that was executed (None when the tick only planned or finished).
        """
        s = self.state
        if self.finished:
            return None
        if s.status in ("paused", "interrupted"):
            self._wait_for_interrupted()
            s.status, s.reason, s.error = "running", None, None
            self.emit("run.started", resumed=True)
        if not s.started:
            s.started = True
            self.emit("run.started", resumed=False, max_steps=self.max_steps, max_replans=self.max_replans)
            if self.goal_only is None:
                self.emit("plan.created", plan=format_plan(s.plan), steps=[st.id for st in s.plan.steps])
        if self.goal_only is not None and s.plan.revision == 0:  # no first plan yet (or it was interrupted)
            if not self._first_plan():
                return None
            self.emit("plan.created", plan=format_plan(s.plan), steps=[st.id for st in s.plan.steps])
        if s.pending_failure is not None:  # a failure's policy was interrupted: apply it first
            failed = next((st for st in s.plan.steps if st.id == s.pending_failure), None)
            if failed is not None and failed.status is Status.failed:
                self._on_failure(failed)
            s.pending_failure = None
            return None
        step = self._next_step()
        if step is None and not self._index_dirty:
            # before ending, look again from scratch: a step may have been reset by hand
            # (``runner.plan.step(id).status = "not_started"``) while the run was paused
            self._index_dirty = True
            step = self._next_step()
        if step is None:
            self._complete()
            return None
        if s.executions >= self.max_steps:
            self._finish(
                "failed", "step_budget",
                f"step budget used up: {s.executions} of max_steps={self.max_steps} executions made; "
                f"{'the retry of ' if step.attempts else ''}step {step.id!r} and what follows did not run "
                "(raise max_steps to allow more)",
            )
            return None
        self._execute(step)
        return step

    def _first_plan(self) -> bool:
        assert self.planner is not None and self.goal_only is not None
        try:
            plan = make_plan(
                self.goal_only, self.planner, tools=self.tools, agents=self.agents, plan_id=self.plan.id,
                emit=lambda kind, **data: self.emit(kind, **data),
            )
        except (PlanningError, PlanError) as exc:
            self._finish("failed", "no_plan", f"the planner could not make a plan: {exc}")
            return False
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            self._finish("failed", "no_plan", f"the planner raised {type(exc).__name__}: {exc}", exc)
            return False
        self.state.plan = plan
        return True

    def _next_step(self) -> Step | None:
        """The first not-started step whose needs are all completed; blocks steps that cannot run.

        Keeps an index of pending steps so a long linear plan costs O(needs) per step,
        not O(plan): the index is rebuilt whenever the plan or a status changes outside
        the normal forward flow (replan, retry, interrupt, resume).
        """
        plan = self.plan
        if self._index_key != (id(plan), plan.revision) or self._index_dirty:
            self._by_id = {st.id: st for st in plan.steps}
            self._pending = [st for st in plan.steps if st.status is Status.not_started]
            self._index_key, self._index_dirty = (id(plan), plan.revision), False
        by_id = self._by_id
        while self._pending and self._pending[0].status is not Status.not_started:
            self._pending.pop(0)
        blocked_any = True
        while blocked_any:  # blocking one step may block its dependents
            blocked_any = False
            for st in self._pending:
                if st.status is not Status.not_started:
                    continue
                needs = [by_id[n] for n in st.needs]
                dead = [n.id for n in needs if n.status in (Status.failed, Status.skipped, Status.blocked)]
                if dead:
                    st.status = Status.blocked
                    st.notes = f"blocked: needs {', '.join(dead)}, which did not complete"
                    self.emit("step.blocked", step=st.id, because=dead)
                    blocked_any = True
                elif all(n.status is Status.completed for n in needs) and not blocked_any:
                    return st
        return None

    def _complete(self) -> None:
        counts = self.plan.counts()
        if counts[Status.completed] == len(self.plan.steps):
            self._finish("completed", "goal_met")
        else:
            undone = [st.id for st in self.plan.steps if st.status is not Status.completed]
            self._finish("completed", "steps_skipped", f"the run reached the end without steps {', '.join(undone)}")

    def _agent_context(self, step: Step, token: object) -> AgentContext:
        return AgentContext(
            goal=self.plan.goal,
            plan_text=format_plan(self.plan),
            step=step.snapshot(),
            needs={n: self._by_id[n].result for n in step.needs},
            emit=self._step_emitter(step, token),
        )

    def _execute(self, step: Step) -> None:
        s = self.state
        s.executions += 1
        step.set_state(
            attempts=step.attempts + 1, status=Status.in_progress, error=None, traceback=None,
            started_at=self.clock(), finished_at=None,
            **({"notes": ""} if step.notes == INTERRUPTED_NOTE else {}),  # it runs again now: the note is done
        )
        try:
            self.emit("step.started", step=step.id, attempt=step.attempts, execution=s.executions)
            results = {n: self._by_id[n].result for n in step.needs}
            token = self._live_execution = object()
            self._runner_thread = threading.get_ident()
            pinned = self._pinned(step)
            off_thread = not pinned and (bool(self._heartbeats) or self.step_timeout is not None)
            if pinned and self.step_timeout is not None:
                outcome = Outcome(ok=False, error=f"step {step.id!r} uses {pinned}, which runs on the main thread, "
                                  "so step_timeout cannot stop it: drop main_thread=True or the timeout")
            else:
                outcome = execute(
                    step,
                    results=results,
                    tools=self.tools,
                    agents=self.agents,
                    context=lambda: self._agent_context(step, token),
                    timeout=None if pinned else self.step_timeout,
                    heartbeat=self._tick if off_thread else None,
                    heartbeat_interval=self._heartbeat_interval if off_thread else 0.1,
                    interrupted=self._interrupted_workers,
                )
            if off_thread and not outcome.ok and "thread" in (outcome.error or "").lower():
                outcome.error = (f"{outcome.error} (this step ran in a worker thread while a live view was shown: "
                                 "register the tool with main_thread=True, or run without a view)")
            self._drain()
        except KeyboardInterrupt:
            s.executions -= 1
            step.set_state(attempts=step.attempts - 1)
            raise
        finally:
            self._live_execution = None
        self._record(step, outcome, finished_at=self.clock())
        s.history.append(step.snapshot())
        if outcome.ok:
            self.emit("step.finished", step=step.id, duration=step.duration, result=_short(step.result))
        else:
            s.last_error = f"step {step.id} failed: {outcome.error}"
            s.pending_failure = step.id  # until the policy has been applied (Ctrl-C may land in a view)
            self.emit("step.failed", step=step.id, duration=step.duration, error=outcome.error)
            self._on_failure(step)
            s.pending_failure = None

    @staticmethod
    def _record(step: Step, outcome: Outcome, *, finished_at: float) -> None:
        step.set_state(
            status=Status.completed if outcome.ok else Status.failed,
            result=outcome.result,
            error=outcome.error,
            traceback=outcome.traceback,
            output=outcome.output,
            finished_at=finished_at,
            **({"notes": outcome.notes} if outcome.notes else {}),
        )

    def _policy_for(self, step: Step) -> tuple[PolicyName, ...]:
        if step.on_failure is None:
            return self.policy
        if step.on_failure == "retry":
            rest: tuple[PolicyName, ...] = tuple(p for p in self.policy if p != "retry")
            return ("retry", *rest)
        return (step.on_failure,)

    def _on_failure(self, step: Step) -> None:
        s = self.state
        for policy in self._policy_for(step):
            if policy == "retry":
                used = s.retries_used.get(step.id, 0)
                if used < self.retries:
                    s.retries_used[step.id] = used + 1
                    step.status = Status.not_started
                    self._index_dirty = True
                    step.notes = f"retry {used + 1}/{self.retries} after: {step.error}"
                    self.emit("step.retry", step=step.id, retry=used + 1, of=self.retries, error=step.error)
                    return
                continue
            if policy == "skip":
                step.status = Status.skipped
                step.notes = f"skipped after: {step.error}"
                self.emit("step.skipped", step=step.id, error=step.error)
                return
            if policy == "replan":
                self._replan(step)
                return
            break  # abort
        self._finish("failed", "aborted", f"step {step.id} failed: {step.error}")

    def _replan(self, failed: Step) -> None:
        s = self.state
        assert self.planner is not None
        if s.executions >= self.max_steps:  # a new plan could not run a single step: do not ask for one
            self._finish(
                "failed", "step_budget",
                f"step budget used up: {s.executions} of max_steps={self.max_steps} executions made; "
                f"no replan after: {s.last_error} (raise max_steps to allow more)",
            )
            return
        if s.replans >= self.max_replans:
            self._finish(
                "failed", "replan_budget",
                f"replan budget used up: {s.replans} of max_replans={self.max_replans} replans made; "
                f"last error: {s.last_error}",
            )
            return
        kept = [st for st in self.plan.steps if st.status in (Status.completed, Status.skipped)]
        context = PlanningContext(
            tools=self.tools,
            agents=self.agents,
            plan=self.plan.copy_plan(),
            kept_ids=[st.id for st in kept],
            validate=lambda steps: self._replacement_problems(kept, steps),
            emit=lambda kind, **data: self.emit(kind, **data),  # type: ignore[arg-type]
        )
        tell_planner(self.planner, context)
        s.replans += 1
        try:
            self._tick()  # views draw the failure before a (possibly slow) planner runs
            proposed = planner_steps(self.planner(self.plan.goal, list(s.history), s.last_error))
        except KeyboardInterrupt:
            s.replans -= 1  # the replan did not happen; the failure is handled again on continue
            raise
        except (PlanningError, PlanError) as exc:
            self._finish("failed", "no_plan", f"replanning after step {failed.id} failed: {exc}")
            return
        except Exception as exc:
            self._finish("failed", "no_plan", f"the planner raised {type(exc).__name__}: {exc}", exc)
            return
        new_steps, problems = check_replacement(kept, proposed)
        if not proposed or (not new_steps and not problems):
            self._finish("failed", "no_plan", f"the planner had no new plan after: {s.last_error}")
            return
        candidate = Plan(
            id=self.plan.id, goal=self.plan.goal, title=self.plan.title,
            steps=kept + new_steps,
            revision=self.plan.revision + 1,
        )
        problems += plan_problems(candidate, self.tools, self.agents)
        if problems:
            self._finish("failed", "no_plan", str(PlanError(problems)).replace("invalid plan", "the planner's new plan is invalid", 1))
            return
        diff = diff_plans(self.plan, candidate, reason=s.last_error)
        s.plan = candidate
        for step in new_steps:  # a step the planner (re)proposed is new work with its own retries
            s.retries_used.pop(step.id, None)
        s.revisions.append(diff)
        self.emit("plan.diff", removed=diff.removed, added=diff.added, revised=diff.revised,
                  from_revision=diff.from_revision, to_revision=diff.to_revision, reason=diff.reason)
        self.emit("plan.created", plan=format_plan(candidate), steps=[st.id for st in candidate.steps])

    def _replacement_problems(self, kept: list[Step], steps: list[Step]) -> list[Problem]:
        new_steps, problems = check_replacement(kept, steps)
        candidate = Plan(id=self.plan.id, goal=self.plan.goal, steps=list(kept) + new_steps)
        return problems + plan_problems(candidate, self.tools, self.agents)


def _short(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a result whose repr is broken is still a result
        text = f"<{type(value).__name__} (repr failed: {type(exc).__name__})>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run(
    plan: Plan | str,
    *,
    planner: Planner | None = None,
    tools: ToolsLike = None,
    agents: AgentsLike = None,
    on_failure: str | Sequence[str] | None = None,
    retries: int | None = None,
    max_steps: int = 12,
    max_replans: int = 5,
    step_timeout: float | None = None,
    on_event: EventHandler | Iterable[EventHandler] | None = None,
    clock: Callable[[], float] = time.time,
) -> RunResult:
    """Run a plan (or a goal, with a planner) to the end and return the :class:`RunResult`.

    Raises :class:`PlanError` if the plan is invalid (nothing runs); every other
    outcome — failures, budgets, interrupts — is in the result.
    """
    runner = Runner(
        plan, planner=planner, tools=tools, agents=agents, on_failure=on_failure, retries=retries,
        max_steps=max_steps, max_replans=max_replans, step_timeout=step_timeout, on_event=on_event, clock=clock,
    )
    return runner.run()

