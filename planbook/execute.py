"""Running one step's executor: a tool call or an agent, with its stdout captured,
async callables supported and an optional timeout.

Kept apart from the runner so the runner stays a state machine and a future parallel
runner can call :func:`execute` from worker threads (capture is per thread).
"""

from __future__ import annotations

import inspect
import io
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .agents import AgentContext, AgentReply
from .models import Step
from .refs import resolve
from .tools import Tool


@dataclass
class Outcome:
    """What one execution produced. ``ok`` is the executor's own verdict."""

    ok: bool
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    notes: str = ""


class _ThreadRoutedStream(io.TextIOBase):
    """Stands in for sys.stdout: writes from a capturing thread go to its buffer."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        buffer = self.buffers.get(threading.get_ident())
        if buffer is not None:
            return buffer.write(text)
        return self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, ... of the real stream
        return getattr(self.original, name)


_install_lock = threading.Lock()
_router: _ThreadRoutedStream | None = None
_users = 0


@contextmanager
def stdout_routing() -> Iterator[_ThreadRoutedStream]:
    """Install the routing stream on sys.stdout for the duration (reference-counted).

    A run holds it for its whole loop, so each step only registers a buffer.
    """
    global _router, _users
    with _install_lock:
        if _router is None or sys.stdout is not _router:
            _router = _ThreadRoutedStream(sys.stdout)
            sys.stdout = _router
            _users = 0
        _users += 1
        router = _router
    try:
        yield router
    finally:
        with _install_lock:
            _users -= 1
            if _users <= 0 and sys.stdout is router:
                sys.stdout = router.original
                _router = None


class capture_stdout:  # noqa: N801 - used like the contextlib helpers it sits beside
    """Capture what this thread prints, leaving other threads' output alone.

    A class rather than a generator context manager: it runs once per step, and when a
    run already installed the router it costs two dict operations.
    """

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        self.ident = threading.get_ident()
        self._routing: Any = None

    def __enter__(self) -> io.StringIO:
        router = sys.stdout
        if not (isinstance(router, _ThreadRoutedStream) and router is _router):
            self._routing = stdout_routing()
            router = self._routing.__enter__()
        self.router = router
        # a step that runs a plan of its own: the outer capture resumes after the inner one
        self.outer = router.buffers.get(self.ident)
        router.buffers[self.ident] = self.buffer
        return self.buffer

    def __exit__(self, *exc: Any) -> None:
        if self.outer is not None:
            self.router.buffers[self.ident] = self.outer
        else:
            self.router.buffers.pop(self.ident, None)
        if self._routing is not None:
            self._routing.__exit__(*exc)


def _run_coroutine(coro: Any) -> Any:
    """Run a coroutine to completion even when this thread already has a running loop (Jupyter)."""
    import asyncio  # only async tools pay for it
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    router = _router
    buffer = router.buffers.get(threading.get_ident()) if router is not None else None

    def run_here() -> Any:
        # what the coroutine prints in the helper thread belongs to the step that awaited it
        if router is None or buffer is None:
            return asyncio.run(coro)
        ident = threading.get_ident()
        with _install_lock:
            router.buffers[ident] = buffer
        try:
            return asyncio.run(coro)
        finally:
            with _install_lock:
                router.buffers.pop(ident, None)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run_here).result()


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    value = fn(*args, **kwargs)
    # an attribute lookup on the type: inspect.isawaitable's ABC check costs more than a no-op tool
    if hasattr(type(value), "__await__") and inspect.isawaitable(value):
        value = _run_coroutine(value)
    return value


def _failure(exc: BaseException, output: str) -> Outcome:
    return Outcome(
        ok=False,
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        output=output,
    )


class _StepThread(threading.Thread):
    """Runs one step's work off the runner's thread (for timeouts and heartbeats).

    A daemon thread: a step abandoned after its timeout must not keep the process alive.
    """

    def __init__(self, work: Callable[[], Outcome], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.work = work
        self.done = threading.Event()
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.outcome = self.work()
        except BaseException as exc:  # noqa: BLE001 - handed to the runner's thread
            self.error = exc
        finally:
            self.done.set()

    def stop(self, exc_type: type[BaseException]) -> None:
        """Best effort: raise ``exc_type`` inside the thread at its next Python bytecode.

        A thread cannot be killed; this stops Python code (a loop, the next call of an agent)
        but not a blocking C call, which finishes first. Its events are ignored either way.
        """
        import ctypes

        if self.ident is not None and not self.done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(exc_type))


class StepAbandoned(BaseException):
    """Raised inside a step thread that timed out, so its Python code stops."""


def execute(
    step: Step,
    *,
    results: Mapping[str, Any],
    tools: Mapping[str, Tool],
    agents: Mapping[str, Any],
    context: Callable[[], AgentContext],
    timeout: float | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_interval: float = 0.1,
    interrupted: list[threading.Thread] | None = None,
) -> Outcome:
    """Run ``step`` once and report what happened. Never raises, except KeyboardInterrupt.

    With a ``timeout`` or a ``heartbeat``, the work runs in a worker thread while this
    thread waits in slices: it calls ``heartbeat()`` about every ``heartbeat_interval``
    seconds (a live view redraws from the thread that owns it) and gives up at the
    timeout. Ctrl-C on this thread stops the worker as far as Python allows; a worker
    still busy in a blocking call is appended to ``interrupted`` so the caller can wait
    for it before running the step again.
    """

    def work() -> Outcome:
        with capture_stdout() as out:
            try:
                if step.tool is not None:
                    tool = tools[step.tool]
                    args = tool.coerce(resolve(step.args, results))
                    return Outcome(ok=True, result=_call(tool.fn, **args), output=out.getvalue())
                agent = agents[step.agent or ""]
                reply = _call(agent, step.task, context())
                if not isinstance(reply, AgentReply):
                    return Outcome(
                        ok=False,
                        error=f"agent {step.agent!r} returned {type(reply).__name__}, not an AgentReply: "
                        "it must say whether it succeeded",
                        output=out.getvalue(),
                    )
                if not reply.ok:
                    error = reply.notes or (str(reply.answer) if reply.answer is not None else "the agent reported failure")
                    return Outcome(ok=False, result=reply.answer, error=error, output=out.getvalue(), notes=reply.notes)
                return Outcome(ok=True, result=reply.answer, output=out.getvalue(), notes=reply.notes)
            except (KeyboardInterrupt, StepAbandoned):
                raise
            except BaseException as exc:  # noqa: BLE001 - SystemExit from a tool is a failed step, not the end
                return _failure(exc, out.getvalue())

    if timeout is None and heartbeat is None:
        return work()
    worker = _StepThread(work, name=f"planbook-step-{step.id}")
    worker.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            wait = heartbeat_interval if heartbeat is not None else None
            if deadline is not None:
                left = max(deadline - time.monotonic(), 0.0)
                wait = left if wait is None else min(wait, left)
            if worker.done.wait(wait):
                break
            if deadline is not None and time.monotonic() >= deadline:
                worker.stop(StepAbandoned)
                return Outcome(
                    ok=False,
                    error=f"TimeoutError: step {step.id!r} did not finish within {timeout:g} s "
                    "(it was stopped; a call blocked in C code finishes in the background and is ignored)",
                )
            if heartbeat is not None:
                heartbeat()
    except KeyboardInterrupt:
        worker.stop(KeyboardInterrupt)
        if interrupted is not None:
            interrupted.append(worker)
        raise
    if worker.error is not None:
        raise worker.error
    assert worker.outcome is not None
    return worker.outcome
