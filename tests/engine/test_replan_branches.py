"""A replacement plan that drops pending work another branch still needs is refused with
an error that names what a replacement must keep; the refused plan shows in the history."""

from __future__ import annotations

import pytest

import planbook
from planbook import Step
from planbook.spec.acceptance import accept_steps, pending_needed

SPEC = """
steps:
  - {id: fb, tool: boom}
  - {id: fa, tool: ok}
  - {id: ca, tool: ok, args: {x: $fa}, needs: [fa]}
  - {id: eb, tool: ok, args: {x: $fb}, needs: [fb]}
  - {id: j, tool: ok, args: {x: "$ca $eb"}, needs: [ca, eb]}
  - {id: report, tool: ok, args: {x: $j}, needs: [j]}
"""


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()

    @tools.tool
    def ok(x: str = "") -> str:
        return "ok" + x

    @tools.tool
    def boom() -> str:
        raise RuntimeError("fb broke")

    return tools


def _only_branch_b(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
    """Returns the fixed B branch and the join, and forgets branch A (fa, ca), still pending."""
    return [Step(id="fb2", tool="ok"), Step(id="eb2", tool="ok", args={"x": "$fb2"}, needs=["fb2"]),
            Step(id="j", tool="ok", args={"x": "$ca"}, needs=["eb2"]),  # uses $ca without listing it
            Step(id="report", tool="ok", args={"x": "$j"}, needs=["j"])]


def test_a_replacement_that_drops_a_needed_pending_step_names_what_it_must_keep() -> None:
    result = planbook.run(SPEC, tools=_tools(), planner=_only_branch_b, on_failure="replan")
    assert (result.status, result.reason) == ("failed", "no_plan")
    error = result.events[-1].data["error"]
    assert "step j: needs 'ca', a step that was still pending and that the new plan dropped" in error
    assert "a replacement must keep the pending steps that its steps need: fa, ca" in error
    assert "$$" not in error and "no step has that id" not in error


def test_the_refused_replacement_shows_in_the_history_and_is_not_counted() -> None:
    result = planbook.run(SPEC, tools=_tools(), planner=_only_branch_b, on_failure="replan")
    assert result.replans == 0 and "replans 0/5" in planbook.format_result(result)
    [diff] = result.revisions
    assert diff.rejected is not None and "must keep" in diff.rejected
    assert diff.added == ["fb2", "eb2"] and {"fa", "ca"} <= set(diff.removed)
    assert result.plan.revision == 1  # the plan did not change
    text = str(diff)
    assert text.splitlines()[0].endswith("rejected, the plan did not change") and "Refused:" in text
    html = diff._repr_mimebundle_()["text/html"]
    assert "planbook-rejected" in html and "must keep" in html
    [event] = [e for e in result.events if e.kind == "plan.diff"]
    assert event.data["rejected"] == diff.rejected


def test_a_replacement_that_keeps_the_pending_branch_runs() -> None:
    def keeps_a(goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        return [Step(id="fa", tool="ok"), Step(id="ca", tool="ok", args={"x": "$fa"}, needs=["fa"]),
                *_only_branch_b(goal, history, last_error)]

    result = planbook.run(SPEC, tools=_tools(), planner=keeps_a, on_failure="replan")
    assert (result.status, result.replans, result.revisions[0].rejected) == ("completed", 1, None)


@pytest.mark.parametrize(("status", "owed"), [("not_started", ["fa", "ca"]), ("blocked", ["fa", "ca"]),
                                             ("completed", []), ("failed", [])])
def test_only_pending_steps_are_owed(status: str, owed: list[str]) -> None:
    """A done step is kept by the runner and a failed one is what a replan replaces: neither is owed."""
    plan = planbook.Plan.parse(SPEC)
    plan.step("fa").status = planbook.Status.completed if status == "completed" else planbook.Status.not_started
    plan.step("ca").status = planbook.Status(status)
    plan.step("fb").status = planbook.Status.failed
    kept = [s for s in plan.steps if s.status is planbook.Status.completed]
    candidate, _, problems = accept_steps(plan, kept, _only_branch_b("", [], None), _tools(), [])
    assert pending_needed(plan, candidate) == owed
    assert any("must keep" in p.message for p in problems) is bool(owed)
    assert bool(problems) is (status != "completed")


def test_a_replan_is_asked_about_the_step_that_called_for_it_not_a_later_failure_in_another_lane() -> None:
    """Step ``broken`` fails and its policy replans; the replan waits for the calls in flight, and
    ``slow`` (another lane, a retry policy) fails meanwhile. The planner is told why the replan
    happens — ``broken``'s failure — not the later one (which its own retry policy handles)."""
    import threading

    from planbook import Runner, ScriptedPlanner

    released = threading.Event()
    tools = planbook.Toolbox()

    @tools.tool(cache=False)
    def broken() -> str:
        raise ValueError("broken step: replan")

    @tools.tool(cache=False)
    def slow() -> str:
        assert released.wait(60), "the runner never handled broken's failure"
        raise ConnectionError("slow step: try again")

    @tools.tool
    def fine() -> str:
        return "fine"

    planner = ScriptedPlanner({None: [], "broken step": [Step(id="fix", tool="fine")]})
    runner = Runner("steps:\n  - {id: slow, tool: slow, on_failure: retry}\n  - {id: broken, tool: broken, on_failure: replan}",
                    tools=tools, planner=planner, parallel=2)
    runner.subscribe(lambda event: released.set() if (event.kind, event.step) == ("step.failed", "broken") else None)
    result = runner.run()
    assert [why for _, _, why in planner.calls] == ["step broken failed: ValueError: broken step: replan"]
    assert result.revisions and result.revisions[0].reason == "step broken failed: ValueError: broken step: replan"
