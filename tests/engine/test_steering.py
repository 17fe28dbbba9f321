"""Steering a run: Decision, approvals (callable, handle, parallel), RunHandle controls, the store."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest

import planbook
from helpers import mail_tools
from planbook import Decision, Toolbox

MAIL = """
goal: send a note
steps:
  - {id: draft, tool: draft, args: {to: bob}}
  - {id: send, tool: send, args: {text: $draft, to: bob}, needs: [draft]}
"""


class Mail:
    """A drafting tool and a sending tool that must always ask (approve=True)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.tools = mail_tools(self.sent)


class Events:
    """An on_event handler that lets a test wait for an event kind (no sleeps)."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.cond = threading.Condition()

    def __call__(self, event: Any) -> None:
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()

    def wait_for(self, kind: str, step: str | None = None, timeout: float = 30) -> Any:
        def found() -> Any:
            return next((e for e in self.seen if e.kind == kind and (step is None or e.step == step)), None)

        with self.cond:
            assert self.cond.wait_for(found, timeout), f"no {kind} event for {step}: {[e.kind for e in self.seen]}"
            return found()


# ------------------------------------------------------------------ Decision
def test_decision_checks_what_it_carries() -> None:
    assert Decision.edit({"to": "x"}).as_data() == {"decision": "edit", "who": "api", "args": {"to": "x"}}
    assert Decision.skip("no", who="cli").as_data() == {"decision": "skip", "who": "cli", "reason": "no"}
    with pytest.raises(ValueError, match="one of approve, skip, edit, stop"):
        Decision("maybe")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="new arguments as a dict"):
        Decision("edit")
    with pytest.raises(ValueError, match="only an edit carries arguments"):
        Decision("approve", args={"a": 1})
    with pytest.raises(ValueError, match="who decided"):
        Decision.approve(who="someone")  # type: ignore[arg-type]


def test_tool_approve_must_be_a_bool() -> None:
    def send() -> None:
        """Send."""

    with pytest.raises(TypeError, match="approve must be True"):
        Toolbox().tool(approve="yes")(send)  # type: ignore[arg-type]


# ------------------------------------------------------------------ foreground runs
def test_a_foreground_run_with_nobody_to_ask_is_refused_before_anything_runs() -> None:
    mail = Mail()
    calls: list[str] = []
    with pytest.raises(ValueError, match=r"step 'send' waits for approval .* nobody to ask.*planbook.start"):
        planbook.run(MAIL, tools=mail.tools, on_event=lambda e: calls.append(e.kind))
    assert calls == [] and mail.sent == []


def test_approve_names_must_exist() -> None:
    with pytest.raises(ValueError, match=r"approve= names 'nope'"):
        planbook.run(MAIL, tools=Mail().tools, approve=["nope"])


def test_a_callable_decides_approve_skip_stop_and_edit() -> None:
    mail = Mail()
    approve_all = planbook.run(MAIL, tools=mail.tools, approve=lambda step, ctx: Decision.approve())
    assert approve_all.status == "completed" and mail.sent == [("dear bob", "bob")]
    decided = [e.data for e in approve_all.events if e.kind == "step.decided"]
    assert decided == [{"decision": "approve", "who": "api"}] * 2  # a callable is asked for every step

    seen: list[Any] = []

    def only_send(step: Any, ctx: Any) -> Decision:
        seen.append((step.id, dict(ctx.needs)))
        return Decision.skip("not today") if step.id == "send" else Decision.approve()

    skipped = planbook.run(MAIL, tools=mail.tools, approve=only_send)
    assert seen == [("draft", {}), ("send", {"draft": "dear bob"})]
    assert skipped.plan.step("send").status.value == "skipped"
    assert skipped.plan.step("send").notes == "skipped by you (api): not today"
    assert len(mail.sent) == 1

    stopped = planbook.run(MAIL, tools=mail.tools, approve=lambda s, c: Decision.stop("no") if s.id == "send"
                           else Decision.approve())
    assert (stopped.status, stopped.reason) == ("failed", "aborted")
    assert "stopped by you (api) at step send: no" in stopped.error
    assert len(mail.sent) == 1

    edited = planbook.run(MAIL, tools=mail.tools, approve=lambda s, c: Decision.edit({"text": "$draft", "to": "al"})
                          if s.id == "send" else Decision.approve())
    assert mail.sent[-1] == ("dear bob", "al")
    assert edited.revisions[-1].revised == ["send"] and edited.plan.revision == 2
    assert edited.revisions[-1].reason == "edited by you (api)"


def test_a_callable_edit_that_does_not_fit_the_signature_stops_the_run() -> None:
    mail = Mail()
    result = planbook.run(MAIL, tools=mail.tools, approve=lambda s, c: Decision.approve() if s.id == "draft"
                          else Decision.edit({"text": "$draft", "to": 5}))
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "the edit of step send was refused" in result.error and "argument 'to'" in result.error
    refused = [e.data for e in result.events if e.kind == "step.decided" and e.data["decision"] == "refused"]
    assert len(refused) == 1 and mail.sent == []


# ------------------------------------------------------------------ background runs and the handle
def test_a_decision_given_before_the_step_asks_is_kept_for_it() -> None:
    mail = Mail()
    handle = planbook.start(MAIL, tools=mail.tools, view=False)
    handle.approve("send")
    result = handle.wait(30)
    assert result.status == "completed" and mail.sent == [("dear bob", "bob")]
    assert handle.status == "completed" and handle.result is result


def test_handle_status_waiting_then_edit_checked_against_the_signature() -> None:
    mail, events = Mail(), Events()
    handle = planbook.start(MAIL, tools=mail.tools, view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    assert handle.status == "waiting" and handle.waiting == ["send"]
    with pytest.raises(RuntimeError, match="still waiting"):
        handle.result
    with pytest.raises(TimeoutError, match="waiting for you: send"):
        handle.wait(0.01)
    with pytest.raises(ValueError, match="argument 'to' of tool 'send' expects str"):
        handle.edit("send", to=["not", "a", "name"])
    with pytest.raises(ValueError, match="has no argument 'cc'"):
        handle.edit("send", cc="x")
    with pytest.raises(ValueError, match="does not wait for approval"):
        handle.approve("draft")
    with pytest.raises(KeyError, match="no step 'nope'"):
        handle.approve("nope")
    handle.edit("send", to="alice")
    result = handle.wait(30)
    assert mail.sent == [("dear bob", "alice")]
    assert result.revisions[-1].revised == ["send"]
    kinds = [(e.kind, e.data.get("who")) for e in result.events if e.kind in ("step.waiting", "step.decided")]
    assert kinds == [("step.waiting", None), ("step.decided", "api")]


def test_stop_while_a_step_waits_ends_the_run_aborted_without_running_it() -> None:
    mail, events = Mail(), Events()
    handle = planbook.start(MAIL, tools=mail.tools, view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    handle.stop()
    result = handle.wait(30)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.error == "stopped by you (api)" and mail.sent == []
    assert any(e.kind == "run.steered" and e.data == {"action": "stop", "who": "api"} for e in result.events)
    with pytest.raises(RuntimeError, match="has ended"):
        handle.approve("send")


def test_skip_marks_the_step_and_the_run_completes_without_it() -> None:
    mail, events = Mail(), Events()
    handle = planbook.start(MAIL, tools=mail.tools, view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    handle.skip(reason="not today")
    result = handle.wait(30)
    assert (result.status, result.reason) == ("completed", "steps_skipped")
    assert result.plan.step("send").notes == "skipped by you (api): not today" and mail.sent == []


def test_pause_finishes_running_steps_and_starts_nothing_then_resume_goes_on() -> None:
    box, events = Toolbox(), Events()
    gate, ran = threading.Event(), []

    @box.tool
    def slow(label: str) -> str:
        ran.append(label)
        if label == "a":
            assert gate.wait(30)
        return label

    plan = "steps:\n  - {id: a, tool: slow, args: {label: a}}\n  - {id: b, tool: slow, args: {label: b}}\n"
    handle = planbook.start(plan, tools=box, view=False, on_event=events)
    events.wait_for("step.started", "a")
    handle.pause()  # the running step finishes (it may be running on the run's own thread)
    gate.set()
    events.wait_for("run.paused")
    assert handle.status == "paused" and ran == ["a"]
    paused = [e for e in events.seen if e.kind == "run.paused"][0]
    assert paused.data["why"] == "paused by you (api)"
    handle.resume()
    result = handle.wait(30)
    assert result.status == "completed" and ran == ["a", "b"]
    assert [e.data["action"] for e in result.events if e.kind == "run.steered"] == ["pause", "resume"]
    with pytest.raises(RuntimeError, match="has ended"):  # RunEnded: a one-line message
        handle.resume()


def test_stop_while_paused() -> None:
    box, events = Toolbox(), Events()

    @box.tool
    def step(label: str) -> str:
        return label

    plan = "steps:\n  - {id: a, tool: step, args: {label: a}}\n  - {id: b, tool: step, args: {label: b}}\n"
    handle = planbook.start(plan, tools=box, view=False, on_event=events, approve=["b"])
    events.wait_for("step.waiting", "b")
    handle.pause()
    events.wait_for("run.paused")
    handle.stop()
    result = handle.wait(30)
    assert (result.status, result.reason, result.error) == ("failed", "aborted", "stopped by you (api) while paused")


def test_parallel_runs_keep_running_other_ready_steps_while_one_waits() -> None:
    box, events = Toolbox(), Events()

    @box.tool
    def work(label: str) -> str:
        return label

    @box.tool(approve=True)
    def risky(label: str) -> str:
        return label

    plan = """
steps:
  - {id: r, tool: risky, args: {label: r}}
  - {id: a, tool: work, args: {label: a}}
  - {id: b, tool: work, args: {label: b}}
  - {id: c, tool: work, args: {label: c}, needs: [a, b]}
  - {id: after, tool: work, args: {label: $r}, needs: [r]}
"""
    handle = planbook.start(plan, tools=box, view=False, on_event=events, parallel=2)
    events.wait_for("step.finished", "c")
    assert handle.status == "waiting" and handle.waiting == ["r"]
    assert handle.runner.plan.step("after").status.value == "not_started"
    handle.approve()
    result = handle.wait(30)
    assert result.status == "completed" and result.outputs["after"] == "r"


def test_approve_timeout_stops_the_run_and_says_why() -> None:
    mail = Mail()
    handle = planbook.start(MAIL, tools=mail.tools, view=False, approve_timeout=0.05)
    result = handle.wait(30)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "no decision within approve_timeout=0.05 s" in result.error and mail.sent == []
    assert [e.data["who"] for e in result.events if e.kind == "step.decided"] == ["timeout"]
    with pytest.raises(ValueError, match="approve_timeout must be a positive number"):
        planbook.start(MAIL, tools=mail.tools, view=False, approve_timeout=0)


def test_await_a_handle() -> None:
    mail = Mail()

    async def main() -> Any:
        handle = planbook.start(MAIL, tools=mail.tools, view=False)
        handle.approve("send")
        return await handle

    assert asyncio.run(main()).status == "completed"


def test_a_step_that_raises_in_the_thread_reaches_whoever_waits() -> None:
    box = Toolbox()

    @box.tool
    def boom() -> None:
        raise RuntimeError("in the tool")

    result = planbook.start("steps:\n  - {id: a, tool: boom}\n", tools=box, view=False).wait(30)
    assert result.status == "failed" and "in the tool" in result.error


def test_twenty_background_runs_leave_no_thread_behind() -> None:
    box = Toolbox()

    @box.tool
    def step(label: str) -> str:
        return label

    before = set(threading.enumerate())
    plan = "steps:\n  - {id: a, tool: step, args: {label: a}}\n  - {id: b, tool: step, args: {label: b}}\n"
    for _ in range(20):
        assert planbook.start(plan, tools=box, view=False, parallel=2).wait(30).status == "completed"
    for thread in set(threading.enumerate()) - before:
        thread.join(10)
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []


# ------------------------------------------------------------------ the store
def test_a_waiting_run_is_listed_as_waiting_and_a_resumed_one_asks_again(tmp_path: Any) -> None:
    mail, events = Mail(), Events()
    path = tmp_path / "runs.sqlite"
    handle = planbook.start(MAIL, tools=mail.tools, view=False, on_event=events, store=str(path))
    events.wait_for("step.waiting", "send")
    [listed] = planbook.runs(str(path))
    assert (listed.status, listed.reason) == ("running", "waiting")
    from planbook.cli.runs import list_runs

    class Args:
        store, limit = str(path), 20

    assert "waiting for approval" in list_runs(Args())  # type: ignore[arg-type]
    crashed = tmp_path / "crashed.sqlite"  # the store as a crash would leave it: the run waiting
    with sqlite3.connect(path) as src, sqlite3.connect(crashed) as dst:
        src.backup(dst)
    handle.approve("send")
    assert handle.wait(30).status == "completed"
    stored = planbook.load_run(store=str(path))
    assert [e.data.get("decision") for e in stored.events if e.kind == "step.decided"] == ["approve"]

    with pytest.raises(ValueError, match="step 'send' waits for approval"):
        planbook.resume(store=str(crashed), tools=mail.tools)
    asked: list[str] = []
    resumed = planbook.resume(store=str(crashed), tools=mail.tools,
                              approve=lambda step, ctx: asked.append(step.id) or Decision.approve())
    assert resumed.status == "completed" and "send" in asked and len(mail.sent) == 2


# ------------------------------------------------------------------ the live view's controls
def _view_of(runner: Any) -> Any:
    from planbook.notebook.handle import NotebookHandle
    from planbook.views.live import LiveView
    from planbook.views.steer import connect
    from planbook.views.widget import PlanView

    target = PlanView(runner, note="live", controls=True)
    bridge = LiveView(runner, target)
    handle = NotebookHandle(runner, view=bridge)
    connect(bridge, handle)
    return target, handle.begin()


def test_the_views_buttons_decide_and_show_a_refused_edit_inline() -> None:
    pytest.importorskip("anywidget")
    mail, events = Mail(), Events()
    target, handle = _view_of(planbook.Runner(MAIL, tools=mail.tools, on_event=events))
    events.wait_for("step.waiting", "send")
    target.render(handle.runner)
    assert target.widget.controls is True
    assert target.head["waiting"] == 1 and target.widget.waiting == {"send": {"text": "$draft", "to": "bob"}}
    click = target._on_front_end
    click(None, {"type": "control", "action": "edit", "step": "send", "args": '{"text": "$draft", "to": 5}'}, [])
    assert "argument 'to' of tool 'send' expects str" in target.widget.errors["send"]
    click(None, {"type": "control", "action": "edit", "step": "send", "args": "{not json"}, [])
    assert target.widget.errors["send"].startswith("the arguments are not JSON")
    assert handle.status == "waiting" and mail.sent == []
    click(None, {"type": "control", "action": "edit", "step": "send", "args": '{"text": "$draft", "to": "al"}'}, [])
    assert "send" not in target.widget.errors
    result = handle.wait(30)
    assert mail.sent == [("dear bob", "al")]
    assert [e.data["who"] for e in result.events if e.kind == "step.decided"] == ["widget"]
    assert target.widget.revisions[-1]["revised"] == ["send"]
    assert target.widget.revisions[-1]["reason"] == "edited by you (widget)"
    assert target.head["status"] == "completed" and target.head["waiting"] == 0
    # in the run's record's words; refused edits never reached the run
    assert target.widget.decisions == [["edit", "send: edited by you (widget)"]]


def test_the_views_stop_button() -> None:
    pytest.importorskip("anywidget")
    mail, events = Mail(), Events()
    target, handle = _view_of(planbook.Runner(MAIL, tools=mail.tools, on_event=events))
    events.wait_for("step.waiting", "send")
    target._on_front_end(None, {"type": "control", "action": "stop"}, [])
    result = handle.wait(30)
    assert (result.status, result.reason, result.error) == ("failed", "aborted", "stopped by you (widget)")
    target._on_front_end(None, {"type": "control", "action": "pause"}, [])
    assert "has ended" in target.widget.errors[""]


def test_wait_for_approval_returns_the_waiting_steps_then_nothing_once_the_run_ended() -> None:
    mail = Mail()
    handle = planbook.start(MAIL, tools=mail.tools, view=False)
    assert handle.wait_for_approval(30) == ["send"]
    handle.approve()
    handle.wait(30)
    assert handle.wait_for_approval(30) == []


def test_a_paused_run_can_edit_a_step_that_has_not_started_and_retry_a_failed_one() -> None:
    box, events = Toolbox(), Events()
    broken = {"a": True}

    @box.tool
    def fetch(key: str) -> str:
        if broken.get(key):
            raise ConnectionError(f"{key} is down")
        return key

    @box.tool
    def join(text: str, suffix: str) -> str:
        return text + suffix

    plan = """
steps:
  - {id: a, tool: fetch, args: {key: a}}
  - {id: b, tool: join, args: {text: $a, suffix: "!"}, needs: [a]}
  - {id: g, tool: fetch, args: {key: g}}
"""
    handle = planbook.start(plan, tools=box, view=False, on_event=events, on_failure="skip", approve=["g"])
    events.wait_for("step.waiting", "g")
    with pytest.raises(RuntimeError, match="pause it first"):
        handle.retry("a")
    handle.pause()
    events.wait_for("run.paused")
    assert [s.status.value for s in handle.runner.plan.steps] == ["skipped", "blocked", "not_started"]
    with pytest.raises(ValueError, match="only a failed or skipped step can be retried"):
        handle.retry("g")
    broken["a"] = False
    handle.retry("a")
    with pytest.raises(ValueError, match="argument 'suffix' of tool 'join' expects str"):
        handle.edit("b", suffix=3)
    handle.edit("b", suffix="?")
    assert handle.runner.plan.step("b").args == {"text": "$a", "suffix": "?"}
    handle.resume()
    handle.approve("g")
    result = handle.wait(30)
    assert result.status == "completed" and result.outputs["b"] == "a?"
    assert result.revisions[-1].revised == ["b"] and result.revisions[-1].reason == "edited by you (api)"
    assert [e.data["decision"] for e in result.events if e.kind == "step.decided"] == ["retry", "edit", "approve"]


def test_the_view_of_a_paused_run_offers_edit_and_retry() -> None:
    pytest.importorskip("anywidget")
    box, events = Toolbox(), Events()

    @box.tool
    def fetch(place: str) -> str:
        if place == "down":
            raise ConnectionError("down")
        return place

    plan = """
steps:
  - {id: a, tool: fetch, args: {place: down}}
  - {id: g, tool: fetch, args: {place: g}}
"""
    target, handle = _view_of(planbook.Runner(plan, tools=box, on_event=events, on_failure="skip", approve=["g"]))
    events.wait_for("step.waiting", "g")
    target._on_front_end(None, {"type": "control", "action": "pause"}, [])
    events.wait_for("run.paused")
    target.render(handle.runner)
    assert target.widget.retryable == ["a"] and target.widget.editable == {"g": {"place": "g"}}
    target._on_front_end(None, {"type": "control", "action": "edit", "step": "a", "args": '{"place": "up"}'}, [])
    assert "only a step that has not started can be edited" in target.widget.errors["a"]
    target._on_front_end(None, {"type": "control", "action": "retry", "step": "a"}, [])
    assert "a" not in target.widget.errors
    target._on_front_end(None, {"type": "control", "action": "continue"}, [])
    target._on_front_end(None, {"type": "control", "action": "skip", "step": "g"}, [])
    result = handle.wait(30)
    assert result.plan.step("a").attempts == 2 and result.plan.step("g").status.value == "skipped"
    assert target.widget.decisions == [["pause", "run: paused by you (widget)"], ["retry", "a: retried by you (widget)"],
                                       ["resume", "run: continued by you (widget)"],
                                       ["skip", "g: skipped by you (widget) — skipped in the live view"]]


def test_import_planbook_does_not_import_asyncio_for_the_handle() -> None:
    import subprocess
    import sys

    code = "import sys, planbook; print('asyncio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_an_approval_is_for_one_execution_a_retry_asks_again() -> None:
    box = Toolbox()
    tries = []

    @box.tool(approve=True)
    def pay(amount: int) -> str:
        tries.append(amount)
        if len(tries) == 1:
            raise ConnectionError("the bank did not answer")
        return "paid"

    asked: list[str] = []
    result = planbook.run("steps:\n  - {id: p, tool: pay, args: {amount: 5}}\n", tools=box, on_failure="retry",
                          approve=lambda step, ctx: asked.append(step.id) or Decision.approve())
    assert result.status == "completed" and asked == ["p", "p"] and tries == [5, 5]


def test_view_true_outside_a_notebook_kernel_says_so_and_starts_nothing() -> None:
    mail = Mail()
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="view=True shows a background run's live view in a notebook kernel"):
        planbook.start(MAIL, tools=mail.tools, view=True)
    assert set(threading.enumerate()) - before == set() and mail.sent == []


def test_pause_then_stop_at_once_ends_the_run() -> None:
    box, events = Toolbox(), Events()
    gate = threading.Event()

    @box.tool
    def hold(label: str) -> str:
        assert gate.wait(30)
        return label

    plan = "steps:\n  - {id: a, tool: hold, args: {label: a}}\n  - {id: b, tool: hold, args: {label: b}}\n"
    handle = planbook.start(plan, tools=box, view=False, on_event=events)
    events.wait_for("step.started", "a")
    handle.pause()
    handle.stop()
    gate.set()
    result = handle.wait(30)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert [s.status.value for s in result.plan.steps] == ["completed", "not_started"]


def test_a_serial_run_waits_in_plan_order_a_parallel_one_asks_about_every_ready_step() -> None:
    box = Toolbox()

    @box.tool(approve=True)
    def mark(label: str) -> str:
        return label

    plan = "steps:\n" + "".join(f"  - {{id: s{i}, tool: mark, args: {{label: s{i}}}}}\n" for i in range(3))
    serial = planbook.start(plan, tools=box, view=False)
    assert serial.wait_for_approval(30) == ["s0"]
    serial.approve("s2")  # kept until s2 asks: the run still goes in plan order
    serial.approve("s0")
    serial.approve("s1")
    result = serial.wait(30)
    assert [e.step for e in result.events if e.kind == "step.started"] == ["s0", "s1", "s2"]
    events = Events()
    both = planbook.start(plan, tools=box, view=False, parallel=2, on_event=events)
    events.wait_for("step.waiting", "s2")
    assert both.waiting == ["s0", "s1", "s2"]  # every ready step asks; none runs before its decision
    for step in ("s0", "s1", "s2"):
        both.approve(step)
    assert both.wait(30).status == "completed"


def test_a_resumed_run_asks_about_the_steps_approve_named(tmp_path: Any) -> None:
    box, events = Toolbox(), Events()
    done: list[str] = []

    @box.tool
    def work(label: str) -> str:
        done.append(label)
        return label

    plan = "steps:\n  - {id: a, tool: work, args: {label: a}}\n  - {id: b, tool: work, args: {label: b}}\n"
    path = tmp_path / "runs.sqlite"
    handle = planbook.start(plan, tools=box, view=False, on_event=events, store=str(path), approve=["b"])
    events.wait_for("step.waiting", "b")
    crashed = tmp_path / "crashed.sqlite"
    with sqlite3.connect(path) as src, sqlite3.connect(crashed) as dst:
        src.backup(dst)
    handle.stop()
    handle.wait(30)
    with pytest.raises(ValueError, match="step 'b' waits for approval"):
        planbook.resume(store=str(crashed), tools=box, force=True)
    assert done == ["a"]
    result = planbook.resume(store=str(crashed), tools=box, force=True,
                             approve=lambda step, ctx: Decision.approve())
    assert result.status == "completed" and done == ["a", "b"]


def test_a_second_continue_before_the_run_goes_on_is_not_kept_for_the_next_pause() -> None:
    """Continue clicked twice: the second must not continue the run at its *next* pause."""
    box, events = Toolbox(), Events()
    gates = {"a": threading.Event(), "b": threading.Event()}
    ran: list[str] = []
    resuming, clicked_twice = threading.Event(), threading.Event()

    @box.tool
    def slow(label: str) -> str:
        ran.append(label)
        if label in gates:
            assert gates[label].wait(30)
        return label

    def hold_the_first_resume(event: Any) -> None:
        events(event)
        if event.kind == "run.steered" and event.data.get("action") == "resume" and not resuming.is_set():
            resuming.set()  # the run thread took the first Continue; the run is still paused
            assert clicked_twice.wait(30)

    plan = ("steps:\n  - {id: a, tool: slow, args: {label: a}}\n  - {id: b, tool: slow, args: {label: b}}\n"
            "  - {id: c, tool: slow, args: {label: c}}\n")
    handle = planbook.start(plan, tools=box, view=False, on_event=hold_the_first_resume)
    events.wait_for("step.started", "a")
    handle.pause()
    gates["a"].set()
    events.wait_for("run.paused")
    handle.resume()
    assert resuming.wait(30)
    handle.resume()  # the second click, while the first is on its way
    clicked_twice.set()
    events.wait_for("step.started", "b")
    handle.pause()
    gates["b"].set()
    with events.cond:  # the second pause
        assert events.cond.wait_for(lambda: sum(e.kind == "run.paused" for e in events.seen) >= 2, 30)
    assert handle.status == "paused" and ran == ["a", "b"], (handle.status, ran)
    handle.resume()
    result = handle.wait(30)
    assert result.status == "completed" and ran == ["a", "b", "c"]


def test_an_edit_for_a_pause_that_ended_is_refused_not_left_waiting() -> None:
    box = Toolbox()

    @box.tool
    def step(label: str) -> str:
        return label

    plan = "steps:\n  - {id: a, tool: step, args: {label: a}}\n  - {id: b, tool: step, args: {label: b}}\n"
    handle = planbook.start(plan, tools=box, view=False)
    handle.wait(30)
    with pytest.raises(RuntimeError, match="has ended"):  # at once: nothing is queued for a run that ended
        handle.edit("b", label="x")
    with pytest.raises(RuntimeError, match="has ended"):
        handle.retry("a")


def test_twenty_background_runs_with_a_store_path_leave_no_connection_open(tmp_path: Any) -> None:
    """A store opened from a path is closed when the run ends, not when the collector gets to it."""
    import gc
    import os

    box = Toolbox()

    @box.tool
    def add(a: int, b: int) -> int:
        return a + b

    plan = "steps:\n  - {id: x, tool: add, args: {a: 1, b: 2}}\n"
    store = tmp_path / "runs.sqlite"
    planbook.run(plan, tools=box, store=store)

    def store_fds() -> int:
        return sum(os.readlink(f"/proc/self/fd/{fd}").startswith(str(store)) for fd in os.listdir("/proc/self/fd")
                   if os.path.exists(f"/proc/self/fd/{fd}"))

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("counting open files needs /proc")
    gc.disable()  # what the collector would close must not hide a connection left open
    try:
        before = store_fds()
        for _ in range(20):
            assert planbook.start(plan, tools=box, view=False, store=store).wait(30).ok
        assert store_fds() == before == 0
    finally:
        gc.enable()
