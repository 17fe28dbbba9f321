"""How a step's result (or args) is written to a store and read back.

A value is stored as **JSON** when it is plain data that JSON gives back exactly (``dict``
with ``str`` keys, ``list``, ``str``, ``int``, ``float``, ``bool``, ``None`` — a tuple or
a ``str`` subclass is not, as it would come back as a list or a plain ``str``), else
**pickled** when pickle can, else as its **repr** with a note that it cannot be restored.
The kind is stored with the value, so loading knows what to do; a value that cannot be
restored (a repr, a pickle that no longer loads, a value that held a secret) loads as an
:class:`Unrestorable` marker, so a resumed run re-runs the step instead of feeding a
string to the next one.

Pickles run code when they load: open only run stores you trust (as with any pickle).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..data.ids import is_step_id
from ..data.refs import WHOLE_REF
from ..data.secret import Secret, to_json_refs
from ..outbound.redact import Redactor, dump_json, is_secret_name
from ..outbound.shapes import REDACTED_TEXT

ValueKind = Literal["json", "pickle", "repr"]
#: a shown repr is cut to this many characters
REPR_LIMIT = 2000
_PLAIN = (str, int, float, bool, type(None))
_SCALARS = frozenset({int, float, bool, type(None)})


@dataclass(frozen=True)
class Unrestorable:
    """Stands for a stored value that cannot be given back; ``reason`` says why."""

    repr: str
    type: str = ""
    reason: str = "it could be neither written as JSON nor pickled"

    def __repr__(self) -> str:
        return f"<unrestorable {self.type or 'value'}: {self.repr}>"


class Redacted:
    """Stands for an argument value that was a secret: it was never written, so a step
    that still has to run needs it given again (from the plan, or the caller)."""

    __slots__ = ()
    _instance: "Redacted | None" = None

    def __new__(cls) -> "Redacted":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return REDACTED_TEXT

    def __reduce__(self) -> str:
        return "REDACTED"


REDACTED = Redacted()


def is_plain_json(value: Any) -> bool:
    """True when ``json.loads(json.dumps(value))`` gives back an equal value of the same types."""
    t = type(value)
    if t in _PLAIN:
        return True
    if t is list:
        return all(is_plain_json(v) for v in value)
    if t is dict:
        return all(type(k) is str and is_plain_json(v) for k, v in value.items())
    return False


def shown(value: Any, redactor: Redactor | None = None) -> str:
    """``repr(value)``, cut to :data:`REPR_LIMIT`; a repr that raises says so. With
    ``redactor``, masked before it is cut: a cut through a secret leaves a part of it that
    masking no longer knows."""
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not lose the run
        text = f"<{type(value).__name__} object; its repr raised {type(exc).__name__}>"
    if redactor is not None:
        text = redactor.text(text)
    return text if len(text) <= REPR_LIMIT else text[: REPR_LIMIT - 1] + "…"


def type_name(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


@dataclass(frozen=True)
class KeptResult:
    """Stands, while a run is read, for a result a fork kept from its parent: the store wrote a
    reference to the parent's row (``{"kept": PARENT}``), never a copy; the reader puts the
    parent's result in its place (:meth:`~planbook.store.sqlread.SQLiteReads.load_run`)."""

    parent: str


class Encoded(NamedTuple):
    """A value as a store writes it: ``kind``, the payload, and a repr for views. A tuple:
    a step's write makes several, and a frozen dataclass cost more to make than to encode
    a small value."""

    kind: ValueKind
    payload: str | bytes
    shown: str | None = None
    type: str = ""
    reason: str | None = None

    @property
    def restorable(self) -> bool:
        return self.kind != "repr"


#: ``None``, as every store writes it
NULL = Encoded("json", "null")


def _unrestorable(value: Any, reason: str, redactor: Redactor) -> Encoded:
    return Encoded("repr", shown(value, redactor), None, type_name(value), reason)


#: what the JSON path raises for plain data it cannot write: an int past the limit of integer
#: string conversion (ValueError), a list that contains itself or deep nesting (RecursionError)
_JSON_FAILURES = (ValueError, TypeError, OverflowError, RecursionError)


def plain_json_text(value: Any) -> str | None:
    """The JSON text of plain data that JSON gives back exactly; None for anything else,
    including plain data the encoder cannot write (pickle may still keep it)."""
    try:
        return dump_json(value) if is_plain_json(value) else None
    except _JSON_FAILURES:  # factorial(2000), a list that holds itself, 5,000 levels deep
        return None


def encode(value: Any, redactor: Redactor) -> Encoded:
    """JSON, else pickle, else repr; a value holding a known secret is never written.
    Never raises: a value that breaks every encoder is written as its repr, not restorable."""
    if value is None:
        return NULL
    text = plain_json_text(value)
    if text is not None:
        if redactor.has_known_secret(text):
            return _unrestorable(value, "it held a secret, which is never written", redactor)
        return Encoded("json", text)
    try:
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # pickle raises many kinds (TypeError, PicklingError, AttributeError, RecursionError...)
        return _unrestorable(value, f"it could be neither written as JSON nor pickled ({type(exc).__name__}: "
                                    f"{redactor.text(str(exc))[:200]})", redactor)
    if redactor.has_known_secret(blob):
        return _unrestorable(value, "it held a secret, which is never written", redactor)
    return Encoded("pickle", blob, shown(value, redactor), type_name(value))


def decode(kind: str, payload: str | bytes | None, shown_text: str | None = None, type_: str = "",
           reason: str | None = None) -> Any:
    """The value back, or an :class:`Unrestorable` when it cannot be."""
    if kind == "kept":
        return KeptResult(payload.decode() if isinstance(payload, bytes) else str(payload))
    if kind == "json":
        return json.loads(payload if payload is not None else "null")
    if kind == "pickle":
        if isinstance(payload, str) and payload:  # a damaged row: text where a pickle's bytes belong
            return Unrestorable(shown_text or "", type_, "its pickle no longer loads (it was stored as text)")
        try:
            return pickle.loads(payload if isinstance(payload, bytes) else b"")
        except Exception as exc:  # the class is gone, renamed, or the module is not importable
            return Unrestorable(shown_text or "", type_, f"its pickle no longer loads ({type(exc).__name__}: {exc})")
    if kind == "repr":
        text = payload.decode() if isinstance(payload, bytes) else (payload or "")
        return Unrestorable(text, type_, reason or Unrestorable.reason)
    raise ValueError(f"unknown stored value kind {kind!r}: this store was written by a newer planbook")


Path = tuple[Any, ...]
#: the args of a step whose pickled args no longer load, as loaded
UNRESTORABLE_ARGS = "(args)"


def redact_args(args: dict[str, Any], redactor: Redactor) -> tuple[dict[str, Any], list[Path]]:
    """Args with every value that redaction changed replaced by :data:`REDACTED`, and the
    paths (keys and indexes) of those values. ``args`` itself when nothing changed.

    A secret-named value is replaced whole; a string holding a secret (a URL with a
    password, a header line) is replaced too, since part of it would be a wrong argument.
    A **reference** is kept as written, under any name: a :class:`~planbook.data.secret.Secret`
    (written as ``{"$secret": ref}``: a resumed run reads its value again) and a whole ``$id``
    (``token: $login`` names a step, not a secret: the step's result is the secret, and that
    is the tool's own business). So a run given its secrets as references resumes from its
    store alone.
    """
    paths: list[Path] = []
    marked = _hide(args, (), paths, redactor, False)
    if not paths:
        return args, []
    # a secret is hidden by value too from now on
    redactor.learn(_at(args, path) for path in paths)
    return marked, paths


def _is_reference(value: Any) -> bool:
    """A Secret, or a whole ``$id`` naming a step: what an argument may hold under a secret's name
    and still be written."""
    if isinstance(value, Secret):
        return True
    if type(value) is str and value[:1] == "$":
        whole = WHOLE_REF.match(value)
        return whole is not None and is_step_id(whole.group(1))
    return False


def _holds_reference(value: Any) -> bool:
    if _is_reference(value):
        return True
    if isinstance(value, dict):
        return any(_holds_reference(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_reference(v) for v in value)
    return False


def _hide(value: Any, path: Path, paths: list[Path], redactor: Redactor, named: bool) -> Any:
    """``value`` with what must not be written marked (see :func:`redact_args`); ``named``: it
    sits under a secret-named key, so every plain value in it is a secret."""
    if _is_reference(value):
        return value
    if isinstance(value, dict) or isinstance(value, (list, tuple)):
        if named and not _holds_reference(value):  # a secret-named container of plain values: hidden whole
            paths.append(path)
            return REDACTED
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            for k, v in value.items():
                under = named or (type(k) is str and is_secret_name(k))
                if not under and type(v) in _SCALARS:  # a number under a plain name is kept, as the redactor does
                    continue
                new = _hide(v, path + (k,), paths, redactor, under)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
            return value if out is None else out
        items = [_hide(v, path + (i,), paths, redactor, named) for i, v in enumerate(value)]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if named:
        if value is None:  # nothing to hide (as the redactor leaves it)
            return value
        paths.append(path)
        return REDACTED
    if redactor.data(value) is value:  # a text holding a known secret or a secret's shape, a PIN
        return value
    paths.append(path)
    return REDACTED


def _at(value: Any, path: Path) -> Any:
    for part in path:
        value = value[part]
    return value


def place_markers(args: dict[str, Any], paths: list[Path]) -> dict[str, Any]:
    """Loaded args: put :data:`REDACTED` back where a value was redacted."""
    for path in paths:
        target: Any = args
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = REDACTED
        except (KeyError, IndexError, TypeError):  # a tuple (pickled args keep their markers)
            continue
    return args


def encode_args(args: dict[str, Any], redactor: Redactor) -> tuple[Encoded, list[Path]]:
    """Redacted args, encoded like a result (markers are written as ``***``; a Secret as its
    reference, ``{"$secret": "env:NAME"}``, never its value).

    Plain args whose JSON text holds nothing redaction could change (the test
    :meth:`Redactor.json_text` makes) are that text: most args are, and walking them
    first cost as much as encoding them."""
    text = plain_json_text(args) if type(args) is dict else None
    if text is not None and redactor.unchanged(text):
        return Encoded("json", text), []
    stored, paths = redact_args(args, redactor)
    refs = to_json_refs(stored)  # a Secret as {"$secret": ref}: read back as a Secret (rows.step_from_record)
    if (paths or refs is not stored) and is_plain_json(_unmarked(refs)):
        return Encoded("json", dump_json(_unmarked(refs))), paths
    enc = encode(stored, redactor)  # a pickle keeps a Secret as its reference too (Secret.__reduce__)
    if enc.kind == "repr":  # one arg spoils the pickle: keep the others, mark that one
        kept = {}
        for name, value in stored.items():
            one = encode(value, redactor)
            kept[name] = value if one.restorable else Unrestorable(str(one.payload), one.type, one.reason or "")
        enc = encode(kept, redactor)
    return enc, paths


def _unmarked(value: Any) -> Any:
    if value is REDACTED:
        return REDACTED_TEXT
    if type(value) is dict:
        return {k: _unmarked(v) for k, v in value.items()}
    if type(value) is list:
        return [_unmarked(v) for v in value]
    return value


def clone(value: Any) -> Any:
    """A copy of the containers of plain data (dicts, lists, tuples); other objects are shared
    (they may be large, or not copyable at all)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    return value


_CONTAINERS = (dict, list)


def same_plain(a: Any, b: Any) -> bool:
    """``a == b`` for plain data, type for type (``1``, ``1.0`` and ``True`` differ; a tuple is
    not a list): whether a copy of args still stands for them."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        if a != b:  # one C comparison; then only the types (1 == 1.0 == True)
            return False
        for k, v in a.items():
            w = b[k]
            if type(v) is not type(w) or (type(v) in _CONTAINERS and not same_plain(v, w)):
                return False
        return True
    if type(a) is list:
        return len(a) == len(b) and all(same_plain(x, y) for x, y in zip(a, b))
    return bool(a == b)


def has_marker(value: Any, marker: type = Redacted) -> bool:
    """True when a marker (``Redacted`` or ``Unrestorable``) sits anywhere in plain data."""
    if isinstance(value, marker):
        return True
    if isinstance(value, dict):
        return any(has_marker(v, marker) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_marker(v, marker) for v in value)
    return False
