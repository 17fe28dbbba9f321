"""With the cache off, a stored run does not resolve each step's arguments a second time to ask a
cache nobody asked for (it cost a tenth of the store's overhead per step: issue 38)."""

from __future__ import annotations

from typing import Any

import pytest

import planbook
from planbook import Toolbox
from planbook.engine import _loop

PLAN = """
steps:
  - {id: a, tool: add, args: {x: 1, y: 2}}
  - {id: b, tool: add, args: {x: $a, y: 3}, needs: [a]}
  - {id: c, tool: add, args: {x: $b, y: 4}, needs: [b]}
"""


def tools(*, cache: bool | None = None) -> Toolbox:
    box = Toolbox()

    @box.tool(cache=cache)
    def add(x: int, y: int) -> int:
        return x + y

    return box


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every resolution the tick loop makes on its own (the call itself resolves elsewhere)."""
    seen: list[Any] = []
    real = _loop.resolve

    def counting(args: Any, results: Any) -> Any:
        seen.append(args)
        return real(args, results)

    monkeypatch.setattr(_loop, "resolve", counting)
    return seen


def test_a_stored_run_with_the_cache_off_resolves_nothing_to_ask_it(resolved: list[Any]) -> None:
    result = planbook.run(PLAN, tools=tools(), store=":memory:")
    assert result.ok and result.plan.step("c").result == 10
    assert resolved == []


def test_a_cached_tool_is_still_asked(resolved: list[Any]) -> None:
    store = planbook.store.MemoryStore()
    planbook.run(PLAN, tools=tools(cache=True), store=store)
    again = planbook.run(PLAN, tools=tools(cache=True), store=store)
    assert again.ok and len(resolved) == 6  # three steps asked the cache in each run
    assert all(st.mark is not None and st.mark.value == "cached" for st in again.plan.steps)
