"""The static HTML view: a self-contained table (inline styles, no scripts).

It is what a notebook shows where widgets do not run (GitHub, nbviewer, nbconvert, a
kernel without anywidget) and the final state every live view leaves behind.
Everything is escaped and deterministic: the only times shown are step durations
(which nbval's sanitize file replaces). Every top-level element carries the classes
``mathjax_ignore`` (JupyterLab 4) and ``tex2jax_ignore`` (nbconvert's MathJax 2), so two
``$`` in a step (``convert(prices='$load', rate='$rate')``) are not typeset as maths.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from ..models import STATUS_MARKS, Plan, PlanDiff, RunResult, Status, Step
from ..state import CACHED_NOTE
from .state import ViewState, row_window, verdict_line

#: the classes that keep MathJax away from planbook's HTML
NO_MATH = "mathjax_ignore tex2jax_ignore"

#: (text colour, row background) per status.
STATUS_COLORS: dict[Status, tuple[str, str]] = {
    Status.not_started: ("#555555", "inherit"),
    Status.in_progress: ("#0b5394", "#e3eefb"),
    Status.completed: ("#1b6e20", "#e8f5e9"),
    Status.failed: ("#b71c1c", "#fdecea"),
    Status.skipped: ("#6d6d6d", "#f1f1f1"),
    Status.blocked: ("#8a5300", "#fff4e0"),
}
#: colour of a verdict by its tone (see ViewState.tone)
TONE_COLORS = {"ok": "#1b6e20", "warn": "#8a5300", "bad": "#b71c1c", "info": "#0b5394"}

_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;max-width:100%"
# short on purpose: every row repeats them (front ends' own table CSS must be overridden inline)
_CELL = "padding:1px 6px;text-align:left"
_MONO = "font-family:monospace"
_ROW = "vertical-align:top;border-bottom:1px solid #e0e0e0"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def format_duration(seconds: float | None) -> str:
    """``12.3 ms`` or ``1.25 s`` ('' when unknown)."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def box(kind: str, body: str) -> str:
    """The outer element of every planbook HTML output: its class and the MathJax opt-out."""
    return f'<div class="planbook-{kind} {NO_MATH}" style="{_BOX}">{body}</div>'


# ------------------------------------------------------------------ pieces
def progress_bar_html(done: int, total: int, *, color: str = "#2e7d32") -> str:
    """A progress bar made of two divs (an HTML element, so it survives nbconvert)."""
    percent = done / total * 100 if total else 0.0
    return (
        f'<div class="planbook-progress" title="{done}/{total} steps completed" '
        f'style="background:#e0e0e0;border-radius:4px;height:8px;width:100%;max-width:480px;margin:4px 0">'
        f'<div style="background:{color};border-radius:4px;height:8px;width:{percent:.1f}%"></div></div>'
    )


def counts_html(plan: Plan) -> str:
    counts = plan.counts()
    parts = []
    order = (Status.completed, Status.in_progress, Status.failed, Status.skipped, Status.blocked, Status.not_started)
    for status in order:
        if counts[status] or status in (Status.completed, Status.not_started):
            fg, _ = STATUS_COLORS[status]
            label = status.value.replace("_", " ")
            parts.append(f'<span style="color:{fg}">{esc(STATUS_MARKS[status])} {counts[status]} {label}</span>')
    return " · ".join(parts)


def header_html(plan: Plan, *, extra: str = "") -> str:
    """Title, id and revision, goal, progress bar and counts per status."""
    counts = plan.counts()
    total, done = len(plan.steps), counts[Status.completed]
    revision = f" · revision {plan.revision}" if plan.revision > 1 else ""
    lines = [
        f'<div style="font-weight:600;font-size:14px">Plan: {esc(plan.display_title)} '
        f'<span style="font-weight:normal;color:#666">(ID: {esc(plan.id)}{revision})</span></div>'
    ]
    if plan.goal and plan.goal != plan.display_title:
        lines.append(f'<div style="color:#333"><b>Goal:</b> {esc(plan.goal)}</div>')
    lines.append(progress_bar_html(done, total))
    lines.append(f"<div>Progress: {done}/{total} steps completed · {counts_html(plan)}</div>")
    if extra:
        lines.append(extra)
    return "".join(lines)


def step_row_html(step: Step) -> str:
    fg, bg = STATUS_COLORS[step.status]
    task = esc(step.task) if step.task else f'<span style="{_MONO}">{esc(step.describe())}</span>'
    needs = f'<div style="color:#666;font-size:11px">needs {esc(", ".join(step.needs))}</div>' if step.needs else ""
    error = esc(step.error) if step.error and step.status in (Status.failed, Status.skipped) else ""
    if not error and step.notes and (step.status is Status.blocked or step.notes.startswith(CACHED_NOTE)):
        error = esc(step.notes)
    executor = f"[{esc(step.agent.upper())}]" if step.agent else esc(step.tool or "")
    return (
        f'<tr class="planbook-step planbook-{step.status.value}" data-step="{esc(step.id)}" '
        f'style="{_ROW};background:{bg};color:{fg}">'
        f'<td style="{_CELL};{_MONO};white-space:nowrap">{esc(STATUS_MARKS[step.status])}</td>'
        f'<td style="{_CELL};white-space:nowrap"><b>{esc(step.id)}</b></td>'
        f'<td style="{_CELL};{_MONO}">{executor}</td>'
        f'<td style="{_CELL};color:#222">{task}{needs}</td>'
        f'<td style="{_CELL};white-space:nowrap">{esc(format_duration(step.duration))}</td>'
        f'<td style="{_CELL}">{error}</td></tr>'
    )


def steps_table_html(steps: Iterable[Step]) -> str:
    """One row per step: mark, id, tool/agent, task, duration, error; coloured by status."""
    head = "".join(f'<th style="{_CELL};color:#444">{h}</th>' for h in ("", "id", "tool/agent", "task", "time", "error"))
    head = f'<tr style="{_ROW}">{head}</tr>'
    rows = "".join(step_row_html(s) for s in steps)
    return (f'<table class="planbook-steps" style="border-collapse:collapse;margin:4px 0;line-height:1.4">'
            f"<thead>{head}</thead><tbody>{rows}</tbody></table>")


def _diff_items(diff: PlanDiff) -> str:
    title = f"Revision {diff.from_revision} → {diff.to_revision}"
    if diff.reason:
        title += f' <span style="color:#666">(after: {esc(diff.reason)})</span>'
    items = []
    for sid in diff.removed:
        items.append(f'<li class="planbook-removed" style="color:#b71c1c">− <del>{esc(sid)}: {esc(diff.steps.get(sid, ""))}</del> (removed)</li>')
    for sid in diff.added:
        items.append(f'<li class="planbook-added" style="color:#1b6e20">+ <ins style="background:#e6ffed;text-decoration:none">{esc(sid)}: {esc(diff.steps.get(sid, ""))}</ins> (added)</li>')
    for sid in diff.revised:
        items.append(f'<li class="planbook-revised" style="color:#8a5300">~ <span style="background:#fff4e0">{esc(sid)}: {esc(diff.steps.get(sid, ""))}</span> (revised)</li>')
    if diff.empty:
        items.append('<li style="color:#666">(no change)</li>')
    if diff.rejected:
        title += ' — <span class="planbook-rejected">rejected, the plan did not change</span>'
        items.append(f'<li class="planbook-rejected" style="white-space:pre-wrap">Refused: {esc(diff.rejected)}</li>')
    return f'<div>{title}</div><ul style="margin:2px 0 6px 0;padding-left:20px;list-style:none">{"".join(items)}</ul>'


def diff_html(diff: PlanDiff) -> str:
    """A diff as the text view writes it: removed struck through, added highlighted, revised marked."""
    return f'<div class="planbook-diff {NO_MATH}">{_diff_items(diff)}</div>'


def revisions_html(revisions: Iterable[PlanDiff]) -> str:
    diffs = [f'<div class="planbook-diff">{_diff_items(d)}</div>' for d in revisions]
    if not diffs:
        return ""
    return (f'<div class="planbook-revisions" style="margin-top:6px"><div style="font-weight:600">Revision history</div>'
            f'{"".join(diffs)}</div>')


def verdict_html(state: ViewState | RunResult) -> str:
    """``Run completed (goal_met): steps 3/12, replans 0/5`` (+ model calls), coloured by how it went
    (a completed run that skipped steps is amber, not green)."""
    view = state if isinstance(state, ViewState) else ViewState.of_result(state)
    status = view.status or "not run"
    color = TONE_COLORS[view.tone]
    out = (f'<div class="planbook-verdict planbook-run-{esc(status)} planbook-tone-{view.tone}" '
           f'style="color:{color};font-weight:600">{esc(verdict_line(view))}</div>')
    if view.status == "paused" and view.why:
        out += f'<div style="color:{color}">{esc(view.why)}</div>'
    if view.error:
        label = "Error" if view.status != "completed" else "Note"
        out += f'<div style="color:{color}">{label}: {esc(view.error)}</div>'
    return out


# ------------------------------------------------------------------ whole views
def plan_html(plan: Plan) -> str:
    """The plan as a static table (what ``text/html`` of a plan holds)."""
    return box("plan", f"{header_html(plan)}{steps_table_html(plan.steps)}")


def result_html(result: RunResult) -> str:
    """The final plan, the verdict (status, reason, budgets used) and the revision history."""
    return state_html(ViewState.of_result(result), kind="result")


def state_html(state: ViewState, *, max_rows: int | None = None, kind: str | None = None) -> str:
    """A plan, a run going on or a finished run: the plan, and the verdict once it has run.

    ``max_rows`` shows only a window of rows around the running steps (a live view of a long
    plan then re-sends a page, not the whole table, at every update).
    """
    extra = verdict_html(state) if state.status is not None else ""
    steps = state.plan.steps
    start, end = row_window(steps, max_rows) if max_rows is not None else (0, len(steps))
    table = steps_table_html(steps[start:end])
    if start:
        table = f'<div style="color:#666">… {start} steps above</div>{table}'
    if end < len(steps):
        table += f'<div style="color:#666">… {len(steps) - end} steps below</div>'
    kind = kind or ("plan" if state.status is None else "result")
    return box(kind, f"{header_html(state.plan, extra=extra)}{table}{revisions_html(state.revisions)}")
