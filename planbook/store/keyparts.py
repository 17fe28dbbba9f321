"""The parts of the step cache key that read Python's own objects: which classes keep their
state where it can be read, what a class's namespace holds as code, a closure cell's value,
and the types a tool's arguments are coerced with (:class:`CoercionTypes`).

Split from :mod:`planbook.store.cachekey` (its one user), which encodes what these find.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from typing import Any

__all__ = ["CODE_MEMBERS", "EMPTY", "STATE_BYTES", "STATE_VALUES", "TYPE_FORMS", "CoercionTypes", "TooLarge",
           "Uncacheable", "cell_value", "hidden_state", "made_here", "python_class", "qualname", "wrapped_of"]

#: what a fingerprint reads of the values code reaches (an object's state, what a closure
#: captured, class attributes), per call: past either bound the tool is not cached (a key
#: computed before every call must cost far less than the call; a method over a 100,000-entry
#: table cost 0.5 s of CPU a step): give such a tool a ``version=``
STATE_VALUES = 10_000
STATE_BYTES = 1 << 20


class Uncacheable(Exception):
    """Raised inside the encoder for a value with no stable content form, or a secret."""


class TooLarge(Exception):
    """Raised inside the encoder when what the code reaches passes :data:`STATE_VALUES` or
    :data:`STATE_BYTES` (not an :class:`Uncacheable`: nothing leaves it out and goes on)."""

    def __init__(self) -> None:
        super().__init__(f"what it reaches (its object's state, what it captured) is too large to key before every "
                         f"call (over {STATE_VALUES:,} values or {STATE_BYTES >> 20} MiB)")


class CoercionTypes:
    """The part of the cache key's encoder that writes annotations (a mixin of its ``_Encoder``:
    ``out``, ``modules``, ``text``, ``value``, ``function`` and ``data_field`` are the encoder's)."""

    out: list[bytes]
    modules: list[str | None]

    if typing.TYPE_CHECKING:
        def text(self, tag: bytes, text: str) -> None: ...
        def value(self, value: Any) -> None: ...
        def function(self, fn: Any) -> None: ...
        def data_field(self, name: str, value: Any) -> None: ...

    def coercion(self, fn: Any) -> None:
        """The types planbook coerces a call's arguments with: each parameter's annotation, as
        :mod:`planbook.workers.tools` reads it (resolved when it can be, else its text)."""
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            self.out.append(b"A-")
            return
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # noqa: BLE001 - an unresolvable annotation: its text, as written
            hints = {}
        owner = getattr(fn, "__func__", fn)
        module = getattr(owner, "__module__", None) or type(fn).__module__
        self.out.append(b"A" + str(len(params)).encode() + b"(")
        self.modules.append(module)  # a class of the tool's module is followed; another's is named
        try:
            for param in params:
                self.text(b"s", param.name)
                self._type(hints.get(param.name, param.annotation))
        finally:
            self.modules.pop()
        self.out.append(b")")

    def _type(self, t: Any) -> None:
        """An annotation: a class (followed when of the module being followed), a generic form
        with each of its arguments, a forward reference's text, or a value (``Literal``'s)."""
        origin = typing.get_origin(t)
        if origin is not None:
            self.text(b"y", repr(origin))
            for arg in typing.get_args(t):
                for part in arg if isinstance(arg, (list, tuple)) else (arg,):
                    self._type(part)
        elif isinstance(t, type):
            self.function(t)
        elif isinstance(t, str):
            self.text(b"y", t)
        elif t is inspect.Parameter.empty:
            self.out.append(b"-")
        else:
            start = len(self.out)
            try:
                self.value(t)
            except Uncacheable:
                del self.out[start:]
                self.text(b"y", qualname(type(t)))

    def _fields(self, cls: type) -> None:
        """A followed class's own field types, and a pydantic model's fields: their types, their
        defaults (kept out of the class's namespace, so not among its members) and constraints."""
        annotations = vars(cls).get("__annotations__")
        if isinstance(annotations, dict) and annotations:
            self.out.append(b"A(")
            for name in sorted(n for n in annotations if type(n) is str):
                self.text(b"s", name)
                self._type(annotations[name])
            self.out.append(b")")
        fields = vars(cls).get("__pydantic_fields__")
        if not isinstance(fields, dict):
            return
        self.out.append(b"P(")
        for name in sorted(n for n in fields if type(n) is str):
            info = fields[name]
            self.text(b"s", name)
            self._type(getattr(info, "annotation", None))
            factory = getattr(info, "default_factory", None)
            self.data_field(f"{name}.default", getattr(info, "default", None) if factory is None else factory)
            for part in getattr(info, "metadata", None) or ():
                self._type(part)
        self.out.append(b")")


def qualname(t: Any) -> str:
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', getattr(t, '__name__', '?'))}"


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: made at run time (a class statement, or a C extension's spec)
_IMMUTABLETYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: a C type (stdlib types made from a spec are heap types too)

#: generic aliases and typing forms (``list[int]``, ``Optional[str]``; a dataclass's ``__init__``
#: holds its fields' types): named by their repr, which spells them out
TYPE_FORMS: tuple[type, ...] = (types.GenericAlias, type(typing.Optional[int]), type(typing.List[int]),
                                 type(int | str), typing.TypeVar, typing.ForwardRef)


def python_class(t: type) -> bool:
    """Made by a class statement: its instances keep their state in ``__dict__`` and slots.
    A C type (a lock, a connection, a pydantic-core validator) has neither, or keeps more."""
    flags = t.__flags__
    return bool(flags & _HEAPTYPE) and not flags & _IMMUTABLETYPE and (
        "__slots__" in vars(t) or t.__dictoffset__ != 0)


#: what a class's namespace holds as code, rather than data
CODE_MEMBERS = (types.FunctionType, staticmethod, classmethod, property, functools.cached_property)


def wrapped_of(member: Any) -> Any:
    """The function a C wrapper in a class's namespace wraps (``functools.lru_cache``), read
    from its own ``__dict__`` so no ``__getattr__`` runs; ``None`` for anything else."""
    if isinstance(member, type) or not callable(member) or python_class(type(member)):
        return None  # a Python object is data: its class's __call__ and its state are followed as such
    try:
        own = object.__getattribute__(member, "__dict__")
    except AttributeError:
        return None
    wrapped = own.get("__wrapped__") if isinstance(own, dict) else None
    return wrapped if callable(wrapped) else None


def made_here(value: Any, module: str | None) -> bool:
    """An instance of a class defined in ``module`` (not a function or class itself)."""
    t = type(value)
    return t.__module__ == module and python_class(t) and not isinstance(value, (types.FunctionType, type))


def hidden_state(t: type) -> str | None:
    """The class in ``t``'s MRO that keeps instance state in C (``random.Random``, ``dict``), if any."""
    for base in t.__mro__:
        if base is object or python_class(base):
            continue
        if base.__basicsize__ != object.__basicsize__ or base.__itemsize__:
            return qualname(base)
    return None


class _Empty:
    """A closure cell not yet filled (a variable assigned after the function was made)."""


def cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return EMPTY


EMPTY = _Empty()
