"""The door: every decision reaches the run through one inbox and the runner applies it.

Each test here was written against a defect seen in the run before the door: an approval
that outlived the step it was given for, a later decision silently kept for a retry, a
pause or an edit lost right after a resume, an ``approve=`` callable whose exception left
the stored run ``running``, an ``approve_timeout`` that let another lane go on, and the
terminal prompt printing a step's text raw. They wait on events, never on the clock.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import planbook
from helpers import mail_tools
from planbook import Decision, Toolbox
from planbook.data.models import Step


class Events:
    """An on_event handler that lets a test wait for what the run did (no sleeps)."""

    def __init__(self, then: Any = None) -> None:
        self.seen: list[Any] = []
        self.cond = threading.Condition()
        self.then = then

    def __call__(self, event: Any) -> None:
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()
        if self.then is not None:
            self.then(event)

    def wait_until(self, found: Any, what: str, timeout: float = 30) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: found(self.seen), timeout), \
                f"{what}: {[(e.kind, e.step) for e in self.seen]}"

    def wait_for(self, kind: str, step: str | None = None) -> None:
        self.wait_until(lambda seen: any(e.kind == kind and (step is None or e.step == step) for e in seen),
                        f"no {kind} event for {step}")


MAIL = """
goal: send a note
steps:
  - {id: draft, tool: draft, args: {to: bob}}
  - {id: send, tool: send, args: {text: $draft, to: bob}, needs: [draft]}
"""


# ------------------------------------------------------------------ 1. what an approval covers
def _deploy_replanned_to_prod() -> tuple[Any, Events, threading.Event, list[str], threading.Event]:
    """A build that fails once (released by the first event) and a replan that changes
    ``deploy(env='staging')`` into ``deploy(env='prod')``; the second build waits for the second
    event. The handle, its events, the first build's release, the environments deployed to,
    and the second build's release (already set unless a test holds it)."""
    box, events = Toolbox(), Events()
    first, second, deployed = threading.Event(), threading.Event(), []
    second.set()

    @box.tool
    def build(version: int) -> int:
        assert (first if version == 1 else second).wait(30)
        if version == 1:
            raise RuntimeError("the build broke")
        return version

    @box.tool(approve=True)
    def deploy(env: str) -> str:
        deployed.append(env)
        return env

    plan = """
steps:
  - {id: build, tool: build, args: {version: 1}, on_failure: replan}
  - {id: deploy, tool: deploy, args: {env: staging}, needs: [build]}
"""

    def planner(goal: str, history: Any, last_error: Any) -> list[dict[str, Any]]:
        return [{"id": "build", "tool": "build", "args": {"version": 2}},
                {"id": "deploy", "tool": "deploy", "args": {"env": "prod"}, "needs": ["build"]}]

    handle = planbook.start(plan, tools=box, planner=planner, view=False, on_event=events)
    events.wait_for("step.started", "build")
    return handle, events, first, deployed, second


def test_an_approval_given_in_advance_does_not_cover_the_step_a_replan_changed() -> None:
    handle, events, gate, deployed, _ = _deploy_replanned_to_prod()
    handle.approve("deploy")  # for deploy(env='staging'), as the step is now
    gate.set()
    assert handle.wait_for_approval(30) == ["deploy"], handle.status  # the replanned deploy asks again
    assert handle.runner.plan.step("deploy").args == {"env": "prod"} and deployed == []
    handle.skip("deploy", "not prod today")
    result = handle.wait(30)
    assert deployed == [] and result.plan.step("deploy").status.value == "skipped"
    voided = [e.data for e in result.events if e.kind == "step.decided" and e.data["decision"] == "voided"]
    assert len(voided) == 1 and "env" in voided[0]["reason"], voided


def test_a_skip_given_for_a_step_a_replan_changed_no_longer_applies() -> None:
    handle, events, gate, deployed, _ = _deploy_replanned_to_prod()
    handle.skip("deploy", "not staging")
    gate.set()
    assert handle.wait_for_approval(30) == ["deploy"]  # the skip was for deploy(env='staging')
    handle.approve("deploy")  # not refused as after a skip: that skip no longer applies
    assert handle.wait(30).status == "completed" and deployed == ["prod"]


def test_decisions_given_in_advance_the_later_replaces_the_earlier() -> None:
    """Given while the step has not asked yet, in a paused run: the edit replaces the approval."""
    sent: list[tuple[str, str]] = []
    box = mail_tools(sent)
    events = Events()
    handle = planbook.start(MAIL, tools=box, view=False, on_event=events, approve=["draft"])
    events.wait_for("step.waiting", "draft")
    handle.pause()
    events.wait_for("run.paused")
    handle.approve("send")  # given in advance, for send(to='bob')
    handle.edit("send", to="carol")  # the later decision about the same step replaces it
    handle.approve("draft")
    handle.resume()
    result = handle.wait(30)
    assert result.status == "completed" and sent == [("dear bob", "carol")]


def test_a_step_reference_covers_the_same_work_in_any_revision_and_hides_secrets() -> None:
    from planbook.engine.approvals import StepRef

    step = Step(id="d", tool="deploy", args={"env": "staging", "token": "s3cret"})
    ref = StepRef.of(step, 1)
    assert ref.covers(step.model_copy(update={"args": {"token": "s3cret", "env": "staging"}}))  # order is no change
    assert ref.covers(step.model_copy(update={"task": "reworded"}))  # a tool step's words do not run
    assert not ref.covers(step.model_copy(update={"args": {"env": "prod", "token": "s3cret"}}))
    assert not ref.covers(step.model_copy(update={"tool": "destroy"}))
    changed = ref.changed(step.model_copy(update={"args": {"env": "prod", "token": "other"}}))
    assert 'env="prod"' in changed and "token=***" in changed and "other" not in changed and "s3cret" not in changed
    agent = Step(id="w", agent="writer", task="write a poem")
    assert not StepRef.of(agent, 0).covers(agent.model_copy(update={"task": "write a cheque"}))


# ------------------------------------------------------------------ 2. a later decision
def test_a_skip_after_an_approval_that_was_applied_skips_the_step() -> None:
    sent: list[tuple[str, str]] = []
    holder: dict[str, Any] = {}

    def then(event: Any) -> None:  # on the run's thread, right after the approval was applied
        if event.kind == "step.decided" and event.data.get("decision") == "approve":
            holder["handle"].skip("send", "changed my mind")

    events = Events(then)
    handle = holder["handle"] = planbook.start(MAIL, tools=mail_tools(sent), view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    handle.approve("send")
    result = handle.wait(30)
    assert sent == [] and result.plan.step("send").status.value == "skipped"
    assert result.plan.step("send").notes == "skipped by you (api): changed my mind"


def test_an_edit_after_an_approval_that_was_applied_runs_the_new_arguments() -> None:
    sent: list[tuple[str, str]] = []
    holder: dict[str, Any] = {}

    def then(event: Any) -> None:
        if event.kind == "step.decided" and event.data.get("decision") == "approve":
            holder["handle"].edit("send", to="alice")

    events = Events(then)
    handle = holder["handle"] = planbook.start(MAIL, tools=mail_tools(sent), view=False, on_event=events)
    events.wait_for("step.waiting", "send")
    handle.approve("send")
    result = handle.wait(30)
    assert result.status == "completed" and sent == [("dear bob", "alice")]
    assert result.revisions[-1].revised == ["send"]


def test_a_skip_is_final_a_later_decision_about_the_step_is_refused() -> None:
    sent: list[tuple[str, str]] = []
    events = Events()
    handle = planbook.start(MAIL, tools=mail_tools(sent), view=False, on_event=events, approve=["draft"])
    events.wait_for("step.waiting", "draft")
    handle.skip("send", "not today")  # in advance: kept until send asks
    with pytest.raises(ValueError, match=r"step 'send' was skipped by you \(api\).*retry it in a paused run"):
        handle.approve("send")
    with pytest.raises(ValueError, match=r"step 'send' was skipped"):
        handle.edit("send", to="alice")
    handle.approve("draft")
    result = handle.wait(30)
    assert sent == [] and result.plan.step("send").status.value == "skipped"


# ------------------------------------------------------------------ 3. right after a resume
def _held_at_resume() -> tuple[Events, threading.Event, threading.Event]:
    """Events whose handler holds the run's thread as it takes a resume, until the test says so."""
    resuming, release = threading.Event(), threading.Event()

    def hold(event: Any) -> None:
        if event.kind == "run.steered" and event.data.get("action") == "resume" and not resuming.is_set():
            resuming.set()
            assert release.wait(30)

    return Events(hold), resuming, release


def _two_step_plan(box: Toolbox, gate: threading.Event, ran: list[str]) -> str:
    @box.tool
    def slow(label: str) -> str:
        ran.append(label)
        if label == "a":
            assert gate.wait(30)
        return label

    return "steps:\n  - {id: a, tool: slow, args: {label: a}}\n  - {id: b, tool: slow, args: {label: b}}\n"


def _paused_after_a() -> tuple[Any, Events, threading.Event, threading.Event, list[str]]:
    """A two-step run paused after step a, whose thread will hold the next resume until
    ``release``: the handle, its events, ``resuming`` (set when the run took the resume),
    ``release`` and the labels run so far."""
    box, gate, ran = Toolbox(), threading.Event(), []
    events, resuming, release = _held_at_resume()
    handle = planbook.start(_two_step_plan(box, gate, ran), tools=box, view=False, on_event=events)
    events.wait_for("step.started", "a")
    handle.pause()
    gate.set()
    events.wait_for("run.paused")
    return handle, events, resuming, release, ran


def test_pause_right_after_resume_pauses_the_run_again() -> None:
    handle, events, resuming, release, ran = _paused_after_a()
    handle.resume()
    assert resuming.wait(30)
    handle.pause()  # the run has taken the resume and not yet gone on
    release.set()
    events.wait_until(lambda seen: sum(e.kind == "run.paused" for e in seen) >= 2
                      or any(e.kind == "run.finished" for e in seen), "neither paused again nor finished")
    assert handle.status == "paused" and ran == ["a"]
    handle.resume()
    assert handle.wait(30).status == "completed" and ran == ["a", "b"]


def test_edit_right_after_resume_answers_at_once() -> None:
    handle, events, resuming, release, ran = _paused_after_a()
    handle.resume()
    assert resuming.wait(30)
    answered, outcome = threading.Event(), []

    def edit() -> None:
        try:
            handle.edit("b", label="B")
            outcome.append("applied")
        except RuntimeError as exc:
            outcome.append(str(exc))
        answered.set()

    threading.Thread(target=edit, daemon=True).start()
    try:
        assert answered.wait(30), "edit() blocked while the run went on"
    finally:
        release.set()
    assert "pause it first" in outcome[0], outcome
    assert handle.wait(30).status == "completed" and ran == ["a", "b"]


def test_the_views_edit_button_after_continue_answers_with_a_line() -> None:
    from planbook.views.steer import on_control

    handle, events, resuming, release, ran = _paused_after_a()
    on_control(handle, {"action": "continue"})
    assert resuming.wait(30)
    try:
        message = on_control(handle, {"action": "edit", "step": "b", "args": '{"label": "B"}'})
    finally:
        release.set()
    assert "pause it first" in message and "\n" not in message
    handle.wait(30)
    assert on_control(handle, {"action": "approve", "step": "b"}).startswith("the run of plan")


# ------------------------------------------------------------------ 4. a callable that raises
def test_an_approve_callable_that_raises_ends_the_run_failed_and_the_store_says_so(tmp_path: Path) -> None:
    sent: list[tuple[str, str]] = []
    store = tmp_path / "runs.sqlite"

    def decide(step: Any, context: Any) -> Decision:
        if step.id == "send":
            raise LookupError("no policy for send")
        return Decision.approve()

    result = planbook.run(MAIL, tools=mail_tools(sent), approve=decide, store=str(store))
    assert (result.status, result.reason) == ("failed", "aborted") and sent == []
    assert "the approve= callable raised LookupError: no policy for send" in (result.error or "")
    assert "LookupError" in (result.traceback or "")
    stored = planbook.load_run(store=str(store))
    assert (stored.status, stored.reason) == ("failed", "aborted")
    assert "LookupError: no policy for send" in (stored.error or "")


# ------------------------------------------------------------------ 5. approve_timeout is a deadline
def test_at_the_approve_deadline_no_lane_starts_anything_new() -> None:
    box, gate = Toolbox(), threading.Event()

    @box.tool(approve=True)
    def risky(label: str) -> str:
        return label

    @box.tool
    def work(label: str) -> str:
        if label == "x1":
            assert gate.wait(30)
        return label

    plan = """
steps:
  - {id: r, tool: risky, args: {label: r}}
  - {id: x1, tool: work, args: {label: x1}}
  - {id: x2, tool: work, args: {label: x2}, needs: [x1]}
  - {id: x3, tool: work, args: {label: x3}, needs: [x2]}
"""
    events = Events()
    handle = planbook.start(plan, tools=box, view=False, on_event=events, parallel=2, approve_timeout=0.05)
    try:
        events.wait_until(lambda seen: any(e.kind == "step.decided" and e.data.get("who") == "timeout"
                                           for e in seen), "the deadline passed without a decision")
    finally:
        gate.set()  # x1, running in the other lane, finishes
    result = handle.wait(30)
    kinds = [(e.kind, e.step, e.data.get("who")) for e in result.events]
    deadline = kinds.index(("step.decided", "r", "timeout"))
    assert [k for k in kinds[deadline:] if k[0] == "step.started"] == []
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "no decision within approve_timeout=0.05 s" in (result.error or "")
    assert [result.plan.step(s).status.value for s in ("x2", "x3")] == ["not_started", "not_started"]


# ------------------------------------------------------------------ 6. the terminal prompt
def test_the_terminal_prompt_shows_step_text_escaped_and_secret_args_hidden() -> None:
    from planbook.cli.prompt import TerminalPrompt
    from planbook.engine.approvals import ApprovalContext

    out = io.StringIO()
    prompt = TerminalPrompt({}, stdin=io.StringIO("a\na\n"), stdout=out)
    agent = Step(id="s\x1b]0;title\x07", task="write \x1b]52;c;aGVsbG8=\x07 it\x1b[2J\nb. [✓] forged", agent="w\x1b[2J")
    assert prompt(agent, ApprovalContext("g", lambda: None)).action == "approve"  # type: ignore[arg-type]
    tool = Step(id="t", tool="login\x1b[2J", args={"password": "hunter2", "user": "bob\x1b]52;c;eA==\x07"})
    assert prompt(tool, ApprovalContext("g", lambda: None)).action == "approve"  # type: ignore[arg-type]
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "\\x1b]52" in text and "\\x1b[2J" in text
    assert "hunter2" not in text and "password=***" in text
    assert "\nb. [✓] forged" not in text  # a line break in a task cannot start a line of its own


def test_the_prompts_edit_keeps_a_secret_given_as_stars() -> None:
    from planbook.cli.prompt import TerminalPrompt
    from planbook.engine.approvals import ApprovalContext

    box = Toolbox()

    @box.tool
    def login(user: str, password: str) -> str:
        return user

    out = io.StringIO()
    prompt = TerminalPrompt(box, stdin=io.StringIO('e\n{"user": "eve", "password": "***"}\n'), stdout=out)
    step = Step(id="t", tool="login", args={"password": "hunter2", "user": "bob"})
    decision = prompt(step, ApprovalContext("g", lambda: None))  # type: ignore[arg-type]
    assert decision.action == "edit" and decision.args == {"user": "eve", "password": "hunter2"}
    assert "hunter2" not in out.getvalue()


# ------------------------------------------------------------------ after the end; no deadline outlives a run
def test_a_decision_after_the_run_ended_is_one_line_and_a_deadline_does_not_outlive_the_run() -> None:
    from planbook import RunEnded

    sent: list[tuple[str, str]] = []
    before = set(threading.enumerate())
    handle = planbook.start(MAIL, tools=mail_tools(sent), view=False, approve_timeout=600)
    assert handle.wait_for_approval(30) == ["send"]  # its deadline's timer is running
    handle.stop()
    assert handle.wait(30).reason == "aborted"
    for thread in set(threading.enumerate()) - before:
        thread.join(30)  # the run's thread and the deadline's timer end with the run
    assert [t for t in set(threading.enumerate()) - before if t.is_alive()] == []
    with pytest.raises(RunEnded, match=r"^the run of plan 'send-a-note' has ended \(failed\): nothing to approve$") \
            as ended:
        handle.approve("send")
    assert ended.value._render_traceback_() == [f"RunEnded: {ended.value}"]
    handle.stop()  # nothing to stop: no error either


# ------------------------------------------------------------ an edit, then an approval
@pytest.mark.parametrize("when", ["in advance", "while it waits"])
def test_an_approval_after_an_edit_runs_the_edited_step(when: str) -> None:
    """``edit`` says "run it, with these arguments"; an ``approve`` that follows (the natural
    next click) keeps the edit — it neither replaces it (running the old arguments) nor voids it."""
    sent: list[tuple[str, str]] = []
    drafted = threading.Event()
    box = mail_tools(sent)
    events = Events()

    @box.tool
    def draft(to: str) -> str:
        assert drafted.wait(30)
        return f"dear {to}"

    handle = planbook.start(MAIL, tools=box, on_event=events)
    try:
        if when == "in advance":
            handle.edit("send", to="carol")
            handle.approve("send")
            drafted.set()
        else:
            drafted.set()
            events.wait_for("step.waiting", "send")
            handle.edit("send", to="carol")
            handle.approve("send")
        result = handle.wait(30)
    finally:
        handle.stop()
    assert result.ok, result.error
    assert sent == [("dear bob", "carol")]
    assert not any(e.kind == "step.decided" and e.data.get("decision") == "voided" for e in result.events)


# ------------------------------------------------------- the review's findings, each failing before
def test_a_skip_that_a_replan_voided_does_not_refuse_a_decision_about_the_new_step() -> None:
    handle, events, first, _, second = _deploy_replanned_to_prod()
    second.clear()  # the new build waits until the decision is given
    try:
        handle.skip("deploy", "not staging")
        first.set()
        events.wait_for("plan.diff")
        handle.approve("deploy")  # about deploy(env=prod): the skip was for another step
        second.set()
        result = handle.wait(30)
    finally:
        first.set(), second.set()
    assert result.ok and result.outputs["deploy"] == "prod"


def test_an_approval_after_an_edit_a_replan_voided_is_kept() -> None:
    handle, events, first, _, second = _deploy_replanned_to_prod()
    second.clear()  # the new build waits until the decision is given
    try:
        handle.edit("deploy", env="qa")  # about deploy(env=staging)
        first.set()
        events.wait_for("plan.diff")
        handle.approve("deploy")  # about deploy(env=prod): not absorbed by the stale edit
        second.set()
        result = handle.wait(30)
    finally:
        first.set(), second.set()
    assert result.ok and result.outputs["deploy"] == "prod"


def test_a_decision_names_the_execution_it_is_for() -> None:
    from planbook.engine.approvals import StepRef

    step = Step(id="s", tool="send", args={"to": "bob"})
    ref = StepRef.of(step, 1)
    assert ref.covers(step)
    step.set_state(attempts=1)  # it ran (and failed): its retry is another execution
    assert not ref.covers(step) and "ran since the decision" in ref.changed(step)


def test_an_edit_given_on_the_run_s_own_thread_is_refused_at_once_not_a_hang() -> None:
    box, refused = Toolbox(), []
    started, release = threading.Event(), threading.Event()

    @box.tool
    def slow(x: int) -> int:
        started.set()
        assert release.wait(30)
        return x

    @box.tool
    def later(x: int) -> int:
        return x

    holder: dict[str, Any] = {}

    def on_event(event: Any) -> None:
        if event.kind == "run.paused":
            try:
                holder["handle"].edit("b", x=5)
            except RuntimeError as exc:
                refused.append(str(exc))

    events = Events(then=on_event)
    holder["handle"] = handle = planbook.start(
        "steps:\n  - {id: a, tool: slow, args: {x: 1}}\n  - {id: b, tool: later, args: {x: 2}}\n",
        tools=box, on_event=events, view=False)
    started.wait(30)
    handle.pause()
    release.set()
    events.wait_for("run.paused")
    assert refused and "the run's own thread" in refused[0]
    handle.resume()
    assert handle.wait(30).outputs["b"] == 2


def test_a_background_run_whose_callable_answers_a_bad_edit_ends_aborted() -> None:
    box = Toolbox()

    @box.tool(approve=True)
    def send(to: str) -> str:
        return to

    handle = planbook.start("steps:\n  - {id: s, tool: send, args: {to: bob}}\n", tools=box, view=False,
                            approve=lambda step, context: Decision.edit({"to": 42, "bogus": 1}))
    result = handle.wait(30)
    assert result.status == "failed" and result.reason == "aborted" and "refused" in (result.error or "")


def test_the_terminal_prompt_keeps_approve_timeout() -> None:
    from planbook.cli.prompt import TerminalPrompt
    from planbook.engine.approvals import ApprovalContext

    class Silent(io.StringIO):
        """A terminal where nobody types."""

        def __init__(self) -> None:
            super().__init__()
            self.never = threading.Event()

        def readline(self, *args: Any) -> str:
            self.never.wait()
            return ""

    stdin = Silent()
    try:
        prompt = TerminalPrompt(Toolbox(), stdin=stdin, stdout=io.StringIO())
        # the run's one deadline comes with the question (tests/engine/test_door_finished.py runs it whole)
        context = ApprovalContext("g", lambda: None, deadline=time.monotonic() + 0.05)  # type: ignore[arg-type]
        decision = prompt(Step(id="s", tool="send", args={"to": "bob"}), context)
    finally:
        stdin.never.set()
    assert decision.action == "stop" and decision.who == "timeout"


def test_every_decision_after_the_run_ended_is_one_line() -> None:
    from planbook import RunEnded

    handle = planbook.start("steps:\n  - {id: a, tool: noop_tool, args: {}}\n", tools=_noop_box(), view=False)
    handle.wait(30)
    for decide in (handle.resume, handle.approve, handle.skip, handle.pause):
        with pytest.raises(RunEnded, match="has ended"):
            decide()


def _noop_box() -> Toolbox:
    box = Toolbox()

    @box.tool
    def noop_tool() -> int:
        return 0

    return box


# ------------------------------------------------------------------ what ended the run
def _failing_and_slow(fail_first: bool) -> tuple[Any, Events, threading.Event, threading.Event]:
    """Two steps at once: ``slow`` waits for its release; ``boom`` fails (aborting the run)
    at once, or — ``fail_first=False`` — only when its own release comes."""
    box, events = Toolbox(), Events()
    slow_go, boom_go = threading.Event(), threading.Event()
    if fail_first:
        boom_go.set()

    @box.tool
    def slow() -> int:
        assert slow_go.wait(30)
        return 1

    @box.tool
    def boom() -> None:
        assert boom_go.wait(30)
        raise RuntimeError("the disk is full")

    plan = "steps:\n  - {id: slow, tool: slow}\n  - {id: boom, tool: boom}\n"
    handle = planbook.start(plan, tools=box, view=False, parallel=2, on_failure="abort", on_event=events)
    return handle, events, slow_go, boom_go


def test_a_stop_after_a_failure_aborted_the_run_is_too_late() -> None:
    handle, events, slow_go, _ = _failing_and_slow(fail_first=True)
    events.wait_for("step.failed", "boom")  # the run is ending: it waits for `slow` only
    handle.stop()
    events.wait_until(lambda seen: any(e.kind == "run.steered" for e in seen), "the stop was not applied")
    slow_go.set()
    result = handle.wait(30)
    assert (result.status, result.reason) == ("failed", "aborted")
    assert result.error == "step boom failed: RuntimeError: the disk is full"
    steered = [e.data for e in result.events if e.kind == "run.steered"]
    assert steered == [{"action": "refused", "who": "api", "reason": "the stop came too late: the run was already "
                        "ending (step boom failed: RuntimeError: the disk is full)"}]


def test_a_stop_before_the_failure_is_what_ended_the_run() -> None:
    handle, events, slow_go, boom_go = _failing_and_slow(fail_first=False)
    events.wait_for("step.started", "boom")
    handle.stop()
    events.wait_until(lambda seen: any(e.kind == "run.steered" for e in seen), "the stop was not applied")
    boom_go.set()  # it fails after the stop: the run was already ending
    slow_go.set()
    result = handle.wait(30)
    assert (result.status, result.reason, result.error) == ("failed", "aborted", "stopped by you (api)")
    assert [e.data for e in result.events if e.kind == "run.steered"] == [{"action": "stop", "who": "api"}]
    assert result.plan.step("boom").status.value == "failed"


def test_a_stop_given_as_a_failure_ends_the_run_is_recorded_too_late() -> None:
    """The failed step's abort ends the run at once (nothing else runs), and the stop was given
    just before, not applied yet: the run's error is the failure, and the stop is on record."""
    box, holder = Toolbox(), {}

    @box.tool
    def boom() -> None:
        raise RuntimeError("the disk is full")

    def stop_on_failure(event: Any) -> None:
        if event.kind == "step.failed":
            holder["handle"].stop()  # on the run's thread, before the policy ends the run

    gate = threading.Event()
    events = Events(then=stop_on_failure)

    @box.tool
    def wait() -> int:
        assert gate.wait(30)
        return 1

    handle = planbook.start("steps:\n  - {id: w, tool: wait}\n  - {id: b, tool: boom, needs: [w]}\n", tools=box,
                            view=False, on_failure="abort", on_event=events)
    holder["handle"] = handle
    gate.set()
    result = handle.wait(30)
    assert (result.status, result.reason, result.error) == ("failed", "aborted",
                                                            "step b failed: RuntimeError: the disk is full")
    steered = [e for e in result.events if e.kind == "run.steered"]
    assert [e.data["action"] for e in steered] == ["refused"]
    assert steered[0].data["reason"] == ("the stop came too late: the run was already ending (step b failed: "
                                         "RuntimeError: the disk is full)")
    assert [e.kind for e in result.events][-2:] == ["run.steered", "run.finished"]
