"""Checking a plan does each step's work once, so it stays linear in the plan's size
(the figures: benchmarks/engine_overhead.py), and still finds every cycle."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from planbook import Plan, PlanError, Runner, Step, Toolbox
from planbook.spec import validate


def noop(x: Any = None) -> Any:
    """Return x."""
    return x


def test_references_are_found_once_per_step_and_an_ordered_plan_skips_the_graph_search(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"refs": 0, "graph": 0}
    real_find_refs = validate.find_refs

    def counting(value: Any) -> list[str]:
        calls["refs"] += 1
        return real_find_refs(value)

    import graphlib

    class CountingSorter(graphlib.TopologicalSorter):  # type: ignore[type-arg]
        def prepare(self) -> None:
            calls["graph"] += 1
            super().prepare()

    monkeypatch.setattr(validate, "find_refs", counting)
    monkeypatch.setattr(graphlib, "TopologicalSorter", CountingSorter)
    steps = [Step(id="s0", tool="noop", args={"x": 0})]
    steps += [Step(id=f"s{i}", tool="noop", args={"x": f"$s{i - 1}"}) for i in range(1, 200)]
    Runner(Plan(steps=steps), tools=Toolbox([noop]), max_steps=200)
    assert calls == {"refs": 200, "graph": 0}


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_cycles_are_still_found_in_any_listing_order(order: str) -> None:
    steps = [Step(id="a", tool="noop", needs=["c"]), Step(id="b", tool="noop", args={"x": "$a"}),
             Step(id="c", tool="noop", needs=["b"])]
    if order == "backward":
        steps.reverse()
    with pytest.raises(PlanError, match="dependency cycle"):
        Runner(Plan(steps=steps), tools=Toolbox([noop]))


def test_a_cycle_through_a_duplicate_id_is_reported_with_the_duplicate() -> None:
    steps = [Step(id="a", tool="noop"), Step(id="b", tool="noop", needs=["a"]), Step(id="a", tool="noop", needs=["b"])]
    with pytest.raises(PlanError) as caught:
        Runner(Plan(steps=steps), tools=Toolbox([noop]))
    codes = {p.code for p in caught.value.problems}
    assert {"duplicate_id", "cycle"} <= codes


def test_a_plan_listed_in_dependency_order_with_odd_ids_is_checked_the_slow_way() -> None:
    """Ids outside the plain ASCII fast path still go through the full id rule."""
    steps = [Step(id="données", tool="noop"), Step(id="next", tool="noop", args={"x": "$données"})]
    assert Runner(Plan(steps=steps), tools=Toolbox([noop])).run().outputs == {"données": None, "next": None}
    with pytest.raises(PlanError, match=r"holds U\+0020 \(space\)"):
        Runner(Plan(steps=[Step(id="two words", tool="noop")]), tools=Toolbox([noop]))


def test_the_scheduler_takes_the_index_checking_built() -> None:
    """Checking indexes every id; the run's scheduler uses that index as its positions
    rather than hashing every id of a long plan again."""
    built: list[dict[str, int]] = []
    real = validate._check

    def keeping(*args: Any) -> Any:
        problems, positions = real(*args)
        built.append(positions)
        return problems, positions

    steps = [Step(id="b", tool="noop", needs=["a"]), Step(id="a", tool="noop"), Step(id="c", tool="noop", needs=["b"])]
    with mock.patch.object(validate, "_check", keeping):
        runner = Runner(Plan(steps=steps), tools=Toolbox([noop]))
    assert runner.scheduler.position is built[0] and built[0] == {"b": 0, "a": 1, "c": 2}
    assert [sid for sid in runner.scheduler.by_id] == ["b", "a", "c"]
    result = runner.run()  # a need listed after its step still comes first
    assert result.ok and [h.id for h in result.history] == ["a", "b", "c"]


def test_a_wrong_need_is_matched_against_the_ids_outside_the_plan_too() -> None:
    plan = Plan(steps=[Step(id="b", tool="noop", needs=["lod"]), Step(id="c", tool="noop", needs=["load", "b", "b"])])
    found = validate.plan_problems(plan, Toolbox([noop]), [], known_ids=["load"])
    assert [(p.step, p.code, p.message) for p in found] == [
        ("b", "unknown_need", "needs 'lod', but no step has that id; did you mean 'load'?")]
    found = validate.plan_problems(plan, Toolbox([noop]), [])
    assert [(p.step, p.code) for p in found] == [("b", "unknown_need"), ("c", "unknown_need")]
