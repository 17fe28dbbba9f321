"""What the runner should do next, computed from plain values.

As in LangGraph's pregel (``_algo.py`` decides, ``_loop.py`` applies), these functions
never touch the runner: they take what it knows (its flags, a step, a call's outcome)
and return what should happen — hold new calls, pause, complete, wait, the times of
an execution. The tick loop (:mod:`planbook.engine._loop`), the recording
of outcomes (:mod:`planbook.engine._outcomes`) and the stopping
(:mod:`planbook.engine._stop`) apply them, so each rule has one home and can be tested alone.
"""

from __future__ import annotations

from typing import Any, Literal

from ..data.gcwindow import FreezeWindow
from ..data.models import Plan, RunReason, RunStatus, Status, Step
from ..data.wording import plural
from .calls import Outcome
from .state import RunState

#: outside run(): advance() keeps nothing frozen (a step's history entry is a copy)
NO_WINDOW = FreezeWindow(active=False)

#: a step is done for ``until`` once it ran (whatever the outcome) or was blocked
_RAN = (Status.completed, Status.skipped, Status.failed, Status.blocked)

#: a failure in one of planbook's worker threads that says "thread": most likely a tool that
#: must run on the main thread
_WORKERS = ("planbook-worker", "planbook-async")

IdleMove = Literal["finish", "wait", "complete", "nothing"]


def holding(ending: Any, replan_for: Any, pause_why: str | None) -> bool:
    """Nothing new starts: the run is ending, about to replan, or about to pause (the calls in
    flight finish first)."""
    return ending is not None or replan_for is not None or pause_why is not None


def mid_run(state: RunState, stale: bool, adopted: bool, goal_only: str | None) -> bool:
    """A tick in the middle of a run: nothing to begin, continue or plan first (``stale``: the
    scheduler must be rebuilt; ``adopted``: a stored run continues; ``goal_only``: the goal of
    a run that plans first)."""
    return state.started and state.status == "running" and not stale and not adopted \
        and (goal_only is None or state.plan.revision != 0)


def paused_after(limit: int | None, executions: int, max_executions: int | None) -> str | None:
    """Why the run pauses when ``run(max_executions=...)`` made its calls (None: it goes on)."""
    if limit is not None and executions >= limit:
        return f"paused after {plural(max_executions or 0, 'execution')}"
    return None


def has_run(step: Step | None) -> bool:
    """``step`` is done for ``run(until=...)``: it ran (whatever the outcome) or was blocked."""
    return step is not None and step.status in _RAN


def idle_move(ending: Any, waiting: bool, replan_for: Any, pause_why: str | None) -> IdleMove:
    """Nothing is in flight after submitting what was ready: end the run (it was ending), wait
    for a decision (steps wait for one), complete it (nothing is left), or nothing (a replan
    or a pause comes next)."""
    if ending is not None:
        return "finish"
    if replan_for is not None or pause_why is not None:
        return "nothing"
    return "wait" if waiting else "complete"


def completion(plan: Plan) -> tuple[RunStatus, RunReason, str | None]:
    """How a run that reached the end of its plan ended: every step completed, or some not."""
    undone = [st.id for st in plan.steps if st.status is not Status.completed]
    if not undone:
        return "completed", "goal_met", None
    return "completed", "steps_skipped", f"the run reached the end without steps {', '.join(undone)}"


def step_times(started_at: float | None, outcome: Outcome, timed: bool, kept: bool,
               now: float) -> tuple[float | None, float]:
    """When a step's execution began and ended: its call's own times, read where it ran (what
    the run did around it — a view's first draw, a store write, the hand-over to a thread — is
    not the step's); a kept call ended when it returned, not when the run continued."""
    began, ended = started_at, now
    if outcome.finished is not None and (timed or kept):
        ended = outcome.finished
        if timed and outcome.started is not None:
            began = outcome.started
    return began, ended


def thread_hint(error: str | None, worker: str) -> str | None:
    """A failure in a worker thread that names threads, with what to do (None: no hint)."""
    if worker.startswith(_WORKERS) and "thread" in (error or "").lower():
        return (f"{error} (this step ran in a worker thread, as it does while a live view is "
                "shown or steps run in parallel: register the tool with main_thread=True, or run "
                "without a view)")
    return None

