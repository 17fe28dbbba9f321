"""resume() takes every option the run was started with, from the one options table
(issue 34 §5): ``resume()`` copied options by hand, and ``approve_timeout`` (stored as 30.0)
was resumed as None, so a resumed run waited for ever where the first one stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Toolbox
from planbook.engine.config import OPTION, OPTIONS, RESUME_OWN, RunConfig, resumed_options
from planbook.engine.runner import Runner

PLAN = """
steps:
  - {id: a, tool: add, args: {x: 1}}
  - {id: b, tool: add, args: {x: $a}, needs: [a]}
"""

#: a value for each option that is not its default (objects: what a store cannot keep is given again)
STARTED: dict[str, Any] = {"on_failure": ["retry", "skip"], "retries": 2, "max_steps": 50, "max_replans": 3,
                           "step_timeout": 5.0, "parallel": 2, "cache": True, "approve": ["b"],
                           "approve_timeout": 30.0}
#: options set apart: a strategy sets several at once (below), objects are given again
APART = {"strategy", "faithful", "executor", "store"}


def _box() -> Toolbox:
    box = Toolbox()

    @box.tool
    def add(x: int) -> int:
        return x + 1

    return box


def _paused(store: Path, **options: Any) -> None:
    """A run started with ``options``, paused after its first step and kept in ``store``."""
    runner = Runner(PLAN, tools=_box(), store=store, **options)
    if runner.steering is not None:
        runner.steering.answered_elsewhere()  # step b asks after the pause: a handle would answer
    assert runner.run(until="a").status == "paused"
    runner.release_store()


def _config_value(config: RunConfig, name: str) -> Any:
    return list(config.policy) if name == "on_failure" else getattr(config, name)


def test_the_test_sets_every_option_of_the_table() -> None:
    assert set(STARTED) | APART == set(OPTION), "a new option: give it a value here, so its resume is checked"


def test_a_resumed_run_takes_every_option_it_was_started_with(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    _paused(store, **STARTED)
    runner = planbook.resume(store=store, tools=_box(), run=False)
    assert isinstance(runner, Runner)
    for name, value in STARTED.items():
        assert _config_value(runner.config, name) == value, name
    assert runner.steering is not None and runner.steering.timeout == 30.0  # the deadline holds again
    runner.steering.answered_elsewhere()
    runner.door.decide(runner.plan.step("b"), planbook.Decision.approve())  # type: ignore[union-attr]
    result = runner.run()
    runner.release_store()
    assert result.ok and result.outputs == {"a": 2, "b": 3}


def test_a_strategy_is_resumed_too(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    _paused(store, strategy="lesson", max_steps=9)
    runner = planbook.resume(store=store, tools=_box(), run=False)
    assert isinstance(runner, Runner)
    assert (runner.strategy, runner.config.strategy, runner.config.max_steps) == ("lesson", "lesson", 9)
    assert runner.run().ok
    runner.release_store()


def test_what_is_given_again_wins_and_what_is_not_stored_takes_its_default() -> None:
    stored = {"policy": ["skip"], "approve_timeout": 30.0, "approve": ["b"]}
    options = resumed_options(stored, {"approve": ["a"], "executor": None})
    assert set(options) == {o.name for o in OPTIONS} - set(RESUME_OWN)
    assert (options["on_failure"], options["approve_timeout"], options["approve"]) == (["skip"], 30.0, ["a"])
    assert options["max_steps"] == OPTION["max_steps"].default and options["executor"] is None


@pytest.mark.parametrize("name", sorted(set(OPTION) - APART))
def test_each_option_alone_round_trips(tmp_path: Path, name: str) -> None:
    store = tmp_path / "runs.sqlite"
    given = {name: STARTED[name]}
    if name == "retries":
        given["on_failure"] = "retry"
    _paused(store, **given)
    runner = planbook.resume(store=store, tools=_box(), run=False)
    assert isinstance(runner, Runner)
    assert _config_value(runner.config, name) == STARTED[name]
    runner.release_store()
