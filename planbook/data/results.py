"""One builder of :class:`~planbook.data.models.RunResult`, for the live run and the stored one.

The runner (``Runner.result``) and the store (``StoredRun.result``) hand it plain data —
the plan, the history, the revisions, the events and the counters; the timing records are
rebuilt from the history and the events, for both — so a run reads the same whether it is
asked while it goes or loaded back later. It sits in the data layer: the store, below the engine, uses it too.
"""

from __future__ import annotations

from typing import Any

from ..outbound import RunSecrets
from .models import Event, Plan, PlanDiff, RunReason, RunResult, RunStatus, Status, Step, Usage
from .timeline import records_of

__all__ = ["run_result"]


def run_result(
    *,
    plan: Plan,
    history: list[Step],
    revisions: list[PlanDiff],
    events: list[Event],
    status: RunStatus,
    reason: RunReason | None,
    error: str | None,
    traceback: str | None,
    executions: int,
    replans: int,
    max_steps: int,
    max_replans: int,
    secrets: RunSecrets | None = None,
    run_id: str | None = None,
    lineage: dict[str, Any] | None = None,
) -> RunResult:
    """The run as a :class:`RunResult`, built from what the caller hands over (it copies nothing:
    a live run that goes on passes copies); the timing records are rebuilt from the history and
    the events (:func:`planbook.data.timeline.records_of`, the one builder of them, which the views use too). ``secrets``: the run's gate (a stored run's result makes one from its plan when first asked)."""
    # model_construct: this data was validated on the way in; re-validating thousands
    # of steps and events on every snapshot would dominate the cost of long runs
    result = RunResult.model_construct(
        status=status, reason=reason, plan=plan, history=history, revisions=revisions, events=events,
        outputs={st.id: st.result for st in plan.steps if st.status is Status.completed},
        error=error, traceback=traceback, executions=executions, replans=replans,
        max_steps=max_steps, max_replans=max_replans, usage=Usage.from_events(events),
        records=records_of(history, events), run_id=run_id, lineage=lineage,
    )
    return result if secrets is None else result.gated(secrets)
