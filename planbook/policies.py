"""Failure policies: what a failed step does next.

``abort`` ends the run, ``skip`` marks the step skipped and goes on (its dependents
become blocked), ``retry`` runs it again (``retries`` times), ``replan`` asks the
planner for a new plan from the failed step on. A chain such as ``["retry", "replan"]``
tries them in order; only ``retry`` can hand over to the next one.
"""

from __future__ import annotations

from collections.abc import Sequence

from .models import PolicyName

POLICIES: tuple[PolicyName, ...] = ("abort", "skip", "retry", "replan")


def normalise_policy(on_failure: str | Sequence[str] | None, *, has_planner: bool) -> tuple[PolicyName, ...]:
    """``"retry"`` or ``["retry", "replan"]`` → a chain tried in order; default replan/abort."""
    if on_failure is None:
        return ("replan",) if has_planner else ("abort",)
    chain = (on_failure,) if isinstance(on_failure, str) else tuple(on_failure)
    for policy in chain:
        if policy not in POLICIES:
            raise ValueError(f"unknown failure policy {policy!r}; choose from {', '.join(POLICIES)}")
    if "replan" in chain and not has_planner:
        raise ValueError("on_failure='replan' needs a planner: pass planner=... (or choose abort, skip or retry)")
    if not chain:
        raise ValueError(f"on_failure is empty; choose from {', '.join(POLICIES)}")
    for position, policy in enumerate(chain[:-1]):
        if policy != "retry":
            raise ValueError(
                f"on_failure {list(chain)}: {policy!r} ends the handling of a failure, so "
                f"{list(chain[position + 1:])} after it would never run; only 'retry' can be followed by another policy"
            )
    return chain  # type: ignore[return-value]
