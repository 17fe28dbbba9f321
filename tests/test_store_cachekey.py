"""Step cache keys: equal only for the same call, stable across processes, None when unsure or secret."""

from __future__ import annotations

import datetime
import decimal
import enum
import os
import pathlib
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from planbook.refs import resolve
from planbook.store import Unrestorable, step_cache_key
from planbook.store.values import REDACTED

ROOT = pathlib.Path(__file__).resolve().parents[1]


class Mode(enum.Enum):
    fast = 1


@dataclass
class Box:
    w: int
    items: list[int]


class Query(BaseModel):
    text: str
    limit: int = 3


def key(args: dict[str, Any], tool: str = "search", version: str | None = None) -> str | None:
    return step_cache_key(tool, args, version=version)


def test_the_same_call_has_the_same_key() -> None:
    assert key({"q": "tea", "n": 3}) == key({"q": "tea", "n": 3})
    assert key({"q": "tea"}).startswith("v2:")


def test_a_changed_argument_changes_the_key() -> None:
    assert key({"q": "tea"}) != key({"q": "coffee"})
    assert key({"q": "tea"}) != key({"q": "tea", "n": 1})
    assert key({"q": "tea"}) != key({"query": "tea"})


def test_tool_and_version_are_part_of_the_key() -> None:
    assert key({"q": 1}, tool="search") != key({"q": 1}, tool="fetch")
    assert key({"q": 1}, version="1") != key({"q": 1}, version="2")
    assert key({"q": 1}) != key({"q": 1}, version="1")


def test_a_changed_upstream_result_changes_the_key_after_resolution() -> None:
    args = {"text": "$s1", "n": 2}
    before = key(resolve(args, {"s1": "old result"}))
    after = key(resolve(args, {"s1": "new result"}))
    again = key(resolve(args, {"s1": "old result"}))
    assert before != after and before == again
    nested = {"rows": ["$s1", {"from": "$s2"}]}
    assert key(resolve(nested, {"s1": [1], "s2": {"a": 1}})) != key(resolve(nested, {"s1": [1], "s2": {"a": 2}}))


def test_set_order_does_not_matter() -> None:
    assert key({"s": {"pear", "apple", "fig"}}) == key({"s": {"fig", "pear", "apple"}})
    assert key({"s": frozenset({3, 1})}) == key({"s": frozenset({1, 3})})


def test_list_order_matters() -> None:
    assert key({"l": [1, 2]}) != key({"l": [2, 1]})


@pytest.mark.parametrize("a, b", [
    (1, 1.0), (1, True), (0, False), (1, "1"), ([1, 2], (1, 2)), ({"a": 1}, [["a", 1]]), (None, "None"),
    ({1, 2}, [1, 2]), (b"ab", "ab"), (Mode.fast, 1), ("", None), (0.1 + 0.2, 0.3), (-0.0, 0.0),
    (["a", "b"], ["ab"]), ({"a": "b", "c": "d"}, {"a": "bc", "": "d"}),
])
def test_different_values_never_share_a_key(a: Any, b: Any) -> None:
    assert key({"v": a}) != key({"v": b})


@pytest.mark.parametrize("value", [
    Box(1, [2]), Query(text="x"), Mode.fast, decimal.Decimal("1.10"), uuid.UUID(int=7), pathlib.PurePosixPath("/a"),
    datetime.datetime(2024, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), datetime.date(2024, 1, 2),
    datetime.timedelta(seconds=3), 1 + 2j, float("nan"), float("inf"), 10**40, "ünï✓",
])
def test_values_with_a_content_form_are_cached(value: Any) -> None:
    assert key({"v": value}) is not None and key({"v": value}) == key({"v": value})


def test_content_forms_tell_values_apart() -> None:
    assert key({"v": Box(1, [2])}) != key({"v": Box(1, [3])})
    assert key({"v": Query(text="x")}) != key({"v": Query(text="x", limit=4)})
    assert key({"v": decimal.Decimal("1.10")}) != key({"v": decimal.Decimal("1.1")})


@pytest.mark.parametrize("value", [
    object(), threading.Lock(), lambda: 1, Unrestorable("<x>", "X"), REDACTED, {"deep": [object()]},
])
def test_values_without_a_stable_form_mean_do_not_cache(value: Any) -> None:
    assert key({"v": value}) is None


def test_a_cycle_means_do_not_cache() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert key({"v": loop}) is None
    shared = [1]
    assert key({"a": shared, "b": shared}) == key({"a": [1], "b": [1]})  # shared is not a cycle


SCRIPT = """
import datetime, sys
from planbook.store import step_cache_key
args = {"q": "tea", "n": 3, "tags": {"b", "a", "c"}, "opts": {"z": [1, 2.5, None, True], "a": (1, "x")},
        "when": datetime.date(2024, 1, 2), "blob": b"\\x00\\x01"}
print(step_cache_key("search", args, version="7"))
"""


def test_keys_are_stable_across_processes_and_hash_seeds() -> None:
    keys = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60,
                             check=True)
        keys.add(out.stdout.strip())
    assert len(keys) == 1 and keys.pop().startswith("v2:")
