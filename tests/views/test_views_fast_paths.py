"""The live view's fast paths give what the plain ones give: the same floats, throttle answers,
timeline, panes and widget messages (they exist only to cost less CPU per step)."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from helpers import fake_clock
from planbook import Runner, Status
from planbook.data.timeline import TimelineBuilder
from planbook.views.live import LiveView, Throttle
from planbook.views.state import row_window, window_of_codes

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")
from test_widget import long_plan, make_tools  # noqa: E402

from planbook.views.widget import EAGER_ROWS, STATUS_CODES, PlanView, round4  # noqa: E402


def same_float(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b)


def test_round4_is_round_to_four_places_bit_for_bit() -> None:
    rng = random.Random(4)
    values = [0.0, -0.0, 5e-5, -5e-5, 1.5e-4, 2.00005, 1e-12, -1e-12, 1e7, 1e8, -1e8, 1e300,
              float("inf"), float("-inf")]
    for _ in range(20_000):
        k = rng.randint(-10**7, 10**7)
        values += [rng.uniform(-5, 100), rng.uniform(0, 0.01), k / 10000, (k + 0.5) / 10000,
                   (k + 0.5) / 10000 + rng.choice((-1e-12, 1e-12))]
    for x in values:
        assert same_float(round4(x), round(x, 4)), x
    assert round4(float("nan")) != round4(float("nan"))  # nan stays nan


class Bucket:
    """The token bucket worked out on every ask (what Throttle answered before it remembered when
    the next token is due)."""

    def __init__(self, rate: float, burst: int, clock: Any) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.last = float(burst), clock()

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@pytest.mark.parametrize(("rate", "burst"), [(10.0, 1), (10.0, 3), (2.5, 2), (0.0, 1), (10.0, 0), (0.0, 0)])
def test_the_throttle_answers_as_a_bucket_worked_out_on_every_ask(rate: float, burst: int) -> None:
    rng = random.Random(int(rate * 10) + burst)
    now = [0.0]
    fast, plain = Throttle(rate, burst, clock=lambda: now[0]), Bucket(rate, burst, lambda: now[0])
    for _ in range(5000):
        now[0] += rng.choice((0.0, 0.0001, 0.003, 0.02, 0.1, 0.37, 2.0))
        assert fast.allow() == plain.allow(), now[0]


def test_the_window_from_status_letters_is_row_window() -> None:
    rng = random.Random(7)
    statuses = list(Status)
    for _ in range(500):
        n = rng.randint(0, 80)
        steps = [type("S", (), {"status": rng.choice(statuses)})() for _ in range(n)]
        codes = "".join(STATUS_CODES[s.status] for s in steps)
        for rows in (1, 5, 20):
            assert window_of_codes(codes, rows) == row_window(steps, rows)


def test_the_live_timeline_and_usage_are_those_of_all_the_events() -> None:
    runner = Runner(long_plan(60), tools=make_tools(), max_steps=60)
    view = PlanView(runner)
    bridge = LiveView(runner, view, clock=fake_clock(tick=0.001))
    runner.run(until="20")
    runner.emit("llm.call", prompt_tokens=3, completion_tokens=4)
    runner.run()
    bridge.close()
    state = bridge.state()
    whole = TimelineBuilder(runner.state.history).feed_all(runner.state.events)
    assert [ex.as_dict() for ex in state.timeline] == [ex.as_dict() for ex in whole.executions]
    assert len(state.timeline) == 60 and state.origin == whole.origin
    assert state.elapsed == whole.working_time(state.now)
    assert (state.usage.calls, state.usage.total_tokens) == (1, 7)


def test_the_panes_sent_are_those_a_pass_over_every_step_finds() -> None:
    """Panes go for the steps in the window around the running ones, the open one, the failed
    ones and those sent before: the same set, in plan order, as a pass over every step."""
    tools = make_tools(fail={"down": 1})
    plan = long_plan(150)
    plan.steps[9] = plan.steps[9].model_copy(update={"tool": "fetch", "args": {"source": "down"}})
    runner = Runner(plan, tools=tools, max_steps=200, on_failure="skip")
    view = PlanView(runner)
    view.widget.selected = "3"
    batches: list[list[str]] = []
    view.widget.observe(lambda c: batches.append(list(c["new"].get("panes", {}))), names=["batch"])

    def every_step(steps: list[Any], sent: dict[str, Any]) -> list[str]:
        start, end = row_window(steps, EAGER_ROWS)
        out = []
        for i, step in enumerate(steps):
            if step.status is Status.not_started and not step.attempts and not step.notes:
                continue
            if not (start <= i < end or step.id in sent or step.error or step.id == "3"):
                continue
            if sent.get(step.id) != view._key(step):
                out.append(step.id)
        return out

    expected: list[list[str]] = []
    original = view._changed_panes

    def checked(steps: list[Any], *args: Any) -> dict[str, Any]:
        expected.append(every_step(steps, dict(view._sent)))
        return original(steps, *args)

    view._changed_panes = checked  # type: ignore[method-assign]
    bridge = LiveView(runner, view, clock=fake_clock(tick=0.002))
    runner.run()
    bridge.close()
    assert [b for b in batches if b] == [e for e in expected if e]
    assert "10" in view.panes and "3" in view.panes and "60" not in view.panes


@pytest.mark.parametrize("keys", [["head", "rows", "statuses", "batch"], ["selected"], "statuses",
                                  ["waiting", "head"], None])
def test_the_widget_sends_its_traits_as_ipywidgets_would(keys: Any) -> None:
    import ipywidgets

    runner = Runner(long_plan(30), tools=make_tools(), max_steps=30)
    view = PlanView(runner)
    bridge = LiveView(runner, view, clock=fake_clock(tick=0.001))
    runner.run()
    bridge.close()
    w = view.widget
    w.waiting = {"1": {"data": b"\x00bytes"}}  # a step's arguments may hold bytes: those take the general path
    sent: list[tuple[Any, Any]] = []
    w._send = lambda msg, buffers=None: sent.append((msg, list(buffers or [])))  # type: ignore[method-assign]
    w.send_state(keys)
    ipywidgets.Widget.send_state(w, keys)
    ours, theirs = sent
    assert ours == theirs
