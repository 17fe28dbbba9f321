"""The approval prompt of ``planbook run``: ``[a]pprove [s]kip [e]dit [q]uit`` on a terminal.

The run asks it off its own thread, one step at a time, and its answer goes through the
run's inbox like any decision (:mod:`planbook.engine.door`), so the run simply waits
while the person types. Only on a terminal: with standard input
redirected nobody could answer, and the command says so before anything runs.

A step's text comes from plans, models and tools: everything the prompt prints of it goes
through the run's gate (:mod:`planbook.outbound`): no escape sequence reaches the terminal
(no clipboard write, no title, no cleared screen; a line break shows as ⏎), the run's
secrets and secret shapes show as ``***``, and a secret-named argument shows as ``***`` —
typed back in an edit, ``***`` keeps its value. A ``$id`` argument shows the value the step
will get, not the reference. ``approve_timeout`` is the run's one deadline: the prompt stops
reading when it passes (``context.deadline``), and the run decides what the deadline does.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

from ..data.models import Step
from ..data.refs import resolve
from ..engine.approvals import ApprovalContext, Decision, checked
from ..outbound import REDACTED_TEXT, RunSecrets, is_secret_name, plain_gate, shown_arg

CHOICES = "[a]pprove [s]kip [e]dit [q]uit"
#: what the prompt answers when the run's deadline passed while it asked (the run's own
#: deadline has decided by then: this answer is not applied)
DEADLINE_PASSED = "the deadline passed at the prompt"
NOT_A_TERMINAL = ("step {step!r} waits for approval, and standard input is not a terminal, so nobody can answer "
                  "the prompt. It asks because {why}: {todo}")
#: where a person can answer
_FROM_A_TERMINAL = "run the command from a terminal to answer it"


class TerminalPrompt:
    """Asks about each step that waits; an edit is asked for again until it fits the tool.

    ``gate``: the run's (every text printed goes through it: its secrets and secret shapes show
    as ``***``, control sequences as escapes). ``timeout``: ``approve_timeout``, a deadline for
    as ``***``, control sequences as escapes). The deadline of each answer is the run's own,
    given with the question (``context.deadline``): the prompt keeps no copy of it."""

    def __init__(self, tools: Any, stdin: TextIO | None = None, stdout: TextIO | None = None, *,
                 gate: RunSecrets | None = None) -> None:
        self.tools = tools
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.gate = gate or plain_gate()
        #: lines typed and not read yet, filled by one reader thread (started by the first deadline)
        self._typed: list[str] | None = None
        self._arrived = threading.Condition()

    def _read_line(self, deadline: float | None) -> str | None:
        """A line typed, or None when the deadline passed first (the reader goes on for the next question)."""
        if deadline is None:
            return self.stdin.readline()
        with self._arrived:
            if self._typed is None:  # one reader thread for the prompt's life: a line is never lost
                self._typed = []
                threading.Thread(target=self._reader, name="planbook-prompt", daemon=True).start()
            typed = self._typed
            if not self._arrived.wait_for(lambda: typed, timeout=max(0.0, deadline - time.monotonic())):
                return None
            return typed.pop(0)

    def _reader(self) -> None:
        while True:
            line = self.stdin.readline()
            with self._arrived:
                assert self._typed is not None
                self._typed.append(line)
                self._arrived.notify_all()
            if line == "":  # the end of input: nothing more will come
                return

    def _ask(self, question: str, deadline: float | None = None) -> str | None:
        """The answer; "" at the end of input (nobody is there); None when the deadline passed."""
        self.stdout.write(question)
        self.stdout.flush()
        line = self._read_line(deadline)
        if line is None:
            return None
        return "" if line == "" else line.strip() or " "

    def __call__(self, step: Step, context: ApprovalContext) -> Decision:
        line = self.gate.line
        needs = getattr(context, "needs", None) or {}
        what = f"{step.tool}({self._shown_args(step.args, needs)})" if step.tool else f"[{step.agent}] {step.task}"
        self.stdout.write(f"\nstep {line(step.id)} waits for approval: {line(what)}\n")
        deadline = getattr(context, "deadline", None)  # the run's one deadline for this answer
        while True:
            answer = self._ask(f"{CHOICES}? ", deadline)
            if answer is None:  # the run's deadline passed: the run applies it, this only stops asking
                self.stdout.write("\n")
                return Decision.stop(DEADLINE_PASSED, who="timeout")
            if answer == "":
                return Decision.stop("the prompt's input ended", who="cli")
            choice = answer.strip()[:1].lower()
            if choice == "a":
                return Decision.approve(who="cli")
            if choice == "s":
                return Decision.skip((self._ask("why (optional)? ", deadline) or "").strip(), who="cli")
            if choice == "q":
                return Decision.stop("quit at the prompt", who="cli")
            if choice == "e":
                edited = self._edit(step, deadline)
                if edited is not None:
                    return edited
                continue
            self.stdout.write(f"answer a, s, e or q (not {line(repr(answer.strip()))})\n")

    def _shown_args(self, args: dict[str, Any], needs: dict[str, Any]) -> str:
        """``name=value, ...`` as the prompt prints a step's arguments: the values the step will
        get (a ``$id`` reference as the result it stands for, which is what the person
        approves), secret-named ones and a secret-holding step's result as ``***``."""
        results = {sid: self.gate.value(sid, value) for sid, value in needs.items()}
        shown = []
        for name, value in args.items():
            try:
                value = resolve(value, results)
            except KeyError:  # a reference whose result is not there: shown as written
                pass
            shown.append(f"{name}={shown_arg(name, value, _json)}")
        return ", ".join(shown)

    def _edit(self, step: Step, deadline: float | None) -> Decision | None:
        """New arguments as a JSON object; None (ask again) when they do not fit."""
        secret = [name for name in step.args if is_secret_name(name)]
        keep = f"; {REDACTED_TEXT} keeps a secret's value" if secret else ""
        now = "{" + ", ".join(f"{json.dumps(name)}: {shown_arg(name, value, _json)}"
                              for name, value in step.args.items()) + "}"
        text = (self._ask(f"new arguments as JSON (now {self.gate.line(now)}{keep}): ", deadline) or "").strip()
        if not text:
            return None
        try:
            args = json.loads(text)
        except json.JSONDecodeError as exc:
            self.stdout.write(f"not JSON ({exc.msg} at character {exc.pos}): write them as {{\"name\": value}}\n")
            return None
        try:
            if isinstance(args, dict):  # a secret shown as *** and typed back as *** keeps its value
                args = self.gate.kept_secrets(args, step.args)
            return checked(Decision.edit(args, who="cli"), step, self.tools)  # checked once: the run trusts it
        except (TypeError, ValueError) as exc:
            self.stdout.write(f"{self.gate.line(str(exc))}\n")
            return None


def _json(value: Any) -> str:
    return json.dumps(value, default=repr)  # escapes every control character (and all but ASCII)


def attach_prompt(runner: Any, stdin: TextIO | None = None) -> None:
    """Answer the run's approvals at the terminal; ValueError (saying why) when stdin is not one."""
    steering = runner.steering
    if steering is None:
        return
    stdin = stdin or sys.stdin
    if steering.rule.callback is not None:
        return
    if not _isatty(stdin):
        asking = next((s for s in runner.plan.steps if steering.rule.asks(s)), None)
        if asking is not None:
            why, todo = why_it_asks(steering.rule, asking)
            raise ValueError(NOT_A_TERMINAL.format(step=asking.id, why=why, todo=todo))
        return
    steering.ask_with(TerminalPrompt(runner.tools, stdin=stdin, gate=runner.secrets))


def why_it_asks(rule: Any, step: Step) -> tuple[str, str]:
    """Why ``step`` waits for a decision (the run's ``--approve``, or its tool's own ``approve=True``)
    and what to do without a terminal: dropping ``--approve`` helps only when that is what asks."""
    if rule.every:
        return "the run was given --approve (every step asks)", f"{_FROM_A_TERMINAL}, or run it without --approve"
    if step.id in rule.names:
        return (f"--approve names step {step.id!r}",
                f"{_FROM_A_TERMINAL}, or leave {step.id!r} out of --approve")
    if step.tool in rule.names:
        return (f"--approve names its tool {step.tool!r}",
                f"{_FROM_A_TERMINAL}, or leave {step.tool!r} out of --approve")
    return (f"its tool {step.tool!r} is registered with approve=True, so every call of it waits for a person's "
            "decision whatever the flags say",
            f"{_FROM_A_TERMINAL}, or, if that tool need not ask, register it without approve=True")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
