"""The SQLite store's file: its schema, and the checks made before anything is written.

A file is written only when it is empty or a planbook run store of this schema version;
anything else (not SQLite, damaged, another program's database, a newer planbook's
store) is refused with :class:`StoreFormatError`, having been read through a read-only
connection only, so it is left byte for byte as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from .base import StoreError, StoreFormatError

#: the schema this planbook writes; a file with a higher number was written by a newer one
SCHEMA_VERSION = 1
#: ``PRAGMA application_id`` of a planbook run store ("plbk")
APPLICATION_ID = 0x706C626B
TABLES = ("schema_version", "runs", "steps", "history", "events", "cache")

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
    writer_pid INTEGER
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
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    record TEXT NOT NULL,
    args_kind TEXT NOT NULL, args BLOB, args_meta TEXT,
    result_kind TEXT NOT NULL, result BLOB, result_meta TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS history_by_run ON history (run_id, seq);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    created REAL NOT NULL,
    result_kind TEXT NOT NULL, result BLOB, result_meta TEXT
);
"""

_BUSY = ("database is locked", "database table is locked", "database is busy", "locked", "busy")
DAMAGED = ("file is not a database", "malformed", "corrupt", "not a database")


def is_busy(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and any(s in str(exc) for s in _BUSY)


def check_file(path: Path, location: str, busy_timeout: float) -> None:
    """Read-only: is this a planbook store of a version this planbook can write?
    StoreFormatError (the file untouched) when it is not; the ``sqlite3`` error itself when
    the file is locked (busy), for the caller to try again."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=busy_timeout)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the run store {location}: {exc}") from None
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
        return  # an empty SQLite database: ours to set up
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
    missing = [t for t in TABLES if t not in tables]
    if missing:
        raise StoreFormatError(f"the run store {location} lacks its tables {', '.join(missing)} (it is "
                               "damaged); it was left as it is: move it away, or pass another store path")


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
    elif row[0] != SCHEMA_VERSION:  # another process created it meanwhile, with another version
        raise StoreFormatError(f"the run store {location} has schema version {row[0]}; this planbook "
                               f"writes {SCHEMA_VERSION}: upgrade planbook, or pass another store path")
