"""The SQLite store's file: its schema, and the checks made before anything is written.

A file is written only when it is empty or a planbook run store of this schema version
(a store of an older version is migrated in one transaction when it is opened for
writing; read-only it is read as it is); anything else (not SQLite, damaged, another
program's database, a newer planbook's store) is refused with :class:`StoreFormatError`,
having been read through a read-only connection only, so it is left byte for byte as it was.

Versions: 1 — the first; 2 — each run also keeps its plan's id (``%run_plan NAME
--resume`` finds NAME's latest run with one indexed query) and the host and time of the
process writing it (a resume claims the run: :mod:`planbook.store.claims`); 3 — a run's
history entries, events and step changes are one ``log`` row per write, in place of the
``history`` and ``events`` tables (:mod:`planbook.store.logrows`: a step is one row
written, not seven); 4 — a log row may change a step by a patch of its row in the steps
table (a step going in progress writes its status, attempt and start time, not the whole
step again). A version-3 file is a version-4 file without patches: migrating it changes
only its version number, and an older planbook refuses a version-4 file instead of
misreading its patches; 5 — a fresh plan's steps are written as its run's first log row (one
row, in place of a row per step in the steps table, which a run's first save fills) and the
run's row counts its steps (``steps_total``). A version-4 file is a version-5 file whose
runs count their steps in the steps table: migrating it adds the column, left empty; 6 — a
forked run's kept step holds a reference to its parent's row (``{"kept": PARENT}`` in the
log, ``result_kind = 'kept'`` in the steps table) in place of a copy of the result, and the
run's lineage (parent, fork point, edit) is kept with its counters. A version-5 file is a
version-6 file without forks: migrating it changes only its version number, and an older
planbook refuses a version-6 file instead of misreading a kept result.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

from ..data.errors import StoreError, StoreFormatError
from .logrows import INSERT_LOG, LOG_TABLE, document, entry_json, log_id, value_json

#: the schema this planbook writes; a file with a higher number was written by a newer one
SCHEMA_VERSION = 6
#: the oldest schema this planbook reads (and migrates when it writes)
OLDEST_VERSION = 1
#: ``PRAGMA application_id`` of a planbook run store ("plbk")
APPLICATION_ID = 0x706C626B
#: the tables of a store of each version (1 and 2 are read as they are, and migrated when written)
TABLES = ("schema_version", "runs", "steps", "log", "cache")
LEGACY_TABLES = ("schema_version", "runs", "steps", "history", "events", "cache")

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    goal TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    config TEXT NOT NULL,
    plan TEXT NOT NULL,
    counters TEXT NOT NULL,
    revisions TEXT NOT NULL,
    executions INTEGER NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    writer_pid INTEGER,
    plan_id TEXT,
    writer_host TEXT,
    writer_since REAL,
    log_seq INTEGER NOT NULL DEFAULT -1,
    log_key INTEGER,
    steps_total INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_creation ON runs (created);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    args_kind TEXT NOT NULL, args BLOB, args_meta TEXT,
    result_kind TEXT NOT NULL, result BLOB, result_meta TEXT,
    result_ref INTEGER,
    UNIQUE (run_id, step_id)
);
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    created REAL NOT NULL,
    result_kind TEXT NOT NULL, result BLOB, result_meta TEXT
);
""" + LOG_TABLE + ";"

#: version 1 -> 2: the columns version 2 added to ``runs``
MIGRATION_2 = ("ALTER TABLE runs ADD COLUMN plan_id TEXT", "ALTER TABLE runs ADD COLUMN writer_host TEXT",
               "ALTER TABLE runs ADD COLUMN writer_since REAL")
#: created after a migration (the column must exist first)
PLAN_INDEX = "CREATE INDEX IF NOT EXISTS runs_by_plan ON runs (plan_id, created)"
LOG_KEY_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS runs_by_log_key ON runs (log_key)"
#: how a read-only reader of a version-1 store (which cannot migrate it) spells version 2's columns
V1_COLUMNS = {"plan_id": "json_extract(plan, '$.id')", "writer_host": "NULL", "writer_since": "NULL"}

_BUSY = ("database is locked", "database table is locked", "database is busy", "locked", "busy")
DAMAGED = ("file is not a database", "malformed", "corrupt", "not a database")


def is_busy(exc: BaseException) -> bool:
    # sqlite_errorcode and the SQLITE_* constants are Python 3.11's; before it, the message tells
    code = getattr(exc, "sqlite_errorcode", None)
    if sys.version_info >= (3, 11) and code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and any(s in str(exc) for s in _BUSY)


def connect_readonly(path: Path, location: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection that never writes the file. On a read-only disk or folder SQLite cannot
    make the WAL index (``-shm``) a reader needs: the file is then opened as immutable —
    unless a write-ahead log beside it holds changes the file lacks (they would be missed)."""
    base = f"file:{quote(str(path.resolve()))}?mode=ro"
    con = sqlite3.connect(base, uri=True, timeout=busy_timeout, check_same_thread=False)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con
    except sqlite3.OperationalError as exc:
        con.close()
        text = str(exc)
        if is_busy(exc) or not ("unable to open" in text or "readonly" in text):
            raise
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(f"the run store {location} is on a read-only disk or folder, and its write-ahead log {wal} "
                         "holds changes the file does not have yet: copy both files to a writable folder to read them")
    return sqlite3.connect(base + "&immutable=1", uri=True, timeout=busy_timeout, check_same_thread=False)


def check_file(path: Path, location: str, busy_timeout: float) -> int | None:
    """Read-only: is this a planbook store of a version this planbook can read and write?
    Its schema version (None for an empty database); StoreFormatError (the file untouched)
    when it is not a store; the ``sqlite3`` error itself when the file is locked (busy),
    for the caller to try again."""
    try:
        con = connect_readonly(path, location, busy_timeout)
    except sqlite3.DatabaseError as exc:
        if is_busy(exc):
            raise
        if isinstance(exc, sqlite3.OperationalError) and not any(s in str(exc) for s in DAMAGED):
            raise StoreError(f"cannot open the run store {location}: {exc}") from None
        raise StoreFormatError(
            f"{location} is not a planbook run store, or it is damaged ({exc}); it was left as it is: "
            "move it away, or pass another store path"
        ) from None
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
        version = None
        if "schema_version" in tables:
            row = con.execute("SELECT max(version) FROM schema_version").fetchone()
            version = row[0] if row else None
    except sqlite3.DatabaseError as exc:
        if is_busy(exc):
            raise  # another process is writing it (e.g. creating it): the caller waits and tries again
        raise StoreFormatError(
            f"{location} is not a planbook run store, or it is damaged ({exc}); it was left as it is: "
            "move it away, or pass another store path"
        ) from None
    finally:
        con.close()
    if not tables:
        return None  # an empty SQLite database: ours to set up
    if "schema_version" not in tables or app_id not in (0, APPLICATION_ID):
        raise StoreFormatError(
            f"{location} is an SQLite database of another program (tables: {', '.join(sorted(tables))}), "
            "not a planbook run store; it was left as it is: pass another store path"
        )
    if not isinstance(version, int):
        raise StoreFormatError(f"the run store {location} has no schema version (it is damaged); "
                               "it was left as it is: move it away, or pass another store path")
    if version > SCHEMA_VERSION:
        raise StoreFormatError(
            f"the run store {location} was written by a newer planbook (schema version {version}; this "
            f"planbook reads up to {SCHEMA_VERSION}); it was left as it is: upgrade planbook, or pass another "
            "store path"
        )
    missing = [t for t in (TABLES if version >= 3 else LEGACY_TABLES) if t not in tables]
    if missing or version < OLDEST_VERSION:
        raise StoreFormatError(f"the run store {location} lacks its tables {', '.join(missing) or 'of a version'} "
                               "(it is damaged); it was left as it is: move it away, or pass another store path")
    return version


def create_schema(con: sqlite3.Connection, location: str) -> None:
    """The tables, inside the caller's write transaction; the version is checked again there
    (another process may have created the file meanwhile)."""
    # not executescript: it would COMMIT this transaction first
    for statement in SCHEMA.split(";"):
        if statement.strip():
            con.execute(statement)
    row = con.execute("SELECT max(version) FROM schema_version").fetchone()
    if row[0] is None:
        con.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    elif row[0] in (1, 2, 3, 4, 5):
        if row[0] == 1:
            _migrate_1_to_2(con)
        if row[0] <= 2:
            _migrate_2_to_3(con)
        # 3 -> 4 and 5 -> 6 change nothing stored; 4 -> 5: a run's steps_total, empty (the steps table counts them)
        if "steps_total" not in {row[1] for row in con.execute("PRAGMA table_info(runs)")}:
            con.execute("ALTER TABLE runs ADD COLUMN steps_total INTEGER")
        con.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
    elif row[0] != SCHEMA_VERSION:  # another process created it meanwhile, with another version
        raise StoreFormatError(f"the run store {location} has schema version {row[0]}; this planbook "
                               f"writes {SCHEMA_VERSION}: upgrade planbook, or pass another store path")
    con.execute(PLAN_INDEX)
    con.execute(LOG_KEY_INDEX)


def _migrate_1_to_2(con: sqlite3.Connection) -> None:
    """Version 1 -> 2, in the caller's transaction: the new columns, each run's plan id
    taken from its stored plan (a run written by a version-1 planbook has no writer host:
    it is taken to be this one, where such stores were written)."""
    for statement in MIGRATION_2:
        con.execute(statement)
    rows = con.execute("SELECT id, plan FROM runs").fetchall()
    con.executemany("UPDATE runs SET plan_id = ? WHERE id = ?",
                    [(json.loads(plan).get("id"), run_id) for run_id, plan in rows])


def _migrate_2_to_3(con: sqlite3.Connection) -> None:
    """Version 2 -> 3, in the caller's transaction: each run's history entries and events
    become its first log row (its steps table and row include it), and the two tables go."""
    con.execute("ALTER TABLE runs ADD COLUMN log_seq INTEGER NOT NULL DEFAULT -1")
    con.execute("ALTER TABLE runs ADD COLUMN log_key INTEGER")
    con.execute("UPDATE runs SET log_key = rowid")
    con.execute(LOG_TABLE)
    runs = con.execute("SELECT id, log_key, updated, executions, model_calls FROM runs").fetchall()
    for run_id, log_key, updated, executions, model_calls in runs:
        history = [
            entry_json(record, value_json(ak, a, am), value_json(rk, r, rm))
            for record, ak, a, am, rk, r, rm in con.execute(
                "SELECT record, args_kind, args, args_meta, result_kind, result, result_meta FROM history"
                " WHERE run_id = ? ORDER BY seq", (run_id,))
        ]
        events = [rec for (rec,) in con.execute("SELECT record FROM events WHERE run_id = ? ORDER BY seq", (run_id,))]
        if not (history or events):
            continue
        done = con.execute("SELECT count(*) FROM steps WHERE run_id = ? AND status = 'completed'",
                           (run_id,)).fetchone()[0]
        con.execute(INSERT_LOG, (log_id(log_key, 0), updated, executions, model_calls, done, len(history), len(events),
                                 document(history, events, [], None)))
        con.execute("UPDATE runs SET log_seq = 0 WHERE id = ?", (run_id,))
    con.execute("DROP TABLE history")
    con.execute("DROP TABLE events")
