"""Steps, plans and events as plain, redacted records (what both stores keep), and back.

Args and results are not in a step's record: a store keeps them apart (the SQLite store
encodes them with :mod:`planbook.store.values`; the memory store keeps the objects).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from ..data.errors import StoreError
from ..data.models import Event, Plan, PlanDiff, Status, Step
from ..data.secret import from_json_refs
from ..data.stepmark import StepMark
from ..outbound.checkpoint import mask_text
from ..outbound.redact import DeferredChecks, Redactor
from ..outbound.text import TEXT_LIMIT, bounded
from .oldmarks import needs_explicit_none, old_mark
from .values import REPR_LIMIT

#: a step's fields that go into its record (every field but args and result)
RECORD_FIELDS = tuple(name for name in Step.model_fields if name not in ("args", "result"))
_STEP_FIELDS = frozenset(Step.model_fields)
#: a step's record values from its ``__dict__`` in one C call (every field is in a model's ``__dict__``)
record_values = itemgetter(*RECORD_FIELDS)
_ALWAYS = object()  # never a field's value: the field is always written


def _default_object(name: str) -> Any:
    field = Step.model_fields[name]
    return _ALWAYS if field.is_required() or field.default_factory is not None else field.default


#: each record field's default object (a required field, or one made by a factory, has none)
_RECORD_DEFAULTS = tuple(map(_default_object, RECORD_FIELDS))
PLAN_FIELDS = ("id", "goal", "title", "revision")
#: a step's fields that hold free text (what a person, a model or a tool wrote): each is stored
#: cut to :data:`~planbook.outbound.text.TEXT_LIMIT` characters (a 2 MB error made 16 MB of store)
BOUNDED_FIELDS = ("task", "expect", "error", "traceback", "output", "notes")


def bounded_text(text: str, redactor: Redactor | DeferredChecks | None = None, limit: int = TEXT_LIMIT) -> str:
    """``text`` as a store keeps it: masked, then cut to ``limit`` characters, saying so.
    Masked first: a cut through a secret would leave a part of it that masking no longer knows."""
    if len(text) <= limit:
        return text
    return bounded(redactor.text(text) if redactor is not None else mask_text(text), limit)


def bounded_data(value: Any, redactor: Redactor | DeferredChecks | None = None) -> Any:
    """Plain data with every text longer than :data:`TEXT_LIMIT` cut (:func:`bounded_text`),
    through dicts, lists and tuples; ``value`` itself when none is."""
    if isinstance(value, str):
        return bounded_text(value, redactor) if len(value) > TEXT_LIMIT else value
    if isinstance(value, dict):
        out = {k: bounded_data(v, redactor) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, (list, tuple)):
        items = [bounded_data(v, redactor) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def _bounded_json(value: Any, redactor: Redactor | DeferredChecks) -> str:
    """``redactor.json_text(value)``, its long texts cut: only a text longer than the limit
    makes the JSON that long, so a short one (nearly all) costs one ``len``."""
    text = redactor.json_text(value)
    if len(text) > TEXT_LIMIT:
        cut = bounded_data(value, redactor)
        if cut is not value:
            return redactor.json_text(cut)
    return text


def step_json(step: Step, redactor: Redactor | DeferredChecks, redacted: list[Any] | None = None) -> str:
    """The step's fields (all but args and result) as redacted JSON; ``redacted``: the paths
    of args that were redacted (loading puts markers there).

    A field that holds its default object itself (``None``, ``""``, ``0``, ``not_started``)
    is left out: reading fills it in again (:func:`step_from_record`), and a step's record
    is written at least twice per execution, mostly defaults. Only its texts are checked for
    secrets: the field names are planbook's own, and numbers are never redacted."""
    record = step_record(step, redactor=redactor)
    if redacted:
        record["_redacted"] = [list(p) for p in redacted]
        return _step_text(record, redactor)
    texts = record_texts(record, step.needs)
    if texts is None:  # a field holding a list, a mapping or an object: the whole text is checked
        return _step_text(record, redactor)
    try:
        return redactor.json_record(record, texts)
    except (TypeError, ValueError):  # a text or number JSON cannot write (a huge int): its repr
        return _step_text(record, redactor)


def record_texts(record: dict[str, Any], needs: Any) -> list[str] | None:
    """Every text of a step's record, for the secret check (its values, and the ids in
    ``needs``, the step's list of them); None when a field holds anything else than a text,
    a number or None — a list or a mapping set on the step keeps its texts nested, so then
    the record's whole JSON is checked instead."""
    texts = []
    for value in record.values():
        if isinstance(value, str):
            texts.append(value)
        elif value is needs:
            if not all(isinstance(v, str) for v in value):
                return None
            texts.extend(value)
        elif value is not None and not isinstance(value, (int, float)):
            return None
    return texts


def step_record(step: Step, values: tuple[Any, ...] | None = None,
                redactor: Redactor | DeferredChecks | None = None) -> dict[str, Any]:
    """The step's record as data, not yet checked for secrets (see :func:`step_json`): the
    fields that do not hold their default object, its status as its name, its long texts
    masked (with ``redactor``, else the process's checkpoint) and cut. ``values``: the
    step's ``record_values`` when the caller has them already."""
    record: dict[str, Any] = {
        name: value for name, value, default in zip(
            RECORD_FIELDS, record_values(step.__dict__) if values is None else values, _RECORD_DEFAULTS)
        if value is not default
    }
    status = record.get("status")
    if status is not None:
        record["status"] = status._value_  # the member's value, without the enum's descriptor
    mark = record.get("mark")
    if mark is not None:
        record["mark"] = mark._value_ if isinstance(mark, StepMark) else StepMark(mark)._value_
    elif "notes" in record and needs_explicit_none(record):
        record["mark"] = None  # its note reads like an old mark: it has none (see .oldmarks)
    for name in BOUNDED_FIELDS:
        text = record.get(name)
        if text.__class__ is str and len(text) > TEXT_LIMIT:
            record[name] = bounded_text(text, redactor)
    return record


def _step_text(record: dict[str, Any], redactor: Redactor | DeferredChecks) -> str:
    try:
        return _bounded_json(record, redactor)
    except (TypeError, ValueError):
        return _bounded_json(_jsonable(redactor.data(record), redactor), redactor)


def step_from_record(record: dict[str, Any], args: dict[str, Any], result: Any) -> Step:
    """A Step from its record (fields this planbook does not know are left out). A record
    written before marks were typed has none: its mark is read from its note (:mod:`.oldmarks`)."""
    fields = {k: v for k, v in record.items() if k in _STEP_FIELDS}
    fields["status"] = Status(fields.get("status", "not_started"))
    if "mark" not in fields:
        fields.update(old_mark(fields))
    elif fields["mark"] is not None:
        fields["mark"] = StepMark(fields["mark"])
    # a Secret was written as its reference ({"$secret": "env:NAME"}): a Secret again, which the
    # resumed run's call reveals anew (an environment secret is read in this process)
    return Step.model_construct(**fields, args=from_json_refs(args), result=result)


def redacted_paths(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(p) for p in record.get("_redacted", ())]


def plan_json(plan: Plan, redactor: Redactor) -> str:
    """The plan's own fields (its steps are stored one by one)."""
    return _bounded_json({name: getattr(plan, name) for name in PLAN_FIELDS}, redactor)


def plan_from_record(record: dict[str, Any], steps: list[Step]) -> Plan:
    return Plan.model_construct(**{k: record[k] for k in PLAN_FIELDS if k in record}, steps=steps)


def _event_record(event: Event) -> dict[str, Any]:
    """An event's fields (an ``Event``'s own ``__dict__`` is exactly them, in order: not copied)."""
    if type(event) is Event:
        return event.__dict__
    return {"kind": event.kind, "time": event.time, "step": event.step, "revision": event.revision,
            "data": event.data}


def event_json(event: Event, redactor: Redactor | DeferredChecks) -> str:
    """An event as redacted JSON; objects in its data become their repr."""
    record = dict(_event_record(event))
    try:
        return _bounded_json(record, redactor)
    except (TypeError, ValueError, RecursionError):  # an object, a huge int, a deep or circular value
        try:
            record["data"] = _jsonable(redactor.data(event.data), redactor)
        except RecursionError:
            record["data"] = {"unstored": _shown(event.data, redactor)}
        return _bounded_json(record, redactor)


def events_json(events: Sequence[Event], redactor: Redactor | DeferredChecks) -> list[str]:
    """The events' JSON texts joined by commas, as one text (what a log row's event list
    holds): one encoder call and one secret check for a step's two events, not two. An event
    the fast path cannot write (an object in its data) makes each written by :func:`event_json`."""
    if not events:
        return []
    if len(events) == 1:
        return [event_json(events[0], redactor)]
    records = [_event_record(e) for e in events]
    try:
        return [_bounded_json(records, redactor)[1:-1]]
    except (TypeError, ValueError, RecursionError):
        return [event_json(e, redactor) for e in events]


def event_from_record(record: dict[str, Any]) -> Event:
    return Event.model_construct(**record)


def config_json(config: Mapping[str, Any] | None, redactor: Redactor) -> str:
    """A run's config as JSON (its secrets redacted): it must be plain data."""
    try:
        return redactor.json_text(dict(config or {}))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"a run's config must be JSON data (names, numbers, lists): {exc}") from None


def counters_json(counters: dict[str, Any], redactor: Redactor | DeferredChecks) -> str:
    try:
        return _bounded_json(counters, redactor)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"a run state field is not JSON data ({exc}): the store cannot keep it") from None


def diffs_json(revisions: list[PlanDiff], redactor: Redactor) -> str:
    return _bounded_json([d.model_dump(mode="json") for d in revisions], redactor)


def diffs_from_records(records: list[dict[str, Any]]) -> list[PlanDiff]:
    return [PlanDiff.model_validate(r) for r in records]


def _jsonable(value: Any, redactor: Redactor | DeferredChecks) -> Any:
    """Plain JSON data: containers walked, str subclasses made str, other objects their repr."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v, redactor) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, redactor) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        try:
            return json.loads(json.dumps(value))  # a str/int subclass (an enum) as its plain value
        except ValueError:  # an int past the limit of integer string conversion
            return _shown(value, redactor)
    return _shown(value, redactor)


def _shown(value: Any, redactor: Redactor | DeferredChecks) -> str:
    """``repr(value)`` masked, then cut to :data:`~planbook.store.values.REPR_LIMIT` (cut first,
    a secret across the cut would leave a part that masking no longer knows)."""
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not lose the run
        return f"<{type(value).__name__} object; its repr raised {type(exc).__name__}>"
    return bounded(redactor.text(text), REPR_LIMIT)
