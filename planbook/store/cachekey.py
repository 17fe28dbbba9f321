"""The step cache key: a stable hash of a tool call, and of the code that answers it.

Two calls get the same key only when the tool name, the tool's fingerprint (its declared
``version``, else :func:`code_fingerprint` of its function) and the resolved arguments
(after ``$id`` references were replaced by the results they name) are equal — so a changed
argument, a changed upstream result or edited code is a miss. The key is the same across
processes and Python runs: no ``hash()`` (salted per process), set order does not matter,
dict order does (a tool may iterate a dict: ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}``
are different calls), and every value is written with its type (``1``, ``1.0``, ``True``
and ``"1"`` differ; so do a list and a tuple).

``None`` means "do not cache", never a wrong hit. It is given for a value with no stable
content form (an arbitrary object, a cycle, a value that could not be restored from the
store) and for anything **secret**: an argument, dict key, field, default or captured
variable named like a secret (:func:`planbook.store.redact.is_secret_name`), or a string
the store would redact. The key is a plain SHA-256, and a short secret (a PIN) could be
found again from it by trying every value; a secret never enters a key, so the store
holds no trace of it.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import hashlib
import math
import pathlib
import types
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .redact import is_secret_name
from .values import Redacted, Unrestorable

#: bumped when the encoding below changes, so old keys miss instead of colliding
KEY_VERSION = 2

#: ``secret_text(s)`` is True for a string the store would redact (a known key, ``Bearer …``)
SecretText = Callable[[str], bool]


class Uncacheable(Exception):
    """Raised inside the encoder for a value with no stable content form, or a secret."""


def step_cache_key(tool: str, args: Mapping[str, Any], *, version: str | None = None,
                   secret_text: SecretText | None = None) -> str | None:
    """The cache key of calling ``tool`` with resolved ``args``, or ``None`` when it has none."""
    encoder = _Encoder(secret_text)
    try:
        encoder.text(b"s", tool)
        encoder.value(version)
        encoder.value(dict(args))
    except (Uncacheable, RecursionError):
        return None
    return f"v{KEY_VERSION}:{hashlib.sha256(b''.join(encoder.out)).hexdigest()}"


def why_uncacheable(args: Mapping[str, Any], *, secret_text: SecretText | None = None) -> str | None:
    """Why a call with these ``args`` gets no cache key (``None``: it gets one)."""
    try:
        _Encoder(secret_text).value(dict(args))
    except Uncacheable as exc:
        return str(exc)
    except RecursionError:
        return "its arguments are nested too deeply"
    return None


def code_fingerprint(fn: Any, *, secret_text: SecretText | None = None) -> str | None:
    """A digest of what ``fn`` does, stable across processes; ``None`` when it cannot be trusted.

    It covers the bytecode, constants, names and parameter names of the function and of the
    functions nested in it; its defaults and keyword defaults; the values its closure
    captured; the function under a ``functools.wraps`` decorator (``__wrapped__``); a
    ``functools.partial``'s function and bound arguments; a bound method's function and
    object; the functions of its own module it calls by name (a helper defined in another
    notebook cell), followed the same way. A captured value with no stable content form, or
    a secret one, gives ``None``. Other globals a function reads (a constant, a client, a
    data frame) are not covered: give a tool a ``version`` when they matter.
    """
    encoder = _Encoder(secret_text, functions=True)
    try:
        encoder.function(fn)
    except (Uncacheable, RecursionError):
        return None
    return "code:" + hashlib.sha256(b"".join(encoder.out)).hexdigest()[:32]


def fingerprint_problem(fn: Any, *, secret_text: SecretText | None = None) -> str | None:
    """Why :func:`code_fingerprint` gives ``None`` for ``fn`` (``None``: it gives a fingerprint)."""
    try:
        _Encoder(secret_text, functions=True).function(fn)
    except Uncacheable as exc:
        problem = str(exc)
    except RecursionError:
        problem = "what it captures is nested too deeply"
    else:
        return None
    return f"{problem} (a tool given a version= is keyed by it instead: bump it when its answers change)"


def _qualname(t: Any) -> str:
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', getattr(t, '__name__', '?'))}"


class _Encoder:
    """A self-delimiting, typed encoding of values (and, with ``functions``, of code) into ``out``."""

    def __init__(self, secret_text: SecretText | None, *, functions: bool = False) -> None:
        self.out: list[bytes] = []
        self.secret_text = secret_text
        self.functions = functions
        self.active: set[int] = set()

    def text(self, tag: bytes, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self.out.append(tag + str(len(data)).encode() + b":" + data)

    def name(self, name: Any) -> None:
        """A mapping key, a field, a parameter or a captured variable: a secret's name stops caching."""
        if type(name) is str and is_secret_name(name):
            raise Uncacheable(f"{name!r} is a secret (a key would let its value be guessed)")

    def value(self, value: Any) -> None:
        t = type(value)
        if value is None:
            self.out.append(b"N")
        elif value is _EMPTY:
            self.out.append(b"-")
        elif t is bool:
            self.out.append(b"T" if value else b"F")
        elif t is int:
            self.text(b"i", str(value))
        elif t is float:
            # repr is exact and stable for floats; nan and infinities included
            self.text(b"f", "nan" if math.isnan(value) else repr(value))
        elif t is str:
            if self.secret_text is not None and value and self.secret_text(value):
                raise Uncacheable("a value holds a secret the store hides")
            self.text(b"s", value)
        elif t is bytes:
            self.out.append(b"b" + str(len(value)).encode() + b":" + value)
        elif t in (list, tuple, dict, set, frozenset) or isinstance(value, Mapping):
            self._container(value)
        else:
            self._object(value)

    def _container(self, value: Any) -> None:
        t, key = type(value), id(value)
        if key in self.active:
            raise Uncacheable("a container holds itself")
        self.active.add(key)
        try:
            if t is list or t is tuple:
                self.out.append((b"l" if t is list else b"t") + str(len(value)).encode() + b"[")
                for item in value:
                    self.value(item)
                self.out.append(b"]")
            elif t is set or t is frozenset:
                items = sorted(self._alone(v) for v in value)  # a set has no order: its key must not either
                self.out.append(b"S" + str(len(items)).encode() + b"{")
                self.out.extend(items)
                self.out.append(b"}")
            else:  # a mapping keeps its order: a tool that iterates it may answer differently
                self.out.append((b"d" if t is dict else b"m" + _qualname(t).encode() + b"|")
                                + str(len(value)).encode() + b"{")
                for k, v in value.items():
                    self.name(k)
                    self.value(k)
                    self.value(v)
                self.out.append(b"}")
        finally:
            self.active.discard(key)

    def _alone(self, value: Any) -> bytes:
        start = len(self.out)
        self.value(value)
        part = b"".join(self.out[start:])
        del self.out[start:]
        return part

    def _object(self, value: Any) -> None:
        """Values with a well-defined content: enums, numbers, dates, paths, dataclasses, pydantic models."""
        t = type(value)
        name = _qualname(t)
        if isinstance(value, enum.Enum):
            self.text(b"e", name)
            self.value(value.value)
        elif isinstance(value, (Unrestorable, Redacted)):
            raise Uncacheable("a value that was not restored from the store")
        elif isinstance(value, (int, float, str, bytes)):  # subclasses: the type is part of the value
            self.text(b"x", name)
            base = next(b for b in (int, float, str, bytes) if isinstance(value, b))
            self.value(base(value))
        elif isinstance(value, (decimal.Decimal, uuid.UUID, pathlib.PurePath, datetime.date, datetime.time,
                                datetime.timedelta, complex)):
            self.text(b"v", name)
            self.text(b"s", value.isoformat() if isinstance(value, (datetime.date, datetime.time)) else str(value))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            self.text(b"c", name)
            self.value({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        elif hasattr(t, "model_fields") and hasattr(value, "__dict__") and hasattr(t, "model_dump"):
            self.text(b"p", name)  # a pydantic model: its fields are its content
            self.value({k: getattr(value, k) for k in t.model_fields})
        elif t.__module__ == "numpy" and t.__name__ == "ndarray" and value.dtype.kind in "biufcSUM":
            self.text(b"a", f"{value.dtype.str}|{value.shape}")
            data = value.tobytes(order="C")
            self.out.append(str(len(data)).encode() + b":" + data)
        elif self.functions and value is Ellipsis:
            self.out.append(b"E")
        elif self.functions and isinstance(value, types.CodeType):
            self._code(value)
        elif self.functions and isinstance(value, types.ModuleType):
            self.text(b"M", value.__name__)
        elif self.functions and callable(value):
            self.function(value)
        else:
            raise Uncacheable(f"{name} has no stable content form")

    # ------------------------------------------------------------------ code
    def function(self, fn: Any) -> None:
        """What a callable does: its code and everything bound to it (see :func:`code_fingerprint`)."""
        key = id(fn)
        if key in self.active:  # a recursive function captures itself: its code is already in
            self.out.append(b"R")
            return
        self.active.add(key)
        try:
            self._function(fn)
        finally:
            self.active.discard(key)

    def _function(self, fn: Any) -> None:
        if isinstance(fn, functools.partial):
            self.text(b"P", "partial")
            self.function(fn.func)
            self.value(tuple(fn.args))
            self.value(dict(fn.keywords))
        elif isinstance(fn, types.MethodType):
            self.text(b"B", "method")
            self.function(fn.__func__)
            self.value(fn.__self__)
        elif isinstance(fn, types.FunctionType):
            self.text(b"F", _qualname(fn))
            self._code(fn.__code__)
            self._named(fn.__code__.co_varnames[:fn.__code__.co_argcount][-len(fn.__defaults__ or ()):]
                        if fn.__defaults__ else (), fn.__defaults__ or ())
            self._named(tuple(fn.__kwdefaults__ or {}), tuple((fn.__kwdefaults__ or {}).values()))
            cells = fn.__closure__ or ()
            self._named(fn.__code__.co_freevars, tuple(_cell_value(c) for c in cells))
            wrapped = getattr(fn, "__wrapped__", None)  # functools.wraps: the real code is underneath
            self.out.append(b"W")
            if wrapped is not None:
                self.function(wrapped)
            self._helpers(fn)
        elif isinstance(fn, type):
            self.text(b"C", _qualname(fn))
        elif isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            self.text(b"b", _qualname(fn))
            owner = getattr(fn, "__self__", None)  # a builtin bound to an object: [].append
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.value(owner)
        else:  # a callable object: its class's __call__, and the object's content
            call = getattr(type(fn), "__call__", None)
            if not isinstance(call, types.FunctionType):
                raise Uncacheable(f"{_qualname(type(fn))} is a callable with no Python code to fingerprint")
            self.text(b"O", _qualname(type(fn)))
            self.function(call)
            state = getattr(fn, "__dict__", None)
            if state is None:
                raise Uncacheable(f"{_qualname(type(fn))} keeps its state where it cannot be read")
            self.value(dict(state))

    def _helpers(self, fn: types.FunctionType) -> None:
        """The functions of the tool's own module that it calls by name (a notebook's helper,
        edited in another cell): an edit to one changes the tool's answer too."""
        module, scope = fn.__module__, fn.__globals__
        names: set[str] = set()
        todo = [fn.__code__]
        while todo:
            code = todo.pop()
            names.update(code.co_names)
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        helpers = sorted(n for n in names if isinstance(scope.get(n), types.FunctionType)
                         and scope[n].__module__ == module)
        self.out.append(b"G" + str(len(helpers)).encode() + b"(")
        for name in helpers:
            self.text(b"s", name)
            self.function(scope[name])
        self.out.append(b")")

    def _named(self, names: tuple[str, ...], values: tuple[Any, ...]) -> None:
        self.out.append(b"n" + str(len(values)).encode() + b"(")
        for n, v in zip(names, values):
            self.name(n)
            self.text(b"s", n)
            try:
                self.value(v)
            except Uncacheable as exc:
                raise Uncacheable(f"{n} → {exc}") from None
        self.out.append(b")")

    def _code(self, code: types.CodeType) -> None:
        self.out.append(b"K")
        self.out.append(str((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                             code.co_flags)).encode())
        self.out.append(str(len(code.co_code)).encode() + b":" + code.co_code)
        # the source's own text (names, docstrings, literals) is not a value a run passed in:
        # a docstring that says "token=..." must not make a tool uncacheable
        secret_text, self.secret_text = self.secret_text, None
        try:
            self.value(code.co_names)
            self.value(code.co_varnames)  # renamed parameters: the same bytecode reads other arguments
            self.value(code.co_freevars)
            self.value(code.co_cellvars)
            self.value(code.co_consts)  # nested functions and comprehensions are code constants
        finally:
            self.secret_text = secret_text


class _Empty:
    """A closure cell not yet filled (a variable assigned after the function was made)."""


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


_EMPTY = _Empty()
