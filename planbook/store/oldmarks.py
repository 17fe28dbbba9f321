"""Reading the marks of steps a planbook stored before marks were typed (migration on read).

Before :class:`~planbook.data.stepmark.StepMark`, a step's mark lived in the words its note
began with (``cached: …``, ``kept from run …``, ``pinned: …``) or was (``interrupted; …``,
``waiting for approval``). A stored step record without a ``mark`` key was written then (or by
such a planbook, into a newer file): its mark is read from its note here, by exactly the
rules that planbook read it by, and nowhere else. The texts are frozen copies of what it
wrote: the runner's notes may change their words, a stored run's do not.

A record written since has its ``mark`` whenever it has one; a step with no mark whose note
would read as one (a person's note ``pinned: by hand``) is written with ``"mark": null``
(:func:`needs_explicit_none`), so it is never mistaken for an old one.
"""

from __future__ import annotations

from typing import Any

from ..data.stepmark import StepMark

#: how old notes of a completed step began, and the mark each meant
_REUSED_PREFIXES = (("cached: ", StepMark.cached), ("kept from run ", StepMark.kept), ("pinned: ", StepMark.pinned))
#: whole old notes of a step not started, and the mark each meant
_WHOLE_NOTES = {
    "interrupted; it runs again when the run continues": StepMark.interrupted,
    "interrupted while its call was still running in a worker thread; when the run continues it waits for that "
    "call and keeps its result (the step runs again only if the call did not complete)": StepMark.still_running,
    "waiting for approval": StepMark.waiting,
}
#: how an old cache note went on: ``cached: the result of step ID in run RUN``
_CACHED_FROM, _IN_RUN = "cached: the result of step ", " in run "


def old_mark(record: dict[str, Any]) -> dict[str, Any]:
    """The mark fields (``mark``, ``from_run``, ``from_step``) an old record's note tells; ``{}`` for none."""
    notes = record.get("notes")
    if not notes or not isinstance(notes, str):
        return {}
    status = record.get("status", "not_started")
    if status == "not_started":
        mark = _WHOLE_NOTES.get(notes)
        return {} if mark is None else {"mark": mark}
    if status != "completed":
        return {}
    for prefix, mark in _REUSED_PREFIXES:
        if notes.startswith(prefix):
            break
    else:
        return {}
    if mark is StepMark.kept:  # "kept from run PARENT: its result was not made again"
        parent = notes[len(prefix):].split(":", 1)[0].strip()
        return {"mark": mark, "from_run": parent or None, "from_step": record.get("id")}
    if mark is StepMark.cached and notes.startswith(_CACHED_FROM):
        step, found, run = notes[len(_CACHED_FROM):].rpartition(_IN_RUN)
        if found and step and run and " " not in run:
            return {"mark": mark, "from_run": run, "from_step": step}
    return {"mark": mark}


def needs_explicit_none(record: dict[str, Any]) -> bool:
    """Whether a record with no mark (``"mark"`` left out as its default) would be read as an old
    one that has one: then it is written with ``"mark": null``."""
    return "notes" in record and bool(old_mark(record))


__all__ = ["needs_explicit_none", "old_mark"]
