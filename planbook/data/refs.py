"""``$id`` references from a step's args to earlier results.

``"$load"`` as a whole value is the result object itself; ``"${load}"`` inside a string
is its text. Bare ``$id`` inside a longer string is *not* a reference, so ``$1`` can
never match inside ``$10`` (the ReWOO ``str.replace`` pitfall) and ``"costs $5"`` stays
literal. ``$$`` escapes a dollar sign.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .ids import is_step_id

# What a reference may name is exactly what an id may be (planbook.data.ids): ``$données`` names
# the step ``données``. A regex cannot say it (ids may hold combining marks, which ``\w``
# refuses), so these find candidates and is_step_id decides.
WHOLE_REF = re.compile(r"^\$([^$].*)$", re.DOTALL)
#: ``$$`` or ``${...}``; run it only on :func:`closed_part` of a text (see there)
INLINE_REF = re.compile(r"\$\$|\$\{([^}]*)\}")


def closed_part(text: str) -> tuple[str, str]:
    """``text`` cut after its last ``}``: the part :data:`INLINE_REF` may scan, and the rest.

    An attempt at a ``${`` with no ``}`` after it reads to the end of the text and fails, and
    the next ``${`` reads it again: ``"${" * 50_000`` took 40 s. Every ``${`` of the first part
    has a ``}`` after it (its attempt ends there, and matches), so the pattern reads each
    character once; the rest can hold no ``${...}``, only ``$$`` escapes.
    """
    end = text.rfind("}") + 1
    return (text, "") if end == len(text) else (text[:end], text[end:])


def inline_refs(text: str) -> list[str]:
    """The ids written as ``${id}`` in ``text``, in order (a ``${...}`` that names no id is text)."""
    head = closed_part(text)[0]
    return [m.group(1) for m in INLINE_REF.finditer(head) if m.group(1) and is_step_id(m.group(1))]


def find_refs(value: Any) -> list[str]:
    """Every step id referenced in ``value`` (nested lists and dicts included), in order."""
    found: list[str] = []
    _walk(value, found)
    return list(dict.fromkeys(found)) if found else found


def _walk(v: Any, found: list[str]) -> None:
    # checked for every arg of every step before a run: the common cases go first and cheap
    if isinstance(v, str):
        if "$" not in v:
            return
        whole = WHOLE_REF.match(v)
        if whole and is_step_id(whole.group(1)):
            found.append(whole.group(1))
            return
        found.extend(inline_refs(v))
    elif isinstance(v, (int, float, bool)) or v is None:
        return
    elif isinstance(v, (list, tuple)):
        for item in v:
            _walk(item, found)
    elif isinstance(v, Mapping):
        for item in v.values():
            _walk(item, found)


def args_with_refs(args: Mapping[str, Any]) -> set[str]:
    """Names of the args whose value holds a reference (their type is known only at run time)."""
    return {name for name, value in args.items() if find_refs(value)}


#: value types resolve returns as they are
_AS_IS = frozenset({int, float, bool, type(None)})


def resolve(value: Any, results: Mapping[str, Any]) -> Any:
    """Replace references with results. A missing id raises KeyError naming it."""
    if isinstance(value, str):
        if "$" not in value:
            return value
        whole = WHOLE_REF.match(value)
        if whole:
            name = whole.group(1)
            # a name among the results is a step id (the plan's check said so): no need to ask again
            if name in results or is_step_id(name):
                return results[name]

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name = m.group(1)
            return str(results[name]) if name in results or is_step_id(name) else m.group(0)

        head, rest = closed_part(value)
        return INLINE_REF.sub(sub, head) + rest.replace("$$", "$")
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if type(value) is dict:  # a step's args: its plain values are taken as they are, without a call each
        out = {}
        for k, v in value.items():
            kind = type(v)
            out[k] = v if kind in _AS_IS or (kind is str and "$" not in v) else resolve(v, results)
        return out
    if isinstance(value, Mapping):
        return {k: resolve(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, results) for v in value]
    if isinstance(value, tuple):
        return tuple(resolve(v, results) for v in value)
    return value
