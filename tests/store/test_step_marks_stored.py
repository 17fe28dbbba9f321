"""A step's mark is kept by the store, and an old store's steps (whose marks were words in their
notes) read back with the mark those words meant."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, Step
from planbook.data.models import Status
from planbook.data.stepmark import StepMark
from planbook.engine.state import INTERRUPTED_NOTE, STILL_RUNNING_NOTE
from planbook.engine.steering import WAITING_NOTE
from planbook.store import open_store
from planbook.store.memory import MemoryStore
from planbook.store.oldmarks import old_mark

#: each mark as the runner sets it, with the note it writes beside it (what an old store kept alone)
MARKED = [
    ("c", Status.completed, "cached: the result of step c0 in run R-1", StepMark.cached, "R-1", "c0"),
    ("k", Status.completed, "kept from run P-2: its result was not made again", StepMark.kept, "P-2", "k"),
    ("p", Status.completed, "pinned: the fork gave this result", StepMark.pinned, None, None),
    ("i", Status.not_started, INTERRUPTED_NOTE, StepMark.interrupted, None, None),
    ("r", Status.not_started, STILL_RUNNING_NOTE, StepMark.still_running, None, None),
    ("w", Status.not_started, WAITING_NOTE, StepMark.waiting, None, None),
]


@planbook.tool(cache=True)
def double(x: int) -> int:
    return 2 * x


def marked_plan() -> Plan:
    steps = []
    for sid, status, notes, mark, run, step in MARKED:
        st = Step(id=sid, tool="t", args={"n": 1})
        st.set_state(status=status, notes=notes, mark=mark, from_run=run, from_step=step,
                     result=1 if status is Status.completed else None)
        steps.append(st)
    # a person's note that reads like an old mark, on a step that has none
    hand = Step(id="h", tool="t", args={"n": 2})
    hand.set_state(status=Status.completed, result=2, notes="pinned: by hand, not by a fork")
    return Plan(id="marks", steps=[*steps, hand])


def marks_of(plan: Plan) -> dict[str, tuple[Any, ...]]:
    return {st.id: (st.mark, st.from_run, st.from_step) for st in plan.steps}


EXPECTED = {sid: (mark, run, step) for sid, _, _, mark, run, step in MARKED} | {"h": (None, None, None)}


def _strip_marks(value: Any) -> Any:
    """A step record as a planbook wrote it before marks were typed: no mark fields."""
    if isinstance(value, dict):
        if "id" in value and ("mark" in value or "from_run" in value):
            return {k: _strip_marks(v) for k, v in value.items() if k not in ("mark", "from_run", "from_step")}
        return {k: _strip_marks(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_marks(v) for v in value]
    return value


def make_old(path: Path) -> int:
    """Rewrite every step record in the file without its mark fields; how many were rewritten."""
    con = sqlite3.connect(path)
    changed = 0
    with con:
        for table in ("steps", "log"):
            cols = [c[1] for c in con.execute(f"PRAGMA table_info({table})")]
            for col in cols:
                rows = con.execute(f"SELECT rowid, {col} FROM {table} WHERE typeof({col}) = 'text'").fetchall()
                for rowid, text in rows:
                    if '"mark"' not in text:
                        continue
                    old = json.dumps(_strip_marks(json.loads(text)), separators=(",", ":"))
                    con.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (old, rowid))
                    changed += 1
    con.close()
    return changed


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_step_s_mark_and_its_origin_are_stored(tmp_path: Path, kind: str) -> None:
    store = open_store(tmp_path / "runs.sqlite") if kind == "sqlite" else MemoryStore()
    run_id = store.create_run(marked_plan(), goal="", config={})
    assert marks_of(store.load_run(run_id).plan) == EXPECTED


def test_an_old_store_s_noted_steps_read_back_with_the_marks_their_notes_meant(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = open_store(path)
    run_id = store.create_run(marked_plan(), goal="", config={})
    store.close()
    assert make_old(path) >= 1  # the rows now hold what an older planbook wrote: notes, no marks
    assert '"mark":"cached"' not in path.read_bytes().decode("utf-8", "replace")
    loaded = open_store(path).load_run(run_id).plan
    # the person's note kept its explicit "no mark" only while it was written as such: stripped
    # of it too (as an old planbook wrote it), it reads as that planbook read it: pinned
    assert marks_of(loaded) == EXPECTED | {"h": (StepMark.pinned, None, None)}
    assert [st.notes for st in loaded.steps[:len(MARKED)]] == [m[2] for m in MARKED]


def test_a_note_that_reads_like_an_old_mark_is_no_mark_in_a_new_store(tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs.sqlite")
    run_id = store.create_run(marked_plan(), goal="", config={})
    assert store.load_run(run_id).plan.step("h").mark is None


def test_a_cached_run_read_back_from_an_old_store_is_marked_cached_with_its_origin(tmp_path: Path) -> None:
    plan = Plan(steps=[Step(id="s", tool="double", args={"x": 2}), Step(id="t", tool="double", args={"x": "$s"})])
    path = tmp_path / "runs.sqlite"
    first = planbook.run(plan, tools=[double], store=str(path), cache=True)
    second = planbook.run(plan, tools=[double], store=str(path), cache=True)
    assert second.executions == 0
    assert marks_of(second.plan) == {"s": (StepMark.cached, first.run_id, "s"), "t": (StepMark.cached, first.run_id, "t")}
    make_old(path)
    again = open_store(path).load_run(second.run_id).plan
    assert marks_of(again) == marks_of(second.plan)


@pytest.mark.parametrize(("record", "expected"), [
    ({"id": "a", "status": "completed", "notes": "cached: a stored result"}, {"mark": StepMark.cached}),
    ({"id": "a", "status": "completed", "notes": "kept from run : x"}, {"mark": StepMark.kept, "from_run": None,
                                                                        "from_step": "a"}),
    ({"id": "a", "status": "failed", "notes": "cached: the result of step a in run R"}, {}),
    ({"id": "a", "notes": "waiting for approval, and more"}, {}),  # an old planbook compared the whole note
    ({"id": "a", "status": "completed", "notes": "cached: the result of step x in run y in run R2"},
     {"mark": StepMark.cached, "from_run": "R2", "from_step": "x in run y"}),
    ({"id": "a", "status": "completed"}, {}),
])
def test_old_notes_are_read_by_the_rules_an_old_planbook_read_them_by(record: dict[str, Any],
                                                                      expected: dict[str, Any]) -> None:
    assert old_mark(record) == expected

