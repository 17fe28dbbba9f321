"""The store never crashes a run and never trusts stale state: values that break the
encoders, a paused plan edited in place, store paths with ``~``, reading without writing."""

from __future__ import annotations

import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, Step, Toolbox
from planbook.runner import Runner
from planbook.store import MemoryStore, StoreError, Unrestorable, open_store
from planbook.store.sqlite import SQLiteStore

# ------------------------------------------------------- values that break the encoders


def _big() -> int:
    return math.factorial(2000)  # 5,736 digits: past the limit of int -> str conversion


def _self_containing() -> list:
    value: list[Any] = [1]
    value.append(value)
    return value


def _deep() -> list:
    value: list[Any] = []
    for _ in range(5000):
        value = [value]
    return value


MAKERS = {"big": _big, "self_containing": _self_containing, "deep": _deep}


def _tools(maker: str) -> Toolbox:
    box = Toolbox()

    @box.tool(name="make")
    def make() -> Any:
        """The awkward value."""
        return MAKERS[maker]()

    @box.tool
    def after(note: str) -> str:
        """A later step: the run goes on."""
        return note

    return box


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("kind", ["sqlite", "memory-with-secrets"])
def test_a_result_that_breaks_the_encoder_is_kept_or_marked_and_the_run_ends_in_the_store(
    maker: str, kind: str, tmp_path: Path
) -> None:
    store: Any = SQLiteStore(tmp_path / "runs.sqlite") if kind == "sqlite" else MemoryStore(secrets=["s3cr3t-value"])
    plan = Plan(id="awkward", goal="store what cannot be written", steps=[
        Step(id="a", tool="make"), Step(id="b", tool="after", args={"note": "went on"}, needs=["a"]),
    ])
    result = planbook.run(plan, tools=_tools(maker), store=store)
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert result.outputs["b"] == "went on"
    [listed] = store.list_runs()
    assert (listed.status, listed.steps_done) == ("completed", 2)  # the run's end was written
    stored = store.load_run(listed.run_id).plan.step("a").result
    if kind == "memory-with-secrets" or maker != "deep":  # pickle (or the memory store) gives it back
        assert not isinstance(stored, Unrestorable)
        if maker == "big":
            assert stored == math.factorial(2000)
        elif maker == "self_containing":
            assert stored[1] is stored
    else:  # pickle cannot either: the existing rule, a marker that says why
        assert isinstance(stored, Unrestorable) and "RecursionError" in stored.repr + stored.reason


# ---------------------------------------------------------- a paused plan edited in place


def test_a_paused_plan_edited_in_place_is_what_the_store_holds_and_what_a_resume_runs(tmp_path: Path) -> None:
    store, seen = tmp_path / "runs.sqlite", []
    box = Toolbox()

    @box.tool(cache=False)
    def record(x: int) -> int:
        """Note the value it was called with."""
        seen.append(x)
        return x

    @box.tool(cache=False)
    def stop() -> int:
        """The user's Ctrl-C, once."""
        if "stopped" not in seen:
            seen.append("stopped")
            raise KeyboardInterrupt
        return 0

    plan = Plan(id="edited", goal="g", steps=[
        Step(id="a", tool="record", args={"x": 1}),
        Step(id="s", tool="stop"),
        Step(id="b", tool="record", args={"x": 1}),
    ])
    runner = Runner(plan, tools=box, store=store)
    paused = runner.run(until="a")
    assert paused.status == "paused"
    runner.plan.step("b").args["x"] = 99  # the same dict object, edited in place
    runner.plan.step("b").needs.append("a")  # a list field of the record, edited in place
    stopped = runner.run()  # the stop step interrupts the run: its state is saved
    assert stopped.status == "interrupted"
    stored = planbook.load_run(store=store).plan.step("b")
    assert stored.args == {"x": 99} and stored.needs == ["a"]
    resumed = planbook.resume(store=store, tools=box)
    assert resumed.status == "completed" and seen == [1, "stopped", 99]
