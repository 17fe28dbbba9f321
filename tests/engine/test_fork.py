"""What-if runs: a fork keeps what its change cannot reach and runs the rest (planbook.fork).

Measured on the issue's plan: two chains of ten steps and a join. Each count is of real tool
calls; each rule of the README's "What-if runs" table has a test here."""

from __future__ import annotations

import collections
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import ForkError, Plan, Secret, Status
from planbook.data.lineage import Lineage

ROOT = Path(__file__).resolve().parents[2]
PATIENCE = 120.0
CALLS: collections.Counter[str] = collections.Counter()


@planbook.tool
def inc(x: int, by: int = 1) -> int:
    CALLS["inc"] += 1
    return x + by


@planbook.tool
def join(a: int, b: int) -> int:
    CALLS["join"] += 1
    return a * 1000 + b


TOOLS = [inc, join]


def chains(n: int = 10, *, extra: dict[str, Any] | None = None) -> Plan:
    steps: list[dict[str, Any]] = []
    for c in "ab":
        for i in range(1, n + 1):
            steps.append({"id": f"{c}{i}", "tool": "inc", "args": {"x": 0} if i == 1 else {"x": f"${c}{i - 1}"}})
    steps.append({"id": "join", "tool": "join", "args": {"a": f"$a{n}", "b": f"$b{n}"}})
    if extra:
        steps.append(extra)
    return Plan.model_validate({"id": "chains", "goal": "two chains and a join", "steps": steps})


@pytest.fixture()
def stored(tmp_path: Path) -> tuple[Path, planbook.RunResult]:
    store = tmp_path / "runs.sqlite"
    result = planbook.run(chains(), tools=TOOLS, store=store, max_steps=100)
    assert result.ok and result.outputs["join"] == 10010
    CALLS.clear()
    return store, result


def _calls() -> int:
    n = sum(CALLS.values())
    CALLS.clear()
    return n


def _rows_hash(store: Path, run_id: str) -> str:
    """Every stored byte of one run: its row, its steps and its log rows."""
    con = sqlite3.connect(store)
    try:
        digest = hashlib.sha256()
        row = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        digest.update(repr(row).encode())
        for step in con.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY position", (run_id,)):
            digest.update(repr(step).encode())
        key = con.execute("SELECT log_key FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        for log in con.execute("SELECT * FROM log WHERE id BETWEEN ? AND ? ORDER BY id", (key << 32, (key << 32) + 2**32 - 1)):
            digest.update(repr(log).encode())
        return digest.hexdigest()
    finally:
        con.close()


# --------------------------------------------------------------------------- the counts of "Done when"
def test_new_arguments_at_the_first_step_of_a_chain_run_that_chain_and_the_join_only(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a1", args={"x": 5}, tools=TOOLS, store=store)
    assert _calls() == 11
    assert child.ok and child.outputs["join"] == 15010
    assert [st.id for st in child.history] == [f"a{i}" for i in range(1, 11)] + ["join"]  # nothing of chain b ran
    assert all(child.plan.step(f"b{i}").notes.startswith("kept from run ") for i in range(1, 11))
    assert child.parent == parent.run_id and child.run_id != parent.run_id
    lineage = Lineage(**child.lineage)
    assert (lineage.at, lineage.how, lineage.kept, lineage.rerun) == (["a1"], "args", 10, 11)
    assert lineage.headline() == f"fork of run {parent.run_id} at a1 — x: 0 → 5; kept 10, re-running 11"


def test_a_pinned_result_runs_what_depends_on_it_and_not_the_step(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a1", result=100, tools=TOOLS, store=store)
    assert _calls() == 10
    assert child.outputs["join"] == 109010
    assert child.plan.step("a1").notes.startswith("pinned: ") and "a1" not in [st.id for st in child.history]


def test_reuse_ancestors_at_the_fifth_step_runs_everything_but_its_needs_as_langgraph_does(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a5", reuse="ancestors", tools=TOOLS, store=store)
    assert _calls() == 17
    assert child.outputs == parent.outputs


def test_a_control_fork_at_the_fifth_step_makes_seven_calls_and_changes_nothing(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a5", tools=TOOLS, store=store)
    assert _calls() == 7
    assert child.outputs == parent.outputs
    assert Lineage(**child.lineage).how == "control"


def test_reuse_identical_keeps_a_dependent_whose_resolved_call_is_unchanged(stored: Any) -> None:
    store, parent = stored
    # a1 pinned to what it returned: every dependent's call is the parent's, so none runs
    child = planbook.fork(parent.run_id, at="a1", result=1, reuse="identical", tools=TOOLS, store=store)
    assert _calls() == 0 and child.outputs == parent.outputs
    assert child.plan.step("a2").notes.startswith("kept from run ")
    # pinned to another value: the first dependent's call changes, so the chain runs
    planbook.fork(parent.run_id, at="a1", result=7, reuse="identical", tools=TOOLS, store=store)
    assert _calls() == 10


def test_a_fork_of_a_result_in_memory_keeps_the_parents_own_objects() -> None:
    parent = planbook.run(chains(), tools=TOOLS, max_steps=100)
    CALLS.clear()
    assert parent.run_id
    child = planbook.fork(parent, at="b3", args={"by": 2}, tools=TOOLS)
    assert _calls() == 9
    assert child.plan.step("a4").result is parent.plan.step("a4").result
    assert child.outputs["join"] == 10011


# --------------------------------------------------------------------------- the store
def test_the_parent_is_never_written_and_kept_results_are_references_not_copies(stored: Any) -> None:
    store, parent = stored
    before = _rows_hash(store, parent.run_id)
    child = planbook.fork(parent.run_id, at="a1", args={"x": 5}, tools=TOOLS, store=store)
    grandchild = planbook.fork(child.run_id, at="b2", args={"by": 3}, tools=TOOLS, store=store)
    planbook.load_run(grandchild.run_id, store=store)
    assert _rows_hash(store, parent.run_id) == before
    # a fork of a fork reads its kept results through its parent, from the run that made them
    again = planbook.load_run(grandchild.run_id, store=store)
    assert again.outputs == grandchild.outputs and again.outputs["join"] == 15012
    assert again.plan.step("a4").result == 5 + 4  # made by the child, kept by the grandchild
    con = sqlite3.connect(store)
    try:
        kinds = dict(con.execute("SELECT step_id, result_kind FROM steps WHERE run_id = ?", (child.run_id,)))
        logs = [r for (r,) in con.execute("SELECT record FROM log")]
    finally:
        con.close()
    assert all(kind == "kept" for sid, kind in kinds.items() if sid.startswith("b"))
    assert any('{"kept":"' + parent.run_id + '"}' in text for text in logs)


def test_the_store_grows_by_a_row_per_rerun_step_plus_a_constant(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    grown = []
    for n in (10, 40):
        parent = planbook.run(chains(n), tools=TOOLS, store=store, max_steps=1000)
        con = sqlite3.connect(store)
        rows = lambda: con.execute("SELECT (SELECT count(*) FROM log) + (SELECT count(*) FROM steps)").fetchone()[0]
        before = rows()
        planbook.fork(parent.run_id, at=f"a{n}", args={"by": 2}, tools=TOOLS, store=store)  # re-runs a{n} and join
        grown.append(rows() - before)
        con.close()
    assert grown[0] == grown[1]  # two steps re-run in both: the kept steps cost no row, however many


def test_a_fork_killed_mid_rerun_resumes_with_no_kept_step_run(tmp_path: Path) -> None:
    (tmp_path / "forktools.py").write_text(FORK_TOOLS)
    store = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "FORK_LOG": str(tmp_path / "calls.log")}
    done = subprocess.run([sys.executable, "-c", FORK_MAIN, "run", str(store)], env=env, capture_output=True,
                          text=True, timeout=PATIENCE)
    assert done.returncode == 0, done.stderr
    (tmp_path / "calls.log").unlink()
    proc = subprocess.Popen([sys.executable, "-c", FORK_MAIN, "fork", str(store)], env={**env, "FORK_GATE": "1"},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "calls.log"
    deadline = time.monotonic() + PATIENCE
    try:
        while "gate-waiting" not in (log.read_text() if log.exists() else ""):
            if proc.poll() is not None:
                pytest.fail(f"the fork ended before it was killed: {proc.communicate()}")
            if time.monotonic() > deadline:
                pytest.fail("the fork did not reach its gate")
            time.sleep(0.01)  # a poll interval, not a synchronisation
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=PATIENCE)
    assert log.read_text().split() == ["a1", "a2", "gate-waiting"]
    child = next(s for s in planbook.runs(store) if s.parent is not None)
    log.unlink()
    resumed = subprocess.run([sys.executable, "-m", "planbook.cli", "resume", child.run_id, "--store", str(store),
                              "--tools", "forktools:TOOLS"], env=env, capture_output=True, text=True, timeout=PATIENCE)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ran = log.read_text().split()
    assert ran == ["gate", "a3", "join"]  # the gate runs again (it was cut short); no step of chain b
    result = planbook.load_run(child.run_id, store=store)
    assert result.ok and result.outputs["join"] == 5 * 1000 + 2  # a1=3 a2=4 g=4 a3=5; b1=1 b2=2 kept


FORK_TOOLS = '''
import os, sys
import planbook

def _log(word):
    with open(os.environ["FORK_LOG"], "a") as f:
        f.write(word + "\\n")

@planbook.tool
def step(name: str, x: int) -> int:
    _log(name)
    return x + 1

@planbook.tool
def gate(x: int) -> int:
    if os.environ.get("FORK_GATE"):
        _log("gate-waiting")
        sys.stdin.read()
    _log("gate")
    return x

@planbook.tool
def join(a: int, b: int) -> int:
    _log("join")
    return a * 1000 + b

TOOLS = [step, gate, join]
'''

FORK_MAIN = r'''
import sys
import planbook, forktools
store = sys.argv[2]
steps = [{"id": "a1", "tool": "step", "args": {"name": "a1", "x": 0}},
         {"id": "a2", "tool": "step", "args": {"name": "a2", "x": "$a1"}},
         {"id": "g", "tool": "gate", "args": {"x": "$a2"}},
         {"id": "a3", "tool": "step", "args": {"name": "a3", "x": "$g"}},
         {"id": "b1", "tool": "step", "args": {"name": "b1", "x": 0}},
         {"id": "b2", "tool": "step", "args": {"name": "b2", "x": "$b1"}},
         {"id": "join", "tool": "join", "args": {"a": "$a3", "b": "$b2"}}]
plan = planbook.Plan.model_validate({"id": "gated", "goal": "a gated chain", "steps": steps})
if sys.argv[1] == "run":
    planbook.run(plan, tools=forktools.TOOLS, store=store)
else:
    [parent] = planbook.runs(store)
    planbook.fork(parent.run_id, at="a1", args={"x": 2}, tools=forktools.TOOLS, store=store)
'''


def test_runs_tree_lists_each_fork_under_its_parent(stored: Any) -> None:
    store, parent = stored
    one = planbook.fork(parent.run_id, at="a1", args={"x": 5}, tools=TOOLS, store=store)
    two = planbook.fork(one.run_id, at="b1", args={"x": 5}, tools=TOOLS, store=store)
    other = planbook.fork(parent.run_id, at="b10", tools=TOOLS, store=store)
    tree = [(s.run_id, s.depth, s.parent) for s in planbook.runs(store, tree=True)]
    assert tree == [(parent.run_id, 0, None), (one.run_id, 1, parent.run_id), (two.run_id, 2, one.run_id),
                    (other.run_id, 1, parent.run_id)]


def test_a_run_with_forks_cannot_be_deleted_before_them(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a1", args={"x": 5}, tools=TOOLS, store=store)
    from planbook.store import open_store

    with open_store(store) as opened:
        with pytest.raises(planbook.StoreError, match=f"has forks that keep its results \\({child.run_id}\\)"):
            opened.delete_run(parent.run_id)
        opened.delete_run(child.run_id)
        opened.delete_run(parent.run_id)


# --------------------------------------------------------------------------- the rules
def test_a_fork_point_a_later_revision_removed_says_which_revision_has_it() -> None:
    first = [planbook.Step(id="a", tool="fail_once"), planbook.Step(id="b", tool="echo", args={"text": "$a"})]
    fixed = [planbook.Step(id="c", tool="echo", args={"text": "fixed"})]

    @planbook.tool
    def fail_once() -> str:
        raise RuntimeError("down")

    @planbook.tool
    def echo(text: str) -> str:
        return text

    parent = planbook.run(Plan(id="p", goal="g", steps=first), tools=[fail_once, echo], on_failure="replan",
                          planner=planbook.ScriptedPlanner({None: first, "down": fixed}))
    assert parent.ok and [st.id for st in parent.plan.steps] == ["c"]
    with pytest.raises(ForkError, match=r"step 'b' is not in run .*'s last plan: revision 2 removed it \(revision 1 had it\)"):
        planbook.fork(parent, at="b", tools=[fail_once, echo])


def test_a_step_that_never_ran_is_no_fork_point_and_says_its_first_unmet_need() -> None:
    @planbook.tool
    def boom() -> int:
        raise RuntimeError("no")

    plan = Plan.model_validate({"id": "p", "steps": [{"id": "x", "tool": "boom"},
                                                     {"id": "y", "tool": "inc", "args": {"x": "$x"}}]})
    parent = planbook.run(plan, tools=[boom, inc])
    with pytest.raises(ForkError, match=r"step 'y' never ran in run .* \(it is (blocked|not_started); its first unmet need is 'x' \(failed\)\)"):
        planbook.fork(parent, at="y", tools=[boom, inc])


def test_a_failed_or_blocked_step_the_change_does_not_reach_runs_in_the_child() -> None:
    flaky = {"n": 0}

    @planbook.tool
    def sometimes(x: int) -> int:
        flaky["n"] += 1
        if flaky["n"] == 1:
            raise RuntimeError("first time fails")
        return x

    plan = chains(3, extra={"id": "s", "tool": "sometimes", "args": {"x": 1}})
    parent = planbook.run(plan, tools=[*TOOLS, sometimes], on_failure="skip", max_steps=100)
    assert parent.plan.step("s").status is Status.skipped
    CALLS.clear()
    child = planbook.fork(parent, at="a3", tools=[*TOOLS, sometimes])
    assert child.plan.step("s").status is Status.completed and flaky["n"] == 2


def test_kept_steps_do_not_count_against_max_steps(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a10", args={"by": 2}, tools=TOOLS, store=store, max_steps=2)
    assert child.ok and child.executions == 2


def test_a_kept_step_never_asks_again_and_a_rerun_step_asks(stored: Any) -> None:
    store, parent = stored
    asked: list[str] = []

    def decide(step: Any, context: Any) -> planbook.Decision:
        asked.append(step.id)
        return planbook.Decision.approve()

    planbook.fork(parent.run_id, at="a9", tools=TOOLS, store=store, approve=decide)
    assert asked == ["a9", "a10", "join"]


def test_a_rerun_step_whose_tool_is_not_idempotent_stops_before_anything_runs(tmp_path: Path) -> None:
    sent: list[int] = []
    box = planbook.Toolbox()
    box.tool(inc.__wrapped__ if hasattr(inc, "__wrapped__") else inc, name="inc")

    @box.tool(idempotent=False)
    def send(x: int) -> int:
        sent.append(x)
        return x

    plan = Plan.model_validate({"id": "p", "steps": [{"id": "a", "tool": "inc", "args": {"x": 1}},
                                                     {"id": "mail", "tool": "send", "args": {"x": "$a"}}]})
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(plan, tools=box, store=store)
    sent.clear()
    CALLS.clear()
    before = planbook.runs(store)
    with pytest.raises(ForkError, match=r"would run again 'mail', whose tool is declared idempotent=False.*"
                                        r"Nothing ran.*rerun=\['mail'\]"):
        planbook.fork(parent.run_id, at="a", args={"x": 2}, tools=box, store=store)
    assert sent == [] and _calls() == 0 and len(planbook.runs(store)) == len(before)
    child = planbook.fork(parent.run_id, at="a", args={"x": 2}, tools=box, store=store, rerun=["mail"])
    assert sent == [3] and child.ok


def test_an_edit_that_triggers_a_replan_is_a_revision_of_the_child_only(stored: Any) -> None:
    store, parent = stored

    @planbook.tool
    def picky(x: int) -> int:
        if x > 100:
            raise ValueError("too big")
        return x

    plan = chains(2, extra={"id": "p", "tool": "picky", "args": {"x": "$a2"}})
    parent = planbook.run(plan, tools=[*TOOLS, picky], store=store, max_steps=100)
    planner = planbook.ScriptedPlanner({None: plan.steps, "too big": [planbook.Step(id="q", tool="inc", args={"x": 0})]})
    child = planbook.fork(parent.run_id, at="a1", args={"x": 500}, tools=[*TOOLS, picky], store=store,
                          planner=planner, on_failure="replan")
    assert child.ok and child.replans == 1 and len(child.revisions) == 1
    assert planbook.load_run(parent.run_id, store=store).revisions == []


def test_a_pinned_result_of_another_shape_fails_the_dependent_that_cannot_take_it(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a9", result="not a number", tools=TOOLS, store=store)
    assert not child.ok
    assert child.plan.step("a10").status is Status.failed
    assert "a10" in (child.error or "")


def test_a_secret_in_a_forks_edit_stays_a_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    value = "fork-canary-Zq81-secret-value"
    monkeypatch.setenv("FORK_TOKEN", value)
    seen: list[str] = []

    @planbook.tool
    def call(token: str, n: int = 0) -> int:
        seen.append(token)
        return n

    plan = Plan.model_validate({"id": "p", "steps": [{"id": "c", "tool": "call", "args": {"token": "public"}},
                                                     {"id": "d", "tool": "inc", "args": {"x": "$c"}}]})
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(plan, tools=[call, inc], store=store)
    child = planbook.fork(parent.run_id, at="c", args={"token": Secret.env("FORK_TOKEN")}, tools=[call, inc],
                          store=store)
    assert seen[-1] == value
    assert value not in repr(child) and value not in str(child) and value not in repr(child.lineage)
    written = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite"))
    assert value.encode() not in written
    assert b'{"$secret":"env:FORK_TOKEN"}' in written
    assert planbook.load_run(child.run_id, store=store).plan.step("c").args["token"] == Secret.env("FORK_TOKEN")


# --------------------------------------------------------------------------- bad input: one line, nothing created
@pytest.mark.parametrize("kwargs, message", [
    ({"run": "nope"}, r"no run or plan 'nope' in the run store"),
    ({"at": "a11"}, r"has no step 'a11'; did you mean 'a1'?"),
    ({"at": "a1", "args": {"y": 1}}, r"the new arguments of step 'a1' do not fit tool 'inc'"),
    ({"at": "a1", "args": {"x": "five"}}, r"do not fit tool 'inc'"),
    ({"at": "a1", "args": {"x": 1}, "result": 3}, r"args= and result= cannot go together"),
    ({"at": "a1", "reuse": "all"}, r"reuse='all' is not a choice"),
])
def test_bad_input_is_one_line_and_creates_nothing(stored: Any, kwargs: dict[str, Any], message: str) -> None:
    store, parent = stored
    kwargs = {"run": parent.run_id, **kwargs}
    before = planbook.runs(store)
    with pytest.raises(ForkError, match=message) as caught:
        planbook.fork(kwargs.pop("run"), tools=TOOLS, store=store, **kwargs)
    assert "\n" not in str(caught.value)
    assert len(planbook.runs(store)) == len(before)


def test_no_store_at_the_path_is_said_and_nothing_is_created(tmp_path: Path) -> None:
    with pytest.raises(ForkError, match="there is no run store at"):
        planbook.fork("some-run", at="a1", store=tmp_path / "missing.sqlite", tools=TOOLS)
    assert list(tmp_path.iterdir()) == []


def test_args_on_an_agent_step_are_refused() -> None:
    agent = planbook.ScriptedAgent({"write": "done"})
    plan = Plan.model_validate({"id": "p", "steps": [{"id": "w", "agent": "writer", "task": "write"}]})
    parent = planbook.run(plan, agents={"writer": agent})
    with pytest.raises(ForkError, match="is a task for agent 'writer': it has no arguments to change"):
        planbook.fork(parent, at="w", args={"x": 1}, agents={"writer": agent})


def test_a_run_a_live_process_is_writing_is_refused_with_the_claims_wording(stored: Any) -> None:
    store, parent = stored
    con = sqlite3.connect(store)
    con.execute("UPDATE runs SET status = 'running', writer_pid = 1, writer_host = 'another-host' WHERE id = ?",
                (parent.run_id,))
    con.commit()
    con.close()
    with pytest.raises(ForkError, match="another-host.*fork it once that run has stopped"):
        planbook.fork(parent.run_id, at="a1", tools=TOOLS, store=store)


def test_a_plan_name_means_its_latest_stored_run(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork("chains", at="b10", tools=TOOLS, store=store)
    assert child.parent == parent.run_id
    grandchild = planbook.fork("chains", at="b10", tools=TOOLS, store=store)
    assert grandchild.parent == child.run_id  # the plan's latest run is now the fork


def test_a_plan_edit_forks_at_the_steps_whose_call_changed(stored: Any) -> None:
    store, parent = stored
    edited = chains()
    edited.step("b5").args = {"x": "$b4", "by": 10}
    edited.steps = [st for st in edited.steps]
    child = planbook.fork(parent.run_id, plan=edited, tools=TOOLS, store=store)
    assert _calls() == 7  # b5..b10 and the join
    assert Lineage(**child.lineage).at == ["b5"] and child.outputs["join"] == 10019


def test_background_gives_a_handle(stored: Any) -> None:
    store, parent = stored
    handle = planbook.fork(parent.run_id, at="a10", args={"by": 5}, tools=TOOLS, store=store, background=True,
                           view=False)
    result = handle.wait()
    assert result.ok and result.outputs["join"] == 14010 and result.parent == parent.run_id


def test_a_planner_plans_again_from_the_fork_point_and_the_rest_is_kept(stored: Any) -> None:
    store, parent = stored
    seen: list[Any] = []

    def planner(goal: str, history: list[Any], last_error: str | None) -> list[Any]:
        seen.append(([st.id for st in history], last_error))
        return [planbook.Step(id="a10", tool="inc", args={"x": "$a9", "by": 100}),
                planbook.Step(id="join", tool="join", args={"a": "$a10", "b": "$b10"})]

    child = planbook.fork(parent.run_id, at="a10", planner=planner, tools=TOOLS, store=store)
    assert _calls() == 2 and child.outputs["join"] == 109010
    kept_ids, why = seen[0]
    assert "a10" not in kept_ids and "join" not in kept_ids and len(kept_ids) == 19
    assert "plan again from step a10" in (why or "")
    lineage = Lineage(**child.lineage)
    assert lineage.how == "planner" and "re-planned from a10 by planner" in lineage.headline()


def test_a_planner_whose_plan_is_invalid_makes_no_fork(stored: Any) -> None:
    store, parent = stored
    before = len(planbook.runs(store))

    def planner(goal: str, history: list[Any], last_error: str | None) -> list[Any]:
        return [planbook.Step(id="a10", tool="nope", args={})]

    with pytest.raises(ForkError, match="the planner's plan from step a10 is invalid, so nothing ran"):
        planbook.fork(parent.run_id, at="a10", planner=planner, tools=TOOLS, store=store)
    assert len(planbook.runs(store)) == before and _calls() == 0


def test_a_fork_reads_its_parents_plan_only_and_it_equals_the_full_reads(stored: Any) -> None:
    store, parent = stored
    from planbook.store import open_store

    with open_store(store) as opened:
        whole = opened.load_run(parent.run_id)
        plan_only = opened.load_run(parent.run_id, plan_only=True)
    assert plan_only.history == [] and plan_only.events == []
    assert [st.model_dump() for st in plan_only.plan.steps] == [st.model_dump() for st in whole.plan.steps]
    assert plan_only.counters == whole.counters and plan_only.config == whole.config


def test_a_kept_model_step_makes_no_call_and_a_rerun_one_needs_its_own_recording(tmp_path: Path) -> None:
    """Model steps: a kept agent step is not run, so its model is not called; an agent step that
    runs again calls the model, and with a cassette that call needs a recording: the parent's
    cassette refuses a request it did not record, and a fork given its own cassette records it."""
    from planbook.llm import Cassette, LLMAgent
    from planbook.testing.fake_server import FakeOpenAIServer, Reply

    plan = Plan.model_validate({"id": "p", "goal": "write twice", "steps": [
        {"id": "n", "tool": "inc", "args": {"x": 1}},
        {"id": "w", "agent": "writer", "task": "write about ${n}", "needs": ["n"]},
        {"id": "m", "tool": "inc", "args": {"x": 10}},
        {"id": "v", "agent": "writer", "task": "write about ${m}", "needs": ["m"]}]})
    with FakeOpenAIServer([Reply.finish("about two"), Reply.finish("about eleven")]) as server:
        parent_tape = Cassette(tmp_path / "parent.json", mode="record")
        writer = LLMAgent("writer", "writes", model="fake", base_url=server.base_url, api_key="k", cassette=parent_tape)
        parent = planbook.run(plan, tools=TOOLS, agents=[writer])
        assert parent.ok and len(server.requests) == 2
        # the fork changes m: v runs again, w is kept (no call for it)
        replaying = LLMAgent("writer", "writes", model="fake", cassette=Cassette(tmp_path / "parent.json", mode="replay"))
        refused = planbook.fork(parent, at="m", args={"x": 20}, tools=TOOLS, agents=[replaying])
        assert refused.plan.step("v").status is Status.failed and "cassette" in (refused.error or "").lower()
        server.add(Reply.finish("about twenty-one"))
        own = Cassette(tmp_path / "fork.json", mode="record")
        recording = LLMAgent("writer", "writes", model="fake", base_url=server.base_url, api_key="k", cassette=own)
        child = planbook.fork(parent, at="m", args={"x": 20}, tools=TOOLS, agents=[recording])
        assert child.ok and len(server.requests) == 3  # one call: v's; w's model call was not repeated
        assert child.plan.step("w").notes.startswith("kept from run ")
        assert sum(1 for e in child.events if e.kind == "llm.call") == 1


def test_a_stored_secret_named_argument_must_be_given_again_and_the_original_plan_gives_it(tmp_path: Path) -> None:
    """The store never writes a secret-named literal's value: a fork that runs such a step again says
    which argument to give (nothing runs), and the plan the run was made from fills it in."""
    used: list[str] = []

    @planbook.tool
    def login(password: str, n: int = 0) -> int:
        used.append(password)
        return n

    plan = Plan.model_validate({"id": "p", "steps": [{"id": "c", "tool": "login", "args": {"password": "hunter2-xyz"}},
                                                     {"id": "d", "tool": "inc", "args": {"x": "$c"}}]})
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(plan, tools=[login, inc], store=store)
    used.clear()
    before = len(planbook.runs(store))
    with pytest.raises(ForkError, match=r"did not store .* c: password\. Give them again: fork at='c' with args= naming password"):
        planbook.fork(parent.run_id, at="c", args={"n": 1}, tools=[login, inc], store=store)
    assert used == [] and len(planbook.runs(store)) == before
    child = planbook.fork(parent.run_id, at="c", args={"password": "new-pass-123", "n": 1}, tools=[login, inc],
                          store=store)
    assert child.ok and used == ["new-pass-123"]
    again = planbook.fork(parent.run_id, at="c", plan=plan, tools=[login, inc], store=store)
    assert again.ok and used[-1] == "hunter2-xyz" and Lineage(**again.lineage).at == ["c"]


def test_a_forks_text_says_what_it_forked_above_its_plan(stored: Any) -> None:
    store, parent = stored
    child = planbook.fork(parent.run_id, at="a1", args={"x": 5}, tools=TOOLS, store=store)
    first = str(child).splitlines()[0]
    assert first == f"fork of run {parent.run_id} at a1 — x: 0 → 5; kept 10, re-running 11"
    assert not str(parent).startswith("fork of run")
