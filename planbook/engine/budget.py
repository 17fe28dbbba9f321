"""Budgets: hard caps checked *before* the work that would exceed them.

One object answers both questions the runner asks — may another execution start, may
another replan happen — so serial and parallel runs count the same way. An execution
is counted when it is *submitted*, not when it finishes, so steps running at once can
never take the run past ``max_steps`` by a race.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """``max_steps`` executions (retries and replanned steps included), ``max_replans`` replans."""

    max_steps: int
    max_replans: int

    def execution_refused(self, executions: int, step_id: str, *, retry: bool) -> str | None:
        """Why another execution may not start (None when it may). ``executions``: those started so far."""
        if executions < self.max_steps:
            return None
        return (f"step budget used up: {executions} of max_steps={self.max_steps} executions made; "
                f"{'the retry of ' if retry else ''}step {step_id!r} and what follows did not run "
                "(raise max_steps to allow more)")

    def replan_refused(self, executions: int, replans: int, last_error: str | None) -> tuple[str, str] | None:
        """``(reason, message)`` when no replan may happen (None when it may).

        A replan whose new plan could not run a single step is refused as well.
        """
        if executions >= self.max_steps:
            return ("step_budget",
                    f"step budget used up: {executions} of max_steps={self.max_steps} executions made; "
                    f"no replan after: {last_error} (raise max_steps to allow more)")
        if replans >= self.max_replans:
            return ("replan_budget",
                    f"replan budget used up: {replans} of max_replans={self.max_replans} replans made; "
                    f"last error: {last_error}")
        return None
