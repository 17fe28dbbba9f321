"""The static HTML view: a self-contained table (inline styles, no scripts).

It is what a notebook shows where widgets do not run (GitHub, nbviewer, nbconvert, a
kernel without anywidget) and the final state every live view leaves behind.
Everything is escaped and deterministic: the only times shown are step durations
(which nbval's sanitize file replaces). Every top-level element carries the classes
``mathjax_ignore`` (JupyterLab 4) and ``tex2jax_ignore`` (nbconvert's MathJax 2), so two
``$`` in a step (``convert(prices='$load', rate='$rate')``) are not typeset as maths.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from ..models import STATUS_MARKS, Plan, PlanDiff, RunResult, Status, Step
from ..outbound import RunSecrets, html_text
from ..state import CACHED_NOTE
from .marks import CACHED_MARK, CacheMark, cached_count_text
from .state import ViewState, row_window, verdict_line

#: the classes that keep MathJax away from planbook's HTML
NO_MATH = "mathjax_ignore tex2jax_ignore"

#: the page's text and background, from JupyterLab's theme (light and dark), with fallbacks elsewhere
TEXT = "var(--jp-content-font-color1,#222)"
PAGE = "var(--jp-layout-color0,#fff)"
#: secondary text: the text colour faded towards the page (Lab's own --jp-content-font-color2 is
#: 4.5:1 on white and falls below it on a tinted row or a grey cell)
DIM = "color-mix(in srgb,var(--jp-content-font-color1,#222) 72%,var(--jp-layout-color0,#fff))"


def tone(color: str) -> str:
    """``color`` moved towards the theme's text colour: dark on a light theme, light on a dark one
    (a status colour that stays readable, WCAG AA, on either background)."""
    return f"color-mix(in srgb,{color} 60%,var(--jp-content-font-color1,#000))"


def tint(color: str) -> str:
    """A faint ``color`` over the theme's background (a row of that status)."""
    return f"color-mix(in srgb,{color} 12%,var(--jp-layout-color0,#fff))"


def fg(color: str) -> str:
    """A ``color:`` declaration: ``color`` itself where color-mix is unknown, else its :func:`tone`."""
    return f"color:{color};color:{tone(color)}"


def bg(color: str, light: str) -> str:
    """A ``background:`` declaration: ``light`` where color-mix is unknown, else the :func:`tint` of ``color``."""
    return f"background:{light};background:{tint(color)}"


#: (text colour, row background, the light row background where color-mix is unknown) per status
STATUS_COLORS: dict[Status, tuple[str, str, str]] = {
    Status.not_started: ("#555555", "", ""),
    Status.in_progress: ("#0b5394", "#0b5394", "#e3eefb"),
    Status.completed: ("#1b6e20", "#2e7d32", "#e8f5e9"),
    Status.failed: ("#b71c1c", "#b71c1c", "#fdecea"),
    Status.skipped: ("#6d6d6d", "#6d6d6d", "#f1f1f1"),
    Status.blocked: ("#8a5300", "#c77700", "#fff4e0"),
}
#: colour of a verdict by its tone (see ViewState.tone)
TONE_COLORS = {"ok": "#1b6e20", "warn": "#8a5300", "bad": "#b71c1c", "info": "#0b5394"}
#: how a run that has stopped is drawn: :mod:`.record` registers itself here (it builds on this module)
STOPPED: dict[str, Callable[..., str]] = {}
#: colour of "something the run did not do itself" (a cached or resumed step)
CACHED_COLOR = "#5b3f99"


@lru_cache(maxsize=None)
def row_style(status: Status) -> str:
    """The colours of a step's row: status text over a faint status background."""
    color, base, light = STATUS_COLORS[status]
    return f"{fg(color)};{bg(base, light)}" if base else fg(color)


_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;max-width:100%"
# short on purpose: every row repeats them (front ends' own table CSS must be overridden inline)
_CELL = "padding:1px 6px;text-align:left"
_MONO = "font-family:monospace"
_ROW = "vertical-align:top;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)"
_DIM = f"color:#555;color:{DIM}"


#: every HTML view escapes text with the gate's one HTML escape
esc = html_text


def format_duration(seconds: float | None) -> str:
    """``12.3 ms`` or ``1.25 s`` ('' when unknown)."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def shown_call(step: Step, gate: RunSecrets | None = None) -> str:
    """What a step does, as a view shows it: ``[AGENT] task`` or ``tool(a=1, password=***)``
    (:meth:`~planbook.models.Step.describe`, which shows a secret-named arg as ``***``), through
    the run's ``gate`` (a secret it repeats is hidden): this HTML is kept in the notebook."""
    return gate_of(gate).text(step.describe())


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
    return f'<div class="planbook-{kind} {NO_MATH}" style="{_BOX};color:{TEXT}">{body}</div>'


# ------------------------------------------------------------------ pieces
def progress_bar_html(done: int, total: int, *, color: str = "#2e7d32") -> str:
    """A progress bar made of two divs (an HTML element, so it survives nbconvert)."""
    percent = done / total * 100 if total else 0.0
    return (
        f'<div class="planbook-progress" title="{done}/{total} steps completed" '
        f'style="background:#e0e0e0;background:var(--jp-layout-color3,#e0e0e0);border-radius:4px;height:8px;'
        f'width:100%;max-width:480px;margin:4px 0">'
        f'<div style="background:{color};border-radius:4px;height:8px;width:{percent:.1f}%"></div></div>'
    )


def counts_html(plan: Plan, marks: dict[str, CacheMark] | None = None) -> str:
    """``[✓] 3 completed · [ ] 2 not started`` (+ ``⟲ 3 cached`` when steps did not run here)."""
    counts = plan.counts()
    parts = []
    order = (Status.completed, Status.in_progress, Status.failed, Status.skipped, Status.blocked, Status.not_started)
    for status in order:
        if counts[status] or status in (Status.completed, Status.not_started):
            label = status.value.replace("_", " ")
            parts.append(f'<span style="{fg(STATUS_COLORS[status][0])}">{esc(STATUS_MARKS[status])} '
                         f'{counts[status]} {label}</span>')
    if marks:
        parts.append(f'<span class="planbook-cached-count" style="{fg(CACHED_COLOR)}" '
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
        f'<span style="font-weight:normal;{_DIM}">(ID: {esc(hide(plan.id))}{revision})</span></div>'
    ]
    if plan.goal and plan.goal != plan.display_title:
        lines.append(f'<div><b>Goal:</b> {esc(hide(plan.goal))}</div>')
    lines.append(progress_bar_html(done, total))
    lines.append(f"<div>Progress: {done}/{total} steps completed · {counts_html(plan, marks)}</div>")
    if extra:
        lines.append(extra)
    return "".join(lines)


def step_row_html(step: Step, *, pane: str = "", mark: CacheMark | None = None, opened: bool = False,
                  gate: RunSecrets | None = None) -> str:
    """A step's row; ``pane``: the HTML of its pane, opened by a click on the task (a ``<details>``,
    open from the start when ``opened``); its texts through the run's ``gate``."""
    gate = gate_of(gate)
    hide = gate.text
    task = esc(hide(step.task)) if step.task else f'<span style="{_MONO}">{esc(shown_call(step, gate))}</span>'
    needs = f'<div style="{_DIM};font-size:11px">needs {esc(", ".join(step.needs))}</div>' if step.needs else ""
    error = esc(hide(step.error)) if step.error and step.status in (Status.failed, Status.skipped) else ""
    if not error and step.notes and (step.status is Status.blocked or step.notes.startswith(CACHED_NOTE)):
        error = esc(hide(step.notes))
    executor = f"[{esc(step.agent.upper())}]" if step.agent else esc(step.tool or "")
    status_mark = esc(STATUS_MARKS[step.status])
    time = esc(format_duration(step.duration))
    if mark is not None:
        status_mark += (f' <span class="planbook-cached" title="{esc(mark.describe())}" '
                        f'style="{fg(CACHED_COLOR)}">{CACHED_MARK}</span>')
        time = f'<span style="{fg(CACHED_COLOR)}">{mark.kind}</span>'
    if pane:
        task = (f'<details class="planbook-pane"{" open" if opened else ""}><summary style="cursor:pointer">'
                f'{task}</summary>{pane}</details>')
    cached = " planbook-step-cached" if mark is not None else ""
    return (
        f'<tr class="planbook-step planbook-{step.status.value}{cached}" data-step="{esc(step.id)}" '
        f'style="{_ROW};{row_style(step.status)}">'
        f'<td style="{_CELL};{_MONO};white-space:nowrap">{status_mark}</td>'
        f'<td style="{_CELL};white-space:nowrap"><b>{esc(step.id)}</b></td>'
        f'<td style="{_CELL};{_MONO}">{executor}</td>'
        f'<td style="{_CELL};color:{TEXT}">{task}{needs}</td>'
        f'<td style="{_CELL};white-space:nowrap">{time}</td>'
        f'<td style="{_CELL}">{error}</td></tr>'
    )


def steps_table_html(steps: Iterable[Step], *, panes: dict[str, str] | None = None,
                     marks: dict[str, CacheMark] | None = None, opened: str = "",
                     gate: RunSecrets | None = None) -> str:
    """One row per step: mark, id, tool/agent, task, duration, error; coloured by status; the
    texts through the run's ``gate``."""
    panes, marks, gate = panes or {}, marks or {}, gate_of(gate)
    head = "".join(f'<th style="{_CELL};color:{TEXT}">{h}</th>' for h in ("", "id", "tool/agent", "task", "time", "error"))
    head = f'<tr style="{_ROW}">{head}</tr>'
    rows = "".join(step_row_html(s, pane=panes.get(s.id, ""), mark=marks.get(s.id), opened=s.id == opened,
                                 gate=gate) for s in steps)
    return (f'<table class="planbook-steps" style="border-collapse:collapse;margin:4px 0;line-height:1.4">'
            f"<thead>{head}</thead><tbody>{rows}</tbody></table>")


def _diff_items(diff: PlanDiff, gate: RunSecrets | None = None) -> str:
    hide = gate_of(gate).text
    title = f"Revision {diff.from_revision} → {diff.to_revision}"
    if diff.reason:
        title += f' <span style="{_DIM}">(after: {esc(hide(diff.reason))})</span>'
    items = []
    for sid in diff.removed:
        items.append(f'<li class="planbook-removed" style="{fg("#b71c1c")}">− <del>{esc(sid)}: '
                     f'{esc(hide(diff.steps.get(sid, "")))}</del> (removed)</li>')
    for sid in diff.added:
        items.append(f'<li class="planbook-added" style="{fg("#1b6e20")}">+ <ins style="{bg("#2e7d32", "#e6ffed")};'
                     f'text-decoration:none">{esc(sid)}: {esc(hide(diff.steps.get(sid, "")))}</ins> (added)</li>')
    for sid in diff.revised:
        items.append(f'<li class="planbook-revised" style="{fg("#8a5300")}">~ <span style="{bg("#c77700", "#fff4e0")}">'
                     f'{esc(sid)}: {esc(hide(diff.steps.get(sid, "")))}</span> (revised)</li>')
    if diff.empty:
        items.append(f'<li style="{_DIM}">(no change)</li>')
    if diff.rejected:
        title += ' — <span class="planbook-rejected">rejected, the plan did not change</span>'
        items.append(f'<li class="planbook-rejected" style="white-space:pre-wrap">Refused: {esc(hide(diff.rejected))}</li>')
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
    """``Run completed (goal_met): steps 3/12, replans 0/5`` (+ model calls), coloured by how it went
    (a completed run that skipped steps is amber, not green)."""
    view = state if isinstance(state, ViewState) else ViewState.of_result(state)
    hide = view.gate.text if view.why or view.error else _same
    status = view.status or "not run"
    color = fg(TONE_COLORS[view.tone])
    out = (f'<div class="planbook-verdict planbook-run-{esc(status)} planbook-tone-{view.tone}" '
           f'style="{color};font-weight:600">{esc(verdict_line(view))}</div>')
    if view.status == "paused" and view.why:
        out += f'<div style="{color}">{esc(hide(view.why))}</div>'
    if view.error:
        label = "Error" if view.status != "completed" else "Note"
        out += f'<div style="{color}">{label}: {esc(hide(view.error))}</div>'
    return out


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
    (:func:`planbook.views.record.record_html`): each step's pane opens from its row, the
    timeline and the graph are inline SVG. ``max_rows`` shows only a window of rows around
    the running steps (a live view of a long plan then re-sends a page, not the whole
    table, at every update). ``opened``: the step whose pane the record shows open.
    """
    if state.status not in (None, "running") and "record" in STOPPED:
        return STOPPED["record"](state, max_rows=max_rows, kind=kind or "result", opened=opened)
    extra = verdict_html(state) if state.status is not None else ""
    gate = state.gate
    table, _ = windowed(state.plan.steps, max_rows, lambda steps: steps_table_html(steps, gate=gate))
    kind = kind or ("plan" if state.status is None else "result")
    return box(kind, f"{header_html(state.plan, extra=extra, gate=gate)}{table}"
                     f"{revisions_html(state.revisions, gate)}")


def windowed(steps: list[Step], max_rows: int | None, table: Any) -> tuple[str, list[Step]]:
    """``table(rows)`` of the window of ``steps`` (all of them without ``max_rows``), with a
    line saying how many are above and below; and the steps shown."""
    start, end = row_window(steps, max_rows) if max_rows is not None else (0, len(steps))
    shown = steps[start:end]
    out = table(shown)
    if start:
        out = f'<div style="{_DIM}">… {start} steps above</div>{out}'
    if end < len(steps):
        out += f'<div style="{_DIM}">… {len(steps) - end} steps below</div>'
    return out, shown
