"""What a run knows, as plain data: enough to show it, store it or continue it.

With a :class:`~planbook.engine.config.RunConfig`, a :class:`RunState` is all a run is: the
runner's other fields (executors, the scheduler's indexes, views) are rebuilt from it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..data.models import Event, Plan, PlanDiff, RunReason, RunStatus, Step
from ..data.stepmark import StepMark

# The notes below are prose the runner writes for people (``step.notes``); what the step *is*
# is its typed mark (:class:`~planbook.data.stepmark.StepMark`), which views and stores read.
#: the note on a step whose call was interrupted before it completed
INTERRUPTED_NOTE = "interrupted; it runs again when the run continues"
#: the note on a step whose call was still running in a worker thread at the interrupt
STILL_RUNNING_NOTE = ("interrupted while its call was still running in a worker thread; when the run continues "
                      "it waits for that call and keeps its result (the step runs again only if the call did not "
                      "complete)")
#: the note on a step whose call completed around an interrupt and was kept (not run again)
KEPT_NOTE = "kept: its call completed while the run was interrupted; it did not run again"
#: the note that goes with each mark of a cut call (a step put back as not started)
CUT_NOTES: dict[StepMark | None, str] = {StepMark.interrupted: INTERRUPTED_NOTE,
                                         StepMark.still_running: STILL_RUNNING_NOTE}


class RunState(BaseModel):
    """Everything a run knows. The runner changes it; views and stores read it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    plan: Plan
    status: RunStatus = "running"
    reason: RunReason | None = None
    error: str | None = None
    #: executions started (and, outside a tick, finished): always ``len(history)`` between ticks
    executions: int = 0
    replans: int = 0
    retries_used: dict[str, int] = Field(default_factory=dict)
    #: the latest failure (:func:`failure_line`): what a planner reads, unless a replan names its own
    last_error: str | None = None
    #: a snapshot of the step after each execution, in the order they finished
    history: list[Step] = Field(default_factory=list)
    revisions: list[PlanDiff] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    started: bool = False
    #: failed steps whose policy has not been applied yet (the run was interrupted first):
    #: applied when the run continues, never silently dropped
    pending_failures: list[str] = Field(default_factory=list)
    #: traceback of the exception that ended the run (a planner that raised), for debugging
    traceback: str | None = None
    #: a forked run's origin (:class:`~planbook.data.lineage.Lineage` as plain data: the store keeps it)
    lineage: dict[str, Any] | None = None


def failure_line(step_id: str, error: str | None) -> str:
    """How a step's failure is told to a planner and shown as a revision's reason."""
    return f"step {step_id} failed: {error}"
