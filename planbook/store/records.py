"""Steps, plans and events as plain, redacted records (what both stores keep), and back.

Args and results are not in a step's record: a store keeps them apart (the SQLite store
encodes them with :mod:`planbook.store.values`; the memory store keeps the objects).
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Event, Plan, PlanDiff, Status, Step
from .redact import Redactor
from .values import is_plain_json, shown

#: a step's fields that go into its record (every field but args and result)
RECORD_FIELDS = tuple(name for name in Step.model_fields if name not in ("args", "result"))
_STEP_FIELDS = frozenset(Step.model_fields)
PLAN_FIELDS = ("id", "goal", "title", "revision")


def step_record(step: Step, redactor: Redactor, redacted: list[Any] | None = None) -> dict[str, Any]:
    """The step's fields as JSON-able data, texts redacted; ``redacted``: paths of redacted args."""
    values = step.__dict__
    record: dict[str, Any] = {}
    for name in RECORD_FIELDS:
        value = values.get(name)
        if type(value) is str:
            value = redactor.text(value) if value else value
        elif isinstance(value, Status):
            value = value.value
        elif not is_plain_json(value):
            value = _jsonable(redactor.data(value), redactor)
        record[name] = value
    if redacted:
        record["_redacted"] = [list(p) for p in redacted]
    return record


def step_from_record(record: dict[str, Any], args: dict[str, Any], result: Any) -> Step:
    """A Step from its record (fields this planbook does not know are left out)."""
    fields = {k: v for k, v in record.items() if k in _STEP_FIELDS}
    fields["status"] = Status(fields.get("status", "not_started"))
    return Step.model_construct(**fields, args=args, result=result)


def redacted_paths(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(p) for p in record.get("_redacted", ())]


def plan_record(plan: Plan, redactor: Redactor) -> dict[str, Any]:
    return {name: redactor.text(v) if isinstance(v := getattr(plan, name), str) else v for name in PLAN_FIELDS}


def plan_from_record(record: dict[str, Any], steps: list[Step]) -> Plan:
    return Plan.model_construct(**{k: record[k] for k in PLAN_FIELDS if k in record}, steps=steps)


def event_record(event: Event, redactor: Redactor) -> dict[str, Any]:
    """An event with its data redacted and made JSON-able (objects become their repr)."""
    data = event.data
    if data:
        data = redactor.data(data)
        if not is_plain_json(data):
            data = _jsonable(data, redactor)
    return {"kind": event.kind, "time": event.time, "step": event.step, "revision": event.revision, "data": data}


def event_from_record(record: dict[str, Any]) -> Event:
    return Event.model_construct(**record)


def diff_records(revisions: list[PlanDiff], redactor: Redactor) -> list[dict[str, Any]]:
    return [redactor.data(d.model_dump(mode="json")) for d in revisions]


def diffs_from_records(records: list[dict[str, Any]]) -> list[PlanDiff]:
    return [PlanDiff.model_validate(r) for r in records]


def _jsonable(value: Any, redactor: Redactor) -> Any:
    """Plain JSON data: containers walked, str subclasses made str, other objects their repr."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v, redactor) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, redactor) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return json.loads(json.dumps(value))  # a str/int subclass (an enum) as its plain value
    return redactor.text(shown(value))
