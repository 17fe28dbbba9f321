"""One record of an execution: the engine, the store and the views read the same one.

``planbook.data.timeline.Execution`` is built by one builder from a run's events and history;
a run's ``RunResult.records``, the records of the run read back from a store and the bars of
every view are that type, and equal. A second type for what one execution was (the package had
three) is caught by the scan at the end.
"""

from __future__ import annotations

import ast
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, Runner, Step, Toolbox
from planbook.data.timeline import Execution, TimelineBuilder, build_timeline, records_of
from planbook.store import MemoryStore
from planbook.store.sqlite import SQLiteStore
from planbook.views.state import ViewState

WAIT = 10.0  # seconds a branch waits for the others at most (they meet at once when all is well)


def _parallel_plan_with_a_retry() -> tuple[Plan, Toolbox]:
    """A root, three branches that run at once (one fails its first call and is retried), a join."""
    meet = threading.Barrier(3, timeout=WAIT)
    tries: dict[str, int] = {}
    box = Toolbox()

    @box.tool
    def work(label: str, parts: list | None = None) -> str:
        """Branches meet at the barrier; ``flaky`` fails its first call."""
        tries[label] = tries.get(label, 0) + 1
        if label.startswith("b") or label == "flaky":
            if tries[label] == 1:
                meet.wait()
            if label == "flaky" and tries[label] == 1:
                raise RuntimeError("first call fails")
        return label

    plan = Plan(steps=[
        Step(id="root", tool="work", args={"label": "root"}),
        Step(id="b0", tool="work", args={"label": "b0"}, needs=["root"]),
        Step(id="b1", tool="work", args={"label": "b1"}, needs=["root"]),
        Step(id="flaky", tool="work", args={"label": "flaky"}, needs=["root"], on_failure="retry"),
        Step(id="join", tool="work", args={"label": "join", "parts": ["$b0", "$b1", "$flaky"]}),
    ])
    return plan, box


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Any:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


def test_the_engine_the_store_and_the_views_hold_one_record_of_each_execution(store: Any) -> None:
    plan, box = _parallel_plan_with_a_retry()
    runner = Runner(plan, tools=box, parallel=3, retries=1, store=store)
    result = runner.run()
    assert result.ok, result.error
    engine = result.records
    # the run had what this test is about: calls at the same time on different threads, and a retry
    assert [(r.step, r.attempt, r.ok) for r in engine if r.step == "flaky"] == [("flaky", 1, False), ("flaky", 2, True)]
    assert len({r.worker for r in engine if r.step in ("b0", "b1", "flaky") and r.attempt == 1}) == 3
    assert len(engine) == result.executions == len(result.history) == 6

    stored = planbook.load_run(store=store).records
    finished_view = ViewState.of(result).timeline
    live_view = ViewState.of(runner).timeline  # the live view's state of the runner, now it has ended

    for records in (engine, stored, finished_view, live_view):
        assert all(type(r) is Execution for r in records)
    assert stored == engine
    assert finished_view == engine and live_view == engine
    # field by field too (overlaps are the timeline's, filled where one is drawn)
    assert [r.as_dict() | {"overlaps": []} for r in stored] == [r.as_dict() | {"overlaps": []} for r in engine]
    # the result's timeline is made of the same records, with their overlaps
    assert result.timeline.executions == engine
    assert all(type(r) is Execution for r in result.timeline.executions)
    retried = next(r for r in result.timeline.executions if r.step == "flaky" and r.attempt == 1)
    assert retried.error == "RuntimeError: first call fails" and retried.ok is False


def test_the_records_come_from_one_builder_of_the_events_and_the_history() -> None:
    plan, box = _parallel_plan_with_a_retry()
    result = planbook.run(plan, tools=box, parallel=3, retries=1)
    assert result.ok, result.error
    built = TimelineBuilder(result.history).feed_all(result.events).executions
    assert records_of(result.history, result.events) == built == result.records
    # times are the calls' own, read where they ran (the history's), not the run's bookkeeping around them
    for record in result.records:
        step = next(h for h in result.history if h.id == record.step and h.attempts == record.attempt)
        assert (record.start, record.end) == (step.started_at, step.finished_at)
    assert build_timeline(result.records, result.history).executions == result.records


# ------------------------------------------------------------------ no second execution type
DATA_TIMELINE = Path(planbook.__file__).parent / "data" / "timeline.py"


def _execution_like_classes() -> list[str]:
    """Classes named like a record of an execution (``*Execution*``, ``*TimelineEntry*``), by module."""
    root = Path(planbook.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and ("Execution" in node.name or "TimelineEntry" in node.name):
                found.append(f"{path.relative_to(root.parent).as_posix()}:{node.name}")
    return found


def test_there_is_one_type_for_what_an_execution_was() -> None:
    assert _execution_like_classes() == ["planbook/data/timeline.py:Execution"]
    # one home too: the views use it, they do not hand it on (tests/architecture/test_no_shims.py)
    from planbook import views
    from planbook.data import models

    assert "Execution" not in views.__all__ and not hasattr(views, "Execution")
    assert not hasattr(models, "TimelineEntry")


def test_an_executors_batch_keeps_each_calls_own_times(store: Any) -> None:
    """Calls handed to an executor as one batch run one after another on its worker: each
    record is its call's own time there (no overlaps), live, stored and in the views, as
    ``RunResult.records`` were before they were built from events (the steps' own times are the
    run's, from joining the batch to its end, so every call of a batch overlapped every other)."""
    box = Toolbox()

    @box.tool
    def work(label: str) -> str:
        return label

    plan = Plan(steps=[Step(id=f"s{i}", tool="work", args={"label": f"s{i}"}) for i in range(4)])
    with ThreadPoolExecutor(max_workers=1) as pool:
        runner = Runner(plan, tools=box, executor=pool, store=store)
        result = runner.run()
    assert result.ok, result.error
    records = result.records
    assert [r.step for r in records] == ["s0", "s1", "s2", "s3"]
    assert len({r.worker for r in records}) == 1  # one batch on one of the pool's threads
    for before, after in zip(records, records[1:]):
        assert before.end <= after.start  # one after another
    assert [e.overlaps for e in result.timeline.executions] == [[]] * 4
    assert planbook.load_run(store=store).records == records
    assert ViewState.of(result).timeline == records == ViewState.of(runner).timeline


def test_the_critical_path_waits_for_what_each_execution_needed_when_it_ran() -> None:
    """After a replan gives ``x`` other needs, its first execution still waited only for what it
    needed then (``a``), not for the later plan's ``b``: the path is b → x's second call."""
    now = [0.0]
    box = Toolbox()
    calls = {"x": 0}

    @box.tool
    def quick() -> str:
        now[0] += 1.0
        return "a"

    @box.tool
    def long() -> str:
        now[0] += 5.0
        return "b"

    @box.tool
    def use(v: str = "") -> str:
        now[0] += 1.0
        calls["x"] += 1
        if calls["x"] == 1:
            raise RuntimeError("x fails")
        return v

    def planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        return [Step(id="x", tool="use", args={"v": "$b"}, needs=["b"])]

    plan = Plan(steps=[Step(id="a", tool="quick"), Step(id="b", tool="long"),
                       Step(id="x", tool="use", args={"v": "$a"}, needs=["a"])])
    result = planbook.run(plan, tools=box, planner=planner, on_failure="replan", clock=lambda: now[0])
    assert result.ok, result.error
    assert [(h.id, h.needs) for h in result.history] == [("a", []), ("b", []), ("x", ["a"]), ("x", ["b"])]
    timeline = result.timeline
    assert timeline.critical_path == [2, 4]  # b, then x's second call (its first waited for a only)
    assert timeline.critical == 6.0 and timeline.wall == 8.0
