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
variable named like a secret (:func:`planbook.outbound.redact.is_secret_name`), or a string
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

from ..data.secret import Secret
from ..outbound.redact import is_secret_name
from .keyparts import CODE_MEMBERS as _CODE_MEMBERS
from .keyparts import EMPTY as _EMPTY
from .keyparts import STATE_BYTES, STATE_VALUES, CoercionTypes, TooLarge, Uncacheable
from .keyparts import TYPE_FORMS as _TYPE_FORMS
from .keyparts import cell_value as _cell_value
from .keyparts import hidden_state as _hidden_state
from .keyparts import made_here as _made_here
from .keyparts import python_class as _python_class
from .keyparts import qualname as _qualname
from .keyparts import wrapped_of as _wrapped_of
from .values import Redacted, Unrestorable

#: bumped when the encoding below changes, so old keys miss instead of colliding
KEY_VERSION = 2


#: ``secret_text(s)`` is True for a string the store would redact (a known key, ``Bearer …``)
SecretText = Callable[[str], bool]


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
    ``functools.partial``'s function and bound arguments; the functions and classes of its
    own module it names (a helper defined in another notebook cell, ``Helper.compute(x)``),
    followed the same way, and the class of an instance of its module it names (``model =
    Model()`` in a cell: the class's code, not that global's state).

    An object the code reaches — a bound method's object, a callable object, a captured
    instance — is covered whole: its class's code (every method, property and class
    attribute of the classes of its module in its MRO: ``self.helper()``, ``super()``, dunder
    methods and a base class's hooks all reach them, not only the names the code reads) and
    all its state (``__dict__`` and slots, so pydantic's private attributes and a dataclass's
    attributes set after ``__init__`` too). A value with no stable content form, state kept
    in C where it cannot be read, an object holding itself, or a secret, gives ``None``.

    The types planbook coerces a call's arguments with are covered too: each parameter's
    annotation (``qty: int`` → ``float`` changes the answer), and a class of the tool's module
    it names is followed with its fields' types and defaults (a pydantic model's default,
    which pydantic keeps out of the class's namespace).

    Bounded per call: the state it reads (an object's ``__dict__``, what a closure captured,
    class attributes) is at most :data:`STATE_VALUES` values and :data:`STATE_BYTES` bytes;
    past that the tool is not cached and the step's note says why (a ``version`` keys it).

    Not covered, as for any library: the code of other modules (a base class imported from
    a package), the globals a function reads (a constant, a client, a data frame) and a
    class attribute with no stable content form (a lock, a client): give a tool a
    ``version`` when they matter.
    """
    encoder = _Encoder(secret_text, functions=True)
    try:
        encoder.function(fn)
        encoder.coercion(fn)
    except (Uncacheable, TooLarge, RecursionError):
        return None
    return "code:" + hashlib.sha256(b"".join(encoder.out)).hexdigest()[:32]


def fingerprint_problem(fn: Any, *, secret_text: SecretText | None = None) -> str | None:
    """Why :func:`code_fingerprint` gives ``None`` for ``fn`` (``None``: it gives a fingerprint)."""
    encoder = _Encoder(secret_text, functions=True)
    try:
        encoder.function(fn)
        encoder.coercion(fn)
    except (Uncacheable, TooLarge) as exc:
        problem = str(exc)
    except RecursionError:
        problem = "what it captures is nested too deeply"
    else:
        return None
    return f"{problem} (a tool given a version= is keyed by it instead: bump it when its answers change)"


class _Encoder(CoercionTypes):
    """A self-delimiting, typed encoding of values (and, with ``functions``, of code) into ``out``."""

    def __init__(self, secret_text: SecretText | None, *, functions: bool = False) -> None:
        self.out: list[bytes] = []
        self.secret_text = secret_text
        self.functions = functions
        self.active: set[int] = set()
        #: the modules whose code is being followed, innermost last: a class of that module is followed too
        self.modules: list[str | None] = []
        #: the classes whose code is already written, in order: met again, they are written as their number
        self.classes: dict[int, int] = {}
        #: what a fingerprint may still read of values (code's own names and constants do not count)
        self.values_left, self.bytes_left = STATE_VALUES, STATE_BYTES

    def _spend(self, size: int) -> None:
        if self.functions:
            self.values_left -= 1
            self.bytes_left -= size
            if self.values_left < 0 or self.bytes_left < 0:
                raise TooLarge

    def text(self, tag: bytes, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self._spend(len(data))
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
            self._spend(len(value))
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
                    if not isinstance(v, Secret):  # a Secret under a secret's name is its reference: keyed
                        self.name(k)
                    self.value(k)
                    self.value(v)
                self.out.append(b"}")
        finally:
            self.active.discard(key)

    def _alone(self, value: Any) -> bytes:
        """``value`` written on its own: a set's items are sorted after, so each must not refer to
        a class another item wrote first (which item came first follows the hash seed)."""
        start, classes = len(self.out), self.classes
        self.classes = {}
        try:
            self.value(value)
        finally:
            self.classes = classes
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
        elif isinstance(value, Secret):  # its reference, never its value (a key would let it be guessed):
            # rotating a credential is not a change of the call; an answer that depends on *whose*
            # secret it is (two people's tokens under one variable, one store) needs cache=False
            self.text(b"K", value.ref)
        elif isinstance(value, (int, float, str, bytes)):  # subclasses: the type is part of the value
            self.text(b"x", name)
            base: type[Any] = next(b for b in (int, float, str, bytes) if isinstance(value, b))  # value is one
            self.value(base(value))
        elif isinstance(value, (decimal.Decimal, uuid.UUID, pathlib.PurePath, datetime.date, datetime.time,
                                datetime.timedelta, complex)):
            self.text(b"v", name)
            self.text(b"s", value.isoformat() if isinstance(value, (datetime.date, datetime.time)) else str(value))
        elif self.functions and isinstance(value, _TYPE_FORMS):  # list[int], Optional[str]: a name
            self.text(b"y", repr(value))
        elif self.functions and isinstance(value, (staticmethod, classmethod, property)):
            self.function(value)
        elif self.functions and callable(value):
            self.function(value)
        elif self.functions and _python_class(t):  # an object the code reaches: its class's code and all its state
            self._held(value, follow=self._follows(t))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            self.text(b"c", name)
            self.value({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        elif hasattr(t, "model_fields") and hasattr(value, "__dict__") and hasattr(t, "model_dump"):
            self.text(b"p", name)  # a pydantic model: its fields are its content
            self.value({k: getattr(value, k) for k in t.model_fields})
        elif t.__module__ == "numpy" and t.__name__ == "ndarray" and value.dtype.kind in "biufcSUM":
            self.text(b"a", f"{value.dtype.str}|{value.shape}")
            self._spend(int(value.nbytes))  # before the copy
            data = value.tobytes(order="C")
            self.out.append(str(len(data)).encode() + b":" + data)
        elif self.functions and value is Ellipsis:
            self.out.append(b"E")
        elif self.functions and isinstance(value, types.CodeType):
            self._code(value)
        elif self.functions and isinstance(value, types.ModuleType):
            self.text(b"M", value.__name__)
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
            owner = fn.__self__  # the tool's own object: its class is followed wherever it was defined
            try:
                if isinstance(owner, type):
                    self._followed(owner)
                elif _python_class(type(owner)):
                    self._held(owner, follow=True)
                else:
                    self.value(owner)
            except Uncacheable as exc:
                raise Uncacheable(f"self → {exc}") from None
        elif isinstance(fn, (staticmethod, classmethod)):
            self.text(b"D", type(fn).__name__)
            self.function(fn.__func__)
        elif isinstance(fn, property):
            self.text(b"D", "property")
            for part in (fn.fget, fn.fset, fn.fdel):
                self.value(part)
        elif isinstance(fn, types.FunctionType):
            self.modules.append(fn.__module__)
            try:
                self._plain_function(fn)
            finally:
                self.modules.pop()
        elif isinstance(fn, type):
            self._class(fn)
        elif isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            self.text(b"b", _qualname(fn))
            owner = getattr(fn, "__self__", None)  # a builtin bound to an object: [].append
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.value(owner)
        else:  # a callable object: its class's __call__, and the object's class and state
            call = getattr(type(fn), "__call__", None)
            if not isinstance(call, types.FunctionType):
                raise Uncacheable(f"{_qualname(type(fn))} is a callable with no Python code to fingerprint")
            self.text(b"O", _qualname(type(fn)))
            self.function(call)
            if not _python_class(type(fn)):
                raise Uncacheable(f"{_qualname(type(fn))} keeps its state where it cannot be read")
            try:
                self._instance(fn, follow=self._follows(type(fn)))
            except Uncacheable as exc:
                raise Uncacheable(f"self → {exc}") from None

    def _plain_function(self, fn: types.FunctionType) -> None:
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

    def _helpers(self, fn: types.FunctionType) -> None:
        """The functions and classes of the tool's own module that it names (a notebook's helper,
        edited in another cell; ``Helper.compute(x)``): an edit to one changes the tool's answer too."""
        module, scope = fn.__module__, fn.__globals__
        names: set[str] = set()
        todo = [fn.__code__]
        while todo:
            code = todo.pop()
            names.update(code.co_names)
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        helpers = sorted(n for n in names if (isinstance(scope.get(n), (types.FunctionType, type))
                                              and scope[n].__module__ == module) or _made_here(scope.get(n), module))
        self.out.append(b"G" + str(len(helpers)).encode() + b"(")
        for name in helpers:
            self.text(b"s", name)
            helper = scope[name]
            if isinstance(helper, (types.FunctionType, type)):
                self.function(helper)
            else:  # `model = Model()` in a cell, used by the tool: its class's code; its state is a global's data
                self.out.append(b"o")
                self.function(type(helper))
        self.out.append(b")")

    # ------------------------------------------------------------------ classes and objects
    def _follows(self, cls: type) -> bool:
        """Whether the code of ``cls`` is followed: the tool's own (nothing followed yet), or one
        of the module whose code reaches it — as for functions, a library's code is not."""
        return not self.modules or cls.__module__ == self.modules[-1]

    def _followed(self, cls: type) -> None:
        """``cls`` with its code, wherever it was defined (the class of the tool's own object)."""
        self.modules.append(cls.__module__)
        try:
            self.function(cls)
        finally:
            self.modules.pop()

    def _class(self, cls: type) -> None:
        """A class: its name; when followed, the code and class attributes of every class of its
        module in its MRO (``self.helper()``, ``super()``, ``len(self)`` and a library base's hook
        calls all land there). Met again, it is written as its number: a list of a thousand
        instances does not write the class a thousand times."""
        self.text(b"C", _qualname(cls))
        if not self._follows(cls) or not _python_class(cls):  # a C type (str, a lock) has no Python code
            return
        seen = self.classes.get(id(cls))
        if seen is not None:
            self.text(b"r", str(seen))
            return
        self.classes[id(cls)] = len(self.classes)
        module = cls.__module__
        self.modules.append(module)
        try:
            for base in cls.__mro__:
                self.text(b"s", _qualname(base))
                if base.__module__ != module:
                    continue  # a library's class (BaseModel, object): not followed, as its functions are not
                members = sorted(vars(base).items())
                self.out.append(b"(")
                for name, member in members:
                    self._member(base, name, member)
                self.out.append(b")")
                self._fields(base)
        finally:
            self.modules.pop()

    def data_field(self, name: str, value: Any) -> None:
        """A value keyed when it can be; one without a content form, or a secret, is left out (as
        a class attribute is)."""
        start, classes = len(self.out), len(self.classes)
        try:
            self.name(name)
            self.text(b"s", name)
            self.value(value)
        except (Uncacheable, RecursionError):
            del self.out[start:]
            for key in [k for k, n in self.classes.items() if n >= classes]:
                del self.classes[key]

    def _member(self, cls: type, name: str, member: Any) -> None:
        """One entry of a followed class's namespace: code is followed, data keyed when it can be."""
        wrapped = None if isinstance(member, _CODE_MEMBERS) else _wrapped_of(member)
        if isinstance(member, _CODE_MEMBERS) or wrapped is not None:
            self.text(b"s", name)
            self.text(b"D", type(member).__name__)
            if isinstance(member, property):
                parts: tuple[Any, ...] = (member.fget, member.fset, member.fdel)
            elif isinstance(member, functools.cached_property):
                parts = (member.func,)
            elif wrapped is not None:  # @functools.lru_cache and other wrappers written in C
                parts = (wrapped,)
            else:
                parts = (getattr(member, "__func__", member),)
            try:
                for part in parts:
                    if part is None:
                        self.out.append(b"N")
                    elif isinstance(part, types.FunctionType) and part.__module__ != cls.__module__:
                        self._foreign(part)
                    else:
                        self.function(part)
            except Uncacheable as exc:
                raise Uncacheable(f"{cls.__qualname__}.{name} → {exc}") from None
        elif not (name.startswith("__") and name.endswith("__")):
            # a class attribute the code may read as self.x: keyed when it has a content form; one
            # without (a client, a lock), or a secret, is left out as a module's globals are
            self.data_field(name, member)
        # dunder data (__module__, __doc__, pydantic's validators and schema) is machinery, not code

    def _foreign(self, fn: types.FunctionType) -> None:
        """A library's function put on a followed class (an enum's or a namedtuple's machinery, a
        decorator's wrapper): its own code is the library's and is not followed, but what it
        holds is — a decorator keeps the method it wraps in its closure or ``__wrapped__``."""
        self.text(b"X", _qualname(fn))
        cells = fn.__closure__ or ()
        self._named(fn.__code__.co_freevars, tuple(_cell_value(c) for c in cells))
        wrapped = getattr(fn, "__wrapped__", None)
        self.out.append(b"W")
        if wrapped is not None:
            self.function(wrapped)

    def _held(self, obj: Any, *, follow: bool) -> None:
        """An object reached from the tool (its bound object, a captured instance)."""
        key = id(obj)
        if key in self.active:
            raise Uncacheable(f"{_qualname(type(obj))} holds itself")
        self.active.add(key)
        try:
            self._instance(obj, follow=follow)
        finally:
            self.active.discard(key)

    def _instance(self, obj: Any, *, follow: bool) -> None:
        """An instance of a Python class: its class (followed or named) and all of its state —
        ``__dict__`` and every slot, so pydantic's private attributes and a dataclass's
        attributes set after ``__init__`` count, not only the declared fields."""
        t = type(obj)
        hidden = _hidden_state(t)
        if hidden is not None:
            raise Uncacheable(f"{_qualname(t)} keeps state in {hidden}, which is not Python code and cannot be read")
        self.out.append(b"I")
        if follow:
            self._followed(t)
        else:
            self.text(b"C", _qualname(t))
        try:
            state = object.__getattribute__(obj, "__dict__")  # not __getattr__: reading must run no code
        except AttributeError:
            state = None
        names: list[str] = []
        values: list[Any] = []
        if state is not None:
            for name in list(state):
                if type(name) is not str:
                    raise Uncacheable(f"{_qualname(t)} has an attribute named {name!r}, not a string")
            names.extend(state)
            values.extend(state.values())
        for base in t.__mro__:
            slots = vars(base).get("__slots__", ())
            for slot in (slots,) if isinstance(slots, str) else slots:
                if slot in ("__dict__", "__weakref__"):
                    continue
                stored = slot
                if slot.startswith("__") and not slot.endswith("__") and base.__name__.strip("_"):
                    stored = f"_{base.__name__.lstrip('_')}{slot}"  # __x in class C is stored as _C__x
                descriptor = vars(base).get(stored)
                if not isinstance(descriptor, types.MemberDescriptorType):  # never a slot left out of the key
                    raise Uncacheable(f"{_qualname(t)} declares a slot {slot!r} that cannot be read")
                try:
                    value = descriptor.__get__(obj, base)
                except AttributeError:
                    value = _EMPTY  # a slot never set
                names.append(stored)
                values.append(value)
        self.out.append(b"i")
        self._named(tuple(names), tuple(values))

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
        left = self.values_left, self.bytes_left  # code is not state: it does not spend the bound
        try:
            self.value(code.co_names)
            self.value(code.co_varnames)  # renamed parameters: the same bytecode reads other arguments
            self.value(code.co_freevars)
            self.value(code.co_cellvars)
            self.value(code.co_consts)  # nested functions and comprehensions are code constants
        finally:
            self.secret_text = secret_text
            self.values_left, self.bytes_left = left
