"""``resume()`` of a run started with every option set gives a run with the same options.

The options table (planbook.engine.config.OPTIONS) owns every option; resume rebuilds a run's
options from it (``resumed_options``). Copying them by hand once lost ``approve_timeout``
(stored 30.0, resumed None): this test sets each option in the table to a value that is not
its default, pauses the run, resumes it from the store, and compares the two runs' options.
An option added to the table and not here fails the first test, so it is covered from day one."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import planbook
from planbook import Toolbox
from planbook.engine.config import DEFAULTS, OPTION, RESUME_OWN, STORED_AS

PLAN = """
steps:
  - {id: a, tool: work, args: {n: 1}}
  - {id: b, tool: work, args: {n: 2}, needs: [a]}
  - {id: c, tool: work, args: {n: 3}, needs: [b]}
"""

#: a value other than the default for every option a resume takes from the stored run
NOT_THE_DEFAULT: dict[str, Any] = {
    "on_failure": ("retry", "skip"),
    "retries": 2,
    "max_steps": 41,
    "max_replans": 1,
    "step_timeout": 30.0,
    "parallel": 2,
    "cache": True,
    "strategy": "planbook",
    "faithful": False,  # True needs a seed design's planner: the default, stored and resumed as given below
    "approve": ["b"],
    "approve_timeout": 30.0,
}
#: options that are objects, which no store keeps: a resume is given them again
GIVEN_AGAIN = {"executor"}


def tools() -> Toolbox:
    box = Toolbox()

    @box.tool
    def work(n: int) -> int:
        return n * 10

    return box


def test_the_table_of_values_covers_every_option() -> None:
    assert set(NOT_THE_DEFAULT) | GIVEN_AGAIN | set(RESUME_OWN) == set(OPTION)
    for name, value in NOT_THE_DEFAULT.items():
        if name not in ("strategy", "faithful"):  # see NOT_THE_DEFAULT: no other value runs this plan
            assert value != getattr(DEFAULTS, name), f"{name}: pick a value that is not the default"


def test_a_resumed_run_has_the_options_it_was_started_with(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    pool = ThreadPoolExecutor(2)
    waiting = threading.Event()

    def on_event(event: Any) -> None:
        if event.kind == "step.waiting":
            waiting.set()

    handle = planbook.start(PLAN, tools=tools(), view=False, store=str(store), executor=pool, on_event=on_event,
                            **NOT_THE_DEFAULT)
    try:
        assert waiting.wait(30), handle.status
        _pause(handle)
        started = handle.runner.config
        resumed = planbook.resume(store=str(store), tools=tools(), executor=pool, run=False, force=True)
        assert isinstance(resumed, planbook.Runner)
        try:
            for name in OPTION:
                if name in RESUME_OWN:
                    continue
                field = STORED_AS.get(name, name)
                assert getattr(resumed.config, field) == getattr(started, field), name
            assert resumed.steering is not None and resumed.steering.rule.stored() == ["b"]
            assert resumed.steering.timeout == 30.0
        finally:
            resumed.release_store()
    finally:
        handle.stop()
        handle.wait(30)
        pool.shutdown()


def _pause(handle: Any) -> None:
    """Pause the handle's run and wait until it has paused (an event, not a sleep)."""
    done = threading.Event()

    def seen(event: Any) -> None:
        if event.kind == "run.paused":
            done.set()

    handle.runner.subscribe(seen)
    handle.pause()
    assert done.wait(30), handle.status
    handle.runner.unsubscribe(seen)
