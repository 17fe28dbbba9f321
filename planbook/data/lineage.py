"""Where a forked run comes from: its parent, the fork points, the edit and what was kept.

A fork is a new run whose history starts from its parent's (see :func:`planbook.fork`):
the steps an edit cannot reach are *kept* — their results read from the parent, never run
again — and the edited steps and everything that depends on them run again. This module
holds the data of that (the :class:`Lineage` a run carries, the notes a kept or pinned
step gets; its typed mark is :mod:`.stepmark`'s) and the pure rules of what an edit reaches; the engine applies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from .models import Plan, Status, Step
from .stepmark import REUSED, StepMark
from .wording import plural

# The notes below are prose for people (``step.notes``); what a step *is* — cached, kept, pinned —
# is its typed mark (:class:`~planbook.data.stepmark.StepMark`), which the views and the store read.
#: how the note of a step answered from the cross-run step cache begins
CACHED_NOTE = "cached: "
#: how the note of a step kept from the parent begins
KEPT_FROM_NOTE = "kept from run "
#: how the note of a step whose result the fork pinned begins
PINNED_NOTE = "pinned: "

Reuse = Literal["independent", "identical", "ancestors"]
#: what each choice of ``reuse=`` keeps, for errors and help
REUSE_CHOICES: dict[str, str] = {
    "independent": "every completed step the change does not reach",
    "identical": "also a dependent whose resolved call is unchanged (same tool, same arguments)",
    "ancestors": "only the needs of the fork point (LangGraph's fork: everything after it runs again)",
}
ForkHow = Literal["args", "result", "plan", "planner", "control"]


class Lineage(BaseModel):
    """A forked run's origin, stored with it (the store keeps it with the run's counters).

    ``edit`` holds, per fork point, what changed, as shown text (secrets as ``***``, a
    :class:`~planbook.Secret` as its reference): ``{"tone": ["'casual'", "'formal'"]}`` for
    arguments, ``{"result": "[...]"}`` for a pinned result, ``{"plan": "added" | "changed"}``."""

    parent: str
    at: list[str] = Field(default_factory=list)
    how: ForkHow = "control"
    edit: dict[str, dict[str, Any]] = Field(default_factory=dict)
    reuse: Reuse = "independent"
    kept: int = 0
    rerun: int = 0
    pinned: int = 0
    removed: list[str] = Field(default_factory=list)
    planner: str | None = None

    def headline(self) -> str:
        """One line for a header: ``fork of run R at draft — tone: 'casual' → 'formal'; kept 14, re-running 3``."""
        where = ", ".join(self.at) if self.at else "(no step)"
        line = f"fork of run {self.parent} at {where}"
        told = self.edit_text()
        if told:
            line += f" — {told}"
        elif self.how == "control":
            line += " — no change (a control fork: any difference is replay noise)"
        counts = [f"kept {self.kept}", f"re-running {self.rerun}"]
        if self.pinned:
            counts.append(f"pinned {self.pinned}")
        if self.removed:
            counts.append(f"removed {plural(len(self.removed), 'step')}")
        line += "; " + ", ".join(counts)
        if self.reuse != "independent":
            line += f" (reuse={self.reuse})"
        return line

    def edit_text(self) -> str:
        parts = []
        for step_id, change in self.edit.items():
            for name, value in change.items():
                if name == "result":
                    parts.append(f"{step_id} pinned to {value}")
                elif name == "plan":
                    parts.append(f"{step_id} {value}")
                elif name == "planner":
                    parts.append(f"re-planned from {step_id} by {value}")
                elif isinstance(value, (list, tuple)) and len(value) == 2:
                    parts.append(f"{name}: {value[0]} → {value[1]}")
        return "; ".join(parts)


def lineage_of(data: Any) -> Lineage | None:
    """A stored lineage (a dict read back from a store) as a :class:`Lineage`; None for a run that is no fork."""
    if data is None or isinstance(data, Lineage):
        return data
    if isinstance(data, Mapping):
        return Lineage.model_validate(dict(data))
    return None


def dependents(plan: Plan, roots: Iterable[str]) -> set[str]:
    """``roots`` and every step that needs one of them, directly or through others."""
    needed_by: dict[str, list[str]] = {}
    for st in plan.steps:
        for need in st.needs:
            needed_by.setdefault(need, []).append(st.id)
    reached = set(roots)
    todo = list(reached)
    while todo:
        for later in needed_by.get(todo.pop(), ()):
            if later not in reached:
                reached.add(later)
                todo.append(later)
    return reached


def ancestors(plan: Plan, roots: Iterable[str]) -> set[str]:
    """Every step ``roots`` need, directly or through others (the roots themselves not included)."""
    by_id = {st.id: st for st in plan.steps}
    found: set[str] = set()
    todo = [need for root in roots if root in by_id for need in by_id[root].needs]
    while todo:
        step_id = todo.pop()
        if step_id in found or step_id not in by_id:
            continue
        found.add(step_id)
        todo.extend(by_id[step_id].needs)
    return found


def kept_steps(plan: Plan, changed: Iterable[str], reuse: Reuse) -> set[str]:
    """The completed steps of ``plan`` a fork keeps when ``changed`` steps change.

    ``independent`` and ``identical``: every completed step no changed step reaches
    (``identical`` keeps more at run time: see the engine's fork); ``ancestors``: only the
    completed needs of the changed steps, as a fork that re-runs everything after its point."""
    changed = set(changed)
    completed = {st.id for st in plan.steps if st.status is Status.completed}
    if reuse == "ancestors":
        return (ancestors(plan, changed) - changed) & completed
    return completed - dependents(plan, changed)


def kept_note(parent: str, step: Step) -> str:
    return f"{KEPT_FROM_NOTE}{parent}: its result was not made again"


def is_reused(step: Step) -> bool:
    """Whether ``step``'s result came from elsewhere (cache, parent run, a pin): views mark it."""
    return step.status is Status.completed and step.mark in REUSED


def is_kept(step: Step) -> bool:
    """Whether ``step`` holds its parent run's result, kept by a fork (the store writes it as a reference)."""
    return step.status is Status.completed and step.mark == StepMark.kept


__all__ = ["CACHED_NOTE", "KEPT_FROM_NOTE", "PINNED_NOTE", "REUSE_CHOICES", "Lineage", "Reuse", "ancestors",
           "dependents", "is_kept", "is_reused", "kept_note", "kept_steps", "lineage_of"]
