"""The step cache of an SQLite run store: a step's result kept under the key
:func:`~planbook.store.cachekey.step_cache_key` gives, in the ``cache`` table. A result is
kept only when it can be restored later, and redacted as every stored value is (by the
store's :class:`~planbook.outbound.redact.Redactor`); a result that no longer loads, or a
damaged row (text that is not JSON, a meta that is not, an unknown kind, no result at all),
is a miss: the call runs and its result replaces the row.
"""

from __future__ import annotations

import time
from typing import Any

from ..outbound.redact import Redactor
from .base import CacheHit
from .logrows import meta_json
from .sqlconn import SQLiteConnection
from .sqlread import stored_value
from .values import Unrestorable, encode

__all__ = ["SQLiteStepCache"]


class SQLiteStepCache(SQLiteConnection):
    """The step cache of :class:`~planbook.store.sqlite.SQLiteStore`."""

    # -------------------------------------------------------------- cache
    def cache_get(self, key: str) -> CacheHit | None:
        row = self._read(lambda con: con.execute(
            "SELECT tool, run_id, step_id, created, result_kind, result, result_meta FROM cache WHERE key = ?", (key,)
        ).fetchone())
        if row is None:
            return None
        tool, run_id, step_id, created, kind, payload, meta = row
        if payload is None:
            return None  # a damaged row (no result at all): a miss, not None served as the answer
        try:
            result = stored_value(kind, payload, meta)
        except Exception:  # noqa: BLE001 - damaged JSON, meta or kind: a miss (the call runs and rewrites the row)
            return None
        if isinstance(result, Unrestorable):
            return None  # a pickle that no longer loads is a miss, not a wrong hit
        return CacheHit(key=key, result=result, tool=tool, run_id=run_id, step_id=step_id, created=created)

    def cache_put(self, key: str, result: Any, *, tool: str, run_id: str, step_id: str) -> bool:
        redactor: Redactor = self.redactor  # redacted as every value the store keeps
        enc = encode(result, redactor)
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

