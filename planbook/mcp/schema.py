"""A tool's JSON input schema as typed arguments, so planbook's plan checks apply to MCP tools.

Each property becomes a field pydantic can validate (``enum`` → ``Literal``,
``["string", "null"]`` or ``anyOf`` with null → ``Optional``); required properties have
no default. A type the mapping does not know, cannot express (an ``enum`` of lists) or
cannot finish (a ``$ref`` cycle, a schema nested deeper than :data:`MAX_DEPTH`) is ``Any``
(not checked), never a guess. A definition (``$defs``) is typed once per schema, however many
places refer to it: 12 definitions each an ``anyOf`` of 4 references to the next would
otherwise be expanded 4¹² times, and ``connect()`` would never return. Any JSON object key can be an argument name: plans pass
arguments in a mapping, so ``from``, ``class`` or ``_x`` reach the server as they are.
"""

from __future__ import annotations

import inspect
import keyword
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

_SIMPLE: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
#: values a ``Literal`` holds and pydantic compares exactly (floats too: JSON numbers)
_LITERAL_TYPES = (str, int, float, bool, type(None))
#: how deep a schema is followed before the rest is typed ``Any`` (no server needs more; a
#: hostile or generated one must not exhaust the interpreter's stack)
MAX_DEPTH = 32


def annotation(schema: Any, defs: dict[str, Any] | None = None, typed: dict[str, Any] | None = None) -> Any:
    """The Python type for one JSON schema (``Any`` when it cannot say more). ``typed``: the
    definitions typed so far (shared by the properties of one schema, so each is typed once)."""
    return _annotation(schema, defs if isinstance(defs, dict) else {}, (), 0, {} if typed is None else typed)


def _annotation(schema: Any, defs: dict[str, Any], refs: tuple[str, ...], depth: int,
                typed: dict[str, Any]) -> Any:
    """``refs``: the ``$ref`` names being expanded (one seen again is a cycle: ``Any``);
    ``typed``: each definition's type once it is known (a definition is typed once)."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return Any
    ref = schema.get("$ref")
    if isinstance(ref, str):
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                name = ref[len(prefix):]
                if name in typed:
                    return typed[name]
                if name in refs:
                    return Any  # a self-referencing type (a tree, a linked list): checked to this depth
                typed[name] = found = _annotation(defs.get(name), defs, (*refs, name), depth + 1, typed)
                return found
        return Any
    if "enum" in schema:
        values = schema["enum"]
        if isinstance(values, list) and values and all(isinstance(v, _LITERAL_TYPES) for v in values):
            return Literal[tuple(values)]
        return Any  # an enum of lists or objects: pydantic's Literal cannot hold them
    if "const" in schema:
        return Literal[schema["const"]] if isinstance(schema["const"], _LITERAL_TYPES) else Any
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return _union([_annotation(s, defs, refs, depth + 1, typed) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):  # each kind once: ["array", "array", ...] must not double the work per level
        kinds = dict.fromkeys(k for k in kind if isinstance(k, str))
        return _union([_annotation({**schema, "type": k}, defs, refs, depth + 1, typed) for k in kinds])
    if kind == "array":
        if "items" not in schema:
            return list[Any]
        return list[_annotation(schema["items"], defs, refs, depth + 1, typed)]  # type: ignore[misc]  # built at run time
    if kind == "object":
        return dict[str, Any]
    return _SIMPLE.get(kind, Any) if isinstance(kind, str) else Any


def _union(types: list[Any]) -> Any:
    if not types or any(t is Any for t in types):
        return Any
    unique = list(dict.fromkeys(types))
    if len(unique) == 1:
        return unique[0]
    non_null = [t for t in unique if t is not type(None)]
    if len(non_null) == 1 and len(unique) == 2:
        return Optional[non_null[0]]  # noqa: UP045 - reads as the user's "nullable"
    return Union[tuple(unique)]  # noqa: UP007


@dataclass(frozen=True)
class Argument:
    """One property of a tool's input schema, as planbook checks it."""

    #: the name on the server (any JSON object key)
    name: str
    annotation: Any
    required: bool
    default: Any = None


def arguments(schema: Any) -> tuple[list[Argument], list[str]]:
    """The arguments of a tool's ``input_schema``, required ones first, and what could not be typed.

    Never raises for a schema's content: a property whose type cannot be read is ``Any``,
    and the second list says why, for a warning. No readable ``properties`` gives no arguments.
    """
    notes: list[str] = []
    if not isinstance(schema, dict):
        return [], [f"its input schema is a {type(schema).__name__}, not a JSON object, so its arguments are not "
                    "checked"]
    props = schema.get("properties") or {}
    if not isinstance(props, dict):
        return [], [f"its input schema's properties are a {type(props).__name__}, not a JSON object, so its "
                    "arguments are not checked"]
    listed = schema.get("required") or []
    required = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    defs = schema.get("$defs") or schema.get("definitions") or {}
    result: list[Argument] = []
    typed: dict[str, Any] = {}  # each definition typed once, for every property that refers to it
    # required first, so the signature reads like the server's list of needs
    for name in sorted(props, key=lambda n: n not in required):
        prop = props[name]
        try:
            ann = annotation(prop, defs, typed)
        except Exception as exc:  # noqa: BLE001 - one odd property must not lose the tool (a note says which)
            ann = Any
            notes.append(f"argument {name!r} is not type-checked ({type(exc).__name__}: {exc})")
        if name in required:
            result.append(Argument(name, ann, True))
            continue
        default = prop.get("default") if isinstance(prop, dict) else None
        if default is None and ann is not Any:
            ann = Optional[ann]  # noqa: UP045 - an optional argument left out is sent as absent
        result.append(Argument(name, ann, False, default))
    return result, notes


def keyword_name(name: str) -> bool:
    """Whether ``name`` can be a Python keyword argument (and a plain pydantic field)."""
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


def signature(tool_name: str, schema: dict[str, Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The keyword-only signature and annotations for a tool's ``input_schema``.

    Raises ValueError when a property name cannot be a Python argument name; MCP tools
    use :func:`arguments`, which takes any name (plans pass arguments in a mapping).
    """
    args, _ = arguments(schema)
    for arg in args:
        if not keyword_name(arg.name):
            raise ValueError(f"MCP tool {tool_name!r} has an argument {arg.name!r} that cannot be passed by name "
                             "from Python code (not a Python identifier)")
    return python_signature(args), {arg.name: arg.annotation for arg in args}


def python_signature(args: list[Argument]) -> inspect.Signature:
    """The keyword-only signature of ``args`` (what ``help()`` shows); names Python cannot spell
    (``from``, ``_x``) and pydantic's own (``model_*``) are taken by ``**_others``."""
    params = [inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, annotation=arg.annotation,
                                default=inspect.Parameter.empty if arg.required else arg.default)
              for arg in args if keyword_name(arg.name) and not arg.name.startswith("model_")]
    if len(params) < len(args):
        params.append(inspect.Parameter("_others", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def args_model(tool_name: str, args: list[Argument]) -> tuple[type[BaseModel], dict[str, str], list[str]]:
    """A pydantic model of ``args``, the field name of each argument, and the arguments typed ``Any``
    because pydantic refused their type (with why).

    A name pydantic cannot hold as a field (``_x``, ``model_dump``, ``json``) gets a field of
    another name whose alias is the server's name, so validation and errors still use the
    server's name.
    """
    taken = {arg.name for arg in args}
    attrs: dict[str, str] = {}
    for index, arg in enumerate(args):
        attr = arg.name
        if not keyword_name(attr) or attr.startswith("model_") or hasattr(BaseModel, attr):
            attr = f"arg{index}"
            while attr in taken:
                attr += "_"
        attrs[arg.name] = attr
    notes: list[str] = []
    types = {arg.name: arg.annotation for arg in args}
    try:
        model = _model(tool_name, args, attrs, types)
    except Exception:  # noqa: BLE001 - find the argument(s) pydantic refused; the others stay typed
        for arg in args:
            try:
                _model(tool_name, [arg], attrs, types)
            except Exception as exc:  # noqa: BLE001
                types[arg.name] = Any
                notes.append(f"argument {arg.name!r} is not type-checked ({type(exc).__name__}: {exc})")
        model = _model(tool_name, args, attrs, types)
    return model, attrs, notes


def _model(tool_name: str, args: list[Argument], attrs: dict[str, str], types: dict[str, Any]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for arg in args:
        attr = attrs[arg.name]
        default = ... if arg.required else arg.default
        fields[attr] = (types[arg.name], Field(default, alias=arg.name) if attr != arg.name else default)
    config = ConfigDict(arbitrary_types_allowed=True, extra="ignore")
    return create_model(f"{_identifier(tool_name)}_args", __config__=config, **fields)


def _identifier(name: str) -> str:
    text = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return text if text.isidentifier() else f"t_{text}"
