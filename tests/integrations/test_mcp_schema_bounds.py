"""MCP schemas are typed with bounded work (issue 34 §5): a definition is typed once.

A 1.5 kB schema of 12 definitions, each an ``anyOf`` of 4 references to the next, was expanded
4¹² times (``connect()`` never returned). The work is counted (calls of the typing function),
not timed: a budget far above what a linear walk needs, and far below the blow-up.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from planbook.mcp import schema as mcp_schema

#: calls of the typing function a schema of this size may take (a linear walk needs ~100)
BUDGET = 2_000


class Budget(Exception):
    pass


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = mcp_schema._annotation

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] > BUDGET:
            raise Budget(f"more than {BUDGET} calls: the schema is expanded, not typed once per definition")
        return real(*args, **kwargs)

    monkeypatch.setattr(mcp_schema, "_annotation", counting)
    return calls


def chain_schema(defs: int = 12, fan: int = 4) -> dict[str, Any]:
    """``d0 = anyOf[d1 x fan]``, ..., the last a string: ``fan ** defs`` paths, ``defs`` definitions."""
    definitions: dict[str, Any] = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"} for _ in range(fan)]}
                                   for i in range(defs)}
    definitions[f"d{defs}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}, "y": {"$ref": "#/$defs/d3"}},
            "required": ["x"], "$defs": definitions}


def test_a_chain_of_definitions_is_typed_once_each(counted: list[int]) -> None:
    schema = chain_schema()
    assert len(json.dumps(schema)) < 2_000
    args, notes = mcp_schema.arguments(schema)
    assert notes == [] and [(a.name, a.annotation, a.required) for a in args][0] == ("x", str, True)
    assert counted[0] < 200, counted[0]


def test_a_list_of_repeated_types_does_not_double_per_level(counted: list[int]) -> None:
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(30):
        inner = {"type": ["array", "array", "array"], "items": inner}
    args, _ = mcp_schema.arguments({"type": "object", "properties": {"x": inner}, "required": ["x"]})
    assert args[0].annotation is not Any and counted[0] < 500, counted[0]


def test_a_cycle_is_still_any_and_a_definition_used_twice_is_the_same_type(counted: list[int]) -> None:
    schema = {"type": "object", "required": ["t", "u", "v"],
              "properties": {"t": {"$ref": "#/$defs/tree"}, "u": {"$ref": "#/$defs/leaf"},
                             "v": {"type": "array", "items": {"$ref": "#/$defs/leaf"}}},
              "$defs": {"tree": {"anyOf": [{"$ref": "#/$defs/tree"}, {"type": "null"}]},
                        "leaf": {"enum": ["a", "b"]}}}
    args = {a.name: a.annotation for a in mcp_schema.arguments(schema)[0]}
    assert args["t"] is Any
    leaf = args["u"]  # named: ruff reads a string inside list[...] as a forward reference
    assert args["v"] == list[leaf]
