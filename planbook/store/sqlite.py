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

The store is built from one part a seam: the connection, its transactions and locking
(:mod:`~planbook.store.sqlconn`); the write path (:mod:`~planbook.store.sqlwrite`, with what a
writing process knows of a run in :mod:`~planbook.store.runcache`); reads
(:mod:`~planbook.store.sqlread`); the step cache (:mod:`~planbook.store.sqlcache`). Opening a
file (checking it is a store this planbook may write, before anything is written) is here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..data.errors import StoreError
from ..outbound.redact import Redactor
from .schema import SCHEMA_VERSION, check_file, create_schema
from .sqlcache import SQLiteStepCache
from .sqlread import SQLiteReads
from .sqlwrite import SQLiteWrites

__all__ = ["SQLiteStore"]


class SQLiteStore(SQLiteWrites, SQLiteReads, SQLiteStepCache):
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
        self._con = None
        self._pid = -1
        self._caches = {}
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

