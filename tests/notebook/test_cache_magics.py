"""The step cache flags of the magics: ``%run_plan NAME --cache/--no-cache``, ``%plan_store --cache``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from IPython.core.error import UsageError

import planbook
from planbook.notebook.magics import magics_of

#: what the tool really did, and the world it reads (module globals: a closure over them would
#: make the tool uncacheable)
CALLS: Counter[str] = Counter()
WORLD = {"now": "09:00"}
PLAN = "steps:\n  - {id: s, tool: now, args: {city: Oslo}}\n"


@pytest.fixture
def clock(ip: Any, tmp_path: Any) -> dict[str, str]:
    CALLS.clear()
    WORLD["now"] = "09:00"
    box = planbook.Toolbox()

    @box.tool
    def now(city: str) -> str:
        """The time in a city: it changes between runs."""
        CALLS["now"] += 1
        return f"{city} {WORLD['now']}"

    ip.user_ns["clockbox"] = box
    ip.run_line_magic("plan_store", str(tmp_path / "runs.sqlite"))
    ip.run_cell_magic("plan", "clockplan --tools clockbox", PLAN)
    return WORLD


def cached(result: Any) -> set[str]:
    return {e.step for e in result.events if e.kind == "step.cached"}


def test_a_notebook_reruns_every_step_by_default(ip: Any, clock: dict[str, str]) -> None:
    assert magics_of(ip).cache is None
    ip.run_line_magic("run_plan", "clockplan --no-view")
    clock["now"] = "17:30"
    later = ip.run_line_magic("run_plan", "clockplan --no-view")
    assert later.outputs == {"s": "Oslo 17:30"} and CALLS["now"] == 2


def test_run_plan_cache_reuses_and_no_cache_does_not(ip: Any, clock: dict[str, str]) -> None:
    ip.run_line_magic("run_plan", "clockplan --no-view --cache")
    clock["now"] = "17:30"
    again = ip.run_line_magic("run_plan", "clockplan --no-view --cache")
    assert cached(again) == {"s"} and again.outputs == {"s": "Oslo 09:00"} and CALLS["now"] == 1
    fresh = ip.run_line_magic("run_plan", "clockplan --no-view --no-cache")
    assert cached(fresh) == set() and fresh.outputs == {"s": "Oslo 17:30"}


def test_plan_store_cache_turns_it_on_for_the_notebook(ip: Any, clock: dict[str, str], tmp_path: Any) -> None:
    ip.run_line_magic("plan_store", f"{tmp_path / 'runs.sqlite'} --cache")
    ip.run_line_magic("run_plan", "clockplan --no-view")
    again = ip.run_line_magic("run_plan", "clockplan --no-view")
    assert cached(again) == {"s"} and CALLS["now"] == 1
    once_more = ip.run_line_magic("run_plan", "clockplan --no-view --no-cache")  # the run's flag wins
    assert cached(once_more) == set() and CALLS["now"] == 2


def test_contradicting_or_useless_cache_flags_are_usage_errors(ip: Any, clock: dict[str, str]) -> None:
    with pytest.raises(UsageError, match="--cache and --no-cache contradict"):
        ip.run_line_magic("run_plan", "clockplan --no-view --cache --no-cache")
    with pytest.raises(UsageError, match="--cache and --no-cache contradict"):
        ip.run_line_magic("plan_store", "--cache --no-cache")
    with pytest.raises(UsageError, match="--resume finishes the stored run with the cache choice"):
        ip.run_line_magic("run_plan", "clockplan --no-view --resume --cache")
    with pytest.raises(UsageError, match="%plan_store off keeps none"):
        ip.run_line_magic("plan_store", "off --cache")
    assert magics_of(ip).store_choice != "off"  # a refused change changes nothing
    ip.run_line_magic("plan_store", "off")
    with pytest.raises(UsageError, match="--cache reuses results kept in a run store"):
        ip.run_line_magic("run_plan", "clockplan --no-view --cache")
    assert CALLS["now"] == 0


def test_the_help_says_the_rule_and_the_stale_answer_it_avoids(ip: Any) -> None:
    for magic in ("run_plan", "plan_store"):
        doc = " ".join(ip.find_line_magic(magic).__doc__.split())
        assert "--cache" in doc and "--no-cache" in doc and "a clock, a price or a file" in doc, magic
