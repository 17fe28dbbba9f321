"""What a running step prints reaches its views while it runs: ``step.output`` events
(planbook.engine.liveoutput), throttled on the run's clock, gated, and never stored.

Every wait here is on an event the run announces; the run's clock is a Ticker that moves
only when a test moves it, so the throttle decides the same way on any machine.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from helpers import Ticker, kinds
from planbook import Event, Runner, Toolbox
from planbook.engine.liveoutput import EVERY
from planbook.store import open_store

WAIT = 30  # seconds an event may take on a very busy machine: a guard, never a measure


class Seen:
    """Records the run's events and wakes a waiting step when an output it expects arrives."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.outputs: list[str] = []
        self.steps_held: list[str] = []
        self.wanted: dict[str, threading.Event] = {}
        self.runner: Runner | None = None

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if event.kind == "step.output":
            text = event.data["output"]
            self.outputs.append(text)
            assert self.runner is not None
            self.steps_held.append(self.runner.state.plan.step(event.step or "").output)
            if text in self.wanted:
                self.wanted[text].set()

    def expect(self, text: str) -> threading.Event:
        return self.wanted.setdefault(text, threading.Event())


def printing_run(seen: Seen, clock: Ticker, **options: Any) -> Runner:
    box = Toolbox()

    @box.tool
    def talk(password: str = "") -> str:
        sys.stdout.write("first\n")  # one write (print() makes two, and the run may look between them)
        assert seen.expect("first\n").wait(WAIT)  # shown at once, with no clock move
        for n in range(50):  # many prints while the clock stands still: held back
            print("line", n)
        print(f"using {password}" if password else "no secret")
        clock.now += EVERY  # the throttle's interval passes: the next look shows them all at once
        so_far = "first\n" + "".join(f"line {n}\n" for n in range(50)) + ("using ***\n" if password else "no secret\n")
        assert seen.expect(so_far).wait(WAIT)
        print("last")  # no time passes: only the flush before the finish can show it
        return "done"

    runner = Runner("steps: [{id: s, tool: talk, args: {password: hunter2}}]", tools=box, clock=clock,
                    on_event=seen, **options)
    seen.runner = runner
    runner.add_heartbeat(lambda: None)  # as a live view does: the step runs on a worker thread
    return runner


def test_a_running_steps_output_is_announced_throttled_and_flushed_before_it_ends() -> None:
    seen, clock = Seen(), Ticker(tick=0.0)
    result = printing_run(seen, clock).run()

    assert result.status == "completed"
    final = "first\n" + "".join(f"line {n}\n" for n in range(50)) + "using ***\nlast\n"
    middle = final[: -len("last\n")]
    # one event for the first print, one for the fifty held back, one flushed before the end
    assert seen.outputs == ["first\n", middle, final]
    assert seen.steps_held == seen.outputs  # the running step holds what was announced
    order = [e.kind for e in seen.events if e.kind in ("step.output", "step.finished")]
    assert order == ["step.output"] * 3 + ["step.finished"]
    assert result.plan.step("s").output == final
    assert "hunter2" not in "".join(seen.outputs)  # through the run's gate


def test_output_events_are_not_recorded_nor_stored() -> None:
    seen, clock = Seen(), Ticker(tick=0.0)
    store = open_store(":memory:")
    runner = printing_run(seen, clock, store=store)
    result = runner.run()

    assert "step.output" in kinds(seen.events)
    assert "step.output" not in kinds(result)  # the run's record (what a replay or a resume reads)
    assert runner.recorder is not None and runner.recorder.run_id is not None
    stored = store.load_run(runner.recorder.run_id)
    assert "step.output" not in [e.kind for e in stored.events]
    assert stored.plan.step("s").output == result.plan.step("s").output  # the final output, with its step


def test_a_step_that_prints_nothing_announces_nothing() -> None:
    box = Toolbox()

    @box.tool
    def quiet() -> int:
        return 1

    seen = Seen()
    runner = Runner("steps: [{id: q, tool: quiet}, {id: r, tool: quiet}]", tools=box, on_event=seen, parallel=2)
    seen.runner = runner
    assert runner.run().status == "completed"
    assert "step.output" not in kinds(seen.events)


def test_a_timed_out_step_keeps_what_it_printed() -> None:
    box = Toolbox()
    release = threading.Event()

    @box.tool
    def stuck() -> None:
        print("started, then stuck")
        release.wait(WAIT)

    class Expire(Seen):
        def __call__(self, event: Event) -> None:
            super().__call__(event)
            if event.kind == "step.output":  # it has printed: its time is up now (no wall clock involved)
                assert self.runner is not None
                for flight in self.runner.dispatch.inflight:
                    flight.deadline = 0.0

    seen = Expire()
    runner = Runner("steps: [{id: t, tool: stuck}]", tools=box, on_event=seen, step_timeout=3600)
    seen.runner = runner
    try:
        result = runner.run()
    finally:
        release.set()
    step = result.plan.step("t")
    assert step.status.value == "failed" and "TimeoutError" in (step.error or "")
    assert step.output == "started, then stuck\n"


def test_steps_running_at_once_each_announce_only_what_they_printed() -> None:
    box = Toolbox()
    seen = Seen()

    @box.tool
    def say(word: str, other: str) -> str:
        sys.stdout.write(f"{word}\n")
        assert seen.expect(f"{word}\n").wait(WAIT)
        assert seen.expect(f"{other}\n").wait(WAIT)  # both run at once: each waits for the other's line
        return word

    plan = ("steps:\n  - {id: a, tool: say, args: {word: alpha, other: beta}}\n"
            "  - {id: b, tool: say, args: {word: beta, other: alpha}}\n")
    runner = Runner(plan, tools=box, on_event=seen, parallel=2, clock=Ticker(tick=0.0))
    seen.runner = runner
    result = runner.run()
    assert result.status == "completed"
    shown = sorted((e.step, e.data["output"]) for e in seen.events if e.kind == "step.output")
    assert shown == [("a", "alpha\n"), ("b", "beta\n")]
    assert [result.plan.step(s).output for s in "ab"] == ["alpha\n", "beta\n"]


def test_a_call_on_a_given_executor_prints_where_it_runs_and_its_output_comes_with_its_end() -> None:
    """A concurrent.futures executor (a Dask client's, here the standard one) ships the call:
    nothing is read while it runs, and what it printed is the step's output when it ends."""
    from concurrent.futures import ThreadPoolExecutor

    box = Toolbox()

    @box.tool
    def shipped() -> int:
        print("printed over there")
        return 1

    seen = Seen()
    with ThreadPoolExecutor(1) as pool:
        runner = Runner("steps: [{id: s, tool: shipped}]", tools=box, on_event=seen, executor=pool)
        seen.runner = runner
        result = runner.run()
    assert result.plan.step("s").output == "printed over there\n"
    assert "step.output" not in kinds(seen.events)
