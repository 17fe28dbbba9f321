"""The terminal view: a live table of steps that follows the run's events (via ``rich``)."""

from __future__ import annotations

import time
from typing import Any

from .models import STATUS_MARKS, Event, Plan, Status
from .textview import format_diff

_STYLES = {
    Status.not_started: "dim",
    Status.in_progress: "bold yellow",
    Status.completed: "green",
    Status.failed: "bold red",
    Status.skipped: "magenta",
    Status.blocked: "red",
}


class TerminalView:
    """Subscribe ``view.on_event`` to a runner; use as a context manager around the run.

    Redraws at most ``refresh_per_second`` times; a diff is printed above the table
    when a replan happens, so the revision stays visible after the table moves on.
    """

    def __init__(self, runner: Any, *, console: Any = None, refresh_per_second: float = 10.0) -> None:
        from rich.console import Console
        from rich.live import Live

        self.runner = runner
        self.console = console or Console()
        self.live = Live(self._render(), console=self.console, refresh_per_second=refresh_per_second, transient=False)
        self.started = time.monotonic()
        runner.subscribe(self.on_event)

    def __enter__(self) -> "TerminalView":
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render(), refresh=True)
        self.live.__exit__(*exc)

    def on_event(self, event: Event) -> None:
        if event.kind == "plan.diff":
            diff = self.runner.state.revisions[-1]
            self.live.console.print(f"[bold cyan]Replanned[/] {format_diff(diff)}", highlight=False)
        self.live.update(self._render())

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        plan: Plan = self.runner.plan
        state = self.runner.state
        counts = plan.counts()
        total = len(plan.steps) or 1
        table = Table(title=f"{plan.display_title} (revision {plan.revision})", title_justify="left", expand=False)
        table.add_column("", no_wrap=True)
        table.add_column("id", no_wrap=True)
        table.add_column("tool/agent", no_wrap=True)
        table.add_column("task")
        table.add_column("time", justify="right", no_wrap=True)
        for step in plan.steps:
            duration = f"{step.duration:.2f}s" if step.duration is not None else ""
            table.add_row(
                STATUS_MARKS[step.status], step.id, step.executor, step.task or step.describe(), duration,
                style=_STYLES[step.status],
            )
        from rich.columns import Columns
        from rich.console import Group

        bar = ProgressBar(total=total, completed=counts[Status.completed], width=40)
        budgets = Text(
            f" {counts[Status.completed]}/{len(plan.steps)} completed · steps {state.executions}/{self.runner.max_steps}"
            f" · replans {state.replans}/{self.runner.max_replans}"
        )
        return Group(table, Columns([bar, budgets]))
