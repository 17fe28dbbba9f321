"""The static HTML view: a self-contained table (inline styles, no scripts).

It is what a notebook shows where widgets do not run (GitHub, nbviewer, nbconvert, a
kernel without anywidget) and the final state every live view leaves behind.
Everything is escaped and deterministic: the only times shown are step durations
(which nbval's sanitize file replaces). Every top-level element carries the classes
``mathjax_ignore`` (JupyterLab 4) and ``tex2jax_ignore`` (nbconvert's MathJax 2), so two
``$`` in a step (``convert(prices='$load', rate='$rate')``) are not typeset as maths.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..data.models import STATUS_MARKS, Plan, PlanDiff, RunResult, Status, Step
from ..data.stepmark import CUT
from ..outbound import TEXT_LIMIT, RunSecrets, html_text
from .marks import CACHED_MARK, CacheMark, cached_count_text
from .state import ViewState, row_window, shown, verdict_line

#: the classes that keep MathJax away from planbook's HTML
NO_MATH = "mathjax_ignore tex2jax_ignore"

#: a status's fill (bars, badges, the progress bar): white text on each passes WCAG AA (4.5:1),
#: and each reads on a light and a dark page alike
FILLS = {"completed": "#2e7d32", "failed": "#b71c1c", "in_progress": "#0b5394", "running": "#0b5394",
         "not_started": "#616161", "skipped": "#616161", "blocked": "#8a5300", "interrupted": "#8a5300",
         "cached": "#5b3f99", "waiting": "#8a5300"}  # waiting: not started, a person decides (StepMark.waiting)
#: colour of a verdict by its tone (see ViewState.tone)
TONE_COLORS = {"ok": "#2e7d32", "warn": "#8a5300", "bad": "#b71c1c", "info": "#0b5394"}
#: how a run that has stopped is drawn: :mod:`.record` registers itself here (it builds on this module)
STOPPED: dict[str, Callable[..., str]] = {}

# Styles that read in JupyterLab's light and dark themes, in an untrusted notebook and where
# styles are stripped (GitHub). An untrusted notebook's sanitizer drops every CSS value that
# uses var() or color-mix(), and no single text colour reads on both a light and a dark page,
# so: text keeps the theme's colour (nothing sets a text colour but white on a fill), status
# colours are fills, left rules and faint rgba() tints, and secondary text is dimmed by opacity.
# No <style> either (it does not survive): inline styles, short, and only where they are needed.

#: secondary text: the theme's own colour, faded
DIM = "opacity:.75"


def tint(color: str, alpha: float = 0.15) -> str:
    """A faint ``color`` (a ``#rrggbb``) over whatever the page is: ``background-color:rgba(...)``."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"background-color:rgba({r},{g},{b},{alpha:g})"


def fill(color: str) -> str:
    """A status fill with white text on it (WCAG AA for every colour of :data:`FILLS`)."""
    return f"background-color:{color};color:#fff"


def fg(color: str) -> str:
    """How text is marked with a status colour: it keeps the theme's colour (a coloured text reads
    on a light or on a dark page, never both) and a rule of ``color`` stands at its left."""
    return f"border-left:4px solid {color};padding-left:6px"


#: the row of a step whose status needs a look (completed and not-started rows carry no style):
#: ``(class, style)`` by the row's kind
ROW_KINDS: dict[str, tuple[str, str]] = {
    "failed": ("planbook-failed", tint(FILLS["failed"])),
    "skipped": ("planbook-skipped", tint(FILLS["skipped"])),
    "blocked": ("planbook-blocked", tint(FILLS["blocked"])),
    "in_progress": ("planbook-in_progress", tint(FILLS["in_progress"])),
    "interrupted": ("planbook-interrupted", tint(FILLS["interrupted"])),
    "cached": ("planbook-step-cached", tint(FILLS["cached"])),
}
_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;max-width:100%"
_LEFT = ' style="text-align:left"'  # front ends right-align table cells (JupyterLab's rendered HTML)


#: every HTML view escapes text with the gate's one HTML escape
esc = html_text


def format_duration(seconds: float | None) -> str:
    """``12.3 ms`` or ``1.25 s`` ('' when unknown)."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def shown_call(step: Step, gate: RunSecrets | None = None, hide: Callable[[str | None], str] | None = None) -> str:
    """What a step does, as a view shows it: ``[AGENT] task`` or ``tool(a=1, password=***)``
    (:meth:`~planbook.data.models.Step.describe`, which shows a secret-named arg as ``***``), through
    the run's ``gate`` (a secret it repeats is hidden; ``hide``: the gate's hider of one render):
    this HTML is kept in the notebook."""
    return (hide or gate_of(gate).text)(step.describe())


def _same(text: str) -> str:
    return text


def gate_of(gate: RunSecrets | None) -> RunSecrets:
    """``gate``, or one that knows no run's secrets (name, shape and environment rules only)."""
    return gate if gate is not None else RunSecrets()


def cached_text(mark: CacheMark, origin: float | None) -> str:
    """What a cached or resumed step's pane says: where its result came from, and when this run took it."""
    text = mark.describe()
    if mark.at is not None and origin is not None:
        text += f" (taken at +{format_duration(max(0.0, mark.at - origin))})"
    return text


def box(kind: str, body: str) -> str:
    """The outer element of every planbook HTML output: its class and the MathJax opt-out."""
    return f'<div class="planbook-{kind} {NO_MATH}" style="{_BOX}">{body}</div>'


# ------------------------------------------------------------------ pieces
def progress_bar_html(done: int, total: int, *, color: str = FILLS["completed"]) -> str:
    """A progress bar made of two divs (an HTML element, so it survives nbconvert): a grey track
    that shows on a light and a dark page, and a fill; the numbers are in its title and beside it."""
    percent = done / total * 100 if total else 0.0
    return (
        f'<div class="planbook-progress" title="{done}/{total} steps completed" '
        f'style="background-color:rgba(128,128,128,.3);border-radius:4px;height:8px;width:100%;max-width:480px;'
        f'margin:4px 0"><div style="background-color:{color};border-radius:4px;height:8px;width:{percent:.1f}%">'
        f'</div></div>'
    )


def counts_html(plan: Plan, marks: dict[str, CacheMark] | None = None) -> str:
    """``[✓] 3 completed · [ ] 2 not started`` (+ ``⟲ 3 cached`` when steps did not run here)."""
    counts = plan.counts()
    parts = []
    order = (Status.completed, Status.in_progress, Status.failed, Status.skipped, Status.blocked, Status.not_started)
    for status in order:
        if counts[status] or status in (Status.completed, Status.not_started):
            parts.append(f'{esc(STATUS_MARKS[status])} {counts[status]} {status.value.replace("_", " ")}')
    if marks:
        parts.append(f'<span class="planbook-cached-count" '
                     f'title="steps answered from the step cache or a resumed run: their tools did not run here">'
                     f'{CACHED_MARK} {esc(cached_count_text(marks))}</span>')
    return " · ".join(parts)


def header_html(plan: Plan, *, extra: str = "", marks: dict[str, CacheMark] | None = None,
                gate: RunSecrets | None = None) -> str:
    """Title, id and revision, goal, progress bar and counts per status (secrets hidden by ``gate``)."""
    hide = gate_of(gate).text
    counts = plan.counts()
    total, done = len(plan.steps), counts[Status.completed]
    revision = f" · revision {plan.revision}" if plan.revision > 1 else ""
    lines = [
        f'<div style="font-weight:600;font-size:14px">Plan: {esc(hide(plan.display_title))} '
        f'<span style="font-weight:normal;{DIM}">(ID: {esc(hide(plan.id))}{revision})</span></div>'
    ]
    if plan.goal and plan.goal != plan.display_title:
        lines.append(f'<div><b>Goal:</b> {esc(shown(plan.goal, hide))}</div>')
    lines.append(progress_bar_html(done, total))
    lines.append(f"<div>Progress: {done}/{total} steps completed · {counts_html(plan, marks)}</div>")
    if extra:
        lines.append(extra)
    return "".join(lines)


def row_kind(step: Step, mark: CacheMark | None = None) -> str:
    """What a step's row shows it as: its status, ``cached`` (answered without running here) or
    ``interrupted`` (an interrupt cut its call; it runs again when the run continues)."""
    if mark is not None:
        return "cached"
    if step.status is Status.not_started and step.mark in CUT:
        return "interrupted"
    return step.status.value


def step_row_html(step: Step, *, pane: str = "", mark: CacheMark | None = None, opened: bool = False,
                  gate: RunSecrets | None = None, lean: bool = False,
                  hide: Callable[[str | None], str] | None = None) -> str:
    """A step's row: status mark, id, tool/agent, task, time, error. ``pane``: the HTML of its pane,
    opened by a click on the task (a ``<details>``, open from the start when ``opened``); its texts
    through the run's ``gate`` (``hide``: the gate's :meth:`~planbook.outbound.RunSecrets.hider`
    for a whole table). A completed or waiting row carries no class and no style (its mark says
    it); ``lean``: no ``data-step``, no ``needs`` line and no alignment of the task (a long plan's
    rows: the id is the row's header cell)."""
    if hide is None:
        hide = gate_of(gate).text
    status = step.status
    sid, task, needs = step.id, step.task, step.needs
    executor = f"[{step.agent.upper()}]" if step.agent else (step.tool or "")
    task = shown(task, hide) if task else ""
    error = step.error if (status is _FAILED or status is _SKIPPED) else None
    if not error and status is _BLOCKED and step.notes:  # why it did not run (a reused result's mark is no error)
        error = step.notes
    error = shown(error, hide) if error else ""
    if _SPECIAL(f"{sid}{executor}{task}{error}"):  # most rows have nothing to escape: one search, not four
        sid, executor, task, error = esc(sid), esc(executor), esc(task), esc(error)
    if not task:
        task = f"<code>{esc(shown(shown_call(step, gate, hide), _same))}</code>"
    if needs and not lean:
        task += f'<br><small style="{DIM}">needs {esc(", ".join(needs))}</small>'
    started, finished = step.started_at, step.finished_at
    time = format_duration(finished - started) if started is not None and finished is not None else ""
    status_mark = _MARKS[status]
    if mark is not None:
        status_mark += f' <span class="planbook-cached" title="{esc(mark.describe())}">{CACHED_MARK}</span>'
        time = mark.kind
    if pane:
        task = f'<details class="planbook-pane"{" open" if opened else ""}><summary>{task}</summary>{pane}</details>'
    kind = None if status is _COMPLETED and mark is None else ROW_KINDS.get(row_kind(step, mark))
    attrs = f' class="{kind[0]}" style="{kind[1]}"' if kind else ""
    head = "<tr" if lean else f'<tr data-step="{sid}"'
    cells = (f'{head}{attrs}><td>{status_mark}</td><th>{sid}</th><td>{executor}</td>'
             f'<td{"" if lean and not pane else _LEFT}>{task}</td><td>{time}</td>')
    return f"{cells}<td{_LEFT}>{error}</td></tr>" if error else f"{cells}</tr>"


_COMPLETED, _FAILED, _SKIPPED, _BLOCKED = Status.completed, Status.failed, Status.skipped, Status.blocked


#: the status marks, escaped once
_MARKS = {status: esc(mark) for status, mark in STATUS_MARKS.items()}
_SPECIAL = re.compile(r"[&<>\"']").search


#: above this many rows a table's rows are lean (:func:`step_row_html`): the bytes of a long plan's
#: record are its rows
LEAN_ROWS = 200


def steps_table_html(steps: Sequence[Step], *, panes: dict[str, str] | None = None,
                     marks: dict[str, CacheMark] | None = None, opened: str = "",
                     gate: RunSecrets | None = None) -> str:
    """One row per step (:func:`step_row_html`), the texts through the run's ``gate``; a long table
    scrolls in its own box."""
    panes, marks, gate = panes or {}, marks or {}, gate_of(gate)
    lean = len(steps) > LEAN_ROWS
    hide = gate.hider()
    rows = "".join(step_row_html(s, pane=panes.get(s.id, ""), mark=marks.get(s.id), opened=s.id == opened,
                                 gate=gate, lean=lean, hide=hide) for s in steps)
    table = (f'<table class="planbook-steps" style="border-collapse:collapse;margin:4px 0">'
             f"<thead><tr><th></th><th>id</th><th>tool/agent</th><th{_LEFT}>task</th><th>time</th><th{_LEFT}>error</th>"
             f"</tr></thead><tbody>{rows}</tbody></table>")
    return f'<div style="max-height:520px;overflow:auto">{table}</div>' if len(steps) > 30 else table


def _diff_items(diff: PlanDiff, gate: RunSecrets | None = None) -> str:
    hide = gate_of(gate).text
    title = f"Revision {diff.from_revision} → {diff.to_revision}"
    if diff.reason:
        title += f' <span style="{DIM}">(after: {esc(shown(diff.reason, hide))})</span>'
    items = []
    for sid in diff.removed:
        items.append(f'<li class="planbook-removed">− <del>{esc(sid)}: {esc(shown(diff.steps.get(sid, ""), hide))}</del> '
                     f'(removed)</li>')
    for sid in diff.added:
        items.append(f'<li class="planbook-added">+ <ins style="{tint(FILLS["completed"], 0.2)};text-decoration:none">'
                     f'{esc(sid)}: {esc(shown(diff.steps.get(sid, ""), hide))}</ins> (added)</li>')
    for sid in diff.revised:
        items.append(f'<li class="planbook-revised">~ <span style="{tint(FILLS["blocked"], 0.2)}">'
                     f'{esc(sid)}: {esc(shown(diff.steps.get(sid, ""), hide))}</span> (revised)</li>')
    if diff.empty:
        items.append(f'<li style="{DIM}">(no change)</li>')
    if diff.rejected:
        title += ' — <span class="planbook-rejected">rejected, the plan did not change</span>'
        items.append(f'<li class="planbook-rejected" style="white-space:pre-wrap">Refused: '
                     f'{esc(shown(diff.rejected, hide, TEXT_LIMIT))}</li>')
    return f'<div>{title}</div><ul style="margin:2px 0 6px 0;padding-left:20px;list-style:none">{"".join(items)}</ul>'


def diff_html(diff: PlanDiff, gate: RunSecrets | None = None) -> str:
    """A diff as the text view writes it: removed struck through, added highlighted, revised marked."""
    return f'<div class="planbook-diff {NO_MATH}">{_diff_items(diff, gate)}</div>'


def revisions_html(revisions: Iterable[PlanDiff], gate: RunSecrets | None = None) -> str:
    gate = gate_of(gate)
    diffs = [f'<div class="planbook-diff">{_diff_items(d, gate)}</div>' for d in revisions]
    if not diffs:
        return ""
    return (f'<div class="planbook-revisions" style="margin-top:6px"><div style="font-weight:600">Revision history</div>'
            f'{"".join(diffs)}</div>')


def verdict_html(state: ViewState | RunResult) -> str:
    """``Run completed (goal_met): steps 3/12, replans 0/5`` (+ model calls), marked with the colour
    of how it went (a completed run that skipped steps is amber, not green)."""
    view = state if isinstance(state, ViewState) else ViewState.of_result(state)
    hide = view.gate.text if view.why or view.error else _same
    status = view.status or "not run"
    out = (f'<div class="planbook-verdict planbook-run-{esc(status)} planbook-tone-{view.tone}" '
           f'style="{fg(TONE_COLORS[view.tone])};font-weight:600;margin:2px 0">{esc(verdict_line(view))}')
    if view.status == "paused" and view.why:
        out += f'<div style="font-weight:normal">{esc(shown(view.why, hide))}</div>'
    if view.error:
        label = "Error" if view.status != "completed" else "Note"
        out += f'<div style="font-weight:normal">{label}: {esc(shown(view.error, hide, TEXT_LIMIT))}</div>'
    return out + "</div>"


# ------------------------------------------------------------------ whole views
def plan_html(plan: Plan) -> str:
    """The plan as a static table (what ``text/html`` of a plan holds); the secrets its own args
    name are hidden wherever they turn up."""
    gate = RunSecrets.of_plan(plan)
    return box("plan", f"{header_html(plan, gate=gate)}{steps_table_html(plan.steps, gate=gate)}")


def result_html(result: RunResult) -> str:
    """The final plan, the verdict (status, reason, budgets used) and the revision history."""
    return state_html(ViewState.of_result(result), kind="result")


def state_html(state: ViewState, *, max_rows: int | None = None, kind: str | None = None, opened: str = "") -> str:
    """A plan, a run going on or a finished run: the plan, and the verdict once it has run.

    A run that has stopped (completed, failed, interrupted, paused) is a static record
    (:func:`planbook.views.record.record_html`): the steps worth opening have a pane, the
    timeline and the graph are HTML that survives an untrusted notebook's sanitizer.
    ``max_rows`` shows only a window of rows around the running steps (a live view of a
    long plan then re-sends a page, not the whole table, at every update). ``opened``: the
    step whose pane the record shows open.
    """
    if state.status not in (None, "running") and "record" in STOPPED:
        return STOPPED["record"](state, max_rows=max_rows, kind=kind or "result", opened=opened)
    extra = lineage_html(state) + (verdict_html(state) if state.status is not None else "")
    gate = state.gate
    table, _ = windowed(state.plan.steps, max_rows, lambda steps: steps_table_html(steps, gate=gate))
    kind = kind or ("plan" if state.status is None else "result")
    return box(kind, f"{header_html(state.plan, extra=extra, gate=gate)}{table}"
                     f"{revisions_html(state.revisions, gate)}")


def lineage_html(state: ViewState) -> str:
    """A fork's line for its header: what it forked and how (through the run's gate); '' for a run that is no fork."""
    if not state.lineage:
        return ""
    from .forkbox import headline  # (forkbox imports no view: no circle)

    line = headline(state.lineage, state.gate)
    return f'<div class="planbook-lineage" style="{DIM}">↳ {esc(line)}</div>' if line else ""


def windowed(steps: list[Step], max_rows: int | None, table: Any) -> tuple[str, list[Step]]:
    """``table(rows)`` of the window of ``steps`` (all of them without ``max_rows``), with a
    line saying how many are above and below; and the steps shown."""
    start, end = row_window(steps, max_rows) if max_rows is not None else (0, len(steps))
    shown = steps[start:end]
    out = table(shown)
    if start:
        out = f'<div style="{DIM}">… {start} steps above</div>{out}'
    if end < len(steps):
        out += f'<div style="{DIM}">… {len(steps) - end} steps below</div>'
    return out, shown
