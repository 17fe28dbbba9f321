"""Small text helpers of the model layer: shortening and token estimates (redaction is the gate's).

One definition each, shared by the planner, the agent, the cassettes and
``planbook.testing`` (which imports from here, never the other way round).
"""

from __future__ import annotations

import json
from typing import Any


def shorten(value: Any, limit: int = 200, *, as_json: bool = False) -> str:
    """A value as a prompt or a message shows it (its repr, or JSON), cut to ``limit`` characters."""
    if isinstance(value, str):
        text = value
    elif as_json:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token."""
    return (len(text) + 3) // 4


def json_cut_off(text: str) -> bool:
    """Whether JSON ``text`` ends inside a string or with a bracket still open: cut off, not mistyped."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


def json_kind(value: Any) -> str:
    """``list``, ``string``, ... : what a JSON value is, in words (for errors)."""
    if isinstance(value, bool):
        return "true/false"
    return {list: "list", str: "string", dict: "object", int: "number", float: "number"}.get(type(value), "null")
