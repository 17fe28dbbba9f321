"""diff_runs: the comparison of runs, on the issue's plan of two 10-step chains and a join.

Real runs (planbook.run) and real forks (planbook.engine.fork.fork): a control fork reports no
change, an edit's consequences are told apart from replay noise, a pinned, a removed and a new
step are named, and nothing secret leaves by the text, the HTML or the rows.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook.data.models import Event, Usage
from planbook.data.rundiff import RunDiff, diff_runs, needs_first, same_value
from planbook.engine.fork import fork


@planbook.tool
def inc(x: int, by: int = 1) -> int:
    return x + by


@planbook.tool
def join(a: int, b: int) -> int:
    return a * 1000 + b


_TICKS = itertools.count(1)


@planbook.tool
def tick(x: int = 0) -> int:
    """Not deterministic: another number at every call (a clock, a sample, a model)."""
    return x + next(_TICKS)


TOOLS = [inc, join, tick]


def chains_plan(goal: str = "two chains") -> planbook.Plan:
    steps: list[dict[str, Any]] = [{"id": f"{c}{i}", "tool": "inc", "args": {"x": 0} if i == 1 else {"x": f"${c}{i - 1}"}}
                                   for c in "ab" for i in range(1, 11)]
    steps.append({"id": "join", "tool": "join", "args": {"a": "$a10", "b": "$b10"}})
    return planbook.Plan.model_validate({"id": "chains", "goal": goal, "steps": steps})


@pytest.fixture(scope="module")
def base() -> planbook.RunResult:
    result = planbook.run(chains_plan(), tools=TOOLS, max_steps=100)
    assert result.ok and result.outputs["join"] == 10010
    return result


def by_step(diff: RunDiff) -> dict[str, dict[str, Any]]:
    return {row["step"]: row for row in diff.rows()}


A_CHAIN = [f"a{i}" for i in range(1, 11)]
B_CHAIN = [f"b{i}" for i in range(1, 11)]


def test_a_control_fork_reports_no_change(base: planbook.RunResult) -> None:
    child = fork(base, at="a5", tools=TOOLS, max_steps=100)
    diff = diff_runs(base, child)
    assert diff.verdict == "identical" and diff.identical
    assert diff.first_divergence is None and diff.first_divergences == {child.run_id: None}
    rows = by_step(diff)
    assert {rows[s]["other_how"] for s in ("a5", "a6", "a10", "join")} == {"re-ran"}
    assert {rows[s]["other_how"] for s in ("a1", "a4", *B_CHAIN)} == {"kept"}
    assert all(row["other_change"] == "same" and row["other_result_same"] for row in rows.values())
    assert "identical" in diff.text() and "kept 14, re-running 7" in diff.text()


def test_an_args_fork_at_a1_diverges_at_a1_and_keeps_the_other_chain(base: planbook.RunResult) -> None:
    child = fork(base, at="a1", args={"x": 5}, tools=TOOLS, max_steps=100)
    diff = diff_runs(base, child)
    assert diff.first_divergence == "a1"
    rows = by_step(diff)
    for sid in [*A_CHAIN, "join"]:
        assert rows[sid]["other_how"] == "re-ran" and rows[sid]["changed"], sid
        assert rows[sid]["other_result_same"] is False and not rows[sid]["other_noise"], sid
    assert rows["a1"]["other_change"] == "edited" and rows["a1"]["other_call_same"] is False
    assert {rows[s]["other_change"] for s in [*A_CHAIN[1:], "join"]} == {"follows"}
    for sid in B_CHAIN:
        assert rows[sid]["other_how"] == "kept" and rows[sid]["other_result_same"] and not rows[sid]["changed"], sid
    assert rows["a1"]["base_call"] == "inc(x=0)" and rows["a1"]["other_call"] == "inc(x=5)"
    assert diff.verdict == "11 steps differ: first at a1 (1 edited, 10 follow from the edit)"
    assert [p.revised for p in diff.plan_diffs] == [["a1"]]
    text = diff.text()
    assert "fork of run" in text and "x: 0 → 5" in text and "⚑ a1" in text
    assert diff.summaries[0].executions == 21 and diff.summaries[1].executions == 11


def test_replay_noise_is_labelled_noise_not_a_change_that_follows() -> None:
    plan = planbook.Plan.model_validate({"id": "noisy", "goal": "noise", "steps": [
        {"id": "seed", "tool": "inc", "args": {"x": 1}},
        {"id": "sample", "tool": "tick", "args": {"x": "$seed"}},
        {"id": "after", "tool": "inc", "args": {"x": "$sample"}},
        {"id": "other", "tool": "inc", "args": {"x": "$seed"}},
    ]})
    base = planbook.run(plan, tools=TOOLS, max_steps=100)
    child = fork(base, at="sample", tools=TOOLS, max_steps=100)  # a control fork: no edit
    diff = diff_runs(base, child)
    rows = by_step(diff)
    assert diff.first_divergence == "sample"
    # the same resolved call, another result: replay noise
    assert rows["sample"]["other_change"] == "noise" and rows["sample"]["other_call_same"] is True
    assert rows["sample"]["other_result_same"] is False and rows["sample"]["other_noise"]
    # its call differs only because of the noise upstream: noise too, not a change that follows
    assert rows["after"]["other_change"] == "noise" and rows["after"]["other_call_same"] is False
    assert rows["seed"]["other_change"] == rows["other"]["other_change"] == "same"
    assert "replay noise only" in diff.verdict and "follow" not in diff.verdict.split("—")[0]
    assert "noise" in diff.text() and "edited" not in diff.text().split("Steps")[1]


def test_an_edit_downstream_of_noise_is_still_a_change_that_follows() -> None:
    plan = planbook.Plan.model_validate({"id": "mixed", "goal": "mixed", "steps": [
        {"id": "p", "tool": "inc", "args": {"x": 1}},
        {"id": "q", "tool": "tick", "args": {"x": 0}},
        {"id": "r", "tool": "join", "args": {"a": "$p", "b": "$q"}},
    ]})
    base = planbook.run(plan, tools=TOOLS, max_steps=100)
    child = fork(base, at="p", args={"x": 2}, tools=TOOLS, max_steps=100, reuse="ancestors")
    rows = by_step(diff_runs(base, child))
    assert rows["p"]["other_change"] == "edited"
    assert rows["r"]["other_change"] == "follows"  # one input from the edit: it follows, whatever the noise


def test_a_pinned_result_shows_pinned(base: planbook.RunResult) -> None:
    child = fork(base, at="a1", result=7, tools=TOOLS, max_steps=100)
    diff = diff_runs(base, child)
    rows = by_step(diff)
    assert rows["a1"]["other_how"] == "pinned" and rows["a1"]["other_change"] == "edited"
    assert rows["a1"]["other_seconds"] is None  # it did not run in the fork
    assert rows["a2"]["other_how"] == "re-ran" and rows["a2"]["other_change"] == "follows"
    assert diff.first_divergence == "a1" and "pinned" in diff.text()


def test_a_plan_fork_shows_removed_and_new_steps(base: planbook.RunResult) -> None:
    edited = chains_plan()
    edited.steps = [st for st in edited.steps if st.id != "join"]
    edited.steps.append(planbook.Plan.model_validate({"steps": [
        {"id": "total", "tool": "join", "args": {"a": "$b10", "b": "$a10"}}]}).steps[0])
    child = fork(base, plan=edited, tools=TOOLS, max_steps=100)
    diff = diff_runs(base, child)
    rows = by_step(diff)
    assert list(rows)[-2:] == ["join", "total"]  # the base's order, then the fork's new steps
    assert rows["join"]["other_how"] == "removed" and rows["join"]["other_change"] == "removed"
    assert rows["total"]["other_how"] == "new" and rows["total"]["base_how"] == "absent"
    assert rows["total"]["other_change"] == "new" and rows["total"]["base_status"] is None
    assert diff.first_divergence == "join"
    assert diff.plan_diffs[0].removed == ["join"] and diff.plan_diffs[0].added == ["total"]
    assert "removed join" in diff.text() and "added total" in diff.text()


def test_a_run_compared_with_itself_is_identical(base: planbook.RunResult) -> None:
    diff = diff_runs(base, base)
    assert diff.identical and diff.first_divergence is None
    assert diff.verdict.startswith("identical") and "compared with itself" in diff.text()


def test_runs_with_different_goals_may_be_compared_and_the_header_says_so(base: planbook.RunResult) -> None:
    other = planbook.run(chains_plan("two other chains"), tools=TOOLS, max_steps=100)
    diff = diff_runs(base, other)
    assert diff.goals_differ and diff.verdict == "identical"  # the same calls and results, another goal
    assert "goals differ" in diff.text() and "two other chains" in diff.text()
    assert f"run {base.run_id} vs run {other.run_id}" in diff.text()
    assert by_step(diff)["a1"]["other_how"] == "ran"  # not a fork: its steps ran, they did not re-run


def test_rows_are_flat_for_pandas(base: planbook.RunResult) -> None:
    child = fork(base, at="b3", args={"x": 9}, tools=TOOLS, max_steps=100)
    rows = diff_runs(base, child).rows()
    assert len(rows) == 21
    keys = rows[0].keys()
    for row in rows:
        assert row.keys() == keys  # one set of columns
        assert all(v is None or type(v) in (str, int, float, bool) for v in row.values()), row


def test_changed_only_filters_rows_and_text(base: planbook.RunResult) -> None:
    child = fork(base, at="b9", args={"x": 1}, tools=TOOLS, max_steps=100)
    diff = diff_runs(base, child)
    assert [r["step"] for r in diff.rows(changed_only=True)] == ["b9", "b10", "join"] == diff.changed_steps()
    text = diff.text(changed_only=True)
    step_lines = text.split("first divergence):\n")[1].splitlines()
    assert [line.split()[0] for line in step_lines[:3]] == ["⚑", "b10", "join"] and "18 unchanged steps not shown" in text
    assert "= a1 … b8: 18 steps the same in every run" in diff.text()


def test_several_runs_against_one_base(base: planbook.RunResult) -> None:
    one = fork(base, at="a1", args={"x": 5}, tools=TOOLS, max_steps=100)
    two = fork(base, at="b1", args={"x": 5}, tools=TOOLS, max_steps=100)
    diff = diff_runs(base, one, two)
    assert diff.divergences == ["a1", "b1"]
    assert diff.first_divergences == {one.run_id: "a1", two.run_id: "b1"}
    row = by_step(diff)["a1"]
    assert row["other1_change"] == "edited" and row["other2_change"] == "same" and row["other2_how"] == "kept"
    assert f"run {one.run_id}: 11 steps differ" in diff.verdict


def test_stored_runs_compare_as_live_ones(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    base = planbook.run(chains_plan(), tools=TOOLS, max_steps=100, store=store)
    child = fork(base.run_id, at="a1", args={"x": 5}, tools=TOOLS, store=store)
    live = diff_runs(base, child)
    stored = diff_runs(planbook.load_run(base.run_id, store=store), planbook.load_run(child.run_id, store=store))
    assert stored.first_divergence == live.first_divergence == "a1"
    assert stored.verdict == live.verdict
    assert [(r["step"], r["other_how"], r["other_change"]) for r in stored.rows()] == \
           [(r["step"], r["other_how"], r["other_change"]) for r in live.rows()]


def test_model_tokens_are_counted_per_step_from_llm_call_events(base: planbook.RunResult) -> None:
    child = fork(base, at="a1", args={"x": 5}, tools=TOOLS, max_steps=100)
    events = [*child.events, Event.record("llm.call", child.events[-1].time, "a2", 1,
                                          {"prompt_tokens": 30, "completion_tokens": 12})]
    child = child.model_copy(update={"events": events, "usage": Usage.from_events(events)})  # an agent's call
    diff = diff_runs(base, child)
    row = by_step(diff)["a2"]
    assert row["other_tokens"] == 42 and row["other_tokens_delta"] == 42 and row["base_tokens"] == 0
    assert diff.summaries[1].model_calls == 1 and diff.summaries[1].tokens == 42
    assert "Δ tokens" in diff.html()


def test_a_secret_never_leaves_by_text_html_or_rows(tmp_path: Path) -> None:
    known = "canary-known-71f3e9"  # a secret the gate learns (a secret-named argument's value)
    given = "canary-given-c04d2b"  # a Secret given in a fork's edit

    @planbook.tool
    def login(user: str, password: str) -> str:
        return f"session of {user} opened with {password}"

    @planbook.tool
    def echo(text: str) -> str:
        return f"echo: {text}"

    plan = planbook.Plan.model_validate({"id": "secrets", "goal": "log in", "steps": [
        {"id": "login", "tool": "login", "args": {"user": "ada", "password": known}},
        {"id": "show", "tool": "echo", "args": {"text": "$login"}},
    ]})
    base = planbook.run(plan, tools=[login, echo], max_steps=10)
    child = fork(base, at="login", args={"password": planbook.Secret(given, name="forkpw")}, tools=[login, echo])
    diff = diff_runs(base, child)
    outputs = [diff.text(), diff.text(changed_only=True), diff.html(), diff.html(changed_only=True), repr(diff),
               str(diff.rows()), str(diff._repr_mimebundle_()), str(diff.headers), diff.verdict]
    for out in outputs:
        assert known not in out and given not in out
    rows = {row["step"]: row for row in diff.rows()}
    assert rows["login"]["other_call"] == "login(user='ada', password=***)"
    assert rows["login"]["base_result"] == rows["show"]["other_result"].replace("echo: ", "") == \
           "session of ada opened with ***"


def test_same_value_is_deep_and_type_for_type() -> None:
    assert same_value({"a": [1, (2, 3)]}, {"a": [1, (2, 3)]})
    assert not same_value(1, 1.0) and not same_value(1, True) and not same_value([1], (1,))
    assert same_value(float("nan"), float("nan"))
    assert not same_value({"a": 1}, {"a": 1, "b": 2})

    class Frame:  # what pandas and numpy do: == gives no plain answer
        def __init__(self, v: list[int]) -> None:
            self.v = v

        def __eq__(self, other: object) -> Any:
            raise ValueError("ambiguous")

        def equals(self, other: "Frame") -> bool:
            return self.v == other.v

    assert same_value(Frame([1]), Frame([1])) and not same_value(Frame([1]), Frame([2]))


def test_bad_input_says_what_to_pass(base: planbook.RunResult) -> None:
    with pytest.raises(TypeError, match="at least one run"):
        diff_runs(base)
    with pytest.raises(TypeError, match="argument 2 is a str"):
        diff_runs(base, "run-id")  # type: ignore[arg-type]


def test_needs_come_first_without_recursion_however_deep_or_ordered() -> None:
    """A step listed before its needs, thousands deep, is settled after them (no recursion limit); a
    cycle (which a valid plan has not) ends the walk instead of looping."""
    n = 5000
    steps = {f"s{i}": planbook.Plan.model_validate({"steps": [
        {"id": f"s{i}", "tool": "inc", "args": {"x": 0}, "needs": [f"s{i - 1}"] if i > 1 else []}]}).steps[0]
        for i in range(1, n + 1)}
    order = [f"s{i}" for i in range(n, 0, -1)]  # the last step first
    assert needs_first(order, steps) == [f"s{i}" for i in range(1, n + 1)]
    a, b = (planbook.Plan.model_validate({"steps": [{"id": x, "tool": "inc", "args": {"x": 0}, "needs": [y]}]}).steps[0]
            for x, y in (("a", "b"), ("b", "a")))
    assert sorted(needs_first(["a", "b"], {"a": a, "b": b})) == ["a", "b"]


def test_decisions_of_each_run_are_listed_a_kept_step_asks_no_more() -> None:
    from planbook.engine.approvals import Decision

    plan = planbook.Plan.model_validate({"id": "asks", "goal": "asks", "steps": [
        {"id": "s1", "tool": "inc", "args": {"x": 1}}, {"id": "s2", "tool": "inc", "args": {"x": "$s1"}}]})
    approve = lambda step, context: Decision.approve()  # noqa: E731
    base = planbook.run(plan, tools=TOOLS, approve=approve)
    child = fork(base, at="s2", args={"by": 2}, tools=TOOLS, approve=approve)
    diff = diff_runs(base, child)
    assert [d[:2] for d in diff.summaries[0].decisions] == [("s1", "approve"), ("s2", "approve")]
    assert [d[:2] for d in diff.summaries[1].decisions] == [("s2", "approve")]
    assert f"{child.run_id}: s2: approved (api)" in diff.text()
    assert "Decisions (" in diff.html() and "s1: approved (api)" in diff.html()
