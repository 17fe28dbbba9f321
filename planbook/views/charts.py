"""The timeline and the dependency graph of a run's record, as HTML that survives sanitizers.

A record is what a saved notebook keeps, and a notebook from a clone, a download or GitHub
is untrusted: JupyterLab's and Notebook 7's sanitizer then strips SVG (a drawn timeline read
as run-on text) and every CSS value that uses ``var()``, and GitHub strips styles altogether.
So both are plain elements in the page's flow: ``div``s placed by percentage margins and
widths, no absolute positioning, colours that read on a light and a dark page (white text on
the fills of :data:`planbook.views.html.FILLS`), a ``title`` on each bar and node with its
full text, and text inside every bar, so with the styles stripped it reads as a list.

Timeline rules (the live widget, ``static/planview.js``, draws by the same rules):

1. **One linear scale**: time runs left to right from the run's first event (0) to the end of
   its last execution; a bar starts when its execution started and is as long as its own time.
   No automatic log scale (a view that switches scales on its own hides what it shows).
2. **Lanes by real overlap in time**: an execution goes in the first lane whose last execution
   ended at or before it started (the times, never the drawn widths); a serial run is one lane,
   and a second lane means two executions really ran at once.
3. **A minimum width**: a bar is at least :data:`MIN_BAR` percent of the width, so an instant
   step is still seen; a bar after one widened so starts where that one ends (never over it).
4. **Labels inside their bars**: ``step ↻attempt duration``, clipped to the bar; the bar's
   ``title`` has it all (execution, step, attempt, revision, worker, start → end, duration,
   status, critical path).
5. **Fills by status**: completed green, failed red, running blue, interrupted amber (closed
   where the data says the interrupt closed it), answered from the cache or a resume purple
   (``⟲``, a minimum-width bar when the run took the result). White text on each.
6. **Replans**: a ``revision N`` marker where revision N's first execution started, in a row
   above the lanes (markers that would overlap take rows of their own).
7. **The critical path** is underlined in orange, unless it is every bar (a serial run).
8. **Long runs are summarised**: beyond :data:`MAX_BARS` executions, the run's time is cut in
   :data:`BUCKETS` equal slices, each one bar coloured by the worst status in it (failed,
   interrupted, running, cached, completed) with the title ``N executions, steps a..b``,
   and a line says so.

The graph: steps by dependency level (level 1 needs nothing; a step is one level after the
last of its needs), each a status badge with ``needs a, b``; beyond :data:`MAX_NODES` steps,
one line per run of levels alike, and a line says so.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..data.models import STATUS_MARKS, Plan, Status
from ..data.stepmark import StepMark
from ..data.timeline import Execution
from ..data.wording import plural
from ..outbound import RunSecrets
from .html import DIM, FILLS, cached_text, esc, fill, format_duration, gate_of, shown_call
from .marks import CACHED_MARK, CacheMark

#: the narrowest bar, in percent of the timeline's width (about 4 px at its widest)
MIN_BAR = 0.6
#: executions drawn one by one; more are summarised in :data:`BUCKETS` slices of time
MAX_BARS = 200
BUCKETS = 100
#: steps drawn as badges; more are summarised by level
MAX_NODES = 150
#: lines of a summarised graph
MAX_LEVEL_LINES = 40
#: worst first: the colour of a summarised slice
_WORST = ("failed", "interrupted", "running", "cached", "completed")

_LANE = "white-space:nowrap;overflow:hidden;line-height:16px;font-size:10px;margin:1px 0"
_BAR = "display:inline-block;vertical-align:top;overflow:hidden;text-overflow:ellipsis"
_CRITICAL = ";border-bottom:3px solid #ff9800"


def _pct(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def linear_ticks(span: float) -> list[float]:
    """Round tick values from 0 to ``span`` (1, 2 or 5 times a power of ten apart)."""
    if span <= 0:
        return [0.0]
    raw = span / 6
    power = 10 ** math.floor(math.log10(raw))
    step = next((f * power for f in (1, 2, 5) if raw <= f * power), 10 * power)
    return [i * step for i in range(int(span / step + 1e-9) + 1)]


def lanes_of(spans: Sequence[tuple[float, float]]) -> list[int]:
    """The lane of each ``(start, end)`` (rule 2): the first lane free at its start, by real time."""
    ends: list[float] = []
    out = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda k: spans[k][0]):
        start, end = spans[i]
        lane = next((n for n, free in enumerate(ends) if free <= start), None)
        if lane is None:
            lane = len(ends)
            ends.append(end)
        ends[lane] = max(end, start)
        out[i] = lane
    return out


def fit(bars: list[tuple[float, float, Any, Any, Any]]) -> list[tuple[float, float, Any, Any, Any]]:
    """Rule 3 for one lane of ``(x0, width, ...)`` in percent, in time order: a bar starts at its time
    or where the bar before it ends, whichever is later; bars that would run past the end are
    pulled back (from the last) so the lane fits in 100 %."""
    out, left = [], 0.0
    for x0, width, *rest in bars:
        x0 = max(x0, left)
        out.append([x0, width, *rest])
        left = x0 + width
    limit = 100.0
    for bar in reversed(out):
        if bar[0] + bar[1] <= limit:
            break
        bar[1] = max(MIN_BAR, min(bar[1], limit - bar[0]))
        bar[0] = max(0.0, limit - bar[1])
        limit = bar[0]
    return [tuple(bar) for bar in out]


def _state(ex: Execution) -> str:
    if ex.end is None:
        return "running"
    if ex.interrupted:
        return "interrupted"
    return "completed" if ex.ok else "failed"


def timeline_html(executions: Sequence[Execution], *, origin: float | None, now: float | None = None,
                  marks: dict[str, CacheMark] | None = None, critical: Sequence[int] = ()) -> str:
    """The executions (and the steps answered without running) as lanes of bars; '' when none."""
    marks = {k: m for k, m in (marks or {}).items() if m.at is not None}
    if not executions and not marks:
        return ""
    base = origin if origin is not None else min([e.start for e in executions] + [m.at or 0 for m in marks.values()])
    items: list[tuple[float, float, Execution | CacheMark]] = []
    for ex in executions:
        end = ex.end if ex.end is not None else (now if now is not None else ex.start)
        items.append((max(0.0, ex.start - base), max(0.0, end - base), ex))
    items += [(max(0.0, (m.at or base) - base),) * 2 + (m,) for m in marks.values()]
    # the scale starts at the first start, not at the run's first event: a run of millisecond steps
    # after a few milliseconds of setup fills the width instead of a strip at its right end
    first = min(start for start, _, _ in items)
    span = max([end - first for _, end, _ in items] + [1e-6])
    scaled = [(start - first, end - first, item) for start, end, item in items]
    cached = f", {len(marks)} answered without running ({CACHED_MARK})" if marks else ""
    if len(items) > MAX_BARS:
        body = _summary(scaled, span)
        caption = (f"{len(executions):,} executions{cached}, {format_duration(span)}: too many to draw one by one, "
                   f"so the run's time is cut in {BUCKETS} slices, each coloured by the worst status in it "
                   f"(side by side slices alike are one bar; a bar's title lists its steps)")
        scale = "summary"
    else:
        lanes = lanes_of([(s, e) for s, e, _ in items])
        count = max(lanes) + 1
        keep = set(critical) if len(set(critical)) < len(executions) else set()
        placed: list[list[tuple[float, float, float, float, Execution | CacheMark]]] = [[] for _ in range(count)]
        for lane, (start, end, item) in sorted(zip(lanes, items), key=lambda p: p[1][0]):
            placed[lane].append(((start - first) / span * 100, max((end - start) / span * 100, MIN_BAR), start, end,
                                 item))
        rows = []
        for bars in placed:
            parts, left = [], 0.0
            for x0, width, start, end, item in fit(bars):
                parts.append(_bar(item, start, end, base, x0 - left, width, keep))
                left = x0 + width
            rows.append(f'<div class="pb-lane" style="{_LANE}">{"".join(parts)}</div>')
        body = _markers(scaled, span) + "".join(rows) + _axis(span)
        caption = f"{plural(len(executions), 'execution')} in {plural(count, 'lane')}{cached}, {format_duration(span)}"
        if first > 0:
            caption += f" from the first start (+{format_duration(first)}); the axis counts from there"
        scale = "linear"
    return (f'<div class="planbook-timeline" data-scale="{scale}" style="max-width:760px">'
            f'<div style="{DIM};font-size:11px">{esc(caption)}</div>{body}</div>')


def _bar(item: Execution | CacheMark, start: float, end: float, base: float, margin: float, width: float,
         critical: set[int]) -> str:
    place = f"margin-left:{_pct(margin)}%;width:{_pct(width)}%"
    if isinstance(item, CacheMark):
        title = f"{item.step} {CACHED_MARK} {cached_text(item, base)}"
        return (f'<div class="pb-bar pb-bar-cached" data-step="{esc(item.step)}" title="{esc(title)}" '
                f'style="{_BAR};{place};{fill(FILLS["cached"])}">{CACHED_MARK} {esc(item.step)}</div>')
    ex = item
    state = _state(ex)
    name = f"{ex.step} ↻{ex.attempt}" if ex.attempt > 1 else ex.step
    where = f", {ex.worker}" if ex.worker else ""
    on_path = ex.execution in critical
    title = (f"#{ex.execution} step {ex.step}, attempt {ex.attempt}, revision {ex.revision}{where}: "
             f"+{format_duration(start)} → +{format_duration(end)} ({format_duration(end - start)}, {state})"
             + (" · critical path" if on_path else ""))
    return (f'<div class="pb-bar pb-{state}{" pb-critical" if on_path else ""}" data-step="{esc(ex.step)}" '
            f'title="{esc(title)}" style="{_BAR};{place};{fill(FILLS[state])}{_CRITICAL if on_path else ""}">'
            f'{esc(name)} {format_duration(end - start)}</div>')


def _markers(items: list[tuple[float, float, Execution | CacheMark]], span: float) -> str:
    """Rule 6: a ``revision N`` marker where revision N's first execution started."""
    starts: dict[int, float] = {}
    for start, _, ex in items:
        if isinstance(ex, Execution) and ex.revision > 1 and start < starts.get(ex.revision, math.inf):
            starts[ex.revision] = start
    if not starts:
        return ""
    width = 11.0  # percent a marker's label takes ("revision 12")
    spans = [(starts[r] / span * 100, starts[r] / span * 100 + width) for r in sorted(starts)]
    lanes = lanes_of(spans)
    rows: list[list[str]] = [[] for _ in range(max(lanes) + 1)]
    ends = [0.0] * len(rows)
    for lane, revision, (x0, _) in zip(lanes, sorted(starts), spans):
        x0 = min(max(x0, ends[lane]), 100 - width)
        rows[lane].append(f'<div class="pb-replan" title="revision {revision} starts here (a replan)" '
                          f'style="display:inline-block;margin-left:{_pct(x0 - ends[lane])}%;width:{_pct(width)}%;'
                          f'border-left:2px dashed #c77700;padding-left:2px">revision {revision}</div>')
        ends[lane] = x0 + width
    return "".join(f'<div style="{_LANE}">{"".join(r)}</div>' for r in rows)


def tick_label(t: float, step: float) -> str:
    """A tick's label: :func:`format_duration`'s, with more decimals when the ticks' spacing needs them
    (0.05 ms apart: ``0.05 ms`` and ``0.10 ms``, not two ticks both reading ``0.1 ms``)."""
    if t == 0:
        return "0"
    if t < 1:
        ms = step * 1000
        return f"{t * 1000:.{max(1, math.ceil(-math.log10(ms) - 1e-9)) if ms < 1 else 1}f} ms"
    return f"{t:.{max(2, math.ceil(-math.log10(step) - 1e-9)) if step < 1 else 2}f} s"


def _axis(span: float) -> str:
    ticks = linear_ticks(span)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else span
    parts = []
    for i, t in enumerate(ticks):
        nxt = ticks[i + 1] if i + 1 < len(ticks) else span
        width = (nxt - t) / span * 100
        if width < 6:
            continue
        label = tick_label(t, step)
        parts.append(f'<div class="pb-tick" style="display:inline-block;width:{_pct(width)}%;border-left:1px solid;'
                     f'padding-left:2px">{label}</div>')
    return f'<div class="pb-axis" style="{_LANE};{DIM}">{"".join(parts)}</div>'


def _summary(items: list[tuple[float, float, Execution | CacheMark]], span: float) -> str:
    """Rule 8: :data:`BUCKETS` equal slices of time, each coloured by the worst status in it."""
    rank = {state: i for i, state in enumerate(_WORST)}
    count = [0] * BUCKETS
    worst = [len(_WORST)] * BUCKETS
    first: list[str | None] = [None] * BUCKETS
    last: list[str] = [""] * BUCKETS
    scale, top = BUCKETS / span, BUCKETS - 1
    for start, end, item in items:
        r = rank["cached"] if isinstance(item, CacheMark) else rank[_state(item)]
        step = item.step
        k0, k1 = int(start * scale), int(end * scale)
        for k in range(k0 if k0 < top else top, (k1 if k1 < top else top) + 1):
            count[k] += 1
            if r < worst[k]:
                worst[k] = r
            if first[k] is None:
                first[k] = step
            last[k] = step
    parts: list[str] = []
    gap = 0
    k = 0
    while k < BUCKETS:
        if not count[k]:
            gap, k = gap + 1, k + 1
            continue
        # slices alike side by side are one bar (up to a tenth of the run), with their counts summed
        end = k + 1
        while end < BUCKETS and end - k < BUCKETS // 10 and count[end] and worst[end] == worst[k]:
            end += 1
        state, n = _WORST[worst[k]], sum(count[k:end])
        title = (f"{n} execution{'s' if n > 1 else ''}, steps {first[k]}..{last[end - 1]}, "
                 f"+{format_duration(k * span / BUCKETS)} → +{format_duration(end * span / BUCKETS)}"
                 + (f", worst: {state}" if state != "completed" else ""))
        margin = f"margin-left:{gap}%;" if gap else ""
        parts.append(f'<div class="pb-bar pb-{state}" title="{esc(title)}" style="display:inline-block;{margin}'
                     f'width:{end - k}%;height:16px;background-color:{FILLS[state]}"></div>')
        gap, k = 0, end
    return f'<div class="pb-lane" style="{_LANE}">{"".join(parts)}</div>{_axis(span)}'


# ------------------------------------------------------------------ the graph
def levels_of(plan: Plan) -> list[int]:
    """Each step's dependency level (0: it needs nothing; else one more than its deepest need).
    Plan order is a topological order (needs come first)."""
    index = {s.id: i for i, s in enumerate(plan.steps)}
    level = [0] * len(plan.steps)
    for i, step in enumerate(plan.steps):
        for need in step.needs:
            j = index.get(need)
            if j is not None and j < i:
                level[i] = max(level[i], level[j] + 1)
    return level


_NODE = "display:inline-block;margin:1px 4px 1px 0;padding:0 6px;border-radius:3px"


def graph_html(plan: Plan, *, marks: dict[str, CacheMark] | None = None, gate: RunSecrets | None = None) -> str:
    """The plan's steps by dependency level, each a status badge (see the module docstring); a
    badge's title is its task or call, through the run's ``gate``."""
    if not plan.steps:
        return ""
    gate = gate_of(gate)
    marks = marks or {}
    levels = levels_of(plan)
    if len(plan.steps) > MAX_NODES:
        return _graph_summary(plan, levels)
    by_level: dict[int, list[str]] = {}
    for step, level in zip(plan.steps, levels):
        status = step.status.value
        mark = marks.get(step.id)
        title = f"{step.id} ({status}{', ' + mark.kind if mark else ''}): {gate.text(step.task) or shown_call(step, gate)}"
        waits = step.mark is StepMark.waiting and step.status is Status.not_started
        color = FILLS["cached"] if mark else FILLS["waiting"] if waits else FILLS.get(status, FILLS["not_started"])
        needs = f" · needs {esc(', '.join(step.needs))}" if step.needs else ""
        by_level.setdefault(level, []).append(
            f'<li class="pb-node planbook-{status}" data-step="{esc(step.id)}" title="{esc(title)}" '
            f'style="{_NODE};{fill(color)}">{"[?]" if waits else esc(STATUS_MARKS[step.status])} {esc(step.id)}'
            f'{" " + CACHED_MARK if mark else ""}{needs}</li>')
    rows = "".join(f'<div class="pb-level"><span style="{DIM}">level {level + 1}</span>'
                   f'<ul style="margin:0 0 2px 0;padding:0;list-style:none">{"".join(nodes)}</ul></div>'
                   for level, nodes in sorted(by_level.items()))
    return f'<div class="planbook-graph">{rows}</div>'


def _graph_summary(plan: Plan, levels: list[int]) -> str:
    """More than :data:`MAX_NODES` steps: one line per run of levels alike (as many steps, of the
    same statuses), saying how many steps of each status and naming the first and last."""
    ids: list[list[str]] = [[] for _ in range(max(levels) + 1)]
    statuses: list[list[str]] = [[] for _ in ids]
    for step, level in zip(plan.steps, levels):
        ids[level].append(step.id)
        statuses[level].append(step.status.value)
    groups: list[tuple[int, int]] = []  # (first level, last level)
    shape: tuple[int, frozenset[str]] | None = None
    for level in range(len(ids)):
        now = (len(ids[level]), frozenset(statuses[level]))
        if groups and now == shape:
            groups[-1] = (groups[-1][0], level)
        else:
            groups.append((level, level))
        shape = now
    lines = []
    for first, last in groups[:MAX_LEVEL_LINES]:
        names = [sid for level in range(first, last + 1) for sid in ids[level]]
        total = Counter(status for level in range(first, last + 1) for status in statuses[level])
        where = f"level {first + 1}" if first == last else f"levels {first + 1}–{last + 1}"
        size = len(ids[first])
        each = f"{size} step{'s' if size > 1 else ''}" + (" each" if first != last else "")
        how = ", ".join(f"{n:,} {status.replace('_', ' ')}" for status, n in sorted(total.items()))
        named = ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]} … {names[-1]}"
        lines.append(f"<li>{where}: {each} ({how}): {esc(named)}</li>")
    if len(groups) > MAX_LEVEL_LINES:
        lines.append(f"<li>… {len(groups) - MAX_LEVEL_LINES:,} more runs of levels</li>")
    note = (f"{len(plan.steps):,} steps in {len(ids):,} dependency levels: too many to draw as badges "
            f"(more than {MAX_NODES}), so each line is a run of levels alike; result.plan.step(ID).needs "
            f"names a step's needs.")
    return (f'<div class="planbook-graph planbook-graph-summary"><div style="{DIM};font-size:11px">{esc(note)}</div>'
            f'<ul style="margin:2px 0;padding-left:20px">{"".join(lines)}</ul></div>')
