"""A JSON Schema for plan files, so editors complete and check them as you type.

Generated from :class:`~planbook.data.models.StepSpec` (the one definition of a step's fields,
with the descriptions a model is shown too), widened to what :func:`planbook.spec.formats.parse_plan`
accepts beyond the model: an id written as a number (``id: 1``) or left out (the step's
position), ``needs`` as one id, a step written as a bare task, the seed designs' field names
(``need``, ``tool_name``, ...), and a bare list of steps. Unknown fields are refused, so a
typo is underlined where it is written.

``planbook schema > plan.schema.json``, then a first line
``# yaml-language-server: $schema=plan.schema.json`` in a YAML plan (or ``"$schema"`` in a
JSON one) is all an editor with the YAML language server needs.
"""

from __future__ import annotations

import copy
from typing import Any

from ..data.models import StepSpec
from .formats import ALIASES, PLAN_FIELDS, SCHEMA_KEY

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: the plan's own fields (a step's come from StepSpec)
_PLAN_PROPERTIES: dict[str, dict[str, Any]] = {
    "goal": {"type": "string", "description": "what the plan is for, in plain words"},
    "title": {"type": "string", "description": "a short title for views (default: the goal)"},
    "id": {"type": "string", "description": "the plan's id (default: made from the title or goal; %%plan NAME sets it)"},
}
_ID = {"type": ["string", "number"]}


def plan_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a YAML/JSON plan spec."""
    step = StepSpec.model_json_schema()
    properties: dict[str, Any] = step["properties"]
    properties["id"] = {
        **_without_type(properties["id"]), **_ID,
        "description": properties["id"]["description"] + " (default: the step's position, 1, 2, ...)",
    }
    properties["needs"] = {
        **_without_type(properties["needs"]),
        "anyOf": [_ID, {"type": "array", "items": _ID}],
    }
    for alias, name in ALIASES.items():
        properties[alias] = {**copy.deepcopy(properties[name]), "description": f"the same as '{name}'"}
        properties[alias].pop("title", None)
    step_schema = {
        "type": "object",
        "title": "Step",
        "description": "one unit of work: a tool call (tool + args) or a task for an agent",
        "properties": properties,
        "additionalProperties": False,
    }
    step_item = {"anyOf": [{"$ref": "#/$defs/Step"}, {"type": "string", "description": "a task for an agent, in words"}]}
    plan_properties: dict[str, Any] = {
        SCHEMA_KEY: {"type": "string", "description": "the JSON Schema of this file (for editors)"},
        **{name: _PLAN_PROPERTIES[name] for name in PLAN_FIELDS if name != "steps"},
        "steps": {"type": "array", "items": step_item, "description": "the steps, in order"},
    }
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "title": "planbook plan",
        "description": "A plan spec: a mapping with 'steps' (and a goal), or a list of steps.",
        "$defs": {
            "Step": step_schema,
            "Plan": {"type": "object", "properties": plan_properties, "required": ["steps"],
                     "additionalProperties": False},
        },
        "anyOf": [{"$ref": "#/$defs/Plan"}, {"type": "array", "items": step_item}],
    }


def _without_type(prop: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in prop.items() if k not in ("type", "items", "anyOf")}
