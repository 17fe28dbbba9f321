"""A ``$id`` reference whose type cannot fit its argument is refused when the plan is checked.

Before, an argument holding a reference was not type-checked at all: ``urls: "${a}${b}${c}"``
for a ``list[str]`` argument passed the check and failed only when its step was called,
after the three steps before it had run. Whatever could fit still passes (``Any``, an
unannotated tool, a numeric text for an ``int``, a producer that may fail into None).
"""

from __future__ import annotations

from typing import Any

import pytest

import planbook
from planbook import Plan, PlanError, Problem, Toolbox
from planbook.spec.validate import plan_problems


def tools(calls: list[str] | None = None) -> Toolbox:
    calls = [] if calls is None else calls
    box = Toolbox()

    @box.tool
    def search(q: str) -> str:
        """A text."""
        calls.append(f"search {q}")
        return q

    @box.tool
    def table(q: str) -> dict[str, int]:
        """A mapping."""
        calls.append(f"table {q}")
        return {q: 1}

    @box.tool
    def many(q: str) -> list[str]:
        """A list."""
        calls.append(f"many {q}")
        return [q]

    @box.tool
    def unsaid(q: str):  # no return type: nothing is decided of its result
        calls.append(f"unsaid {q}")
        return q

    @box.tool
    def fetch(urls: list[str]) -> str:
        """Fetch each url."""
        calls.append(f"fetch {urls}")
        return ",".join(urls)

    @box.tool
    def number(n: int) -> int:
        """A number."""
        return n

    @box.tool
    def maybe(urls: list[str] | None = None) -> str:
        """Urls or none."""
        return str(urls)

    @box.tool
    def anything(value: Any) -> Any:
        """Any value."""
        return value

    @box.tool
    def record(entry: dict[str, list[str]]) -> str:
        """A mapping of lists."""
        return str(entry)

    return box


PRODUCERS = """steps:
  - {id: a, tool: search, args: {q: x}, on_failure: abort}
  - {id: b, tool: search, args: {q: y}, on_failure: abort}
  - {id: c, tool: table, args: {q: z}, on_failure: abort}
  - {id: l, tool: many, args: {q: z}, on_failure: abort}
  - {id: u, tool: unsaid, args: {q: z}, on_failure: abort}
"""


def check(*lines: str) -> list[Problem]:
    spec = PRODUCERS + "".join(f"  - {line}\n" for line in lines)
    return plan_problems(Plan.parse(spec), tools(), [])


def only(line: str) -> Problem:
    found = check(line)
    assert len(found) == 1, found
    return found[0]


def test_text_with_several_references_cannot_be_a_list() -> None:
    p = only('{id: f, tool: fetch, args: {urls: "${a}${b}${c}"}}')
    assert (p.step, p.code, p.line) == ("f", "ref_type", 7)
    assert p.message == (
        "argument 'urls' of tool 'fetch' expects list[str], but its value is text (a str, with ${a}, ${b}, ${c} "
        "written into it), which cannot be list[str]: the step would fail when called, after the steps before it "
        "ran. To pass the results themselves write the list [$a, $b, $c]")


def test_a_whole_reference_to_a_result_of_another_type_is_refused() -> None:
    p = only("{id: f, tool: fetch, args: {urls: $c}}")
    assert (p.step, p.code) == ("f", "ref_type")
    assert p.message == (
        "argument 'urls' of tool 'fetch' expects list[str], but $c gives the result of step 'c', and tool 'table' "
        "returns dict[str, int], which cannot be list[str]: the step would fail when called, after the steps before "
        "it ran. Refer to a step whose result is list[str], add a step that turns the result of 'c' into one, or "
        "correct the return type tool 'table' declares")
    assert "tool 'many' returns list[str], which cannot be str" in only("{id: f, tool: search, args: {q: $l}}").message
    assert "returns dict[str, int], which cannot be int" in only("{id: f, tool: number, args: {n: $c}}").message


def test_an_item_of_a_written_list_is_checked_against_the_items_type() -> None:
    p = only("{id: f, tool: fetch, args: {urls: [$a, $l]}}")
    assert "in an item of it, $l gives the result of step 'l'" in p.message
    assert "which cannot be str" in p.message and p.message.endswith("write $l without the brackets")
    assert "cannot be list[str]" in only("{id: f, tool: record, args: {entry: {k: $c}}}").message
    p = only('{id: f, tool: number, args: {n: [$a]}}')
    assert "its value is a list, which cannot be int" in p.message


@pytest.mark.parametrize("line", [
    "{id: f, tool: fetch, args: {urls: $l}}",  # list[str] into list[str]
    "{id: f, tool: fetch, args: {urls: [$a, $b, '${c}']}}",  # texts as items
    "{id: f, tool: fetch, args: {urls: $u}}",  # the producer says nothing of its result
    "{id: f, tool: anything, args: {value: '${a}${b}'}}",  # Any takes everything
    "{id: f, tool: number, args: {n: '${a}'}}",  # a text may be '3', which passes int
    "{id: f, tool: search, args: {q: 'about ${c}'}}",  # text into text
    "{id: f, tool: record, args: {entry: {k: $l}}}",
])
def test_what_could_fit_passes(line: str) -> None:
    assert check(line) == []


def test_a_producer_that_may_fail_into_none_passes_an_optional_argument() -> None:
    """With on_failure continue (the step's or, unsaid, the run's) its dependents run with None."""
    plan = Plan.parse("steps:\n  - {id: c, tool: table, args: {q: z}}\n  - {id: f, tool: maybe, args: {urls: $c}}\n")
    assert plan_problems(plan, tools(), []) == []
    plan = Plan.parse("steps:\n  - {id: c, tool: table, args: {q: z}, on_failure: skip}\n"
                      "  - {id: f, tool: maybe, args: {urls: $c}}\n")
    assert [p.code for p in plan_problems(plan, tools(), [])] == ["ref_type"]


def test_a_completed_producer_or_a_step_outside_the_plan_is_not_guessed() -> None:
    plan = Plan.parse("steps:\n  - {id: f, tool: fetch, args: {urls: $kept}}\n")
    assert plan_problems(plan, tools(), [], known_ids=["kept"]) == []


def test_run_refuses_the_plan_before_any_step_runs() -> None:
    calls: list[str] = []
    spec = PRODUCERS.split("  - {id: c")[0] + '  - {id: f, tool: fetch, args: {urls: "${a}${b}"}}\n'
    with pytest.raises(PlanError) as info:
        planbook.run(spec, tools=tools(calls))
    assert calls == []  # before: search x, search y ran, then fetch failed
    (problem,) = info.value.problems
    assert (problem.step, problem.code) == ("f", "ref_type")
    assert "expects list[str]" in str(info.value) and "[$a, $b]" in str(info.value)
