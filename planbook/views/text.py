"""The text view: the OpenManus plan text with marks, diffs, run summaries and Markdown.

This text is what ``text/plain`` shows everywhere (terminal, nbval, GitHub), so it is
deterministic: no times, no memory addresses. Text from the run (tasks, ids, goals, errors,
notes) goes through the gate (:mod:`planbook.outbound`): the run's secrets and secret shapes
show as ``***``, control characters show as escapes, a step line stays one line, and the
continuation lines of an error or a goal are indented, so a line break in a task cannot forge
a step line (``b. [✓] ...``) in what a model reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..data.models import STATUS_MARKS, Plan, PlanDiff, RunResult, Status, Step
from ..data.stepmark import REUSED
from ..data.wording import plural
from ..outbound import TEXT_LIMIT, RunSecrets, bounded, indent_lines, md_code, md_text, one_line, shown_arg
from .forkbox import headline
from .publish import ensure_checkpoint
from .state import LINE_LIMIT, ViewState, budget_line, shown, verdict_line

#: the indent of a continuation line: deeper than every line the plan text starts itself
MORE = " " * 6
#: steps a displayed run's text lists (the first and the last half of them; ``print(result)``
#: lists every step): a 20,000-step run's record must not carry 20,000 lines
SHOWN_STEPS = 200


def step_line(step: Step, gate: RunSecrets | Callable[[str], str] | None = None) -> str:
    """``2. [✓] [WRITER] Draft the report`` or ``1. [✗] Load the CSV (load_csv)``; ``gate``: the
    run's gate, or the hider of one render (:meth:`~planbook.outbound.RunSecrets.hider`)."""
    body = step_body(step)
    if gate is not None:
        body = gate(body) if callable(gate) else gate.text(body)
    return f"{one_line(step.id)}. {STATUS_MARKS[step.status]} {one_line(bounded(body, LINE_LIMIT))}"


def step_body(step: Step) -> str:
    """What a step does, after its id and mark: ``[WRITER] Draft``, ``Load (load_csv)`` or ``add(a=1)``."""
    if step.agent:
        return f"[{step.agent.upper()}] {step.task}".rstrip()
    return f"{step.task} ({step.tool})" if step.task else f"{step.tool}({_args(step)})"


def _args(step: Step) -> str:
    # a secret-named arg shows as *** (a printed plan, a prompt)
    return ", ".join(f"{k}={shown_arg(k, v, repr)}" for k, v in step.args.items())


def format_plan(plan: Plan, gate: RunSecrets | None = None, *, max_steps: int | None = None) -> str:
    """The plan text: title and id, a rule, progress, status counts, one line per step.

    ``gate``: the run's secrets (default: those the plan names), hidden in every text shown.
    ``max_steps``: list the first and the last half of that many steps, and say how many are
    left out between them (None: every step)."""
    hide = (gate or RunSecrets.of_plan(plan)).hider()  # one render: the environment read once
    head = f"Plan: {one_line(hide(plan.display_title))} (ID: {one_line(hide(plan.id))})"
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
        lines.append(f"Goal: {indent_lines(shown(plan.goal, hide), MORE)}")
    lines += ["", "Steps:"]
    steps = plan.steps
    first, left_out = len(steps), 0  # the steps before the cut; how many are left out
    if max_steps is not None and len(steps) > max_steps:
        first = max_steps - max_steps // 2
        left_out = len(steps) - max_steps
    for i, step in enumerate(steps):
        if first <= i < first + left_out:
            if i == first:
                lines.append(f"   … {left_out:,} steps left out (print() lists every step)")
            continue
        lines.append(step_line(step, hide))
        if step.needs:
            lines.append(f"   Needs: {one_line(bounded(', '.join(step.needs), LINE_LIMIT))}")
        if step.error and step.status in (Status.failed, Status.skipped):
            lines.append(f"   Error: {indent_lines(shown(step.error, hide), MORE)}")
        if step.notes and (step.status is not Status.completed or step.mark in REUSED):
            if not (step.error and step.error in step.notes):  # "skipped after: <error>" says it twice
                lines.append(f"   Notes: {indent_lines(shown(step.notes, hide), MORE)}")
    return "\n".join(lines)


def format_diff(diff: PlanDiff, gate: RunSecrets | None = None) -> str:
    """``Revision 1 → 2`` then ``- removed``, ``+ added``, ``~ revised`` lines (and why a
    rejected replacement was refused). ``gate``: the run's secrets, hidden in every text."""
    hide = (gate or RunSecrets()).text
    lines = [f"Revision {diff.from_revision} → {diff.to_revision}"]
    if diff.reason:
        lines[0] += f" (after: {one_line(shown(diff.reason, hide))})"
    for mark, ids, label in (("-", diff.removed, "removed"), ("+", diff.added, "added"), ("~", diff.revised, "revised")):
        for sid in ids:
            lines.append(f"  {mark} {one_line(sid)}: {one_line(shown(diff.steps.get(sid, ''), hide))}  ({label})")
    if diff.empty:
        lines.append("  (no change)")
    if diff.rejected:
        lines[0] += " — rejected, the plan did not change"
        lines.append("  " + indent_lines(shown(f"Refused: {diff.rejected}".rstrip("\n"), hide, TEXT_LIMIT), "  "))
    return "\n".join(lines)


def shown_diff(diff: PlanDiff, gate: RunSecrets | None = None) -> dict[str, Any]:
    """A diff as JSON a browser may hold (the live view's ``revisions``): the fields of
    ``PlanDiff``, each text through the run's ``gate`` and bounded, as :func:`format_diff` shows it."""
    hide = (gate or RunSecrets()).text
    data = diff.model_dump(mode="json")
    data["reason"] = shown(diff.reason, hide) if diff.reason else diff.reason
    data["rejected"] = shown(diff.rejected, hide, TEXT_LIMIT) if diff.rejected else diff.rejected
    data["steps"] = {sid: shown(text, hide) for sid, text in diff.steps.items()}
    return data


def summary_line(result: RunResult | ViewState) -> str:
    """``Run completed (goal_met): steps 3/12, replans 0/5`` (+ model calls and tokens)."""
    return verdict_line(result)


def format_state(state: ViewState, *, max_steps: int | None = None) -> str:
    """A run as text: the plan, then (once it ran) the verdict, its error and every diff.

    What a live view leaves as ``text/plain`` (``max_steps``: :data:`SHOWN_STEPS`, the first and
    the last of a longer plan), and what ``str(result)`` prints (every step).
    """
    gate = state.gate
    lines = [format_plan(state.plan, gate, max_steps=max_steps)]
    fork = headline(state.lineage, gate) if state.lineage else ""
    if fork:  # a fork says what it forked and how, above its plan
        lines.insert(0, fork)
    if state.status is None:
        return "\n".join(lines)
    lines += ["", verdict_line(state)]
    if state.error and state.status != "completed":
        lines.append(f"Error: {indent_lines(shown(state.error, gate.text, TEXT_LIMIT), MORE)}")
    elif state.error:
        lines.append(f"Note: {indent_lines(shown(state.error, gate.text, TEXT_LIMIT), MORE)}")
    for diff in state.revisions:
        lines += ["", format_diff(diff, gate)]
    return "\n".join(lines)


def format_result(result: RunResult) -> str:
    """The final plan, a one-line verdict, budgets used, and every diff."""
    return format_state(ViewState.of_result(result))


def progress_line(state: ViewState) -> str:
    """``Plan sums: 2/3 steps completed · run running · steps 2/12, replans 0/5``."""
    text = f"Plan {one_line(state.gate.text(state.plan.display_title))}: {state.done}/{state.total} steps completed"
    if state.status is not None:
        text += f" · run {state.status}"
        if state.reason and state.reason not in ("paused", state.status):
            text += f" ({state.reason})"
    budgets = budget_line(state)
    return f"{text} · {budgets}" if budgets else text


def format_markdown(plan: Plan, gate: RunSecrets | None = None, *, max_steps: int | None = None) -> str:
    """A Markdown checklist: readable on GitHub and in nbconvert output.

    Text from the plan is escaped as the HTML view escapes it (:func:`~planbook.outbound.md_text`):
    ``<img onerror=...>`` in a task is text, ``*`` or ``$`` in it start no emphasis or maths;
    the run's secrets (``gate``) show as ``***``.
    """
    hide = (gate or RunSecrets.of_plan(plan)).hider()
    counts = plan.counts()
    lines = [
        f"**Plan: {md_text(hide(plan.display_title))}** (ID: {md_code(hide(plan.id))}, revision {plan.revision}) — "
        f"{counts[Status.completed]}/{len(plan.steps)} steps completed",
        "",
    ]
    if plan.goal and plan.goal != plan.display_title:
        lines += [f"*Goal:* {md_text(shown(plan.goal, hide))}", ""]
    steps: Sequence[Step | None] = plan.steps  # None: where the steps left out were
    left_out = 0
    if max_steps is not None and len(steps) > max_steps:
        head = max_steps - max_steps // 2
        steps = [*steps[:head], None, *steps[len(steps) - max_steps // 2:]]
        left_out = len(plan.steps) - max_steps
    for step in steps:
        if step is None:
            lines.append(f"- … {left_out:,} steps left out (print() lists every step)")
            continue
        lines.append(f"- `{STATUS_MARKS[step.status]}` **{md_text(step.id)}** {md_text(shown(step_body(step), hide))}")
        if step.error and step.status in (Status.failed, Status.skipped):
            lines.append(f"  - error: {md_code(shown(step.error, hide))}")
    return "\n".join(lines)


def state_markdown(state: ViewState, *, max_steps: int | None = SHOWN_STEPS) -> str:
    text = format_markdown(state.plan, state.gate, max_steps=max_steps)
    return text if state.status is None else f"{text}\n\n{md_text(verdict_line(state))}"


def plan_mimebundle(plan: Plan) -> dict[str, str]:
    from .html import plan_html

    ensure_checkpoint()
    return {"text/plain": format_plan(plan, max_steps=SHOWN_STEPS),
            "text/markdown": format_markdown(plan, max_steps=SHOWN_STEPS), "text/html": plan_html(plan)}


def diff_mimebundle(diff: PlanDiff) -> dict[str, str]:
    from .html import diff_html

    ensure_checkpoint()
    return {"text/plain": format_diff(diff), "text/html": diff_html(diff)}


def result_mimebundle(result: RunResult) -> dict[str, Any]:
    return state_bundle(ViewState.of_result(result))


def state_bundle(state: ViewState, *, max_rows: int | None = None) -> dict[str, str]:
    """text/plain, text/markdown and text/html of a state (a plan, a run going on or a finished run)."""
    from .html import state_html

    ensure_checkpoint()
    return {"text/plain": format_state(state, max_steps=SHOWN_STEPS), "text/markdown": state_markdown(state),
            "text/html": state_html(state, max_rows=max_rows)}


def format_planning(calls: list[dict[str, Any]]) -> str:
    """The model calls that made a plan, one line per attempt: accepted, or the problems sent
    back to the model (what ``%%plan NAME --planner llm`` prints above the plan)."""
    if not calls:
        return ""
    prompt = sum(int(c.get("prompt_tokens") or 0) for c in calls)
    completion = sum(int(c.get("completion_tokens") or 0) for c in calls)
    models = ", ".join(dict.fromkeys(str(c.get("model") or "the model") for c in calls))
    lines = [f"Planned by {models} in {plural(len(calls), 'model call')} "
             f"({prompt} prompt + {completion} completion tokens):"]
    for i, call in enumerate(calls, 1):
        if call.get("error"):
            verdict = f"the call failed: {call['error']}"
        elif call.get("accepted"):
            verdict = "accepted"
        elif call.get("problems"):
            verdict = "sent back: " + "; ".join(str(p) for p in call["problems"])
        else:
            verdict = "answered"
        lines.append(f"  attempt {call.get('attempt', i)}: {one_line(verdict)}")  # a model's text forges no attempt
    return "\n".join(lines)
