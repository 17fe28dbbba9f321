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
from ..data.models import Event, PlanDiff, RunResult, Status, Step
from ..data.stepmark import CUT
from ..data.timeline import Execution
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
from .panes import (
    PANE_CAP,
    PaneBudget,
    entry_of,
    execution_pane,
    execution_status,
    few_removed,
    history_by_step,
    last_executions,
    pane,
)
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
#: panes of executions a step's own pane does not show (an earlier attempt, a step a replan removed)
#: a record keeps at most, failed ones first, and the bytes of all of them
RECORD_EXECUTION_PANES = 12
RECORD_EXECUTION_TOTAL = 30_000

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
    status = data.get("status_text") or str(data.get("status") or step.status.value).replace("_", " ")
    rows = [("status", f"{status}, attempt {data['attempts']}" if data["attempts"] else status),
            ("call", f"<code>{esc(data['call'])}</code>")]
    if data.get("execution") is not None:
        rows.insert(0, ("execution", esc(f"#{data['execution']} of step {data['step']}, revision {data['revision']}"
                                        + (f", {data['worker']}" if data.get("worker") else ""))))
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
    # an execution's pane (an earlier attempt, a removed step) is told apart from a step's own
    which = (f' planbook-execution-pane" data-execution="{data["execution"]}' if data.get("execution") is not None
             else "")
    return (f'<div class="planbook-pane-body{which}" data-pane="{esc(step.id)}" style="{_PANE}">'
            f'{"".join(parts)}</div>')


def own_execution(step: Step, latest: dict[str, Execution], marks: dict[str, CacheMark]) -> Execution | None:
    """The execution a step's pane shows the times of: its latest, when that is this step's call (not one
    answered from the cache or a resume, and not a step that has not started)."""
    if step.id in marks or step.started_at is None:
        return None
    return latest.get(step.id)


class OtherPanes:
    """The panes of the executions a step's row does not open: a step a replan removed (listed under
    its revision, below the steps) and the earlier executions of a step (listed under the timeline's
    bars), failed ones first, within :data:`RECORD_EXECUTION_PANES` and :data:`RECORD_EXECUTION_TOTAL`."""

    def __init__(self, state: ViewState, results: dict[str, Any], marks: dict[str, CacheMark]) -> None:
        self.state, self.results = state, results
        executions = state.timeline
        current = {s.id for s in state.plan.steps}
        latest = last_executions(executions)
        self.index = {ex.execution: i for i, ex in enumerate(executions)}
        self.entries = history_by_step(state.history)
        self.budget = PaneBudget(RECORD_EXECUTION_TOTAL, RECORD_PANE_CAP)
        #: the removed steps of each revision: (diff, [(step id, its last execution or None)], how many more
        #: never ran than are listed)
        self.removed: list[tuple[PlanDiff, list[tuple[str, Execution | None]], int]] = []
        shown_removed: set[int] = set()
        for diff in state.revisions:
            if diff.rejected or not diff.removed:
                continue
            before = [ex for ex in executions if ex.revision < diff.to_revision]
            last = last_executions(before)
            listed, more = few_removed(diff.removed, last)
            group = [(sid, last.get(sid)) for sid in listed]
            shown_removed.update(ex.execution for _, ex in group if ex is not None)
            self.removed.append((diff, group, more))
        self.earlier = [ex for ex in executions if ex.end is not None and ex.execution not in shown_removed
                        and not (ex.step in current and latest.get(ex.step) is ex)]
        worth = sorted(self.earlier, key=lambda ex: (ex.ok is not False, ex.start))  # failed first
        self.kept = {ex.execution for ex in worth[:RECORD_EXECUTION_PANES]}
        self.kept.update(shown_removed)  # few: a replan removes what it replaces

    def pane_html(self, ex: Execution) -> str:
        state = self.state
        entry = entry_of(state.timeline, self.index[ex.execution], self.entries)
        plan_step = next((s for s in state.plan.steps if s.id == ex.step), None)
        data = execution_pane(ex, entry, plan_step, self.results, origin=state.origin, budget=self.budget,
                              gate=state.gate)
        shown = entry or plan_step or Step(id=ex.step)
        return pane_html(data, shown, None, state.origin)

    def removed_html(self) -> str:
        """A group for each revision that removed steps: each removed step as it last ran, its row opening
        that execution's pane (a step that never ran: its line of the revision's diff)."""
        gate = self.state.gate
        groups = []
        for diff, group, more in self.removed:
            rows = []
            for sid, ex in group:
                entry = None if ex is None else entry_of(self.state.timeline, self.index[ex.execution], self.entries)
                if ex is None or entry is None:
                    what = gate.line(diff.steps.get(sid, "")) or sid
                    rows.append(f'<li class="planbook-removed-step" data-step="{esc(sid)}">{esc(sid)}: {esc(what)} '
                                f'<span style="{DIM}">(never ran)</span></li>')
                    continue
                rows.append(steps_table_html([entry], panes={sid: self.pane_html(ex)}, gate=gate))
            after = f" (after: {gate.line(diff.reason)})" if diff.reason else ""
            if more:
                rows.append(f'<li class="planbook-removed-more" style="{DIM}">and {more:,} more that never ran (the '
                            'revision history lists them)</li>')
            lines = "".join(r for r in rows if r.startswith("<li"))
            tables = "".join(r for r in rows if not r.startswith("<li"))
            groups.append(f'<div class="planbook-removed-steps" data-revision="{diff.to_revision}" '
                          f'style="margin-top:4px"><div style="font-weight:600">Removed in revision '
                          f'{diff.to_revision}<span style="font-weight:normal">{esc(after)}</span></div>{tables}'
                          + (f'<ul style="margin:2px 0;padding-left:20px">{lines}</ul>' if lines else "") + "</div>")
        return "".join(groups)

    def earlier_html(self) -> str:
        """The earlier executions of the plan's steps (and of removed steps before their last), each a
        ``<details>`` that opens its pane; those past the cap are counted."""
        if not self.earlier:
            return ""
        origin = self.state.origin
        items = []
        for ex in self.earlier:
            if ex.execution not in self.kept:
                continue
            start = ex.start - origin if origin is not None else 0.0
            head = (f"#{ex.execution} {ex.step}, attempt {ex.attempt}, revision {ex.revision}: "
                    f"{execution_status(ex).replace('_', ' ')}, +{format_duration(start)} "
                    f"({format_duration(ex.duration)})")
            items.append(f'<details class="planbook-execution" data-execution="{ex.execution}" '
                         f'data-step="{esc(ex.step)}"><summary>{esc(head)}</summary>{self.pane_html(ex)}</details>')
        left = len(self.earlier) - len(items)
        more = (f'<div style="{_LABEL}">and {left:,} more earlier executions: result.history holds each '
                f'execution\'s step as it ended</div>') if left > 0 else ""
        return (f'<div class="planbook-executions" style="margin-top:4px"><div style="{_LABEL}">earlier executions '
                f'(a step\'s row opens its latest)</div>{"".join(items)}{more}</div>')


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
    results = {s.id: s.result for s in plan.steps if s.status is _COMPLETED}
    latest = last_executions(state.timeline)
    kept: list[str] = []
    without_pane = 0

    def table(steps: list[Step]) -> str:
        nonlocal kept, without_pane
        kept = panes_for(steps, marks, revised, opened)
        without_pane = sum(1 for s in steps if has_pane(s)) - len(kept)
        if not kept:
            return steps_table_html(steps, marks=marks, opened=opened, gate=gate)
        budget = PaneBudget(RECORD_PANES_TOTAL, RECORD_PANE_CAP)
        wanted = set(kept)
        by_id = {s.id: s for s in steps if s.id in wanted}
        panes = {sid: pane_html(pane(by_id[sid], results, origin=origin, budget=budget, gate=gate,
                                     execution=own_execution(by_id[sid], latest, marks)), by_id[sid],
                                marks.get(sid), origin, step_code_line(by_id[sid], state.run_id, gate, state.store))
                 for sid in kept}
        return steps_table_html(steps, panes=panes, marks=marks, opened=opened, gate=gate)

    cap = RECORD_ROWS if max_rows is None else min(max_rows, RECORD_ROWS)
    rows, shown = windowed(plan.steps, cap, table)
    parts = [header_html(plan, extra=lineage_html(state) + verdict_html(state), marks=marks, gate=gate), rows]
    if len(shown) < len(plan.steps) or without_pane:
        parts.append(left_out_line(len(shown), len(plan.steps), without_pane))
    others = OtherPanes(state, results, marks)
    parts.append(others.removed_html())
    timeline = timeline_html(state.timeline, origin=origin, now=state.now, marks=marks,
                             critical=state.critical_path() if len(state.timeline) <= 200 else ())
    if timeline:
        parts.append(_section("timeline", "Timeline", timeline + others.earlier_html(),
                              "Bars: green completed, red failed, blue running, amber interrupted, purple ⟲ answered "
                              "from the cache or a resume; ↻ a retry; a dashed mark: a replan; underlined orange: "
                              "the critical path. One linear time scale; hover a bar for its times. A step's row "
                              "opens its latest execution; an earlier one (a retry's attempt) is listed under the "
                              "bars, and a step a replan removed under its revision, below the steps."))
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
