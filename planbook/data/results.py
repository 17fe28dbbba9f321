"""One builder of :class:`~planbook.data.models.RunResult`, for the live run and the stored one.

The runner (``Runner.result``) and the store (``StoredRun.result``) hand it plain data —
the plan, the history, the revisions, the events, the counters and, when they have them,
the timing records — so a run reads the same whether it is asked while it goes or loaded
back later. It sits in the data layer: the store, below the engine, uses it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..outbound import RunSecrets
from .models import Event, Execution, Plan, PlanDiff, RunReason, RunResult, RunStatus, Status, Step, Usage

__all__ = ["records_from", "run_result"]


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
    records: list[Execution] | None,
    secrets: RunSecrets | None = None,
) -> RunResult:
    """The run as a :class:`RunResult`, built from what the caller hands over (it copies nothing:
    a live run that goes on passes copies). ``records``: None when they were not kept (a store
    keeps the history and the events, and they are rebuilt from those: :func:`records_from`).
    ``secrets``: the run's gate (a stored run's result makes one from its plan when first asked)."""
    # model_construct: this data was validated on the way in; re-validating thousands
    # of steps and events on every snapshot would dominate the cost of long runs
    result = RunResult.model_construct(
        status=status,
        reason=reason,
        plan=plan,
        history=history,
        revisions=revisions,
        events=events,
        outputs={st.id: st.result for st in plan.steps if st.status is Status.completed},
        error=error,
        traceback=traceback,
        executions=executions,
        replans=replans,
        max_steps=max_steps,
        max_replans=max_replans,
        usage=Usage.from_events(events),
        records=records if records is not None else records_from(history, events),
    )
    return result if secrets is None else result.gated(secrets)


def records_from(history: Sequence[Step], events: Sequence[Event]) -> list[Execution]:
    """The timing records of a run that did not keep them, from its history and its events.

    The runner appends a history entry, then tells ``step.finished`` or ``step.failed``, for
    every execution it records: the n-th such event goes with ``history[n]`` and gives its
    execution number and the plan's revision; its ``step.started`` gives where it ran (the
    executor's name: ``main`` for a call on the runner's thread, as the live record says;
    a pool's threads are not kept by name). Times are the history's (the call's own).
    """
    started: dict[int, str] = {}
    ended: list[Event] = []
    for event in events:
        kind = event.kind
        if kind == "step.started":
            number = event.data.get("execution")
            if isinstance(number, int):
                started[number] = str(event.data.get("worker") or "main")
        elif kind == "step.finished" or kind == "step.failed":
            ended.append(event)
    records: list[Execution] = []
    for step, event in zip(history, ended):
        number = event.data.get("execution")
        number = number if isinstance(number, int) else len(records) + 1
        start = step.started_at or 0.0
        records.append(Execution(number, step.id, step.attempts, event.revision, started.get(number, "main"),
                                 start, step.finished_at if step.finished_at is not None else start,
                                 step.status is Status.completed))
    return records
