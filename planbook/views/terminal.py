"""The terminal view: a live ``rich`` table of the run, drawn from the view model.

It is a target of the throttled :class:`~planbook.views.live.LiveView` bridge (a short
burst, then about ``rate`` redraws a second; the final state always), so a 1,000-step
run costs a bounded number of redraws. A long plan shows the window of rows around the
running steps (:func:`~planbook.views.state.row_window`) with "… N more" lines.

Text from steps (tasks, ids, errors, diffs) is always a ``rich`` ``Text``, never markup:
``[/bold]`` in a task must not crash the run and ``"[data]"`` must not vanish; its control
characters show as escapes (:func:`~planbook.outbound.text.neutralise`: a stored result cannot
set the clipboard or clear the screen) and a task stays on its row. On a
stream that cannot encode the marks (a Windows console or a redirected cp1252 stdout)
the marks fall back to ASCII.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypedDict

from ..data.models import STATUS_MARKS, Event, PlanDiff, Status, Step
from ..data.wording import revision_news
from ..outbound.text import neutralise, one_line
from .live import LiveView
from .state import ViewState, budget_line, row_window
from .state import shown as shown_text
from .text import format_diff

_STYLES = {
    Status.not_started: "dim",
    Status.in_progress: "bold yellow",
    Status.completed: "green",
    Status.failed: "bold red",
    Status.skipped: "magenta",
    Status.blocked: "red",
}

#: the marks where the console cannot encode ✓ → ✗
ASCII_MARKS: dict[Status, str] = {
    Status.not_started: "[ ]", Status.in_progress: "[>]", Status.completed: "[v]",
    Status.failed: "[x]", Status.skipped: "[-]", Status.blocked: "[!]",
}

#: plans up to this many steps show every row; longer ones a window around the running steps
MAX_ROWS = 20
#: rows of context shown above the first running step in that window
ROWS_BEFORE = 3


def can_encode(console: Any, text: str) -> bool:
    """Whether ``console``'s output encoding can write ``text`` (rich writes str; the stream encodes)."""
    encoding = getattr(getattr(console, "file", None), "encoding", None) or getattr(console, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def safe_console(file: Any = None) -> Any:
    """A rich Console that never crashes on an encoding that lacks the marks and arrows."""
    from rich.console import Console

    return Console(file=file, highlight=False, emoji=False, markup=False)


class _Throttle(TypedDict):
    """The live view's pacing, given to the :class:`~planbook.views.live.LiveView` made on enter."""

    rate: float
    burst: int
    clock: Callable[[], float]
    heartbeat: float


class TerminalView:
    """A live table of ``runner``'s run on a ``rich`` console; use it around the run::

        with TerminalView(runner):
            result = runner.run()

    A replan prints the diff above the table, so the revision stays visible after the
    table moves on. ``redraws`` counts the tables drawn (what a test of the throttle reads).
    """

    def __init__(
        self,
        runner: Any,
        *,
        console: Any = None,
        rate: float = 10.0,
        burst: int = 3,
        heartbeat: float = 0.1,
        max_rows: int = MAX_ROWS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.live import Live

        self.runner = runner
        self.console = console or safe_console()
        self.max_rows = max_rows
        self.redraws = 0
        self.marks = STATUS_MARKS if can_encode(self.console, "".join(STATUS_MARKS.values()) + "…→·") else ASCII_MARKS
        self.ellipsis = "…" if self.marks is STATUS_MARKS else "..."
        self._throttle: _Throttle = {"rate": rate, "burst": burst, "clock": clock, "heartbeat": heartbeat}
        self.bridge: LiveView | None = None
        # no refresh thread: the view redraws only when told, on the runner's thread
        self.live = Live(self.renderable(ViewState.of_runner(runner)), console=self.console, auto_refresh=False,
                         transient=False)

    # ------------------------------------------------------------------ as a context manager
    def __enter__(self) -> "TerminalView":
        self.live.__enter__()
        self.bridge = LiveView(self.runner, self, **self._throttle)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.bridge is not None
        self.bridge.close()
        self.render(self.bridge.state())  # the final state, always
        self.live.__exit__(*exc)

    @property
    def throttle(self) -> Any:
        assert self.bridge is not None
        return self.bridge.throttle

    @property
    def events(self) -> int:
        return self.bridge.events if self.bridge is not None else 0

    # ------------------------------------------------------------------ as a bridge target
    def note_event(self, event: Event, state: Callable[[], ViewState]) -> None:
        """Every event: a new revision prints its diff above the table (plain text, never markup),
        announced as a replan or, when a person edited a step, as their edit."""
        if event.kind == "plan.diff" and self.runner.state.revisions:
            from rich.text import Text

            diff = self.runner.state.revisions[-1]
            gate = getattr(self.runner, "secrets", None)  # the run's gate: a diff is run text like any other
            edited_by = event.data.get("edited_by")
            if edited_by is not None:  # the news says who edited: the diff's reason would say it twice
                diff = PlanDiff(from_revision=diff.from_revision, to_revision=diff.to_revision, removed=diff.removed,
                                added=diff.added, revised=diff.revised, steps=diff.steps, rejected=diff.rejected)
            news = revision_news(edited_by) + (": " if edited_by is not None else " ")
            self.live.console.print(Text.assemble((self._text(news), "bold cyan"), self._text(format_diff(diff, gate))))

    def render(self, state: ViewState) -> None:
        self.live.update(self.renderable(state), refresh=True)

    # ------------------------------------------------------------------ drawing
    def _text(self, text: str) -> str:
        """``text`` as the console can write it: control characters as escapes, marks and arrows
        replaced where it cannot encode them."""
        text = neutralise(text)
        if self.marks is STATUS_MARKS or can_encode(self.console, text):
            return text
        encoding = getattr(getattr(self.console, "file", None), "encoding", None) or "ascii"
        for status, mark in STATUS_MARKS.items():
            text = text.replace(mark, ASCII_MARKS[status])
        text = text.replace("→", "->").replace("…", "...").replace("·", "-")
        return text.encode(encoding, "replace").decode(encoding)

    def visible_rows(self, steps: list[Step]) -> tuple[int, list[Step], int]:
        """(steps hidden above, the steps shown, steps hidden below)."""
        start, end = row_window(steps, self.max_rows, before=ROWS_BEFORE)
        return start, steps[start:end], len(steps) - end

    def renderable(self, state: ViewState) -> Any:
        """The table (or its window) and a line of counts and budgets, as a ``rich`` renderable."""
        from rich.columns import Columns
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        self.redraws += 1
        plan = state.plan
        t = self._text
        hide = state.gate.text  # the run's secrets and secret shapes never reach the terminal
        table = Table(title=Text(t(f"{hide(plan.display_title)} (revision {plan.revision})")), title_justify="left",
                      expand=False)
        for name, opts in (("", {"no_wrap": True}), ("id", {"no_wrap": True}), ("tool/agent", {"no_wrap": True}),
                           ("task", {}), ("time", {"justify": "right", "no_wrap": True})):
            table.add_column(name, **opts)
        above, shown, below = self.visible_rows(plan.steps)
        if above:
            table.add_row(self.ellipsis, "", "", f"{above} more above", "", style="dim")
        now = state.now if state.now is not None else self.runner.clock()
        for step in shown:
            table.add_row(
                Text(self.marks[step.status]), Text(t(step.id)), Text(t(step.executor)),
                Text(t(one_line(shown_text(step.task or step.describe(), hide)))), Text(_time(step, now, self.ellipsis)),
                style=_STYLES[step.status],
            )
        if below:
            table.add_row(self.ellipsis, "", "", f"{below} more below", "", style="dim")
        line = f" {state.done}/{state.total} completed"
        budgets = budget_line(state)
        if budgets:
            line += " · " + budgets.replace(", replans", " · replans").replace(", model calls", " · model calls")
        bar = ProgressBar(total=state.total or 1, completed=state.done, width=40)
        return Group(table, Columns([bar, Text(t(line))]))


def _time(step: Step, now: float, ellipsis: str) -> str:
    if step.duration is not None:
        return f"{step.duration:.2f}s"
    if step.status is Status.in_progress and step.started_at is not None:
        return f"{max(0.0, now - step.started_at):.1f}s{ellipsis}"
    return ""
