"""What a slow step prints reaches its pane in the live view while it runs (``step.output``
events, planbook.engine.liveoutput), within the view's rate limit, without sending the plan again.

Every wait is on the widget's own traits (what the browser receives), with a generous guard
for a busy machine; nothing is timed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

from planbook import Runner, Toolbox

WAIT = 30  # seconds: a guard, never a measure


def test_a_running_steps_printed_text_reaches_its_pane_before_it_ends() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.live import LiveView
    from planbook.views.widget import PlanView

    shown = {"first line": threading.Event(), "second line": threading.Event()}
    running_panes: list[str] = []
    box = Toolbox()

    @box.tool
    def talk() -> str:
        sys.stdout.write("first line\n")
        assert shown["first line"].wait(WAIT), "the pane never showed the first line while the step ran"
        sys.stdout.write("second line\n")
        assert shown["second line"].wait(WAIT), "the pane never showed the second line while the step ran"
        return "done"

    runner = Runner("steps:\n  - {id: a, tool: talk}\n  - {id: b, tool: talk, needs: [a]}\n", tools=box)
    view = PlanView(runner)
    rows_sent: list[Any] = []

    def on_batch(change: dict[str, Any]) -> None:
        pane = change["new"].get("panes", {}).get("a")
        if pane is not None and pane.get("end") is None:  # step a still runs
            running_panes.append(pane.get("output", ""))
            for text, flag in shown.items():
                if text in pane.get("output", ""):
                    flag.set()

    def on_event(event: Any) -> None:  # step b's prints are not watched: let it through
        if event.kind == "step.finished" and event.step == "a":
            for flag in shown.values():
                flag.set()

    bridge = LiveView(runner, view)
    view.widget.observe(on_batch, "batch")
    view.widget.observe(lambda change: rows_sent.append(change["new"]), "rows")
    runner.subscribe(on_event)
    try:
        result = runner.run()
    finally:
        bridge.close()
    assert result.status == "completed", result.error
    assert "first line\n" in running_panes and "first line\nsecond line\n" in running_panes, running_panes
    assert rows_sent == []  # the plan's rows were not sent again for an output
    assert view.panes["a"]["output"] == "first line\nsecond line\n"


def test_a_running_step_that_printed_more_than_a_pane_holds_shows_its_latest_lines() -> None:
    """A pane holds at most PANE_CAP of printed text: a running step's pane keeps the end (what it
    printed last is the news), a finished step's keeps the start; either says it was cut."""
    from planbook import Step
    from planbook.data.models import Status
    from planbook.views.panes import PANE_CAP, PaneBudget, pane

    printed = "".join(f"line {i}\n" for i in range(20_000))
    assert len(printed) > PANE_CAP
    running = Step(id="slow", tool="noop", status=Status.in_progress, output=printed)
    shown = pane(running, {}, origin=None, budget=PaneBudget())
    assert shown["output"].endswith("line 19999\n") and "line 0\n" not in shown["output"]
    assert shown["truncated"]
    done = Step(id="slow", tool="noop", status=Status.completed, output=printed, result=1)
    assert pane(done, {}, origin=None, budget=PaneBudget())["output"].startswith("line 0\n")
