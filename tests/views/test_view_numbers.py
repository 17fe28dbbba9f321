"""Numbers the views show are true: one definition of elapsed (the run's working time), a
call kept around an interrupt keeps its real duration and a green bar, an interrupted step
says so, and counts and cut labels read as words."""

from __future__ import annotations

import _thread
import signal
import threading
from typing import Any

import pytest

import planbook
from planbook import Runner, Toolbox
from planbook.data.wording import plural, slug
from planbook.views.live import LiveView
from planbook.views.panes import INTERRUPTED_STATUS, PaneBudget, pane
from planbook.views.state import ELAPSED_MEANS, ViewState


class Clock:
    """The run's clock, moved on only by the test (or a tool standing for time spent)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.t

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.t += seconds


@pytest.fixture(autouse=True)
def python_handles_sigint() -> Any:
    """Python's own SIGINT handler (a job started in the background begins with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


# ------------------------------------------------------------------ elapsed
def test_elapsed_is_the_runs_working_time_even_for_a_fast_run() -> None:
    """Notebook 01's run read 'elapsed 0.0 ms' (rounded to a tenth of a second)."""
    clock = Clock()
    box = Toolbox()

    @box.tool
    def fast() -> int:
        clock.advance(0.0007)
        return 1

    result = planbook.run("steps: [{id: a, tool: fast}]", tools=box, clock=clock)
    state = ViewState.of(result)
    assert state.elapsed == pytest.approx(0.0007)
    pytest.importorskip("anywidget")
    from planbook.views.widget import PlanView

    head = PlanView(result).widget.head
    assert head["elapsed"] == pytest.approx(0.0007) and head["elapsed_means"] == ELAPSED_MEANS


def test_elapsed_moves_on_while_a_step_works() -> None:
    """Read from the run's clock at every draw, not from when the view was made."""
    clock = Clock()
    box = Toolbox()
    seen: list[float | None] = []

    @box.tool
    def slow() -> int:
        for _ in range(3):
            clock.advance(0.5)
            seen.append(ViewState.of_runner(runner).elapsed)
        return 1

    runner = Runner("steps: [{id: a, tool: slow}]", tools=box, clock=clock)
    runner.run()
    assert seen == [pytest.approx(0.5), pytest.approx(1.0), pytest.approx(1.5)]


def test_elapsed_of_a_continued_run_counts_every_stretch_and_no_pause() -> None:
    """A run paused at a breakpoint and continued: its second view counted from zero (3.00 s
    for a run whose timeline said 9.12 s). Now: all the work, none of the pause."""
    clock = Clock()
    box = Toolbox()

    @box.tool
    def work(seconds: float) -> float:
        clock.advance(seconds)
        return seconds

    runner = Runner("steps: [{id: a, tool: work, args: {seconds: 2}}, {id: b, tool: work, args: {seconds: 3}}]",
                    tools=box, clock=clock)
    paused = runner.run(max_executions=1)
    assert paused.status == "paused" and ViewState.of(paused).elapsed == pytest.approx(2.0)
    clock.advance(60.0)  # the user reads the pane for a minute
    view = LiveView(runner, target=_Target())
    done = runner.run()
    view.close()
    assert done.ok and ViewState.of(done).elapsed == pytest.approx(5.0)
    assert view.state().elapsed == pytest.approx(5.0)
    assert done.timeline is not None and done.timeline.wall == pytest.approx(65.0)  # the timeline shows the pause


class _Target:
    def render(self, state: ViewState) -> None:
        pass


# ------------------------------------------------------------------ a call kept around an interrupt
def _interrupted_then_continued() -> tuple[Any, Any]:
    """Step a's call works 1 s, the user interrupts, the call returns, 3 s later the run continues."""
    clock = Clock()
    release, started, fired = threading.Event(), threading.Event(), threading.Event()
    box = Toolbox()

    @box.tool
    def held() -> str:
        clock.advance(1.0)
        started.set()
        assert release.wait(30)
        return "done"

    @box.tool
    def quick() -> str:
        clock.advance(0.5)
        return "q"

    runner = Runner("steps: [{id: a, tool: held}, {id: b, tool: quick, needs: [a]}]", tools=box, parallel=2,
                    clock=clock)

    def interrupt_once_started() -> None:
        if started.is_set() and not fired.is_set():
            fired.set()
            _thread.interrupt_main()

    runner.add_heartbeat(interrupt_once_started, interval=0.01)
    first = runner.run()
    assert first.status == "interrupted"
    first_state = ViewState.of(first)
    release.set()
    for leftover in runner.dispatch.leftovers:
        while not leftover.future.done():
            runner.dispatch.wait(0.05)
    clock.advance(3.0)
    return first_state, runner.run()


def test_a_step_interrupted_mid_call_says_so_in_its_pane() -> None:
    first, _ = _interrupted_then_continued()
    step = first.plan.step("a")
    data = pane(step, {}, origin=first.origin, budget=PaneBudget())
    assert data["status_text"] == INTERRUPTED_STATUS == "interrupted — runs again when the run continues"
    [bar] = first.timeline
    assert bar.interrupted and first.elapsed == pytest.approx(1.0)


def test_a_call_kept_around_an_interrupt_has_its_real_duration_and_a_green_bar() -> None:
    """The pane said 4.10 s for a 1 s call (it counted the pause) and the bar was red."""
    _, second = _interrupted_then_continued()
    assert second.ok
    a = second.plan.step("a")
    assert a.duration == pytest.approx(1.0) and a.notes.startswith("kept:")
    state = ViewState.of(second)
    bars = {ex.step: ex for ex in state.timeline}
    assert bars["a"].ok is True and not bars["a"].interrupted
    assert bars["a"].end - bars["a"].start == pytest.approx(1.0)
    assert bars["b"].start - bars["a"].end == pytest.approx(3.0)  # the pause is a gap
    assert state.elapsed == pytest.approx(1.5)
    kept = [e for e in second.events if e.kind == "step.finished" and e.step == "a"]
    assert kept[-1].data.get("kept") is True


# ------------------------------------------------------------------ words
def test_counts_are_written_as_words() -> None:
    assert (plural(1, "execution"), plural(0, "execution"), plural(2, "lane")) == ("1 execution", "0 executions",
                                                                                  "2 lanes")
    clock = Clock()
    runner = Runner("steps: [{id: a, tool: t}, {id: b, tool: t}]", tools={"t": lambda: 1}, clock=clock)
    paused = runner.run(max_executions=1)
    assert ViewState.of(paused).why == "paused after 1 execution"


def test_an_id_made_from_a_goal_is_cut_between_words() -> None:
    goal = "Plan a weekend in Lyon that books the trains and hotels"
    assert slug(goal) == "plan-a-weekend-in-lyon-that-books-the" and len(slug(goal)) <= 40
    assert planbook.Runner(goal, tools={}, planner=lambda g, h, e: []).plan.id == slug(goal)
    assert slug("Supercalifragilisticexpialidocious " * 2, width=10) == "supercalif"  # one long word: cut


# ------------------------------------------------------------------ in a kernel, as the user sees it
KERNEL_SETUP = """
import planbook
from ipywidgets.widgets import widget as _widget_module
widgets_alive = getattr(_widget_module, "_instances", None) or _widget_module.Widget._active_widgets  # 8.0 kept them on the class
from planbook.views.state import ViewState
%load_ext planbook

@planbook.tool
def work(n: int) -> int:
    "Add up a little."
    return sum(range(n))
"""


def test_the_widget_header_shows_the_working_time_of_a_continued_run() -> None:
    """In a kernel: a run paused with --step, then continued. The header read the second
    view's own age rounded to 0.1 s ('0.0 ms'); it reads the run's working time now."""
    pytest.importorskip("jupyter_client")
    from helpers import Kernel

    kernel = Kernel()
    try:
        for code in (KERNEL_SETUP, "%%plan twice\nsteps:\n  - {id: a, tool: work, args: {n: 1000}}\n"
                                   "  - {id: b, tool: work, args: {n: 1000}}\n",
                     "r1 = %run_plan twice --step"):
            reply, messages = kernel.execute(code, timeout=120)
            assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
        reply, messages = kernel.execute(
            "r2 = %run_plan twice\n"
            "print(r1.status, r2.status, repr(round(ViewState.of(r2).elapsed, 4)), repr(ViewState.of(r1).elapsed))",
            timeout=120)
        assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
        out = "".join(m["content"]["text"] for m in messages
                      if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
        status1, status2, elapsed, first = out.split()
        # every header the browser got while the run went on (its final state is the record's, which
        # replaces the widget): the continued run's working time, which starts from the first part's
        heads = [m["content"]["data"]["state"]["head"] for m in messages if m["msg_type"] in ("comm_open", "comm_msg")
                 and "elapsed" in m["content"]["data"].get("state", {}).get("head", {})]
        assert (status1, status2) == ("paused", "completed"), out
        # the header sends its times rounded to 0.1 ms (round4), as the printed final one is
        assert heads and all(round(float(first), 4) <= head["elapsed"] <= float(elapsed) for head in heads), \
            (first, elapsed, heads)
        assert float(first) > 0 and all(head["elapsed_means"] for head in heads)
    finally:
        kernel.close()
