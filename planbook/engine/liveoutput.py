"""What a running step has printed so far, shown while it runs: ``step.output`` events.

A step's call prints on its own thread (a planbook worker, or the helper thread that
awaits its coroutine); the runner's thread reads what it printed between waits and
announces it, throttled, as a ``step.output`` event (``data={"output": ...}``: the text so
far, through the run's gate, its last :data:`OUTPUT_TAIL` characters), after setting the
running step's ``Step.output`` to the same text. The first line a step prints wakes the
runner, so it shows at once; later prints are coalesced, at most one event a step every
:data:`EVERY` seconds of the run's clock; what is left is announced just before the
step's ``step.finished`` / ``step.failed``.

What is not covered, and why: a call that runs on the runner's own thread (a serial run
with no view, a ``main_thread`` tool, a fast tool) cannot be read while it runs, and its
output arrives with its finish event, as before; a call shipped to a
``concurrent.futures`` executor (Dask) prints where it runs, and what it printed comes
back with its outcome; threads a tool starts itself print to the real stdout.

What is secret never shows, not even in part: the text so far is masked whole (a secret printed
over two ``print`` calls is found once both halves are there); the end of it that may be the
start of a known secret (the *carry*, :meth:`planbook.outbound.RunSecrets.unfinished_tail`) waits
for the next announcement; a tail cut from a longer text drops its first characters, which may
be the end of a cut secret; and a step that holds a secret (it feeds one by reference, so its
result, which it may print, is learned only when it ends) is not announced while it runs: its
output is released, masked, with its end.

These events are announced, not recorded: they are not in the run's events, so neither
the store, a resume nor a replayed record sees them; the step's final output is kept
with the step, as it always was (a step printing for a minute could otherwise store up to
240 copies of its growing text).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

from ..data.models import Step
from ..outbound import RunSecrets

#: the longest text a ``step.output`` event carries: the end of what was printed; a step's pane
#: shows at most this much (planbook.views.panes.PANE_CAP is this figure)
OUTPUT_TAIL = 50_000
#: secrets are hidden in this much more than the tail, so one cut by the tail is still found
_MARGIN = 4_096
#: seconds of the run's clock between two ``step.output`` events of one step
EVERY = 0.25


class LiveOutput(io.StringIO):
    """A step's output buffer that another thread may read while the step writes to it."""

    def __init__(self, wake: Callable[[], None]) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._wake: Callable[[], None] | None = wake
        #: the length of the text last read, and the text last announced
        self.shown = 0
        self.sent = ""
        #: when it was last announced (the run's clock; None: never)
        self.at: float | None = None

    def write(self, text: str) -> int:
        with self._lock:
            written = super().write(text)
            wake = self._wake
            if wake is not None and "\n" in text:  # print() writes its text, then the line's end
                self._wake = None
                wake()  # the first line printed shows at once
        return written

    def text(self) -> str:
        """Everything written so far (read from any thread)."""
        with self._lock:
            return self.getvalue()


class OutputRelay:
    """Announces what running steps printed; one per run, used on the runner's thread only.

    ``gate`` masks a text; ``secrets`` (the run's :class:`~planbook.outbound.RunSecrets`) says
    how much of a text's end may be the start of a secret (held back until more is printed or
    the step ends) and which steps hold a secret (their output waits for their end: see the
    module docstring)."""

    def __init__(self, announce: Callable[[Step, str], None], gate: Callable[[str], str],
                 clock: Callable[[], float], wake: Callable[[], None], *, secrets: RunSecrets | None = None) -> None:
        self._announce, self._gate, self._clock, self._wake = announce, gate, clock, wake
        self._secrets = secrets
        #: the buffers of the calls running on other threads, with their steps
        self.running: dict[int, tuple[Step, LiveOutput]] = {}

    def buffer(self, step: Step) -> LiveOutput:
        """A new buffer for ``step``'s call (a worker thread writes it)."""
        live = LiveOutput(self._wake)
        self.running[id(live)] = (step, live)
        return live

    def poll(self) -> None:
        """Announce the running steps whose output grew, each at most every :data:`EVERY` s."""
        if not self.running:
            return
        now = self._clock()
        secrets = self._secrets
        for step, live in list(self.running.values()):
            if live.at is not None and now - live.at < EVERY:
                continue
            if secrets is not None and secrets.holds_secret(step.id):
                continue  # its result, which it may print, is not known yet: shown when it ends
            text = live.text()
            if len(text) != live.shown:
                live.shown, live.at = len(text), now
                shown = self.visible(text)
                if shown != live.sent:
                    self._show(step, live, shown)

    def visible(self, text: str) -> str:
        """What may be shown of a running step's ``text``: its last :data:`OUTPUT_TAIL` characters,
        masked as one stream, without a cut secret's end at the front or a secret's start at the end."""
        secrets = self._secrets
        margin = _MARGIN if secrets is None else max(_MARGIN, secrets.longest_form())
        cut = len(text) > OUTPUT_TAIL + margin
        masked = self._gate(text[-(OUTPUT_TAIL + margin):] if cut else text)
        if cut:  # the window may start inside a secret: its end, which masking cannot find, goes
            masked = masked[margin:]
        pending = secrets.unfinished_tail(masked) if secrets is not None else 0
        if pending:  # the start of a secret whose rest is not printed yet: it waits (the carry)
            masked = masked[:-pending]
        return masked[-OUTPUT_TAIL:]

    def finish(self, live: Any, output: str) -> None:
        """The call of ``live`` ended with ``output`` (already gated): announce what was not yet."""
        if not isinstance(live, LiveOutput):
            return
        entry = self.running.pop(id(live), None)
        if entry is not None and output[-OUTPUT_TAIL:] != live.sent:
            self._show(entry[0], live, output[-OUTPUT_TAIL:])

    def drop(self, live: Any) -> None:
        """The call of ``live`` did not complete (an interrupt): nothing more is announced."""
        if isinstance(live, LiveOutput):
            self.running.pop(id(live), None)

    def _show(self, step: Step, live: LiveOutput, text: str) -> None:
        live.sent = text
        step.__dict__["output"] = text  # the running step holds what it printed so far
        self._announce(step, text)
