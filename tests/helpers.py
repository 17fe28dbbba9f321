"""Shared tools, a clock and event helpers for the engine tests (no model, no network)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from planbook import Event, RunResult, ScriptedPlanner, Toolbox


class Lab:
    """A small world of tools whose behaviour a test sets: which sources are down,
    how often a flaky call fails. ``calls`` records every tool call in order."""

    def __init__(self, down: dict[str, str] | None = None) -> None:
        self.down: dict[str, str] = dict(down or {})
        self.flaky_failures: dict[str, int] = {}
        self.calls: list[tuple[str, Any]] = []
        self.tools = Toolbox()
        lab = self

        @self.tools.tool
        def ok(label: str = "ok") -> str:
            """Return the label: a step that always works."""
            lab.calls.append(("ok", label))
            return label

        @self.tools.tool
        def fetch(source: str) -> str:
            """Fetch a text from a source (fails when the test says the source is down)."""
            lab.calls.append(("fetch", source))
            if source in lab.down:
                raise ConnectionError(lab.down[source])
            return f"three words from {source}"

        @self.tools.tool
        def count(text: str) -> int:
            """Count the words of a text."""
            lab.calls.append(("count", text))
            return len(text.split())

        @self.tools.tool
        def fail(message: str = "it broke") -> None:
            """Always raise RuntimeError(message)."""
            lab.calls.append(("fail", message))
            raise RuntimeError(message)

        @self.tools.tool
        def flaky(key: str) -> str:
            """Fail while ``flaky_failures[key]`` is above zero, then work."""
            lab.calls.append(("flaky", key))
            left = lab.flaky_failures.get(key, 0)
            if left > 0:
                lab.flaky_failures[key] = left - 1
                raise RuntimeError(f"flaky {key} failed ({left} failure(s) left)")
            return f"{key} worked"

        @self.tools.tool
        def echo(value: Any) -> Any:
            """Return the value unchanged (to see what a reference resolved to)."""
            lab.calls.append(("echo", value))
            return value

        @self.tools.tool
        def add(a: int, b: int = 0) -> int:
            """Add two integers."""
            lab.calls.append(("add", (a, b)))
            return a + b

    def called(self, tool: str) -> list[Any]:
        return [arg for name, arg in self.calls if name == tool]


class Ticker:
    """A clock for ``Runner(clock=...)``: time that moves only when read, ``tick`` seconds
    per reading (by default 100.0, 101.0, 102.0, ...)."""

    def __init__(self, start: float = 100.0, tick: float = 1.0) -> None:
        self.tick = tick
        self.now = start - tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def fake_clock(tick: float = 0.001) -> Ticker:
    """A clock whose first reading is ``tick`` and each next one ``tick`` later (views' throttle tests)."""
    return Ticker(start=tick, tick=tick)


def kinds(result_or_events: RunResult | list[Event]) -> list[str]:
    events = result_or_events.events if isinstance(result_or_events, RunResult) else result_or_events
    return [e.kind for e in events]


def events_of(result: RunResult, kind: str) -> list[Event]:
    return [e for e in result.events if e.kind == kind]


def step_trace(result: RunResult) -> list[tuple[str, str]]:
    """``[(step id, status)]`` of every execution, in order (from the history)."""
    return [(s.id, s.status.value) for s in result.history]


class Kernel:
    """A real ipykernel driven over ZMQ, as a notebook front end would.

    Every reply is matched to its request by ``parent_header.msg_id``: a slow kernel
    start leaves stale messages (extra ``kernel_info_reply``) on the shell channel, and
    iopub carries messages of other requests.
    """

    def __init__(self) -> None:
        import os

        from jupyter_client.manager import start_new_kernel

        env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        self.km, self.kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=120)

    def execute(
        self,
        code: str,
        *,
        interrupt_when: str | None = None,
        interrupt_if: Any = None,
        timeout: float = 60,
    ) -> tuple[dict, list[dict]]:
        """Run ``code``; return its reply's content and its iopub messages.

        Sends one kernel interrupt once ``interrupt_when`` appears in the cell's streamed
        text, or once ``interrupt_if()`` is true (checked as messages arrive and at least
        every 0.2 s). Fails when the cell has not ended ``timeout`` s after it was sent.
        """
        import queue
        import time

        # stop_on_error=False: a cell that fails on purpose (an interrupt, an error a test wants)
        # must not make the kernel abort the test's next request, which ipykernel does to
        # requests arriving within its abort window after an error (a race, seen on older ipykernel)
        msg_id = self.kc.execute(code, stop_on_error=False)
        deadline = time.monotonic() + timeout
        messages: list[dict] = []
        interrupted = False

        def left() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kinds_seen = [m["msg_type"] for m in messages]
                raise AssertionError(f"the cell did not end within {timeout} s (its iopub messages: {kinds_seen})")
            return remaining

        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=min(left(), 0.2))
            except queue.Empty:
                msg = None
            if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                messages.append(msg)
                content = msg["content"]
                if (interrupt_when and not interrupted and msg["msg_type"] == "stream"
                        and interrupt_when in content["text"]):
                    self.km.interrupt_kernel()
                    interrupted = True
                if msg["msg_type"] == "status" and content["execution_state"] == "idle":
                    break
            if interrupt_if is not None and not interrupted and interrupt_if():
                self.km.interrupt_kernel()
                interrupted = True
        while True:
            try:
                reply = self.kc.get_shell_msg(timeout=left())
            except queue.Empty:
                continue  # left() raises once the time is up
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], messages

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def started_kernel(setup: str | None = None, *, needs: tuple[str, ...] = ("jupyter_client",),
                   kind: type[Kernel] = Kernel) -> Iterator[Kernel]:
    """A module's real kernel, for a fixture to ``yield from``: skipped without ``needs``, the
    ``setup`` cell run first (its errors shown if it fails), shut down when the module is done."""
    import pytest

    for module in needs:
        pytest.importorskip(module)
    kernel = kind()
    try:
        if setup is not None:
            reply, messages = kernel.execute(setup, timeout=120)
            assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
        yield kernel
    finally:
        kernel.close()


def note_tools(seen: list[str]) -> Toolbox:
    """A toolbox with one uncached tool, ``note(x)``, that appends each call's ``x`` to ``seen``."""
    box = Toolbox()

    @box.tool(cache=False)
    def note(x: str) -> str:
        """Note the call."""
        seen.append(x)
        return x

    return box


def store_files(folder: Any) -> dict[str, bytes]:
    """A store folder's bytes, less SQLite's own bookkeeping that any reader may create: the
    -shm index of the write-ahead log, and an empty log (after the last writer closed the store)."""
    from pathlib import Path

    files = {p.name: p.read_bytes() for p in Path(folder).iterdir() if not p.name.endswith("-shm")}
    return {name: data for name, data in files.items() if data or not name.endswith("-wal")}


# ------------------------------------------------------------------ the plan-execute lesson's planner
# (the runner's tests walk its paths; the text view's tests show them)
X = "X: the primary source is down"
Y = "Y: the mirror is down"


def lesson_planner() -> ScriptedPlanner:
    """last_error None → 4 steps; matches X → 3-step workaround; matches Y → 2-step
    graceful give-up; anything else → [] (no plan)."""
    return ScriptedPlanner({
        None: [
            {"id": 1, "tool": "ok", "args": {"label": "prepare"}},
            {"id": 2, "tool": "fetch", "args": {"source": "primary"}, "expected_outcome": "a text"},
            {"id": 3, "tool": "count", "args": {"text": "$2"}},
            {"id": 4, "tool": "ok", "args": {"label": "report"}},
        ],
        "primary source is down": [
            {"id": 2, "tool": "fetch", "args": {"source": "mirror"}},
            {"id": 3, "tool": "count", "args": {"text": "$2"}},
            {"id": 5, "tool": "ok", "args": {"label": "report from the mirror"}},
        ],
        "mirror is down": [
            {"id": 6, "tool": "ok", "args": {"label": "say what failed"}},
            {"id": 7, "tool": "ok", "args": {"label": "report without data"}},
        ],
    })


GOAL = "count the words of the source text"


def mail_tools(sent: list[tuple[str, str]] | None = None) -> Toolbox:
    """The steering tests' mail: ``draft(to)`` writes ``dear TO``; ``send(text, to)`` always asks
    for approval (``approve=True``), keeps each call in ``sent`` and returns ``sent TEXT to TO``."""
    box = Toolbox()

    @box.tool
    def draft(to: str) -> str:
        return f"dear {to}"

    @box.tool(approve=True)
    def send(text: str, to: str) -> str:
        if sent is not None:
            sent.append((text, to))
        return f"sent {text} to {to}"

    return box


def lines_run_in(module: ModuleType, work: Callable[[], Any]) -> int:
    """How many lines of ``module`` run while ``work()`` runs: a test of how work grows with a run's
    size that counts, not times (a busy machine changes a time, never a count)."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename != module.__file__:
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
    return count
