"""Whether a ``$id`` reference can fit the argument it is written in, decided before a run.

A tool's arguments holding references are not type-checked with the others (their values
exist only at run time), so ``urls: "${a}${b}"`` for a ``list[str]`` argument used to fail
only when its step was called, after the steps before it had run. What a reference gives
is often known already: text with ``${id}`` in it is a ``str``; a whole ``$id`` is its step's
result, of the type its tool declares it returns. This module refuses a reference only when
no value of what it gives could pass the argument's type as pydantic checks it in lax mode
(``"3"`` passes ``int``; no ``str`` passes ``list[str]``). Anything it does not recognise —
``Any``, an unannotated tool, an agent, a class of the user's, a ``Literal`` — passes.
"""

from __future__ import annotations

import collections.abc as abc
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel

from ..data.ids import is_step_id
from ..data.refs import WHOLE_REF, find_refs, inline_refs

#: a value's kind, as far as deciding a fit needs: text, number, none, list, map, record (a pydantic model)
_LIST_ORIGINS: frozenset[Any] = frozenset({list, tuple, set, frozenset, abc.Sequence, abc.MutableSequence,
                                           abc.Set, abc.MutableSet})
_MAP_ORIGINS: frozenset[Any] = frozenset({dict, abc.Mapping, abc.MutableMapping})
#: for each kind an argument may want, the kinds of value that may pass it (lax mode: "3" passes an int,
#: a dict a model; no str passes a list, no number a str)
_ACCEPTS: dict[str, frozenset[str]] = {
    "text": frozenset({"text"}),
    "number": frozenset({"text", "number"}),
    "none": frozenset({"none"}),
    "list": frozenset({"list"}),
    "map": frozenset({"map"}),
    "record": frozenset({"map"}),
}


_NONE: frozenset[str] = frozenset()
#: what :func:`_unknown` and :func:`_could_fit` decided, per type and per pair of types (types are few:
#: a tool's parameters and return types; bounded so a process that makes tools on the fly stays small)
_UNKNOWN_TYPES: dict[Any, bool] = {}
_FITS: dict[tuple[Any, Any], bool] = {}
_REMEMBERED = 4096


@dataclass(frozen=True)
class Misfit:
    """A reference that cannot fit: the type it must be and what it gives."""

    #: the argument's type, or its items' type when an item cannot fit
    expected: Any
    #: what the reference gives, in words ("a str (text with ${a} written in)")
    gives: str
    #: what to do about it
    advice: str


@dataclass(frozen=True)
class Produced:
    """What a step's result may be: its tool's declared return type (``Any`` when not known)."""

    returns: Any = Any
    #: the tool that declares it
    tool: str = ""
    #: True when the step may fail and its dependents still run with None (on_failure continue)
    may_be_none: bool = False


#: a result nothing is known of
UNKNOWN = Produced()


def misfit(value: Any, expected: Any, produced: Callable[[str], Produced]) -> Misfit | None:
    """Why ``value`` (an argument holding references) cannot pass ``expected``; None when it could.

    ``produced(id)``: what step ``id``'s result may be.
    """
    if isinstance(value, str):
        if "$" not in value or _unknown(expected):  # the common cases first: every arg of every step comes here
            return None
        whole = WHOLE_REF.match(value)
        if whole and _is_ref(whole.group(1)):
            ref = whole.group(1)
            made = produced(ref)
            if _could_fit(made.returns, expected) or (made.may_be_none and _could_fit(type(None), expected)):
                return None
            return Misfit(expected, f"${ref} gives the result of step {ref!r}, and tool {made.tool!r} returns "
                          f"{type_name(made.returns)}",
                          f"refer to a step whose result is {type_name(expected)}, add a step that turns the "
                          f"result of {ref!r} into one, or correct the return type tool {made.tool!r} declares")
        refs = inline_refs(value)
        if not refs or _could_fit(str, expected):
            return None
        written = ", ".join(f"${{{r}}}" for r in dict.fromkeys(refs))
        advice = (f"to pass the results themselves write the list [{', '.join('$' + r for r in dict.fromkeys(refs))}]"
                  if _kind(expected) == "list" else f"to pass a result as it is write ${refs[0]} alone (a whole "
                  "value is the result itself, not its text)")
        return Misfit(expected, f"its value is text (a str, with {written} written into it)", advice)
    if isinstance(value, (list, tuple)) and not _unknown(expected):
        return _container(value, expected, "list", produced)
    if isinstance(value, Mapping) and not _unknown(expected):
        return _container(value, expected, "map", produced)
    return None


#: an id every rule of planbook.data.ids accepts, recognised in one C call (is_step_id checks the rest)
PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")


def _is_ref(text: str) -> bool:
    return PLAIN_ID.match(text) is not None or is_step_id(text)


def _container(value: Any, expected: Any, kind: str, produced: Callable[[str], Produced]) -> Misfit | None:
    """A list or mapping written in the plan, holding references: its kind, then each item."""
    if not find_refs(value):
        return None  # its literal items are the tool's to check
    want = _strip(expected)
    if _is_union(want):
        # the members a written list (mapping) may pass; with none, it cannot pass the argument
        members = [m for m in get_args(want) if _unknown(m) or kind in _ACCEPTS.get(_kind(m) or "", _NONE)]
        if not members:
            return _wrong_kind(kind, expected)
        if len(members) > 1:
            return None
        want = _strip(members[0])
    wanted = _kind(want)
    if wanted is None:
        return None
    if kind not in _ACCEPTS[wanted]:
        return _wrong_kind(kind, expected)
    if wanted != kind:
        return None  # a mapping for a model: the model checks its fields
    item = _item_type(want)
    for v in (value.values() if isinstance(value, Mapping) else value):
        found = misfit(v, item, produced)
        if found is not None:
            whole = WHOLE_REF.match(v) if isinstance(v, str) else None
            if whole and kind == "list" and _could_fit(produced(whole.group(1)).returns, want):
                advice = f"to pass the result of {whole.group(1)!r} as the list itself write ${whole.group(1)} " \
                         "without the brackets"
            else:
                advice = found.advice
            return Misfit(found.expected, f"in an item of it, {found.gives}", advice)
    return None


def _wrong_kind(kind: str, expected: Any) -> Misfit:
    written = "a list" if kind == "list" else "a mapping"
    return Misfit(expected, f"its value is {written}", f"write the argument as {type_name(expected)}")


def type_name(annotation: Any) -> str:
    """``int``, ``list[str]``, ``str | None``: as a person writes it in a signature."""
    if annotation is Any:
        return "any value"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def _strip(t: Any) -> Any:
    """``t`` without ``Annotated[...]`` (its constraints do not change the kind)."""
    while get_origin(t) is Annotated:
        t = get_args(t)[0]
    return t


def _is_union(t: Any) -> bool:
    return get_origin(t) in (typing.Union, types.UnionType)


def _unknown(t: Any) -> bool:
    """A type this module does not decide for: every value may pass it (remembered per type: a
    plan of 100,000 steps asks it of the same few types)."""
    try:
        return _UNKNOWN_TYPES[t]
    except KeyError:
        if len(_UNKNOWN_TYPES) > _REMEMBERED:
            _UNKNOWN_TYPES.clear()
        found = _UNKNOWN_TYPES[t] = _decide_unknown(t)
        return found
    except TypeError:  # an unhashable annotation (a constraint's metadata): decided each time
        return _decide_unknown(t)


def _decide_unknown(t: Any) -> bool:
    t = _strip(t)
    if _is_union(t):
        return any(_unknown(m) for m in get_args(t))
    return _kind(t) is None


def _kind(t: Any) -> str | None:
    """The kind a type's values are (or a value must be, to pass it); None when not decided here."""
    t = _strip(t)
    if t is type(None) or t is None:
        return "none"
    origin = get_origin(t)
    if origin is not None:
        if origin in _LIST_ORIGINS:
            return "list"
        if origin in _MAP_ORIGINS:
            return "map"
        return None  # Literal, a union (asked member by member), a generic class of the user's
    if not isinstance(t, type):
        return None  # a TypeVar, a NewType, a forward reference left as text
    if t in _LIST_ORIGINS:
        return "list"
    if t in _MAP_ORIGINS:
        return "map"
    if t in (str, int, float, bool):
        return "text" if t is str else "number"
    if issubclass(t, BaseModel):  # it validates from a dict (or a model)
        return "record"
    return None


def _gives_kind(t: Any) -> str | None:
    """The kind of a value of type ``t`` (a result): subclasses count as their base (a StrEnum is text)."""
    t = _strip(t)
    kind = _kind(t)
    if kind in ("text", "number", "none", "list", "map"):
        return kind
    if isinstance(t, type) and get_origin(t) is None:
        if issubclass(t, str):
            return "text"
        if issubclass(t, (int, float)):
            return "number"
    return None  # a model, a class of the user's: it may be iterable or a mapping; not decided here


def _item_type(t: Any) -> Any:
    """The type of a list's items or a mapping's values (Any when not said, or a fixed-length tuple)."""
    args = get_args(t)
    origin = get_origin(t)
    if not args:
        return Any
    if origin in _MAP_ORIGINS:
        return args[1] if len(args) == 2 else Any
    if origin is tuple:
        return args[0] if len(args) == 2 and args[1] is Ellipsis else Any
    return args[0]


def _could_fit(gives: Any, expected: Any) -> bool:
    """Whether some value of type ``gives`` may pass ``expected`` (True whenever not decided);
    remembered per pair of types, as :func:`_unknown` is."""
    try:
        return _FITS[gives, expected]
    except KeyError:
        if len(_FITS) > _REMEMBERED:
            _FITS.clear()
        found = _FITS[gives, expected] = _decide_fit(gives, expected)
        return found
    except TypeError:
        return _decide_fit(gives, expected)


def _decide_fit(gives: Any, expected: Any) -> bool:
    gives, expected = _strip(gives), _strip(expected)
    if _is_union(gives):
        return any(_could_fit(g, expected) for g in get_args(gives))
    if _is_union(expected):
        return any(_could_fit(gives, e) for e in get_args(expected))
    have, want = _gives_kind(gives), _kind(expected)
    if have is None or want is None:
        return True
    if have not in _ACCEPTS[want]:
        return False
    if have == want and have in ("list", "map"):
        return _could_fit(_item_type(gives), _item_type(expected))
    return True
