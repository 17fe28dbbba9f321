"""Results and args through a store: JSON when exact, pickle when possible, else a marker."""

from __future__ import annotations

import enum
import pickle
import sys
import threading
import types
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from planbook.data.models import Plan, Status, Step
from planbook.engine.state import RunState
from planbook.outbound.redact import Redactor
from planbook.store import MemoryStore, Redacted, Unrestorable
from planbook.store.sqlite import SQLiteStore
from planbook.store.values import decode, encode, encode_args, is_plain_json


class Colour(str, enum.Enum):
    red = "red"


@dataclass
class Point:
    x: int
    y: int


def store_and_load(store: Any, result: Any, args: dict[str, Any] | None = None) -> Step:
    """Write one completed step with ``result`` and read it back through a fresh store object."""
    plan = Plan(id="p", steps=[Step(id="a", tool="t", args=args or {})])
    state = RunState(plan=plan)
    run_id = store.create_run(plan, config={})
    step = plan.steps[0]
    step.set_state(status=Status.completed, result=result)
    state.history.append(step.snapshot())
    state.executions = 1
    store.record_step(run_id, step, state)
    fresh = SQLiteStore(store.path) if isinstance(store, SQLiteStore) else store
    loaded = fresh.load_run(run_id)
    assert repr(loaded.history[0].result) == repr(loaded.plan.steps[0].result)
    return loaded.plan.steps[0]


@pytest.mark.parametrize("value", [
    None, 0, -3, 2**80, 1.5, float("inf"), True, "text", "ünïcode ✓", [], {}, [1, "a", None, [2.5]],
    {"nested": {"list": [1, 2, {"deep": False}]}},
])
def test_plain_data_is_stored_as_json_and_comes_back_equal(value: Any, tmp_path: Path) -> None:
    assert encode(value, Redactor()).kind == "json"
    back = store_and_load(SQLiteStore(tmp_path / "r.sqlite"), value).result
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("value", [
    (1, 2), {1: "int key"}, Colour.red, OrderedDict(a=1), {1.5, 2.5}, b"bytes", Point(1, 2), [("a", 1)],
    {"when": __import__("datetime").date(2024, 1, 2)},
])
def test_values_json_would_change_are_pickled_and_come_back_with_their_types(value: Any, tmp_path: Path) -> None:
    encoded = encode(value, Redactor())
    assert encoded.kind == "pickle"
    back = store_and_load(SQLiteStore(tmp_path / "r.sqlite"), value).result
    assert type(back) is type(value)
    assert back == value


def test_nan_comes_back_as_nan(tmp_path: Path) -> None:
    import math

    back = store_and_load(SQLiteStore(tmp_path / "r.sqlite"), [float("nan")], args={}).result
    assert math.isnan(back[0])


def test_an_unpicklable_result_loads_as_a_marker_with_its_repr(tmp_path: Path) -> None:
    value = {"lock": threading.Lock()}
    back = store_and_load(SQLiteStore(tmp_path / "r.sqlite"), value).result
    assert isinstance(back, Unrestorable)
    assert "lock" in back.repr and back.type == "dict"
    assert "neither written as JSON nor pickled" in back.reason
    assert repr(back).startswith("<unrestorable dict:")


def test_the_memory_store_keeps_any_result_by_reference() -> None:
    value = {"lock": threading.Lock()}
    assert store_and_load(MemoryStore(), value).result is value


def test_a_pickle_whose_class_is_gone_loads_as_a_marker(tmp_path: Path) -> None:
    module = types.ModuleType("vanishing_module")
    exec("class Thing:\n    def __repr__(self): return 'Thing()'\n", module.__dict__)
    sys.modules["vanishing_module"] = module
    try:
        store = SQLiteStore(tmp_path / "r.sqlite")
        store_and_load(store, module.Thing())
    finally:
        del sys.modules["vanishing_module"]
    back = SQLiteStore(tmp_path / "r.sqlite").load_run(store.latest_run_id()).plan.steps[0].result
    assert isinstance(back, Unrestorable)
    assert back.repr == "Thing()" and back.type == "vanishing_module.Thing"
    assert "no longer loads" in back.reason


@pytest.mark.parametrize("payload", ["text, not a pickle's bytes", "", None])
def test_a_pickle_row_without_bytes_loads_as_a_marker(payload: str | None) -> None:
    """A damaged row (SQLite keeps whatever type was written): a marker that says so, as before."""
    back = decode("pickle", payload, "shown", "mod.T")
    assert isinstance(back, Unrestorable) and back.repr == "shown" and "no longer loads" in back.reason


def test_a_huge_repr_is_cut() -> None:
    class Big:
        def __repr__(self) -> str:
            return "x" * 100_000

        def __reduce__(self) -> Any:
            raise TypeError("no")

    encoded = encode(Big(), Redactor())
    assert encoded.kind == "repr" and len(encoded.payload) <= 2000


def test_a_repr_that_raises_does_not_lose_the_run() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("boom")

        def __reduce__(self) -> Any:
            raise TypeError("no")

    back = decode(*_columns(encode(Broken(), Redactor())))
    assert isinstance(back, Unrestorable) and "repr raised RuntimeError" in back.repr


def _columns(enc: Any) -> tuple[Any, ...]:
    return enc.kind, enc.payload, enc.shown, enc.type, enc.reason


def test_plain_json_is_exact() -> None:
    assert is_plain_json({"a": [1, 2.0, None, True, "s"]})
    assert not is_plain_json({"a": (1, 2)})
    assert not is_plain_json({1: "a"})
    assert not is_plain_json(Colour.red)


def test_args_that_cannot_be_pickled_keep_the_others_and_mark_that_one(tmp_path: Path) -> None:
    lock = threading.Lock()
    step = store_and_load(SQLiteStore(tmp_path / "r.sqlite"), 1, args={"n": 3, "guard": lock, "items": (1, 2)})
    assert step.args["n"] == 3 and step.args["items"] == (1, 2)
    assert isinstance(step.args["guard"], Unrestorable)


def test_unfinished_steps_with_args_that_were_not_stored_are_named(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "r.sqlite")
    plan = Plan(id="p", steps=[Step(id="a", tool="t", args={"guard": threading.Lock()}),
                               Step(id="b", tool="t", args={"api_key": "k-123456", "n": 1})])
    run_id = store.create_run(plan, config={})
    loaded = SQLiteStore(store.path).load_run(run_id)
    assert loaded.missing_args() == {"a": ["guard"], "b": ["api_key"]}
    assert isinstance(loaded.plan.steps[1].args["api_key"], Redacted)


def test_markers_pickle_as_themselves() -> None:
    from planbook.store import REDACTED

    assert pickle.loads(pickle.dumps(REDACTED)) is REDACTED
    marker = Unrestorable("r", "T", "why")
    assert pickle.loads(pickle.dumps(marker)) == marker


def test_args_encoded_once_per_object() -> None:
    args = {"x": 1}
    first, _ = encode_args(args, Redactor())
    assert first.kind == "json" and first.payload == '{"x":1}'
