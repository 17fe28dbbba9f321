"""Where a step's call runs: the runner's thread, planbook's worker threads, or any
``concurrent.futures.Executor`` (a Dask cluster's, for instance).

Every executor takes a zero-argument callable and returns a ``concurrent.futures.Future``;
the runner waits on futures, never on threads, so an interrupted wait can always tell
which calls finished (their result is kept) from which are still going.

The worker pool reuses its threads (starting a thread per step made a live view cost
several times the CPU of a run without one) and knows which thread runs which call, so
a call that ran past its timeout can be stopped and its thread replaced.
"""

from __future__ import annotations

import ctypes
import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol


class StepAbandoned(BaseException):
    """Raised inside a worker whose call timed out, so its Python code stops."""


class Executor(Protocol):
    """The one thing the runner needs of an executor."""

    def submit(self, fn: Callable[[], Any]) -> Future[Any]: ...


class InlineExecutor:
    """Runs the call right away on the calling thread (the default for a serial run)."""

    name = "inline"

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        future.set_result(fn())  # fn never raises but KeyboardInterrupt: that propagates, as it should
        return future

    def stop(self, future: Future[Any]) -> bool:
        return False

    def shutdown(self) -> None:
        pass


class _Task:
    __slots__ = ("fn", "future", "thread")

    def __init__(self, fn: Callable[[], Any], future: Future[Any]) -> None:
        self.fn = fn
        self.future = future
        self.thread: threading.Thread | None = None


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
        self._running: dict[Future[Any], _Task] = {}

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            start_one = self._idle == 0
            if not start_one:
                self._idle -= 1
        self._queue.put(_Task(fn, future))
        if start_one:
            thread = threading.Thread(target=self._work, name=f"planbook-worker-{next(self._numbers)}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return future

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            if task is _STOP:
                return
            try:
                abandoned = self._run(task)
            except StepAbandoned:  # the stop landed just after the call ended: it was given up anyway
                with self._lock:
                    self._finish(task)
                if not task.future.done():
                    task.future.set_exception(StepAbandoned())
                abandoned = True
            if abandoned:
                return  # this thread was given up on; the pool starts another when needed
            with self._lock:
                self._idle += 1

    def _run(self, task: _Task) -> bool:
        """Run one call and resolve its future; True when the call was abandoned."""
        if not task.future.set_running_or_notify_cancel():
            return False
        task.thread = threading.current_thread()
        with self._lock:
            self._running[task.future] = task
        try:
            value = task.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the runner through the future
            with self._lock:
                self._finish(task)
            task.future.set_exception(exc)
            return isinstance(exc, StepAbandoned)
        with self._lock:
            self._finish(task)
        task.future.set_result(value)
        return False

    def _finish(self, task: _Task) -> None:
        """Under the lock: the call is over; a stop aimed at it must not hit the next one."""
        self._running.pop(task.future, None)
        if task.thread is not None and task.thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(task.thread.ident), None)

    def stop(self, future: Future[Any]) -> bool:
        """Best effort: raise :class:`StepAbandoned` in the thread running ``future``'s call.

        A thread cannot be killed; this stops Python code (a loop, the next call of an
        agent) but not a blocking C call, which finishes first. Returns False when the
        call is not running (finished already, or never started: then it is cancelled).
        """
        if future.cancel():
            return False
        with self._lock:
            task = self._running.get(future)
            if task is None or task.thread is None or task.thread.ident is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(task.thread.ident),
                                                       ctypes.py_object(StepAbandoned))
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

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        return self.executor.submit(fn)  # type: ignore[no-any-return]

    def stop(self, future: Future[Any]) -> bool:
        future.cancel()  # only a call that has not started can be taken back
        return False

    def shutdown(self) -> None:
        pass  # the caller owns it
