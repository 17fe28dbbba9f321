"""The SQLite store's log (schema versions 3 to 5): one row per write of a run.

A step used to cost seven statements in one transaction (its history entry, two events,
two step rows, the run's row), each touching its own table and index: about seven pages
of the write-ahead log where a bare transaction writes two. Now each write of a run
appends **one** row to ``log``: a JSON document of what the run gained since the last
write, which a reader replays in order::

    {"h": [ENTRY, ...],   history entries: {"r": RECORD, "a": VALUE, "v": VALUE}
     "e": [EVENT, ...],   events, as stored before
     "s": [DELTA, ...],   steps whose status or result changed: an ENTRY, {"h": N} —
                          "as history entry N" (a step that just ended is its entry) —,
                          or {"p": PATCH} (schema version 4): the step's row in the steps
                          table with these fields changed ({"id": ..., "status": ...,
                          "attempts": ..., "started_at": ...} for a step going in progress)
     "c": COUNTERS}       the run's counters, when more than ``executions`` (a column) changed

or, as a run's first row (schema version 5), ``{"b": [ENTRY, ...]}``: the plan's steps as
the run was created, in order — a fresh plan is written as this one row, not a row per step
in the steps table. Until the run's first save they are its steps' base (what a PATCH
changes); that save writes every step to the steps table, which is the base from then on.

A VALUE is ``{"json": DATA}``, ``{"pickle": BASE64, "meta": META}`` or ``{"repr": TEXT,
"meta": META}`` (see :mod:`planbook.store.values`). The ``steps`` table and the run's row
are brought up to date only by a save (a replan, a pause, a resumed run): the run's
``log_seq`` is the last log row they include, so a reader applies the step deltas and
counters of later rows only. Every piece is encoded once, when it is written, and the
document is joined from the pieces' JSON text, never encoded again.

**A damaged row** (a row that is not what planbook wrote: bad JSON, a NULL, a text where a
time belongs) is one :class:`~planbook.data.errors.StoreFormatError` naming the store, the
run, the row and the damage (:class:`Reading`), never a raw ``JSONDecodeError`` or
``TypeError``; ``list_runs`` marks such a run (:func:`summary_of`) and lists the others.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..data.errors import StoreFormatError
from ..data.models import Event, Step
from .base import RunSummary
from .rows import event_from_record, redacted_paths, step_from_record
from .values import UNRESTORABLE_ARGS, Encoded, KeptResult, clone, decode, place_markers

#: a log row's id is its run's ``log_key`` shifted by this many bits, plus its sequence
#: number: a run's rows are one range of the table's own b-tree, so a write touches that
#: tree alone (an index on (run, seq) would be a second tree to write at every step), and
#: a row of about a kilobyte is kept in a table page, where a WITHOUT ROWID table would
#: move most of it to an overflow page
SEQ_BITS = 32
SEQ_MASK = (1 << SEQ_BITS) - 1
LOG_TABLE = """
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    executions INTEGER NOT NULL,
    model_calls INTEGER NOT NULL,
    done INTEGER NOT NULL,
    history INTEGER NOT NULL,
    events INTEGER NOT NULL,
    record TEXT NOT NULL
)
"""
INSERT_LOG = ("INSERT INTO log (id, time, executions, model_calls, done, history, events, record)"
              " VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
#: SQL: the first and last possible log row id of the run ``r``
RUN_FIRST = f"(r.log_key << {SEQ_BITS})"
RUN_LAST = f"((r.log_key << {SEQ_BITS}) + {SEQ_MASK})"


def log_id(log_key: int, seq: int) -> int:
    """The id of a run's log row number ``seq``."""
    return (log_key << SEQ_BITS) + seq


def run_range(log_key: int) -> tuple[int, int]:
    """The first and last possible log row id of a run (for ``id BETWEEN ? AND ?``)."""
    return log_key << SEQ_BITS, (log_key << SEQ_BITS) + SEQ_MASK


def meta_json(enc: Encoded) -> str | None:
    """What a value that is not plain JSON needs to be shown and explained: its repr, type, why."""
    if enc.kind == "json":
        return None
    return json.dumps({"shown": enc.shown, "type": enc.type, "reason": enc.reason})


def value_json(kind: str, payload: Any, meta: str | None) -> str:
    """A stored value (its kind, payload and meta JSON) as a VALUE of the log."""
    if kind == "json":
        return '{"json":' + (payload if payload is not None else "null") + "}"
    if kind == "pickle":
        text = base64.b64encode(bytes(payload)).decode("ascii")
    else:
        text = payload.decode() if isinstance(payload, bytes) else (payload or "")
    return '{"' + kind + '":' + json.dumps(text) + ',"meta":' + (meta or "null") + "}"


def entry_json(record: str, args: str, result: str) -> str:
    """A history entry or a step delta: its record, args VALUE and result VALUE."""
    return '{"r":' + record + ',"a":' + args + ',"v":' + result + "}"


def document(history: list[str], events: list[str], deltas: list[str], counters: str | None) -> str:
    """One log row's JSON, joined from JSON texts."""
    parts = []
    if history:
        parts.append('"h":[' + ",".join(history) + "]")
    if events:
        parts.append('"e":[' + ",".join(events) + "]")
    if deltas:
        parts.append('"s":[' + ",".join(deltas) + "]")
    if counters is not None:
        parts.append('"c":' + counters)
    return "{" + ",".join(parts) + "}"


def value_of(stored: dict[str, Any]) -> Any:
    """A VALUE back (an :class:`~planbook.store.values.Unrestorable` when it cannot be)."""
    if "json" in stored:
        return stored["json"]
    if "kept" in stored:
        return KeptResult(str(stored["kept"]))
    meta = stored.get("meta") or {}
    if "pickle" in stored:
        return decode("pickle", base64.b64decode(stored["pickle"]), meta.get("shown"), meta.get("type", ""))
    if "repr" in stored:
        return decode("repr", stored["repr"], None, meta.get("type", ""), meta.get("reason"))
    raise ValueError(f"unknown stored value {sorted(stored)}: this store was written by a newer planbook")


def step_of(entry: dict[str, Any], result: Any, patch: dict[str, Any] | None = None) -> Step:
    """A Step from an ENTRY (its result given: a history entry and the plan's step share it);
    ``patch``: the fields a later log row changed (a PATCH)."""
    fields = {**entry["r"], **patch} if patch else entry["r"]
    args = value_of(entry["a"])
    if not isinstance(args, dict):  # pickled args that no longer load: the step cannot run as it was
        args = {UNRESTORABLE_ARGS: args}
    return step_from_record(fields, place_markers(clone(args), redacted_paths(fields)), result)


class Replay:
    """A run's log read in order: its history, events, and — from the rows after the last
    save — the latest state of each step that changed and the latest counters."""

    def __init__(self, log_seq: int, *, plan_only: bool = False) -> None:
        self.log_seq = log_seq
        #: only the plan's steps are wanted (a fork reads its parent so): no history steps, no events
        self.plan_only = plan_only
        self.history: list[Step] = []
        self.results: list[Any] = []
        self.events: list[Event] = []
        #: step id -> (its ENTRY, its result) as the rows after the last save left it
        self.changed: dict[str, tuple[dict[str, Any], Any]] = {}
        #: step id -> the fields that differ from its row in the steps table (a PATCH), when
        #: the rows after the last save changed it only so
        self.patched: dict[str, dict[str, Any]] = {}
        self.counters: dict[str, Any] | None = None
        #: the ENTRY of each step as the run was created, when no save wrote the steps table since
        self.created: list[dict[str, Any]] | None = None
        self.executions: int | None = None
        self.last_time: float | None = None

    def add(self, seq: int, time: float, executions: int, record: str) -> None:
        doc = parsed(record, dict)
        first = len(self.results)
        entries = doc.get("h", ())
        if self.plan_only:
            self.results.extend(value_of(entry["v"]) for entry in entries)
        else:
            for entry in entries:
                result = value_of(entry["v"])
                self.results.append(result)
                self.history.append(step_of(entry, result))
            self.events.extend(event_from_record(e) for e in doc.get("e", ()))
        if seq <= self.log_seq:
            return  # the steps table and the run's row include this row's steps and counters
        self.last_time, self.executions = time, executions
        if "b" in doc:
            self.created = doc["b"]
        for delta in doc.get("s", ()):
            if "p" in delta:
                patch = delta["p"]
                step_id = patch["id"]
                if step_id in self.changed:  # a writer patches only a step no later row changed
                    raise ValueError(f"log row {seq} patches step {step_id!r}, which an earlier row replaced")
                self.patched[step_id] = patch
                continue
            if "h" in delta:
                entry = entries[delta["h"] - first]
                changed = (entry, self.results[delta["h"]])
            else:
                changed = (delta, value_of(delta["v"]))
            step_id = changed[0]["r"]["id"]
            self.changed[step_id] = changed
            self.patched.pop(step_id, None)
        if "c" in doc:
            self.counters = doc["c"]

    def counters_over(self, stored: dict[str, Any]) -> dict[str, Any]:
        """The run's counters: those of its last save (``stored``) or of a later log row, with
        the executions of the last row (a row carries its counters only when more than the
        executions changed)."""
        counters = dict(self.counters if self.counters is not None else stored)
        if self.executions is not None:
            counters["executions"] = self.executions
        return counters


def statuses_after(log_seq: int, rows: Iterable[tuple[int, int, str]]) -> dict[str, str]:
    """Step id -> status, as the log rows after the last save changed them. ``rows``: (seq,
    history entries in the run after the row, its record), in order."""
    out: dict[str, str] = {}
    for seq, history, record in rows:
        if seq <= log_seq:
            continue
        doc = json.loads(record)
        for entry in doc.get("b", ()):
            out[entry["r"]["id"]] = entry["r"].get("status", "not_started")
        entries = doc.get("h", [])
        first = history - len(entries)
        for delta in doc.get("s", ()):
            if "p" in delta:  # a patch names the status only when it changed it
                if "status" in delta["p"]:
                    out[delta["p"]["id"]] = delta["p"]["status"]
                continue
            fields = entries[delta["h"] - first]["r"] if "h" in delta else delta["r"]
            out[fields["id"]] = fields.get("status", "not_started")
    return out


# ------------------------------------------------------------ damaged rows
#: what reading a row that planbook did not write that way raises: the data is wrong, not the reader
DATA_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError)
#: JSON's names for what ``json.loads`` gives, and for what SQLite's ``json_type`` answers
_JSON_NAMES: dict[Any, str] = {dict: "object", list: "array", str: "string", int: "number", float: "number",
                               bool: "boolean", type(None): "null", "integer": "number", "real": "number",
                               "text": "string", "true": "boolean", "false": "boolean"}


class Damage(ValueError):
    """Stored data that is not what planbook writes; the text follows the part's name
    (``its plan (runs.plan)`` + ``is not JSON (...)``)."""


def damaged(run_id: str, location: str, what: str) -> StoreFormatError:
    """The one error for a run that cannot be read: which store, which run, what is damaged,
    and what the user can do (the store's other runs are not affected)."""
    return StoreFormatError(
        f"run {run_id!r} in the run store {location} is damaged: {what}. planbook cannot show or resume it; "
        f"the store's other runs are readable (planbook runs lists them): restore the store from a backup, "
        f"or delete this run with planbook.store.SQLiteStore({location!r}).delete_run({run_id!r})")


def shown(value: Any, limit: int = 40) -> str:
    """A stored value in a message: its repr (control characters escaped), cut short."""
    if value is None:
        return "NULL"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _not_json(found: str, kind: str) -> str:
    return f"is JSON {found}, not {'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def parsed(text: Any, kind: type) -> Any:
    """The JSON ``text`` of a column, which must hold ``kind`` (dict or list); :class:`Damage` else."""
    if not isinstance(text, (str, bytes)):
        raise Damage(f"is {shown(text)}, not JSON text")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Damage(f"is not JSON ({exc})") from None
    except RecursionError:
        raise Damage("is not JSON planbook writes (it is nested too deeply to read)") from None
    if not isinstance(value, kind):
        raise Damage(_not_json(_JSON_NAMES.get(type(value), type(value).__name__), _JSON_NAMES[kind]))
    return value


def number(value: Any) -> float:
    """A time column, which must hold a number; :class:`Damage` else."""
    if type(value) not in (int, float):
        raise Damage(f"is {shown(value)}, not a number")
    return value


def whole(value: Any) -> int:
    """A key column, which must hold an integer; :class:`Damage` else."""
    if type(value) is not int:
        raise Damage(f"is {shown(value)}, not an integer")
    return value


class Reading:
    """Which part of a run a reader is at, so that an error in what it reads (see
    :data:`DATA_ERRORS`) leaves as one :class:`StoreFormatError` naming the store, the run,
    the part and the damage. ``part`` is a text, or — set for each row, so formatted only
    when a row is damaged — a ``(template, value, ...)`` tuple."""

    def __init__(self, run_id: str, location: str) -> None:
        self.run_id, self.location = run_id, location
        self.part: str | tuple[Any, ...] = "its row in the runs table"

    def __enter__(self) -> "Reading":
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, DATA_ERRORS):
            part = self.part if isinstance(self.part, str) else self.part[0].format(*self.part[1:])
            what = str(exc) if isinstance(exc, Damage) else f"cannot be read ({type(exc).__name__}: {exc})"
            raise damaged(self.run_id, self.location, f"{part} {what}") from None


#: what ``list_runs`` selects of each run (in this order), the words for it in a message,
#: the types it may hold, and the value a summary has when it holds another
SUMMARY_COLUMNS: tuple[tuple[str, str, tuple[type, ...], Any], ...] = (
    ("run_id", "its id (runs.id)", (str,), "?"),
    ("goal", "its goal (runs.goal)", (str,), ""),
    ("status", "its status (runs.status)", (str,), "?"),
    ("reason", "its reason (runs.reason)", (str, type(None)), None),
    ("started", "its creation time (runs.created)", (int, float), 0.0),
    ("updated", "its update time", (int, float), 0.0),
    ("executions", "its executions", (int,), 0),
    ("model_calls", "its model calls", (int,), 0),
    ("writer_pid", "its writer's process id (runs.writer_pid)", (int, type(None)), None),
    ("plan_id", "its plan id", (str, type(None)), None),
    ("writer_host", "its writer's host (runs.writer_host)", (str, type(None)), None),
    ("writer_since", "its writer's start (runs.writer_since)", (int, float, type(None)), None),
    ("steps_done", "its completed steps", (int,), 0),
    ("steps_total", "its number of steps", (int,), 0),
)
#: the JSON of a run's row that ``list_runs`` checks (in SQL, reading no row but those the
#: listing reads; its last log row is checked too): (the words for it, the column, its JSON type)
SUMMARY_JSON: tuple[tuple[str, str, str], ...] = (
    ("its config (runs.config)", "r.config", "object"), ("its plan (runs.plan)", "r.plan", "object"),
    ("its counters (runs.counters)", "r.counters", "object"),
    ("its revisions (runs.revisions)", "r.revisions", "array"),
)
LAST_LOG_ROW = ("its last log row", "l.record", "object")


def json_check(column: str, kind: str) -> str:
    """SQL: NULL when ``column`` holds JSON text of ``kind`` (``object``, ``array``), else
    what it holds instead (``json_type`` of text that is not JSON would end the whole query)."""
    return (f"CASE WHEN {column} IS NULL THEN 'NULL' WHEN NOT json_valid({column}) THEN 'not JSON'"
            f" WHEN json_type({column}) <> '{kind}' THEN json_type({column}) END")


def summary_of(values: Sequence[Any], checks: Sequence[str | None]) -> RunSummary:
    """A run's line in ``list_runs`` from its :data:`SUMMARY_COLUMNS` values and the answers of
    its :func:`json_check` s (:data:`SUMMARY_JSON`, then :data:`LAST_LOG_ROW` when it has one):
    a run whose row is damaged is listed, its unusable values replaced, with ``damage`` saying
    what — never dropped, never the end of the listing."""
    fields: dict[str, Any] = {}
    problems: list[str] = []
    for (name, words, kinds, default), value in zip(SUMMARY_COLUMNS, values):
        if type(value) in kinds:
            fields[name] = value
        else:
            fields[name] = default
            problems.append(f"{words} is {shown(value)}, not {'a text' if str in kinds else 'a number'}")
    if fields["run_id"] == "?" and values[0] is not None:
        fields["run_id"] = shown(values[0])
    for (words, _, kind), found in zip((*SUMMARY_JSON, LAST_LOG_ROW), checks):
        if found == "NULL":
            problems.append(f"{words} is NULL, not JSON text")
        elif found == "not JSON":
            problems.append(f"{words} is not JSON")
        elif found is not None:
            problems.append(f"{words} {_not_json(_JSON_NAMES.get(found, found), kind)}")
    return RunSummary(**fields, damage="; ".join(problems) or None)
