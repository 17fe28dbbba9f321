"""The text view: the OpenManus plan text with marks, diffs and run summaries.

This text is what ``text/plain`` shows everywhere (terminal, nbval, GitHub), so it is
deterministic: no times, no memory addresses.
"""

from __future__ import annotations

import html
from typing import Any

from .models import STATUS_MARKS, Plan, PlanDiff, RunResult, Status, Step
from .state import CACHED_NOTE


def step_line(step: Step) -> str:
    """``2. [✓] [WRITER] Draft the report`` or ``1. [✗] Load the CSV (load_csv)``."""
    if step.agent:
        body = f"[{step.agent.upper()}] {step.task}".rstrip()
    else:
        body = f"{step.task} ({step.tool})" if step.task else f"{step.tool}({_args(step)})"
    return f"{step.id}. {STATUS_MARKS[step.status]} {body}"


def _args(step: Step) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in step.args.items())


def format_plan(plan: Plan) -> str:
    """The plan text: title and id, a rule, progress, status counts, one line per step."""
    head = f"Plan: {plan.display_title} (ID: {plan.id})"
    counts = plan.counts()
    total = len(plan.steps)
    done = counts[Status.completed]
    percent = f"{done / total * 100 if total else 0:.1f}%"  # OpenManus prints 0.0% for an empty plan
    status = (
        f"Status: {done} completed, {counts[Status.in_progress]} in progress, "
        f"{counts[Status.blocked]} blocked, {counts[Status.not_started]} not started"
    )
    extra = [f"{counts[s]} {s.value}" for s in (Status.failed, Status.skipped) if counts[s]]
    if extra:
        status += ", " + ", ".join(extra)
    lines = [head, "=" * len(head), "", f"Progress: {done}/{total} steps completed ({percent})", status]
    if plan.revision > 1:
        lines.append(f"Revision: {plan.revision}")
    if plan.goal and plan.goal != plan.display_title:
        lines.append(f"Goal: {plan.goal}")
    lines += ["", "Steps:"]
    for step in plan.steps:
        lines.append(step_line(step))
        if step.needs:
            lines.append(f"   Needs: {', '.join(step.needs)}")
        if step.error and step.status in (Status.failed, Status.skipped):
            lines.append(f"   Error: {step.error}")
        if step.notes and (step.status is not Status.completed or step.notes.startswith(CACHED_NOTE)):
            if not (step.error and step.error in step.notes):  # "skipped after: <error>" says it twice
                lines.append(f"   Notes: {step.notes}")
    return "\n".join(lines)


def format_diff(diff: PlanDiff) -> str:
    """``Revision 1 → 2`` then ``- removed``, ``+ added``, ``~ revised`` lines."""
    lines = [f"Revision {diff.from_revision} → {diff.to_revision}"]
    if diff.reason:
        lines[0] += f" (after: {diff.reason})"
    for mark, ids, label in (("-", diff.removed, "removed"), ("+", diff.added, "added"), ("~", diff.revised, "revised")):
        for sid in ids:
            lines.append(f"  {mark} {sid}: {diff.steps.get(sid, '')}  ({label})")
    if diff.empty:
        lines.append("  (no change)")
    return "\n".join(lines)


def format_result(result: RunResult) -> str:
    """The final plan, a one-line verdict, budgets used, and every diff."""
    lines = [format_plan(result.plan), "", summary_line(result)]
    if result.error and result.status != "completed":
        lines.append(f"Error: {result.error}")
    elif result.error:
        lines.append(f"Note: {result.error}")
    for diff in result.revisions:
        lines += ["", format_diff(diff)]
    return "\n".join(lines)


def summary_line(result: RunResult) -> str:
    same = result.reason in (result.status, None)  # a stored run cut short mid-run has no reason yet
    verdict = f"Run {result.status}" if same else f"Run {result.status} ({result.reason})"
    text = (
        f"{verdict}: steps {result.executions}/{result.max_steps}, "
        f"replans {result.replans}/{result.max_replans}"
    )
    if result.usage.calls:
        text += f", model calls {result.usage.calls}, tokens {result.usage.total_tokens}"
    return text


def format_markdown(plan: Plan) -> str:
    """A Markdown checklist: readable on GitHub and in nbconvert output."""
    counts = plan.counts()
    lines = [
        f"**Plan: {plan.display_title}** (ID: `{plan.id}`, revision {plan.revision}) — "
        f"{counts[Status.completed]}/{len(plan.steps)} steps completed",
        "",
    ]
    if plan.goal and plan.goal != plan.display_title:
        lines += [f"*Goal:* {plan.goal}", ""]
    for step in plan.steps:
        lines.append(f"- `{STATUS_MARKS[step.status]}` **{step.id}** {step_line(step).split(' ', 2)[2]}")
        if step.error and step.status in (Status.failed, Status.skipped):
            lines.append(f"  - error: `{step.error}`")
    return "\n".join(lines)


def format_html(plan: Plan) -> str:
    """A static HTML table (the live widget has its own richer view)."""
    try:
        from .htmlview import plan_html
    except ImportError:  # the notebook views are optional for the engine
        return f"<pre>{html.escape(format_plan(plan))}</pre>"
    return plan_html(plan)


def plan_mimebundle(plan: Plan) -> dict[str, str]:
    return {"text/plain": format_plan(plan), "text/markdown": format_markdown(plan), "text/html": format_html(plan)}


def result_mimebundle(result: RunResult) -> dict[str, Any]:
    try:
        from .htmlview import result_html
    except ImportError:
        body = f"<pre>{html.escape(format_result(result))}</pre>"
    else:
        body = result_html(result)
    md = format_markdown(result.plan) + "\n\n" + summary_line(result)
    return {"text/plain": format_result(result), "text/markdown": md, "text/html": body}
