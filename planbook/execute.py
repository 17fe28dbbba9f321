"""Running one step's executor: a tool call or an agent, with its stdout captured,
async callables supported and an optional timeout.

Kept apart from the runner so the runner stays a state machine and a future parallel
runner can call :func:`execute` from worker threads (capture is per thread).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import io
import sys
import threading
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
    if inspect.isawaitable(value):
        value = _run_coroutine(value)
    return value


def _failure(exc: BaseException, output: str) -> Outcome:
    return Outcome(
        ok=False,
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        output=output,
    )


def execute(
    step: Step,
    *,
    results: Mapping[str, Any],
    tools: Mapping[str, Tool],
    agents: Mapping[str, Any],
    context: Callable[[], AgentContext],
    timeout: float | None = None,
) -> Outcome:
    """Run ``step`` once and report what happened. Never raises, except KeyboardInterrupt."""

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
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # the step failed; the policy decides what happens next
                return _failure(exc, out.getvalue())

    if timeout is None:
        return work()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"planbook-step-{step.id}")
    future = pool.submit(work)
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        return Outcome(
            ok=False,
            error=f"TimeoutError: step {step.id!r} did not finish within {timeout:g} s "
            "(its thread is left to finish in the background; its result will be ignored)",
        )
    finally:
        pool.shutdown(wait=False)
