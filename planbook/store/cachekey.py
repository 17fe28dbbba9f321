"""The step cache key: a stable hash of a tool call.

Two calls get the same key only when the tool name, the tool's declared source version
(when given) and the resolved arguments (after ``$id`` references were replaced by the
results they name) are equal — so a changed argument or a changed upstream result is a
miss. The key is the same across processes and Python runs: no ``hash()`` (salted per
process), dict order and set order do not matter, and every value is written with its
type (``1``, ``1.0``, ``True`` and ``"1"`` differ; so do a list and a tuple).

A value with no stable content form (an arbitrary object, a cycle, a value that could not
be restored from the store) gives ``None``: "do not cache", never a wrong hit.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import math
import pathlib
import uuid
from collections.abc import Mapping
from typing import Any

from .values import Redacted, Unrestorable

#: bumped when the encoding below changes, so old keys miss instead of colliding
KEY_VERSION = 1


class Uncacheable(Exception):
    """Raised inside the encoder for a value with no stable content form."""


def step_cache_key(tool: str, args: Mapping[str, Any], *, version: str | None = None) -> str | None:
    """The cache key of calling ``tool`` with resolved ``args``, or ``None`` when it has none."""
    parts: list[bytes] = []
    try:
        _encode({"tool": tool, "version": version, "args": dict(args)}, parts, set())
    except (Uncacheable, RecursionError):
        return None
    digest = hashlib.sha256(b"".join(parts)).hexdigest()
    return f"v{KEY_VERSION}:{digest}"


def _text(tag: bytes, text: str, out: list[bytes]) -> None:
    data = text.encode("utf-8", "surrogatepass")
    out.append(tag + str(len(data)).encode() + b":" + data)


def _encode(value: Any, out: list[bytes], active: set[int]) -> None:
    """Append a self-delimiting, typed, order-free encoding of ``value`` to ``out``."""
    t = type(value)
    if value is None:
        out.append(b"N")
    elif t is bool:
        out.append(b"T" if value else b"F")
    elif t is int:
        _text(b"i", str(value), out)
    elif t is float:
        # repr is exact and stable for floats; nan and infinities included
        _text(b"f", "nan" if math.isnan(value) else repr(value), out)
    elif t is str:
        _text(b"s", value, out)
    elif t is bytes:
        out.append(b"b" + str(len(value)).encode() + b":" + value)
    elif t in (list, tuple, dict, set, frozenset) or isinstance(value, Mapping):
        key = id(value)
        if key in active:
            raise Uncacheable("a container holds itself")
        active.add(key)
        try:
            if t is list or t is tuple:
                out.append((b"l" if t is list else b"t") + str(len(value)).encode() + b"[")
                for item in value:
                    _encode(item, out, active)
                out.append(b"]")
            elif t is set or t is frozenset:
                _unordered(b"S", [_encoded(v, active) for v in value], out)
            else:
                tag = b"d" if t is dict else b"m" + _qualname(t).encode() + b"|"
                _unordered(tag, [_encoded(k, active) + _encoded(v, active) for k, v in value.items()], out)
        finally:
            active.discard(key)
    else:
        _encode_object(value, out, active)


def _encoded(value: Any, active: set[int]) -> bytes:
    parts: list[bytes] = []
    _encode(value, parts, active)
    return b"".join(parts)


def _unordered(tag: bytes, items: list[bytes], out: list[bytes]) -> None:
    items.sort()
    out.append(tag + str(len(items)).encode() + b"{")
    out.extend(items)
    out.append(b"}")


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _encode_object(value: Any, out: list[bytes], active: set[int]) -> None:
    """Values with a well-defined content: enums, numbers, dates, paths, dataclasses, pydantic models."""
    t = type(value)
    name = _qualname(t)
    if isinstance(value, enum.Enum):
        _text(b"e", name, out)
        _encode(value.value, out, active)
    elif isinstance(value, (Unrestorable, Redacted)):
        raise Uncacheable("a value that was not restored from the store")
    elif isinstance(value, (int, float, str, bytes)):  # subclasses: the type is part of the value
        _text(b"x", name, out)
        base = next(b for b in (int, float, str, bytes) if isinstance(value, b))
        _encode(base(value), out, active)
    elif isinstance(value, (decimal.Decimal, uuid.UUID, pathlib.PurePath, datetime.date, datetime.time,
                            datetime.timedelta, complex)):
        _text(b"v", name, out)
        _text(b"s", value.isoformat() if isinstance(value, (datetime.date, datetime.time)) else str(value), out)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        _text(b"c", name, out)
        _encode({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, out, active)
    elif hasattr(t, "model_fields") and hasattr(value, "__dict__") and hasattr(t, "model_dump"):
        _text(b"p", name, out)  # a pydantic model: its fields are its content
        _encode({k: getattr(value, k) for k in t.model_fields}, out, active)
    elif t.__module__ == "numpy" and t.__name__ == "ndarray" and value.dtype.kind in "biufcSUM":
        _text(b"a", f"{value.dtype.str}|{value.shape}", out)
        data = value.tobytes(order="C")
        out.append(str(len(data)).encode() + b":" + data)
    else:
        raise Uncacheable(f"{name} has no stable content form")
