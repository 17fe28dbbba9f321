"""Ctrl-C that lands only where nothing is lost.

Python raises ``KeyboardInterrupt`` at whatever bytecode the main thread is running.
Landing just after a tool returned, it threw the result away (the tool then ran again
on continue); landing in the runner's bookkeeping, it left counters and history out
of step. While a run holds the :class:`InterruptGate`, SIGINT is handled so that:

- inside user code (a tool, an agent, a planner) it raises at once, as usual: that
  call did not complete and runs again;
- between the call's return and the end of the bookkeeping that records it, it is
  *deferred* and raised at the next safe point (:func:`checkpoint`);
- while the runner waits for worker threads, it raises at once (the runner then keeps
  every call that finished and leaves running ones to finish).

The gate is installed only on the main thread and only while Python's own SIGINT
handler is in place (a script, ``python -m``, an IPython kernel during a cell);
elsewhere interrupts behave as Python's default.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import get_ident
from types import FrameType
from typing import Any

_CALL, _DEFER, _WAIT = "call", "defer", "wait"


class InterruptGate:
    """Installed for the duration of ``Runner.run()`` (re-entrant: nested runs share it)."""

    def __init__(self) -> None:
        self.mode = _DEFER
        self.call_frame: FrameType | None = None
        self.pending = False
        self.depth = 0
        self.previous: Any = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.mode == _WAIT or (self.mode == _CALL and frame is not self.call_frame):
            raise KeyboardInterrupt
        self.pending = True  # raised at the next checkpoint


_gate: InterruptGate | None = None


@contextmanager
def interrupt_gate() -> Iterator[InterruptGate | None]:
    """Hold the gate while a run goes (a no-op off the main thread or under another handler)."""
    global _gate
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    if _gate is not None:  # a run inside a step of another run: share the outer gate
        _gate.depth += 1
        try:
            yield _gate
        finally:
            _gate.depth -= 1
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield None
        return
    gate = InterruptGate()
    gate.previous = signal.signal(signal.SIGINT, gate.handler)
    _gate = gate
    try:
        yield gate
    finally:
        _gate = None
        # an interrupt deferred during the run's last bookkeeping finds the run over: nothing to stop
        signal.signal(signal.SIGINT, gate.previous)


def _active() -> InterruptGate | None:
    gate = _gate
    if gate is None or threading.current_thread() is not threading.main_thread():
        return None
    return gate


def call_user(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call user code: Ctrl-C raises inside it, but not once it has returned."""
    return call_user_with(fn, args, kwargs)


def call_user_with(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """:func:`call_user` with the arguments as they are held (a tool's args are not packed twice)."""
    gate = _gate
    if gate is None or get_ident() != threading.main_thread().ident:
        return fn(*args, **kwargs)
    mode, frame = gate.mode, gate.call_frame
    gate.mode, gate.call_frame = _CALL, sys._getframe()
    try:
        return fn(*args, **kwargs)
    finally:
        gate.mode, gate.call_frame = mode, frame


@contextmanager
def waiting() -> Iterator[None]:
    """The runner waits for workers: Ctrl-C raises at once."""
    gate = _active()
    if gate is None:
        yield
        return
    mode = gate.mode
    gate.mode = _WAIT
    try:
        if gate.pending:
            gate.pending = False
            raise KeyboardInterrupt
        yield
    finally:
        gate.mode = mode


def defer_interrupt() -> None:
    """Ask for an interrupt at the next checkpoint (a call completed as Ctrl-C arrived)."""
    gate = _active()
    if gate is None:
        raise KeyboardInterrupt
    gate.pending = True


def checkpoint() -> None:
    """A safe point: raise an interrupt that was deferred."""
    gate = _gate
    if gate is not None and gate.pending and threading.current_thread() is threading.main_thread():
        gate.pending = False
        raise KeyboardInterrupt
