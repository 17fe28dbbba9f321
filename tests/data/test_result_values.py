"""Values that behave: an iterator result fails its step ("return a list") instead of giving
later steps nothing; the summary an event carries is bounded and made where the call ran
(a slow or huge ``repr`` never holds up the runner); a tool raising ``KeyboardInterrupt``
on a Dask cluster interrupts the run and leaves the cluster usable."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import AgentReply, Plan, Step, Toolbox
from planbook.engine.calls import SUMMARY_LIMIT, summarize

ROOT = Path(__file__).resolve().parents[2]
#: a safety net for a call that would otherwise block a test for ever (never reached when all is well)
WAIT = 60


# ------------------------------------------------------------------ iterators
async def _agen() -> Any:
    yield 1


ITERATORS: dict[str, Callable[[Path], Any]] = {
    "generator expression": lambda tmp: (n for n in (1, 2, 3)),
    "map": lambda tmp: map(int, "123"),
    "iter": lambda tmp: iter([1, 2, 3]),
    "zip": lambda tmp: zip([1, 2], [3, 4]),
    "endless": lambda tmp: itertools.count(),
    "async generator": lambda tmp: _agen(),
}


def sums_plan() -> Plan:
    return Plan(id="sums", steps=[
        Step(id="numbers", tool="numbers"),
        Step(id="total", tool="total", args={"values": "$numbers"}),
        Step(id="again", tool="total", args={"values": "$numbers"}),
    ])


def iterator_tools(make: Callable[[], Any]) -> Toolbox:
    box = Toolbox()

    @box.tool
    def numbers() -> Any:
        """Some numbers, as the tool's author returns them."""
        return make()

    @box.tool
    def total(values: Any) -> int:
        """Add the numbers (the first hundred: an endless iterator must not hang a failing test)."""
        return sum(itertools.islice(values, 100))

    return box


@pytest.mark.parametrize("parallel", [1, 2])
@pytest.mark.parametrize("kind", sorted(ITERATORS))
def test_an_iterator_result_fails_its_step_saying_return_a_list(kind: str, parallel: int, tmp_path: Path) -> None:
    made: list[Any] = []

    def make() -> Any:
        made.append(ITERATORS[kind](tmp_path))
        return made[-1]

    result = planbook.run(sums_plan(), tools=iterator_tools(make), parallel=parallel)
    step = result.plan.step("numbers")
    assert (result.status, result.reason) == ("failed", "aborted")
    assert step.status.value == "failed" and step.result is None
    assert f"returned an iterator ({type(made[0]).__name__})" in (step.error or "")
    assert "Return a list" in (step.error or "") and "`return list(...)`" in (step.error or "")
    assert "total" not in result.outputs  # no step got an empty iterator and a sum of 0
    if kind == "async generator":
        import asyncio

        asyncio.run(made[0].aclose())


def test_a_file_object_result_says_read_it_in_the_step(tmp_path: Path) -> None:
    path = tmp_path / "numbers.txt"
    path.write_text("1\n2\n3\n")
    opened: list[io.TextIOBase] = []

    def make() -> Any:
        opened.append(open(path))
        return opened[-1]

    result = planbook.run(sums_plan(), tools=iterator_tools(make))
    opened[0].close()
    error = result.plan.step("numbers").error or ""
    assert result.status == "failed" and "returned an iterator (TextIOWrapper)" in error
    assert "read it in the step (e.g. `return f.read()`)" in error


def test_a_list_or_a_reusable_iterable_is_a_result_like_any_other() -> None:
    for value in ([1, 2, 3], (1, 2, 3), range(1, 4), {1: "a", 2: "b", 3: "c"}.keys()):
        result = planbook.run(sums_plan(), tools=iterator_tools(lambda value=value: value))
        assert result.ok and result.outputs["total"] == result.outputs["again"] == 6


def test_an_agent_answering_with_an_iterator_fails_its_step() -> None:
    def lister(task: str, context: Any) -> AgentReply:
        return AgentReply(ok=True, answer=(w for w in task.split()))

    result = planbook.run(Plan(steps=[Step(id="a", agent="lister", task="two words")]), agents={"lister": lister})
    error = result.plan.step("a").error or ""
    assert result.status == "failed" and "agent 'lister' returned an iterator (generator)" in error


# ------------------------------------------------------------------ event summaries
class Loud:
    """A result that notes the thread every repr of it runs on."""

    threads: list[str] = []

    def __repr__(self) -> str:
        Loud.threads.append(threading.current_thread().name)
        return "Loud()"


def loud_tools(value: Callable[[], Any]) -> Toolbox:
    box = Toolbox()

    @box.tool
    def make() -> Any:
        """Return the value."""
        return value()

    return box


@pytest.mark.parametrize("options", [{"parallel": 2}, {"step_timeout": WAIT}])
def test_a_results_repr_is_not_computed_on_the_runner_thread(options: dict[str, Any]) -> None:
    Loud.threads = []
    plan = Plan(steps=[Step(id="a", tool="make"), Step(id="b", tool="make")])
    result = planbook.run(plan, tools=loud_tools(Loud), **options)
    assert result.ok
    assert [e.data["result"] for e in result.events if e.kind == "step.finished"] == ["Loud()", "Loud()"]
    assert Loud.threads and threading.current_thread().name not in Loud.threads  # made on the workers


def test_a_huge_result_gets_a_bounded_summary_without_its_whole_repr() -> None:
    Loud.threads = []
    result = planbook.run(Plan(steps=[Step(id="a", tool="make")]), tools=loud_tools(lambda: [Loud() for _ in range(10_000)]))
    summary = [e.data["result"] for e in result.events if e.kind == "step.finished"][0]
    assert summary.startswith("[Loud(), Loud(),") and summary.endswith("...]") and len(summary) <= SUMMARY_LIMIT
    assert len(Loud.threads) <= 10  # ten items looked at, not ten thousand
    assert len(result.outputs["a"]) == 10_000  # the result itself is whole


def test_summaries_of_awkward_values() -> None:
    import math

    assert summarize(math.factorial(2000)) == "<int of 19053 bits>"  # no "integer string conversion" error
    assert summarize(12345) == "12345" and summarize(None) == "None" and summarize("a" * 10) == repr("a" * 10)
    loop: list[Any] = []
    loop.append(loop)
    assert summarize(loop) == "[[[[[[[...]]]]]]]"  # six levels deep, then ...
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    assert len(summarize(deep)) <= SUMMARY_LIMIT
    assert len(summarize("x" * 1_000_000)) == SUMMARY_LIMIT
    assert summarize({"b": 1, "a": [2]}) == "{'b': 1, 'a': [2]}"  # in its own order, as repr shows it
    assert summarize({n: n for n in range(100_000)}).endswith(", 9: 9, ...}")  # ten keys, none sorted
    assert summarize({3}) == "{3}" and summarize(frozenset()) == "frozenset()" and summarize(set()) == "set()"

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert summarize(Broken()) == "<Broken (repr failed: RuntimeError)>"
    assert summarize([Broken()]) == "[<Broken (repr failed: RuntimeError)>]"


def test_a_slow_repr_does_not_hold_the_run_past_step_timeout() -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def __repr__(self) -> str:
            entered.set()
            deadline = 0
            while not release.wait(0.01) and deadline < WAIT * 100:  # in slices: a stop can land in between
                deadline += 1
            return "Slow()"

    try:
        result = planbook.run(Plan(steps=[Step(id="a", tool="make")]), tools=loud_tools(Slow), step_timeout=0.5)
        returned_while_blocked = entered.is_set() and not release.is_set()
    finally:
        release.set()
    assert returned_while_blocked  # the runner did not wait for the repr
    step = result.plan.step("a")
    assert result.status == "failed" and "did not finish within 0.5 s" in (step.error or "")


# ------------------------------------------------------------------ KeyboardInterrupt from a tool
def test_a_tool_raising_keyboardinterrupt_on_a_worker_thread_interrupts_the_run_and_says_which() -> None:
    box = Toolbox()

    @box.tool
    def boom() -> int:
        """Raise KeyboardInterrupt itself."""
        raise KeyboardInterrupt

    result = planbook.run(Plan(steps=[Step(id="a", tool="boom")]), tools=box, parallel=2)
    assert (result.status, result.reason) == ("interrupted", "interrupted")
    assert result.error == "interrupted: the call of step 'a' raised KeyboardInterrupt"


def test_two_calls_raising_keyboardinterrupt_at_once_end_in_one_interrupted_run() -> None:
    both = threading.Barrier(2, timeout=WAIT)
    box = Toolbox()

    @box.tool
    def boom(n: int) -> int:
        """Raise KeyboardInterrupt once both calls run."""
        both.wait()
        raise KeyboardInterrupt

    plan = Plan(steps=[Step(id="a", tool="boom", args={"n": 1}), Step(id="b", tool="boom", args={"n": 2})])
    runner = planbook.Runner(plan, tools=box, parallel=2)
    try:
        result = runner.run()
    except KeyboardInterrupt:
        pytest.fail("the second call's KeyboardInterrupt escaped the run")
    assert (result.status, result.reason) == ("interrupted", "interrupted")
    assert result.error in ("interrupted: the call of step 'a' raised KeyboardInterrupt",
                            "interrupted: the call of step 'b' raised KeyboardInterrupt")
    runner.settle()  # a call still running at the interrupt ends; it did not complete either
    assert [s.status.value for s in runner.plan.steps] == ["not_started", "not_started"]
    assert runner.state.executions == len(runner.state.history) == 0


DASK_SCRIPT = '''
import json, sys
import distributed
import planbook
from planbook import Plan, Step, Toolbox

def boom() -> int:
    raise KeyboardInterrupt

def ok(x: int) -> int:
    return x

def lazy() -> object:
    return map(int, "12")

box = Toolbox([boom, ok, lazy])
report = {}
with distributed.Client(processes=False, dashboard_address=None, n_workers=1, threads_per_worker=2,
                        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as client:
    executor = client.get_executor(pure=False)
    plan = Plan(steps=[Step(id="a", tool="boom"), Step(id="b", tool="ok", args={"x": 1})])
    first = planbook.run(plan, tools=box, parallel=2, executor=executor)
    report["first"] = [first.status, first.reason, first.error, first.plan.step("a").status.value]
    report["client"] = client.submit(ok, 41, pure=False).result(timeout=60) + 1
    second = planbook.run(Plan(steps=[Step(id="c", tool="ok", args={"x": 2}), Step(id="d", tool="lazy")]),
                          tools=box, parallel=2, executor=executor, on_failure="skip")
    report["second"] = [second.status, second.outputs.get("c"), second.plan.step("d").error]
    # one lane, four small calls: handed over as one batch, which stops at the interrupt
    batch = Plan(steps=[Step(id="e", tool="ok", args={"x": 1}), Step(id="f", tool="boom"),
                        Step(id="g", tool="ok", args={"x": 3}), Step(id="h", tool="ok", args={"x": 4})])
    third = planbook.run(batch, tools=box, parallel=1, executor=executor)
    report["batch"] = [third.status, third.error, [s.status.value for s in third.plan.steps], third.outputs]
print(json.dumps(report))
'''


def test_a_tool_raising_keyboardinterrupt_on_dask_interrupts_the_run_and_the_cluster_lives_on(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    script = tmp_path / "dask_interrupt.py"
    script.write_text(DASK_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # its own process: before the fix the run never returned (the cluster's loop had died)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=WAIT * 4)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["first"] == ["interrupted", "interrupted", "interrupted: the call of step 'a' raised KeyboardInterrupt",
                               "not_started"]  # it runs again when the run continues
    assert report["client"] == 42  # the cluster still answers
    status, output, error = report["second"]
    assert status == "completed" and output == 2  # and runs plans
    assert "tool 'lazy' returned an iterator (map)" in error
    status, error, statuses, outputs = report["batch"]
    assert (status, error) == ("interrupted", "interrupted: the call of step 'f' raised KeyboardInterrupt")
    assert statuses == ["completed", "not_started", "not_started", "not_started"] and outputs == {"e": 1}
