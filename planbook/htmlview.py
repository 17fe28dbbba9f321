"""The static HTML view: a self-contained table (inline styles, no scripts).

It is what a notebook shows where widgets do not run (GitHub, nbconvert, a kernel
without ipywidgets) and the building blocks of the live widget. Everything is escaped
and deterministic: the only times shown are step durations (which nbval's sanitize file
replaces).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from .models import STATUS_MARKS, Plan, PlanDiff, RunResult, Status, Step

#: (text colour, row background) per status.
STATUS_COLORS: dict[Status, tuple[str, str]] = {
    Status.not_started: ("#555555", "inherit"),
    Status.in_progress: ("#0b5394", "#e3eefb"),
    Status.completed: ("#1b6e20", "#e8f5e9"),
    Status.failed: ("#b71c1c", "#fdecea"),
    Status.skipped: ("#6d6d6d", "#f1f1f1"),
    Status.blocked: ("#8a5300", "#fff4e0"),
}
RUN_COLORS = {"completed": "#1b6e20", "failed": "#b71c1c", "interrupted": "#8a5300", "paused": "#0b5394",
              "running": "#0b5394"}

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


def header_html(plan: Plan, *, extra: str = "", bar: bool = True) -> str:
    """Title, id and revision, goal, progress bar (unless ``bar`` is False) and counts per status."""
    counts = plan.counts()
    total, done = len(plan.steps), counts[Status.completed]
    revision = f" · revision {plan.revision}" if plan.revision > 1 else ""
    lines = [
        f'<div style="font-weight:600;font-size:14px">Plan: {esc(plan.display_title)} '
        f'<span style="font-weight:normal;color:#666">(ID: {esc(plan.id)}{revision})</span></div>'
    ]
    if plan.goal and plan.goal != plan.display_title:
        lines.append(f'<div style="color:#333"><b>Goal:</b> {esc(plan.goal)}</div>')
    if bar:
        lines.append(progress_bar_html(done, total))
    lines.append(f"<div>Progress: {done}/{total} steps completed · {counts_html(plan)}</div>")
    if extra:
        lines.append(extra)
    return "".join(lines)


def step_row_html(step: Step, *, highlight: bool = False) -> str:
    fg, bg = STATUS_COLORS[step.status]
    outline = ";outline:2px solid #0b5394" if highlight else ""
    task = esc(step.task) if step.task else f'<span style="{_MONO}">{esc(step.describe())}</span>'
    needs = f'<div style="color:#666;font-size:11px">needs {esc(", ".join(step.needs))}</div>' if step.needs else ""
    error = esc(step.error) if step.error and step.status in (Status.failed, Status.skipped) else ""
    if not error and step.notes and step.status is Status.blocked:
        error = esc(step.notes)
    executor = f"[{esc(step.agent.upper())}]" if step.agent else esc(step.tool or "")
    return (
        f'<tr class="planbook-step planbook-{step.status.value}" data-step="{esc(step.id)}" '
        f'style="{_ROW};background:{bg};color:{fg}{outline}">'
        f'<td style="{_CELL};{_MONO};white-space:nowrap">{esc(STATUS_MARKS[step.status])}</td>'
        f'<td style="{_CELL};white-space:nowrap"><b>{esc(step.id)}</b></td>'
        f'<td style="{_CELL};{_MONO}">{executor}</td>'
        f'<td style="{_CELL};color:#222">{task}{needs}</td>'
        f'<td style="{_CELL};white-space:nowrap">{esc(format_duration(step.duration))}</td>'
        f'<td style="{_CELL}">{error}</td></tr>'
    )


def steps_table_html(steps: Iterable[Step], *, highlight: str | None = None) -> str:
    """One row per step: mark, id, tool/agent, task, duration, error; coloured by status."""
    head = "".join(f'<th style="{_CELL};color:#444">{h}</th>' for h in ("", "id", "tool/agent", "task", "time", "error"))
    head = f'<tr style="{_ROW}">{head}</tr>'
    rows = "".join(step_row_html(s, highlight=s.id == highlight) for s in steps)
    return f'<table class="planbook-steps" style="border-collapse:collapse;margin:4px 0;line-height:1.4"><thead>{head}</thead><tbody>{rows}</tbody></table>'


def diff_html(diff: PlanDiff) -> str:
    """A diff as the text view writes it: removed struck through, added highlighted, revised marked."""
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
    return f'<div class="planbook-diff"><div>{title}</div><ul style="margin:2px 0 6px 0;padding-left:20px;list-style:none">{"".join(items)}</ul></div>'


def revisions_html(revisions: Iterable[PlanDiff]) -> str:
    diffs = [diff_html(d) for d in revisions]
    if not diffs:
        return ""
    return f'<div class="planbook-revisions" style="{_BOX};margin-top:6px"><div style="font-weight:600">Revision history</div>{"".join(diffs)}</div>'


def verdict_html(state: Any) -> str:
    """``Run completed (goal_met): steps 3/12, replans 0/5`` (+ model calls), coloured by status.

    ``state`` is a RunResult or a :class:`~planbook.liveview.ViewState`.
    """
    status = state.status or "not run"
    color = RUN_COLORS.get(status, "#444")
    text = f"Run {status}"
    if state.reason and state.reason != "paused":
        text += f" ({state.reason})"
    if state.max_steps is not None:
        text += f": steps {state.executions}/{state.max_steps}, replans {state.replans}/{state.max_replans}"
    if state.usage.calls:
        text += f", model calls {state.usage.calls}, tokens {state.usage.total_tokens}"
    out = f'<div class="planbook-verdict planbook-run-{esc(status)}" style="color:{color};font-weight:600">{esc(text)}</div>'
    why = getattr(state, "why", None)
    if status == "paused" and why:
        out += f'<div style="color:{color}">{esc(why)}</div>'
    if state.error:
        label = "Error" if status != "completed" else "Note"
        out += f'<div style="color:{color}">{label}: {esc(state.error)}</div>'
    return out


def step_detail_html(step: Step) -> str:
    """The top of a step's result pane: what it is, how it went, its notes."""
    fg, _ = STATUS_COLORS[step.status]
    rows = [("status", f'<span style="color:{fg}">{esc(STATUS_MARKS[step.status])} {esc(step.status.value)}</span>')]
    if step.agent:
        rows.append(("agent", esc(step.agent)))
    else:
        rows.append(("call", f'<span style="{_MONO}">{esc(step.describe().split(" → ")[-1])}</span>'))
    for label, value in (("task", step.task), ("needs", ", ".join(step.needs)), ("expect", step.expect)):
        if value:
            rows.append((label, esc(value)))
    if step.attempts:
        rows.append(("attempts", str(step.attempts)))
    if step.duration is not None:
        rows.append(("time", esc(format_duration(step.duration))))
    if step.error:
        rows.append(("error", f'<span style="color:#b71c1c">{esc(step.error)}</span>'))
    if step.notes:
        rows.append(("notes", esc(step.notes)))
    body = "".join(f'<tr style="{_ROW}"><th style="{_CELL};color:#666">{k}</th><td style="{_CELL}">{v}</td></tr>' for k, v in rows)
    return f'<div style="{_BOX}"><b>Step {esc(step.id)}</b><table style="border-collapse:collapse">{body}</table></div>'


# ------------------------------------------------------------------ whole views
def plan_html(plan: Plan) -> str:
    """The plan as a static table (what ``text/html`` of a plan holds)."""
    return f'<div class="planbook-plan" style="{_BOX}">{header_html(plan)}{steps_table_html(plan.steps)}</div>'


def result_html(result: RunResult) -> str:
    """The final plan, the verdict (status, reason, budgets used) and the revision history."""
    return (
        f'<div class="planbook-result" style="{_BOX}">{header_html(result.plan, extra=verdict_html(result))}'
        f"{steps_table_html(result.plan.steps)}{revisions_html(result.revisions)}</div>"
    )


def state_html(state: Any, *, max_rows: int | None = None) -> str:
    """A run in progress (or not started): the plan, and the verdict once it has run.

    ``max_rows`` shows only a window of rows around the running step (a live view of a long
    plan then re-sends a page, not the whole table, at every update).
    """
    extra = verdict_html(state) if state.status is not None else ""
    steps = state.plan.steps
    table = steps_table_html(steps)
    if max_rows is not None and len(steps) > max_rows:
        start = min(max(0, frontier(steps) - max_rows // 2), len(steps) - max_rows)
        above, below = start, len(steps) - start - max_rows
        table = steps_table_html(steps[start : start + max_rows])
        if above:
            table = f'<div style="color:#666">… {above} steps above</div>{table}'
        if below:
            table += f'<div style="color:#666">… {below} steps below</div>'
    return (
        f'<div class="planbook-plan" style="{_BOX}">{header_html(state.plan, extra=extra)}'
        f"{table}{revisions_html(state.revisions)}</div>"
    )


def frontier(steps: list[Step]) -> int:
    """Index of the running step, else of the last step that is no longer waiting."""
    at = 0
    for i, step in enumerate(steps):
        if step.status is Status.in_progress:
            return i
        if step.status is not Status.not_started:
            at = i
    return at
