"""The step cache (issue 34 §5): its key covers the types planbook coerces arguments with; a
damaged cache row is a miss; keying a bound method's object state is bounded per step; a
Secret in args is keyed by its reference.

Each test was written against a defect seen before: ``qty: int`` → ``float`` and an edited
same-module pydantic default served the old answer; a row whose result was not JSON left
the run "running" (a raw ``JSONDecodeError``), a NULL result was served as ``None``; a
method over a 100,000-entry table was keyed whole before every call.
"""

from __future__ import annotations

import sqlite3
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Secret, Toolbox
from planbook.store import step_cache_key
from planbook.store.cachekey import code_fingerprint, fingerprint_problem
from planbook.store.keyparts import STATE_VALUES


def cell(source: str, name: str = "notebook_cell_types") -> types.ModuleType:
    """``source`` run as a notebook cell runs: in one module, which a later cell redefines."""
    module = sys.modules.get(name)
    if module is None:
        module = sys.modules[name] = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - the test's own code
    return module


@pytest.fixture(autouse=True)
def _forget_cells() -> Any:
    yield
    sys.modules.pop("notebook_cell_types", None)


# ------------------------------------------------------------------ the coercion types
def test_a_parameters_annotation_is_in_the_fingerprint() -> None:
    first = cell("def total(qty: int) -> str:\n    return repr(qty)\n").total
    again = cell("def total(qty: int) -> str:\n    return repr(qty)\n").total
    changed = cell("def total(qty: float) -> str:\n    return repr(qty)\n").total
    assert code_fingerprint(first) == code_fingerprint(again) is not None
    assert code_fingerprint(changed) != code_fingerprint(first)  # 2 becomes 2.0: another answer


def test_a_string_annotation_is_resolved_and_followed() -> None:
    source = """
        from __future__ import annotations
        from pydantic import BaseModel

        class Order(BaseModel):
            qty: int = {qty}

        def price(order: Order) -> int:
            return order.qty * 10
        """
    first = code_fingerprint(cell(source.format(qty=1)).price)
    assert first is not None and first == code_fingerprint(cell(source.format(qty=1)).price)
    assert code_fingerprint(cell(source.format(qty=2)).price) != first


def test_an_edited_pydantic_default_is_not_served_the_old_answer(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    source = """
        from pydantic import BaseModel

        class Order(BaseModel):
            qty: int = {qty}

        def price(order: Order) -> int:
            return order.qty * 10
        """
    plan = "steps:\n  - {id: p, tool: price, args: {order: {}}}\n"
    outputs = []
    for qty in (1, 1, 2):
        box = Toolbox()
        box.tool(cache=True)(cell(source.format(qty=qty)).price)
        outputs.append(planbook.run(plan, tools=box, store=store).outputs["p"])
    assert outputs == [10, 10, 20]


def test_a_type_change_from_int_to_float_is_a_miss_in_a_run(tmp_path: Path) -> None:
    store, plan = tmp_path / "runs.sqlite", "steps:\n  - {id: t, tool: total, args: {qty: 2}}\n"
    outputs = []
    for kind in ("int", "float"):
        box = Toolbox()
        box.tool(cache=True)(cell(f"def total(qty: {kind}) -> str:\n    return repr(qty)\n").total)
        outputs.append(planbook.run(plan, tools=box, store=store).outputs["t"])
    assert outputs == ["2", "2.0"]


# ------------------------------------------------------------------ a damaged row
CALLS: list[str] = []


def _square_box() -> Toolbox:
    box = Toolbox()

    @box.tool(cache=True)
    def square(x: int) -> int:
        CALLS.append("square")
        return x * x

    return box


@pytest.mark.parametrize("damage", [
    "UPDATE cache SET result = '{not json'",
    "UPDATE cache SET result = NULL",
    "UPDATE cache SET result_meta = '{'",
    "UPDATE cache SET result_kind = 'from-the-future'",
])
def test_a_damaged_cache_row_is_a_miss(tmp_path: Path, damage: str) -> None:
    store, plan = tmp_path / "runs.sqlite", "steps:\n  - {id: s, tool: square, args: {x: 7}}\n"
    CALLS.clear()
    assert planbook.run(plan, tools=_square_box(), store=store).outputs == {"s": 49}
    with sqlite3.connect(store) as con:
        assert con.execute(damage).rowcount == 1
    con.close()
    again = planbook.run(plan, tools=_square_box(), store=store)
    assert (again.status, again.outputs) == ("completed", {"s": 49}), again.error
    assert CALLS == ["square", "square"]  # the damaged row was not served: the call ran again
    third = planbook.run(plan, tools=_square_box(), store=store)  # and its result replaced the row
    assert third.outputs == {"s": 49} and CALLS == ["square", "square"]


# ------------------------------------------------------------------ a bound method's object state
class Table:
    def __init__(self, size: int) -> None:
        self.rows = {f"k{i}": i for i in range(size)}

    def look_up(self, key: str) -> int:
        return self.rows[key]


def test_keying_a_bound_methods_object_state_is_bounded() -> None:
    small, large = Table(10), Table(100_000)
    assert code_fingerprint(small.look_up) is not None
    assert code_fingerprint(large.look_up) is None  # not keyed whole before every call
    problem = fingerprint_problem(large.look_up) or ""
    assert "too large" in problem and f"{STATE_VALUES:,}" in problem and "version=" in problem


def test_a_step_over_a_large_table_says_why_it_is_not_cached(tmp_path: Path) -> None:
    box = Toolbox()
    box.tool(cache=True, name="look_up")(Table(100_000).look_up)
    result = planbook.run("steps:\n  - {id: l, tool: look_up, args: {key: k5}}\n", tools=box,
                          store=tmp_path / "runs.sqlite")
    assert result.outputs == {"l": 5}
    assert "too large" in result.plan.step("l").notes


def test_a_small_tables_change_still_changes_the_key() -> None:
    table = Table(10)
    before = code_fingerprint(table.look_up)
    table.rows["k0"] = -1
    assert code_fingerprint(table.look_up) != before


# ------------------------------------------------------------------ a Secret
def test_a_secret_in_args_is_keyed_by_its_reference() -> None:
    key = step_cache_key("login", {"token": Secret("pin-1234", name="cache-key-pin")})
    assert key is not None
    assert key == step_cache_key("login", {"token": Secret.from_ref("cache-key-pin")})
    assert key != step_cache_key("login", {"token": Secret.env("PLANBOOK_CACHE_KEY_OTHER")})
