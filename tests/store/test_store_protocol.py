"""The run store protocol: one suite, run against the memory and the SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from planbook import RunNotFound, StoreError
from planbook.data.models import Event, Plan, PlanDiff, Status, Step
from planbook.engine.state import RunState
from planbook.store import CacheHit, MemoryStore, RunStore, Unrestorable, default_store_path, open_store, step_cache_key
from planbook.store.sqlite import SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Iterator[Any]:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


def reopen(store: Any) -> Any:
    """The same runs seen by a fresh store object (a new process, for SQLite)."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    return store


def make_plan(n: int = 3, goal: str = "make tea") -> Plan:
    steps = [Step(id="s1", task="boil water", tool="boil", args={"litres": 1})]
    steps += [Step(id=f"s{i}", task=f"step {i}", tool="use", args={"x": f"$s{i - 1}"}) for i in range(2, n + 1)]
    return Plan(id="tea", goal=goal, steps=steps)


def event(state: RunState, kind: str, step: str | None = None, **data: Any) -> None:
    state.events.append(Event(kind=kind, time=float(len(state.events)), step=step, revision=state.plan.revision,
                              data=data))


def execute(store: Any, run_id: str, state: RunState, step: Step, result: Any, ok: bool = True) -> None:
    """What the runner does for one execution, with its store calls."""
    step.set_state(status=Status.in_progress, attempts=step.attempts + 1, started_at=10.0, result=None, error=None)
    event(state, "step.started", step.id, attempt=step.attempts)
    store.record_step(run_id, step, state)
    if ok:
        step.set_state(status=Status.completed, result=result, finished_at=11.0)
    else:
        step.set_state(status=Status.failed, error=str(result), finished_at=11.0)
    state.history.append(step.snapshot())
    state.executions += 1
    event(state, "step.finished" if ok else "step.failed", step.id)
    store.record_step(run_id, step, state)


def started_run(store: Any, plan: Plan | None = None, **config: Any) -> tuple[str, RunState]:
    state = RunState(plan=(plan or make_plan()).copy_plan(fresh=True))
    run_id = store.create_run(state.plan, config={"max_steps": 12, "max_replans": 5, **config})
    event(state, "run.started")
    event(state, "plan.created", steps=[s.id for s in state.plan.steps])
    state.started = True
    store.save_state(run_id, state)
    return run_id, state


def test_both_stores_follow_the_protocol(store: Any) -> None:
    assert isinstance(store, RunStore)


def test_a_run_round_trips_with_its_state_history_events_and_config(store: Any) -> None:
    run_id, state = started_run(store, retries=2)
    s1, s2, _ = state.plan.steps
    execute(store, run_id, state, s1, {"water": "hot"})
    execute(store, run_id, state, s2, "oops", ok=False)
    state.retries_used["s2"] = 1  # changed in place, as the runner does
    state.last_error = "s2 failed: oops"
    store.record_step(run_id, s2, state)

    loaded = reopen(store).load_run(run_id)
    assert loaded.run_id == run_id and loaded.goal == "make tea"
    assert loaded.config == {"max_steps": 12, "max_replans": 5, "retries": 2}
    assert [(s.id, s.status) for s in loaded.plan.steps] == [
        ("s1", Status.completed), ("s2", Status.failed), ("s3", Status.not_started)]
    assert loaded.plan.steps[0].result == {"water": "hot"}
    assert loaded.plan.steps[1].error == "oops" and loaded.plan.steps[1].attempts == 1
    assert loaded.plan.steps[2].args == {"x": "$s2"} and loaded.plan.steps[2].needs == ["s2"]
    assert [(h.id, h.status, h.result) for h in loaded.history] == [
        ("s1", Status.completed, {"water": "hot"}), ("s2", Status.failed, None)]
    assert [e.kind for e in loaded.events] == [
        "run.started", "plan.created", "step.started", "step.finished", "step.started", "step.failed"]
    assert loaded.events[1].data == {"steps": ["s1", "s2", "s3"]}
    assert loaded.counters["executions"] == 2 and loaded.counters["retries_used"] == {"s2": 1}
    assert loaded.counters["last_error"] == "s2 failed: oops" and loaded.counters["started"] is True

    rebuilt = RunState(**loaded.state_fields())
    assert rebuilt.executions == len(rebuilt.history) == 2
    assert rebuilt.plan.id == "tea" and rebuilt.plan.revision == 1


def test_the_loaded_run_is_a_copy(store: Any) -> None:
    run_id, state = started_run(store)
    loaded = store.load_run(run_id)
    loaded.plan.steps[0].args["litres"] = 99
    loaded.plan.steps[0].status = Status.completed
    again = store.load_run(run_id)
    assert again.plan.steps[0].args == {"litres": 1} and again.plan.steps[0].status is Status.not_started


def test_a_resumed_run_goes_on_writing_from_the_loaded_state(store: Any) -> None:
    run_id, state = started_run(store)
    execute(store, run_id, state, state.plan.steps[0], 1)
    other = reopen(store)
    resumed = RunState(**other.load_run(run_id).state_fields())
    event(resumed, "run.started", resumed=True)
    execute(other, run_id, resumed, resumed.plan.steps[1], 2)
    final = reopen(other).load_run(run_id)
    assert [h.result for h in final.history] == [1, 2]
    assert [e.kind for e in final.events][-3:] == ["run.started", "step.started", "step.finished"]
    assert len(final.events) == len(resumed.events)


def test_a_state_behind_the_store_is_refused(store: Any) -> None:
    run_id, state = started_run(store)
    execute(store, run_id, state, state.plan.steps[0], 1)
    stale = RunState(plan=state.plan)  # not the loaded state: no history, no events
    with pytest.raises(StoreError, match="must continue from the state loaded"):
        store.record_step(run_id, stale.plan.steps[0], stale)


def test_a_replan_replaces_the_plan_and_keeps_the_history(store: Any) -> None:
    run_id, state = started_run(store)
    execute(store, run_id, state, state.plan.steps[0], "hot water")
    new_steps = [state.plan.steps[0], Step(id="t2", task="pour", tool="use", args={"x": "$s1"})]
    state.plan = Plan(id="tea", goal="make tea", steps=new_steps, revision=2)
    state.revisions.append(PlanDiff(from_revision=1, to_revision=2, removed=["s2", "s3"], added=["t2"],
                                    reason="kettle broke"))
    state.replans = 1
    event(state, "plan.diff", removed=["s2", "s3"], added=["t2"], revised=[])
    store.save_state(run_id, state)
    execute(store, run_id, state, state.plan.steps[1], "tea")

    loaded = reopen(store).load_run(run_id)
    assert [s.id for s in loaded.plan.steps] == ["s1", "t2"] and loaded.plan.revision == 2
    assert loaded.revisions[0].removed == ["s2", "s3"] and loaded.revisions[0].reason == "kettle broke"
    assert [h.id for h in loaded.history] == ["s1", "t2"]
    assert loaded.plan.steps[0].result == "hot water" and loaded.counters["replans"] == 1


def test_recording_a_step_that_is_not_in_the_stored_plan_says_save_state(store: Any) -> None:
    run_id, state = started_run(store)
    stray = Step(id="zz", tool="use")
    state.plan.steps.append(stray)
    with pytest.raises(StoreError, match="save_state must be called"):
        store.record_step(run_id, stray, state)


def test_unknown_run_ids_name_the_latest_runs(store: Any) -> None:
    with pytest.raises(RunNotFound, match="it holds no runs"):
        store.load_run("nope")
    run_id, _ = started_run(store)
    with pytest.raises(RunNotFound, match=f"the latest are {run_id}"):
        store.load_run("nope")
    with pytest.raises(LookupError):
        store.record_step("nope", Step(id="s1"), RunState(plan=make_plan()))


def test_runs_are_listed_newest_first_with_their_progress(store: Any) -> None:
    ids = []
    for i in range(3):
        run_id, state = started_run(store, plan=make_plan(goal=f"goal {i}"))
        for step in state.plan.steps[:i]:
            execute(store, run_id, state, step, i)
        ids.append(run_id)
    state.status, state.reason = "completed", "goal_met"
    event(state, "llm.call", model="m", prompt_tokens=3, completion_tokens=2)
    event(state, "llm.call", model="m", prompt_tokens=3, completion_tokens=2)
    store.save_state(ids[2], state)

    runs = reopen(store).list_runs()
    assert [r.run_id for r in runs] == ids[::-1]
    newest = runs[0]
    assert (newest.goal, newest.status, newest.reason) == ("goal 2", "completed", "goal_met")
    assert (newest.steps_done, newest.steps_total, newest.model_calls, newest.executions) == (2, 3, 2, 2)
    assert (runs[2].steps_done, runs[2].status, runs[2].model_calls) == (0, "running", 0)
    assert runs[0].started >= runs[1].started >= runs[2].started
    assert [r.run_id for r in store.list_runs(limit=2)] == ids[:0:-1]
    assert store.latest_run_id() == ids[2]


def test_listing_order_does_not_depend_on_ids(store: Any) -> None:
    first = store.create_run(make_plan(), config={}, run_id="zzz")
    second = store.create_run(make_plan(), config={}, run_id="aaa")
    assert [r.run_id for r in store.list_runs()] == [second, first]
    assert store.latest_run_id() == "aaa"


def test_an_empty_store_has_no_latest_run(store: Any) -> None:
    assert store.latest_run_id() is None and store.list_runs() == []


def test_a_run_id_is_used_once(store: Any) -> None:
    store.create_run(make_plan(), config={}, run_id="r1")
    with pytest.raises(StoreError, match="already in the run store"):
        store.create_run(make_plan(), config={}, run_id="r1")


def test_config_must_be_json_data(store: Any) -> None:
    with pytest.raises(StoreError, match="config must be JSON data"):
        store.create_run(make_plan(), config={"executor": object()})


def test_delete_forgets_a_run(store: Any) -> None:
    run_id, state = started_run(store)
    execute(store, run_id, state, state.plan.steps[0], 1)
    store.delete_run(run_id)
    assert store.list_runs() == []
    with pytest.raises(RunNotFound):
        store.load_run(run_id)
    with pytest.raises(RunNotFound):
        store.delete_run(run_id)


def test_events_appended_apart_from_the_state_count_as_its_next_events(store: Any) -> None:
    run_id, state = started_run(store)
    event(state, "llm.call", model="m", prompt_tokens=1, completion_tokens=1)
    store.append_events(run_id, state.events[-1:])
    store.save_state(run_id, state)  # nothing new in state.events: nothing written twice
    loaded = store.load_run(run_id)
    assert [e.kind for e in loaded.events] == ["run.started", "plan.created", "llm.call"]
    assert store.list_runs()[0].model_calls == 1
    assert loaded.result().usage.calls == 1


def test_several_steps_recorded_in_one_call(store: Any) -> None:
    """A parallel batch, or a completion recorded with the next step's start."""
    run_id, state = started_run(store)
    s1, s2, s3 = state.plan.steps
    s1.set_state(status=Status.completed, result=1)
    state.history.append(s1.snapshot())
    s2.set_state(status=Status.in_progress)
    store.record_step(run_id, [s1, s2], state)
    loaded = store.load_run(run_id)
    assert [s.status for s in loaded.plan.steps] == [Status.completed, Status.in_progress, Status.not_started]
    assert loaded.interrupted_steps() == ["s2"]


def test_the_stored_run_gives_a_run_result(store: Any) -> None:
    run_id, state = started_run(store)
    for step in state.plan.steps:
        execute(store, run_id, state, step, step.id.upper())
    state.status, state.reason = "completed", "goal_met"
    event(state, "run.finished", status="completed", reason="goal_met")
    store.save_state(run_id, state)
    result = store.load_run(run_id).result()
    assert result.ok and result.reason == "goal_met" and result.executions == 3
    assert result.outputs == {"s1": "S1", "s2": "S2", "s3": "S3"}
    assert result.max_steps == 12 and len(result.history) == 3
    assert "[✓]" in str(result)


def test_steps_to_rerun_are_the_unrestorable_results_something_still_needs(store: Any) -> None:
    plan = make_plan(4)
    run_id, state = started_run(store, plan=plan)
    s1, s2, s3, s4 = state.plan.steps
    for step in (s1, s2):
        execute(store, run_id, state, step, 0)
    loaded = store.load_run(run_id)
    s1, s2 = loaded.plan.steps[:2]
    s1.result, s2.result = Unrestorable("<lock>", "Lock"), Unrestorable("<lock>", "Lock")
    assert loaded.steps_to_rerun() == ["s1", "s2"]  # s3 needs s2, which (re-run) needs s1
    loaded.plan.steps[0].result = 5
    assert loaded.steps_to_rerun() == ["s2"]


def test_the_step_cache(store: Any) -> None:
    key = step_cache_key("use", {"x": 1})
    assert key is not None and store.cache_get(key) is None
    assert store.cache_put(key, {"out": [1, 2]}, tool="use", run_id="r1", step_id="s2")
    hit = reopen(store).cache_get(key)
    assert isinstance(hit, CacheHit)
    assert (hit.result, hit.tool, hit.run_id, hit.step_id) == ({"out": [1, 2]}, "use", "r1", "s2")
    assert store.cache_put(key, 7, tool="use", run_id="r2", step_id="s9")  # a newer result replaces it
    assert store.cache_get(key).result == 7
    assert store.cache_get(step_cache_key("use", {"x": 2})) is None
    assert store.clear_cache() == 1 and store.cache_get(key) is None


def test_default_location(tmp_path: Path) -> None:
    assert default_store_path(env={}, cwd=tmp_path) == tmp_path / ".planbook" / "runs.sqlite"
    assert default_store_path(env={"PLANBOOK_HOME": str(tmp_path / "home")}, cwd="/elsewhere") == (
        tmp_path / "home" / "runs.sqlite")
    assert default_store_path(env={"PLANBOOK_HOME": "  "}, cwd=tmp_path) == tmp_path / ".planbook" / "runs.sqlite"


def test_open_store(tmp_path: Path) -> None:
    assert open_store(None) is None
    assert isinstance(open_store(":memory:"), MemoryStore)
    mine = MemoryStore()
    assert open_store(mine) is mine
    path = tmp_path / "deep" / "folder" / "runs.sqlite"
    with open_store(path) as sqlite_store:  # type: ignore[union-attr]
        assert isinstance(sqlite_store, SQLiteStore) and path.is_file()
    with pytest.raises(TypeError, match="store= takes a path"):
        open_store(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not a path"):
        open_store("")


def test_a_goal_only_run_starts_with_no_steps(store: Any) -> None:
    """A planner's first plan comes later: revision 0 with no steps, then the plan."""
    state = RunState(plan=Plan(id="goal", goal="plan a trip", steps=[], revision=0))
    run_id = store.create_run(state.plan, config={})
    store.save_state(run_id, state)
    state.plan = make_plan()
    state.plan.revision = 1
    store.save_state(run_id, state)
    assert [s.id for s in store.load_run(run_id).plan.steps] == ["s1", "s2", "s3"]
    assert store.list_runs()[0].steps_total == 3
