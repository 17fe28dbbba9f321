"""What a process knows of a run it writes to an SQLite store (:class:`RunCache`), and what a
step's row in the steps table was made of (:func:`row_signature`): what lets a step's write
skip encoding, and a save skip rows, that did not change since this process wrote them.

Split from :mod:`planbook.store.sqlite` (the write path, :mod:`planbook.store.sqlwrite`, is
its one user): it touches no file, only what the writes learned.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from ..data.models import Status, Step
from ..data.stepmark import StepMark
from ..outbound.redact import DeferredChecks, Redactor
from .rows import RECORD_FIELDS, record_values, step_json
from .values import Encoded, clone, encode_args, plain_json_text, same_plain

__all__ = ["ARGS_KEPT", "IMMUTABLE", "STARTED", "UNSTARTED", "RunCache", "comparable", "row_signature"]

#: encoded args kept per run (a step's args are written two or three times while it runs)
ARGS_KEPT = 256


class RunCache:
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
        #: a fork's parent run: its kept steps are written as references to that run's rows
        self.parent: str | None = None
        self.history = self.next_history = history
        self.events = self.next_events = events
        self.seq = self.next_seq = seq
        self.model_calls = self.next_model_calls = model_calls
        self.statuses = statuses
        self.done = self.next_done = sum(1 for v in statuses.values() if v == "completed")
        self._status_changes: dict[str, str] = {}
        self._statuses_replaced: dict[str, str] | None = None
        self.row_status = self.next_row_status = row_status
        #: the redactor's patterns when the run's goal, plan and step rows were last all written
        #: (None: not known): a secret learned since makes the next write write them all again
        self.masked_with: object = None
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
        #: :func:`row_signature` —, a copy of its args then when they were written as they are)
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
        """What the stored row of ``step_id`` was written from (see :func:`row_signature`)
        and the copy of its args, while that row is the step's latest state in the store (no
        log row changed it since); else None."""
        known = self.rows.get(step_id)
        if known is None or step_id in self._rows_stale:
            return None
        return known[1], known[2]

    def row_unchanged(self, step_id: str, position: int | None, signature: tuple[Any, ...] | None) -> bool:
        """True when the stored row of ``step_id`` was written from exactly this (see :func:`row_signature`)."""
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


#: values a row signature holds as they are (immutable: an edit replaces them, never changes them)
IMMUTABLE = frozenset({str, int, float, bool, type(None), Status, StepMark})
#: the record fields a step's start changes (see ``Runner._begin``), as (name, position)
STARTED = tuple((name, RECORD_FIELDS.index(name)) for name in (
    "status", "attempts", "started_at", "finished_at", "error", "traceback", "notes", "mark"))
#: the other record fields but ``needs`` (a list, compared by its copy), from a record's values;
#: a patch is written only when these are the same values, of the same types, as in the row
UNSTARTED = itemgetter(*(i for i, name in enumerate(RECORD_FIELDS)
                          if name != "needs" and i not in {i for _, i in STARTED}))


def row_signature(step: Step, args: Encoded, redactor: Redactor,
                   values: tuple[Any, ...] | None = None) -> tuple[Any, ...] | None:
    """What a step's row is made of, for telling whether it changed without encoding it again:
    its fields and their types (``needs`` also copied: a list edited in place is never
    mistaken for the one written), its args' encoding, its result when it is an immutable
    value, and the redactor's secrets then (a secret learned since makes it written again).
    None when that cannot be told cheaply (a mutable result): the row is then always written.
    Cheap, as every row written computes it; :func:`comparable` checks the rest before a
    row is skipped."""
    result = step.result
    if type(result) not in IMMUTABLE:
        return None
    if values is None:
        values = record_values(step.__dict__)
    return (values, tuple(map(type, values)), tuple(step.needs), args.kind, args.payload, args.shown,
            type(result), result, redactor.patterns)


def comparable(step: Step) -> bool:
    """True when every field of the step's record is an immutable value (``needs`` a list of
    names, compared by its copy): only then may an equal signature stand for an unchanged row."""
    for value in record_values(step.__dict__):
        if type(value) not in IMMUTABLE and not (value is step.needs and all(type(v) is str for v in value)):
            return False
    return True

