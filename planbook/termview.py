"""The terminal view: a live table of steps that follows the run's events (via ``rich``).

Redrawing is throttled like the notebook's live view (:class:`~planbook.liveview.Throttle`:
a short burst, then about ``rate`` redraws a second), so a 1,000-step run costs a bounded
number of redraws, not one per event; updates held back are drawn by the runner's
heartbeat while a slow step works, and the final state is always drawn. A long plan
shows a window of rows around the running step (a few finished, the current one, the
next few) with "… N more" lines, so each redraw costs the same however long the plan is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .htmlview import frontier
from .liveview import FLUSH_NOW, Throttle
from .models import STATUS_MARKS, Event, Plan, Status, Step, Usage
from .textview import format_diff

_STYLES = {
    Status.not_started: "dim",
    Status.in_progress: "bold yellow",
    Status.completed: "green",
    Status.failed: "bold red",
    Status.skipped: "magenta",
    Status.blocked: "red",
}

#: plans up to this many steps show every row; longer ones a window around the running step
MAX_ROWS = 20
#: rows shown before and after the running step in that window
ROWS_BEFORE, ROWS_AFTER = 3, 5


class TerminalView:
    """A live table of ``runner``'s plan on a ``rich`` console; use it around the run::

        with TerminalView(runner):
            result = runner.run()

    It subscribes to the runner's events and is its heartbeat while the block runs. A
    replan prints the diff above the table, so the revision stays visible after the table
    moves on. ``redraws`` counts the tables built (what a test of the throttle reads).
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
        from rich.console import Console
        from rich.live import Live

        self.runner = runner
        self.console = console or Console()
        self.max_rows = max_rows
        self.clock = clock
        self.throttle = Throttle(rate, burst, clock)
        self.heartbeat = heartbeat
        self.usage = Usage.from_events(runner.state.events)
        self.redraws = 0
        self.events = 0
        self.pending = False
        self.last_draw = clock()
        # no refresh thread: the view redraws only when told, on the runner's thread
        self.live = Live(self.render(), console=self.console, auto_refresh=False, transient=False)

    def __enter__(self) -> "TerminalView":
        self.live.__enter__()
        self.runner.subscribe(self.on_event)
        self.runner.add_heartbeat(self.beat, self.heartbeat)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.runner.unsubscribe(self.on_event)
        self.runner.remove_heartbeat(self.beat)
        self.draw()  # the final state, always
        self.live.__exit__(*exc)

    # ------------------------------------------------------------------ events
    def on_event(self, event: Event) -> None:
        self.events += 1
        if event.kind == "llm.call":
            self.usage.add(event.data)
        if event.kind == "plan.diff":
            diff = self.runner.state.revisions[-1]
            from rich.text import Text

            # Text, not markup: a diff can hold brackets ("[RESEARCHER]", "$id[0]")
            self.live.console.print(Text.assemble(("Replanned ", "bold cyan"), format_diff(diff)), highlight=False)
        if event.kind in FLUSH_NOW or self.throttle.allow():
            self.draw()
        else:
            self.pending = True

    def beat(self) -> None:
        """The runner's heartbeat during a step's work: draw what the throttle held back,
        and about once a second anyway, so the running step's time moves on."""
        if (self.pending or self.clock() - self.last_draw >= 1.0) and self.throttle.allow():
            self.draw()

    def draw(self) -> None:
        self.pending = False
        self.last_draw = self.clock()
        self.live.update(self.render(), refresh=True)

    # ------------------------------------------------------------------ drawing
    def visible_rows(self) -> tuple[int, list[Step], int]:
        """(steps hidden above, the steps shown, steps hidden below)."""
        steps: list[Step] = self.runner.plan.steps
        if len(steps) <= self.max_rows:
            return 0, steps, 0
        at = frontier(steps)
        start = max(0, at - ROWS_BEFORE)
        end = min(len(steps), at + ROWS_AFTER + 1)
        return start, steps[start:end], len(steps) - end

    def render(self) -> Any:
        """The table (or its window) and a line of counts and budgets, as a ``rich`` renderable."""
        from rich.columns import Columns
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        self.redraws += 1
        plan: Plan = self.runner.plan
        state = self.runner.state
        table = Table(title=f"{plan.display_title} (revision {plan.revision})", title_justify="left", expand=False)
        table.add_column("", no_wrap=True)
        table.add_column("id", no_wrap=True)
        table.add_column("tool/agent", no_wrap=True)
        table.add_column("task")
        table.add_column("time", justify="right", no_wrap=True)
        above, shown, below = self.visible_rows()
        if above:
            table.add_row("…", "", "", f"{above} more above", "", style="dim")
        now = self.runner.clock()
        for step in shown:
            table.add_row(
                STATUS_MARKS[step.status], step.id, step.executor, step.task or step.describe(), _time(step, now),
                style=_STYLES[step.status],
            )
        if below:
            table.add_row("…", "", "", f"{below} more below", "", style="dim")
        counts = plan.counts()
        done, total = counts[Status.completed], len(plan.steps)
        line = (f" {done}/{total} completed · steps {state.executions}/{self.runner.max_steps}"
                f" · replans {state.replans}/{self.runner.max_replans}")
        if self.usage.calls:
            line += f" · model calls {self.usage.calls}, tokens {self.usage.total_tokens}"
        bar = ProgressBar(total=total or 1, completed=done, width=40)
        return Group(table, Columns([bar, Text(line)]))


def _time(step: Step, now: float) -> str:
    if step.duration is not None:
        return f"{step.duration:.2f}s"
    if step.status is Status.in_progress and step.started_at is not None:
        return f"{max(0.0, now - step.started_at):.1f}s…"
    return ""

