"""Step cache keys: equal only for the same call, stable across processes, None when unsure or secret."""

from __future__ import annotations

import datetime
import decimal
import enum
import functools
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

from planbook.data.refs import resolve
from planbook.outbound.redact import Redactor
from planbook.store import Unrestorable, step_cache_key
from planbook.store.cachekey import code_fingerprint, fingerprint_problem, why_uncacheable
from planbook.store.values import REDACTED

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Mode(enum.Enum):
    fast = 1


@dataclass
class Box:
    w: int
    items: list[int]


@dataclass
class Login:
    user: str
    password: str


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


# ------------------------------------------------------------ dict order and secrets

def test_dict_order_is_part_of_the_key() -> None:
    """A tool that iterates a dict answers differently for another order: a different call."""
    assert key({"d": {"a": 1, "b": 2}}) != key({"d": {"b": 2, "a": 1}})
    assert key({"a": 1, "b": 2}) != key({"b": 2, "a": 1})
    assert key({"d": {"a": 1, "b": 2}}) == key({"d": {"a": 1, "b": 2}})


@pytest.mark.parametrize("args", [
    {"password": "4821"}, {"api_key": "k-1"}, {"opts": {"Authorization": "x"}}, {"login": Login("ada", "4821")},
    {"rows": [{"user": "ada", "secret_token": 7}]},
])
def test_a_call_with_a_secret_argument_has_no_key(args: dict[str, Any]) -> None:
    assert key(args) is None
    assert "secret" in (why_uncacheable(args) or "")


def test_a_string_the_store_would_hide_has_no_key() -> None:
    hides = Redactor(["open-sesame-42"])
    assert key({"note": "open-sesame-42"}) is not None  # without the store's redactor it is plain text
    assert step_cache_key("t", {"note": "open-sesame-42"}, secret_text=lambda s: hides.text(s) != s) is None
    assert step_cache_key("t", {"h": "Bearer abc.def"}, secret_text=lambda s: hides.text(s) != s) is None
    assert step_cache_key("t", {"note": "plain"}, secret_text=lambda s: hides.text(s) != s) is not None


# ------------------------------------------------------------ the code fingerprint

def fp(fn: Any) -> str | None:
    return code_fingerprint(fn)


def test_an_edited_default_changes_the_fingerprint() -> None:
    def f1(x: int, k: int = 1) -> int:
        return x * k

    def f2(x: int, k: int = 2) -> int:
        return x * k

    def g1(x: int, *, k: int = 1) -> int:
        return x * k

    def g2(x: int, *, k: int = 2) -> int:
        return x * k

    assert fp(f1) != fp(f2) and fp(g1) != fp(g2)
    assert fp(f1) is not None and fp(f1) == fp(f1)


def test_renamed_parameters_change_the_fingerprint() -> None:
    def minus1(a: int, b: int) -> int:
        return a - b

    def minus2(b: int, a: int) -> int:  # the same bytecode: called by name, it answers the opposite
        return b - a

    assert minus1.__code__.co_code == minus2.__code__.co_code
    assert fp(minus1) != fp(minus2)


def _decorate(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return wrapper.__wrapped__(*args, **kwargs)  # the wrapped function is not in the closure

    return wrapper


def test_a_decorated_tool_is_fingerprinted_through_wrapped() -> None:
    def one(x: int) -> int:
        return x + 1

    def two(x: int) -> int:
        return x + 2

    wrapped_one, wrapped_two = _decorate(one), _decorate(two)
    assert wrapped_one.__code__ is wrapped_two.__code__  # the wrapper's code alone cannot tell them apart
    assert fp(wrapped_one) != fp(wrapped_two) and fp(wrapped_one) is not None


def _mul(x: int, k: int) -> int:
    return x * k


def _add(x: int, k: int) -> int:
    return x + k


def test_a_partial_is_fingerprinted_with_its_function_and_bound_arguments() -> None:
    assert fp(functools.partial(_mul, k=2)) != fp(functools.partial(_add, k=2))
    assert fp(functools.partial(_mul, k=2)) != fp(functools.partial(_mul, k=3))
    assert fp(functools.partial(_mul, 2)) != fp(functools.partial(_mul, 3))
    assert fp(functools.partial(_mul, k=2)) == fp(functools.partial(_mul, k=2)) is not None


def _scaler(factor: Any) -> Any:
    def scale(x: int) -> Any:
        return x * factor

    return scale


def test_closure_values_are_part_of_the_fingerprint() -> None:
    assert fp(_scaler(2)) != fp(_scaler(3))
    assert fp(_scaler(2)) == fp(_scaler(2)) is not None
    assert fp(_scaler([1, 2])) != fp(_scaler([2, 1]))


@pytest.mark.parametrize("captured", [object(), threading.Lock(), Unrestorable("<x>", "X")])
def test_a_closure_without_a_content_form_cannot_be_fingerprinted(captured: Any) -> None:
    assert fp(_scaler(captured)) is None
    assert "factor" in (fingerprint_problem(_scaler(captured)) or "")


def test_a_closure_holding_a_secret_cannot_be_fingerprinted() -> None:
    def client(api_key: str) -> Any:
        def fetch(q: str) -> str:
            return f"{q}:{api_key}"

        return fetch

    assert fp(client("k-123")) is None and "api_key" in (fingerprint_problem(client("k-123")) or "")


def test_a_nested_helper_function_in_the_closure_is_followed() -> None:
    def make(helper: Any) -> Any:
        def tool(x: int) -> int:
            return helper(x)

        return tool

    assert fp(make(lambda x: x + 1)) != fp(make(lambda x: x + 2))


def test_a_recursive_function_has_a_fingerprint() -> None:
    def outer() -> Any:
        def fact(n: int) -> int:
            return 1 if n < 2 else n * fact(n - 1)

        return fact

    assert fp(outer()) is not None and fp(outer()) == fp(outer())


FINGERPRINT_SCRIPT = """
import functools
from planbook.store.cachekey import code_fingerprint

def make(rate):
    def tool(word: str, scale: float = 1.5) -> bool:
        return word in {"tea", "coffee", "cocoa", "mate"} and rate * scale > 0
    return tool

print(code_fingerprint(functools.partial(make({"b": 1, "a": frozenset({"x", "y", "z"})}), scale=2.0)))
"""


def test_fingerprints_are_stable_across_processes_and_hash_seeds() -> None:
    """A set constant in the code (``x in {...}``) must not make the fingerprint depend on the hash seed."""
    prints = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", FINGERPRINT_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=60, check=True)
        prints.add(out.stdout.strip())
    assert len(prints) == 1 and prints.pop().startswith("code:")


def test_a_docstring_that_looks_like_a_secret_does_not_stop_caching() -> None:
    def documented(q: str) -> str:
        """Call the service as https://user:pw@example.org/?token=abc (an example, not a secret)."""
        return q

    redactor = Redactor()
    assert code_fingerprint(documented, secret_text=lambda s: redactor.text(s) != s) is not None
    hides = _scaler("Bearer abc.def")  # a captured value is a value: hidden by the store, so never keyed
    assert code_fingerprint(hides, secret_text=lambda s: redactor.text(s) != s) is None


def test_an_edited_helper_function_of_the_same_module_changes_the_fingerprint() -> None:
    """A notebook's tool calling a helper defined in another cell: editing the helper changes the answer."""
    scope: dict[str, Any] = {"__name__": "__main__"}
    exec("def helper(x):\n    return x + 1\n\ndef tool(x):\n    return [helper(v) for v in x]\n", scope)
    before = fp(scope["tool"])
    exec("def helper(x):\n    return x + 2\n", scope)
    assert before is not None and fp(scope["tool"]) != before
    exec("def helper(x):\n    return x + 1\n", scope)
    assert fp(scope["tool"]) == before
    exec("def ping(n):\n    return n and pong(n - 1)\n\ndef pong(n):\n    return n and ping(n - 1)\n", scope)
    assert fp(scope["ping"]) is not None  # helpers calling each other end
