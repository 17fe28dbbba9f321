"""Writing runs to an SQLite store: a run created, a step recorded (one log row, most often
a transaction of one statement), a save (the steps table and the run's row brought up to
date), events appended, a run claimed or deleted.

Every write of a run goes through :meth:`SQLiteWrites._run_write`: one transaction, retried
while another process holds the file; what the run's :class:`~planbook.store.runcache.RunCache`
learns is kept only once it commits. Every text is checked for secrets before it is
written (all of a write's texts together; when redaction would change one, the write is
made again, each text redacted).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..data.errors import RunClaimed, StoreError, this_host
from ..data.ids import new_run_id
from ..data.lineage import is_kept
from ..data.models import Event, Plan, Status, Step
from ..data.stepmark import StepMark
from ..outbound.redact import DeferredChecks, dump_json
from .base import STEP_COUNTS, RunStateLike, counters_key, counters_of, not_found, step_counts
from .claims import is_me, refuse_claim
from .logrows import (
    INSERT_LOG,
    RUN_FIRST,
    RUN_LAST,
    document,
    entry_json,
    log_id,
    meta_json,
    run_range,
    statuses_after,
    value_json,
)
from .rows import (
    config_json,
    counters_json,
    diffs_json,
    events_json,
    plan_json,
    record_texts,
    record_values,
    step_record,
)
from .runcache import IMMUTABLE, STARTED, UNSTARTED, RunCache, comparable, row_signature
from .sqlconn import SQLiteConnection
from .values import Encoded, encode, encode_args, is_plain_json, plain_json_text

__all__ = ["SQLiteWrites"]


class SQLiteWrites(SQLiteConnection):
    """The writing half of :class:`~planbook.store.sqlite.SQLiteStore`."""

    # --------------------------------------------------------------- runs
    def create_run(self, plan: Plan, *, goal: str | None = None, config: Mapping[str, Any] | None = None,
                   run_id: str | None = None, lineage: Mapping[str, Any] | None = None) -> str:
        """A new run's row and its plan. ``lineage``: a fork's origin (kept with the run's counters
        from the start); its kept steps' results are written as references to the parent's rows
        (``{"kept": PARENT}``), never copied."""
        self.redactor.refresh()
        config_text = config_json(config, self.redactor)
        run_id = run_id or new_run_id()
        now = time.time()

        def write(con: sqlite3.Connection) -> RunCache:
            try:
                con.execute(
                    "INSERT INTO runs (id, goal, status, reason, created, updated, config, plan, counters, revisions,"
                    " writer_pid, plan_id, writer_host, writer_since, steps_total, log_key)"
                    " VALUES (?, ?, 'running', NULL, ?, ?, ?, ?, ?, '[]', ?, ?, ?, ?, ?,"
                    " (SELECT coalesce(max(log_key), 0) + 1 FROM runs))",
                    (run_id, self.redactor.text(goal if goal is not None else plan.goal), now, now, config_text,
                     plan_json(plan, self.redactor), counters_json({"lineage": dict(lineage)} if lineage else {},
                                                                   self.redactor), os.getpid(), self.redactor.text(plan.id), this_host(), now,
                     len(plan.steps)),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"a run {run_id!r} is already in the run store {self.location}: "
                                 "choose another run id, or leave it out") from None
            log_key = con.execute("SELECT log_key FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
            cache = RunCache(self.redactor, log_key, 0, 0, 0, 0, {st.id: st.status.value for st in plan.steps},
                              ("running", None))
            cache.parent = str(lineage["parent"]) if lineage else None
            created = self._created_row(cache, plan)
            if created is not None:
                self._insert_log(con, cache, run_id, (log_id(log_key, 0), now, 0, 0, 0, 0, 0, created))
                cache.next_table_empty = True
            else:
                cache.begin(True)
                checks = DeferredChecks(self.redactor)  # the records checked for secrets together
                rows = [self._step_row(cache, run_id, st, pos, checks=checks) for pos, st in enumerate(plan.steps)]
                if not checks.clean():
                    cache.begin(False)
                    rows = [self._step_row(cache, run_id, st, pos) for pos, st in enumerate(plan.steps)]
                con.executemany(_INSERT_STEP, rows)
            cache.commit()
            cache.masked_with = self.redactor.patterns
            return cache

        self._caches[run_id] = self._write(write)
        return run_id

    def _created_row(self, cache: RunCache, plan: Plan) -> str | None:
        """A fresh plan's steps as its run's first log row, ``{"b": [ENTRY, ...]}``: one text,
        encoded and checked for secrets at once, in place of a row per step in the steps table
        (which cost a run of small steps more than a tenth of its writes). None unless every
        step is fresh (not started, no result, args that are plain JSON) and nothing in the text
        is for redaction to change: the caller then writes the steps table, step by step."""
        entries = []
        none = {"json": None}
        kept = {"kept": cache.parent}
        for pos, st in enumerate(plan.steps):
            args = st.args
            text = plain_json_text(args) if type(args) is dict else None
            if text is None:
                return None
            if st.status is not Status.not_started or st.result is not None:
                # a fork's plan: a kept step is a reference to the parent's row, a pinned plain result is itself
                if cache.parent is not None and is_kept(st):
                    value: dict[str, Any] = kept
                elif st.status is Status.completed and plain_json_text(st.result) is not None:
                    value = {"json": st.result}
                else:
                    return None
            else:
                value = none
            values = record_values(st.__dict__)
            entries.append({"r": step_record(st, values), "a": {"json": args}, "v": value})
            cache.row_written(st.id, pos, row_signature(st, Encoded("json", text), self.redactor, values), args)
        try:
            doc = dump_json({"b": entries})
        except (TypeError, ValueError, RecursionError):  # a field holding an object: written step by step
            return None
        return doc if self.redactor.unchanged(doc) else None

    def save_state(self, run_id: str, state: RunStateLike) -> None:
        """Everything: the steps table and the run's row brought up to date, and a log row for
        the history entries and events gained. A step row is written only when what it is
        made of changed since this process last wrote it (a replan or a pause on a long plan
        writes what changed, not every step again); anything not known to be unchanged is
        written."""
        self.redactor.refresh()
        plan: Plan = state.plan
        ids = [st.id for st in plan.steps]

        def write(con: sqlite3.Connection, cache: RunCache) -> None:
            history, events, calls = self._gained(cache, state)
            if con.execute(
                f"DELETE FROM steps WHERE run_id = ? AND step_id NOT IN ({','.join('?' * len(ids))})",
                (run_id, *ids),
            ).rowcount:
                cache.keep_rows(set(ids))
            rows = []
            for pos, st in enumerate(plan.steps):
                encoded = encode_args(st.args, self.redactor)
                if cache.table_empty or not (comparable(st) and cache.row_unchanged(
                        st.id, pos, row_signature(st, encoded[0], self.redactor))):
                    rows.append(self._step_row(cache, run_id, st, pos, encoded))
            con.executemany(_UPSERT_STEP, rows)
            cache.replace_statuses({st.id: st.status.value for st in plan.steps})
            now = time.time()
            if history or events:
                self._append_log(con, cache, run_id, state, now, history, events, [], calls, counters=False)
            cache.next_counters = counters_key(state)
            # the goal and plan id again: a secret learned since the run was created (a goal-only
            # run's plan names its password after the row was made) leaves no trace in them
            self._update_run(con, cache, run_id, state, now,
                             ", plan = ?, revisions = ?, log_seq = ?, steps_total = ?, goal = ?, plan_id = ?",
                             (plan_json(plan, self.redactor), diffs_json(list(state.revisions), self.redactor),
                              cache.next_seq - 1, len(ids), self.redactor.text(plan.goal), self.redactor.text(plan.id)))
            cache.next_table_empty = False

        self._run_write(run_id, write)
        cache = self._caches.get(run_id)
        if cache is not None:
            cache.masked_with = self.redactor.patterns
        if state.status in ("completed", "failed"):
            self._caches.pop(run_id, None)  # a finished run is written no more: drop what made it fast

    def record_step(self, run_id: str, step: Step | Sequence[Step], state: RunStateLike) -> None:
        """One log row: the history entries and events gained, the steps' new state (a step
        that just ended points at its history entry), the counters. The run's row is written
        too only when its status or reason changed (a pause, the end, waiting for approval)."""
        steps = [step] if isinstance(step, Step) else list(step)
        cache = self._caches.get(run_id)
        if cache is not None and cache.masked_with is not self.redactor.patterns:
            # a secret learned since the run's row and its steps were written (a step's result a
            # later step passes as a token; a goal that names it): all of it again, masked now
            self.save_state(run_id, state)
            return

        def write(con: sqlite3.Connection, cache: RunCache) -> None:
            history, events, calls = self._gained(cache, state)
            deltas = []
            for st in steps:
                if not cache.knows(st.id):
                    raise StoreError(f"step {st.id!r} is not in the stored plan of run {run_id!r}: save_state must "
                                     "be called after the plan changes (a replan) and before its steps are recorded")
                entry = cache.entries.get(id(st))
                if entry is not None and entry[0] is st:  # the step is the history entry just written
                    deltas.append('{"h":%d}' % entry[1])
                else:
                    deltas.append(self._patch(cache, st) or self._entry(cache, st))
                cache.set_status(st.id, st.status._value_)
                cache.row_stale(st.id)
            now = time.time()
            row = self._log_row(cache, state, now, history, events, deltas, calls)
            if (state.status, state.reason) != cache.row_status:
                if not con.in_transaction:  # two statements: one transaction
                    con.execute("BEGIN IMMEDIATE")
                self._update_run(con, cache, run_id, state, now)
            self._insert_log(con, cache, run_id, row)

        self._run_write(run_id, write, lone=True)
        if state.status in ("completed", "failed"):
            self._caches.pop(run_id, None)  # as in save_state: what a row was made of is not kept past the end

    def append_events(self, run_id: str, events: Sequence[Event]) -> None:
        def write(con: sqlite3.Connection, cache: RunCache) -> None:
            texts = events_json(events, cache.checks or self.redactor)
            calls = sum(1 for e in events if e.kind == "llm.call")
            cache.next_events = cache.events + len(events)
            self._append_log(con, cache, run_id, None, time.time(), [], texts, [], calls, counters=False)

        self._run_write(run_id, write)

    def _run_write(self, run_id: str, write: Callable[[sqlite3.Connection, RunCache], None], *,
                   lone: bool = False) -> None:
        """One write of a run, in one transaction. What the run's cache learns is kept only once
        it is committed; a write that did not finish makes the next one read the counts from the
        file again. Its texts are checked for secrets together, before the log row is written;
        when redaction would change one, the write is made again with each text redacted.

        ``lone``: ``write`` begins the transaction itself before any statement but its last, the
        log row, so that a write which is that one row is a transaction of one statement (SQLite
        takes the write lock when it starts, as ``BEGIN IMMEDIATE`` does): a step costs one
        statement, not three."""
        self._check_writable()

        def attempt(deferred: bool) -> RunCache:
            with self._lock:
                con = self._connection()
                cache = self._caches.get(run_id)
                if cache is None or not lone:
                    con.execute("BEGIN IMMEDIATE")
                try:
                    if cache is None:
                        cache = self._load_cache(con, run_id)
                    cache.begin(deferred)
                    write(con, cache)
                    if con.in_transaction:
                        con.execute("COMMIT")
                    return cache
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise

        with self._lock:
            try:
                try:
                    cache = self._until_free(lambda: attempt(True))
                except _Recheck:
                    cache = self._until_free(lambda: attempt(False))
                cache.commit()
                self._caches[run_id] = cache
            except BaseException:
                self._caches.pop(run_id, None)
                raise

    def _load_cache(self, con: sqlite3.Connection, run_id: str) -> RunCache:
        """What is stored of a run this process has not written yet (a resume, a reopened store)."""
        row = con.execute("SELECT log_key, log_seq, status, reason, model_calls,"
                          " CASE WHEN json_valid(counters) THEN json_extract(counters, '$.lineage.parent') END"
                          " FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise not_found(run_id, self.location, self._latest_ids(con))
        log_key, log_seq, status, reason, model_calls, parent = row
        cache = self._counted_cache(con, run_id, log_key, log_seq, status, reason, model_calls)
        cache.parent = parent if isinstance(parent, str) else None
        return cache

    def _counted_cache(self, con: sqlite3.Connection, run_id: str, log_key: int, log_seq: int, status: str,
                       reason: str | None, model_calls: int) -> RunCache:
        first, last_id = run_range(log_key)
        statuses = dict(con.execute("SELECT step_id, status FROM steps WHERE run_id = ?", (run_id,)).fetchall())
        statuses.update(statuses_after(log_seq, (
            (i - first, history, record) for i, history, record in con.execute(
                "SELECT id, history, record FROM log WHERE id BETWEEN ? AND ? ORDER BY id",
                (first + log_seq + 1, last_id)))))
        last = con.execute("SELECT id, model_calls, history, events FROM log WHERE id BETWEEN ? AND ?"
                           " ORDER BY id DESC LIMIT 1", (first, last_id)).fetchone()
        if last is None:
            return RunCache(self.redactor, log_key, 0, 0, 0, model_calls, statuses, (status, reason))
        i, calls, history, events = last
        return RunCache(self.redactor, log_key, history, events, i - first + 1, max(calls, model_calls), statuses,
                         (status, reason))

    def _gained(self, cache: RunCache, state: RunStateLike) -> tuple[list[str], list[str], int]:
        """The history entries and events ``state`` gained since the last write, as JSON, and
        the model calls among those events."""
        history, events = state.history, state.events
        if len(history) < cache.history or len(events) < cache.events:
            raise StoreError(
                f"run has {cache.history} history entries and {cache.events} events in the run store "
                f"{self.location}, but the state has {len(history)} and {len(events)}: a resumed run must "
                "continue from the state loaded from the store"
            )
        entries = []
        for seq in range(cache.history, len(history)):
            entry = history[seq]
            entries.append(self._entry(cache, entry))
            cache.entries[id(entry)] = (entry, seq)
            # the plan's step holds the same result object: its row points at this entry
            cache.results[entry.id] = (entry.result, ("ref", None, None, seq))
        new_events = events[cache.events:]
        texts = events_json(new_events, cache.checks or self.redactor)
        cache.next_history, cache.next_events = len(history), len(events)
        return entries, texts, sum(1 for e in new_events if e.kind == "llm.call")

    def _entry(self, cache: RunCache, step: Step) -> str:
        """A step (a history entry, or a plan step's new state) as an ENTRY of the log.

        Plain args and a plain result are encoded with the record in one text (one encoder
        call, as most steps are): its texts go to the write's deferred check, and the text is
        searched for a known secret as a whole (a hit is written the long way, where a result
        holding one is not restorable)."""
        args, paths = cache.encode_args(step.args, self.redactor)
        if cache.parent is not None and is_kept(step):  # kept at run time (reuse="identical"): a reference
            return entry_json(cache.record(step, cache.checks or self.redactor, paths),
                              value_json(args.kind, args.payload, meta_json(args)), dump_json({"kept": cache.parent}))
        checks = cache.checks
        if checks is not None and not paths and args.kind == "json":
            try:
                text = None
                if is_plain_json(step.result):
                    record = step_record(step)
                    texts = record_texts(record, step.needs)
                    if texts is not None:  # else the long way: its record is checked whole
                        text = checks.json_record(
                            {"r": record, "a": {"json": step.args}, "v": {"json": step.result}}, texts)
            except (TypeError, ValueError, OverflowError, RecursionError):  # an object, a huge int, deep nesting
                text = None
            if text is not None and not self.redactor.has_known_secret(text):
                return text
        last = cache.results.get(step.id)
        if last is not None and last[0] is step.result and last[1][0] != "ref":
            result = value_json(*last[1][:3])
        else:
            enc = encode(step.result, self.redactor)
            result = value_json(enc.kind, enc.payload, meta_json(enc))
        return entry_json(cache.record(step, cache.checks or self.redactor, paths), value_json(args.kind, args.payload,
                                                                               meta_json(args)), result)

    def _patch(self, cache: RunCache, step: Step) -> str | None:
        """The step's new state as a PATCH of its row in the steps table, when that row is
        what a reader starts from, this process knows exactly what it was written from, and
        only the fields a step's start changes (status, attempt, times, error, notes) differ:
        a step going in progress writes those, not its task, args and result again. None
        when that cannot be proved cheaply (the caller writes a whole ENTRY)."""
        base = cache.base_row(step.id)
        if base is None:
            return None
        (values, types, needs, args_kind, args_payload, _shown, result_type, result, secrets), args_copy = base
        if secrets is not self.redactor.patterns:  # a secret learned since: the row may hold it
            return None
        current = step.result
        if type(current) is not result_type or not (current is result or current == result):
            return None
        now = record_values(step.__dict__)
        rest = UNSTARTED(now)
        rest_types = tuple(map(type, rest))
        if (rest != UNSTARTED(values) or rest_types != UNSTARTED(types) or not IMMUTABLE.issuperset(rest_types)
                or tuple(step.needs) != needs):
            return None
        patch: dict[str, Any] = {"id": step.id}
        for name, i in STARTED:
            value = now[i]
            kind = type(value)
            if value is values[i] or (kind is types[i] and value == values[i]):
                continue
            if kind not in IMMUTABLE:
                return None
            patch[name] = value._value_ if kind is Status or kind is StepMark else value
        if "notes" in patch and "mark" not in patch:  # said outright: a row without one is read as an old one
            mark = step.mark
            patch["mark"] = None if mark is None else StepMark(mark)._value_
        if not cache.args_as_stored(step.args, args_copy, args_kind, args_payload):
            return None
        # only its texts are checked for secrets: the names are planbook's own, numbers never redacted
        return '{"p":' + (cache.checks or self.redactor).json_record(
            patch, [v for v in patch.values() if isinstance(v, str)]) + "}"

    def _append_log(self, con: sqlite3.Connection, cache: RunCache, run_id: str, state: RunStateLike | None,
                    now: float, history: list[str], events: list[str], deltas: list[str], calls: int, *,
                    counters: bool = True) -> None:
        self._insert_log(con, cache, run_id,
                         self._log_row(cache, state, now, history, events, deltas, calls, counters=counters))

    def _log_row(self, cache: RunCache, state: RunStateLike | None, now: float, history: list[str], events: list[str],
                 deltas: list[str], calls: int, *, counters: bool = True) -> tuple[Any, ...]:
        """The values of the write's log row, its texts checked for secrets (:class:`_Recheck`
        when redaction would change one); the model calls it counts are added to the run's."""
        text = None
        if counters and state is not None:
            key = counters_key(state)  # all but executions, a column of the row (the one counter every step changes)
            if key != cache.next_counters:
                text = counters_json(counters_of(state), cache.checks or self.redactor)
                cache.next_counters = key
        if cache.checks is not None and not cache.checks.clean():
            raise _Recheck
        cache.next_model_calls += calls
        return (log_id(cache.log_key, cache.next_seq), now, state.executions if state is not None else 0,
                cache.next_model_calls, cache.next_done, cache.next_history, cache.next_events,
                document(history, events, deltas, text))

    def _insert_log(self, con: sqlite3.Connection, cache: RunCache, run_id: str, row: tuple[Any, ...]) -> None:
        try:
            con.execute(INSERT_LOG, row)
        except sqlite3.IntegrityError:
            raise _two_writers(run_id, self.location) from None
        cache.next_seq += 1

    def _update_run(self, con: sqlite3.Connection, cache: RunCache, run_id: str,
                    state: RunStateLike, now: float, extra: str = "", values: tuple[Any, ...] = ()) -> None:
        """The run's row: status, reason, counters and totals (and ``extra`` columns). Its counters
        keep the steps' count by status too (``planbook runs``): the row is written when the run
        changes status or is saved, so a run that ended, paused or waits is counted as it is."""
        counters = counters_of(state)
        counters[STEP_COUNTS] = step_counts(st.status._value_ for st in state.plan.steps)
        cur = con.execute(
            f"UPDATE runs SET status = ?, reason = ?, counters = ?, executions = ?, updated = ?,"
            f" model_calls = ?{extra} WHERE id = ?",
            (state.status, state.reason, counters_json(counters, self.redactor), state.executions, now,
             cache.next_model_calls, *values, run_id),
        )
        if cur.rowcount == 0:
            raise not_found(run_id, self.location, self._latest_ids(con))
        cache.next_row_status = (state.status, state.reason)

    def _step_row(self, cache: RunCache, run_id: str, step: Step, position: int,
                  encoded: tuple[Encoded, list[Any]] | None = None, *,
                  checks: DeferredChecks | None = None) -> tuple[Any, ...]:
        """A row of the steps table: (run_id, step_id, position, status, record, args x3, result x3,
        result_ref). ``encoded``: the step's args encoded already. Not through the args cache:
        it would copy every step's args only to evict them."""
        args, paths = encoded or encode_args(step.args, self.redactor)
        cache.row_written(step.id, position, row_signature(step, args, self.redactor),
                          step.args if args.kind == "json" and not paths and type(step.args) is dict else None)
        last = cache.results.get(step.id)
        payload: str | bytes
        if cache.parent is not None and is_kept(step):  # a fork's kept step: its parent's row holds the result
            kind, payload, meta, ref = "kept", cache.parent, None, None
        elif last is not None and last[0] is step.result:
            kind, payload, meta, ref = last[1]
        else:
            enc = encode(step.result, self.redactor)
            kind, payload, meta, ref = enc.kind, enc.payload, meta_json(enc), None
        return (run_id, step.id, position, step.status.value, cache.record(step, checks or self.redactor, paths),
                args.kind, args.payload, meta_json(args), kind, payload, meta, ref)

    def claim_run(self, run_id: str, *, force: bool = False, updated: float | None = None,
                  mine: bool = False) -> None:
        """Take the run to write it (a resume, a paused run continued), before anything runs:
        :class:`~planbook.store.claims.RunClaimed` when another live process writes it, or
        wrote it since it was loaded (``updated``: its time then), or ended it, or — with
        ``mine``, for a process going on with a run it wrote last — took it over at all
        meanwhile; a writer that is gone is taken over (see :mod:`planbook.store.claims`)."""

        def write(con: sqlite3.Connection) -> None:
            row = con.execute(f"SELECT status, writer_pid, writer_host, writer_since, {_UPDATED} FROM runs r"
                              " WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise not_found(run_id, self.location, self._latest_ids(con))
            status, pid, host, since, last = row
            refuse_claim(run_id, status, pid, host, since, force)
            if status == "running" and is_me(pid, host):
                return  # this process writes it already
            if not force and (status in ("completed", "failed") or (updated is not None and last != updated)
                              or (mine and not is_me(pid, host))):
                raise RunClaimed(run_id, pid, host, since, changed=status)
            con.execute("UPDATE runs SET status = 'running', writer_pid = ?, writer_host = ?, writer_since = ?"
                        " WHERE id = ?", (os.getpid(), this_host(), time.time(), run_id))

        with self._lock:
            self._write(write)
            self._caches.pop(run_id, None)  # the run's row changed: the next write reads it again

    def delete_run(self, run_id: str) -> None:
        def write(con: sqlite3.Connection) -> None:
            row = con.execute("SELECT log_key FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise not_found(run_id, self.location, self._latest_ids(con))
            forks = [fork for (fork,) in con.execute(
                "SELECT id FROM runs WHERE json_valid(counters) AND json_extract(counters, '$.lineage.parent') = ?"
                " ORDER BY created", (run_id,))]
            if forks:
                raise StoreError(f"run {run_id} has forks that keep its results ({', '.join(forks)}): delete them "
                                 "first, then this run")
            con.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            con.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM log WHERE id BETWEEN ? AND ?", run_range(row[0]))

        with self._lock:
            self._write(write)
            self._caches.pop(run_id, None)


#: when a run was last written: its row, or a log row written since its last save
_UPDATED = (f"max(r.updated, coalesce((SELECT time FROM log WHERE id BETWEEN {RUN_FIRST} + r.log_seq + 1"
            f" AND {RUN_LAST} ORDER BY id DESC LIMIT 1), 0))")

_STEP_COLUMNS = ("run_id, step_id, position, status, record, args_kind, args, args_meta, result_kind, result,"
                 " result_meta, result_ref")
_INSERT_STEP = f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_STEP = _INSERT_STEP + (
    " ON CONFLICT (run_id, step_id) DO UPDATE SET position = excluded.position, status = excluded.status,"
    " record = excluded.record, args_kind = excluded.args_kind, args = excluded.args, args_meta = excluded.args_meta,"
    " result_kind = excluded.result_kind, result = excluded.result, result_meta = excluded.result_meta,"
    " result_ref = excluded.result_ref"
)


class _Recheck(Exception):
    """A write's texts hold something redaction changes: make it again, each text redacted."""


def _two_writers(run_id: str, location: str) -> StoreError:
    return StoreError(f"run {run_id!r} in the run store {location} was written by another process meanwhile: "
                      "a run is written by one process at a time (resume it in one place)")
