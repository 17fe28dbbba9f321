"""The door, finished (issue 34 §4): each test was written against a defect of the door before.

- a step a replan removed kept waiting, and a ``parallel=2`` run waited for ever with
  ``handle.waiting == []``;
- an ``approve=`` callable ran on the run's thread, where ``approve_timeout`` did not hold
  (one that never answers hung the run), and the terminal prompt kept its own deadline;
- a step's identity (``StepRef``) raised on mixed or tuple keys (``{1: one, two: 2}``): such a
  step could never be approved, and a callable's edit made ``planbook.run`` raise TypeError;
- 3,000 ``pause()`` calls recorded 3,001 decisions.

They wait on events, never on the clock; the small timeouts are the option under test.
"""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest

import planbook
from planbook import Decision, Secret, Toolbox
from planbook.data.models import Step
from planbook.engine.approvals import StepRef


class Events:
    """An on_event handler a test can wait on (no sleeps); ``then`` runs on the run's thread."""

    def __init__(self, then: Any = None) -> None:
        self.seen: list[Any] = []
        self.cond = threading.Condition()
        self.then = then

    def __call__(self, event: Any) -> None:
        if self.then is not None:
            self.then(event)
        with self.cond:
            self.seen.append(event)
            self.cond.notify_all()

    def wait_for(self, kind: str, step: str | None = None, timeout: float = 30) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: any(e.kind == kind and (step is None or e.step == step)
                                                  for e in self.seen), timeout), \
                f"no {kind} event for {step}: {[(e.kind, e.step) for e in self.seen]}"


# ------------------------------------------------------------------ a step that leaves the plan
def test_a_step_a_replan_removed_stops_waiting_and_the_parallel_run_ends() -> None:
    box, gate = Toolbox(), threading.Event()

    @box.tool
    def build(version: int) -> int:
        assert gate.wait(30)
        if version == 1:
            raise RuntimeError("the build broke")
        return version

    @box.tool(approve=True)
    def deploy(env: str) -> str:
        return env

    plan = """
steps:
  - {id: build, tool: build, args: {version: 1}, on_failure: replan}
  - {id: deploy, tool: deploy, args: {env: prod}}
"""

    def planner(goal: str, history: Any, last_error: Any) -> list[dict[str, Any]]:
        return [{"id": "build", "tool": "build", "args": {"version": 2}}]  # deploy is dropped

    waiting_at_diff: list[set[str]] = []
    holder: dict[str, Any] = {}

    def then(event: Any) -> None:  # on the run's thread, as the new revision is announced
        if event.kind == "plan.diff":
            waiting_at_diff.append(set(holder["handle"].runner.steering.waiting))

    events = Events(then)
    handle = holder["handle"] = planbook.start(plan, tools=box, planner=planner, view=False, parallel=2,
                                               on_event=events)
    try:
        events.wait_for("step.waiting", "deploy")
        assert handle.waiting == ["deploy"]
        gate.set()
        events.wait_for("plan.diff")
        assert waiting_at_diff == [set()], "the removed step still waits: the run would wait for ever"
        result = handle.wait(30)
    finally:
        gate.set()
        handle.stop()
    assert result.ok and result.outputs == {"build": 2} and handle.waiting == []


# ------------------------------------------------------------------ one deadline for every answer
SEND = "steps:\n  - {id: s, tool: send, args: {to: bob}}\n"


def _send_box(sent: list[str]) -> Toolbox:
    box = Toolbox()

    @box.tool
    def send(to: Any) -> str:
        sent.append(to)
        return "sent"

    return box


def test_an_approve_callable_that_never_answers_times_out_like_any_approval() -> None:
    release, asked_on = threading.Event(), []

    def never(step: Any, context: Any) -> Decision:
        asked_on.append(threading.get_ident())
        release.wait(30)  # "never" for this run: it ends at approve_timeout
        return Decision.approve()

    sent: list[str] = []
    try:
        result = planbook.run(SEND, tools=_send_box(sent), approve=never, approve_timeout=0.05)
    finally:
        release.set()
    assert (result.status, result.reason) == ("failed", "aborted"), result.error
    assert "no decision within approve_timeout=0.05 s" in (result.error or "") and sent == []
    decided = [e.data for e in result.events if e.kind == "step.decided"]
    assert [(d["decision"], d["who"]) for d in decided] == [("stop", "timeout")]
    assert asked_on and asked_on[0] != threading.get_ident()  # asked off the run's thread


def test_a_callable_answering_in_time_still_decides_every_step() -> None:
    sent: list[str] = []
    answers = iter([Decision.approve(), Decision.edit({"to": "al"})])
    plan = SEND + "  - {id: t, tool: send, args: {to: carol}}\n"
    result = planbook.run(plan, tools=_send_box(sent), approve=lambda step, context: next(answers),
                          approve_timeout=30)
    assert result.ok and sent == ["bob", "al"]
    # the asking thread ended with its run (it freed its objects later, in whatever ran next)
    assert not [t for t in threading.enumerate() if t.name == "planbook-approve"]


class Silent(io.StringIO):
    """A terminal where nobody types (until the test ends)."""

    def __init__(self) -> None:
        super().__init__()
        self.never = threading.Event()

    def readline(self, *args: Any) -> str:
        self.never.wait(30)
        return "a\n"  # only after the test gave up: an approval, which must not count any more


def test_the_terminal_prompt_keeps_the_runs_one_deadline() -> None:
    from planbook.cli.prompt import TerminalPrompt
    from planbook.engine.runner import Runner

    stdin, out, sent = Silent(), io.StringIO(), []
    box = _send_box(sent)
    seen: list[Any] = []
    runner = Runner(SEND, tools=box, approve=True, approve_timeout=0.05)
    prompt = TerminalPrompt(box, stdin=stdin, stdout=out)  # no copy of the deadline of its own

    def asked(step: Step, context: Any) -> Decision:
        seen.append(context.deadline)
        return prompt(step, context)

    runner.steer().ask_with(asked)
    try:
        result = runner.run()
    finally:
        stdin.never.set()
    assert (result.status, result.reason) == ("failed", "aborted"), result.error
    assert "no decision within approve_timeout=0.05 s" in (result.error or "") and sent == []
    assert seen and seen[0] is not None  # the question carried the run's deadline
    assert "waits for approval" in out.getvalue()


# ------------------------------------------------------------------ a step's identity never raises
@pytest.mark.parametrize("args", [
    {"m": {1: "one", "two": 2}},
    {"m": {(1, 2): "pair", "x": [1, (2, 3)]}},
    {"m": {None: 1, 1.5: float("nan"), "k": {True: "yes"}}},
])
def test_a_step_reference_of_any_arguments_never_raises(args: dict[str, Any]) -> None:
    step = Step(id="s", tool="send", args=args)
    ref = StepRef.of(step, 1)
    assert ref.covers(step.model_copy(update={"args": dict(args)}))
    assert not ref.covers(step.model_copy(update={"args": {"m": {"1": "one", "two": 2}}}))
    assert "changed since the decision" in ref.changed(step.model_copy(update={"args": {"m": 0}}))


def test_a_key_of_1_and_a_key_of_text_1_are_different_work() -> None:
    one = StepRef.of(Step(id="s", tool="t", args={"m": {1: "a"}}), 0)
    assert not one.covers(Step(id="s", tool="t", args={"m": {"1": "a"}}))


def test_a_secret_in_args_is_named_by_its_reference() -> None:
    step = Step(id="s", tool="login", args={"token": Secret("hunter2-xyz", name="db")})
    ref = StepRef.of(step, 0)
    assert "hunter2" not in ref.work and "db" in ref.work
    assert ref.covers(Step(id="s", tool="login", args={"token": Secret.from_ref("db")}))
    assert not ref.covers(Step(id="s", tool="login", args={"token": Secret.env("PLANBOOK_TEST_OTHER")}))


def test_a_step_with_mixed_keys_can_be_approved_and_a_callable_can_edit_to_them() -> None:
    sent: list[Any] = []
    plan = "steps:\n  - {id: s, tool: send, args: {to: {1: one, two: 2}}}\n"
    events = Events()
    handle = planbook.start(plan, tools=_send_box(sent), view=False, approve=True, on_event=events)
    events.wait_for("step.waiting", "s")
    handle.approve("s")
    assert handle.wait(30).ok and sent == [{1: "one", "two": 2}]
    edited = planbook.run(SEND, tools=_send_box(sent), approve=lambda s, c: Decision.edit({"to": {1: "a", "b": 2}}))
    assert edited.ok and sent[-1] == {1: "a", "b": 2}


# ------------------------------------------------------------------ pauses are one decision
def test_pauses_given_before_the_run_paused_are_one_decision() -> None:
    box, gate, started = Toolbox(), threading.Event(), threading.Event()

    @box.tool
    def slow(label: str) -> str:
        started.set()
        assert gate.wait(30)
        return label

    events = Events()
    handle = planbook.start("steps:\n  - {id: a, tool: slow, args: {label: a}}\n"
                            "  - {id: b, tool: slow, args: {label: b}}\n", tools=box, view=False, on_event=events)
    try:
        assert started.wait(30)
        for _ in range(3000):
            handle.pause()
        gate.set()
        events.wait_for("run.paused")
        for _ in range(10):
            handle.pause()  # a paused run: nothing to add
        handle.resume()
        result = handle.wait(30)
    finally:
        gate.set()
        handle.stop()
    steered = [e.data["action"] for e in result.events if e.kind == "run.steered"]
    assert steered == ["pause", "resume"], steered[:5]
    assert result.ok
