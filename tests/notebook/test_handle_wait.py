"""``handle.wait_for_approval()`` returns once the wait is in the store, not a moment before.

The run marks a step as waiting, writes the run's "waiting" to its store, then announces it. A
caller that copied the store as soon as ``wait_for_approval`` returned (the CLI prompt test does,
to play a crash) sometimes found ``('running', None)``: the handle had counted the step as waiting
before the write."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook.engine.persistence import RunRecorder


def test_wait_for_approval_returns_once_the_wait_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box = planbook.Toolbox()

    @box.tool(approve=True)
    def send(to: str) -> str:
        return f"sent to {to}"

    held, entered = threading.Event(), threading.Event()
    flush = RunRecorder.flush

    def held_flush(self: RunRecorder, state: Any) -> None:
        if state.reason == "waiting" and not held.is_set():
            entered.set()
            held.wait(60)  # the write of the wait is held until the test lets it go
        flush(self, state)

    monkeypatch.setattr(RunRecorder, "flush", held_flush)
    store = tmp_path / "runs.sqlite"
    plan = planbook.Plan.model_validate({"id": "mail", "steps": [{"id": "send", "tool": "send", "args": {"to": "bob"}}]})
    handle = planbook.start(plan, tools=box, store=store, view=False)
    try:
        assert entered.wait(60), "the run never wrote its wait"
        assert handle.steering.waiting  # in memory the step waits already; the store does not know yet
        returned: list[list[str]] = []
        waiter = threading.Thread(target=lambda: returned.append(handle.wait_for_approval(60)))
        waiter.start()
        waiter.join(0.5)  # may only make this test pass wrongly (a slow machine), never fail it wrongly
        assert returned == [], "wait_for_approval returned before the wait was in the store"
        held.set()
        waiter.join(60)
        assert returned == [["send"]]
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT status, reason FROM runs").fetchall() == [("running", "waiting")]
    finally:
        held.set()
        handle.stop()
        handle.wait(60)
