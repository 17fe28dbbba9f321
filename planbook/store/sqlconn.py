"""The connection and the locking of an SQLite run store: one connection per process (never
carried across ``fork``), used under a lock; every statement in a transaction that is
retried with backoff while another process holds the file, until ``lock_timeout``; SQLite's
errors turned into :class:`~planbook.data.errors.StoreError` naming the file.

:class:`SQLiteConnection` is the base the reads, the writes and the step cache of
:class:`~planbook.store.sqlite.SQLiteStore` build on; the store's constructor sets what it
declares.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..data.errors import StoreError, StoreFormatError
from ..outbound.redact import Redactor
from .runcache import RunCache
from .schema import DAMAGED, connect_readonly, is_busy

T = TypeVar("T")
__all__ = ["SQLiteConnection", "WAL_AUTOCHECKPOINT", "WAL_SIZE_LIMIT"]

#: pages in the write-ahead log before a commit copies them into the database file. A
#: checkpoint fsyncs, and a step whose commit checkpoints waits for it: fewer, larger
#: checkpoints cost a step less on average (SQLite's default is 1,000 pages, 4 MB)
WAL_AUTOCHECKPOINT = 4000
#: the write-ahead log is cut back to this many bytes after a checkpoint
WAL_SIZE_LIMIT = 32 * 1024 * 1024


#: this process's id, kept current across ``fork``: a store compares it at every write (it never
#: carries a connection into a child process), and ``os.getpid()`` is a system call each time
_PROCESS = [os.getpid()]
if hasattr(os, "register_at_fork"):  # POSIX; where there is no fork, the id never changes
    os.register_at_fork(after_in_child=lambda: _PROCESS.__setitem__(0, os.getpid()))


class SQLiteConnection:
    """The file, its connection and its transactions (see the module docstring)."""

    path: Path
    location: str
    readonly: bool
    #: the file's schema version (a read-only reader of an older store reads it as it is)
    version: int
    redactor: Redactor
    busy_timeout: float
    lock_timeout: float
    durable: bool
    _lock: threading.RLock
    _con: sqlite3.Connection | None
    _pid: int
    _caches: dict[str, RunCache]
    #: how many times a transaction waited for another writer and was tried again
    busy_retries: int

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

    def _latest_ids(self, con: sqlite3.Connection, n: int = 5) -> list[str]:
        """The ids of the runs created last (an unknown run's error names them, for reads and writes)."""
        return [r[0] for r in con.execute("SELECT id FROM runs ORDER BY created DESC, rowid DESC LIMIT ?", (n,))]

