"""Reading an SQLite run store: a run (its row, its steps, its log replayed), the list of
runs (a running run's totals from its last log row), the latest run. A damaged row is one
:class:`~planbook.data.errors.StoreFormatError` naming the run and the row; a store of an
older schema version is read as it is.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from typing import Any

from ..data.errors import RunNotFound, StoreFormatError
from ..data.models import Step
from .base import STEP_COUNTS, RunSummary, StoredRun, counts_from, listed_settings, not_found
from .logrows import (
    LAST_LOG_ROW,
    RUN_FIRST,
    RUN_LAST,
    SUMMARY_JSON,
    Damage,
    Reading,
    Replay,
    json_check,
    number,
    parsed,
    run_range,
    shown,
    step_of,
    summary_of,
    value_of,
    whole,
)
from .rows import diffs_from_records, event_from_record, plan_from_record, redacted_paths, step_from_record
from .schema import V1_COLUMNS
from .sqlconn import SQLiteConnection
from .values import UNRESTORABLE_ARGS, KeptResult, decode, place_markers

__all__ = ["SQLiteReads", "read_legacy_lists", "stored_value"]


def stored_value(kind: str, payload: Any, meta: str | None) -> Any:
    """A value (args, a result) from its three columns: kind, payload, meta."""
    info = json.loads(meta) if meta else {}
    return decode(kind, payload, info.get("shown"), info.get("type", ""), info.get("reason"))


class SQLiteReads(SQLiteConnection):
    """The reading half of :class:`~planbook.store.sqlite.SQLiteStore`."""

    # ------------------------------------------------------------ reading
    def load_run(self, run_id: str, *, plan_only: bool = False, _forks: tuple[str, ...] = ()) -> StoredRun:
        """The run; a row of it that is damaged is one :class:`StoreFormatError` naming the run,
        the row and the damage (:class:`~planbook.store.logrows.Reading`): the other runs read as ever.
        A fork's kept results are read from its parent's rows (and a fork of a fork's from theirs).
        ``plan_only``: its plan, revisions, config and counters, without its history and events
        (what a fork needs of its parent: about half the reading of a long run)."""

        def read(con: sqlite3.Connection) -> StoredRun:
            row = con.execute(
                f"SELECT goal, config, plan, counters, revisions, created, updated, {self._column('log_seq')},"
                f" {self._column('log_key')} FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise not_found(run_id, self.location, self._latest_ids(con))
            goal, config, plan, counters, revisions, created, updated, log_seq, log_key = row
            with Reading(run_id, self.location) as reading:
                reading.part = "its log position (runs.log_seq)"
                replay = Replay(int(number(log_seq)), plan_only=plan_only)
                if self.version >= 3:
                    reading.part = "its log key (runs.log_key)"
                    first, last_id = run_range(whole(log_key))
                    for i, at, executions, record in con.execute(
                            "SELECT id, time, executions, record FROM log WHERE id BETWEEN ? AND ? ORDER BY id",
                            (first, last_id)):
                        reading.part = ("its log row {} (log id {})", i - first, i)
                        replay.add(i - first, at, executions, record)
                else:
                    read_legacy_lists(con, run_id, replay, reading)
                steps = []
                if replay.created is not None:  # no save since the run was created: its steps are in its first row
                    reading.part = "its first log row (the steps it was created with)"
                    for entry in replay.created:
                        changed = replay.changed.get(entry["r"]["id"])
                        steps.append(step_of(*changed) if changed is not None else
                                     step_of(entry, value_of(entry["v"]), replay.patched.get(entry["r"]["id"])))
                for step_id, record, ak, a, am, rk, r, rm, ref in () if replay.created is not None else con.execute(
                    "SELECT step_id, record, args_kind, args, args_meta, result_kind, result, result_meta, result_ref"
                    " FROM steps WHERE run_id = ? ORDER BY position", (run_id,)
                ):
                    reading.part = ("its step {!r} (table steps)", step_id)
                    changed = replay.changed.get(step_id)
                    if changed is not None:
                        steps.append(step_of(*changed))
                        continue
                    result = replay.results[ref] if rk == "ref" else stored_value(rk, r, rm)
                    steps.append(step_from_row(record, ak, a, am, result, replay.patched.get(step_id)))
                reading.part = "its goal (runs.goal)"
                if not isinstance(goal, str):
                    raise Damage(f"is {shown(goal)}, not a text")
                reading.part = "its config (runs.config)"
                config = parsed(config, dict)
                reading.part = "its plan (runs.plan)"
                plan = plan_from_record(parsed(plan, dict), steps)
                reading.part = "its counters (runs.counters)"
                counters = replay.counters_over(parsed(counters, dict))
                reading.part = "its revisions (runs.revisions)"
                revisions = diffs_from_records(parsed(revisions, list))
                reading.part = "its creation time (runs.created)"
                created = number(created)
                reading.part = "its update time (runs.updated)"
                updated = max(number(updated), replay.last_time or 0.0)
            return StoredRun(run_id=run_id, goal=goal, config=config, plan=plan, counters=counters,
                             history=replay.history, revisions=revisions, events=replay.events,
                             created=created, updated=updated)

        with self._lock:
            stored = self._read(read)
            self._caches.pop(run_id, None)  # the next write reads the counts again
        kept = [st for st in stored.plan.steps if isinstance(st.result, KeptResult)]
        if kept:
            self._read_kept(stored, kept, (*_forks, run_id))
        return stored

    def _read_kept(self, stored: StoredRun, kept: list[Any], forks: tuple[str, ...]) -> None:
        """Put each kept step's result in place, read from the run it was kept from (read once)."""
        parents: dict[str, StoredRun] = {}
        for step in kept:
            parent_id = step.result.parent
            if parent_id in forks:
                raise StoreFormatError(f"run {stored.run_id} in the run store {self.location} keeps step "
                                       f"{step.id!r} from run {parent_id}, which keeps it from this run (it is damaged)")
            parent = parents.get(parent_id)
            if parent is None:
                try:
                    parent = parents[parent_id] = self.load_run(parent_id, plan_only=True, _forks=forks)
                except RunNotFound:
                    raise StoreFormatError(
                        f"run {stored.run_id} in the run store {self.location} is a fork of run {parent_id}, whose "
                        f"results it keeps (step {step.id!r}), and that run is not in the store: it was deleted "
                        "outside planbook; the fork cannot be read") from None
            source = next((st for st in parent.plan.steps if st.id == step.id), None)
            if source is None:
                raise StoreFormatError(f"run {stored.run_id} in the run store {self.location} keeps step {step.id!r} "
                                       f"from run {parent_id}, which has no such step (it is damaged)")
            step.set_state(result=source.result)

    def list_runs(self, *, limit: int | None = None) -> list[RunSummary]:
        if self.version >= 3:
            # a running run's totals are in its last log row, when that row is newer than its last save
            query = (
                "SELECT r.id, r.goal, r.status, r.reason, r.created,"
                f" CASE WHEN {_NEWER} THEN max(r.updated, l.time) ELSE r.updated END,"
                f" CASE WHEN {_NEWER} THEN l.executions ELSE r.executions END,"
                f" CASE WHEN {_NEWER} THEN max(r.model_calls, l.model_calls) ELSE r.model_calls END,"
                " r.writer_pid, r.plan_id, r.writer_host, r.writer_since,"
                f" CASE WHEN {_NEWER} THEN l.done ELSE"
                " (SELECT count(*) FROM steps s WHERE s.run_id = r.id AND s.status = 'completed') END,"
                f" coalesce({self._column('steps_total')}, (SELECT count(*) FROM steps s WHERE s.run_id = r.id)),"
                f" {_JSON_CHECKS}, CASE WHEN l.id IS NOT NULL THEN {json_check(*LAST_LOG_ROW[1:])} END, {_PARENT},"
                f" {_LISTED} FROM runs r LEFT JOIN log l ON l.id = (SELECT max(id) FROM log WHERE id BETWEEN {RUN_FIRST}"
                f" AND {RUN_LAST})"
                " ORDER BY r.created DESC, r.rowid DESC"
            )
        else:
            query = (
                f"SELECT id, goal, status, reason, created, updated, executions, model_calls, writer_pid,"
                f" {self._column('plan_id')}, {self._column('writer_host')}, {self._column('writer_since')},"
                " (SELECT count(*) FROM steps s WHERE s.run_id = r.id AND s.status = 'completed'),"
                f" (SELECT count(*) FROM steps s WHERE s.run_id = r.id), {_JSON_CHECKS}, {_PARENT}, {_LISTED}"
                " FROM runs r ORDER BY created DESC, rowid DESC"
            )
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        rows = self._read(lambda con: con.execute(query).fetchall())
        # a damaged row is listed as damaged (its values checked): it must not cost the listing
        return [_with_extras(summary_of(row[:14], row[14:-3]), *row[-3:]) for row in rows]

    def _column(self, name: str) -> str:
        """A column a later version added, or how an older store (read as it is) spells it."""
        if name in ("log_seq", "log_key"):
            return name if self.version >= 3 else "-1"
        if name == "steps_total":
            return "r.steps_total" if self.version >= 5 else "NULL"
        if self.version < 2 and name == "plan_id":  # out of the plan's JSON: a damaged plan must not end the query
            return f"CASE WHEN json_valid(plan) THEN {V1_COLUMNS[name]} END"
        return name if self.version >= 2 else V1_COLUMNS[name]

    def latest_run_id(self, *, plan_id: str | None = None) -> str | None:
        """The run created last (of the plan ``plan_id``, when given): one indexed query."""
        if plan_id is None:
            ids = self._read(lambda con: self._latest_ids(con, 1))
            return ids[0] if ids else None
        row = self._read(lambda con: con.execute(
            f"SELECT id FROM runs WHERE {self._column('plan_id')} = ? ORDER BY created DESC, rowid DESC LIMIT 1",
            (plan_id,)).fetchone())
        return row[0] if row else None


#: the log row ``l`` is newer than the last save of its run ``r``
_NEWER = f"l.id > {RUN_FIRST} + r.log_seq"
#: SQL: what is not as planbook writes it in the JSON of a run's row ``r`` (NULLs when nothing)
_JSON_CHECKS = ", ".join(json_check(column, kind) for _, column, kind in SUMMARY_JSON)


def step_from_row(record: str, args_kind: str, args: Any, args_meta: str | None, result: Any,
          patch: dict[str, Any] | None = None) -> Step:
    """A step from its row; ``patch``: the fields a later log row changed (a PATCH)."""
    fields = json.loads(record)
    if patch:
        fields.update(patch)
    loaded = stored_value(args_kind, args, args_meta)
    if not isinstance(loaded, dict):  # pickled args that no longer load: the step cannot run as it was
        loaded = {UNRESTORABLE_ARGS: loaded}
    return step_from_record(fields, place_markers(loaded, redacted_paths(fields)), result)


def read_legacy_lists(con: sqlite3.Connection, run_id: str, replay: Replay, reading: Reading) -> None:
    """The history entries and events of a run in a version-1 or -2 store (read as it is);
    ``reading`` names the row being read, for a damaged one."""
    for seq, record, ak, a, am, rk, r, rm in con.execute(
        "SELECT seq, record, args_kind, args, args_meta, result_kind, result, result_meta FROM history"
        " WHERE run_id = ? ORDER BY seq", (run_id,)
    ):
        reading.part = ("its history entry {} (table history)", seq)
        result = stored_value(rk, r, rm)
        replay.results.append(result)
        replay.history.append(step_from_row(record, ak, a, am, result))
    for seq, rec in con.execute("SELECT seq, record FROM events WHERE run_id = ? ORDER BY seq", (run_id,)):
        reading.part = ("its event {} (table events)", seq)
        replay.events.append(event_from_record(parsed(rec, dict)))


#: SQL: the run a run was forked from (kept in its counters' lineage), NULL for a run that is no fork
_PARENT = "CASE WHEN json_valid(r.counters) THEN json_extract(r.counters, '$.lineage.parent') END"


#: SQL: what a run's line adds to its columns: its config (a few settings: read whole, parsed here)
#: and its steps' counts by status, kept with its counters when it last changed status or was saved
_LISTED = f"r.config, CASE WHEN json_valid(r.counters) THEN json_extract(r.counters, '$.{STEP_COUNTS}') END"


def _with_extras(summary: RunSummary, parent: Any, config: Any, counts: Any) -> RunSummary:
    """``summary`` with its parent, settings and step counts; a value that is not what planbook
    writes is left out (the damage, if any, is named by the row's checks)."""
    settings = listed_settings(_json(config))
    step_counts = counts_from(_json(counts))
    if not isinstance(parent, str) and not settings and step_counts is None:
        return summary
    return replace(summary, parent=parent if isinstance(parent, str) else None, settings=settings,
                   step_counts=step_counts)


def _json(text: Any) -> Any:
    """JSON text as data; None for anything else (a damaged column)."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
