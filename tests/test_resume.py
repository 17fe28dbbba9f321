"""Runs that survive: a process killed part way, resumed in another; Ctrl-C; the step cache
through ``planbook.run(store=...)``; results the store cannot keep; secrets; listing runs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from planbook.models import Status
from planbook.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]

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
        assert 1 <= counts[step_id] <= 1 + may_repeat[step_id], (step_id, dict(counts), dict(may_repeat))
    once = [s for s in EXPECTED[shape] if not may_repeat[s]]
    assert all(counts[s] == 1 for s in once)
