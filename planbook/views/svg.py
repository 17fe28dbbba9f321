"""The timeline and the dependency graph as inline SVG strings (the static record of a run).

Inline SVG renders without JavaScript and survives HTML sanitizers when it holds only
shapes, text and ``<title>`` tooltips, which is all these builders write: no scripts, no
event handlers, no external references. The live widget draws the same pictures with the
same rules in ``static/planview.js``:

- a time axis with ticks, and a minimum bar width, so an instant step is still a bar;
- labels clipped to their bar with an ellipsis (the full text is the bar's ``<title>``),
  and bars placed in lanes by their drawn extent, so labels never overlap;
- revision markers that stack on rows of their own instead of overlapping;
- a log scale when one step dominates (``scale="auto"``), said in the caption;
- steps answered from the cache or a resume as hollow dashed bars of their own style;
- graph edges with arrowheads (drawn shapes, not markers), from a step to the steps that need it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from ..models import Plan
from ..outbound import RunSecrets
from .html import cached_text, esc, format_duration, gate_of, shown_call, tone
from .marks import CACHED_MARK, CacheMark
from .state import Execution

Scale = Literal["auto", "linear", "log"]

WIDTH = 760
LANE_H = 18
MIN_BAR = 4.0  # px: the narrowest bar (an instant step is still visible and clickable)
CHAR_W = 6.2  # px per character of a 10px label (a conservative average, so a label fits its bar)
MAX_BARS = 1500
MAX_NODES = 400
#: one bar at least this many times the median duration makes ``scale="auto"`` use a log scale
DOMINANCE = 20.0

#: bar and node fills: white text on each of them passes WCAG AA (4.5:1)
FILLS = {"completed": "#2e7d32", "failed": "#b71c1c", "running": "#0b5394", "not_started": "#616161",
         "skipped": "#616161", "blocked": "#8a5300", "in_progress": "#0b5394"}
_TEXT = "var(--jp-content-font-color1,#222)"
_BG = "var(--jp-layout-color0,#fff)"


def clip_label(text: str, width: float) -> str:
    """``text`` cut with an ellipsis to fit ``width`` px ('' when not even one character fits)."""
    room = int((width - 6) // CHAR_W)
    if room <= 0:
        return ""
    return text if len(text) <= room else (text[: room - 1] + "…" if room > 1 else "")


def dominated(durations: Sequence[float]) -> bool:
    """True when one duration is at least :data:`DOMINANCE` times the median of the others."""
    if len(durations) < 3:
        return False
    ordered = sorted(durations)
    rest = ordered[:-1]
    median = rest[len(rest) // 2]
    return ordered[-1] > 0 and (median <= 0 or ordered[-1] / median >= DOMINANCE)


def _nice_step(span: float, count: int = 6) -> float:
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def linear_ticks(span: float) -> list[float]:
    """Round tick values from 0 to ``span`` (1, 2 or 5 times a power of ten apart)."""
    if span <= 0:
        return [0.0]
    step = _nice_step(span)
    return [i * step for i in range(int(span / step + 1e-9) + 1)]


def log_ticks(span: float, unit: float) -> list[float]:
    """0 and the powers of ten between ``unit`` and ``span``."""
    ticks = [0.0]
    k = math.floor(math.log10(unit)) if unit > 0 else -3
    while 10 ** k <= span * 1.0001:
        if 10 ** k >= unit * 0.999:
            ticks.append(float(10 ** k))
        k += 1
    return ticks


def timeline_svg(executions: Sequence[Execution], *, origin: float | None, now: float | None = None,
                 marks: dict[str, CacheMark] | None = None, critical: Sequence[int] = (),
                 scale: Scale = "auto") -> str:
    """The executions (and cached steps) as a Gantt chart; '' when nothing ran or was cached."""
    marks = {k: m for k, m in (marks or {}).items() if m.at is not None}
    if not executions and not marks:
        return ""
    base = origin if origin is not None else min([e.start for e in executions] + [m.at or 0 for m in marks.values()])
    hidden = max(0, len(executions) - MAX_BARS)
    shown = list(executions)[hidden:]
    end_of = {e.execution: (e.end if e.end is not None else (now if now is not None else e.start)) for e in shown}
    bars = [(e.start - base, end_of[e.execution] - base, e) for e in shown]
    cached = [((m.at or base) - base, m) for m in marks.values()]
    span = max([end for _, end, _ in bars] + [t for t, _ in cached] + [1e-6])
    durations = [max(0.0, end - start) for start, end, _ in bars]
    use_log = scale == "log" or (scale == "auto" and dominated(durations))
    positive = [d for d in durations if d > 0]
    unit = max(min(positive) if positive else span / 1000, span / 1e5)
    left, right = 8.0, WIDTH - 12.0

    def x(t: float) -> float:
        t = max(0.0, t)
        frac = math.log1p(t / unit) / math.log1p(span / unit) if use_log else t / span
        return left + frac * (right - left)

    # lanes by drawn extent (a min-width bar or a label never runs into the next bar)
    lane_ends: list[float] = []
    placed: list[tuple[int, float, float, Execution | CacheMark]] = []
    entries: list[tuple[float, float, Execution | CacheMark]] = [(x(s), max(x(e) - x(s), MIN_BAR), ex)
                                                                  for s, e, ex in bars]
    entries += [(x(t), MIN_BAR * 2, m) for t, m in cached]
    entries.sort(key=lambda item: item[0])
    for x0, width, item in entries:
        lane = next((i for i, free in enumerate(lane_ends) if free <= x0 + 0.01), None)
        if lane is None:
            lane = len(lane_ends)
            lane_ends.append(0.0)
        lane_ends[lane] = x0 + width + 1
        placed.append((lane, x0, width, item))
    top = 20
    axis_y = top + len(lane_ends) * LANE_H + 2
    critical_set = set(critical)
    parts: list[str] = []
    for lane, x0, width, item in placed:
        y = top + lane * LANE_H
        if isinstance(item, CacheMark):
            title = f"{item.step} {CACHED_MARK} {cached_text(item, base)}"
            label = clip_label(item.step, width)
            parts.append(f'<g class="pb-bar-cached" data-step="{esc(item.step)}"><title>{esc(title)}</title>'
                         f'<rect x="{x0:.1f}" y="{y}" width="{width:.1f}" height="{LANE_H - 4}" rx="2" '
                         f'style="fill:{_BG};stroke:{FILLS["completed"]};stroke-dasharray:3 2;stroke-width:1.5"/>'
                         f'{_label(label, x0, y, _TEXT)}</g>')
            continue
        ex = item
        color = FILLS["running"] if ex.ok is None else FILLS["completed"] if ex.ok else FILLS["failed"]
        start, end = ex.start - base, end_of[ex.execution] - base
        name = f"{ex.step} ↻{ex.attempt}" if ex.attempt > 1 else ex.step
        where = f", {ex.worker}" if ex.worker else ""
        state = "running" if ex.end is None else "completed" if ex.ok else "failed"
        title = (f"#{ex.execution} step {ex.step}, attempt {ex.attempt}, revision {ex.revision}{where}: "
                 f"+{format_duration(start)} → +{format_duration(end)} ({format_duration(end - start)}, {state})"
                 + (" · critical path" if ex.execution in critical_set else ""))
        outline = ";stroke:#ff9800;stroke-width:2.5" if ex.execution in critical_set else ""
        critical_class = " pb-critical" if ex.execution in critical_set else ""
        label = clip_label(name, width)
        parts.append(f'<g class="pb-bar-ex pb-{state}{critical_class}" data-step="{esc(ex.step)}" '
                     f'data-execution="{ex.execution}"><title>{esc(title)}</title>'
                     f'<rect x="{x0:.1f}" y="{y}" width="{width:.1f}" height="{LANE_H - 4}" rx="2" '
                     f'style="fill:{color}{outline}"/>{_label(label, x0, y, "#fff")}</g>')
    ticks = log_ticks(span, unit) if use_log else linear_ticks(span)
    parts.append(f'<line x1="{left}" x2="{right}" y1="{axis_y}" y2="{axis_y}" style="stroke:{_TEXT}"/>')
    last_label = -1e9
    for t in ticks:
        tx = x(t)
        parts.append(f'<line class="pb-tick" x1="{tx:.1f}" x2="{tx:.1f}" y1="{axis_y}" y2="{axis_y + 4}" '
                     f'style="stroke:{_TEXT}"/>')
        text = "0" if t == 0 else format_duration(t)
        if tx - last_label >= len(text) * CHAR_W + 8:
            anchor = "end" if tx > right - 20 else "start" if tx < left + 20 else "middle"
            parts.append(f'<text class="pb-tick-label" x="{tx:.1f}" y="{axis_y + 14}" font-size="10" '
                         f'text-anchor="{anchor}" style="fill:{_TEXT}">{esc(text)}</text>')
            last_label = tx
    marker_rows = _revision_markers(bars, x)
    marker_top = axis_y + 20
    for row, (mx, revision) in marker_rows:
        parts.append(f'<g class="pb-replan"><title>revision {revision} starts here (a replan)</title>'
                     f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{top - 4}" y2="{marker_top + row * 12 + 2}" '
                     f'style="stroke:{tone("#b26a00")};stroke-dasharray:4 3"/>'
                     f'<text x="{mx + 2:.1f}" y="{marker_top + row * 12 + 9}" font-size="10" '
                     f'style="fill:{tone("#b26a00")}">revision {revision}</text></g>')
    rows = max((row for row, _ in marker_rows), default=-1) + 1
    height = marker_top + rows * 12 + 6
    caption = f"{len(shown)} executions in {len(lane_ends)} lane(s), {format_duration(span)}"
    if marks:
        caption += f", {len(marks)} answered without running ({CACHED_MARK}: dashed bars)"
    if hidden:
        caption += f" (the {hidden} earliest not drawn)"
    if use_log:
        caption += " · log time scale" + (" (one step dominates)" if scale == "auto" else "")
    head = (f'<text x="2" y="12" font-size="11" style="fill:{_TEXT}">{esc(caption)}</text>')
    return (f'<svg class="planbook-timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" data-scale="{"log" if use_log else "linear"}" role="img" '
            f'aria-label="timeline">{head}{"".join(parts)}</svg>')


def _label(text: str, x0: float, y: int, fill: str) -> str:
    if not text:
        return ""
    return (f'<text x="{x0 + 3:.1f}" y="{y + 10}" font-size="10" class="pb-on-bar" '
            f'style="fill:{fill};pointer-events:none">{esc(text)}</text>')


def _revision_markers(bars: list[tuple[float, float, Execution]], x: object) -> list[tuple[int, tuple[float, int]]]:
    """``(row, (x, revision))`` for each replan: a label goes on the first row where it fits."""
    starts: dict[int, float] = {}
    for start, _, ex in bars:
        if ex.revision > 1 and (ex.revision not in starts or start < starts[ex.revision]):
            starts[ex.revision] = start
    row_ends: list[float] = []
    out: list[tuple[int, tuple[float, int]]] = []
    for revision in sorted(starts):
        mx = x(starts[revision])  # type: ignore[operator]
        width = len(f"revision {revision}") * CHAR_W + 6
        row = next((i for i, end in enumerate(row_ends) if end <= mx), None)
        if row is None:
            row = len(row_ends)
            row_ends.append(0.0)
        row_ends[row] = mx + width
        out.append((row, (mx, revision)))
    return out


def graph_svg(plan: Plan, *, marks: dict[str, CacheMark] | None = None, gate: RunSecrets | None = None) -> str:
    """The plan's steps as nodes in layers (a step right of what it needs), with arrowheads; a
    node's tooltip is its task or call, through the run's ``gate``."""
    gate = gate_of(gate)
    steps = plan.steps[:MAX_NODES]
    if not steps:
        return ""
    marks = marks or {}
    index = {s.id: i for i, s in enumerate(steps)}
    layer = [0] * len(steps)
    for i, step in enumerate(steps):  # plan order is a topological order (needs come first)
        for need in step.needs:
            if need in index and index[need] < i:
                layer[i] = max(layer[i], layer[index[need]] + 1)
    per_layer: dict[int, int] = {}
    pos = []
    for i in range(len(steps)):
        row = per_layer.get(layer[i], 0)
        per_layer[layer[i]] = row + 1
        pos.append((layer[i], row))
    node_w, node_h, gap_x, gap_y = 110, 26, 40, 10
    width = (max(per_layer) + 1) * (node_w + gap_x) + 10
    height = max(per_layer.values()) * (node_h + gap_y) + 10

    def at(i: int) -> tuple[int, int]:
        return 5 + pos[i][0] * (node_w + gap_x), 5 + pos[i][1] * (node_h + gap_y)

    edge_color = "var(--jp-content-font-color2,#666)"
    parts: list[str] = []
    for i, step in enumerate(steps):
        for need in step.needs:
            if need not in index:
                continue
            (x1, y1), (x2, y2) = at(index[need]), at(i)
            ym = y2 + node_h / 2
            parts.append(f'<path class="pb-edge" d="M {x1 + node_w} {y1 + node_h / 2} C {x1 + node_w + gap_x / 2} '
                         f'{y1 + node_h / 2}, {x2 - gap_x / 2} {ym}, {x2 - 6} {ym}" '
                         f'style="fill:none;stroke:{edge_color};stroke-width:1.2"/>')
            # the arrowhead as its own shape: a <marker> needs an id, ids collide between records,
            # and a marker inside a closed <details> draws nothing for the others
            parts.append(f'<path class="pb-arrowhead" d="M {x2 - 8} {ym - 4} L {x2} {ym} L {x2 - 8} {ym + 4} z" '
                         f'style="fill:{edge_color}"/>')
    for i, step in enumerate(steps):
        x0, y0 = at(i)
        status = step.status.value
        mark = marks.get(step.id)
        label = step.id + (f" {CACHED_MARK}" if mark else "")
        title = f"{step.id} ({status}{', ' + mark.kind if mark else ''}): {gate.text(step.task) or shown_call(step, gate)}"
        dash = ";stroke:#fff;stroke-dasharray:3 2;stroke-width:1.5" if mark else ""
        parts.append(f'<g class="pb-node planbook-{status}" data-step="{esc(step.id)}"><title>{esc(title)}</title>'
                     f'<rect x="{x0}" y="{y0}" width="{node_w}" height="{node_h}" rx="5" '
                     f'style="fill:{FILLS.get(status, FILLS["not_started"])}{dash}"/>'
                     f'<text x="{x0 + 6}" y="{y0 + 17}" font-size="11" class="pb-on-bar" '
                     f'style="fill:#fff">{esc(clip_label(label, node_w))}</text></g>')
    note = (f"The first {MAX_NODES} of {len(plan.steps)} steps are drawn. " if len(plan.steps) > MAX_NODES else "")
    return (f'<svg class="planbook-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(note)}dependency graph">{"".join(parts)}</svg>')

