"""Executing steps: stdout capture, async tools, timeouts, exceptions, Ctrl-C, pausing,
and the event stream (kinds, order, clock, live handlers)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from helpers import Lab, Ticker, events_of, kinds
from planbook import Runner, ScriptedPlanner, Toolbox, run
from planbook.engine.calls import capture_stdout

THREE = "steps:\n  - {id: a, tool: ok, args: {label: a}}\n  - {id: b, tool: ok, args: {label: b}}\n  - {id: c, tool: ok, args: {label: c}}\n"


# ------------------------------------------------------------ stdout capture
def test_stdout_is_captured_per_step_and_not_leaked(capsys: pytest.CaptureFixture[str]) -> None:
    box = Toolbox()

    @box.tool
    def chatty(n: int) -> int:
        print(f"working on {n}")
        print("done", n)
        return n

    result = run("steps:\n  - {id: one, tool: chatty, args: {n: 1}}\n  - {id: two, tool: chatty, args: {n: 2}}\n", tools=box)
    assert [s.output for s in result.plan.steps] == ["working on 1\ndone 1\n", "working on 2\ndone 2\n"]
    assert capsys.readouterr().out == ""
    assert type(sys.stdout).__name__ != "_ThreadRoutedStream"  # the router is gone after the run


def test_output_of_a_failing_step_is_kept() -> None:
    box = Toolbox()

    @box.tool
    def half() -> None:
        print("got this far")
        raise RuntimeError("then broke")

    result = run("steps: [{id: h, tool: half}]", tools=box)
    step = result.plan.step("h")
    assert (step.output, step.error) == ("got this far\n", "RuntimeError: then broke")


def test_other_threads_printing_during_a_step_are_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    inside, printed = threading.Event(), threading.Event()

    def background() -> None:
        inside.wait(5)
        print("from another thread")
        printed.set()

    box = Toolbox()

    @box.tool
    def step_tool() -> str:
        print("from the step")
        inside.set()
        printed.wait(5)
        return "ok"

    thread = threading.Thread(target=background)
    thread.start()
    result = run("steps: [{id: s, tool: step_tool}]", tools=box)
    thread.join(5)
    assert result.plan.step("s").output == "from the step\n"
    assert capsys.readouterr().out == "from another thread\n"


def test_capture_stdout_nests_and_restores() -> None:
    """A tool that runs a plan of its own keeps capturing after the inner run."""
    original = sys.stdout
    with capture_stdout() as outer:
        print("outer")
        with capture_stdout() as inner:
            print("inner")
        print("outer again")
    assert (outer.getvalue(), inner.getvalue()) == ("outer\nouter again\n", "inner\n")
    assert sys.stdout is original


# ------------------------------------------------------------ async tools
def async_box() -> Toolbox:
    box = Toolbox()

    @box.tool
    async def fetch_later(name: str) -> str:
        """An async tool."""
        await asyncio.sleep(0)
        print("fetched", name)
        return name.upper()

    return box


def test_async_tool_without_a_running_loop() -> None:
    result = run("steps: [{id: f, tool: fetch_later, args: {name: x}}]", tools=async_box())
    assert result.outputs == {"f": "X"} and result.plan.step("f").output == "fetched x\n"


def test_async_tool_while_an_event_loop_runs_in_this_thread(capsys: pytest.CaptureFixture[str]) -> None:
    """Jupyter runs cells inside a running loop: run() is sync and must still work there."""

    async def notebook_cell():
        asyncio.get_running_loop()  # a loop is running, as in a kernel
        return run("steps: [{id: f, tool: fetch_later, args: {name: y}}]", tools=async_box())

    result = asyncio.run(notebook_cell())
    assert (result.status, result.outputs) == ("completed", {"f": "Y"})
    assert result.plan.step("f").output == "fetched y\n"  # captured from the helper thread too
    assert capsys.readouterr().out == ""


# ------------------------------------------------------------ timeouts, exceptions
def test_step_timeout_fails_the_step() -> None:
    release = threading.Event()
    box = Toolbox()

    @box.tool
    def stuck() -> str:
        release.wait(10)
        return "too late"

    try:
        result = run("steps: [{id: s, tool: stuck}, {id: t, tool: stuck}]", tools=box, step_timeout=0.2, on_failure="skip")
    finally:
        release.set()
    step = result.plan.step("s")
    assert step.status.value == "skipped" and step.result is None
    assert step.error == ("TimeoutError: step 's' did not finish within 0.2 s "
                          "(it was stopped; a call blocked in C code finishes in the background and is ignored)")
    assert result.plan.step("t").error.startswith("TimeoutError: step 't'")


def test_a_fast_step_with_a_timeout_works_and_is_captured() -> None:
    box = Toolbox()

    @box.tool
    def quick() -> int:
        print("quick")
        return 1

    result = run("steps: [{id: q, tool: quick}]", tools=box, step_timeout=30)
    assert result.outputs == {"q": 1} and result.plan.step("q").output == "quick\n"


def test_exception_fails_the_step_with_its_traceback() -> None:
    result = run("steps: [{id: x, tool: fail, args: {message: boom}}]", tools=Lab().tools)
    step = result.plan.step("x")
    assert (step.status.value, step.error) == ("failed", "RuntimeError: boom")
    assert step.traceback.startswith("Traceback (most recent call last)")
    assert step.traceback.rstrip().endswith("RuntimeError: boom")
    assert result.history[0].traceback == step.traceback


@pytest.mark.parametrize(("bad", "message"), [
    ({"max_steps": -1}, "max_steps must be a whole number >= 0"),
    ({"max_replans": 1.5}, "max_replans must be a whole number >= 0"),
    ({"retries": -2}, "retries must be a whole number >= 0"),
    ({"step_timeout": 0}, "step_timeout must be a positive number of seconds"),
])
def test_runner_options_are_checked(bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Runner(THREE, tools=Lab().tools, **bad)


def test_runner_input_types() -> None:
    with pytest.raises(TypeError, match="run\\(\\) takes a Plan, a plan spec or"):
        Runner(42, tools=Lab().tools)  # type: ignore[arg-type]


# ------------------------------------------------------------ Ctrl-C, pause, continue
class InterruptOnce:
    def __init__(self, box: Toolbox, when: str) -> None:
        self.armed = True

        @box.tool
        def maybe_interrupt(label: str) -> str:
            if self.armed and label == when:
                self.armed = False
                raise KeyboardInterrupt
            return label


def test_ctrl_c_in_a_tool_interrupts_and_run_again_continues() -> None:
    lab = Lab()
    InterruptOnce(lab.tools, "b")
    spec = THREE.replace("tool: ok", "tool: maybe_interrupt")
    runner = Runner(spec, tools=lab.tools, clock=Ticker())
    first = runner.run()
    assert (first.status, first.reason, first.error) == ("interrupted", "interrupted", "interrupted by the user")
    assert [s.status.value for s in first.plan.steps] == ["completed", "not_started", "not_started"]
    assert first.outputs == {"a": "a"} and first.executions == 1
    assert first.plan.step("b").notes == "interrupted; it runs again when the run continues"
    assert kinds(first)[-1] == "run.finished" and first.events[-1].data["status"] == "interrupted"
    assert not runner.finished

    second = runner.run()
    assert (second.status, second.reason) == ("completed", "goal_met")
    assert second.outputs == {"a": "a", "b": "b", "c": "c"}
    assert [s.id for s in second.history] == ["a", "b", "c"]  # a was not run again
    assert second.executions == 3 and second.plan.step("b").attempts == 1
    resumed = [e for e in second.events if e.kind == "run.started"]
    assert [e.data["resumed"] for e in resumed] == [False, True]


def test_ctrl_c_during_the_first_planning_call_plans_again_on_continue() -> None:
    calls = []

    def planner(goal, history, last_error):
        calls.append(last_error)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return [{"id": "a", "tool": "ok"}]

    runner = Runner("a goal", planner=planner, tools=Lab().tools)
    assert runner.run().status == "interrupted"
    result = runner.run()
    assert (result.status, result.reason, result.outputs) == ("completed", "goal_met", {"a": "ok"})
    assert calls == [None, None] and kinds(result).count("plan.created") == 1


def test_ctrl_c_during_a_replan_replans_on_continue() -> None:
    lab = Lab()
    rules = ScriptedPlanner({None: "steps: [{id: a, tool: ok}, {id: b, tool: fail}]", "broke": [{"id": "c", "tool": "ok"}]})
    interrupted = []

    def planner(goal, history, last_error):
        if last_error is not None and not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt
        return rules(goal, history, last_error)

    runner = Runner("a goal", planner=planner, tools=lab.tools)
    first = runner.run()
    assert (first.status, first.replans) == ("interrupted", 0)
    assert first.plan.step("b").status.value == "failed"
    second = runner.run()
    assert (second.status, second.reason, second.replans) == ("completed", "goal_met", 1)
    assert [s.id for s in second.plan.steps] == ["a", "c"]
    assert lab.called("fail") == ["it broke"]  # the failed step was not run again


def test_run_until_pauses_then_continues() -> None:
    lab = Lab()
    runner = Runner(THREE, tools=lab.tools)
    paused = runner.run(until="a")
    assert (paused.status, paused.reason) == ("paused", "paused")
    assert [s.status.value for s in paused.plan.steps] == ["completed", "not_started", "not_started"]
    assert events_of(paused, "run.paused")[0].data == {"why": "paused after step a"}
    done = runner.run()
    assert (done.status, done.reason) == ("completed", "goal_met") and lab.called("ok") == ["a", "b", "c"]


def test_run_until_an_unknown_step_is_an_error_before_anything_runs() -> None:
    lab = Lab()
    with pytest.raises(KeyError, match="no step 'zz'"):
        Runner(THREE, tools=lab.tools).run(until="zz")
    assert lab.calls == []


def test_max_executions_executes_exactly_that_many() -> None:
    lab = Lab()
    runner = Runner(THREE, tools=lab.tools)
    one = runner.run(max_executions=1)
    assert (one.status, one.executions, lab.called("ok")) == ("paused", 1, ["a"])
    two = runner.run(max_executions=1)
    assert (two.status, two.executions, lab.called("ok")) == ("paused", 2, ["a", "b"])
    assert runner.run().status == "completed" and lab.called("ok") == ["a", "b", "c"]


# ------------------------------------------------------------ events
def test_event_kinds_in_order_for_a_simple_run() -> None:
    result = run(THREE, tools=Lab().tools, clock=Ticker())
    assert kinds(result) == [
        "run.started", "plan.created",
        "step.started", "step.finished", "step.started", "step.finished", "step.started", "step.finished",
        "run.finished",
    ]
    started = result.events[0]
    assert started.data == {"resumed": False, "max_steps": 12, "max_replans": 5, "parallel": 1}
    assert result.events[1].data == {"steps": ["a", "b", "c"]}  # the engine formats no plan text
    assert [e.step for e in result.events[2:8]] == ["a", "a", "b", "b", "c", "c"]
    assert result.events[2].data == {"attempt": 1, "execution": 1, "worker": "main"}
    # one clock reading as the step starts (the started event's time), two around its call: the
    # step's own time (tests/engine/test_step_timing.py), whose end is the finished event's time
    assert result.events[3].data == {"duration": 1.0, "result": "'a'", "execution": 1}
    assert (result.events[2].time + 1, result.events[3].time) == (result.plan.step("a").started_at,
                                                                  result.plan.step("a").finished_at)
    assert result.events[-1].data == {"status": "completed", "reason": "goal_met", "error": None,
                                      "executions": 3, "replans": 0}


def test_the_injected_clock_gives_deterministic_times() -> None:
    result = run(THREE, tools=Lab().tools, clock=Ticker(100.0))
    # one clock reading per event of the run, and three per execution (its start, which its
    # step.started event carries, and its call's start and end, the end carried by step.finished)
    assert [e.time for e in result.events] == [100.0, 101.0, 102.0, 104.0, 105.0, 107.0, 108.0, 110.0, 111.0]
    a = result.plan.step("a")
    assert (a.started_at, a.finished_at, a.duration) == (103.0, 104.0, 1.0)
    again = run(THREE, tools=Lab().tools, clock=Ticker(100.0))
    assert [e.time for e in again.events] == [e.time for e in result.events]


def test_on_event_sees_each_event_as_it_happens() -> None:
    lab = Lab()
    seen: list[tuple[str, str | None, int]] = []
    run(THREE, tools=lab.tools, on_event=lambda e: seen.append((e.kind, e.step, len(lab.calls))))
    assert seen == [
        ("run.started", None, 0), ("plan.created", None, 0),
        ("step.started", "a", 0), ("step.finished", "a", 1),
        ("step.started", "b", 1), ("step.finished", "b", 2),
        ("step.started", "c", 2), ("step.finished", "c", 3),
        ("run.finished", None, 3),
    ]


def test_several_handlers_and_subscribe() -> None:
    first, second, late = [], [], []
    runner = Runner(THREE, tools=Lab().tools, on_event=[first.append, second.append])
    runner.run(max_executions=1)
    runner.subscribe(late.append)
    result = runner.run()
    assert first == second == result.events
    assert [e.kind for e in late][0] == "run.started" and late == result.events[len(result.events) - len(late):]


def test_a_handler_that_raises_is_removed_with_a_warning_and_the_run_goes_on() -> None:
    calls = []

    def broken(event):
        calls.append(event.kind)
        raise RuntimeError("view crashed")

    good = []
    with pytest.warns(UserWarning, match=r"event handler .*broken.* failed on run.started: RuntimeError\('view crashed'\); it is removed"):
        result = run(THREE, tools=Lab().tools, on_event=[broken, good.append])
    assert result.status == "completed"
    assert calls == ["run.started"] and len(good) == len(result.events) == 9


def test_failure_events_carry_the_error() -> None:
    result = run("steps: [{id: x, tool: fail, args: {message: nope}}, {id: y, tool: ok}]", tools=Lab().tools,
                 on_failure="skip", clock=Ticker())
    assert kinds(result)[2:6] == ["step.started", "step.failed", "step.skipped", "step.started"]
    failed = events_of(result, "step.failed")[0]
    assert (failed.step, failed.data) == ("x", {"duration": 1.0, "error": "RuntimeError: nope", "execution": 1})
    assert events_of(result, "step.skipped")[0].data == {"error": "RuntimeError: nope"}


def test_history_is_a_snapshot_of_each_execution() -> None:
    lab = Lab()
    lab.flaky_failures["k"] = 1
    result = run("steps: [{id: f, tool: flaky, args: {key: k}}]", tools=lab.tools, on_failure="retry", retries=1)
    first, second = result.history
    assert (first.status.value, first.attempts, first.error) == ("failed", 1, "RuntimeError: flaky k failed (1 failure(s) left)")
    assert (second.status.value, second.attempts, second.result) == ("completed", 2, "k worked")
    assert result.plan.step("f").error is None


class CtrlCIn:
    """An event handler (a view) that gets Ctrl-C the first time it sees ``kind``."""

    def __init__(self, kind: str) -> None:
        self.kind, self.fired = kind, False

    def __call__(self, event) -> None:
        if event.kind == self.kind and not self.fired:
            self.fired = True
            raise KeyboardInterrupt


def test_ctrl_c_in_a_view_while_a_failure_is_reported_still_applies_the_policy() -> None:
    lab = Lab()
    runner = Runner("steps: [{id: a, tool: fail}, {id: b, tool: ok}]", tools=lab.tools, on_event=CtrlCIn("step.failed"))
    first = runner.run()
    assert first.status == "interrupted" and first.plan.step("a").status.value == "failed"
    second = runner.run()
    # the abort policy is applied on continue; the run does not drift on to step b
    assert (second.status, second.reason) == ("failed", "aborted")
    assert lab.called("fail") == ["it broke"] and lab.called("ok") == []


def test_ctrl_c_in_a_view_while_a_step_starts_does_not_count_an_execution() -> None:
    lab = Lab()
    runner = Runner(THREE, tools=lab.tools, on_event=CtrlCIn("step.started"), max_steps=3)
    first = runner.run()
    assert (first.status, first.executions, first.plan.step("a").attempts, lab.calls) == ("interrupted", 0, 0, [])
    second = runner.run()
    assert (second.status, second.executions) == ("completed", 3)


def test_ctrl_c_while_the_end_is_reported_keeps_how_the_run_ended() -> None:
    runner = Runner("steps: [{id: a, tool: fail}]", tools=Lab().tools, on_event=CtrlCIn("run.finished"))
    result = runner.run()
    assert (result.status, result.reason) == ("failed", "aborted") and runner.finished


def test_a_step_reset_by_hand_while_paused_runs_again() -> None:
    lab = Lab()
    runner = Runner(THREE, tools=lab.tools)
    runner.run(until="b")
    runner.plan.step("a").status = "not_started"  # "run that one again"
    result = runner.run()
    assert (result.status, result.reason) == ("completed", "goal_met")
    assert lab.called("ok") == ["a", "b", "a", "c"]  # plan order: the reset step comes first
    assert result.plan.step("a").attempts == 2


def test_a_tool_that_raises_system_exit_is_a_failed_step_not_a_broken_run() -> None:
    import sys

    box = Toolbox()

    @box.tool
    def quits() -> None:
        """Like a CLI library's main()."""
        sys.exit(2)

    @box.tool
    def fine() -> str:
        """Works."""
        return "ok"

    result = run("steps: [{id: a, tool: quits}, {id: b, tool: fine}]", tools=box, on_failure="skip")
    assert result.plan.step("a").status.value == "skipped"
    assert result.plan.step("a").error == "SystemExit: 2"
    assert result.plan.step("b").result == "ok" and result.status == "completed"


def test_a_timed_out_python_loop_is_stopped_and_its_late_events_are_ignored() -> None:
    import time

    from planbook import AgentReply

    ticks: list[int] = []

    def busy(task, context):  # an agent that keeps "calling a model" in a Python loop
        for i in range(400):
            ticks.append(i)
            context.emit("llm.call", model="m", purpose="agent", prompt_tokens=1, completion_tokens=1)
            time.sleep(0.005)
        return AgentReply(answer="late")

    result = run("steps: [{id: a, agent: busy}]", agents={"busy": busy}, step_timeout=0.2, on_failure="skip")
    seen_at_end = len(ticks)
    time.sleep(0.3)
    assert len(ticks) == seen_at_end, "the abandoned agent kept running after its timeout"
    assert result.plan.step("a").status.value == "skipped"
    calls = [e for e in result.events if e.kind == "llm.call"]
    assert 0 < len(calls) <= seen_at_end
    assert result.events[-1].kind == "run.finished"  # nothing was emitted after the end
    assert result.usage.calls == len(calls)


def test_a_heartbeat_ticks_on_the_runner_thread_while_a_slow_step_runs() -> None:

    from planbook import Runner

    box = Toolbox()
    worker_threads: list[int] = []

    @box.tool
    def slow() -> str:
        """Takes a while."""
        worker_threads.append(threading.get_ident())
        print("working")
        three_beats.wait(timeout=60)  # the step lasts until the runner thread has beaten three times
        return "done"

    runner = Runner("steps: [{id: a, tool: slow}]", tools=box)
    beats: list[int] = []
    three_beats = threading.Event()

    def beat() -> None:
        beats.append(threading.get_ident())
        if len(beats) >= 3:
            three_beats.set()

    runner.add_heartbeat(beat, interval=0.05)
    event_threads: list[int] = []
    runner.subscribe(lambda e: event_threads.append(threading.get_ident()))
    result = runner.run()
    main = threading.get_ident()
    assert result.outputs == {"a": "done"} and result.plan.step("a").output == "working\n"
    assert len(beats) >= 3 and set(beats) == {main}
    assert set(event_threads) == {main}
    assert worker_threads and worker_threads[0] != main


def test_events_an_agent_emits_off_thread_arrive_on_the_runner_thread_in_order() -> None:
    from planbook import AgentReply, Runner

    def agent(task, context):
        context.emit("llm.call", model="m", purpose="agent", prompt_tokens=3, completion_tokens=2)
        return AgentReply(answer="hi")

    runner = Runner("steps: [{id: a, agent: talk}]", agents={"talk": agent})
    runner.add_heartbeat(lambda: None, interval=0.01)
    seen: list[tuple[str, int]] = []
    runner.subscribe(lambda e: seen.append((e.kind, threading.get_ident())))
    result = runner.run()
    kinds = [k for k, _ in seen]
    assert kinds.index("step.started") < kinds.index("llm.call") < kinds.index("step.finished")
    assert {t for _, t in seen} == {threading.get_ident()}
    assert result.usage.total_tokens == 5


def test_heartbeat_interval_must_be_positive() -> None:
    from planbook import Runner

    with pytest.raises(ValueError, match="heartbeat interval must be positive"):
        Runner("steps: [{id: a, tool: noop}]", tools={"noop": lambda: None}).add_heartbeat(lambda: None, 0)


def test_a_main_thread_tool_runs_on_the_runner_thread_even_with_a_heartbeat() -> None:
    from planbook import Runner

    box = Toolbox()
    where: dict[str, int] = {}

    @box.tool(main_thread=True)
    def bound() -> str:
        """Uses an object tied to the thread that made it."""
        where["bound"] = threading.get_ident()
        return "ok"

    @box.tool
    def free() -> str:
        """Runs anywhere."""
        where["free"] = threading.get_ident()
        return "ok"

    runner = Runner("steps: [{id: a, tool: bound}, {id: b, tool: free}]", tools=box)
    runner.add_heartbeat(lambda: None, interval=0.05)
    assert runner.run().ok
    assert where["bound"] == threading.get_ident() != where["free"]
    with pytest.raises(ValueError, match=r"step_timeout cannot stop tools that run on the main thread \(bound\)"):
        Runner("steps: [{id: a, tool: bound}]", tools=box, step_timeout=1)


def test_two_views_keep_their_own_heartbeats() -> None:
    import time

    from planbook import Runner

    box = Toolbox()

    @box.tool
    def slow() -> None:
        """Takes a moment."""
        time.sleep(0.2)

    runner = Runner("steps: [{id: a, tool: slow}, {id: b, tool: slow}]", tools=box)
    first: list[int] = []
    second: list[int] = []
    beat_one, beat_two = (lambda: first.append(1)), (lambda: second.append(1))
    runner.add_heartbeat(beat_one, interval=0.05)
    runner.add_heartbeat(beat_two, interval=0.05)
    runner.run(max_executions=1)
    assert first and second
    runner.remove_heartbeat(beat_one)
    before = len(first)
    runner.run()
    assert len(first) == before and len(second) > 2


def test_an_agent_whose_tools_need_the_main_thread_runs_there() -> None:
    from planbook import AgentReply, Runner

    box = Toolbox()

    @box.tool(main_thread=True)
    def bound() -> int:
        """Thread-bound."""
        return threading.get_ident()

    class Agent:
        name, description, tools = "user", "uses a thread-bound tool", box

        def __call__(self, task, context):
            return AgentReply(answer=self.tools["bound"].fn())

    runner = Runner("steps: [{id: a, agent: user}]", agents=[Agent()])
    runner.add_heartbeat(lambda: None, interval=0.05)
    assert runner.run().outputs["a"] == threading.get_ident()


def test_main_thread_is_refused_for_async_tools() -> None:
    box = Toolbox()
    with pytest.raises(ValueError, match="tool 'later' is async: it runs on an event loop"):
        @box.tool(main_thread=True)
        async def later() -> None:
            """Async."""


def test_a_planner_made_step_with_a_pinned_tool_and_a_timeout_fails_clearly() -> None:
    box = Toolbox()

    @box.tool(main_thread=True)
    def bound() -> str:
        """Thread-bound."""
        return "ran"

    planner = ScriptedPlanner({None: [{"id": "a", "tool": "bound"}]})
    result = run("use the bound tool", planner=planner, tools=box, step_timeout=5, on_failure="abort")
    assert result.reason == "aborted"
    assert "uses tool 'bound', which runs on the main thread, so step_timeout cannot stop it" in result.error


def test_a_thread_error_in_a_worker_thread_says_what_to_do() -> None:
    from planbook import Runner

    box = Toolbox()

    @box.tool
    def needs_main() -> None:
        """Like signal.signal or a sqlite3 connection from another thread."""
        raise ValueError("signal only works in main thread of the main interpreter")

    runner = Runner("steps: [{id: a, tool: needs_main}]", tools=box)
    runner.add_heartbeat(lambda: None)
    error = runner.run().plan.step("a").error
    assert "register the tool with main_thread=True, or run without a view" in error


def test_a_failing_heartbeat_is_removed_with_a_warning_and_the_run_goes_on() -> None:
    import time

    from planbook import Runner

    box = Toolbox()

    @box.tool
    def slow() -> str:
        """Slow."""
        time.sleep(0.2)
        return "ok"

    def broken() -> None:
        raise RuntimeError("view broke")

    runner = Runner("steps: [{id: a, tool: slow}]", tools=box)
    runner.add_heartbeat(broken, interval=0.02)
    with pytest.warns(UserWarning, match="heartbeat .* failed: RuntimeError\\('view broke'\\); it is removed"):
        result = runner.run()
    assert result.ok and not runner._heartbeats


def test_continuing_waits_for_interrupted_work_still_blocked_in_a_call() -> None:
    import _thread
    import time

    from planbook import Runner

    box = Toolbox()
    log: list[str] = []

    @box.tool
    def blocking() -> str:
        """A call that an interrupt cannot stop (time.sleep stands in for C code)."""
        log.append("start")
        time.sleep(0.4)
        log.append("end")
        return "done"

    runner = Runner("steps: [{id: a, tool: blocking}]", tools=box)
    runner.add_heartbeat(lambda: _thread.interrupt_main() if log == ["start"] else None, interval=0.05)
    first = runner.run()
    assert first.status == "interrupted" and log == ["start"]
    second = runner.run()
    # the interrupted call was left to finish; continuing waited for it and kept its result
    assert second.ok and log == ["start", "end"] and second.outputs == {"a": "done"}
    assert second.plan.step("a").notes.startswith("kept:") and second.plan.step("a").attempts == 1
    assert second.executions == len(second.history) == 1


def test_a_result_whose_repr_fails_is_still_a_result() -> None:
    class Odd:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    box = Toolbox()

    @box.tool
    def odd() -> object:
        """Returns an object with a broken repr."""
        return Odd()

    result = run("steps: [{id: a, tool: odd}]", tools=box)
    assert result.ok and isinstance(result.outputs["a"], Odd)
    finished = [e for e in result.events if e.kind == "step.finished"][0]
    assert finished.data["result"] == "<Odd (repr failed: RuntimeError)>"
