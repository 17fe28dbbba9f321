"""The cross-run step cache is opt-in, keyed by everything that can change a call's answer,
and never holds a secret; a resumed run never runs a completed step again, cache or not."""

from __future__ import annotations

import functools
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, RunResult, Step, Toolbox
from planbook.engine.persistence import UNCACHED_NOTE, uses_cache
from planbook.store import MemoryStore, step_cache_key
from planbook.store.cachekey import code_fingerprint

#: what the tools below really did (module globals: a closure over them would make them uncacheable)
CALLS: Counter[str] = Counter()
WORLD = {"now": "09:00", "rate": 2}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    WORLD.update(now="09:00", rate=2)


def cached(result: RunResult) -> set[str]:
    return {e.step or "" for e in result.events if e.kind == "step.cached"}


def clock_box(*, cache: bool | None = None, idempotent: bool = True) -> Toolbox:
    box = Toolbox()

    @box.tool(cache=cache, idempotent=idempotent)
    def read_clock(city: str) -> str:
        """What time it is: a tool that reads the world."""
        CALLS["read_clock"] += 1
        return f"{city} {WORLD['now']}"

    return box


def one(tool: str = "read_clock", **args: Any) -> Plan:
    return Plan(id="p", steps=[Step(id="s", tool=tool, args=args or {"city": "Oslo"})])


# ------------------------------------------------------------------ opt-in

def test_by_default_a_new_run_calls_the_tool_again_and_sees_the_world_change(tmp_path: Path) -> None:
    store, box = tmp_path / "runs.sqlite", clock_box()
    assert planbook.run(one(), tools=box, store=store).outputs == {"s": "Oslo 09:00"}
    WORLD["now"] = "17:30"
    later = planbook.run(one(), tools=box, store=store)
    assert later.outputs == {"s": "Oslo 17:30"} and cached(later) == set()  # not yesterday's answer
    assert CALLS["read_clock"] == 2


def test_a_tool_registered_with_cache_true_is_reused_by_default(tmp_path: Path) -> None:
    store, box = tmp_path / "runs.sqlite", clock_box(cache=True)
    planbook.run(one(), tools=box, store=store)
    WORLD["now"] = "17:30"
    again = planbook.run(one(), tools=box, store=store)
    assert cached(again) == {"s"} and again.outputs == {"s": "Oslo 09:00"} and CALLS["read_clock"] == 1
    assert again.plan.step("s").notes.startswith("cached: the result of step s in run ")


def test_a_run_with_cache_true_reuses_every_tool_that_allows_it(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    box = clock_box()

    @box.tool(cache=False)
    def stamp(city: str) -> str:
        """A tool that must run every time."""
        CALLS["stamp"] += 1
        return city

    plan = Plan(id="p", steps=[Step(id="s", tool="read_clock", args={"city": "Oslo"}),
                               Step(id="t", tool="stamp", args={"city": "Oslo"})])
    planbook.run(plan, tools=box, store=store, cache=True)
    again = planbook.run(plan, tools=box, store=store, cache=True)
    assert cached(again) == {"s"} and CALLS == {"read_clock": 1, "stamp": 2}


def test_a_run_with_cache_false_reuses_nothing_not_even_cache_true_tools(tmp_path: Path) -> None:
    store, box = tmp_path / "runs.sqlite", clock_box(cache=True)
    planbook.run(one(), tools=box, store=store)
    again = planbook.run(one(), tools=box, store=store, cache=False)
    assert cached(again) == set() and CALLS["read_clock"] == 2


def test_a_non_idempotent_tool_is_never_cached(tmp_path: Path) -> None:
    store, box = tmp_path / "runs.sqlite", clock_box(idempotent=False)
    planbook.run(one(), tools=box, store=store, cache=True)
    again = planbook.run(one(), tools=box, store=store, cache=True)
    assert cached(again) == set() and CALLS["read_clock"] == 2
    assert not sqlite3.connect(store).execute("SELECT COUNT(*) FROM cache").fetchone()[0]


def test_cache_true_and_idempotent_false_on_one_tool_is_refused() -> None:
    with pytest.raises(ValueError, match="cache=True and idempotent=False contradict .* drop cache=True"):
        clock_box(cache=True, idempotent=False)
    with pytest.raises(TypeError, match="cache must be True, False or None, got 'yes'"):
        Toolbox().add(lambda x: x, name="f", cache="yes")  # type: ignore[arg-type]


def test_the_rule_in_one_table() -> None:
    box = Toolbox()
    box.add(lambda: 1, name="plain")
    box.add(lambda: 1, name="on", cache=True)
    box.add(lambda: 1, name="off", cache=False)
    box.add(lambda: 1, name="once", idempotent=False)
    table = {name: [uses_cache(box[name], run) for run in (None, True, False)] for name in box}
    assert table == {"plain": [False, True, False], "on": [True, True, False], "off": [False, False, False],
                     "once": [False, False, False]}
    assert uses_cache(None, True) is False  # an agent step has no tool


def test_agent_steps_are_never_cached(tmp_path: Path) -> None:
    asked: list[str] = []
    agents = {"writer": lambda task: asked.append(task) or f"wrote {task}"}
    plan = Plan(id="a", steps=[Step(id="w", agent="writer", task="a haiku")])
    for _ in range(2):
        result = planbook.run(plan, agents=agents, store=tmp_path / "runs.sqlite", cache=True)
        assert result.status == "completed" and cached(result) == set()
    assert asked == ["a haiku", "a haiku"]


def test_a_bad_cache_option_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cache=True reuses results stored by earlier runs, and this run has no store"):
        planbook.run(one(), tools=clock_box(), cache=True)
    with pytest.raises(TypeError, match="cache must be True .* got 'on'"):
        planbook.run(one(), tools=clock_box(), store=tmp_path / "r.sqlite", cache="on")  # type: ignore[arg-type]
    assert CALLS["read_clock"] == 0


# ------------------------------------------------------------------ resume

def test_resume_never_runs_a_completed_step_again_with_the_cache_off(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    box = clock_box()
    stop = {"once": True}

    @box.tool
    def halt(text: str) -> str:
        """Interrupted on its first call, as by the kernel's interrupt button."""
        CALLS["halt"] += 1
        if stop.pop("once", False):
            raise KeyboardInterrupt
        return text

    plan = Plan(id="r", steps=[Step(id="s", tool="read_clock", args={"city": "Oslo"}),
                               Step(id="h", tool="halt", args={"text": "$s"})])
    first = planbook.run(plan, tools=box, store=store)
    assert first.status == "interrupted"
    WORLD["now"] = "17:30"  # the completed step's answer is kept: resume is not the cache
    resumed = planbook.resume(store=store, tools=box)
    assert resumed.status == "completed" and resumed.outputs == {"s": "Oslo 09:00", "h": "Oslo 09:00"}
    assert CALLS == {"read_clock": 1, "halt": 2} and cached(resumed) == set()


def test_a_resumed_run_keeps_its_cache_choice(tmp_path: Path) -> None:
    store, box = tmp_path / "runs.sqlite", clock_box()
    planbook.run(one(), tools=box, store=store, cache=True)  # fills the cache for Oslo
    plan = Plan(id="two", steps=[Step(id="b", tool="read_clock", args={"city": "Bergen"}),
                                 Step(id="s", tool="read_clock", args={"city": "Oslo"})])
    runner = planbook.Runner(plan, tools=box, store=store, cache=True)
    assert runner.run(max_executions=1).status == "paused"
    resumed = planbook.resume(store=store, tools=box)
    assert resumed.status == "completed" and cached(resumed) == {"s"} and CALLS["read_clock"] == 2


# ------------------------------------------------------------------ a changed tool misses

def _run_twice(tmp_path: Path, first: Any, second: Any, *, version: str | None = None,
               **args: Any) -> tuple[RunResult, RunResult]:
    """Run one step of tool ``calc`` as ``first``, then (a new run, the same store) as ``second``."""
    store = tmp_path / f"runs-{len(list(tmp_path.iterdir()))}.sqlite"
    results = []
    for fn in (first, second):
        box = Toolbox()
        box.add(fn, name="calc", version=version)
        results.append(planbook.run(one("calc", **args), tools=box, store=store, cache=True))
    return results[0], results[1]


def test_an_edited_default_argument_misses(tmp_path: Path) -> None:
    def calc1(x: int, k: int = 1) -> int:
        return x * k

    def calc2(x: int, k: int = 2) -> int:
        return x * k

    before, after = _run_twice(tmp_path, calc1, calc2, x=5)
    assert before.outputs == {"s": 5} and after.outputs == {"s": 10} and cached(after) == set()


def test_an_edited_tool_under_a_wraps_decorator_misses(tmp_path: Path) -> None:
    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return wrapper.__wrapped__(*args, **kwargs)

        return wrapper

    @logged
    def calc1(x: int) -> int:
        return x + 1

    @logged
    def calc2(x: int) -> int:
        return x + 2

    before, after = _run_twice(tmp_path, calc1, calc2, x=5)
    assert (before.outputs, after.outputs, cached(after)) == ({"s": 6}, {"s": 7}, set())


def _times(x: int, k: int) -> int:
    return x * k


def _plus(x: int, k: int) -> int:
    return x + k


def test_a_partial_with_another_function_or_bound_argument_misses(tmp_path: Path) -> None:
    before, after = _run_twice(tmp_path, functools.partial(_times, k=3), functools.partial(_plus, k=3), x=5)
    assert (before.outputs, after.outputs, cached(after)) == ({"s": 15}, {"s": 8}, set())
    before, after = _run_twice(tmp_path, functools.partial(_times, k=3), functools.partial(_times, k=4), x=5)
    assert (after.outputs, cached(after)) == ({"s": 20}, set())


def test_renamed_parameters_miss(tmp_path: Path) -> None:
    def calc1(x: int, k: int) -> int:
        return x - k

    def calc2(k: int, x: int) -> int:  # the same bytecode, the names swapped
        return k - x

    before, after = _run_twice(tmp_path, calc1, calc2, x=5, k=1)
    assert (before.outputs, after.outputs, cached(after)) == ({"s": 4}, {"s": -4}, set())


def _rated(rate: Any) -> Any:
    def calc(x: int) -> Any:
        return x * (rate if not callable(rate) else rate())

    return calc


def test_a_changed_closure_value_misses_and_an_unkeyable_one_is_not_cached(tmp_path: Path) -> None:
    before, after = _run_twice(tmp_path, _rated(2), _rated(3), x=5)
    assert (before.outputs, after.outputs, cached(after)) == ({"s": 10}, {"s": 15}, set())
    same, again = _run_twice(tmp_path, _rated(3), _rated(3), x=5)
    assert cached(again) == {"s"}

    class Live:
        def __call__(self) -> int:
            return WORLD["rate"]

    live = Live()
    live.__dict__["conn"] = object()  # state with no content form: the key could not see it change
    first, second = _run_twice(tmp_path, _rated(live), _rated(live), x=5)
    assert cached(second) == set() and second.plan.step("s").notes.startswith(UNCACHED_NOTE)
    assert "rate" in second.plan.step("s").notes and "version=" in second.plan.step("s").notes


def test_a_tool_with_a_version_is_keyed_by_it_instead_of_its_code(tmp_path: Path) -> None:
    class Rate:
        def __call__(self) -> int:
            return 2

    unkeyable = Rate()
    unkeyable.__dict__["conn"] = object()
    _, again = _run_twice(tmp_path, _rated(unkeyable), _rated(unkeyable), x=5)
    assert cached(again) == set()
    _, again = _run_twice(tmp_path, _rated(unkeyable), _rated(unkeyable), x=5, version="1")
    assert cached(again) == {"s"} and again.outputs == {"s": 10}


def test_dict_argument_order_is_a_different_call(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    box = Toolbox()

    @box.tool(cache=True)
    def first_key(d: dict) -> str:
        """The first key of a dict: order matters to it."""
        return next(iter(d))

    a = planbook.run(one("first_key", d={"a": 1, "b": 2}), tools=box, store=store)
    b = planbook.run(one("first_key", d={"b": 2, "a": 1}), tools=box, store=store)
    assert (a.outputs, b.outputs, cached(b)) == ({"s": "a"}, {"s": "b"}, set())


# ------------------------------------------------------------------ secrets

def test_a_short_secret_cannot_be_recovered_from_the_store(tmp_path: Path) -> None:
    """A 4-digit PIN: with a key made of it, trying all 10,000 finds it at once. So a call with a
    secret argument is not cached at all: the store holds no key made from it."""
    store = tmp_path / "runs.sqlite"
    box = Toolbox()

    @box.tool(cache=True)
    def unlock(user: str, password: str) -> str:
        """Open the door."""
        CALLS["unlock"] += 1
        return f"open for {user}"

    plan = one("unlock", user="ada", password="4821")
    for _ in range(2):
        result = planbook.run(plan, tools=box, store=store)
        assert result.status == "completed" and cached(result) == set()
    assert CALLS["unlock"] == 2  # asked for caching, and still run: the secret wins
    assert "'password' is a secret" in result.plan.step("s").notes
    keys = [k for (k,) in sqlite3.connect(store).execute("SELECT key FROM cache")]
    fingerprint = code_fingerprint(box["unlock"].fn)
    guesses = {step_cache_key("unlock", {"user": "ada", "password": f"{pin:04d}"}, version=fingerprint)
               for pin in range(10_000)}
    assert not guesses & set(keys)
    assert keys == []


def test_a_value_the_store_knows_as_secret_is_not_cached(tmp_path: Path) -> None:
    store = MemoryStore(secrets=["open-sesame-42"])
    box = Toolbox()

    @box.tool(cache=True)
    def echo(note: str) -> str:
        """Say it back."""
        CALLS["echo"] += 1
        return "ok"

    for _ in range(2):
        result = planbook.run(one("echo", note="open-sesame-42"), tools=box, store=store)
    assert CALLS["echo"] == 2 and cached(result) == set()
    assert "secret" in result.plan.step("s").notes


def test_planbook_run_help_says_the_rule(capsys: Any) -> None:
    from planbook.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--cache" in text and "--no-cache" in text and "off by default" in text
    assert "a clock, a price or a file would give yesterday's answer" in text
