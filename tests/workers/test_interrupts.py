"""Exact interrupts (Ctrl-C at random moments, serial and parallel, with and without a
view), and the defects found by the adversarial pass: broken exceptions, planners that
exit or rewrite history, generator tools, non-ASCII references, plan text built for
nobody, and an async tool interrupted in a real kernel."""

from __future__ import annotations

import _thread
import itertools
import random
import re
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import planbook
from helpers import Kernel, events_of, started_kernel
from planbook import AgentReply, Plan, PlanError, Runner, RunResult, Status, Step, Toolbox


@pytest.fixture(autouse=True)
def python_handles_sigint() -> Any:
    """Python's own SIGINT handler, as in a terminal or a kernel. A job started in the
    background begins with SIGINT ignored; Python then installs no handler, a run holds
    no interrupt gate and Ctrl-C (or ``_thread.interrupt_main``) does nothing at all."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


# ------------------------------------------------------------------ Ctrl-C at random moments
class Ledger:
    """Tools whose only side effect is one ledger entry per call, numbered.

    An entry whose call was interrupted before it returned is marked ``aborted`` (the
    call did not complete: the step must run again). Every other entry is a call that
    completed, which the run must have recorded exactly once.
    """

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.entries: list[tuple[str, int, str]] = []  # (step, call number, thread)
        self.aborted: set[int] = set()
        self.running: set[str] = set()
        self.overlapping: list[str] = []  # a step whose call started while its earlier call ran
        self.failed_once: set[str] = set()
        self.tools = Toolbox()
        ledger = self

        @self.tools.tool
        def work(name: str, spin: int, parts: list, fail_once: bool = False) -> int:
            """Spin a little (interrupts land here), write one entry, return its number."""
            n = next(ledger.ids)
            try:
                if name in ledger.running:
                    ledger.overlapping.append(name)
                ledger.running.add(name)
                total = 0
                for i in range(spin):
                    total += i
                ledger.entries.append((name, n, threading.current_thread().name))
                ledger.running.discard(name)
                if fail_once and name not in ledger.failed_once:
                    ledger.failed_once.add(name)
                    raise RuntimeError(f"call #{n} failed")
                return n
            except KeyboardInterrupt:
                ledger.aborted.add(n)
                ledger.running.discard(name)
                raise

    def completed_calls(self) -> list[tuple[str, int, str]]:
        return [e for e in self.entries if e[1] not in self.aborted]


def ledger_plan(n: int, rng: random.Random, *, failures: bool) -> Plan:
    """Three interleaved chains and some joins, so that parallel runs have work side by side."""
    steps = []
    for i in range(n):
        needs = [f"s{i - 3}"] if i >= 3 else []
        if i >= 6 and i % 5 == 0:
            needs.append(f"s{i - 4}")
        args: dict[str, Any] = {"name": f"s{i}", "spin": rng.randrange(10_000, 60_000),
                                "parts": [f"${need}" for need in needs]}
        if failures and rng.random() < 0.25:
            args["fail_once"] = True
        steps.append(Step(id=f"s{i}", tool="work", args=args))
    return Plan(goal="a ledger of calls", steps=steps)


def call_number(step: Step) -> int:
    """The ledger number of the call a history entry records (its result, or its error)."""
    if step.status is Status.completed:
        return int(step.result)
    match = re.search(r"call #(\d+) failed", step.error or "")
    assert match, f"history entry of {step.id} is neither a result nor a ledger failure: {step.error!r}"
    return int(match.group(1))


def interrupted_run(runner: Runner, delay: float) -> tuple[RunResult, bool]:
    """``runner.run()`` with Ctrl-C (``_thread.interrupt_main``) ``delay`` s after it starts.

    An interrupt that lands outside ``run()`` (the run ended first, or had not begun)
    raises in this function; it is absorbed and reported as ``escaped``: the state is
    then read from the runner, and checked like any other.
    """
    timer = threading.Timer(delay, _thread.interrupt_main)
    result: RunResult | None = None
    escaped = False
    try:
        try:
            timer.start()
            result = runner.run()
        finally:
            timer.cancel()
            timer.join()
        for _ in range(1000):  # a signal sent as run() returned is delivered here
            pass
    except KeyboardInterrupt:
        escaped = True
    return (result if result is not None else runner.result()), escaped


MODES = {
    "serial": {"parallel": 1, "heartbeat": False},
    "serial+view": {"parallel": 1, "heartbeat": True},
    "parallel": {"parallel": 3, "heartbeat": False},
    "parallel+view": {"parallel": 3, "heartbeat": True},
}


@pytest.mark.parametrize("failures", [False, True], ids=["ok", "retries"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", list(MODES))
def test_random_interrupts_never_lose_or_repeat_a_call(mode: str, seed: int, failures: bool) -> None:
    rng = random.Random(f"{mode}-{seed}-{failures}")
    ledger = Ledger()
    plan = ledger_plan(24, rng, failures=failures)
    runner = Runner(plan, tools=ledger.tools, parallel=MODES[mode]["parallel"], max_steps=100,
                    on_failure="retry" if failures else "abort")
    beats: list[int] = []
    if MODES[mode]["heartbeat"]:
        runner.add_heartbeat(lambda: beats.append(len(beats)), interval=0.002)  # a view stand-in
    interrupted = escaped = 0
    for _ in range(200):  # bounded: each round makes progress unless Ctrl-C comes very early
        result, escape = interrupted_run(runner, rng.uniform(0.0, 0.008))
        escaped += escape
        interrupted += result.status == "interrupted"
        assert result.executions == len(result.history), f"counters drifted after round {_}"
        assert not ledger.overlapping, f"a step started while its earlier call still ran: {ledger.overlapping}"
        if result.status != "paused" and runner.finished:
            break
    else:
        result = runner.run()  # the rounds ran out: finish without interrupts
    assert (result.status, result.reason) == ("completed", "goal_met"), (result.error, result.status)

    completed = ledger.completed_calls()
    # every call that completed is in the history once, and nothing else is
    assert sorted(call_number(s) for s in result.history) == sorted(n for _, n, _ in completed)
    assert result.executions == len(result.history) == len(result.timeline.executions) == len(completed)
    successes = Counter(s.id for s in result.history if s.status is Status.completed)
    assert successes == Counter({s.id: 1 for s in plan.steps}), "a step completed twice or never"
    for step in result.plan.steps:
        assert step.result == next(n for name, n, _ in reversed(completed) if name == step.id)
    # parallel calls run on worker threads: Ctrl-C never lands inside one, nothing is redone (with a
    # view alone, a tool whose last call was fast runs on the main thread, like a serial run)
    if MODES[mode]["parallel"] > 1:
        assert not ledger.aborted
        assert all(thread != threading.main_thread().name for _, _, thread in completed)
    assert not ledger.overlapping
    print(f"{mode} seed {seed}: {interrupted} interrupted rounds, {escaped} outside run(), "
          f"{len(ledger.aborted)} calls interrupted inside the tool")


def test_an_interrupt_during_the_wait_for_a_running_call_keeps_it() -> None:
    """Ctrl-C while a worker runs, then continue: the call is waited for and kept, not rerun."""
    release, started = threading.Event(), threading.Event()
    calls: list[str] = []
    box = Toolbox()

    @box.tool
    def held(label: str) -> str:
        """Run until the test releases it."""
        calls.append(label)
        started.set()
        assert release.wait(30)
        return label

    runner = Runner("steps: [{id: a, tool: held, args: {label: a}}, {id: b, tool: held, args: {label: b}}]",
                    tools=box, parallel=2)
    fired = threading.Event()

    def interrupt_once_started() -> None:
        if started.is_set() and not fired.is_set():
            fired.set()
            _thread.interrupt_main()

    runner.add_heartbeat(interrupt_once_started, interval=0.01)
    first = runner.run()
    assert first.status == "interrupted" and first.executions == len(first.history) == 0
    assert {s.status for s in first.plan.steps} == {Status.not_started}
    release.set()
    second = runner.run()
    assert second.ok and sorted(calls) == ["a", "b"] and second.outputs == {"a": "a", "b": "b"}
    assert second.executions == len(second.history) == 2


@pytest.mark.parametrize("setup", ["parallel", "view"])
def test_a_failure_recorded_at_an_interrupt_gets_its_policy_when_the_run_continues(setup: str) -> None:
    """Ctrl-C arrives as a worker's call fails: on continue the retry runs, and what needs
    the step is not blocked (it was, when continuing rebuilt the ready set first)."""
    calls: list[str] = []
    box = Toolbox()

    @box.tool
    def shaky() -> str:
        """Fail the first time, with Ctrl-C arriving just as it fails."""
        calls.append("shaky")
        if calls.count("shaky") == 1:
            _thread.interrupt_main()
            raise RuntimeError("first call fails")
        return "steady"

    @box.tool
    def after(value: str) -> str:
        """Use the result."""
        calls.append("after")
        return value.upper()

    runner = Runner("steps: [{id: a, tool: shaky}, {id: b, tool: after, args: {value: $a}}]", tools=box,
                    on_failure="retry", parallel=2 if setup == "parallel" else 1)
    if setup == "view":
        runner.add_heartbeat(lambda: None, interval=0.01)
    first = runner.run()
    assert first.status == "interrupted"
    second = runner.run()
    assert (second.status, second.reason) == ("completed", "goal_met"), second.error
    assert second.outputs == {"a": "steady", "b": "STEADY"} and calls == ["shaky", "shaky", "after"]
    assert [(s.id, s.status) for s in second.history] == [
        ("a", Status.failed), ("a", Status.completed), ("b", Status.completed)]
    assert second.executions == len(second.history) == 3


@pytest.mark.parametrize("view", [False, True], ids=["inline", "view"])
@pytest.mark.parametrize("loop", [False, True], ids=["plain", "in-a-running-loop"])
def test_an_async_tool_stops_on_the_first_sigint(view: bool, loop: bool) -> None:
    """A real SIGINT sent to the process (as a kernel interrupt is) while an async tool
    awaits: the first one cancels the coroutine and interrupts the run. (On the main
    thread the await was not interruptible at all; the OS may deliver the signal to any
    thread, so an idle loop must wake up to see it.)"""
    import asyncio
    import os
    import signal

    started = threading.Event()
    marks: list[str] = []
    box = Toolbox()

    @box.tool
    async def wait_long() -> str:
        """Await far longer than the test may take."""
        started.set()
        try:
            await asyncio.sleep(20)
        except asyncio.CancelledError:
            marks.append("cancelled")
            raise
        marks.append("finished")
        return "waited"

    def interrupt_once_started() -> None:
        if started.wait(60):
            os.kill(os.getpid(), signal.SIGINT)

    runner = Runner("steps: [{id: a, tool: wait_long}]", tools=box)
    if view:
        runner.add_heartbeat(lambda: None, interval=0.05)
    threading.Thread(target=interrupt_once_started, daemon=True).start()
    if loop:
        async def inside() -> RunResult:  # a notebook's main thread runs a loop already
            return runner.run()

        event_loop = asyncio.new_event_loop()  # not asyncio.run: it installs a SIGINT handler of its own
        try:
            result = event_loop.run_until_complete(inside())
        finally:
            event_loop.close()
    else:
        result = runner.run()
    assert result.status == "interrupted"
    runner.settle()  # a call on a worker thread is cancelled there: wait for it to end
    assert marks == ["cancelled"]
    assert result.plan.step("a").status is Status.not_started and result.executions == len(result.history) == 0


# ------------------------------------------------------------------ exceptions that misbehave
class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


@pytest.mark.parametrize("parallel", [1, 2])
@pytest.mark.parametrize("policy", ["abort", "skip"])
def test_a_tool_exception_whose_str_raises_fails_the_step_cleanly(parallel: int, policy: str) -> None:
    box = Toolbox()

    @box.tool
    def odd() -> None:
        """Raise an exception that cannot be printed."""
        raise Unprintable()

    @box.tool
    def fine() -> str:
        """Work."""
        return "fine"

    result = planbook.run("steps: [{id: a, tool: odd}, {id: b, tool: fine}]", tools=box, on_failure=policy,
                          parallel=parallel)
    step = result.plan.step("a")
    assert step.status is (Status.failed if policy == "abort" else Status.skipped)
    assert step.error == "Unprintable: <str() of the exception failed: ValueError>"
    assert "Unprintable" in step.traceback
    assert not [s for s in result.plan.steps if s.status is Status.in_progress]
    if policy == "skip":
        assert result.outputs == {"b": "fine"}
    else:
        assert result.reason == "aborted" and "Unprintable" in result.error
    assert result.executions == len(result.history)


def test_an_unprintable_exception_from_an_executor_call_fails_the_step_cleanly() -> None:
    from concurrent.futures import ThreadPoolExecutor

    box = Toolbox()

    @box.tool
    def odd() -> None:
        """Raise an exception that cannot be printed."""
        raise Unprintable()

    with ThreadPoolExecutor(max_workers=1) as pool:
        result = planbook.run("steps: [{id: a, tool: odd}]", tools=box, executor=pool)
    assert result.reason == "aborted" and result.plan.step("a").status is Status.failed
    assert result.plan.step("a").error == "Unprintable: <str() of the exception failed: ValueError>"


# ------------------------------------------------------------------ planners that misbehave
def exiting_planner(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
    raise SystemExit(3)


def test_systemexit_from_the_first_plan_does_not_escape_run() -> None:
    result = planbook.run("make a plan", planner=exiting_planner, tools=Toolbox())
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert result.error == "the planner raised SystemExit: 3"
    assert "SystemExit" in result.traceback


def test_systemexit_from_a_replan_does_not_escape_run() -> None:
    box = Toolbox()

    @box.tool
    def broken() -> None:
        """Fail."""
        raise RuntimeError("down")

    result = planbook.run("steps: [{id: a, tool: broken}]", planner=exiting_planner, tools=box)
    assert (result.status, result.reason) == ("failed", "no_plan")
    assert result.error == "the planner raised SystemExit: 3"
    assert result.executions == len(result.history) == 1


EXITING_MODULE = '''
import planbook

box = planbook.Toolbox()

@box.tool
def broken() -> None:
    """Fail."""
    raise RuntimeError("down")

def exits(goal, history, last_error):
    raise SystemExit(0)
'''


def test_the_cli_exits_non_zero_with_a_message_when_the_planner_exits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from planbook.cli import main

    module = f"exiting_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(EXITING_MODULE)
    (tmp_path / "plan.yaml").write_text("steps:\n  - {id: a, tool: broken}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    code = main(["run", "plan.yaml", "--tools", f"{module}:box", "--planner", f"{module}:exits"])
    out = capsys.readouterr().out
    assert code == 1
    assert "Run failed (no_plan)" in out and "the planner raised SystemExit: 0" in out


def test_a_planner_that_rewrites_the_history_it_gets_changes_nothing() -> None:
    box = Toolbox()

    @box.tool
    def fetch(source: str) -> str:
        """Fail for the primary source."""
        if source == "primary":
            raise ConnectionError("primary is down")
        return f"text from {source}"

    def vandal(goal: str, history: list[Step], last_error: str | None) -> list[dict[str, Any]]:
        for step in history:
            step.status = Status.completed
            step.result = "forged"
            step.error = None
            step.args["source"] = "forged"
            step.needs.append("nowhere")
        history.append(Step(id="ghost", tool="fetch"))
        return [{"id": "backup", "tool": "fetch", "args": {"source": "backup"}}]

    plan = "steps: [{id: ok, tool: fetch, args: {source: mirror}}, {id: main, tool: fetch, args: {source: primary}}]"
    result = planbook.run(plan, planner=vandal, tools=box)
    assert result.ok, result.error
    assert [(s.id, s.status, s.result, s.args, s.needs) for s in result.history] == [
        ("ok", Status.completed, "text from mirror", {"source": "mirror"}, []),
        ("main", Status.failed, None, {"source": "primary"}, []),
        ("backup", Status.completed, "text from backup", {"source": "backup"}, []),
    ]
    assert result.history[1].error == "ConnectionError: primary is down"
    assert result.plan.step("ok").args == {"source": "mirror"} and result.plan.step("ok").result == "text from mirror"


# ------------------------------------------------------------------ generator tools
def test_generator_functions_are_refused_as_tools() -> None:
    def numbers(n: int):  # type: ignore[no-untyped-def]
        """Count."""
        yield from range(n)

    async def ticks(n: int):  # type: ignore[no-untyped-def]
        """Count, asynchronously."""
        for i in range(n):
            yield i

    message = r"tool 'numbers' is a generator function \(it uses yield\)"
    with pytest.raises(TypeError, match=message + r": its body would not run in its step. Return a list instead"):
        Toolbox().add(numbers)
    with pytest.raises(TypeError, match=message):
        Toolbox([numbers])
    with pytest.raises(TypeError, match=r"tool 'ticks' is a generator function"):
        Toolbox().tool(ticks)
    with pytest.raises(TypeError, match=message):
        planbook.tool(numbers)
    with pytest.raises(TypeError, match=r"tool 'listing' is a generator function"):
        planbook.tool(name="listing")(numbers)
    assert "numbers" not in planbook.default_toolbox and "listing" not in planbook.default_toolbox
    with pytest.raises(TypeError, match=r"tool 'n' is a generator function"):
        planbook.run("steps: [{id: a, tool: n, args: {n: 3}}]", tools={"n": numbers})


# ------------------------------------------------------------------ references to non-ASCII ids
def test_a_reference_to_a_non_ascii_id_is_a_dependency() -> None:
    box = Toolbox()

    @box.tool
    def echo(value: Any) -> Any:
        """Return the value."""
        return value

    spec = textwrap.dedent("""\
        steps:
          - {id: résumé, tool: echo, args: {value: "${données} et ${日本}"}}
          - {id: données, tool: echo, args: {value: [1, 2]}}
          - {id: 日本, tool: echo, args: {value: $données}}
        """)
    plan = Plan.parse(spec)
    assert plan.step("résumé").needs == ["données", "日本"] and plan.step("日本").needs == ["données"]
    result = planbook.run(plan, tools=box)
    assert result.ok, result.error
    assert result.outputs == {"données": [1, 2], "日本": [1, 2], "résumé": "[1, 2] et [1, 2]"}
    assert [s.id for s in result.history] == ["données", "日本", "résumé"]


@pytest.mark.parametrize("step_id", ["a+b", "two words", "x/y", "-lead"])
def test_ids_and_references_agree_on_what_an_id_may_contain(step_id: str) -> None:
    """ENGINE BUG (left failing on purpose): a step id outside the reference grammar
    (``\\w[\\w.-]*``) is accepted, and ``$<that id>`` is then passed on as literal text
    with no dependency. Either the reference must work or the plan must be refused."""
    box = Toolbox()

    @box.tool
    def echo(value: Any) -> Any:
        """Return the value."""
        return value

    plan = Plan(steps=[Step(id="user", tool="echo", args={"value": f"${step_id}"}),
                       Step(id=step_id, tool="echo", args={"value": "made"})])
    try:
        result = planbook.run(plan, tools=box)
    except PlanError as exc:
        assert step_id in str(exc)  # refused, naming the id
        return
    assert plan.step("user").needs == [step_id]
    assert result.outputs["user"] == "made"


# ------------------------------------------------------------------ plan text only for agents that read it
def test_agents_that_do_not_read_the_plan_text_never_format_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from planbook.data import render as _render

    _render.render("plan_text", Plan(steps=[]))  # the views are registered
    formatted: list[int] = []
    real = _render._RENDERERS["plan_text"]

    def counting(plan: Plan, *args: Any, **kwargs: Any) -> str:
        formatted.append(len(plan.steps))
        return real(plan, *args, **kwargs)

    monkeypatch.setitem(_render._RENDERERS, "plan_text", counting)
    read: list[str] = []

    def quiet(task: str, context: Any) -> AgentReply:
        return AgentReply(answer=task.upper())

    def reader(task: str, context: Any) -> AgentReply:
        read.append(context.plan_text)
        return AgentReply(answer=len(context.plan_text))

    agents = {"quiet": quiet, "reader": reader}
    steps = [Step(id=f"q{i}", agent="quiet", task=f"task {i}") for i in range(300)]
    result = planbook.run(Plan(goal="many agent steps", steps=steps), agents=agents, max_steps=300)
    assert result.ok and result.outputs["q7"] == "TASK 7"
    assert formatted == [], "the plan was formatted although no agent read it"
    for event in events_of(result, "plan.created"):
        assert set(event.data) == {"steps"}

    steps = [Step(id=f"q{i}", agent="quiet", task=f"task {i}") for i in range(5)]
    steps[2] = Step(id="r", agent="reader", task="read the plan")
    result = planbook.run(Plan(goal="one reader", steps=steps), agents=agents)
    assert result.ok and formatted == [5]  # once, for the one agent that read it
    assert "r" in read[0] and "q4" in read[0]


# ------------------------------------------------------------------ an async tool in a real kernel
KERNEL_SETUP = """\
%load_ext planbook
%plan_store --no-cache
import asyncio, pathlib, planbook
marks = []
@planbook.tool
async def wait_long(marker: str) -> str:
    "Await for a long time: the kernel's interrupt must stop it."
    pathlib.Path(marker).write_text("started")
    try:
        await asyncio.sleep(300)
    except asyncio.CancelledError:
        marks.append("cancelled")
        raise
    marks.append("finished")
    return "waited"
@planbook.tool
def quick(x: int) -> int:
    "Return at once."
    return x
"""


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel(KERNEL_SETUP)


@pytest.mark.parametrize("view", ["", " --no-view"], ids=["live-view", "no-view"])
def test_an_async_tool_stops_on_the_first_interrupt_in_a_kernel(kernel: Kernel, tmp_path: Path, view: str) -> None:
    marker = tmp_path / "started"
    name = "waits" + ("_quiet" if view else "")
    reply, _ = kernel.execute(
        f"%%plan {name}\nsteps:\n  - {{id: 1, tool: quick, args: {{x: 1}}}}\n"
        f"  - {{id: 2, tool: wait_long, args: {{marker: {str(marker)!r}}}}}\n"
        "  - {id: 3, tool: quick, args: {x: 3}, needs: [2]}\n"
    )
    assert reply["status"] == "ok", reply
    # one interrupt, sent once the tool has started; the cell must end long before the 300 s await
    reply, messages = kernel.execute(f"%run_plan {name}{view}", interrupt_if=marker.exists, timeout=90)
    assert (reply["status"], reply.get("ename")) == ("error", "RunInterrupted"), reply
    assert marker.exists()
    reply, messages = kernel.execute("marks")
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "['cancelled']"  # the await was cancelled, not finished
    # continuing runs the step again (its call did not complete) and ends the run
    reply, _ = kernel.execute("planbook.default_toolbox.add(lambda marker: 'quick now', name='wait_long')")
    assert reply["status"] == "ok", reply
    reply, messages = kernel.execute(f"r = %run_plan {name}{view}\nr.status, r.executions, len(r.history), r.outputs['2']")
    assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "('completed', 3, 3, 'quick now')"
    # put the async tool back for the next case
    reply, _ = kernel.execute("planbook.default_toolbox.add(wait_long, name='wait_long'); marks.clear()")
    assert reply["status"] == "ok", reply
