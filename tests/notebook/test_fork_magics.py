"""``%run_plan NAME --fork-at STEP --set k=v / --result VAR / --reuse`` and ``%diff_runs``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from IPython.core.error import UsageError

import planbook

CALLS: Counter[str] = Counter()
PLAN = """steps:
  - {id: a1, tool: inc, args: {x: 0}}
  - {id: a2, tool: inc, args: {x: $a1}}
  - {id: b1, tool: inc, args: {x: 0}}
  - {id: b2, tool: inc, args: {x: $b1}}
  - {id: join, tool: pair, args: {a: $a2, b: $b2}}
"""


@pytest.fixture
def chains(ip: Any, tmp_path: Any) -> Any:
    CALLS.clear()
    box = planbook.Toolbox()

    @box.tool
    def inc(x: int, by: int = 1) -> int:
        CALLS["inc"] += 1
        return x + by

    @box.tool
    def pair(a: int, b: int) -> int:
        CALLS["pair"] += 1
        return a * 1000 + b

    ip.user_ns["chainbox"] = box
    ip.run_line_magic("plan_store", str(tmp_path / "runs.sqlite"))
    ip.run_cell_magic("plan", "chains --tools chainbox", PLAN)
    parent = ip.run_line_magic("run_plan", "chains --no-view")
    assert parent.outputs["join"] == 2002
    CALLS.clear()
    return parent


def test_fork_at_with_set_runs_the_step_and_what_depends_on_it(ip: Any, chains: Any) -> None:
    child = ip.run_line_magic("run_plan", "chains --no-view --fork-at a1 --set x=5")
    assert sum(CALLS.values()) == 3 and child.outputs["join"] == 7002
    assert child.parent == chains.run_id


def test_fork_at_with_result_pins_a_variable(ip: Any, chains: Any) -> None:
    ip.user_ns["hundred"] = 100
    child = ip.run_line_magic("run_plan", "chains --no-view --fork-at b1 --result hundred")
    assert sum(CALLS.values()) == 2 and child.outputs["join"] == 2101


def test_fork_at_with_reuse_ancestors_runs_everything_after(ip: Any, chains: Any) -> None:
    ip.run_line_magic("run_plan", "chains --no-view --fork-at a2 --reuse ancestors")
    assert sum(CALLS.values()) == 4  # a2, b1, b2, join: only a1 (a2's need) is kept


@pytest.mark.parametrize("line, words", [
    ("chains --fork-at a1 --resume", "--fork-at and --resume cannot go together"),
    ("chains --fork-at a1 --restart", "--fork-at and --restart cannot go together"),
    ("chains --set x=1", "--set describe a fork: add --fork-at STEP"),
    ("chains --fork-at a1 --set x=1 --result v", "--set and --result cannot go together"),
    ("chains --fork-at a1 --set novalue", "write NAME=VALUE"),
    ("chains --no-view --fork-at zz", "has no step 'zz'"),
])
def test_flags_that_cannot_go_together_are_one_usage_error(ip: Any, chains: Any, line: str, words: str) -> None:
    before = len(planbook.runs(_store(ip)))
    with pytest.raises(UsageError, match=words):
        ip.run_line_magic("run_plan", line)
    assert len(planbook.runs(_store(ip))) == before and sum(CALLS.values()) == 0


def _store(ip: Any) -> Any:
    from planbook.notebook.magics import magics_of

    return magics_of(ip).session.store()


def test_diff_runs_name_compares_the_latest_fork_with_its_parent(ip: Any, chains: Any) -> None:
    child = ip.run_line_magic("run_plan", "chains --no-view --fork-at a1 --set x=5")
    diff = ip.run_line_magic("diff_runs", "chains")
    assert diff.first_divergence == "a1"
    same = ip.run_line_magic("diff_runs", f"{chains.run_id} {chains.run_id}")
    assert same.first_divergence is None
    ip.user_ns["kid"] = child
    by_var = ip.run_line_magic("diff_runs", f"{chains.run_id} kid --changed-only")
    assert by_var.first_divergence == "a1"


def test_diff_runs_of_a_plan_without_forks_says_how_to_make_one(ip: Any, chains: Any) -> None:
    with pytest.raises(UsageError, match="has no forked run in the store; make one with %run_plan chains --fork-at"):
        ip.run_line_magic("diff_runs", "chains")


def test_a_control_fork_of_a_planned_plan_is_a_control_fork_and_planner_asks_for_a_replan(ip: Any, chains: Any) -> None:
    """The planner %%plan used is not a request to plan again: --fork-at alone is a control fork;
    --planner VAR plans again from the fork point."""
    asked: list[str] = []

    def planner(goal: str, history: list[Any], last_error: str | None) -> list[Any]:
        asked.append(last_error or "")
        return [planbook.Step(id="join", tool="pair", args={"a": "$a2", "b": 5})]

    ip.user_ns["again"] = planner
    from planbook.notebook.magics import magics_of

    origin = magics_of(ip).session.origin_of("chains", ip.user_ns["chains"])
    assert origin is not None  # %%plan chains made it: its planner becomes "again" (as %%plan --planner again would)
    origin.planner_obj, origin.planner = planner, "again"
    control = ip.run_line_magic("run_plan", "chains --no-view --fork-at join")
    assert asked == [] and control.outputs["join"] == 2002 and sum(CALLS.values()) == 1
    replanned = ip.run_line_magic("run_plan", "chains --no-view --fork-at join --planner again")
    assert len(asked) == 1 and "plan again from step join" in asked[0] and replanned.outputs["join"] == 2005
