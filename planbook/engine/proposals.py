"""What replanning, a review and the first planning return: the change a run should make.

Plain values (a new revision, a refused one, the first plan, an ending): the deciders
(:mod:`planbook.engine.replanning`) return them and the runner applies them
(:func:`planbook.engine.planchanges.apply`), so neither imports the other's loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data.models import Plan, RunReason, RunStatus, Step

__all__ = ["Change", "End", "FirstPlan", "Reject", "Revise"]


@dataclass(frozen=True)
class End:
    """End the run (``replans``: a replan that happened before it ended, counted)."""

    status: RunStatus
    reason: RunReason
    error: str | None = None
    exc: BaseException | None = None
    replans: int = 0


@dataclass(frozen=True)
class Revise:
    """A new revision of the plan (``new_steps``: the steps proposed anew, with fresh retries)."""

    candidate: Plan
    new_steps: list[Step]
    reason: str | None
    replans: int = 1


@dataclass(frozen=True)
class Reject:
    """A refused replacement: kept in the revision history, then the run ends (``no_plan``)."""

    candidate: Plan
    reason: str | None
    rejected: str


@dataclass(frozen=True)
class FirstPlan:
    plan: Plan


#: what :mod:`planbook.engine.replanning` returns (None: nothing changes)
Change = End | Revise | Reject | FirstPlan | None
