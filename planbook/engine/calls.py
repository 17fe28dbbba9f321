"""Running one step's call: a tool or an agent, with its stdout captured and async
callables awaited on an event loop of their own (so they can be cancelled).

:func:`call_step` runs on whatever thread an executor gives it (capture is per thread)
and never raises for a failing step: what happened is an :class:`Outcome`. Only an
interruption escapes — ``KeyboardInterrupt`` on the runner's thread,
:class:`CallInterrupted` for a cancelled coroutine — because then the call did *not*
complete and the step must run again.

What a call returns is checked where it ran: an iterator (a generator expression,
``map()``, ``iter()``, a file object) fails its step with "return a list" — it could be
read only once, so the steps that need it and a retry would silently get nothing — and
the bounded summary that ``step.finished`` carries (:func:`summarize`) is made on the
call's own thread, so a slow or huge ``repr`` never holds up the runner.
"""

from __future__ import annotations

import inspect
import io
import itertools
import reprlib
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..data.models import Step
from ..data.refs import resolve
from ..data.secret import Secret, reveal
from ..outbound.checkpoint import mask_text, remember
from ..workers.agents import AgentContext, AgentReply
from ..workers.interrupts import call_user_with, defer_interrupt, waiting
from ..workers.tools import Tool, may_hold_secrets, secret_free_args
from .executors import StepAbandoned


@dataclass(slots=True)
class Outcome:
    """What one execution produced. ``ok`` is the executor's own verdict."""

    ok: bool
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    notes: str = ""
    #: an agent's request to end the run after this step (why)
    stop: str | None = None
    #: the thread the call ran on, and when it started and ended (the run's clock)
    worker: str = ""
    started: float | None = None
    finished: float | None = None
    #: a bounded repr of ``result`` (see :func:`summarize`), made where the call ran
    summary: str | None = None
    #: a shipped call whose tool raised KeyboardInterrupt (the executor makes it one again)
    interrupted: bool = False


#: the longest summary of a result an event carries
SUMMARY_LIMIT = 200


class _Summary(reprlib.Repr):
    """``reprlib`` with limits for a one-line summary; a huge int is described, not converted."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = SUMMARY_LIMIT
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = self.maxarray = 10
        self.maxdict = 10

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 4 * SUMMARY_LIMIT:  # its decimal digits would be cut anyway (and may not be allowed)
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    # reprlib sorts a dict's keys and a set's items first: O(n log n) for a summary of ten,
    # and a dict would not read in its own order
    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = itertools.islice(x.items(), self.maxdict)
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in items]
        return "{" + ", ".join(pieces + (["..."] if len(x) > self.maxdict else [])) + "}"

    def repr_set(self, x: set[Any], level: int) -> str:
        # reprlib's own helper: private, so typeshed's stub of Repr does not declare it
        return self._repr_iterable(x, level, "{", "}", self.maxset) if x else "set()"  # type: ignore[attr-defined]

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        return self._repr_iterable(  # type: ignore[attr-defined]  # reprlib's private helper, as above
            x, level, "frozenset({", "})", self.maxfrozenset) if x else "frozenset()"

    def repr_instance(self, x: Any, level: int) -> str:
        try:  # reprlib's own fallback shows a memory address: not deterministic
            text = repr(x)
        except Exception as exc:  # noqa: BLE001 - a result whose repr is broken is still a result
            return f"<{type(x).__name__} (repr failed: {type(exc).__name__})>"
        return text if len(text) <= self.maxother else text[: self.maxother - 1] + "…"


_summary = _Summary()
_PLAIN = (int, float, bool, type(None))


def summarize(value: Any, limit: int = SUMMARY_LIMIT) -> str:
    """A repr of ``value`` of at most ``limit`` characters, made without building the full repr
    of a big container (10 items per level); a broken repr is described instead."""
    kind = type(value)
    try:
        if kind in _PLAIN and (kind is not int or value.bit_length() <= 4 * SUMMARY_LIMIT):
            text = repr(value)
        else:
            text = _summary.repr(value)
    except Exception as exc:  # noqa: BLE001 - a result whose repr is broken is still a result
        text = f"<{kind.__name__} (repr failed: {type(exc).__name__})>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iterator_problem(value: Any, who: str) -> str | None:
    """Why a result that is an iterator cannot be a step's result (None for any other value)."""
    kind = type(value)
    if not (hasattr(kind, "__next__") or hasattr(kind, "__anext__")):
        return None
    hint = "read it in the step (e.g. `return f.read()`)" if isinstance(value, io.IOBase) else "return a list (e.g. `return list(...)`)"
    return (f"{who} returned an iterator ({kind.__name__}): it can be read only once, so the steps that need "
            f"it and a retry would get nothing. Return a list instead: {hint}")


def _succeeded(value: Any, kind: str, name: str | None, output: str, **fields: Any) -> Outcome:
    """The outcome of a call that returned ``value``: completed with its summary, or failed for an iterator.

    ``kind`` and ``name`` (``"tool"``, ``"search"``) say who returned it, in a failure's message."""
    of = type(value)
    if of in _PLAIN and not fields and (of is not int or value.bit_length() <= 4 * SUMMARY_LIMIT):
        return Outcome(True, value, None, None, output, summary=repr(value))  # the common case, made directly
    problem = _iterator_problem(value, f"{kind} {name!r}")
    if problem is not None:
        return Outcome(ok=False, error=f"TypeError: {problem}", output=output, notes=fields.get("notes", ""))
    return Outcome(ok=True, result=value, output=output, summary=summarize(value), **fields)


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

    def __init__(self, buffer: io.StringIO | None = None) -> None:
        self.buffer = io.StringIO() if buffer is None else buffer
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


class CallInterrupted(BaseException):
    """The call was cancelled before it completed (an async tool stopped by Ctrl-C)."""


class CallHandle:
    """Lets the runner cancel the coroutine a call is awaiting, from any thread."""

    __slots__ = ("lock", "loop", "task", "cancelled")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: Any = None
        self.task: Any = None
        self.cancelled = False

    def cancel(self) -> bool:
        """Cancel the awaited coroutine; False when the call awaits none (it cannot be stopped)."""
        with self.lock:
            self.cancelled = True
            if self.task is None:
                return False
            self.loop.call_soon_threadsafe(self.task.cancel)
            return True


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _wake_every(loop: Any, seconds: float) -> None:
    """Keep an idle loop waking up on the main thread.

    Python runs signal handlers only when the main thread runs Python code; a SIGINT
    that the OS delivers to another thread does not interrupt the loop's ``select()``,
    so without a timer Ctrl-C would wait for the awaited sleep or I/O to end.
    """

    def tick() -> None:
        loop.call_later(seconds, tick)

    loop.call_later(seconds, tick)


def _run_in_new_loop(awaitable: Any, handle: CallHandle | None) -> Any:
    """Await on a fresh event loop in this thread; cancellable through ``handle``."""
    import asyncio  # only async tools pay for it

    loop = asyncio.new_event_loop()
    if threading.current_thread() is threading.main_thread():
        _wake_every(loop, 0.1)
    try:
        task = loop.create_task(awaitable if asyncio.iscoroutine(awaitable) else _await(awaitable))
        if handle is not None:
            with handle.lock:
                handle.loop, handle.task = loop, task
                if handle.cancelled:
                    task.cancel()
        try:
            with waiting():  # on the main thread, Ctrl-C must reach the awaited coroutine at once
                return loop.run_until_complete(task)
        except KeyboardInterrupt:  # Ctrl-C on this (the main) thread: stop the coroutine cleanly
            task.cancel()
            try:
                value = loop.run_until_complete(task)
            except BaseException:  # noqa: BLE001 - cancelled (or failed while stopping): not completed
                raise KeyboardInterrupt from None
            defer_interrupt()  # it completed before the cancel: keep the result, stop right after
            return value
        except asyncio.CancelledError:
            if handle is not None and handle.cancelled:
                raise CallInterrupted() from None
            raise
    finally:
        if handle is not None:
            with handle.lock:
                handle.task = None
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _run_coroutine(awaitable: Any, handle: CallHandle | None) -> Any:
    """Await ``awaitable`` even when this thread already runs a loop (a notebook's main thread)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_in_new_loop(awaitable, handle)
    router = _router
    buffer = router.buffers.get(threading.get_ident()) if router is not None else None
    handle = handle or CallHandle()
    box: dict[str, Any] = {}
    done = threading.Event()

    def helper() -> None:
        # what the coroutine prints in the helper thread belongs to the step that awaited it
        ident = threading.get_ident()
        if router is not None and buffer is not None:
            with _install_lock:
                router.buffers[ident] = buffer
        try:
            box["value"] = _run_in_new_loop(awaitable, handle)
        except BaseException as exc:  # noqa: BLE001 - handed back to the awaiting thread
            box["error"] = exc
        finally:
            if router is not None:
                with _install_lock:
                    router.buffers.pop(ident, None)
            done.set()

    threading.Thread(target=helper, name="planbook-async", daemon=True).start()
    try:
        with waiting():  # Ctrl-C raises here at once (outside, a run defers it)
            while not done.wait(0.05):  # in slices: Ctrl-C reaches this thread at once
                pass
    except KeyboardInterrupt:
        handle.cancel()
        done.wait()  # a cancelled coroutine ends at its next await; Ctrl-C again stops waiting
        if "value" in box:  # it completed before the cancel: keep the result
            defer_interrupt()
            return box["value"]
        raise
    if "error" in box:
        error = box["error"]
        if isinstance(error, CallInterrupted):
            raise KeyboardInterrupt from None
        raise error
    return box["value"]


def describe_exception(exc: BaseException) -> str:
    """``"ValueError: message"``, even for an exception whose ``__str__`` raises."""
    try:
        text = str(exc)
    except Exception as broken:  # noqa: BLE001 - a broken exception is still a failure to report
        text = f"<str() of the exception failed: {type(broken).__name__}>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _failure(exc: BaseException, output: str) -> Outcome:
    try:
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # noqa: BLE001 - formatting calls __str__ again
        trace = f"{type(exc).__name__} (the traceback could not be formatted)"
    return Outcome(ok=False, error=describe_exception(exc), traceback=trace, output=output)


def call_step(
    step: Step,
    *,
    results: Mapping[str, Any],
    tools: Mapping[str, Tool],
    agents: Mapping[str, Any],
    context: Callable[[], AgentContext],
    clock: Callable[[], float] | None = None,
    handle: CallHandle | None = None,
    out: io.StringIO | None = None,
) -> Outcome:
    """Run ``step`` once and report what happened (see the module docstring).

    ``clock``: time the call where it runs (a worker's queue wait is not the step's time).
    ``out``: the buffer what it prints goes to (the runner reads a
    :class:`~planbook.engine.liveoutput.LiveOutput` while the call runs).
    """
    if clock is None:
        return call_inline(step, results, tools, agents, context, handle, out)
    started = clock()
    outcome = call_inline(step, results, tools, agents, context, handle, out)
    outcome.worker, outcome.started, outcome.finished = threading.current_thread().name, started, clock()
    return outcome


class ToolCall:
    """A tool step's call as a picklable value, for executors that ship work elsewhere (Dask).

    Arguments are resolved and checked on the runner's side; only the function, its
    arguments and the result travel. Importable tool functions pickle by reference;
    what cloudpickle can ship (functions defined in a notebook) works too.
    """

    def __init__(self, step_id: str, fn: Callable[..., Any], args: dict[str, Any]) -> None:
        self.step_id, self.fn, self.args = step_id, fn, args

    def __call__(self) -> Outcome:
        started = time.time()
        with capture_stdout() as out:
            try:
                value = call_awaited(self.fn, **self.args)
                outcome = _succeeded(value, "tool", getattr(self.fn, "__name__", "of step " + repr(self.step_id)),
                                     out.getvalue())
            except KeyboardInterrupt:
                # a BaseException would stop the executor's own loop (a Dask worker's): carry it back
                # as an outcome; FuturesExecutor makes it a KeyboardInterrupt again
                outcome = Outcome(ok=False, error="KeyboardInterrupt", output=out.getvalue(), interrupted=True)
            except (StepAbandoned, CallInterrupted):
                raise
            except BaseException as exc:  # noqa: BLE001 - as in call_step
                outcome = _failure(exc, out.getvalue())
        outcome.worker, outcome.started, outcome.finished = threading.current_thread().name, started, time.time()
        return outcome


class SecretToolCall(ToolCall):
    """A :class:`ToolCall` given secrets' real values: what it reports is masked where it ran
    (a worker in another process has a vault of its own, so the values travel with the call,
    as its arguments do — they are what the tool is called with)."""

    def __init__(self, step_id: str, fn: Callable[..., Any], args: dict[str, Any], secrets: list[str]) -> None:
        super().__init__(step_id, fn, args)
        self.secrets = secrets

    def __call__(self) -> Outcome:
        remember(self.secrets)
        return _masked(super().__call__())


def prepare_tool_call(step: Step, results: Mapping[str, Any], tools: Mapping[str, Tool]) -> ToolCall | Outcome:
    """The :class:`ToolCall` for ``step``, or the failed :class:`Outcome` when its args do not fit."""
    tool = tools[step.tool or ""]
    try:
        args, secrets = call_args(tool, step.args, results)
    except Exception as exc:  # noqa: BLE001 - bad args (or a secret not set) are a failed step, as in call_step
        return _failure(exc, "")  # call_args masked what its message echoed
    if secrets:
        return SecretToolCall(step.id, tool.fn, args, secrets)
    return ToolCall(step.id, tool.fn, args)


def call_args(tool: Tool, args: Mapping[str, Any], results: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments ``tool`` is called with, and the secrets' real values revealed in them.

    The call boundary, and the only place a :class:`~planbook.data.secret.Secret` becomes its
    value: ``$refs`` are resolved (a referenced result that is a Secret — a ``login`` tool's
    answer — is revealed first, so ``"Bearer ${login}"`` holds the token, not ``***``), then
    the Secrets the step's args hold are revealed, then the tool's signature coerces them.
    The step, its events, the cache key and the store keep ``args`` as written (the
    reference); each revealed value is in the vault from the moment it is read, and an error
    raised here that echoes it is masked.
    """
    secrets: list[str] = []
    if results and Secret in map(type, results.values()):  # in C: a step's needs are many, a Secret rare
        results = {k: reveal(v, secrets) if type(v) is Secret else v for k, v in results.items()}
    resolved = resolve(args, results)
    if may_hold_secrets(args):
        resolved = secret_free_args(tool, resolved, args, secrets)
    try:
        return tool.coerce(resolved), secrets
    except ValueError as exc:
        if not secrets:
            raise
        raise ValueError(mask_text(str(exc))) from None  # pydantic's message quotes the input: the real value


def _masked(outcome: Outcome) -> Outcome:
    """``outcome`` of a call that was given a secret's real value: what it says about the call
    (its error, traceback, output and summary) may echo the value, and is recorded and shown,
    so it is masked here, where it is made; the result itself is the tool's (the store and
    the views hide a known secret in it at their doors)."""
    if outcome.error:
        outcome.error = mask_text(outcome.error)
    if outcome.traceback:
        outcome.traceback = mask_text(outcome.traceback)
    if outcome.output:
        outcome.output = mask_text(outcome.output)
    if outcome.summary:
        outcome.summary = mask_text(outcome.summary)
    if outcome.notes:
        outcome.notes = mask_text(outcome.notes)
    return outcome


def call_awaited(fn: Callable[..., Any], *args: Any, _handle: CallHandle | None = None, **kwargs: Any) -> Any:
    """Call a tool or an agent (interruptible only while inside it); await what it returns.

    Public for the model layer's agent, which calls the tools a model asks for as a step's tool is called."""
    return _call_with(fn, args, kwargs, _handle)


def _call_with(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], handle: CallHandle | None) -> Any:
    """:func:`call_awaited` with the arguments as they are held (a step's args are passed on, not repacked)."""
    value = call_user_with(fn, args, kwargs)
    # an attribute lookup on the type: inspect.isawaitable's ABC check costs more than a no-op tool
    if hasattr(type(value), "__await__") and inspect.isawaitable(value):
        value = _run_coroutine(value, handle)
    return value


def call_inline(
    step: Step,
    results: Mapping[str, Any],
    tools: Mapping[str, Tool],
    agents: Mapping[str, Any],
    context: Callable[[], AgentContext],
    handle: CallHandle | None,
    out: io.StringIO | None = None,
) -> Outcome:
    """:func:`call_step` untimed, with positional arguments: a plain run's every step comes here."""
    # what capture_stdout does, inline: this runs once per step, and a run holds the router
    router = sys.stdout
    if not (isinstance(router, _ThreadRoutedStream) and router is _router):
        with capture_stdout(out) as printed:  # no run holds the router (a call on its own)
            return _call_captured(step, results, tools, agents, context, handle, printed)
    ident = threading.get_ident()
    buffers = router.buffers
    outer = buffers.get(ident)  # a step that runs a plan of its own: the outer capture resumes after
    if out is None:
        out = io.StringIO()
    buffers[ident] = out
    try:
        return _call_captured(step, results, tools, agents, context, handle, out)
    finally:
        if outer is not None:
            buffers[ident] = outer
        else:
            buffers.pop(ident, None)


def _call_captured(
    step: Step,
    results: Mapping[str, Any],
    tools: Mapping[str, Tool],
    agents: Mapping[str, Any],
    context: Callable[[], AgentContext],
    handle: CallHandle | None,
    out: io.StringIO,
) -> Outcome:
    try:
        if step.tool is not None:
            tool = tools[step.tool]
            args, secrets = call_args(tool, step.args, results)
            if secrets:
                return _masked(_secret_call(tool.fn, args, step.tool, handle, out))
            value = _call_with(tool.fn, (), args, handle)
            return _succeeded(value, "tool", step.tool, out.getvalue())
        agent = agents[step.agent or ""]
        reply = call_awaited(agent, step.task, context(), _handle=handle)
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
        return _succeeded(reply.answer, "agent", step.agent, out.getvalue(), notes=reply.notes, stop=reply.stop)
    except (KeyboardInterrupt, StepAbandoned, CallInterrupted):
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a tool is a failed step, not the end
        return _failure(exc, out.getvalue())


def _secret_call(fn: Callable[..., Any], args: dict[str, Any], name: str, handle: CallHandle | None,
                 out: io.StringIO) -> Outcome:
    """A tool call given a secret's real value: its failure is made here, so the caller masks
    it (a traceback's locals and message may quote the value)."""
    try:
        value = _call_with(fn, (), args, handle)
    except (KeyboardInterrupt, StepAbandoned, CallInterrupted):
        raise
    except BaseException as exc:  # noqa: BLE001 - as in _call_captured
        return _failure(exc, out.getvalue())
    return _succeeded(value, "tool", name, out.getvalue())
