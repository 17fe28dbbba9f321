"""A decision is checked once, where it is given: the handle, the view and the prompt hand an
edit to the door, which checks it against the tool in the giver's thread; the run applies it
without checking again (a callable's answer, given on the run's side, is checked there, once)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import planbook
from helpers import mail_tools
from planbook import Decision
from planbook.engine import approvals, door

PLAN = """
steps:
  - {id: draft, tool: draft, args: {to: bob}}
  - {id: send, tool: send, args: {text: $draft, to: bob}, needs: [draft]}
  - {id: tail, tool: draft, args: {to: eve}, needs: [send]}
"""


class Waiting:
    """Lets the test wait for a step.waiting or run.paused event (no sleeps)."""

    def __init__(self) -> None:
        self.kinds: list[tuple[str, str | None]] = []
        self.cond = threading.Condition()

    def __call__(self, event: Any) -> None:
        with self.cond:
            self.kinds.append((event.kind, event.step))
            self.cond.notify_all()

    def wait_for(self, kind: str, step: str | None = None) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: any(k == kind and (step is None or s == step) for k, s in self.kinds), 30)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every check of an edit's args against a tool, by step id."""
    seen: list[str] = []
    real = approvals.check_edit

    def counting(step: Any, args: Any, tools: Any) -> dict[str, Any]:
        seen.append(step.id)
        return real(step, args, tools)

    monkeypatch.setattr(approvals, "check_edit", counting)
    monkeypatch.setattr(door, "check_edit", counting)
    return seen


@pytest.mark.parametrize("how", ["edit", "decide"])
def test_an_edit_of_a_waiting_step_is_checked_once(checks: list[str], how: str) -> None:
    events = Waiting()
    handle = planbook.start(PLAN, tools=mail_tools(), view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    if how == "edit":
        handle.edit("send", to="alice")
    else:
        handle.decide("send", Decision.edit({"text": "$draft", "to": "alice"}))
    result = handle.wait(30)
    assert result.ok and result.plan.step("send").result == "sent dear bob to alice"
    assert checks == ["send"]


def test_an_edit_that_does_not_fit_is_refused_where_it_is_given_and_nothing_is_queued(checks: list[str]) -> None:
    events = Waiting()
    handle = planbook.start(PLAN, tools=mail_tools(), view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    with pytest.raises(ValueError, match="has no argument 'cc'"):
        handle.edit("send", cc="x")
    handle.approve("send")
    result = handle.wait(30)
    assert result.ok and checks == ["send"]
    assert [e.data.get("decision") for e in result.events if e.kind == "step.decided"] == ["approve"]


def test_an_edit_in_a_paused_run_is_checked_once(checks: list[str]) -> None:
    events = Waiting()
    handle = planbook.start(PLAN, tools=mail_tools(), view=False, on_event=events, approve=["send"])
    events.wait_for("step.waiting", "send")
    handle.pause()
    events.wait_for("run.paused")
    handle.edit("tail", to="zed")  # tail does not ask: a paused run's edit, applied before this returns
    handle.resume()
    handle.approve("send")
    result = handle.wait(30)
    assert result.ok and result.plan.step("tail").result == "dear zed"
    assert checks == ["tail"]


def test_a_callables_edit_is_checked_once_on_the_runs_side(checks: list[str]) -> None:
    def decide(step: Any, context: Any) -> Decision:
        return Decision.edit({"text": "$draft", "to": "carol"}) if step.id == "send" else Decision.approve()

    result = planbook.run(PLAN, tools=mail_tools(), approve=decide)
    assert result.ok and result.plan.step("send").result == "sent dear bob to carol"
    assert checks == ["send"]
