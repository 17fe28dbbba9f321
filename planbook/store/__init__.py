"""Run stores: where runs persist so they can be listed, shown and resumed.

``open_store(store)`` turns what a user passes as ``store=`` into a store: ``None`` (no
store), a path (an SQLite file), ``":memory:"`` (a :class:`MemoryStore`) or a store
object. Where the magics and the CLI keep runs by default is :func:`default_store_path`:
``$PLANBOOK_HOME/runs.sqlite`` when ``PLANBOOK_HOME`` is set, else
``.planbook/runs.sqlite`` under the current directory. Plain ``planbook.run`` keeps no
store unless asked.

The SQLite store (and ``sqlite3``) is imported only when a path is opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from .base import CacheHit, RedactingStore, RunStateLike, RunStore, RunSummary, StoredRun
from .cachekey import step_cache_key
from .memory import MemoryStore
from .values import REDACTED, Redacted, Unrestorable

if TYPE_CHECKING:
    from .sqlite import SQLiteStore

# the store's errors (StoreError, StoreFormatError, RunNotFound, RunClaimed) are planbook's, like every error
__all__ = [
    "CacheHit", "MemoryStore", "REDACTED", "Redacted", "RunStateLike", "RunStore",
    "RunSummary",
    "SQLiteStore",
    "StoredRun", "Unrestorable", "default_store_path", "open_store",
    "step_cache_key", "STORE_FILE", "HOME_ENV",
]

#: the environment variable that moves the default store (``$PLANBOOK_HOME/runs.sqlite``)
HOME_ENV = "PLANBOOK_HOME"
#: the default store's file name, in ``$PLANBOOK_HOME`` or in ``.planbook/`` under the current directory
STORE_FILE = "runs.sqlite"


def default_store_path(env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> Path:
    """Where the magics and the CLI keep runs: ``$PLANBOOK_HOME/runs.sqlite``, else
    ``.planbook/runs.sqlite`` under the current directory."""
    env = os.environ if env is None else env
    home = env.get(HOME_ENV, "").strip()
    if home:
        return Path(home).expanduser() / STORE_FILE
    return Path(cwd if cwd is not None else os.getcwd()) / ".planbook" / STORE_FILE


@overload
def open_store(store: None, *, secrets: Iterable[str] = (), readonly: bool = False) -> None: ...
@overload
def open_store(store: str | os.PathLike[str] | RunStore, *, secrets: Iterable[str] = (),
               readonly: bool = False) -> RunStore: ...
@overload
def open_store(store: str | os.PathLike[str] | RunStore | None, *, secrets: Iterable[str] = (),
               readonly: bool = False) -> RunStore | None: ...
def open_store(store: str | os.PathLike[str] | RunStore | None, *, secrets: Iterable[str] = (),
               readonly: bool = False) -> RunStore | None:
    """A store from what ``store=`` was given: None, a path (``~`` is the home folder),
    ``":memory:"`` or a store object. ``readonly``: to list or show runs — a path with no
    store is an error, and nothing is created or changed."""
    if store is None:
        return None
    if isinstance(store, (str, os.PathLike)):
        text = os.fspath(store)
        if text == ":memory:":
            return MemoryStore(secrets=secrets)
        if not str(text).strip():
            raise ValueError("store='' is not a path: pass a file path (e.g. '.planbook/runs.sqlite'), "
                             "':memory:', a store object, or None for no store")
        from .sqlite import SQLiteStore  # lazily: sqlite3 is imported only when a path is opened

        return SQLiteStore(text, secrets=secrets, readonly=readonly)
    if isinstance(store, RunStore):
        if secrets:
            if not isinstance(store, RedactingStore):
                raise TypeError(f"{store!r} cannot take secrets=: give them to the store when creating it")
            store.redactor.add_secrets(secrets)
        return store
    raise TypeError(f"store= takes a path, ':memory:', a run store (e.g. planbook.store.MemoryStore()) or None; "
                    f"got {type(store).__name__}")


def __getattr__(name: str) -> Any:
    if name == "SQLiteStore":  # lazily: importing it imports sqlite3
        from .sqlite import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module 'planbook.store' has no attribute {name!r}")
