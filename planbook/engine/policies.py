"""Failure policies: what a failed step does next, one class each.

``abort`` ends the run, ``skip`` marks the step skipped and goes on (its dependents
become blocked), ``retry`` runs it again (``retries`` times), ``replan`` asks the
planner for a new plan from the failed step on, ``continue`` leaves the step failed and
lets its dependents run anyway (they see its error in their context — AgenticSeek's
soft ``need``; planbook's other policies never let a step use what did not complete). A chain such as ``["retry", "replan"]``
tries them in order; only a policy that can decline (``retry``, once its retries are
used) hands the failure on.

A policy only *decides*: it returns a :data:`Verdict` (or None: it declines) from what the
run tells it (:class:`FailureFacts`), and the runner carries the verdict out. A policy holds no
handle on the runner, so a new policy is one class here and nothing else, and nobody holding a
runner has a second way to end it or skip a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal, Protocol

from ..data.errors import closest
from ..data.models import Step

#: what the runner does with a failed step
Verdict = Literal["abort", "skip", "retry", "replan", "continue"]


class FailureFacts(Protocol):
    """What a policy may read of the run to decide (the runner offers it)."""

    @property
    def retries(self) -> int: ...  # the run's option
    def retries_used(self, step: Step) -> int: ...


class Policy:
    """Base class: ``decide`` returns the verdict, or None to hand the failure to the next policy."""

    name: ClassVar[str]
    #: True when the policy may decline and hand the failure to the next one in a chain
    can_decline: ClassVar[bool] = False
    #: True when the policy needs a planner
    needs_planner: ClassVar[bool] = False

    def decide(self, step: Step, run: FailureFacts) -> Verdict | None:
        raise NotImplementedError


class Abort(Policy):
    name = "abort"

    def decide(self, step: Step, run: FailureFacts) -> Verdict | None:
        return "abort"


class Skip(Policy):
    name = "skip"

    def decide(self, step: Step, run: FailureFacts) -> Verdict | None:
        return "skip"


class Retry(Policy):
    name = "retry"
    can_decline = True

    def decide(self, step: Step, run: FailureFacts) -> Verdict | None:
        return None if run.retries_used(step) >= run.retries else "retry"


class Replan(Policy):
    name = "replan"
    needs_planner = True

    def decide(self, step: Step, run: FailureFacts) -> Verdict | None:
        return "replan"


class Continue(Policy):
    name = "continue"

    def decide(self, step: Step, run: FailureFacts) -> Verdict | None:
        return "continue"


#: every policy by name; a new one registers itself here
REGISTRY: dict[str, Policy] = {p.name: p for p in (Abort(), Skip(), Retry(), Replan(), Continue())}
POLICIES: tuple[str, ...] = tuple(REGISTRY)


def unknown_policy(name: str) -> str:
    """What every surface says of a policy name that is not one (the engine, a flag, a JSON client)."""
    return f"unknown failure policy {name!r}{closest(name, REGISTRY)}; choose from {', '.join(REGISTRY)}"


def policy_named(name: str) -> Policy:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(unknown_policy(name)) from None


def normalise_policy(on_failure: str | Sequence[str] | None, *, has_planner: bool) -> tuple[str, ...]:
    """``"retry"`` or ``["retry", "replan"]`` → a chain tried in order; default replan/abort."""
    if on_failure is None:
        return ("replan",) if has_planner else ("abort",)
    chain = (on_failure,) if isinstance(on_failure, str) else tuple(on_failure)
    policies = [policy_named(name) for name in chain]
    if not chain:
        raise ValueError(f"on_failure is empty; choose from {', '.join(REGISTRY)}")
    if any(p.needs_planner for p in policies) and not has_planner:
        raise ValueError("on_failure='replan' needs a planner: pass planner=... (or choose abort, skip or retry)")
    for position, policy in enumerate(policies[:-1]):
        if not policy.can_decline:
            raise ValueError(
                f"on_failure {list(chain)}: {policy.name!r} ends the handling of a failure, so "
                f"{list(chain[position + 1:])} after it would never run; only 'retry' can be followed by another policy"
            )
    return chain


def chain_for(step: Step, default: tuple[str, ...]) -> tuple[str, ...]:
    """The chain that handles ``step``'s failure: its own ``on_failure`` or the run's.

    A step's ``retry`` keeps the run's fallback after its retries are used.
    """
    if step.on_failure is None:
        return default
    if REGISTRY[step.on_failure].can_decline:
        return (step.on_failure, *(p for p in default if p != step.on_failure))
    return (step.on_failure,)


def verdict_for(step: Step, chain: tuple[str, ...], run: FailureFacts) -> Verdict:
    """What ``chain`` decides about a failed ``step``: the first policy that does not decline
    (when every one declines: abort)."""
    for name in chain:
        verdict = REGISTRY[name].decide(step, run)
        if verdict is not None:
            return verdict
    return "abort"
