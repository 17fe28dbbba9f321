"""Copies of plain data: a step's args are copied when a run takes a plan, and when a replan keeps them."""

from __future__ import annotations

from typing import Any


def clone_data(value: Any) -> Any:
    """Copy the containers of plain data (dicts, lists, tuples); leave other objects shared."""
    if isinstance(value, dict):
        return {k: clone_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone_data(v) for v in value)
    return value
