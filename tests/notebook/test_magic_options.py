"""Magic options and names that would silently do the wrong thing: refused with a UsageError."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

from planbook import PlanError

SPEC = "steps:\n  - {id: a, tool: echo_value, args: {value: 1}}\n"


def cell(ip: Any, text: str) -> Any:
    result = ip.run_cell(text)
    for error in (result.error_before_exec, result.error_in_exec):
        if error is not None:
            raise error
    return result.result


@pytest.mark.parametrize("name", ["print", "list", "input", "In", "get_ipython"])
def test_a_plan_name_that_shadows_a_builtin_is_refused(ip: Any, name: str) -> None:
    before = ip.user_ns.get(name)
    with pytest.raises(UsageError) as info:
        cell(ip, f"%%plan {name}\n{SPEC}")
    assert f"storing the plan as {name!r} would hide" in str(info.value)
    assert f"%%plan {name}_plan" in str(info.value)
    assert ip.user_ns.get(name) is before  # nothing was overwritten


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-2"])
def test_run_plan_timeout_must_be_a_positive_finite_number(ip: Any, value: str) -> None:
    ip.user_ns["timed_spec"] = "steps:\n  - {id: a, agent: none}\n"
    with pytest.raises(UsageError, match="--timeout must be a positive number of seconds"):
        cell(ip, f"%run_plan timed_spec --timeout {value} --no-view")


def test_deep_nesting_in_a_cell_is_a_plan_error_with_the_line(ip: Any) -> None:
    body = "steps:\n  - id: a\n    tool: echo_value\n    args:\n      value: " + "[" * 600 + "]" * 600 + "\n"
    with pytest.raises(PlanError) as info:
        cell(ip, "%%plan deep\n" + body)
    (p,) = info.value.problems
    assert (p.code, p.line) == ("too_deep", 6)  # line 1 of the cell is the %%plan line


def test_run_plan_checks_its_options_before_it_looks_up_tools_agents_and_the_planner(ip: Any) -> None:
    """A bad number or --executor is named first, as before the magics were split: the tools,
    agents and planner are looked up (and a planner made: --planner llm needs its setup) after."""
    ip.user_ns["ordered_spec"] = SPEC
    with pytest.raises(UsageError, match="--retries must be a whole number >= 0"):
        cell(ip, "%run_plan ordered_spec --tools no_such_tools --retries -1 --no-view")
    with pytest.raises(UsageError, match="--max-steps must be a whole number >= 0"):
        cell(ip, "%run_plan ordered_spec --planner no_such_planner --max-steps -1 --no-view")
    with pytest.raises(UsageError, match="--executor no_such_executor"):
        cell(ip, "%run_plan ordered_spec --agents no_such_agents --executor no_such_executor --no-view")
