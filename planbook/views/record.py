"""The static record of a run that has stopped: what a saved notebook keeps of a live view.

A widget saved in a notebook has no model once its kernel is gone ("Error displaying
widget"), and a stored widget state is blank where JavaScript does not run (nbconvert's
HTML, GitHub, nbviewer). So when a run ends its live view is replaced by this record: the
header and verdict, one row per step whose task opens the step's pane (a ``<details>``:
call, time, result, printed output, error), the timeline and the graph as inline SVG and
the revision history. It is HTML that survives sanitizers: no script, no event handler,
no external resource, no ``<style>`` (inline styles use JupyterLab's theme variables with
fallbacks, so it reads in the dark theme too). A result's own HTML has passed the gate's
sanitiser (:mod:`planbook.outbound.html`, through :func:`planbook.views.panes.result_html`):
what it cannot keep safe is shown as the result's text, and the pane says so.
"""

from __future__ import annotations

from typing import Any

from ..models import Status, Step
from .html import (
    CACHED_COLOR,
    DIM,
    NO_MATH,
    TEXT,
    STOPPED,
    box,
    cached_text,
    esc,
    fg,
    format_duration,
    header_html,
    revisions_html,
    steps_table_html,
    verdict_html,
    windowed,
)
from .marks import CacheMark, cache_marks
from .panes import PaneBudget, pane
from .state import ViewState
from .svg import Scale, graph_svg, timeline_svg

#: rows a record keeps (the live widget's cap on the static copy of a finished run,
#: ``planbook.views.widget.STATIC_ROWS``): a longer plan shows a window of them and says where the rest is
RECORD_ROWS = 1000
#: rows of a record whose pane it keeps (the live widget, too, builds panes only for some rows): every
#: row of a plan up to this size; in a longer one the open step, the steps with an error, then the latest
RECORD_PANES = 100

_LABEL = f"color:#555;color:{DIM};font-size:11px;margin-top:4px"
_PRE = ("font-family:monospace;white-space:pre-wrap;margin:2px 0;max-height:320px;overflow:auto;padding:4px;"
        f"color:{TEXT};background:var(--jp-layout-color0,#fff);border:1px solid var(--jp-border-color2,#e0e0e0)")
_PANE = ("margin:4px 0;padding:4px 8px;border-left:3px solid var(--jp-border-color1,#bbb);"
         f"color:{TEXT};background:var(--jp-layout-color0,#fff)")
_TH = f"text-align:left;padding:1px 8px 1px 0;vertical-align:top;font-weight:normal;color:#555;color:{DIM}"


def safe_markup(markup: str) -> bool:
    """True when the gate's sanitiser keeps ``markup`` whole (:func:`planbook.outbound.html.sanitize_html`:
    nothing removed, not even a style): no script, event handler, URL or other host's resource."""
    from ..outbound.html import sanitize_html

    kept = sanitize_html(markup)
    return kept is not None and not kept.left_out


def pane_html(data: dict[str, Any], step: Step, mark: CacheMark | None, origin: float | None) -> str:
    """A step's pane (the JSON the live view draws, see :func:`planbook.views.panes.pane`) as HTML."""
    rows = [("status", f"{step.status.value.replace('_', ' ')}, attempt {data['attempts']}" if data["attempts"]
             else step.status.value.replace("_", " "), ""),
            ("call", data["call"], "font-family:monospace;white-space:pre-wrap;word-break:break-all")]
    if data.get("needs"):
        rows.append(("needs", ", ".join(data["needs"]), ""))
    if data.get("expect"):
        rows.append(("expect", data["expect"], ""))
    if mark is not None:
        rows.append(("not run", cached_text(mark, origin), fg(CACHED_COLOR)))
    elif data.get("start") is not None:
        when = f"started +{format_duration(data['start'])}"
        if data.get("end") is not None:
            when += f", ended +{format_duration(data['end'])} ({format_duration(data['duration'])})"
        rows.append(("time", when, ""))
    if data.get("error"):
        rows.append(("error", data["error"], fg("#b71c1c")))
    if data.get("notes") and mark is None:
        rows.append(("notes", data["notes"], ""))
    table = "".join(f'<tr><th style="{_TH}">{label}</th><td style="padding:1px 0;{style}">{esc(value)}</td></tr>'
                    for label, value, style in rows)
    parts = [f'<table style="border-collapse:collapse">{table}</table>']
    if "result" in data:
        # built by panes.result_html: a value's own HTML has been through the gate's sanitiser, and
        # what it could not keep is shown as text with a line saying so
        result = data["result"]
        parts.append(f'<div style="{_LABEL}">returned</div>')
        result = result.replace('<pre class="pb-text">', f'<pre class="pb-text" style="{_PRE}">')
        parts.append(f'<div class="planbook-returned" style="max-height:400px;overflow:auto">{result}</div>')
    if data.get("output"):
        parts.append(f'<div style="{_LABEL}">printed</div><pre style="{_PRE}">{esc(data["output"])}</pre>')
    if data.get("traceback"):
        parts.append(f'<div style="{_LABEL}">traceback</div><pre style="{_PRE};{fg("#b71c1c")}">'
                     f'{esc(data["traceback"])}</pre>')
    if data.get("truncated"):
        parts.append(f'<div style="{fg("#8a5300")};font-style:italic">{esc(data["truncated"])}</div>')
    return f'<div class="planbook-pane-body" data-pane="{esc(step.id)}" style="{_PANE}">{"".join(parts)}</div>'


def record_html(state: ViewState, *, max_rows: int | None = None, kind: str = "result",
                scale: Scale = "auto", opened: str = "") -> str:
    """The static record of a stopped run (see the module docstring). ``max_rows``: a window of
    rows (at most :data:`RECORD_ROWS`, also the default: the record is kept in the notebook);
    ``scale``: the timeline's time scale (``auto`` switches to a log scale when one step
    dominates, and says so); ``opened``: the step whose pane is open."""
    plan = state.plan
    marks = cache_marks(state.events, plan)
    origin = state.origin
    results = {s.id: s.result for s in plan.steps if s.status is Status.completed}
    budget = PaneBudget()
    gate = state.gate  # the run's secrets: every text, call and result below goes through it

    without_pane = 0

    def table(steps: list[Step]) -> str:
        nonlocal without_pane
        chosen = _with_panes(steps, opened)
        without_pane = sum(1 for s in steps if _has_pane(s)) - len(chosen)
        panes = {}
        for step in steps:
            if step.id in chosen:
                panes[step.id] = pane_html(pane(step, results, origin=origin, budget=budget, gate=gate), step,
                                           marks.get(step.id), origin)
        return steps_table_html(steps, panes=panes, marks=marks, opened=opened, gate=gate)

    cap = RECORD_ROWS if max_rows is None else min(max_rows, RECORD_ROWS)
    rows, shown = windowed(plan.steps, cap, table)
    parts = [header_html(plan, extra=verdict_html(state), marks=marks, gate=gate), rows]
    if len(shown) < len(plan.steps) or without_pane:
        parts.append(left_out_line(len(shown), len(plan.steps), without_pane))
    timeline = timeline_svg(state.timeline, origin=origin, now=state.now, marks=marks,
                            critical=state.critical_path(), scale=scale)
    if timeline:
        parts.append(_section("timeline", "Timeline", timeline,
                              "Bars: green completed, red failed, blue running, dashed: answered from the cache "
                              "or a resume; ↻ a retry; dashed line: a replan; orange outline: the critical path. "
                              "Hover a bar for its times."))
    graph = graph_svg(plan, marks=marks, gate=gate)
    if graph:
        parts.append(_section("graph", "Graph", graph,
                              "Arrows go from a step to the steps that need it; colours are statuses."))
    parts.append(revisions_html(state.revisions, gate))
    return box(kind, "".join(parts)).replace(f'class="planbook-{kind} {NO_MATH}"',
                                             f'class="planbook-{kind} planbook-record {NO_MATH}"', 1)


def _has_pane(step: Step) -> bool:
    return not (step.status is Status.not_started and not step.attempts and not step.notes)


def _with_panes(steps: list[Step], opened: str) -> set[str]:
    """The ids of the rows whose pane the record keeps (:data:`RECORD_PANES` of them at most)."""
    candidates = [s for s in steps if _has_pane(s)]
    if len(candidates) <= RECORD_PANES:
        return {s.id for s in candidates}
    errors = (Status.failed, Status.blocked, Status.skipped)
    order = ([s for s in candidates if s.id == opened] + [s for s in candidates if s.status in errors]
             + candidates[::-1])
    return set(list(dict.fromkeys(s.id for s in order))[:RECORD_PANES])


def left_out_line(shown: int, total: int, without_pane: int = 0) -> str:
    """What a record of a long plan says about the rows and panes it does not keep, and where they are."""
    kept = f"This record keeps {shown:,} of {total:,} steps" if shown < total else "This record"
    if without_pane:
        kept += f"{',' if shown < total else ''} without the panes of {without_pane:,} of them"
    return (f'<div class="planbook-rows-left-out" style="{_LABEL}">{kept}, so a saved notebook stays small: '
            f'print(result) lists every step (for a stored run, planbook show RUN_ID); '
            f'result.plan.step(&#x27;ID&#x27;) is one step and result.outputs[&#x27;ID&#x27;] its value.</div>')


def _section(name: str, title: str, svg: str, legend: str) -> str:
    return (f'<details class="planbook-{name}-box" style="margin-top:4px"><summary style="cursor:pointer">{title}'
            f'</summary><div style="overflow:auto;max-height:440px">{svg}</div>'
            f'<div style="{_LABEL}">{esc(legend)}</div></details>')



STOPPED["record"] = record_html
