"""The SQLite run store: one file, WAL mode, the standard library's ``sqlite3``.

- **One row a step** (schema versions 3 to 5): a write of a run appends one row to its log
  (:mod:`planbook.store.logrows`); the steps table and the run's row are brought up to
  date by a save (a replan, a pause, a resumed run) and when the run's status changes. A
  step's write that is its log row alone is a transaction of that one statement. A fresh
  plan is created as one log row too (version 5), not a row per step.
- **Durable at each step**: ``record_step`` commits before it returns. With WAL and
  ``synchronous=NORMAL`` a commit survives the process being killed (the data is in the
  WAL file); ``durable=True`` (``synchronous=FULL``) also survives a power cut, at the
  cost of an fsync per step.
- **Many processes**: every write is one ``BEGIN IMMEDIATE`` transaction (a writer never
  upgrades a read lock, which is what makes SQLite answer "database is locked" at once),
  SQLite's busy timeout waits for the other writer, and a write that still meets a lock
  is retried with backoff until ``lock_timeout`` — only then is it an error, naming the file.
- **Never damages a file it does not understand**: before writing anything the file is
  read through a read-only connection; a file that is not SQLite, is damaged, belongs to
  another program or was written by a newer planbook raises :class:`StoreFormatError`
  naming the file, and the file is left byte for byte as it was.
- **Thread-safe**: one connection per process, used under a lock (a connection is never
  carried across ``fork``: a child process opens its own).
- **Reading never writes**: ``readonly=True`` (what ``planbook runs``, ``planbook show``,
  ``planbook.runs()`` and ``planbook.load_run()`` open) creates nothing, migrates nothing,
  refuses a path with no store, and reads a store on a read-only disk or folder.
- **One writer per run**: a resume claims its run first (:meth:`SQLiteStore.claim_run`,
  :mod:`planbook.store.claims`).
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from ..data.models import Event, Plan, Status, Step
from .base import (
    CacheHit, RunSummary, StoredRun, StoreError, StoreFormatError, counters_key, counters_of, new_run_id,
    not_found,
)
from .logrows import (
    INSERT_LOG, LAST_LOG_ROW, RUN_FIRST, RUN_LAST, SUMMARY_JSON, Damage, Reading, Replay, document, entry_json,
    json_check, log_id, meta_json, number, parsed, run_range, shown, statuses_after, step_of, summary_of, value_json,
    value_of,
)
from .records import (
    RECORD_FIELDS, config_json, counters_json, diffs_from_records, diffs_json, event_from_record, events_json,
    plan_from_record, plan_json, record_texts, record_values, redacted_paths, step_from_record, step_json,
    step_record,
)
from ..outbound.redact import DeferredChecks, Redactor
from .claims import RunClaimed, is_me, refuse_claim, this_host
from .schema import DAMAGED, SCHEMA_VERSION, V1_COLUMNS, check_file, connect_readonly, create_schema, is_busy
from .values import (
    UNRESTORABLE_ARGS, Encoded, Unrestorable, clone, decode, dump_json, encode, encode_args, is_plain_json,
    place_markers, plain_json_text, same_plain,
)

T = TypeVar("T")
__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

#: pages in the write-ahead log before a commit copies them into the database file. A
#: checkpoint fsyncs, and a step whose commit checkpoints waits for it: fewer, larger
#: checkpoints cost a step less on average (SQLite's default is 1,000 pages, 4 MB)
WAL_AUTOCHECKPOINT = 4000
#: the write-ahead log is cut back to this many bytes after a checkpoint
WAL_SIZE_LIMIT = 32 * 1024 * 1024
#: encoded args kept per run (a step's args are written two or three times while it runs)
ARGS_KEPT = 256


#: this process's id, kept current across ``fork``: a store compares it at every write (it never
#: carries a connection into a child process), and ``os.getpid()`` is a system call each time
_PROCESS = [os.getpid()]
if hasattr(os, "register_at_fork"):  # POSIX; where there is no fork, the id never changes
    os.register_at_fork(after_in_child=lambda: _PROCESS.__setitem__(0, os.getpid()))


def _value(kind: str, payload: Any, meta: str | None) -> Any:
    info = json.loads(meta) if meta else {}
    return decode(kind, payload, info.get("shown"), info.get("type", ""), info.get("reason"))


class _RunCache:
    """What this process knows of a run it writes, so a step costs as little as possible:
    how many history entries, events and log rows are stored (their next sequence
    numbers), the model calls counted, each step's stored status (the count of completed
    ones goes with every log row, for ``planbook runs``), the status and reason in the run's
    row, and the counters last written. What a write learns is kept only once it commits
    (a write retried after a busy file starts again from what was committed).

    Results and records encoded in one write are shared by identity *within that write*
    only (a history entry shares its result with the plan's step); args that are plain
    JSON are reused across writes only while a copy taken when they were encoded is still
    equal to them, type for type: a plan edited in place between writes is encoded again,
    never served stale."""

    def __init__(self, redactor: Redactor, log_key: int, history: int, events: int, seq: int, model_calls: int,
                 statuses: dict[str, str], row_status: tuple[str, str | None]) -> None:
        #: the run's log rows are ids log_key << 32 + seq (see :mod:`planbook.store.logrows`)
        self.log_key = log_key
        self.history = self.next_history = history
        self.events = self.next_events = events
        self.seq = self.next_seq = seq
        self.model_calls = self.next_model_calls = model_calls
        self.statuses = statuses
        self.done = self.next_done = sum(1 for v in statuses.values() if v == "completed")
        self._status_changes: dict[str, str] = {}
        self._statuses_replaced: dict[str, str] | None = None
        self.row_status = self.next_row_status = row_status
        self.checks: DeferredChecks | None = None
        self._deferred = DeferredChecks(redactor)
        #: the counters last written, as :func:`~planbook.store.base.counters_key` gives them
        self.counters: tuple[Any, ...] | None = None
        self.next_counters: tuple[Any, ...] | None = None
        #: id(args) -> (the args, a copy of them then, their encoding, redacted paths)
        self.args: dict[int, tuple[Any, Any, Encoded, list[Any]]] = {}
        #: step id -> (result object, (kind, payload, meta, history seq it is stored with))
        self.results: dict[str, tuple[Any, tuple[Any, ...]]] = {}
        #: id(history entry) -> (the entry, its history seq), for the entries of this write
        self.entries: dict[int, tuple[Step, int]] = {}
        #: the last step record written in this write: (the field values, by identity; its JSON)
        self._record: tuple[tuple[Any, ...], str] | None = None
        #: step id -> (position, what its row in the steps table was made of — see
        #: :func:`_row_signature` —, a copy of its args then when they were written as they are)
        self.rows: dict[str, tuple[int | None, tuple[Any, ...], Any]] = {}
        self._rows_written: dict[str, tuple[int | None, tuple[Any, ...], Any]] = {}
        self._rows_stale: set[str] = set()
        self._rows_kept: set[str] | None = None
        #: the run's steps are in its first log row and not yet in the steps table: its next
        #: save writes every step (see :meth:`SQLiteStore._created_row`)
        self.table_empty = self.next_table_empty = False

    def begin(self, deferred: bool) -> None:
        """A write starts; ``deferred``: its records, events and counters are checked for
        secrets once, all together (else each as it is encoded)."""
        if deferred:
            self._deferred.texts.clear()
            self.checks = self._deferred
        else:
            self.checks = None
        self.next_history, self.next_events, self.next_counters = self.history, self.events, self.counters
        self.next_seq, self.next_model_calls, self.next_done = self.seq, self.model_calls, self.done
        self.next_row_status, self.next_table_empty = self.row_status, self.table_empty
        self._status_changes = {}
        self._statuses_replaced = None
        self.results.clear()  # mutable values may have been edited in place since the last write
        self.entries.clear()
        self._record = None
        self._rows_written = {}
        self._rows_stale = set()
        self._rows_kept = None

    def commit(self) -> None:
        self.history, self.events, self.counters = self.next_history, self.next_events, self.next_counters
        self.seq, self.model_calls, self.done = self.next_seq, self.next_model_calls, self.next_done
        self.row_status, self.table_empty = self.next_row_status, self.next_table_empty
        if self._statuses_replaced is not None:
            self.statuses = self._statuses_replaced
        self.statuses.update(self._status_changes)
        if self._rows_kept is not None:
            self.rows = {k: v for k, v in self.rows.items() if k in self._rows_kept}
        for step_id in self._rows_stale:
            self.rows.pop(step_id, None)
        self.rows.update(self._rows_written)
        self.entries.clear()

    def knows(self, step_id: str) -> bool:
        """True when ``step_id`` is a step of the stored plan."""
        statuses = self.statuses if self._statuses_replaced is None else self._statuses_replaced
        return step_id in statuses

    def set_status(self, step_id: str, status: str) -> None:
        """A step's status as this write stores it (the completed count follows)."""
        old = self._status_changes.get(step_id)
        if old is None:
            old = (self.statuses if self._statuses_replaced is None else self._statuses_replaced).get(step_id)
        self.next_done += (status == "completed") - (old == "completed")
        self._status_changes[step_id] = status

    def replace_statuses(self, statuses: dict[str, str]) -> None:
        """The plan as a save writes it: every step's status."""
        self._statuses_replaced = statuses
        self._status_changes = {}
        self.next_done = sum(1 for v in statuses.values() if v == "completed")

    def row_stale(self, step_id: str) -> None:
        """The step's row in the steps table no longer holds its state (a log row does): the
        next save writes it."""
        self._rows_stale.add(step_id)
        self._rows_written.pop(step_id, None)

    def base_row(self, step_id: str) -> tuple[tuple[Any, ...], Any] | None:
        """What the stored row of ``step_id`` was written from (see :func:`_row_signature`)
        and the copy of its args, while that row is the step's latest state in the store (no
        log row changed it since); else None."""
        known = self.rows.get(step_id)
        if known is None or step_id in self._rows_stale:
            return None
        return known[1], known[2]

    def row_unchanged(self, step_id: str, position: int | None, signature: tuple[Any, ...] | None) -> bool:
        """True when the stored row of ``step_id`` was written from exactly this (see :func:`_row_signature`)."""
        known = self.rows.get(step_id)
        return signature is not None and known is not None and known[0] == position and known[1] == signature

    def row_written(self, step_id: str, position: int, signature: tuple[Any, ...] | None, args: Any) -> None:
        """What the row of ``step_id`` is written from in this write (kept once it commits);
        ``args``: the step's args when the row holds them as they are (no redaction), else None."""
        if signature is None:  # nothing to compare with: the next save writes it again
            self.row_stale(step_id)
        else:
            self._rows_stale.discard(step_id)
            self._rows_written[step_id] = (position, signature, None if args is None else clone(args))

    def keep_rows(self, ids: set[str]) -> None:
        """The rows of every other step were deleted: what is known of them is forgotten when
        this write commits."""
        self._rows_kept = ids

    def encode_args(self, args: dict[str, Any], redactor: Redactor) -> tuple[Encoded, list[Any]]:
        hit = self.args.get(id(args))
        if hit is not None and hit[0] is args and same_plain(hit[1], args):
            return hit[2], hit[3]
        enc, paths = encode_args(args, redactor)
        if enc.kind == "json" and not paths:  # plain data: a copy tells whether they changed
            self._keep_args(args, enc)
        return enc, paths

    def args_as_stored(self, args: dict[str, Any], copy: Any, kind: str, payload: Any) -> bool:
        """True when ``args`` are plain data whose JSON text is ``payload``, as a row stores
        it: written then with no redaction (a redacted payload holds ``***``, never the text
        of the args), so they are unchanged and, while the same secrets are known (the
        caller checks), need none now. ``copy``: the copy of the args taken when the row was
        written with them as they are (None when it was not): equal to them, type for type,
        it proves it without encoding them again. Kept in the args cache, so the step's
        history entry does not encode them again."""
        hit = self.args.get(id(args))
        if hit is not None and hit[0] is args and same_plain(hit[1], args):
            return not hit[3] and hit[2].kind == kind and hit[2].payload == payload
        if kind != "json" or type(args) is not dict:
            return False
        if copy is not None and same_plain(copy, args):
            self._keep_args(args, Encoded("json", payload), copy)
            return True
        text = plain_json_text(args)
        if text is None or text != payload:
            return False
        self._keep_args(args, Encoded("json", text))
        return True

    def _keep_args(self, args: dict[str, Any], enc: Encoded, copy: Any = None) -> None:
        """``copy``: a copy of ``args`` already taken (kept unchanged: nobody else holds it)."""
        if len(self.args) >= ARGS_KEPT:  # only the steps in flight need it: keep memory per step flat
            del self.args[next(iter(self.args))]
        self.args[id(args)] = (args, clone(args) if copy is None else copy, enc, [])

    def record(self, step: Step, redactor: Redactor | DeferredChecks, paths: list[Any]) -> str:
        """The step's record as JSON; a step equal field by field to the last one (the plan's
        step after its history entry) reuses it."""
        if paths:  # redacted args are listed in the record: not the common case, not kept
            return step_json(step, redactor, paths)
        current = record_values(step.__dict__)
        last = self._record
        if last is not None and current == last[0]:  # element by element: ``a is b or a == b``
            return last[1]
        text = step_json(step, redactor)
        self._record = (current, text)
        return text


class SQLiteStore:
    """Runs in one SQLite file (see the module docstring). ``secrets``: more strings to redact."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        secrets: Iterable[str] = (),
        busy_timeout: float = 5.0,
        lock_timeout: float = 60.0,
        durable: bool = False,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        self.readonly = readonly
        #: the file's schema version (a read-only reader of an older store reads it as it is)
        self.version = SCHEMA_VERSION
        self.redactor = Redactor(secrets)
        self.busy_timeout = busy_timeout
        self.lock_timeout = lock_timeout
        self.durable = durable
        self._lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._pid = -1
        self._caches: dict[str, _RunCache] = {}
        #: how many times a transaction waited for another writer and was tried again
        self.busy_retries = 0
        self._open()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.location!r})"

    def __enter__(self) -> "SQLiteStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Strings to redact from now on (e.g. an LLM config's ``secrets()``)."""
        self.redactor.add_secrets(secrets)

    # ------------------------------------------------------------ opening
    def _open(self) -> None:
        path = self.path
        if path.exists() and not path.is_file():
            raise StoreError(f"the run store {self.location} is a directory, not a file: pass a file path "
                             "(e.g. .planbook/runs.sqlite)")
        if self.readonly:
            if not path.exists():
                raise StoreError(f"there is no run store at {self.location} (nothing was created there): pass "
                                 "the file that holds your runs (--store PATH, store=PATH), or run a plan with a "
                                 "store first")
            if path.stat().st_size == 0:
                raise StoreError(f"the run store {self.location} is an empty file: it holds no runs yet")
            version = self._until_free(lambda: check_file(path, self.location, self.busy_timeout))
            if version is None:
                raise StoreError(f"the run store {self.location} is an empty database: it holds no runs yet")
            self.version = version
            return
        if path.exists() and path.stat().st_size > 0:
            # another process may be creating the file right now (it holds the lock while it
            # turns on WAL and writes the schema): reading it waits like any other transaction
            self._until_free(lambda: check_file(path, self.location, self.busy_timeout))
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of the run store {self.location}: {exc}") from None
        self._write(lambda con: create_schema(con, self.location))

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (opened again after a fork)."""
        if self._con is not None and self._pid == _PROCESS[0]:
            return self._con
        if self.readonly:
            con = connect_readonly(self.path, self.location, self.busy_timeout)
            con.isolation_level = None
            self._con, self._pid = con, _PROCESS[0]
            return con
        con = sqlite3.connect(str(self.path), timeout=self.busy_timeout, isolation_level=None,
                              check_same_thread=False)
        try:
            con.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"the run store {self.location} cannot use WAL mode (journal mode {mode}); "
                                 "put it on a local disk (WAL does not work over network file systems)")
            con.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            con.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
            con.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        except BaseException:
            con.close()
            raise
        self._con, self._pid = con, _PROCESS[0]
        self._caches.clear()  # a forked child re-reads what is stored
        return con

    def close(self) -> None:
        with self._lock:
            if self._con is not None and self._pid == _PROCESS[0]:
                self._con.close()
            self._con = None
            self._caches.clear()

    # ------------------------------------------------------- transactions
    def _error(self, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        if any(s in text for s in DAMAGED):
            return StoreFormatError(f"the run store {self.location} is damaged ({text}); it was left as it is: "
                                    "move it away, or pass another store path")
        if is_busy(exc):
            return StoreError(f"the run store {self.location} stayed locked by another process for "
                              f"{self.lock_timeout:g} s: is a process stuck holding it? (SQLite: {text})")
        return StoreError(f"the run store {self.location} failed: {text}")

    def _until_free(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, tried again while another process holds the file's lock (SQLite
        answers busy), with backoff and jitter until ``lock_timeout``; then an error naming
        the file. Every statement that touches the file goes through here."""
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.001
        while True:
            try:
                return attempt()
            except sqlite3.Error as exc:
                if not (is_busy(exc) and time.monotonic() < deadline):
                    raise self._error(exc) from None
            self.busy_retries += 1
            time.sleep(delay * (0.5 + random.random()))  # outside the lock: other threads go on
            delay = min(delay * 2, 0.05)

    def _retrying(self, begin: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in one transaction; retried while another process holds the lock."""

        def attempt() -> T:
            with self._lock:
                con = self._connection()
                con.execute(begin)
                try:
                    out = fn(con)
                    con.execute("COMMIT")
                    return out
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise

        return self._until_free(attempt)

    def _check_writable(self) -> None:
        if self.readonly:
            raise StoreError(f"the run store {self.location} was opened read-only (to list or show runs): "
                             "open it without readonly=True to write")

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_writable()
        return self._retrying("BEGIN IMMEDIATE", fn)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._retrying("BEGIN", fn)

    # --------------------------------------------------------------- runs
    def create_run(self, plan: Plan, *, goal: str | None = None, config: Mapping[str, Any] | None = None,
                   run_id: str | None = None) -> str:
        self.redactor.refresh()
        config_text = config_json(config, self.redactor)
        run_id = run_id or new_run_id()
        now = time.time()

        def write(con: sqlite3.Connection) -> _RunCache:
            try:
                con.execute(
                    "INSERT INTO runs (id, goal, status, reason, created, updated, config, plan, counters, revisions,"
                    " writer_pid, plan_id, writer_host, writer_since, steps_total, log_key)"
                    " VALUES (?, ?, 'running', NULL, ?, ?, ?, ?, '{}', '[]', ?, ?, ?, ?, ?,"
                    " (SELECT coalesce(max(log_key), 0) + 1 FROM runs))",
                    (run_id, self.redactor.text(goal if goal is not None else plan.goal), now, now, config_text,
                     plan_json(plan, self.redactor), os.getpid(), self.redactor.text(plan.id), this_host(), now,
                     len(plan.steps)),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"a run {run_id!r} is already in the run store {self.location}: "
                                 "choose another run id, or leave it out") from None
            log_key = con.execute("SELECT log_key FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
            cache = _RunCache(self.redactor, log_key, 0, 0, 0, 0, {st.id: st.status.value for st in plan.steps},
                              ("running", None))
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
            return cache

        self._caches[run_id] = self._write(write)
        return run_id

    def _created_row(self, cache: _RunCache, plan: Plan) -> str | None:
        """A fresh plan's steps as its run's first log row, ``{"b": [ENTRY, ...]}``: one text,
        encoded and checked for secrets at once, in place of a row per step in the steps table
        (which cost a run of small steps more than a tenth of its writes). None unless every
        step is fresh (not started, no result, args that are plain JSON) and nothing in the text
        is for redaction to change: the caller then writes the steps table, step by step."""
        entries = []
        none = {"json": None}
        for pos, st in enumerate(plan.steps):
            args = st.args
            text = plain_json_text(args) if type(args) is dict else None
            if st.status is not Status.not_started or st.result is not None or text is None:
                return None
            values = record_values(st.__dict__)
            entries.append({"r": step_record(st, values), "a": {"json": args}, "v": none})
            cache.row_written(st.id, pos, _row_signature(st, Encoded("json", text), self.redactor, values), args)
        try:
            doc = dump_json({"b": entries})
        except (TypeError, ValueError, RecursionError):  # a field holding an object: written step by step
            return None
        return doc if self.redactor.unchanged(doc) else None

    def save_state(self, run_id: str, state: Any) -> None:
        """Everything: the steps table and the run's row brought up to date, and a log row for
        the history entries and events gained. A step row is written only when what it is
        made of changed since this process last wrote it (a replan or a pause on a long plan
        writes what changed, not every step again); anything not known to be unchanged is
        written."""
        self.redactor.refresh()
        plan: Plan = state.plan
        ids = [st.id for st in plan.steps]

        def write(con: sqlite3.Connection, cache: _RunCache) -> None:
            history, events, calls = self._gained(cache, state)
            if con.execute(
                f"DELETE FROM steps WHERE run_id = ? AND step_id NOT IN ({','.join('?' * len(ids))})",
                (run_id, *ids),
            ).rowcount:
                cache.keep_rows(set(ids))
            rows = []
            for pos, st in enumerate(plan.steps):
                encoded = encode_args(st.args, self.redactor)
                if cache.table_empty or not (_comparable(st) and cache.row_unchanged(
                        st.id, pos, _row_signature(st, encoded[0], self.redactor))):
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
        if state.status in ("completed", "failed"):
            self._caches.pop(run_id, None)  # a finished run is written no more: drop what made it fast

    def record_step(self, run_id: str, step: Step | Sequence[Step], state: Any) -> None:
        """One log row: the history entries and events gained, the steps' new state (a step
        that just ended points at its history entry), the counters. The run's row is written
        too only when its status or reason changed (a pause, the end, waiting for approval)."""
        steps = [step] if isinstance(step, Step) else list(step)

        def write(con: sqlite3.Connection, cache: _RunCache) -> None:
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
        def write(con: sqlite3.Connection, cache: _RunCache) -> None:
            texts = events_json(events, cache.checks or self.redactor)
            calls = sum(1 for e in events if e.kind == "llm.call")
            cache.next_events = cache.events + len(events)
            self._append_log(con, cache, run_id, None, time.time(), [], texts, [], calls, counters=False)

        self._run_write(run_id, write)

    def _run_write(self, run_id: str, write: Callable[[sqlite3.Connection, _RunCache], None], *,
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

        def attempt(deferred: bool) -> _RunCache:
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

    def _load_cache(self, con: sqlite3.Connection, run_id: str) -> _RunCache:
        """What is stored of a run this process has not written yet (a resume, a reopened store)."""
        row = con.execute("SELECT log_key, log_seq, status, reason, model_calls FROM runs WHERE id = ?",
                          (run_id,)).fetchone()
        if row is None:
            raise not_found(run_id, self.location, self._latest_ids(con))
        log_key, log_seq, status, reason, model_calls = row
        first, last_id = run_range(log_key)
        statuses = dict(con.execute("SELECT step_id, status FROM steps WHERE run_id = ?", (run_id,)).fetchall())
        statuses.update(statuses_after(log_seq, (
            (i - first, history, record) for i, history, record in con.execute(
                "SELECT id, history, record FROM log WHERE id BETWEEN ? AND ? ORDER BY id",
                (first + log_seq + 1, last_id)))))
        last = con.execute("SELECT id, model_calls, history, events FROM log WHERE id BETWEEN ? AND ?"
                           " ORDER BY id DESC LIMIT 1", (first, last_id)).fetchone()
        if last is None:
            return _RunCache(self.redactor, log_key, 0, 0, 0, model_calls, statuses, (status, reason))
        i, calls, history, events = last
        return _RunCache(self.redactor, log_key, history, events, i - first + 1, max(calls, model_calls), statuses,
                         (status, reason))

    def _gained(self, cache: _RunCache, state: Any) -> tuple[list[str], list[str], int]:
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

    def _entry(self, cache: _RunCache, step: Step) -> str:
        """A step (a history entry, or a plan step's new state) as an ENTRY of the log.

        Plain args and a plain result are encoded with the record in one text (one encoder
        call, as most steps are): its texts go to the write's deferred check, and the text is
        searched for a known secret as a whole (a hit is written the long way, where a result
        holding one is not restorable)."""
        args, paths = cache.encode_args(step.args, self.redactor)
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

    def _patch(self, cache: _RunCache, step: Step) -> str | None:
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
        rest = _UNSTARTED(now)
        rest_types = tuple(map(type, rest))
        if (rest != _UNSTARTED(values) or rest_types != _UNSTARTED(types) or not _IMMUTABLE.issuperset(rest_types)
                or tuple(step.needs) != needs):
            return None
        patch: dict[str, Any] = {"id": step.id}
        for name, i in _STARTED:
            value = now[i]
            kind = type(value)
            if value is values[i] or (kind is types[i] and value == values[i]):
                continue
            if kind not in _IMMUTABLE:
                return None
            patch[name] = value._value_ if kind is Status else value
        if not cache.args_as_stored(step.args, args_copy, args_kind, args_payload):
            return None
        # only its texts are checked for secrets: the names are planbook's own, numbers never redacted
        return '{"p":' + (cache.checks or self.redactor).json_record(
            patch, [v for v in patch.values() if isinstance(v, str)]) + "}"

    def _append_log(self, con: sqlite3.Connection, cache: _RunCache, run_id: str, state: Any, now: float,
                    history: list[str], events: list[str], deltas: list[str], calls: int, *,
                    counters: bool = True) -> None:
        self._insert_log(con, cache, run_id,
                         self._log_row(cache, state, now, history, events, deltas, calls, counters=counters))

    def _log_row(self, cache: _RunCache, state: Any, now: float, history: list[str], events: list[str],
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

    def _insert_log(self, con: sqlite3.Connection, cache: _RunCache, run_id: str, row: tuple[Any, ...]) -> None:
        try:
            con.execute(INSERT_LOG, row)
        except sqlite3.IntegrityError:
            raise _two_writers(run_id, self.location) from None
        cache.next_seq += 1

    def _update_run(self, con: sqlite3.Connection, cache: _RunCache, run_id: str, state: Any, now: float,
                    extra: str = "", values: tuple[Any, ...] = ()) -> None:
        """The run's row: status, reason, counters and totals (and ``extra`` columns)."""
        cur = con.execute(
            f"UPDATE runs SET status = ?, reason = ?, counters = ?, executions = ?, updated = ?,"
            f" model_calls = ?{extra} WHERE id = ?",
            (state.status, state.reason, counters_json(counters_of(state), self.redactor), state.executions, now,
             cache.next_model_calls, *values, run_id),
        )
        if cur.rowcount == 0:
            raise not_found(run_id, self.location, self._latest_ids(con))
        cache.next_row_status = (state.status, state.reason)

    def _step_row(self, cache: _RunCache, run_id: str, step: Step, position: int,
                  encoded: tuple[Encoded, list[Any]] | None = None, *,
                  checks: DeferredChecks | None = None) -> tuple[Any, ...]:
        """A row of the steps table: (run_id, step_id, position, status, record, args x3, result x3,
        result_ref). ``encoded``: the step's args encoded already. Not through the args cache:
        it would copy every step's args only to evict them."""
        args, paths = encoded or encode_args(step.args, self.redactor)
        cache.row_written(step.id, position, _row_signature(step, args, self.redactor),
                          step.args if args.kind == "json" and not paths and type(step.args) is dict else None)
        last = cache.results.get(step.id)
        if last is not None and last[0] is step.result:
            kind, payload, meta, ref = last[1]
        else:
            enc = encode(step.result, self.redactor)
            kind, payload, meta, ref = enc.kind, enc.payload, meta_json(enc), None
        return (run_id, step.id, position, step.status.value, cache.record(step, checks or self.redactor, paths),
                args.kind, args.payload, meta_json(args), kind, payload, meta, ref)

    # ------------------------------------------------------------ reading
    def load_run(self, run_id: str) -> StoredRun:
        """The run; a row of it that is damaged is one :class:`StoreFormatError` naming the run,
        the row and the damage (:class:`~planbook.store.logrows.Reading`): the other runs read as ever."""

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
                replay = Replay(int(number(log_seq)))
                if self.version >= 3:
                    reading.part = "its log key (runs.log_key)"
                    first, last_id = run_range(number(log_key))
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
                    result = replay.results[ref] if rk == "ref" else _value(rk, r, rm)
                    steps.append(_step(record, ak, a, am, result, replay.patched.get(step_id)))
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
        return stored

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
                f" {_JSON_CHECKS}, CASE WHEN l.id IS NOT NULL THEN {json_check(*LAST_LOG_ROW[1:])} END"
                f" FROM runs r LEFT JOIN log l ON l.id = (SELECT max(id) FROM log WHERE id BETWEEN {RUN_FIRST}"
                f" AND {RUN_LAST})"
                " ORDER BY r.created DESC, r.rowid DESC"
            )
        else:
            query = (
                f"SELECT id, goal, status, reason, created, updated, executions, model_calls, writer_pid,"
                f" {self._column('plan_id')}, {self._column('writer_host')}, {self._column('writer_since')},"
                " (SELECT count(*) FROM steps s WHERE s.run_id = r.id AND s.status = 'completed'),"
                f" (SELECT count(*) FROM steps s WHERE s.run_id = r.id), {_JSON_CHECKS}"
                " FROM runs r ORDER BY created DESC, rowid DESC"
            )
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        rows = self._read(lambda con: con.execute(query).fetchall())
        # a damaged row is listed as damaged (its values checked): it must not cost the listing
        return [summary_of(row[:14], row[14:]) for row in rows]

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

    def _latest_ids(self, con: sqlite3.Connection, n: int = 5) -> list[str]:
        return [r[0] for r in con.execute("SELECT id FROM runs ORDER BY created DESC, rowid DESC LIMIT ?", (n,))]

    def delete_run(self, run_id: str) -> None:
        def write(con: sqlite3.Connection) -> None:
            row = con.execute("SELECT log_key FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise not_found(run_id, self.location, self._latest_ids(con))
            con.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            con.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM log WHERE id BETWEEN ? AND ?", run_range(row[0]))

        with self._lock:
            self._write(write)
            self._caches.pop(run_id, None)

    # -------------------------------------------------------------- cache
    def cache_get(self, key: str) -> CacheHit | None:
        row = self._read(lambda con: con.execute(
            "SELECT tool, run_id, step_id, created, result_kind, result, result_meta FROM cache WHERE key = ?", (key,)
        ).fetchone())
        if row is None:
            return None
        tool, run_id, step_id, created, kind, payload, meta = row
        result = _value(kind, payload, meta)
        if isinstance(result, Unrestorable):
            return None  # a pickle that no longer loads is a miss, not a wrong hit
        return CacheHit(key=key, result=result, tool=tool, run_id=run_id, step_id=step_id, created=created)

    def cache_put(self, key: str, result: Any, *, tool: str, run_id: str, step_id: str) -> bool:
        enc = encode(result, self.redactor)
        if not enc.restorable:
            return False
        self._write(lambda con: con.execute(
            "INSERT OR REPLACE INTO cache (key, tool, run_id, step_id, created, result_kind, result, result_meta)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (key, tool, run_id, step_id, time.time(), enc.kind, enc.payload,
                                                 meta_json(enc)),
        ))
        return True

    def clear_cache(self) -> int:
        """Forget every cached step result; returns how many there were."""
        return self._write(lambda con: con.execute("DELETE FROM cache").rowcount)


#: when a run was last written: its row, or a log row written since its last save
_UPDATED = (f"max(r.updated, coalesce((SELECT time FROM log WHERE id BETWEEN {RUN_FIRST} + r.log_seq + 1"
            f" AND {RUN_LAST} ORDER BY id DESC LIMIT 1), 0))")
#: the log row ``l`` is newer than the last save of its run ``r``
_NEWER = f"l.id > {RUN_FIRST} + r.log_seq"
#: SQL: what is not as planbook writes it in the JSON of a run's row ``r`` (NULLs when nothing)
_JSON_CHECKS = ", ".join(json_check(column, kind) for _, column, kind in SUMMARY_JSON)

_STEP_COLUMNS = ("run_id, step_id, position, status, record, args_kind, args, args_meta, result_kind, result,"
                 " result_meta, result_ref")
_INSERT_STEP = f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_STEP = _INSERT_STEP + (
    " ON CONFLICT (run_id, step_id) DO UPDATE SET position = excluded.position, status = excluded.status,"
    " record = excluded.record, args_kind = excluded.args_kind, args = excluded.args, args_meta = excluded.args_meta,"
    " result_kind = excluded.result_kind, result = excluded.result, result_meta = excluded.result_meta,"
    " result_ref = excluded.result_ref"
)


#: values a row signature holds as they are (immutable: an edit replaces them, never changes them)
_IMMUTABLE = frozenset({str, int, float, bool, type(None), Status})
#: the record fields a step's start changes (see ``Runner._begin``), as (name, position)
_STARTED = tuple((name, RECORD_FIELDS.index(name)) for name in (
    "status", "attempts", "started_at", "finished_at", "error", "traceback", "notes"))
#: the other record fields but ``needs`` (a list, compared by its copy), from a record's values;
#: a patch is written only when these are the same values, of the same types, as in the row
_UNSTARTED = itemgetter(*(i for i, name in enumerate(RECORD_FIELDS)
                          if name != "needs" and i not in {i for _, i in _STARTED}))


def _row_signature(step: Step, args: Encoded, redactor: Redactor,
                   values: tuple[Any, ...] | None = None) -> tuple[Any, ...] | None:
    """What a step's row is made of, for telling whether it changed without encoding it again:
    its fields and their types (``needs`` also copied: a list edited in place is never
    mistaken for the one written), its args' encoding, its result when it is an immutable
    value, and the redactor's secrets then (a secret learned since makes it written again).
    None when that cannot be told cheaply (a mutable result): the row is then always written.
    Cheap, as every row written computes it; :func:`_comparable` checks the rest before a
    row is skipped."""
    result = step.result
    if type(result) not in _IMMUTABLE:
        return None
    if values is None:
        values = record_values(step.__dict__)
    return (values, tuple(map(type, values)), tuple(step.needs), args.kind, args.payload, args.shown,
            type(result), result, redactor.patterns)


def _comparable(step: Step) -> bool:
    """True when every field of the step's record is an immutable value (``needs`` a list of
    names, compared by its copy): only then may an equal signature stand for an unchanged row."""
    for value in record_values(step.__dict__):
        if type(value) not in _IMMUTABLE and not (value is step.needs and all(type(v) is str for v in value)):
            return False
    return True


def _step(record: str, args_kind: str, args: Any, args_meta: str | None, result: Any,
          patch: dict[str, Any] | None = None) -> Step:
    """A step from its row; ``patch``: the fields a later log row changed (a PATCH)."""
    fields = json.loads(record)
    if patch:
        fields.update(patch)
    loaded = _value(args_kind, args, args_meta)
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
        result = _value(rk, r, rm)
        replay.results.append(result)
        replay.history.append(_step(record, ak, a, am, result))
    for seq, rec in con.execute("SELECT seq, record FROM events WHERE run_id = ? ORDER BY seq", (run_id,)):
        reading.part = ("its event {} (table events)", seq)
        replay.events.append(event_from_record(parsed(rec, dict)))


class _Recheck(Exception):
    """A write's texts hold something redaction changes: make it again, each text redacted."""


def _two_writers(run_id: str, location: str) -> StoreError:
    return StoreError(f"run {run_id!r} in the run store {location} was written by another process meanwhile: "
                      "a run is written by one process at a time (resume it in one place)")
