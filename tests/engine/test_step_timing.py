"""A step's time is its call's own (issue 27: a dict literal charged 37-65 ms in notebook 02).

What the run does around a call — a view's first draw when the step starts, its redraws
while the step runs, a store write, handing the call to a thread — is not the step's time.
The clock here moves only when read (TICK a read), or when a test's view "takes" time
(COST at once): what lies inside the timed region decides, never the machine's speed.
"""

from __future__ import annotations

import threading

import pytest

from planbook import Event, Runner, Toolbox

COST = 30.0  # what a view's draw "takes" of the run's clock: a first-use cost
TICK = 0.001  # one read of the clock


class SplitClock:
    """The run's clock: TICK a read; a worker thread counts its own reads from where its first
    read found the clock, so what the runner's thread does meanwhile is not in them."""

    def __init__(self) -> None:
        self.now = 100.0
        self.main = threading.get_ident()
        self.local = threading.local()
        self.lock = threading.Lock()

    def spend(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds

    def __call__(self) -> float:
        with self.lock:
            if threading.get_ident() == self.main:
                self.now += TICK
                return self.now
            self.local.t = getattr(self.local, "t", self.now) + TICK
            return self.local.t


def quick_tools() -> Toolbox:
    box = Toolbox()

    @box.tool
    def prices() -> dict[str, float]:
        return {"coffee": 4.5, "bread": 3.0}

    @box.tool
    def total(values: dict[str, float]) -> float:
        return sum(values.values())

    return box


PLAN = "steps:\n  - {id: load, tool: prices}\n  - {id: sum, tool: total, args: {values: $load}, needs: [load]}\n"


def slow_first_draw(clock: SplitClock) -> object:
    """A view whose first draw, when the first step starts, takes 3 x COST of the run's clock."""
    drawn = []

    def on_event(event: Event) -> None:
        if event.kind == "step.started" and not drawn:
            drawn.append(event)
            clock.spend(3 * COST)

    return on_event


@pytest.mark.parametrize("where", ["runner's thread", "worker thread"])
def test_a_steps_duration_is_its_call_only(where: str) -> None:
    clock = SplitClock()
    runner = Runner(PLAN, tools=quick_tools(), clock=clock, on_event=slow_first_draw(clock))
    if where == "worker thread":
        runner.add_heartbeat(lambda: clock.spend(COST))  # a view redrawing while the step runs
    result = runner.run()
    assert result.status == "completed"
    for step in result.plan.steps:  # the call's own two reads of the clock, and nothing between them
        assert step.duration == pytest.approx(TICK), step.id
    for record in result.records:
        assert record.end - record.start == pytest.approx(TICK)
