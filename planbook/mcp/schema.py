"""A tool's JSON input schema as a Python signature, so planbook's plan checks apply to MCP tools.

The signature is what :class:`planbook.tools.Tool` reads: each property becomes a
keyword-only parameter whose annotation pydantic can validate (``enum`` → ``Literal``,
``["string", "null"]`` or ``anyOf`` with null → ``Optional``), required properties have
no default. A type the mapping does not know is ``Any`` (not checked), never a guess.
"""

from __future__ import annotations

import inspect
import keyword
from typing import Any, Literal, Optional, Union

_SIMPLE: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def annotation(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """The Python type for one JSON schema (``Any`` when it cannot say more)."""
    if not isinstance(schema, dict):
        return Any
    defs = defs or {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return annotation(defs.get(ref.rsplit("/", 1)[1]), defs)
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    if "const" in schema:
        return Literal[schema["const"]]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return _union([annotation(s, defs) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([annotation({**schema, "type": k}, defs) for k in kind])
    if kind == "array":
        return list[annotation(schema.get("items"), defs)] if "items" in schema else list[Any]
    if kind == "object":
        return dict[str, Any]
    return _SIMPLE.get(kind, Any) if isinstance(kind, str) else Any


def _union(types: list[Any]) -> Any:
    if any(t is Any for t in types):
        return Any
    unique = list(dict.fromkeys(types))
    if len(unique) == 1:
        return unique[0]
    non_null = [t for t in unique if t is not type(None)]
    if len(non_null) == 1 and len(unique) == 2:
        return Optional[non_null[0]]  # noqa: UP045 - reads as the user's "nullable"
    return Union[tuple(unique)]  # noqa: UP007


def signature(tool_name: str, schema: dict[str, Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The keyword-only signature and annotations for a tool's ``input_schema``.

    Raises ValueError when a property name cannot be a Python argument name (the tool
    could not be called by name from a plan).
    """
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    defs = schema.get("$defs") or schema.get("definitions") or {}
    params: list[inspect.Parameter] = []
    annotations: dict[str, Any] = {}
    # required first, so the signature reads like the server's list of needs
    for name in sorted(props, key=lambda n: n not in required):
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise ValueError(f"MCP tool {tool_name!r} has an argument {name!r} that cannot be passed by name "
                             "from a plan (not a Python identifier)")
        ann = annotation(props[name], defs)
        if name in required:
            default: Any = inspect.Parameter.empty
        else:
            default = props[name].get("default") if isinstance(props[name], dict) else None
            if default is None and ann is not Any:
                ann = Optional[ann]  # noqa: UP045 - an optional argument left out is sent as absent
        annotations[name] = ann
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann))
    return inspect.Signature(params), annotations
