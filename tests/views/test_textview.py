"""The text view: OpenManus-compatible plan text, diffs and run summaries (exact text)."""

from __future__ import annotations

from helpers import GOAL, Lab, X, lesson_planner
from planbook import Plan, PlanDiff, Step, format_diff, format_plan, format_result, run
from planbook.views.text import format_markdown, plan_mimebundle, step_line, summary_line


def every_status_plan() -> Plan:
    return Plan(id="weekly", goal="Write the weekly report", title="Weekly report", revision=2, steps=[
        Step(id="1", tool="fetch", args={"source": "db"}, task="Load the numbers", status="completed", result=3),
        Step(id="2", agent="analyst", task="Find the trend", needs=["1"], status="in_progress"),
        Step(id="3", tool="chart", args={"kind": "bar", "n": 3}, status="failed", error="RuntimeError: no display"),
        Step(id="4", tool="fetch", task="Extra data", status="skipped", error="ConnectionError: down",
             notes="skipped after: ConnectionError: down"),
        Step(id="5", agent="writer", task="Draft", needs=["3"], status="blocked",
             notes="blocked: needs 3, which did not complete"),
        Step(id="6", agent="writer", task="Send", notes="a note on a step not started yet"),
    ])


def test_format_plan_with_every_status() -> None:
    assert format_plan(every_status_plan()) == """\
Plan: Weekly report (ID: weekly)
================================

Progress: 1/6 steps completed (16.7%)
Status: 1 completed, 1 in progress, 1 blocked, 1 not started, 1 failed, 1 skipped
Revision: 2
Goal: Write the weekly report

Steps:
1. [✓] Load the numbers (fetch)
2. [→] [ANALYST] Find the trend
   Needs: 1
3. [✗] chart(kind='bar', n=3)
   Error: RuntimeError: no display
4. [-] Extra data (fetch)
   Error: ConnectionError: down
5. [!] [WRITER] Draft
   Needs: 3
   Notes: blocked: needs 3, which did not complete
6. [ ] [WRITER] Send
   Notes: a note on a step not started yet"""


def test_format_plan_matches_the_openmanus_text() -> None:
    """The OpenManus example from the seed, rebuilt: same header, rule, progress and marks."""
    plan = Plan.parse("0. [DATA_ANALYSIS] 读取并分析 sales.csv 文件结构\n1. [MANUS] 根据分析结果生成可视化图表\n"
                      "2. [MANUS] 输出完整的分析报告\n", id="plan_1709876543", goal="分析 sales.csv 并生成报告")
    plan.steps[0].status, plan.steps[1].status = "completed", "in_progress"
    assert format_plan(plan) == """\
Plan: 分析 sales.csv 并生成报告 (ID: plan_1709876543)
==============================================

Progress: 1/3 steps completed (33.3%)
Status: 1 completed, 1 in progress, 0 blocked, 1 not started

Steps:
0. [✓] [DATA_ANALYSIS] 读取并分析 sales.csv 文件结构
1. [→] [MANUS] 根据分析结果生成可视化图表
2. [ ] [MANUS] 输出完整的分析报告"""


def test_format_plan_of_an_empty_plan() -> None:
    assert format_plan(Plan(id="p")).splitlines()[3:5] == [
        "Progress: 0/0 steps completed (0.0%)", "Status: 0 completed, 0 in progress, 0 blocked, 0 not started"]


def test_step_line_forms() -> None:
    assert step_line(Step(id="a", tool="ok")) == "a. [ ] ok()"
    assert step_line(Step(id="a", tool="ok", args={"label": "x"})) == "a. [ ] ok(label='x')"
    assert step_line(Step(id="a", tool="ok", task="Say ok", args={"label": "x"})) == "a. [ ] Say ok (ok)"
    assert step_line(Step(id="b", agent="writer", status="completed")) == "b. [✓] [WRITER]"


def test_str_and_mimebundle_use_the_plan_text() -> None:
    plan = every_status_plan()
    bundle = plan_mimebundle(plan)
    assert bundle["text/plain"] == str(plan) == format_plan(plan)
    assert plan._repr_mimebundle_()["text/plain"] == format_plan(plan)
    assert "text/html" in bundle and "Weekly report" in bundle["text/html"]
    assert format_markdown(plan).splitlines()[0] == (
        "**Plan: Weekly report** (ID: `weekly`, revision 2) — 1/6 steps completed")


def test_format_diff() -> None:
    diff = PlanDiff(from_revision=1, to_revision=2, removed=["4"], added=["5"], revised=["2"], reason="step 2 failed: X",
                    steps={"4": "ok(label='report')", "5": "[WRITER] Report", "2": "fetch(source='mirror')"})
    assert format_diff(diff) == """\
Revision 1 → 2 (after: step 2 failed: X)
  - 4: ok(label='report')  (removed)
  + 5: [WRITER] Report  (added)
  ~ 2: fetch(source='mirror')  (revised)"""
    assert str(diff) == format_diff(diff)
    assert format_diff(PlanDiff(from_revision=2, to_revision=3)) == "Revision 2 → 3\n  (no change)"


def test_format_result_of_a_replanned_run() -> None:
    result = run(GOAL, planner=lesson_planner(), tools=Lab(down={"primary": X}).tools)
    assert format_result(result) == """\
Plan: count the words of the source text (ID: count-the-words-of-the-source-text)
=================================================================================

Progress: 4/4 steps completed (100.0%)
Status: 4 completed, 0 in progress, 0 blocked, 0 not started
Revision: 2

Steps:
1. [✓] ok(label='prepare')
2. [✓] fetch(source='mirror')
3. [✓] count(text='$2')
   Needs: 2
5. [✓] ok(label='report from the mirror')

Run completed (goal_met): steps 5/12, replans 1/5

Revision 1 → 2 (after: step 2 failed: ConnectionError: X: the primary source is down)
  - 4: ok(label='report')  (removed)
  + 5: ok(label='report from the mirror')  (added)
  ~ 2: fetch(source='mirror')  (revised)"""
    assert str(result) == format_result(result)
    assert result._repr_mimebundle_()["text/plain"] == format_result(result)


def test_format_result_of_a_failed_and_of_a_skipping_run() -> None:
    failed = run(GOAL, planner=lesson_planner(), tools=Lab(down={"primary": "Z"}).tools)
    assert format_result(failed).splitlines()[-2:] == [
        "Run failed (no_plan): steps 2/12, replans 1/5",
        "Error: the planner had no new plan after: step 2 failed: ConnectionError: Z",
    ]
    skipped = run("steps: [{id: a, tool: fail}, {id: b, tool: ok}]", tools=Lab().tools, on_failure="skip")
    assert format_result(skipped).splitlines()[-2:] == [
        "Run completed (steps_skipped): steps 2/12, replans 0/5",
        "Note: the run reached the end without steps a",
    ]


def test_summary_line_counts_model_usage() -> None:
    def agent(task, context):
        context.emit("llm.call", model="m", prompt_tokens=10, completion_tokens=5)
        return "ok"

    result = run("1. [a] x", agents={"a": agent}, max_steps=3, max_replans=0)
    assert summary_line(result) == "Run completed (goal_met): steps 1/3, replans 0/0, model calls 1, tokens 15"


def test_summary_line_of_a_run_with_no_reason_yet() -> None:
    """A stored run whose process died mid-run is still "running", with no reason: no "(None)"."""
    from planbook.data.models import RunResult, Usage

    result = RunResult.model_construct(status="running", reason=None, plan=Plan(id="p"), history=[], revisions=[],
                                       events=[], outputs={}, executions=2, replans=0, max_steps=12, max_replans=5,
                                       usage=Usage())
    assert summary_line(result) == "Run running: steps 2/12, replans 0/5"


def test_a_step_completed_from_the_step_cache_says_so() -> None:
    """A cached step did not run: the text shows where its result came from (the notes of
    the other completed steps stay hidden, as they were)."""
    from planbook.store import MemoryStore

    store = MemoryStore()
    plan = "steps:\n  - {id: one, tool: add, args: {a: 1, b: 2}}\n  - {id: two, tool: add, args: {a: $one, b: 1}}"
    tools = [add]
    first = run(plan, tools=tools, store=store, cache=True)
    again = run(plan.replace("b: 1}", "b: 5}"), tools=tools, store=store, cache=True)
    assert again.outputs == {"one": 3, "two": 8}
    text = format_plan(again.plan)
    first_id = store.list_runs()[1].run_id
    assert f"one. [✓] add(a=1, b=2)\n   Notes: cached: the result of step one in run {first_id}\n" in text
    assert text.endswith("two. [✓] add(a='$one', b=5)\n   Needs: one")  # it ran: no note
    assert "Notes" not in format_plan(first.plan)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
