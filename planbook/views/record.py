"""The static record of a run that has stopped: what a saved notebook keeps of a live view.

A widget saved in a notebook has no model once its kernel is gone ("Error displaying
widget"), and a stored widget state is blank where JavaScript does not run (nbconvert's
HTML, GitHub, nbviewer). So when a run ends its live view is replaced by this record: the
header and verdict, one row per step, the panes of the steps worth opening (a ``<details>``
from the row's task: call, time, result, printed output, error), the timeline and the graph
(:mod:`.charts`), the decisions people gave and the revision history.

It is HTML that reads wherever a notebook is opened: trusted or not (an untrusted notebook's
sanitizer strips SVG, ``<style>`` and every ``var()`` in a style), in a light or a dark theme,
and with its styles stripped (GitHub): no script, no event handler, no external resource,
short inline styles that use plain colours (see :mod:`.html`). It is also small enough to
commit: a row per step carries no style unless its status needs a look, and only the steps
worth opening keep a pane (:func:`panes_for`); a line says how to see any other step's
(``planbook show RUN_ID --step ID``, ``result.pane("ID")``). A result's own HTML has passed
the gate's sanitiser (:mod:`planbook.outbound.html`, through
:func:`planbook.views.panes.result_html`): what it cannot keep safe is shown as the
result's text, and the pane says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..data.errors import PlanbookError
from ..data.models import Event, RunResult, Status, Step
from ..data.stepmark import CUT
from ..outbound import RunSecrets, bounded, one_line
from .charts import graph_html, timeline_html
from .forkbox import step_code_line
from .html import (
    DIM,
    NO_MATH,
    STOPPED,
    box,
    cached_text,
    esc,
    fg,
    format_duration,
    header_html,
    lineage_html,
    revisions_html,
    steps_table_html,
    verdict_html,
    windowed,
)
from .marks import CacheMark, cache_marks
from .panes import PANE_CAP, PaneBudget, pane
from .publish import ensure_checkpoint
from .state import ViewState
from .state import shown as shown_text

#: rows a record keeps (the live widget's cap on the static copy of a finished run,
#: ``planbook.views.widget.STATIC_ROWS``): a longer plan shows a window of them and says where the rest is
RECORD_ROWS = 1000
#: a run with at most this many steps worth a pane keeps every one
ALL_PANES = 12
#: panes a record keeps at most (the steps worth opening first, then the first and last few)
RECORD_PANES = 12
#: the first and the last steps that keep a pane in a longer run
FEW = 3
#: bytes of one pane in the record, and of all of them (``result.pane(ID)`` shows a pane whole)
RECORD_PANE_CAP = 4_000
RECORD_PANES_TOTAL = 40_000

_LABEL = f"{DIM};font-size:11px;margin-top:4px"
_PRE = "white-space:pre-wrap;margin:2px 0;max-height:320px;overflow:auto"
#: a pane is a box of its own: what a result draws stays inside it (``position:relative`` holds
#: anything positioned within it, ``overflow:hidden`` clips it; not ``contain``, which JupyterLab's
#: sanitizer strips from an untrusted notebook's styles)
_PANE = ("text-align:left;margin:4px 0;padding:2px 8px;border-left:3px solid #888;"
         "position:relative;overflow:hidden")
#: the box of a result's own HTML inside its pane: clipped, scrolled, no taller than a screen's part
RETURNED = "position:relative;overflow:auto;max-height:360px"


def safe_markup(markup: str) -> bool:
    """True when the gate's sanitiser keeps ``markup`` whole (:func:`planbook.outbound.html.sanitize_html`:
    nothing removed, not even a style): no script, event handler, URL or other host's resource."""
    from ..outbound.html import sanitize_html

    kept = sanitize_html(markup)
    return kept is not None and not kept.left_out


def pane_html(data: dict[str, Any], step: Step, mark: CacheMark | None, origin: float | None,
              fork_line: str | None = None) -> str:
    """A step's pane (the JSON the live view draws, see :func:`planbook.views.panes.pane`) as HTML.
    ``fork_line``: the Python that forks the run at this step (:func:`planbook.views.forkbox.step_code_line`)."""
    status = data.get("status_text") or step.status.value.replace("_", " ")
    rows = [("status", f"{status}, attempt {data['attempts']}" if data["attempts"] else status),
            ("call", f"<code>{esc(data['call'])}</code>")]
    if data.get("needs"):
        rows.append(("needs", esc(", ".join(data["needs"]))))
    if data.get("expect"):
        rows.append(("expect", esc(data["expect"])))
    if mark is not None:
        rows.append(("not run", esc(cached_text(mark, origin))))
    elif data.get("start") is not None:
        when = f"started +{format_duration(data['start'])}"
        if data.get("end") is not None:
            when += f", ended +{format_duration(data['end'])} ({format_duration(data['duration'])})"
        rows.append(("time", when))
    if data.get("error"):
        rows.append(("error", esc(data["error"])))
    if data.get("notes") and mark is None:
        rows.append(("notes", esc(data["notes"])))
    parts = [f"<div><b>{label}</b> {value}</div>" for label, value in rows]
    if "result" in data:
        # built by panes.result_html: a value's own HTML has been through the gate's sanitiser, and
        # what it could not keep is shown as text with a line saying so
        result = data["result"].replace('<pre class="pb-text">', f'<pre class="pb-text" style="{_PRE}">')
        parts.append(f'<div style="{_LABEL}">returned</div>'
                     f'<div class="planbook-returned" style="{RETURNED}">{result}</div>')
    if data.get("output"):
        parts.append(f'<div style="{_LABEL}">printed</div><pre style="{_PRE}">{esc(data["output"])}</pre>')
    if data.get("traceback"):
        parts.append(f'<div style="{_LABEL}">traceback</div><pre style="{_PRE}">{esc(data["traceback"])}</pre>')
    if data.get("truncated"):
        parts.append(f'<div style="font-style:italic">{esc(data["truncated"])}</div>')
    if fork_line:
        parts.append(f'<div style="{_LABEL}">fork from here (what if this step had other arguments, or returned '
                     f'something else?)</div><pre class="planbook-fork-code" style="{_PRE}">{esc(fork_line)}</pre>')
    return f'<div class="planbook-pane-body" data-pane="{esc(step.id)}" style="{_PANE}">{"".join(parts)}</div>'


def worth_a_pane(step: Step, marks: dict[str, CacheMark], revised: set[str]) -> bool:
    """A step someone will want to open: it failed or was retried, was skipped, blocked or cut by an
    interrupt, waits (approval), was answered from the cache or a resume, or a replan added or revised it."""
    if step.attempts > 1 or step.id in revised or step.id in marks:
        return True
    status = step.status
    return not (status is _COMPLETED or (status is _WAITING and step.mark not in CUT))


def has_pane(step: Step) -> bool:
    """A step with something to show (a step that never started, and has no note, has none)."""
    return not (step.status is _WAITING and not step.attempts and not step.notes)


_COMPLETED, _WAITING = Status.completed, Status.not_started  # read once (an enum member is a lookup)


def panes_for(steps: Sequence[Step], marks: dict[str, CacheMark], revised: set[str], opened: str = "") -> list[str]:
    """The ids of the steps whose pane the record keeps, in plan order: every one when at most
    :data:`ALL_PANES` have something to show; else the open one, the steps worth opening
    (:func:`worth_a_pane`), then the first and the last :data:`FEW`, :data:`RECORD_PANES` at most."""
    candidates = [s for s in steps if has_pane(s)]
    if len(candidates) <= ALL_PANES:
        return [s.id for s in candidates]
    order = ([s.id for s in candidates if s.id == opened] + [s.id for s in candidates if worth_a_pane(s, marks, revised)]
             + [s.id for s in candidates[:FEW]] + [s.id for s in candidates[-FEW:]])
    chosen = set(list(dict.fromkeys(order))[:RECORD_PANES])
    return [s.id for s in candidates if s.id in chosen]


def record_html(state: ViewState, *, max_rows: int | None = None, kind: str = "result", opened: str = "") -> str:
    """The static record of a stopped run (see the module docstring). ``max_rows``: a window of
    rows (at most :data:`RECORD_ROWS`, also the default: the record is kept in the notebook);
    ``opened``: the step whose pane is open."""
    plan = state.plan
    marks = cache_marks(state.events, plan)
    origin = state.origin
    gate = state.gate  # the run's secrets: every text, call and result below goes through it
    revised = {sid for diff in state.revisions for sid in (*diff.added, *diff.revised)}
    kept: list[str] = []
    without_pane = 0

    def table(steps: list[Step]) -> str:
        nonlocal kept, without_pane
        kept = panes_for(steps, marks, revised, opened)
        without_pane = sum(1 for s in steps if has_pane(s)) - len(kept)
        if not kept:
            return steps_table_html(steps, marks=marks, opened=opened, gate=gate)
        results = {s.id: s.result for s in plan.steps if s.status is _COMPLETED}
        budget = PaneBudget(RECORD_PANES_TOTAL, RECORD_PANE_CAP)
        wanted = set(kept)
        by_id = {s.id: s for s in steps if s.id in wanted}
        panes = {sid: pane_html(pane(by_id[sid], results, origin=origin, budget=budget, gate=gate), by_id[sid],
                                marks.get(sid), origin, step_code_line(by_id[sid], state.run_id, gate, state.store))
                 for sid in kept}
        return steps_table_html(steps, panes=panes, marks=marks, opened=opened, gate=gate)

    cap = RECORD_ROWS if max_rows is None else min(max_rows, RECORD_ROWS)
    rows, shown = windowed(plan.steps, cap, table)
    parts = [header_html(plan, extra=lineage_html(state) + verdict_html(state), marks=marks, gate=gate), rows]
    if len(shown) < len(plan.steps) or without_pane:
        parts.append(left_out_line(len(shown), len(plan.steps), without_pane))
    timeline = timeline_html(state.timeline, origin=origin, now=state.now, marks=marks,
                             critical=state.critical_path() if len(state.timeline) <= 200 else ())
    if timeline:
        parts.append(_section("timeline", "Timeline", timeline,
                              "Bars: green completed, red failed, blue running, amber interrupted, purple ⟲ answered "
                              "from the cache or a resume; ↻ a retry; a dashed mark: a replan; underlined orange: "
                              "the critical path. One linear time scale; hover a bar for its times."))
    graph = graph_html(plan, marks=marks, gate=gate)
    if graph:
        parts.append(_section("graph", "Graph", graph, "Steps by dependency level: a step comes one level after the "
                                                       "last step it needs; colours are statuses."))
    parts.append(decisions_html(state.events, gate))
    parts.append(revisions_html(state.revisions, gate))
    return box(kind, "".join(parts)).replace(f'class="planbook-{kind} {NO_MATH}"',
                                             f'class="planbook-{kind} planbook-record {NO_MATH}"', 1)


def record_bundle(state: ViewState, *, opened: str = "") -> dict[str, str]:
    """What a live view's display becomes when its run stops: the run as text and the record as
    HTML. No ``text/markdown``: every front end that reads the notebook (Lab, Notebook 7, GitHub,
    nbviewer, nbconvert, VS Code) shows the HTML, and a third copy of every step made a record of
    1,000 steps 28 kB and ~14 ms dearer for nobody."""
    from .text import SHOWN_STEPS, format_state

    ensure_checkpoint()
    return {"text/plain": format_state(state, max_steps=SHOWN_STEPS), "text/html": record_html(state, opened=opened)}


def left_out_line(shown: int, total: int, without_pane: int = 0) -> str:
    """What a record says about the rows and panes it does not keep, and how to see them."""
    kept = f"This record keeps {shown:,} of {total:,} steps" if shown < total else "This record"
    if without_pane:
        kept += (f"{',' if shown < total else ''} keeps the panes of the steps worth opening (failed, interrupted, "
                 f"waiting, cached or resumed, replanned, the first and the last) and not of {without_pane:,} others")
    return (f'<div class="planbook-rows-left-out" style="{_LABEL}">{kept}, so a saved notebook stays small. '
            f'To see any step: <code>result.pane(&#x27;ID&#x27;)</code> in the notebook, '
            f'<code>planbook show RUN_ID --step ID</code> for a stored run; print(result) lists every step.</div>')


#: how a decision reads (``step.decided``'s ``decision``, ``run.steered``'s ``action``)
DONE = {"approve": "approved", "skip": "skipped", "edit": "edited", "stop": "stopped", "refused": "refused",
        "pause": "paused", "resume": "continued", "retry": "retried", "voided": "voided"}


def decisions(events: Sequence[Event], gate: RunSecrets) -> list[tuple[str, str, str, str]]:
    """The decisions people (or a timeout) gave, in order: ``(what, step, who, reason)``, the reason
    through the run's ``gate`` (it may quote an argument or a password typed in)."""
    out = []
    for event in events:
        if event.kind == "step.decided":
            out.append((str(event.data.get("decision", "")), event.step or "", str(event.data.get("who", "")),
                        gate.line(str(event.data.get("reason", "") or ""))))
        elif event.kind == "run.steered":  # a refused one says why (a stop that came too late)
            out.append((str(event.data.get("action", "")), "", str(event.data.get("who", "")),
                        gate.line(str(event.data.get("reason", "") or ""))))
    return out


def decision_lines(events: Sequence[Event], gate: RunSecrets) -> list[tuple[str, str]]:
    """``[(what, line)]``: each decision in words, ``fetch: approved by you (view)`` (the record
    and the live view list them so)."""
    lines = []
    for what, step, who, reason in decisions(events, gate):
        by = "the approve timeout" if who == "timeout" else f"you ({who})" if who else "you"
        lines.append((what, f"{step + ': ' if step else 'run: '}{DONE.get(what, what)} by {by}" + (f" — {reason}" if reason else "")))
    return lines


def decisions_html(events: Sequence[Event], gate: RunSecrets) -> str:
    """The decisions as a list of their own (not among the revisions): ``fetch: approved by you (view)``."""
    given = decision_lines(events, gate)
    if not given:
        return ""
    items = [f'<li class="planbook-decision planbook-decision-{esc(what)}">{esc(text)}</li>' for what, text in given]
    return (f'<div class="planbook-decisions" style="margin-top:6px"><div style="font-weight:600">Decisions</div>'
            f'<ul style="margin:2px 0 6px 0;padding-left:20px">{"".join(items)}</ul></div>')


def _section(name: str, title: str, body: str, legend: str) -> str:
    return (f'<details class="planbook-{name}-box" style="margin-top:4px"><summary>{title}</summary>'
            f'<div style="overflow:auto;max-height:440px">{body}</div><div style="{_LABEL}">{esc(legend)}</div></details>')


# ------------------------------------------------------------------ one step's pane, on demand
class StepPane:
    """One step's whole pane, to display (``result.pane("ID")``): HTML for a notebook, text for
    ``print``; built through the run's gate."""

    def __init__(self, html: str, text: str) -> None:
        self.html, self.text = html, text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        ensure_checkpoint()
        return {"text/plain": self.text, "text/html": self.html}

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def step_pane(result: RunResult, step_id: str) -> StepPane:
    """Step ``step_id``'s pane of ``result`` (any step, kept in the record or not), through the run's gate."""
    state = ViewState.of_result(result)
    step = next((s for s in state.plan.steps if s.id == step_id), None)
    if step is None:
        ids = ", ".join(s.id for s in state.plan.steps[:20]) + (" …" if len(state.plan.steps) > 20 else "")
        raise PlanbookError(f"the run has no step {step_id!r}; its steps: {ids}")
    marks = cache_marks(state.events, state.plan)
    results = {s.id: s.result for s in state.plan.steps if s.status is Status.completed}
    data = pane(step, results, origin=state.origin, budget=PaneBudget(), gate=state.gate)
    mark = marks.get(step.id)
    head = f'<div style="font-weight:600">Step {esc(step.id)}: {esc(shown_text(step.task, state.gate.text) or data["call"])}</div>'
    html = f'<div class="planbook-step-pane {NO_MATH}" style="{fg("#888")}">{head}{pane_html(data, step, mark, state.origin)}</div>'
    return StepPane(html, pane_text(data, step, mark, state))


def pane_text(data: dict[str, Any], step: Step, mark: CacheMark | None, state: ViewState) -> str:
    """A step's pane as text (``planbook show RUN_ID --step ID``, ``print(result.pane(ID))``)."""
    gate = state.gate
    status = data.get("status_text") or step.status.value.replace("_", " ")
    lines = [f"Step {step.id}: {one_line(shown_text(step.task, gate.text)) or data['call']}",
             f"  status: {status}" + (f", attempt {data['attempts']}" if data["attempts"] else ""),
             f"  call: {data['call']}"]
    if data.get("needs"):
        lines.append(f"  needs: {', '.join(data['needs'])}")
    if mark is not None:
        lines.append(f"  not run: {cached_text(mark, state.origin)}")
    elif data.get("start") is not None:
        when = f"started +{format_duration(data['start'])}"
        if data.get("end") is not None:
            when += f", ended +{format_duration(data['end'])} ({format_duration(data['duration'])})"
        lines.append(f"  time: {when}")
    for key in ("error", "notes"):
        if data.get(key):
            lines.append(f"  {key}: {data[key]}")
    if "result" in data:
        value = gate.result(step)
        lines.append("  returned: " + bounded(gate.text(value if isinstance(value, str) else repr(value)), PANE_CAP))
    if data.get("output"):
        lines.append("  printed:\n" + "\n".join("    " + line for line in data["output"].splitlines()))
    if data.get("traceback"):
        lines.append("  traceback:\n" + "\n".join("    " + line for line in data["traceback"].splitlines()))
    if data.get("truncated"):
        lines.append(f"  ({data['truncated']})")
    return "\n".join(lines)


STOPPED["record"] = record_html
