"""Runs that survive: a process killed part way, resumed in another; Ctrl-C; the step cache
through ``planbook.run(store=...)``; results the store cannot keep; secrets; listing runs."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import planbook
from helpers import store_files
from planbook import Plan, ResumeError, RunNotFound, RunResult, Step, StoreFormatError, Toolbox
from planbook.data.models import Status
from planbook.store import Unrestorable
from planbook.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------- a real crash

#: the tools and plans of the crash tests, importable by the subprocesses (written to tmp_path)
CRASH_TOOLS = '''
"""Every call of ``work`` appends "STEP PID" to $CRASH_LOG; ``gate`` ends each plan and,
with $CRASH_GATE set, waits for stdin first, so the process killed by the test is always
still running when its log reaches the line the test waits for. With $CRASH_GATE set,
``work`` also takes a few random milliseconds, like a real tool, so that the kill lands
at different points (in a call, between calls, in a store write): it decides nothing."""
import os
import random
import sys
import time

from planbook import Plan, Step, Toolbox

tools = Toolbox()


def _log(step):
    with open(os.environ["CRASH_LOG"], "a") as log:  # one short write with O_APPEND: whole lines
        log.write(f"{step} {os.getpid()}\\n")


# cache=False: it has a side effect (the log), and the resume alone must keep the counts right
@tools.tool(cache=False)
def work(step: str, inputs: list = ()) -> int:
    """Log the call; the result counts the calls upstream (so stored results must flow)."""
    if os.environ.get("CRASH_GATE"):
        time.sleep(random.uniform(0, 0.004))
    _log(step)
    return 1 + sum(inputs)


@tools.tool(cache=False)
def gate(inputs: list) -> int:
    if os.environ.get("CRASH_GATE"):
        sys.stdin.read()  # until killed
    _log("gate")
    return sum(inputs)


def plan(shape):
    if shape == "chain":  # one step after another
        steps = [Step(id=f"s{i}", tool="work", args={"step": f"s{i}", "inputs": [f"$s{i - 1}"] if i else []})
                 for i in range(24)]
        ends = ["$s23"]
    else:  # four independent branches of six steps, joined at the end
        steps, ends = [], []
        for b in range(4):
            for i in range(6):
                sid = f"b{b}_{i}"
                steps.append(Step(id=sid, tool="work", args={"step": sid, "inputs": [f"$b{b}_{i - 1}"] if i else []}))
            ends.append(f"$b{b}_5")
    steps.append(Step(id="gate", tool="gate", args={"inputs": ends}))
    return Plan(id=shape, goal=f"a {shape} of logged steps", steps=steps)
'''

CRASH_MAIN = r"""
import json, sys
import planbook, crashtools

what, store, shape, parallel = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if what == "run":
    result = planbook.run(crashtools.plan(shape), tools=crashtools.tools, store=store, parallel=parallel,
                          max_steps=100)
else:
    result = planbook.resume(store=store, tools=crashtools.tools)
print(json.dumps({"status": result.status, "reason": result.reason, "outputs": result.outputs,
                  "executions": result.executions, "history": len(result.history)}))
"""

#: the results of a run that was never interrupted
EXPECTED = {
    "chain": {**{f"s{i}": i + 1 for i in range(24)}, "gate": 24},
    "branches": {**{f"b{b}_{i}": i + 1 for b in range(4) for i in range(6)}, "gate": 24},
}
#: a generous bound for a busy machine; the tests wait on the log, never on the clock
PATIENCE = 120.0


def _lines(log: Path) -> Counter[str]:
    text = log.read_text() if log.exists() else ""
    return Counter(line.split()[0] for line in text.splitlines(keepends=True) if line.endswith("\n"))


def _start(tmp_path: Path, what: str, store: Path, shape: str, parallel: int, crash: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "CRASH_LOG": str(tmp_path / "calls.log")}
    env.pop("CRASH_GATE", None)
    if crash:
        env["CRASH_GATE"] = "1"
    return subprocess.Popen([sys.executable, "-c", CRASH_MAIN, what, str(store), shape, str(parallel)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _kill_after(proc: subprocess.Popen[str], log: Path, lines: int) -> None:
    """SIGKILL once the log holds ``lines`` lines (the process goes on meanwhile: a random point)."""
    deadline = time.monotonic() + PATIENCE
    try:
        while sum(_lines(log).values()) < lines:
            if proc.poll() is not None:
                pytest.fail(f"the process ended before it was killed: {proc.communicate()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the log did not reach {lines} lines in {PATIENCE:g} s")
            time.sleep(0.002)  # a poll interval, not a synchronisation
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=PATIENCE)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize(("shape", "parallel"), [("chain", 1), ("branches", 4)], ids=["serial", "parallel-4"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_killed_run_resumes_in_a_new_process_and_runs_each_step_once(
    tmp_path: Path, shape: str, parallel: int, seed: int
) -> None:
    """Killed twice at random points (the run, then its first resume); a third process
    finishes it. A step completed in the store never runs again; a step the store has
    not seen start has not run; only a step in progress at a kill may run once more."""
    (tmp_path / "crashtools.py").write_text(CRASH_TOOLS)
    store, log = tmp_path / "runs.sqlite", tmp_path / "calls.log"
    total = len(EXPECTED[shape])
    rng = random.Random(f"{shape}-{seed}")
    may_repeat: Counter[str] = Counter()
    completed_at_kill: dict[str, int] = {}
    for n in range(2):
        logged = sum(_lines(log).values())
        left = total - 1 - len(completed_at_kill)  # work steps still to log a line (the gate logs at the end)
        if left < 1:
            break
        lines = logged + rng.randint(1, left)
        _kill_after(_start(tmp_path, "run" if n == 0 else "resume", store, shape, parallel, crash=True), log, lines)
        counts = _lines(log)
        with SQLiteStore(store) as opened:
            stored = opened.load_run(opened.latest_run_id() or "")
        context = f"kill {n + 1} (after {lines} lines, seed {seed}): {dict(counts)}"
        for step in stored.plan.steps:
            if step.status is Status.completed:
                assert counts[step.id] >= 1, context
                completed_at_kill.setdefault(step.id, counts[step.id])
            elif step.status is Status.in_progress:
                may_repeat[step.id] += 1
            else:  # the durability rule: a call starts only once the store says so
                assert step.status is Status.not_started and counts[step.id] == 0, (step.id, context)
        assert len(stored.interrupted_steps()) <= parallel, context

    proc = _start(tmp_path, "resume", store, shape, parallel, crash=False)
    out, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert (result["status"], result["reason"]) == ("completed", "goal_met"), result
    assert result["outputs"] == EXPECTED[shape]  # stored results flowed into the later steps
    assert result["executions"] == result["history"] == total

    counts = _lines(log)
    assert set(counts) == set(EXPECTED[shape])
    for step_id, done in completed_at_kill.items():
        assert counts[step_id] == done, f"{step_id} ran again after the store had it completed: {dict(counts)}"
    for step_id in EXPECTED[shape]:
        # once, or once more for each kill that found it in progress
        assert 1 <= counts[step_id] <= 1 + may_repeat[step_id], (step_id, dict(counts), dict(may_repeat))


# ------------------------------------------------------- in one process: helpers

class Calls:
    """Tools that count their calls; a test says which call raises what, or what else
    happens during a step's next call (once)."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.box = Toolbox()
        self.raise_once: dict[str, BaseException] = {}
        self.during: dict[str, Callable[[], None]] = {}
        self.source_value = 1
        calls = self

        def note(step: str) -> None:
            calls.made.append(step)
            if step in calls.during:
                calls.during.pop(step)()
            if step in calls.raise_once:
                raise calls.raise_once.pop(step)

        @self.box.tool(version="1")  # it captures `calls` (no content form): keyed by its version
        def add(step: str, a: int = 0, b: int = 0) -> int:
            """a + b."""
            note(step)
            return a + b

        @self.box.tool(cache=False)
        def source(step: str) -> int:
            """A value from outside (it may change between runs): never cached."""
            note(step)
            return calls.source_value

        @self.box.tool(idempotent=False, cache=False)
        def send(step: str, to: str) -> str:
            """Send a message: running it twice sends it twice."""
            note(step)
            return f"sent to {to}"

        @self.box.tool(version="1")  # it captures `calls` (no content form): keyed by its version
        def make(step: str, kind: str) -> Any:
            """A value that is neither JSON nor picklable."""
            note(step)
            return threading.Lock() if kind == "lock" else (lambda: 3)  # a local function: no pickle either

        @self.box.tool(version="1")  # it captures `calls` (no content form): keyed by its version
        def kind_of(step: str, value: Any) -> str:
            """The type of a value (a string stand-in would be 'str')."""
            note(step)
            return type(value).__name__

        @self.box.tool
        def login(step: str, user: str, password: str, api_key: str) -> str:
            """Refuses, echoing what it was given (as careless error messages do)."""
            note(step)
            raise PermissionError(f"login refused for {user}:{password} with key {api_key}")

    def count(self, step: str) -> int:
        return self.made.count(step)


def chain(**args: Any) -> Plan:
    """a -> b -> c (c adds b to a literal); ``args`` overrides a step's args."""
    steps = [
        Step(id="a", tool="add", args={"step": "a", "a": 1, "b": 2}),
        Step(id="b", tool="add", args={"step": "b", "a": "$a", "b": 10}),
        Step(id="c", tool="add", args={"step": "c", "a": "$b", "b": 100}),
    ]
    for step in steps:
        step.args.update(args.get(step.id, {}))
    return Plan(id="chain", goal="add things up", steps=steps)


def crash_copy(store: Path, to: Path) -> Callable[[], None]:
    """What a crash at this moment would leave: a copy of the store as committed so far."""

    def copy() -> None:
        source, target = sqlite3.connect(store), sqlite3.connect(to)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()

    return copy


def cached(result: RunResult) -> dict[str, str]:
    """step id -> the run its cached result came from."""
    return {e.step or "": e.data["from_run"] for e in result.events if e.kind == "step.cached"}


# --------------------------------------------------------------------- resume

def test_a_run_stopped_by_ctrl_c_resumes_where_it_was(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    calls.raise_once["b"] = KeyboardInterrupt()
    stopped = planbook.run(chain(), tools=calls.box, store=store)
    assert (stopped.status, stopped.outputs) == ("interrupted", {"a": 3})
    [listed] = planbook.runs(store)
    assert (listed.status, listed.steps_done, listed.steps_total) == ("interrupted", 1, 3)

    resumed = planbook.resume(store=store, tools=calls.box)
    assert (resumed.status, resumed.reason) == ("completed", "goal_met")
    assert resumed.outputs == {"a": 3, "b": 13, "c": 113}
    assert calls.made == ["a", "b", "b", "c"]  # b was cut short, so it ran again; a did not
    assert resumed.executions == len(resumed.history) == 3
    kinds = [e.kind for e in resumed.events]
    assert kinds[:2] == ["run.started", "plan.created"] and kinds.count("run.started") == 2  # events go on
    assert planbook.load_run(store=store).outputs == resumed.outputs


def test_resuming_a_completed_run_returns_it_and_runs_nothing(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    done = planbook.run(chain(), tools=calls.box, store=store)
    events = len(done.events)
    again = planbook.resume(store=store, tools=calls.box)
    assert (again.status, again.outputs, len(again.events)) == ("completed", done.outputs, events)
    assert calls.made == ["a", "b", "c"]
    assert len(planbook.load_run(store=store).events) == events  # nothing was added to the store
    with pytest.raises(ResumeError, match="already completed"):
        planbook.resume(store=store, tools=calls.box, run=False)


def test_a_non_idempotent_step_in_progress_at_a_crash_is_not_rerun_without_asking(tmp_path: Path) -> None:
    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    plan = Plan(id="mail", goal="send the report", steps=[
        Step(id="report", tool="add", args={"step": "report", "a": 1}),
        Step(id="mail", tool="send", args={"step": "mail", "to": "boss"}, needs=["report"]),
        Step(id="after", tool="add", args={"step": "after", "a": "$report"}, needs=["mail"]),
    ])
    calls.during["mail"] = crash_copy(store, crashed)  # the process dies while the mail is going out
    planbook.run(plan, tools=calls.box, store=store)
    before = crashed.read_bytes()

    with pytest.raises(ResumeError) as info:
        planbook.resume(store=crashed, tools=calls.box)
    message = str(info.value)
    assert "'mail'" in message and "idempotent=False" in message and "rerun=['mail']" in message
    assert calls.made == ["report", "mail", "after"] and crashed.read_bytes() == before  # nothing ran or changed

    resumed = planbook.resume(store=crashed, tools=calls.box, rerun=["mail"])
    assert (resumed.status, resumed.outputs["mail"]) == ("completed", "sent to boss")
    assert calls.made == ["report", "mail", "after", "mail", "after"]  # report was not run again
    assert resumed.executions == len(resumed.history) == 3


def test_a_resume_cut_short_before_its_first_call_still_asks_about_the_step(tmp_path: Path) -> None:
    """A resume writes nothing before its first call: the step a crash cut short stays in
    progress in the store, so a second crash still stops at idempotent=False, and the
    executions are not counted down twice."""
    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    plan = Plan(id="mail", goal="send the report", steps=[
        Step(id="report", tool="add", args={"step": "report", "a": 1}),
        Step(id="mail", tool="send", args={"step": "mail", "to": "boss"}, needs=["report"]),
    ])
    calls.during["mail"] = crash_copy(store, crashed)
    planbook.run(plan, tools=calls.box, store=store)
    runner = planbook.resume(store=crashed, tools=calls.box, rerun=["mail"], run=False)
    assert runner.state.executions == len(runner.state.history) == 1
    runner.advance()  # it starts, then "the process dies" before the call is recorded
    with pytest.raises(ResumeError, match="rerun=\\['mail'\\]"):
        planbook.resume(store=crashed, tools=calls.box)
    again = planbook.resume(store=crashed, tools=calls.box, rerun=["mail"])
    assert again.ok and again.executions == len(again.history) == 2


def test_a_rerun_naming_no_step_is_refused(tmp_path: Path) -> None:
    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    calls.during["b"] = crash_copy(store, crashed)
    planbook.run(chain(), tools=calls.box, store=store)
    with pytest.raises(ResumeError, match="rerun names no step of run .*: nope"):
        planbook.resume(store=crashed, tools=calls.box, rerun=["nope"])


def test_the_step_budget_goes_on_from_where_the_crash_left_it(tmp_path: Path) -> None:
    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    plan = Plan(id="long", steps=[Step(id=f"s{i}", tool="add", args={"step": f"s{i}", "a": i}) for i in range(5)])
    calls.during["s2"] = crash_copy(store, crashed)
    planbook.run(plan, tools=calls.box, store=store, max_steps=4, cache=False)
    resumed = planbook.resume(store=crashed, tools=calls.box)
    assert (resumed.status, resumed.reason) == ("failed", "step_budget")  # 4 in all, not 4 more
    assert resumed.executions == len(resumed.history) == 4 and resumed.max_steps == 4
    assert "s4" not in resumed.outputs and calls.made[-2:] == ["s2", "s3"]


def test_a_secret_argument_of_an_unfinished_step_is_taken_from_the_plan(tmp_path: Path) -> None:
    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    seen: list[str] = []
    calls.box.add(lambda step, password: seen.append(password) or "in", name="enter")
    plan = Plan(id="s", steps=[Step(id="first", tool="add", args={"step": "first"}),
                               Step(id="in", tool="enter", args={"step": "in", "password": "open-sesame-42"},
                                    needs=["first"])])
    calls.during["first"] = crash_copy(store, crashed)
    planbook.run(plan, tools=calls.box, store=store)
    with pytest.raises(ResumeError, match="did not store some args .* in: password.*plan="):
        planbook.resume(store=crashed, tools=calls.box)
    resumed = planbook.resume(store=crashed, tools=calls.box, plan=plan)
    assert resumed.status == "completed" and seen == ["open-sesame-42", "open-sesame-42"]
    # resume() closed the store it opened: its log went into the file (or is still beside it)
    assert b"open-sesame-42" not in b"".join(p.read_bytes() for p in crashed.parent.glob(f"{crashed.name}*"))


# ---------------------------------------------------------------- step cache

def test_the_same_plan_again_reuses_every_step_and_names_the_run(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    first = planbook.run(chain(), tools=calls.box, store=store, cache=True)
    first_id = planbook.runs(store)[0].run_id
    second = planbook.run(chain(), tools=calls.box, store=store, cache=True)
    assert calls.made == ["a", "b", "c"]
    assert second.status == "completed" and second.outputs == first.outputs
    assert cached(second) == {"a": first_id, "b": first_id, "c": first_id}
    assert all(st.notes == f"cached: the result of step {st.id} in run {first_id}" for st in second.plan.steps)
    assert [r.status for r in planbook.runs(store)] == ["completed", "completed"]


def test_a_changed_argument_misses_and_so_do_the_steps_after_it(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    planbook.run(chain(), tools=calls.box, store=store, cache=True)
    edited = planbook.run(chain(b={"b": 20}), tools=calls.box, store=store, cache=True)  # step b edited
    assert set(cached(edited)) == {"a"}
    assert edited.outputs == {"a": 3, "b": 23, "c": 123}
    assert calls.made == ["a", "b", "c", "b", "c"]
    same_result = planbook.run(chain(a={"a": 2, "b": 1}), tools=calls.box, store=store, cache=True)  # a changed, same sum
    assert set(cached(same_result)) == {"b", "c"}  # keys are made of the resolved args
    assert calls.made[-1] == "a" and same_result.outputs == {"a": 3, "b": 13, "c": 113}


def test_a_changed_upstream_result_misses_for_the_dependent_step(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    plan = Plan(id="p", steps=[Step(id="s", tool="source", args={"step": "s"}),
                               Step(id="d", tool="add", args={"step": "d", "a": "$s", "b": 1})])
    planbook.run(plan, tools=calls.box, store=store, cache=True)
    unchanged = planbook.run(plan, tools=calls.box, store=store, cache=True)
    assert set(cached(unchanged)) == {"d"}  # the source ran again (cache=False) and said the same
    calls.source_value = 5
    changed = planbook.run(plan, tools=calls.box, store=store, cache=True)
    assert cached(changed) == {} and changed.outputs == {"s": 5, "d": 6}
    assert calls.made == ["s", "d", "s", "s", "d"]


def test_cache_false_for_a_run_or_a_tool_reuses_nothing(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    planbook.run(chain(), tools=calls.box, store=store, cache=True)
    fresh = planbook.run(chain(), tools=calls.box, store=store, cache=False)
    assert cached(fresh) == {} and calls.made == ["a", "b", "c"] * 2
    plan = Plan(id="m", steps=[Step(id="m", tool="send", args={"step": "m", "to": "x"})])
    planbook.run(plan, tools=calls.box, store=store, cache=True)
    again = planbook.run(plan, tools=calls.box, store=store, cache=True)
    assert cached(again) == {} and calls.count("m") == 2


def test_a_new_tool_version_misses(tmp_path: Path) -> None:
    store, made = tmp_path / "runs.sqlite", []

    def box(version: str) -> Toolbox:
        tools = Toolbox()

        @tools.tool(version=version)
        def measure(x: int) -> int:
            made.append(version)
            return x * 2

        return tools

    plan = Plan(id="v", steps=[Step(id="m", tool="measure", args={"x": 4})])
    planbook.run(plan, tools=box("1"), store=store, cache=True)
    assert set(cached(planbook.run(plan, tools=box("1"), store=store, cache=True))) == {"m"}
    assert cached(planbook.run(plan, tools=box("2"), store=store, cache=True)) == {}
    assert made == ["1", "2"]


# ------------------------------------------------------ results it cannot keep

@pytest.mark.parametrize("kind", ["lock", "function"])
def test_a_result_that_cannot_be_stored_is_made_again_when_a_resumed_step_needs_it(tmp_path: Path, kind: str) -> None:
    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    plan = Plan(id="u", steps=[
        Step(id="make", tool="make", args={"step": "make", "kind": kind}),
        Step(id="other", tool="add", args={"step": "other", "a": 1}),
        Step(id="use", tool="kind_of", args={"step": "use", "value": "$make"}, needs=["other"]),
    ])
    calls.during["use"] = crash_copy(store, crashed)
    whole = planbook.run(plan, tools=calls.box, store=store, cache=True)
    expected = "lock" if kind == "lock" else "function"
    assert whole.status == "completed" and whole.outputs["use"] == expected

    stored = planbook.load_run(store=crashed).outputs["make"]
    assert isinstance(stored, Unrestorable) and stored.type  # says what it was, and that it is gone
    resumed = planbook.resume(store=crashed, tools=calls.box)
    assert resumed.status == "completed" and resumed.outputs["use"] == expected  # the object, not a string
    assert calls.made == ["make", "other", "use", "make", "use"]  # "other" was kept
    assert resumed.executions == len(resumed.history)

    again = planbook.run(plan, tools=calls.box, store=store, cache=True)  # never cached: it could not be given back
    assert set(cached(again)) == {"other"} and again.outputs["use"] == expected


# ------------------------------------------------------------------- secrets

def test_secret_arguments_never_reach_the_store_file(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    password, key = "hunter2-Zq81-correct-horse", "AKIA-7f3e-91bd-unique-key"
    plan = Plan(id="s", goal="log in", steps=[
        Step(id="in", tool="login", args={"step": "in", "user": "ada", "password": password, "api_key": key}),
    ])
    result = planbook.run(plan, tools=calls.box, store=store)
    # the tool got them, and its message echoed them: the run's own error shows *** instead
    assert result.status == "failed"
    assert result.plan.steps[0].error == "PermissionError: login refused for ada:*** with key ***"
    assert password not in (result.error or "") and key not in (result.error or "")
    # planbook.run closed the store it opened: the last connection moved the log into the file
    written = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite"))
    assert b"login refused for ada" in written
    for secret in (password, key):
        assert secret.encode() not in written, f"{secret} is in the store file"
    stored = planbook.load_run(store=store)
    assert "ada" in str(stored.plan.steps[0].error)  # the rest of the message was kept


# -------------------------------------------------------- files it must refuse

def _newer(path: Path) -> None:
    planbook.run(chain(), tools=Calls().box, store=path)
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = version + 1")
    con.commit()
    con.close()



def _corrupt(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 40)


@pytest.mark.parametrize(("damage", "match"), [(_corrupt, "not a planbook run store, or it is damaged"),
                                               (_newer, "written by a newer planbook")])
def test_a_corrupt_or_newer_store_is_refused_clearly_and_left_unchanged(
    tmp_path: Path, damage: Callable[[Path], None], match: str
) -> None:
    path, calls = tmp_path / "runs.sqlite", Calls()
    damage(path)
    # the database and its write-ahead log; the -shm file is SQLite's index of the log, which
    # any reader (even a read-only one) writes
    files = store_files(tmp_path)
    for attempt in (lambda: planbook.run(chain(), tools=calls.box, store=path),
                    lambda: planbook.resume(store=path, tools=calls.box),
                    lambda: planbook.runs(path),
                    lambda: planbook.load_run(store=path)):
        with pytest.raises(StoreFormatError, match=match) as info:
            attempt()
        assert str(path) in str(info.value) and "left as it is" in str(info.value)
    assert calls.made == []  # refused before anything ran
    assert store_files(tmp_path) == files


# ------------------------------------------------------------------ inspection

def test_runs_lists_each_run_and_load_run_gives_its_result(tmp_path: Path) -> None:
    store, calls = tmp_path / "runs.sqlite", Calls()
    calls.raise_once["b"] = KeyboardInterrupt()
    planbook.run(chain(), tools=calls.box, store=store)
    planbook.run(chain(c={"b": 7}), tools=calls.box, store=store, cache=False)
    failing = Plan(id="f", goal="log in and sum", steps=[
        Step(id="in", tool="login", args={"step": "in", "user": "u", "password": "p", "api_key": "k"}),
        Step(id="after", tool="add", args={"step": "after"}, needs=["in"]),
    ])
    planbook.run(failing, tools=calls.box, store=store)

    listed = planbook.runs(store)
    assert [(r.goal, r.status, r.reason, r.steps_done, r.steps_total) for r in listed] == [
        ("log in and sum", "failed", "aborted", 0, 2),
        ("add things up", "completed", "goal_met", 3, 3),
        ("add things up", "interrupted", "interrupted", 1, 3),
    ]
    assert len({r.run_id for r in listed}) == 3 and listed[0].started >= listed[-1].started
    assert len(planbook.runs(store, limit=1)) == 1

    middle = planbook.load_run(listed[1].run_id, store=store)
    assert isinstance(middle, RunResult)
    assert (middle.status, middle.outputs) == ("completed", {"a": 3, "b": 13, "c": 20})
    assert middle.executions == len(middle.history) == 3
    assert planbook.load_run(store=store).status == "failed"  # the latest by default
    with pytest.raises(RunNotFound, match="no run 'nope'"):
        planbook.load_run("nope", store=store)


def test_after_a_crash_the_cut_short_execution_ends_where_the_run_stopped(tmp_path: Path) -> None:
    """The timeline of a run resumed after its process died (a kernel restart): the execution
    the crash cut short ends at the run's last event before the crash, interrupted, and the
    step's new execution is a bar of its own; the gap is not counted as the run's working time."""
    from planbook.views.state import ViewState

    store, crashed, calls = tmp_path / "runs.sqlite", tmp_path / "crashed.sqlite", Calls()
    calls.during["b"] = crash_copy(store, crashed)  # the process dies while b runs
    planbook.run(chain(), tools=calls.box, store=store)
    resumed = planbook.resume(store=crashed, tools=calls.box)
    assert resumed.status == "completed"

    events = resumed.events
    restarted = [e.time for e in events if e.kind == "run.started"][1]
    stopped = max(e.time for e in events if e.time < restarted)  # the last event the crash left
    bars = [ex for ex in ViewState.of(resumed).timeline if ex.step == "b"]
    assert len(bars) == 2
    cut, again = bars
    assert (cut.end, cut.ok, cut.interrupted) == (max(stopped, cut.start), False, True)
    assert again.start >= restarted and again.ok and not again.interrupted
    view = ViewState.of(resumed)
    assert view.elapsed is not None and view.elapsed <= (stopped - events[0].time) + (events[-1].time - restarted)


def test_after_ctrl_c_and_a_resume_from_the_store_the_interrupted_execution_ends_where_the_run_stopped(
        tmp_path: Path) -> None:
    from planbook.views.state import ViewState

    store, calls = tmp_path / "runs.sqlite", Calls()
    calls.raise_once["b"] = KeyboardInterrupt()
    assert planbook.run(chain(), tools=calls.box, store=store).status == "interrupted"
    resumed = planbook.resume(store=store, tools=calls.box)
    stopped = next(e.time for e in resumed.events if e.kind == "run.finished")  # the interrupt's
    restarted = [e.time for e in resumed.events if e.kind == "run.started"][1]
    cut, again = [ex for ex in ViewState.of(resumed).timeline if ex.step == "b"]
    assert (cut.end, cut.ok, cut.interrupted) == (stopped, False, True)
    assert again.start >= restarted and again.ok
