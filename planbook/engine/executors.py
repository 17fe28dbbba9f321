"""Where a step's call runs: the runner's thread, planbook's worker threads, or any
``concurrent.futures.Executor`` (a Dask cluster's, for instance).

Every executor takes a zero-argument callable and returns a :class:`Call`; when the
call ends, the executor puts it on the runner's *completions* queue. The runner waits
on that one queue, never on threads, so an interrupted wait can always tell which
calls finished (their result is kept) from which are still going.

The worker pool reuses its threads (a thread per step made a live view cost several
times the CPU of a run without one) and hands calls over through C-level queues
rather than ``concurrent.futures`` (whose locks and waiters cost more than a fast
step). It knows which thread runs which call, so a call that ran past its timeout can
be stopped; that thread then retires (a stop still in flight must not hit the next
call), and the pool starts another when needed.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

Completions = queue.SimpleQueue  # of Call


class StepAbandoned(BaseException):
    """Raised inside a worker whose call timed out, so its Python code stops."""


class NotReached(Exception):
    """A call of a batch that never started: an earlier call of its batch failed first."""


#: the runs that start nothing new (their batches stop between calls), by their dispatcher's token.
#: Seen by batches in this process (threads, an in-process cluster); a batch in another process
#: stops only at its own failure.
HALTED: set[int] = set()


def run_in_turn(calls: list[Callable[[], Any]], run: int | None = None) -> list[Any]:
    """Run a batch's calls one after another; stop after the first whose outcome is not ``ok``,
    or before the next call once run ``run`` starts nothing new (:data:`HALTED`).

    Module-level so that a cluster can ship it. Stopping at a failure keeps a batch from
    starting work its failure's policy (``abort``, ``replan``) would not have started, and
    so does stopping when another lane's failure, a pause or a stop ended the run's
    starting: the calls after it are handed back unstarted.
    """
    outcomes: list[Any] = []
    for call in calls:
        if outcomes and run is not None and run in HALTED:
            break
        outcome = call()
        outcomes.append(outcome)
        if not getattr(outcome, "ok", True):
            break
    return outcomes


class Batch:
    """Calls handed over as one task. They end together, with one assignment (``ended``):
    a reader never sees a failed call of the batch ended while the calls after it, which
    never started, still look running (and still count as executions)."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = False


class Call:
    """One submitted call: ``done()``, ``result()``, ``exception()`` like a Future, without its locks."""

    __slots__ = ("fn", "finished", "value", "error", "thread", "future", "stopped", "batch")

    def __init__(self, fn: Callable[[], Any] | None = None) -> None:
        self.fn = fn
        self.finished = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self.future: Any = None  # the concurrent.futures.Future behind it, for FuturesExecutor
        self.stopped = False  # a timeout stopped it (planbook's pool retires the thread afterwards)
        self.batch: Batch | None = None  # the batch it was handed over in (see BatchedCall)

    @classmethod
    def done_with(cls, value: Any) -> "Call":
        call = cls()
        call.value, call.finished = value, True
        return call

    def done(self) -> bool:
        return self.finished

    def exception(self) -> BaseException | None:
        return self.error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class BatchedCall(Call):
    """A call of a :class:`Batch`: done when its batch has ended, not one call at a time."""

    __slots__ = ()

    def __init__(self, batch: Batch) -> None:
        super().__init__()
        self.batch = batch

    def done(self) -> bool:
        return self.batch.ended  # type: ignore[union-attr]


class Executor(Protocol):
    """What the runner needs of an executor."""

    name: str

    def submit(self, fn: Callable[[], Any], completions: Completions) -> Call: ...
    def stop(self, call: Call) -> bool: ...
    def shutdown(self) -> None: ...


class InlineExecutor:
    """Runs the call right away on the calling thread (the default for a serial run)."""

    name = "main"

    def submit(self, fn: Callable[[], Any], completions: Completions | None = None) -> Call:
        # fn never raises but KeyboardInterrupt: that propagates, as it should (the call did not complete)
        return Call.done_with(fn())

    def stop(self, call: Call) -> bool:
        return False

    def shutdown(self) -> None:
        pass


_STOP = object()


class ThreadPool:
    """Reusable daemon worker threads, started on demand.

    Daemon threads: a call abandoned after its timeout must not keep the process alive.
    The pool does not cap concurrency itself; the runner submits at most ``parallel``
    calls at a time.
    """

    name = "threads"
    _numbers = itertools.count(1)

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[[], Any], completions: Completions) -> Call:
        call = Call(fn)
        with self._lock:
            start_one = self._idle == 0
            if not start_one:
                self._idle -= 1
        self._queue.put((call, completions))
        if start_one:
            thread = threading.Thread(target=self._work, name=f"planbook-worker-{next(self._numbers)}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return call

    def _work(self) -> None:
        me = threading.current_thread()
        call: Call | None = None
        try:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                call, completions = item
                stopped = self._run(call, me)
                completions.put(call)
                if stopped:
                    return  # a stop may still be on its way to this thread: it takes no more calls
                with self._lock:
                    self._idle += 1
        except StepAbandoned:  # the stop landed after its call had ended: the call was given up anyway
            if call is not None and not call.finished:
                call.error, call.finished = StepAbandoned(), True
                completions.put(call)

    def _run(self, call: Call, me: threading.Thread) -> bool:
        """Run one call; True when it was stopped (this thread then retires)."""
        call.thread = me
        value: Any = None
        error: BaseException | None = None
        try:
            value = call.fn()  # type: ignore[misc]
        except BaseException as exc:  # noqa: BLE001 - handed to the runner through the call
            error = exc
        with self._lock:  # from here on no stop is aimed at this call
            stopped = call.stopped
            call.thread, call.fn = None, None
        call.value, call.error, call.finished = value, error, True
        return stopped

    def stop(self, call: Call) -> bool:
        """Best effort: raise :class:`StepAbandoned` in the thread running ``call``.

        A thread cannot be killed; this stops Python code (a loop, the next call of an
        agent) but not a blocking C call, which finishes first. False when the call is
        not running. The thread takes no further call once this one ends.
        """
        import ctypes  # only a timeout pays for it

        with self._lock:
            thread = call.thread
            if call.finished or thread is None or thread.ident is None:
                return False
            call.stopped = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(StepAbandoned))
            return True

    def shutdown(self) -> None:
        """Let idle workers end (busy ones end after their call)."""
        for _ in self._threads:
            self._queue.put(_STOP)
        self._threads = []


class FuturesExecutor:
    """Any ``concurrent.futures.Executor``: ``ThreadPoolExecutor``, a Dask client's executor, ...

    For Dask use ``distributed.Client(...).get_executor(pure=False)``: with ``pure=True``
    identical calls (the same step run twice) are merged into one.
    """

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.name = type(executor).__name__

    def submit(self, fn: Callable[[], Any], completions: Completions) -> Call:
        call = Call()

        def settle(future: Any) -> None:
            try:
                _settle(call, future.result())
            except BaseException as exc:  # noqa: BLE001 - cancelled or failed: handed to the runner
                call.error = exc
            call.finished = True
            completions.put(call)

        call.future = self.executor.submit(fn)
        call.future.add_done_callback(settle)
        return call

    def submit_batch(self, fns: list[Callable[[], Any]], completions: Completions, run: int | None = None) -> list[Call]:
        """Hand several calls over as one task (:func:`run_in_turn`); one :class:`Call` per call.

        One task per call costs a cluster a scheduling round trip each (milliseconds on
        Dask, more than a small call); a batch pays it once. When the task fails as a
        whole (its worker died), every call of the batch carries that error; a call the
        batch never reached carries :class:`NotReached`. The calls end together (see
        :class:`Batch`), each outcome in place first.
        """
        batch = Batch()
        calls: list[Call] = [BatchedCall(batch) for _ in fns]

        def settle(future: Any) -> None:
            try:
                outcomes, error = future.result(), None
            except BaseException as exc:  # noqa: BLE001 - cancelled or failed: handed to the runner
                outcomes, error = [], exc
            for i, call in enumerate(calls):
                if error is not None:
                    call.error = error
                elif i < len(outcomes):
                    _settle(call, outcomes[i])
                else:
                    call.error = NotReached()
                call.finished = True
            batch.ended = True
            for call in calls:
                completions.put(call)

        future = self.executor.submit(run_in_turn, list(fns), run)
        for call in calls:
            call.future = future
        future.add_done_callback(settle)
        return calls

    def stop(self, call: Call) -> bool:
        if call.future is not None:
            call.future.cancel()  # only a call that has not started can be taken back
        return False

    def cannot_run(self) -> str | None:
        """Why nothing given to this executor can end now (None: it can, or it cannot tell).

        A Dask cluster whose last worker died or left keeps its tasks waiting for a
        worker forever; the runner asks this while it waits, so such a call becomes a
        failed step instead of a hang. Other executors cannot tell, and are trusted.
        """
        client = getattr(self.executor, "_client", None)  # not planbook's: dask's ClientExecutor keeps its client there
        if client is None or not callable(getattr(client, "nthreads", None)):
            return None
        if getattr(client, "status", "running") in ("closing", "closed"):
            return "its Dask client was closed"
        try:
            workers = client.nthreads()
        except Exception as exc:  # noqa: BLE001 - a scheduler that went away
            return f"its Dask scheduler cannot be reached ({type(exc).__name__}: {exc})"
        return None if workers else "the Dask cluster has no worker left"

    def shutdown(self) -> None:
        pass  # the caller owns it


def _settle(call: Call, outcome: Any) -> None:
    """Hand a shipped call's outcome to ``call``. A call whose tool raised ``KeyboardInterrupt``
    comes back as an outcome marked ``interrupted`` (a ``BaseException`` escaping a Dask task
    stops the cluster's event loop, and the run would never return): it becomes the
    ``KeyboardInterrupt`` it was, so the run is interrupted as on planbook's own threads."""
    if getattr(outcome, "interrupted", False):
        call.error = KeyboardInterrupt()
    else:
        call.value = outcome
