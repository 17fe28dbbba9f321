"""The approval prompt of ``planbook run``: ``[a]pprove [s]kip [e]dit [q]uit`` on a terminal.

It answers on the runner's thread when a step asks (:mod:`planbook.steering`), so the
run simply waits while the person types. Only on a terminal: with standard input
redirected nobody could answer, and the command says so before anything runs.

A step's text comes from plans, models and tools: everything the prompt prints of it goes
through the terminal escaping of :mod:`planbook.outbound.text` (no escape sequence reaches
the terminal: no clipboard write, no title, no cleared screen; a line break shows as ⏎),
and each argument through :func:`~planbook.outbound.redact.shown_arg`, so a secret-named
one shows as ``***`` — and ``***`` typed back in an edit keeps its value.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .approvals import ApprovalContext, Decision, check_edit
from .models import Step
from .outbound.redact import REDACTED_TEXT, is_secret_name, shown_arg
from .outbound.text import one_line

CHOICES = "[a]pprove [s]kip [e]dit [q]uit"
NOT_A_TERMINAL = ("step {step!r} waits for approval, and standard input is not a terminal, so nobody can answer "
                  "the prompt: run planbook run from a terminal (or drop --approve, or register the tool without "
                  "approve=True)")


class TerminalPrompt:
    """Asks about each step that waits; an edit is asked for again until it fits the tool."""

    def __init__(self, tools: Any, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.tools = tools
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout

    def _ask(self, question: str) -> str | None:
        self.stdout.write(question)
        self.stdout.flush()
        line = self.stdin.readline()
        return None if line == "" else line.strip()  # "" is end of input: nobody is there

    def __call__(self, step: Step, context: ApprovalContext) -> Decision:
        what = (f"{one_line(step.tool)}({shown_args(step.args)})" if step.tool
                else f"[{one_line(str(step.agent))}] {one_line(step.task)}")
        self.stdout.write(f"\nstep {one_line(step.id)} waits for approval: {what}\n")
        while True:
            answer = self._ask(f"{CHOICES}? ")
            if answer is None:
                return Decision.stop("the prompt's input ended", who="cli")
            choice = answer[:1].lower()
            if choice == "a":
                return Decision.approve(who="cli")
            if choice == "s":
                return Decision.skip(self._ask("why (optional)? ") or "", who="cli")
            if choice == "q":
                return Decision.stop("quit at the prompt", who="cli")
            if choice == "e":
                edited = self._edit(step)
                if edited is not None:
                    return edited
                continue
            self.stdout.write(f"answer a, s, e or q (not {answer!r})\n")

    def _edit(self, step: Step) -> Decision | None:
        """New arguments as a JSON object; None (ask again) when they do not fit."""
        secret = [name for name in step.args if is_secret_name(name)]
        keep = f"; {REDACTED_TEXT} keeps a secret's value" if secret else ""
        now = "{" + ", ".join(f"{json.dumps(name)}: {shown_arg(name, value, _json)}"
                              for name, value in step.args.items()) + "}"
        text = self._ask(f"new arguments as JSON (now {one_line(now)}{keep}): ")
        if not text:
            return None
        try:
            args = json.loads(text)
        except json.JSONDecodeError as exc:
            self.stdout.write(f"not JSON ({exc.msg} at character {exc.pos}): write them as {{\"name\": value}}\n")
            return None
        if isinstance(args, dict):  # a secret shown as *** and typed back as *** keeps its value
            args = {name: step.args[name] if value == REDACTED_TEXT and name in secret else value
                    for name, value in args.items()}
        try:
            return Decision.edit(check_edit(step, args, self.tools), who="cli")
        except (TypeError, ValueError) as exc:
            self.stdout.write(f"{one_line(str(exc))}\n")
            return None


def _json(value: Any) -> str:
    return json.dumps(value, default=repr)  # escapes every control character (and all but ASCII)


def shown_args(args: dict[str, Any]) -> str:
    """``name=value, ...`` as the prompt prints a step's arguments: terminal-safe, secrets as ***."""
    return one_line(", ".join(f"{name}={shown_arg(name, value, _json)}" for name, value in args.items()))


def attach_prompt(runner: Any, stdin: TextIO | None = None) -> None:
    """Answer the run's approvals at the terminal; ValueError (saying why) when stdin is not one."""
    steering = runner.steering
    if steering is None:
        return
    stdin = stdin or sys.stdin
    if steering.rule.callback is not None:
        return
    if not _isatty(stdin):
        asking = [s.id for s in runner.plan.steps if steering.rule.asks(s)]
        if asking:
            raise ValueError(NOT_A_TERMINAL.format(step=asking[0]))
        return
    steering.prompt = TerminalPrompt(runner.tools, stdin=stdin)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
