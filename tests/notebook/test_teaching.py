"""planbook.teaching: each check reads a real run's result and says precisely what is right or
still missing, and "not yet" never raises (a course's unsolved exercise must not fail its cell)."""

from __future__ import annotations

from pathlib import Path

import pytest

import planbook
from planbook import teaching

CHAIN = """
steps:
  - {id: a, tool: t, args: {x: a}}
  - {id: b, tool: t, args: {x: b}}
  - {id: join, tool: t, args: {x: "${a}"}}
"""


def _tools(fail: set[str] | None = None, stop: set[str] | None = None) -> planbook.Toolbox:
    fail = set() if fail is None else fail
    stop = set() if stop is None else stop
    box = planbook.Toolbox()

    @box.tool
    def t(x: str) -> str:
        """Echo, failing or interrupted on cue."""
        if x in stop:
            stop.discard(x)
            raise KeyboardInterrupt
        if x in fail:
            fail.discard(x)
            raise ConnectionError(f"{x} is down")
        return x

    @box.tool(approve=False)
    def deploy(x: str) -> str:
        """Deploy."""
        return "deployed " + x

    return box


def test_a_result_that_is_not_a_run_is_not_yet_and_says_what_to_put() -> None:
    verdict = teaching.check(None, teaching.completed())
    assert not verdict and verdict.text.startswith("not yet: ") and "got nothing yet (None)" in verdict.text
    assert "got a str" in teaching.check("done", teaching.completed()).text
    with pytest.raises(ValueError, match="at least one check"):
        teaching.check(None)


def test_completed_and_step_ran_name_the_failed_step_and_its_error() -> None:
    result = planbook.run(CHAIN, tools=_tools(fail={"b"}))
    verdict = teaching.check(result, teaching.completed(), teaching.step_ran("a"), teaching.step_ran("join"))
    assert not verdict.right
    assert "the run ended failed (aborted) after step b failed: ConnectionError: b is down" in verdict.text
    assert "step join never ran: it is not_started" in verdict.text
    assert "already right: step a ran and completed" in verdict.text
    assert "not yet: the plan has no step 'c' (its steps: a, b, join)" in str(
        teaching.check(result, teaching.step_ran("c")))


def test_survived_failure_tells_no_failure_from_a_failure_not_survived() -> None:
    clean = planbook.run(CHAIN, tools=_tools())
    assert "never failed" in teaching.check(clean, teaching.survived_failure()).text
    aborted = planbook.run(CHAIN, tools=_tools(fail={"b"}))
    assert "step b failed and the run ended failed (aborted)" in teaching.check(aborted, teaching.survived_failure()).text
    retried = planbook.run(CHAIN, tools=_tools(fail={"b"}), on_failure="retry", retries=1)
    verdict = teaching.check(retried, teaching.survived_failure("b"), teaching.completed())
    assert verdict.right and verdict.text.startswith("right: a step failed and the run completed")


def test_needs_both_says_which_need_is_missing() -> None:
    result = planbook.run(CHAIN, tools=_tools())
    assert teaching.check(result, teaching.needs_both("join", "a", "b")).text == (
        "not yet: step join needs a, not b: use their results ($b or ${b}) or list them under needs")
    both = planbook.run(CHAIN.replace('"${a}"', '"${a}${b}"'), tools=_tools())
    assert teaching.check(both, teaching.needs_both("join", "a", "b")).right


def test_output_and_used_tool() -> None:
    result = planbook.run(CHAIN, tools=_tools())
    assert teaching.check(result, teaching.output("join", "a"), teaching.used_tool("t")).right
    assert "step join returned 'a', not 'b'" in teaching.check(result, teaching.output("join", "b")).text
    assert "no step of the plan calls deploy (the tools it calls: t)" in teaching.check(
        result, teaching.used_tool("deploy")).text


def test_approved_only_names_the_steps_that_asked_too() -> None:
    plan = CHAIN.replace("  - {id: join", "  - {id: ship, tool: deploy, args: {x: $a}}\n  - {id: join")
    handle = planbook.start(plan, tools=_tools(), approve=True, approve_timeout=0.5)
    handle.wait_for_approval(timeout=30)  # step a asks first and nobody answers it: the run ends at its timeout
    too_many = handle.wait(timeout=30)
    text = teaching.check(too_many, teaching.approved_only(["ship"])).text
    assert "step a asked for approval too: only ship should ask" in text
    assert "step ship never asked for approval" in text
    assert "no decision within approve_timeout" in teaching.check(too_many, teaching.completed()).text
    handle = planbook.start(plan, tools=_tools(), approve=["ship"])
    assert handle.wait_for_approval(timeout=30) == ["ship"]
    handle.approve("ship")
    assert teaching.check(handle.wait(timeout=30), teaching.approved_only(["ship"]), teaching.completed()).right


def test_continued_tells_a_resume_from_a_new_run(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.sqlite")
    tools = _tools(stop={"b"})
    cut = planbook.run(CHAIN, tools=tools, store=store)
    assert cut.status == "interrupted"
    again = planbook.run(CHAIN, tools=tools, store=store)
    assert "this is a new run, which ran a again: continue the interrupted run instead" in teaching.check(
        again, teaching.continued(cut)).text
    resumed = planbook.resume(cut.run_id, store=store, tools=tools)
    assert teaching.check(resumed, teaching.continued(cut), teaching.completed()).right


def test_replanned_and_no_failure() -> None:
    failing = planbook.run(CHAIN, tools=_tools(fail={"b"}))
    assert "step b failed and the plan was never revised" in teaching.check(failing, teaching.replanned()).text
    assert "step b failed: ConnectionError: b is down" in teaching.check(failing, teaching.no_failure()).text
    assert teaching.check(planbook.run(CHAIN, tools=_tools()), teaching.no_failure()).right


def test_a_long_error_is_one_short_line() -> None:
    box = planbook.Toolbox()

    @box.tool
    def t(x: str) -> str:
        """Fail with a long error of many lines."""
        raise ValueError("x" * 1000 + "\nsecond line")

    text = teaching.check(planbook.run(CHAIN, tools=box), teaching.completed()).text
    assert "\n" not in text and len(text) < 300 and "characters left out" in text


def test_a_plan_refused_before_it_ran_is_not_yet_with_its_problems() -> None:
    wrong = CHAIN.replace("tool: t, args: {x: b}", "tool: tt, args: {x: b}").replace("{x: a}", "{y: a}")
    refused = teaching.attempt(lambda: planbook.run(wrong, tools=_tools()))
    assert isinstance(refused, planbook.PlanError)
    text = teaching.check(refused, teaching.completed()).text
    assert text.startswith("not yet: the run did not start: invalid plan") and "\n    - step b (line 4): unknown tool 'tt'" in text


def test_an_absent_step_is_said_once() -> None:
    result = planbook.run(CHAIN, tools=_tools())
    verdict = teaching.check(result, teaching.step_ran("c"), teaching.needs("c", "a"), teaching.output("c", 1))
    assert verdict.text == "not yet: the plan has no step 'c' (its steps: a, b, join): add it"


def test_a_verdict_shows_what_the_run_holds_through_its_gate() -> None:
    """A check words the run's result, notes and errors: a secret in any of them is ``***``, and a
    long result is cut after it is masked (no fragment of a secret at the cut)."""
    token = "tok-canary-5f1e2d3c4b5a69788796"
    box = planbook.Toolbox()

    @box.tool
    def login(user: str) -> str:
        """A token: it feeds a secret-named argument, so the run holds it as a secret."""
        return token

    @box.tool
    def fetch(token: str) -> str:
        """Refuse the token, saying it."""
        raise ValueError(f"server refused {token}")

    @box.tool
    def long(x: str) -> str:
        """A long result with the token at the cut."""
        return "y" * 110 + token + "z" * 500

    plan = """
steps:
  - {id: login, tool: login, args: {user: bob}}
  - {id: fetch, tool: fetch, args: {token: $login}}
  - {id: cut, tool: long, args: {x: $login}}
"""
    result = planbook.run(plan, tools=box, on_failure="continue")
    assert result.outputs["login"] == token
    verdict = teaching.check(
        result, teaching.output("login", "x"), teaching.output("cut", "x"), teaching.step_ran("fetch"),
        teaching.custom("the token is said", lambda r: f"the token was {r.outputs['login']}"))
    text = verdict.text
    assert "step login returned '***', not 'x'" in text and "server refused ***" in text
    assert "the token was ***" in text and "characters left out" in text
    assert token[:6] not in text, text
