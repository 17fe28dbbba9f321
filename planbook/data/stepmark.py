"""A step's mark, as a type: why its state is not simply what its own call made of it here.

A completed step may hold a result no call of this run made (the step cache answered, a fork
kept its parent's result or was given one); a step not started may wait for a person, or have
had its call cut by an interrupt. The runner says so with :attr:`Step.mark
<planbook.data.models.Step.mark>` (and, for a reused result, where it came from: ``from_run``,
``from_step``); the views choose the words (:mod:`planbook.views.marks`) and the store keeps the
mark with the step. A step's ``notes`` are prose for people: nothing reads a state back from them.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class StepMark(str, Enum):
    """What kind of state a step is in beyond its status (None on :attr:`Step.mark` when nothing)."""

    #: completed: the step cache answered with the result of step ``from_step`` in run ``from_run``
    cached = "cached"
    #: completed: a fork kept the result of its parent run ``from_run`` (its step ``from_step``)
    kept = "kept"
    #: completed: a fork gave this step its result; the step did not run
    pinned = "pinned"
    #: not started: it waits for a person's decision (approve, edit, skip)
    waiting = "waiting"
    #: not started: an interrupt cut its call; it runs again when the run continues
    interrupted = "interrupted"
    #: not started: interrupted while its call still ran in a worker thread; the run, continued,
    #: waits for that call and keeps its result
    still_running = "still_running"

    def __str__(self) -> str:  # f-strings print "cached", not "StepMark.cached"
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> "StepMark":
        raise ValueError(f"{value!r} is not a step mark (a newer planbook may have written it); "
                         f"this planbook knows {', '.join(m.value for m in cls)}")


#: marks of a completed step whose result was not made by a call of this run
REUSED = frozenset({StepMark.cached, StepMark.kept, StepMark.pinned})
#: marks of a step whose call an interrupt cut (it runs, or is collected, when the run continues)
CUT = frozenset({StepMark.interrupted, StepMark.still_running})
#: a step's fields that say its mark
MARK_FIELDS = ("mark", "from_run", "from_step")
_CLEARED: dict[str, Any] = dict.fromkeys(MARK_FIELDS)
_CLEARED_CUT: dict[str, Any] = {**_CLEARED, "notes": ""}


def unmarked(mark: StepMark | None) -> dict[str, Any]:
    """The fields to set on a step marked ``mark`` that starts a call now (for ``set_state``):
    its mark goes, and so does the note of an interrupt (it is running again). ``{}`` for none."""
    if mark is None:
        return {}
    return _CLEARED_CUT if mark in CUT else _CLEARED


__all__ = ["CUT", "MARK_FIELDS", "REUSED", "StepMark", "unmarked"]
