"""Where each step's call runs, and what is in flight: the runner's "submit" and "collect".

The runner decides *what* runs (the ready steps, the budget, the policies); the
:class:`Dispatcher` decides *where* (this thread, planbook's worker threads, or a given
``concurrent.futures.Executor``), starts the call, waits for calls to end while views
redraw, and gives up on calls past their timeout. It knows nothing of policies,
budgets or the store.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..data.models import Plan, Step
from ..workers.agents import AgentContext
from ..workers.interrupts import waiting
from .calls import CallHandle, CallInterrupted, Outcome, call_inline, call_step, describe_exception, prepare_tool_call
from .config import RunConfig
from .eventbus import EventBus
from .executors import HALTED, Call, FuturesExecutor, InlineExecutor, NotReached, StepAbandoned, ThreadPool
from .liveoutput import LiveOutput, OutputRelay

#: a tool call shorter than this runs on the runner's thread even while a view is shown
FAST_CALL = 0.02
#: a tool whose last call on an executor took this long is sent one call per task: a
#: cluster's round trip (milliseconds) is then a small share, and batching it would only
#: delay when the run learns of each result
SLOW_CALL = 0.1
#: the most calls handed to an executor as one task
BATCH_MAX = 64
#: how often (s) a wait with calls on a given executor asks whether it can still run them
HEALTH_EVERY = 1.0
#: how long (s) a cluster may have no worker before the calls it holds fail: an adaptive
#: cluster starts workers when work arrives, so a short gap is not a death
NO_WORKER_GRACE = 30.0

INLINE = InlineExecutor()


class Flight:
    """A submitted call the runner has not recorded yet."""

    __slots__ = ("step", "execution", "future", "token", "handle", "deadline", "began", "cache_key", "lane", "live",
                 "timed")

    def __init__(self, step: Step, execution: int) -> None:
        self.step, self.execution = step, execution
        self.future: Any = None
        #: events of the call count while its token is live (agents emit; tools do not)
        self.token: object | None = None
        #: cancels an awaited coroutine (calls on worker threads)
        self.handle: CallHandle | None = None
        self.deadline: float | None = None
        self.began = time.perf_counter()
        #: the step cache's key for this call: its result is cached when it succeeds
        self.cache_key: str | None = None
        #: whether this call holds a lane of ``parallel`` (False: a later call of a batch,
        #: which runs after the first, on the same lane)
        self.lane = True
        #: what the call has printed so far, read while it runs on another thread (planbook.engine.liveoutput)
        self.live: LiveOutput | None = None
        #: the outcome's started/finished are the run's clock read around the call itself: they are
        #: the step's time (not a cluster's clock, and not what the run did around the call)
        self.timed = False


class Dispatcher:
    """Starts calls on the right executor and hands back the ones that ended."""

    def __init__(self, config: RunConfig, tools: Mapping[str, Any], agents: Mapping[str, Any], bus: EventBus,
                 clock: Callable[[], float], plan: Callable[[], Plan]) -> None:
        self.config, self.tools, self.agents, self.bus, self.clock = config, tools, agents, bus, clock
        self._plan = plan
        self.inflight: list[Flight] = []
        #: calls still running in worker threads when the run was interrupted (kept if they complete)
        self.leftovers: list[Flight] = []
        #: executors put each call here when it ends: the runner's thread waits on this one queue
        self.completions: queue.SimpleQueue[Call] = queue.SimpleQueue()
        self.pool: ThreadPool | None = None
        #: tools whose last call took under FAST_CALL seconds (run inline even with a view)
        self.fast_tools: dict[str, bool] = {}
        #: a decision arrived from another thread (planbook.engine.steering): stop waiting for calls
        self.nudged = False
        #: tools whose last call on the executor took SLOW_CALL seconds or more (never batched)
        self.slow_tools: set[str] = set()
        self._futures = FuturesExecutor(config.executor) if config.executor is not None else None
        #: batches are possible: tool calls go to a given executor and no timeout applies to each call
        self.batching = self._futures is not None and config.step_timeout is None
        self._next_health = 0.0
        self._unhealthy_since: float | None = None
        #: announces what calls on worker threads print while they run (the runner sets it)
        self.relay: OutputRelay | None = None

    # ---------------------------------------------------------------- where
    def executor_for(self, step: Step) -> Any:
        """Where this step's call runs.

        Pinned steps, and plain serial runs with no view, run on this thread. A given
        executor runs tool calls; agent steps, which report events to the run as they
        work, stay on planbook's worker threads. With a view attached, a step runs on a
        worker so the view can redraw while it works — except a tool whose last call
        took under :data:`FAST_CALL` seconds: handing a call to another thread costs
        about as much CPU as a fast step itself, and the view cannot miss a redraw
        during a call that short.
        """
        config = self.config
        if self.pinned(step):
            return INLINE
        if self._futures is not None and step.tool is not None:
            return self._futures
        threads = config.parallel > 1 or config.executor is not None or config.step_timeout is not None
        if not threads and self.bus.heartbeats:
            threads = step.tool is None or not self.fast_tools.get(step.tool, False)
        if not threads:
            return INLINE
        if self.pool is None:
            self.pool = ThreadPool()
        return self.pool

    def pinned(self, step: Step) -> str:
        """What ties this step to the runner's thread ('' if nothing): a ``main_thread`` tool,
        used directly or by the step's agent."""
        if step.tool is not None:
            return f"tool {step.tool!r}" if self.tools[step.tool].main_thread else ""
        agent = self.agents.get(step.agent or "")
        if getattr(agent, "main_thread", False):
            return f"agent {step.agent!r}"
        tools = getattr(agent, "tools", None)
        if isinstance(tools, dict) or hasattr(tools, "items"):
            try:
                for name, tool in tools.items():  # type: ignore[union-attr]
                    if getattr(tool, "main_thread", False):
                        return f"agent {step.agent!r} (its tool {name!r})"
            except Exception:  # noqa: BLE001 - an agent's odd tools attribute is not ours to judge
                return ""
        return ""

    def lanes(self) -> int:
        """How many of the ``parallel`` lanes are busy: a batch holds one lane, whatever its size."""
        if not self.batching:
            return len(self.inflight)
        return sum(1 for f in self.inflight if f.lane)

    def batch_size(self, step: Step, executor: Any, ready: int, free: int) -> int:
        """How many ready steps to hand over with ``step`` as one task (1: on its own).

        Ready steps are shared evenly among the free lanes, so a wave of small calls costs
        a cluster one round trip per lane instead of one per call.
        """
        if executor is not self._futures or not self.batching or step.tool in self.slow_tools or free < 1:
            return 1
        return max(1, min(BATCH_MAX, -(-ready // free)))

    def batchable(self, step: Step) -> bool:
        """``step`` may join a batch: a tool call on the given executor, not known to be slow."""
        return step.tool is not None and step.tool not in self.slow_tools and not self.pinned(step)

    # ---------------------------------------------------------------- start
    def prepare(self, flight: Flight, executor: Any) -> None:
        """Give the flight what its executor needs: a cancel handle, an events token, a deadline."""
        if executor is not INLINE:
            flight.handle = CallHandle()
            if self.config.step_timeout is not None:
                flight.deadline = time.monotonic() + self.config.step_timeout
            if self.relay is not None and executor is not self._futures:  # a thread here: readable as it prints
                flight.live = self.relay.buffer(flight.step)
        if flight.step.agent is not None:
            flight.token = object()
            self.bus.live.add(flight.token)

    def start(self, flight: Flight, executor: Any, results: dict[str, Any]) -> None:
        """Start the call (an inline call runs to its end here; Ctrl-C inside it propagates)."""
        step = flight.step
        pinned = self.pinned(step) if self.config.step_timeout is not None else ""
        if pinned:
            flight.future = Call.done_with(Outcome(
                ok=False, error=f"step {step.id!r} uses {pinned}, which runs on the main thread, so step_timeout "
                "cannot stop it: drop main_thread=True or the timeout"))
            self.inflight.append(flight)
            return
        work: Callable[[], Outcome]
        if isinstance(executor, FuturesExecutor):
            prepared = prepare_tool_call(step, results, self.tools)
            if isinstance(prepared, Outcome):
                flight.future = Call.done_with(prepared)
                self.inflight.append(flight)
                return
            work = prepared
        elif executor is INLINE:
            self.inflight.append(flight)
            context = self._context_maker(step, flight.token, results) if step.agent is not None else _no_context
            clock = self.clock
            try:  # called here, not wrapped for an executor: this is every step of a plain run
                started = clock()
                outcome = call_inline(step, results, self.tools, self.agents, context, None)
                outcome.started, outcome.finished = started, clock()
            except KeyboardInterrupt:  # Ctrl-C inside the call: it did not complete
                self.inflight.remove(flight)
                raise
            flight.future, flight.timed = Call.done_with(outcome), True
            return
        else:
            work = self._work(flight, results, self.clock)
            flight.timed = True
        self.inflight.append(flight)
        try:
            flight.future = executor.submit(work, self.completions)
        except Exception as exc:  # noqa: BLE001 - the executor refused the call (a closed Dask client)
            flight.future = Call.done_with(Outcome(ok=False, error=f"the executor could not run the step: "
                                                                    f"{describe_exception(exc)}"))

    def halt(self, halted: bool) -> None:
        """Whether the run starts anything new: a batch already running stops between its calls
        when it does not (another lane failed and aborts or replans, a pause, a stop)."""
        if halted:
            HALTED.add(id(self))
        else:
            HALTED.discard(id(self))

    def start_batch(self, flights: list[Flight], results: list[dict[str, Any]]) -> None:
        """Hand several prepared tool calls to the executor as one task (they run one after
        another on one of its workers, and hold one lane)."""
        assert self._futures is not None
        works: list[Callable[[], Outcome]] = []
        batched: list[Flight] = []
        for flight, needs in zip(flights, results):
            prepared = prepare_tool_call(flight.step, needs, self.tools)
            self.inflight.append(flight)
            if isinstance(prepared, Outcome):  # its args do not fit: failed without running
                flight.future = Call.done_with(prepared)
            else:
                works.append(prepared)
                batched.append(flight)
        if not batched:
            return
        for i, flight in enumerate(batched):
            flight.lane = i == 0
        try:
            calls = self._futures.submit_batch(works, self.completions, id(self))
        except Exception as exc:  # noqa: BLE001 - the executor refused the task (a closed Dask client)
            failed = Outcome(ok=False, error=f"the executor could not run the step: {describe_exception(exc)}")
            calls = [Call.done_with(failed) for _ in batched]
        for flight, call in zip(batched, calls):
            flight.future = call

    def _work(self, flight: Flight, results: dict[str, Any],
              clock: Callable[[], float] | None) -> Callable[[], Outcome]:
        step, tools, agents, handle, live = flight.step, self.tools, self.agents, flight.handle, flight.live
        context = self._context_maker(step, flight.token, results) if step.agent is not None else _no_context

        def work() -> Outcome:
            return call_step(step, results=results, tools=tools, agents=agents, context=context,
                             clock=clock, handle=handle, out=live)

        return work

    def _context_maker(self, step: Step, token: object, results: dict[str, Any]) -> Callable[[], AgentContext]:
        plan = self._plan()

        def context() -> AgentContext:
            # the plan text is formatted only if the agent reads it (it is the size of the plan)
            return AgentContext(goal=plan.goal, plan_text=lambda: str(plan), step=step.snapshot(), needs=results,
                                emit=self.bus.emitter(step.id, token))

        return context

    # -------------------------------------------------------------- collect
    def wait_for_one(self) -> list[Flight]:
        """The calls that ended, after waiting (in slices, views redrawing) for at least one."""
        while True:
            done = self._ended() if self.batching else [f for f in self.inflight if f.future.done()]
            if done or self.nudged:
                self.nudged = False
                return done
            self._wait_slice()
            self._expire()
            self._check_executor()

    def _ended(self) -> list[Flight]:
        """The flights whose call ended, each batch read once: a batch that ends during the
        scan is seen whole or not at all, never its failed call without the calls after it."""
        done: list[Flight] = []
        seen: dict[int, bool] = {}
        for flight in self.inflight:
            call = flight.future
            batch = call.batch
            if batch is None:
                ended = call.done()
            elif id(batch) in seen:
                ended = seen[id(batch)]
            else:
                ended = seen[id(batch)] = batch.ended
            if ended:
                done.append(flight)
        return done

    def _wait_slice(self) -> None:
        """Wait a little for any running call (Ctrl-C is taken at once here)."""
        beating = bool(self.bus.heartbeats)
        timeout: float | None = self.bus.interval if beating else None
        deadlines = [f.deadline for f in self.inflight if f.deadline is not None]
        if deadlines:
            left = max(min(deadlines) - time.monotonic(), 0.0)
            timeout = left if timeout is None else min(timeout, left)
        self.wait(0.25 if timeout is None else min(timeout, 0.25))  # bounded: Ctrl-C is seen promptly anywhere
        if self.relay is not None:
            self.relay.poll()
        if beating:
            self.bus.beat()
        else:
            self.bus.drain()  # events of a call about to time out still count

    def wake(self) -> None:
        """End the runner's current wait slice (a call printed for the first time: show it now)."""
        self.completions.put(None)  # type: ignore[arg-type]

    def nudge(self) -> None:
        """Wake the runner's thread from waiting for calls (a decision arrived from another thread)."""
        self.nudged = True
        self.completions.put(None)  # type: ignore[arg-type]

    def wait(self, seconds: float) -> None:
        """Wait until some call ends or ``seconds`` pass; Ctrl-C raises at once."""
        with waiting():
            try:
                self.completions.get(timeout=seconds)
            except queue.Empty:
                pass

    def _expire(self) -> None:
        now = time.monotonic()
        for flight in list(self.inflight):
            if flight.deadline is None or flight.future.done() or now < flight.deadline:
                continue
            self.bus.live.discard(flight.token)
            if not (flight.handle is not None and flight.handle.cancel()) and self.pool is not None:
                self.pool.stop(flight.future)
            flight.future = Call.done_with(Outcome(
                ok=False,
                error=f"TimeoutError: step {flight.step.id!r} did not finish within {self.config.step_timeout:g} s "
                "(it was stopped; a call blocked in C code finishes in the background and is ignored)",
                output=flight.live.text() if flight.live is not None else "",  # what it printed until then
            ))

    def _check_executor(self) -> None:
        """Fail the calls a given executor can no longer end (a cluster with no worker left)."""
        if self._futures is None:
            return
        now = time.monotonic()
        if now < self._next_health:
            return
        self._next_health = now + HEALTH_EVERY
        ended = {id(f) for f in self._ended()}  # a batch ending now is failed whole or not at all
        waiting_on = [f for f in self.inflight if f.future.future is not None and id(f) not in ended]
        why = self._futures.cannot_run() if waiting_on else None
        if why is None:
            self._unhealthy_since = None
            return
        if self._unhealthy_since is None:
            self._unhealthy_since = now
        if now - self._unhealthy_since < NO_WORKER_GRACE:
            return
        for flight in waiting_on:
            flight.future.future.cancel()
            flight.future = Call.done_with(Outcome(
                ok=False,
                error=f"step {flight.step.id!r} was running on {self._futures.name}, and {why} for "
                f"{NO_WORKER_GRACE:g} s: its worker died or left before the call returned, so it may have run "
                "in part. Start workers (or connect a new client) and run the step again"))
        self._unhealthy_since = None

    @staticmethod
    def outcome_of(flight: Flight) -> Outcome | None:
        """The call's outcome, or None when it was interrupted before completing."""
        error = flight.future.exception()
        if error is None:
            outcome: Outcome = flight.future.result()
            return outcome
        if isinstance(error, (KeyboardInterrupt, CallInterrupted)):
            return None
        if isinstance(error, NotReached):
            return None
        if isinstance(error, StepAbandoned):
            return Outcome(ok=False, error=f"StepAbandoned: step {flight.step.id!r} was stopped")
        if type(error).__name__ == "KilledWorker":
            return Outcome(ok=False, error=f"the worker running step {flight.step.id!r} died before the call "
                           f"returned, so it may have run in part ({describe_exception(error)}); check what it "
                           "does before running it again")
        return Outcome(ok=False, error=f"the executor failed to run the step: {describe_exception(error)}")

    def ended(self, flight: Flight) -> None:
        """A call's outcome is being recorded: learn how fast its tool is, drop its events token."""
        if flight.token is not None:
            self.bus.live.discard(flight.token)
        tool = flight.step.tool
        if tool is not None:
            self.fast_tools[tool] = time.perf_counter() - flight.began < FAST_CALL
            value = flight.future.value
            if self.batching and isinstance(value, Outcome) and value.started is not None \
                    and value.finished is not None:
                if value.finished - value.started >= SLOW_CALL:
                    self.slow_tools.add(tool)
                else:
                    self.slow_tools.discard(tool)

    def close(self) -> None:
        """Let the worker threads go once nothing is running on them."""
        HALTED.discard(id(self))  # another dispatcher may get this id later
        if self.pool is not None and not self.inflight and not self.leftovers:
            self.pool.shutdown()
            self.pool = None


def _no_context() -> AgentContext:
    raise AssertionError("a tool step has no agent context")
