"""The collector around checking a plan: paused, and what a run keeps joins the oldest
generation at once (see planbook/data/gcwindow.py), without holding back anyone's garbage."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from planbook import Plan, Runner, Step, Toolbox
from planbook.data.gcwindow import collector_paused


class Node:
    """Something that can be in a reference cycle."""

    me: object = None


def oldest() -> set[int]:
    return {id(o) for o in gc.get_objects(generation=2)}


@pytest.fixture
def no_automatic_collections():
    """The collector on, but no collection of its own: what reaches the oldest generation in a
    test then got there by ``collector_paused``, not because other work allocated meanwhile."""
    before = gc.get_threshold()
    gc.set_threshold(10**9, 10**9, 10**9)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@pytest.mark.usefixtures("no_automatic_collections")
def test_what_a_kept_block_makes_joins_the_oldest_generation() -> None:
    gc.collect()
    with collector_paused(keep=True):
        assert not gc.isenabled()
        made = [[i] for i in range(50)]
    assert gc.isenabled()
    old = oldest()
    assert id(made) in old and all(id(m) in old for m in made)


@pytest.mark.usefixtures("no_automatic_collections")
def test_young_garbage_from_before_is_collected_not_promoted() -> None:
    gc.collect()
    node = Node()
    node.me = node
    gone = weakref.ref(node)
    del node
    with collector_paused(keep=True):
        pass
    assert gone() is None


@pytest.mark.usefixtures("no_automatic_collections")
def test_nothing_moves_after_an_exception_or_without_keep() -> None:
    gc.collect()
    made: list[list[int]] = []
    with pytest.raises(ValueError):
        with collector_paused(keep=True):
            made.append([1])
            raise ValueError("bad plan")
    assert gc.isenabled()
    with collector_paused():
        made.append([2])
    old = oldest()
    assert not any(id(m) in old for m in made)


def test_objects_frozen_by_the_process_stay_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused(keep=True):
            made = [1]
        # neither unfrozen (the count would fall to about none) nor frozen again (every object
        # alive, ``made`` among them, would join): compared with room for the frozen objects a
        # daemon thread of an earlier test may free meanwhile, which lowers the count
        after = gc.get_freeze_count()
        assert frozen // 2 < after <= frozen and id(made) not in oldest()
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with collector_paused(keep=True):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def noop(x: int = 0) -> int:
    """Return x."""
    return x


@pytest.mark.slow
@pytest.mark.usefixtures("no_automatic_collections")
def test_a_long_runs_copy_of_its_plan_is_in_the_oldest_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    from planbook.data import gcwindow

    monkeypatch.setattr(gcwindow, "KEEP_FROM", 20)
    gc.collect()
    runner = Runner(Plan(steps=[Step(id=str(i), tool="noop") for i in range(20)]), tools=Toolbox([noop]),
                    max_steps=20)
    old = oldest()
    assert all(id(step) in old for step in runner.plan.steps)
    assert runner.run().ok
    gc.collect()
    short = Runner(Plan(steps=[Step(id=str(i), tool="noop") for i in range(19)]), tools=Toolbox([noop]))
    assert not any(id(step) in oldest() for step in short.plan.steps)  # left to the collector as usual


@pytest.mark.usefixtures("no_automatic_collections")
@pytest.mark.parametrize("stored", [True, False])
def test_creating_a_long_run_in_a_store_keeps_what_it_makes(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                            stored: bool) -> None:
    """From KEEP_STORED_FROM steps, creating the run in a store promotes what was made so far
    (the store's rows and the run's copy of its plan); a run without a store leaves it young."""
    from planbook.data import gcwindow
    from planbook.store.sqlite import SQLiteStore

    monkeypatch.setattr(gcwindow, "KEEP_STORED_FROM", 20)
    gc.collect()
    store = SQLiteStore(tmp_path / "runs.sqlite") if stored else None
    runner = Runner(Plan(steps=[Step(id=str(i), tool="noop") for i in range(20)]), tools=Toolbox([noop]),
                    max_steps=20, store=store, cache=False)
    kept: list[bool] = []

    def first_start(event: Any) -> None:
        if event.kind == "step.started" and not kept:  # after the run was created in the store
            kept.append(id(runner.plan.steps[-1]) in oldest())

    runner.subscribe(first_start)
    assert runner.run().ok
    if store is not None:
        store.close()
    assert kept == [stored]
