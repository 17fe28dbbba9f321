"""The runner says what a step is with its typed mark (StepMark), not with the words of its note:
each place that marks a step sets the mark, and each place that ends that state clears it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import planbook
from helpers import mail_tools
from planbook import Plan, Runner, Step, Toolbox
from planbook.data.models import Status
from planbook.data.stepmark import StepMark
from planbook.store import open_store
from planbook.workers.agents import AgentReply

MAIL = """
goal: send a note
steps:
  - {id: draft, tool: draft, args: {to: bob}}
  - {id: send, tool: send, args: {text: $draft, to: bob}, needs: [draft]}
"""


def test_a_waiting_step_is_marked_waiting_and_a_decision_takes_the_mark_away(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    for decide in ("approve", "skip"):
        handle = planbook.start(MAIL, tools=mail_tools(), view=False, store=str(path))
        assert handle.wait_for_approval(timeout=30) == ["send"]
        stored = planbook.load_run(store=str(path)).plan.step("send")  # the latest run: this one
        assert (stored.status, stored.mark) == (Status.not_started, StepMark.waiting)  # the store keeps it too
        getattr(handle, decide)("send")
        send = handle.wait(30).plan.step("send")
        assert send.mark is None, decide
        assert send.status is (Status.completed if decide == "approve" else Status.skipped)



def test_a_waiting_step_an_agent_s_stop_skips_waits_no_more(tmp_path: Path) -> None:
    """An agent ends the run while another step waits for a person: that step is skipped, so it
    no longer waits — not by its mark, not in the store, not on the handle."""
    path = tmp_path / "runs.sqlite"
    finish, asked = threading.Event(), threading.Event()

    class Finisher:
        name, description = "finisher", "says the goal is reached"

        def __call__(self, task: str, context: Any) -> AgentReply:
            assert finish.wait(30)  # until send waits: then the goal is reached
            return AgentReply("done", stop="goal reached")

    def on_event(event: Any) -> None:
        if event.kind == "step.waiting":
            asked.set()

    spec = "steps:\n  - {id: work, agent: finisher, task: finish}\n  - {id: send, tool: send, args: {text: hi, to: bob}}\n"
    handle = planbook.start(spec, tools=mail_tools(), agents=[Finisher()], parallel=2, view=False,
                            on_event=on_event, store=str(path))
    assert asked.wait(30)
    finish.set()
    result = handle.wait(30)
    send = result.plan.step("send")
    assert (result.reason, send.status, send.mark) == ("stopped", Status.skipped, None)
    assert handle.waiting == []
    assert open_store(path, readonly=True).load_run(result.run_id).plan.step("send").mark is None

def test_an_interrupted_step_is_marked_and_the_mark_goes_when_it_runs_again() -> None:
    box, armed = Toolbox(), [True]

    @box.tool
    def work(label: str) -> str:
        if armed[0] and label == "b":
            armed[0] = False
            raise KeyboardInterrupt
        return label

    plan = Plan(steps=[Step(id=x, tool="work", args={"label": x}) for x in "abc"])
    runner = Runner(plan, tools=box)
    first = runner.run()
    assert first.status == "interrupted"
    b = first.plan.step("b")
    assert (b.status, b.mark) == (Status.not_started, StepMark.interrupted)
    again = runner.run()
    assert again.ok
    assert [(st.mark, st.notes) for st in again.plan.steps] == [(None, "")] * 3


def test_a_fork_marks_its_kept_and_pinned_steps_with_where_the_result_came_from(tmp_path: Path) -> None:
    box = Toolbox()

    @box.tool
    def inc(x: int) -> int:
        return x + 1

    plan = Plan(steps=[Step(id="a", tool="inc", args={"x": 0}), Step(id="b", tool="inc", args={"x": 10}),
                       Step(id="c", tool="inc", args={"x": "$a"})])
    store = tmp_path / "runs.sqlite"
    parent = planbook.run(plan, tools=box, store=str(store))
    child = planbook.fork(parent.run_id, at="a", result=100, tools=box, store=str(store))
    marks = {st.id: (st.mark, st.from_run, st.from_step) for st in child.plan.steps}
    assert marks == {"a": (StepMark.pinned, None, None), "b": (StepMark.kept, parent.run_id, "b"), "c": (None, None, None)}
    assert child.outputs["c"] == 101
    loaded = open_store(store, readonly=True).load_run(child.run_id).plan
    assert {st.id: (st.mark, st.from_run, st.from_step) for st in loaded.steps} == marks


def test_a_fresh_copy_of_a_marked_step_has_no_mark() -> None:
    step = Step(id="a", tool="t")
    step.set_state(status=Status.completed, mark=StepMark.cached, from_run="R", from_step="a", notes="cached: …")
    fresh = step.fresh()
    assert (fresh.mark, fresh.from_run, fresh.from_step, fresh.notes) == (None, None, None, "")
    assert step.snapshot().mark is StepMark.cached  # a history entry keeps it


def test_a_mark_is_a_step_mark_and_an_unknown_one_is_refused_by_name() -> None:
    assert Step(id="a", mark="kept").mark is StepMark.kept
    try:
        StepMark("cachd")
    except ValueError as exc:
        assert "'cachd' is not a step mark" in str(exc) and "cached" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unknown mark was taken")
