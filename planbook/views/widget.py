"""The live plan view: one anywidget component, drawn by ``static/planview.js`` in the browser.

The kernel sends the view model as JSON in a few traits, and only what changed:

- ``head``: title, goal, counts, verdict, budgets, elapsed, the critical path (small);
- ``rows``: one ``[id, executor, task, needs]`` per step (sent again only when the plan
  changes: a replan);
- ``statuses``: one letter per row (``n r c f s b``), so a status change costs a byte;
- ``batch``: the step panes and timeline bars that changed since the previous update,
  numbered (``seq``); the browser keeps them, so a click on a row opens its pane at
  once, during the run, without asking the kernel (which is busy running the cell). A
  browser that missed a batch asks for everything again (answered when the kernel is
  free); ``full`` batches replace what it kept. Panes are built only for the steps near
  the running ones (:data:`EAGER_ROWS`), steps with an error, the open one and those already
  sent: a thousand fast steps do not cost a thousand panes. Any other step's pane is
  built when the browser asks for it (a click; answered once the kernel is free) or
  :meth:`PlanView.pane` is called: the plan keeps each step's result, so nothing is lost;
- ``revisions``: the diffs; ``selected``: the step whose pane is open (Python can set it).

Updates come from :class:`~planbook.views.live.LiveView` (throttled, on the kernel's main
thread) and are batched with ``hold_sync``. Displayed, the view also carries the plan as
``text/plain`` and the static HTML, which :class:`LiveView` replaces with the final state
when the run returns, so a saved notebook shows how the run ended; the widget is closed once a
page says its notebook shows the record (:meth:`PlanView.leave`: a page reloaded during the run,
which that update missed, asks for the record until then; at most :data:`LEFT_OPEN` stay open),
and a view nobody holds is garbage (the widget holds it weakly).
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from ..data.models import Status, Step
from ..data.stepmark import StepMark
from ..data.timeline import Execution
from ..outbound import TEXT_LIMIT
from .forkbox import ERROR_KEY as FORK_ERROR
from .forkbox import editor_args, fork_from_view, forkable, headline, store_text
from .html import DIM, NO_MATH, cached_text, esc, state_html
from .marks import CacheMark, MarkBuilder, cached_count_text
from .panes import CompletedResults, LiveOtherPanes, PaneBudget, call_line, pane, since
from .publish import display, ensure_checkpoint
from .record import decision_lines
from .state import ELAPSED_MEANS, LIVE_ROWS, ViewState, budget_line, shown, verdict_line, window_of_codes
from .steered import SteeredRun
from .text import SHOWN_STEPS, format_state, progress_line, shown_diff, state_markdown

# how long the widget lives (kept open for a reloaded page, closed when garbage)
from .widgetlife import Shown, WeakHandler, close_unshown, close_widget, hold_for_cell, leave_open

STATIC = Path(__file__).with_name("static")

#: rows of the static copy of a finished run (longer plans: a window, the text lists every step)
STATIC_ROWS = 1000

#: rows around the running steps whose panes are sent as they change (others: on demand)
EAGER_ROWS = 20

#: one letter per status in ``statuses``
STATUS_CODES = {Status.not_started: "n", Status.in_progress: "r", Status.completed: "c", Status.failed: "f",
                Status.skipped: "s", Status.blocked: "b"}
#: the letter of a step not started that waits for a person (``Step.mark == StepMark.waiting``): its row,
#: pane and graph node say so (``[?]``), not "not started"
WAITING_CODE = "w"


def status_code(step: Step) -> str:
    """A step's letter in ``statuses``: its status's, or :data:`WAITING_CODE` for a step waiting for a person."""
    if step.mark is StepMark.waiting and step.status is Status.not_started:
        return WAITING_CODE
    return STATUS_CODES[step.status]


def round4(x: float) -> float:
    """``round(x, 4)``, the same float, in a quarter of the time for the common case (a bar's
    times: two a step). ``round(x, 4)`` is the float nearest ``n / 10⁴``, ``n`` the integer
    nearest ``x·10⁴``; away from a tie (and from zero, whose sign it keeps) ``x * 10000.0`` is
    close enough to ``x·10⁴`` that ``round`` of it is that ``n``, and ``n / 10000.0`` is a
    correctly rounded division. Near a tie, zero, or past 10⁷ s: ``round(x, 4)`` itself."""
    y = x * 10000.0
    if -1e11 < y < 1e11:
        n = round(y)
        if n and -0.4999 < y - n < 0.4999:
            return n / 10000.0
    return round(x, 4)


def row_of(step: Step, hide: Callable[[str], str], results: Mapping[str, Any] | None = None) -> list[Any]:
    """A step's row: ``hide`` is the run's gate (its secrets and secret shapes show as ***). ``results``:
    given for a step waiting for a person, whose row shows its call with the values it will be passed
    (as its pane does), not its ``$id`` references."""
    executor = f"[{step.agent.upper()}]" if step.agent else (step.tool or "")
    if results is not None and not step.task and step.tool:
        return [step.id, executor, shown(call_line(step, results, hide), hide), list(step.needs)]
    return [step.id, executor, shown(step.task or step.describe(), hide), list(step.needs)]


#: the traits this module fills only with JSON it builds (str, numbers, None, lists, dicts):
#: they are sent without ipywidgets' search of the whole state for binary buffers, which
#: costs more than the update itself for a long plan's rows and bars. ``waiting`` and
#: ``editable`` hold steps' arguments (any value a tool takes) and take the general path.
JSON_TRAITS = frozenset({"head", "rows", "statuses", "batch", "revisions", "selected", "uid", "controls", "ended",
                         "decisions", "fork", "replay", "saved"})


class PlanWidget(anywidget.AnyWidget):
    """The anywidget model: the synced traits, drawn by ``static/planview.js``."""

    def send_state(self, key: Any = None) -> None:
        """Send these traits (all when None) as ipywidgets does, but without looking for binary
        buffers in the traits of :data:`JSON_TRAITS` (there are none: see there)."""
        keys = [key] if isinstance(key, str) else key
        if keys is None or not JSON_TRAITS.issuperset(keys):
            super().send_state(key)
            return
        state = {k: getattr(self, k) for k in keys}  # their to_json is ipywidgets' default: the value itself
        if not state:
            return
        lock = self._property_lock
        if lock:  # ipywidgets keeps the values it is sending there, to know an echo from the browser
            for name, value in state.items():
                if name in lock:
                    lock[name] = value
        self._send({"method": "update", "state": state, "buffer_paths": []}, buffers=[])

    #: the module's text, not its path: given a path, anywidget watches the file and connects every
    #: instance ever made to the watcher's class-level signal, which ``close()`` does not undo (each
    #: widget, and through its callbacks its view and plan, then lives as long as the kernel)
    _esm = (STATIC / "planview.js").read_text(encoding="utf-8")

    head = t.Dict().tag(sync=True)
    rows: t.List[Any] = t.List().tag(sync=True)
    statuses = t.Unicode("").tag(sync=True)
    batch = t.Dict().tag(sync=True)
    revisions: t.List[Any] = t.List().tag(sync=True)
    selected = t.Unicode("").tag(sync=True)
    #: names this model's store of panes in the browser (set at creation, so it is there at once)
    uid = t.Unicode("").tag(sync=True)
    #: a background run: Pause / Continue / Stop, and Approve / Skip / Edit on waiting steps
    controls = t.Bool(False).tag(sync=True)
    #: the steps waiting for a decision, with their arguments (what the editor starts from)
    waiting = t.Dict().tag(sync=True)
    #: a refused decision's message, by step id ("" for the run's own buttons), shown inline
    errors = t.Dict().tag(sync=True)
    #: a paused run: the arguments of steps that have not started (they can be edited), and the
    #: failed or skipped steps (they can be retried)
    editable = t.Dict().tag(sync=True)
    retryable: t.List[Any] = t.List().tag(sync=True)
    #: the decisions people gave, in order: ``[what, line]`` (the record's words: record.decision_lines)
    decisions: t.List[Any] = t.List().tag(sync=True)
    #: the run's display is its record now (:meth:`PlanView.leave`): a page that still shows the
    #: widget (reloaded during the run, so the record's display update missed it) asks for the record
    #: and puts it in its notebook in the widget's place
    ended = t.Bool(False).tag(sync=True)
    #: Fork from here is offered (a background run's view): ``{"run": run id, "store": the store as the
    #: code line names it}`` ({} when not); a finished step's pane then carries its ``args`` as shown
    fork = t.Dict().tag(sync=True)
    #: a replay (:mod:`planbook.views.replay`): ``{"line": what it says, "next": a Next button is offered}``
    replay = t.Dict().tag(sync=True)
    #: what a saved notebook keeps in the widget's place ({}: nothing): the run's record, which the page
    #: writes into the notebook while it saves and then puts the widget back (``static/planview.js``)
    saved = t.Dict().tag(sync=True)
    #: the run's store as a code line names it ("" for none or memory): a page whose kernel went during
    #: the run says ``%run_plan NAME --resume`` continues it, or that it was lost (``static/planview.js``)
    kept = t.Unicode("").tag(sync=True)
    #: its view, held weakly (a view nobody holds is garbage)
    view_ref: Callable[[], Any] | None = None

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Displayed itself (``display(planbook.PlanView(result).widget)``): its view learns a display
        shows it, so it stays open when the view is gone, and a finished run's record goes along."""
        view = self.view_ref() if self.view_ref is not None else None
        if isinstance(view, PlanView):
            view.displayed()
        return super()._repr_mimebundle_(**kwargs)


class PlanView:
    """A live view of a :class:`Plan`, a :class:`RunResult` or a :class:`Runner`.

    ``view.render(state)`` redraws it; ``view.open(step_id)`` opens a step's pane (what a
    click on its row does in the browser); ``view.widget`` is the anywidget. Displayed, it
    shows the widget, with the state as ``text/plain`` and static HTML for nbval and GitHub.
    ``note``: a line above that static HTML.
    """

    def __init__(self, source: Any, *, note: str = "", controls: bool = False) -> None:
        ensure_checkpoint()  # before the widget's comm opens: its first state leaves by the kernel's session
        uid = secrets.token_hex(16)  # the model's id too: the browser finds the outputs showing it by it
        self.widget = PlanWidget(uid=uid, model_id=uid, controls=controls)
        #: the handle of the background run the buttons steer (planbook.views.steer)
        self.handle: SteeredRun | None = None
        self._control: Callable[[dict[str, Any]], str] | None = None
        self._decisions: list[list[str]] = []
        self._events_read = 0
        self.note = note
        self.renders = 0
        #: every pane built (what a full batch re-sends), by step id
        self.panes: dict[str, dict[str, Any]] = {}
        self._built: dict[str, tuple[Any, ...]] = {}  # step id -> the pane key it was built for
        self._sent: dict[str, tuple[Any, ...]] = {}  # step id -> the pane key the browser has
        self._budget = PaneBudget()
        self._bars: dict[int, list[Any]] = {}
        self._bars_final = 0  # leading executions that have ended and were sent
        self._latest: dict[str, Execution] = {}  # each step's latest execution (its pane's times)
        self._latest_index: dict[str, int] = {}  # ... and its place in the timeline
        #: the panes of executions a step's own pane does not show (an earlier one, a removed step's)
        self.executions = LiveOtherPanes()
        self._seq = 0
        self._rows_key: tuple[Any, ...] | None = None
        self._marks = MarkBuilder()
        self._marks_of: int | None = None  # id() of the event list the marks were found in
        self._last_marks: dict[str, CacheMark] = {}  # the steps answered from the cache or a resume, now
        self.state = ViewState.of(source)
        self.widget.kept = store_text(self.state.store) or ""
        #: the handles of the forks started from this view's Fork buttons (planbook.views.forkbox)
        self.forks: list[SteeredRun] = []
        # ipywidgets keeps every open widget (and its callbacks) in a registry for the kernel's
        # life: the callback holds the view weakly, so a view nobody holds is garbage, and then its
        # widget is closed unless a display shows it
        self.widget.on_msg(WeakHandler(self._on_front_end))
        self._shown = Shown()
        self._finalizer = weakref.finalize(self, close_unshown, self.widget, self._shown)
        self._finalizer.atexit = False
        self.widget.view_ref = weakref.ref(self)
        hold_for_cell(self)  # ``PlanView(result).widget``: the view lives until the cell that made it ends
        self.render(self.state)

    # the synced traits, read-only here (render and open change them)
    head = property(lambda self: self.widget.head)
    rows = property(lambda self: self.widget.rows)
    statuses = property(lambda self: self.widget.statuses)
    batch = property(lambda self: self.widget.batch)
    revisions = property(lambda self: self.widget.revisions)
    selected = property(lambda self: self.widget.selected)

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        if (self.stopped and not self.note) or self.closed:
            # a view of a run that has ended is its static record (with the open pane open): a widget
            # saved in a notebook has no model without its kernel. ``display(view.widget)`` shows the widget.
            return self.record(), {}
        ensure_checkpoint()  # the widget's comm and its state sync leave by the kernel's session too
        bundle = self.widget._repr_mimebundle_()
        assert bundle is not None  # anywidget gives None only to a widget with no _view_name; AnyWidget has one
        data, metadata = bundle
        data = dict(data)
        # a run going on: a window of rows (where widgets do not render, the final update
        # replaces it); a finished one: every row, up to STATIC_ROWS (text/plain has them all)
        going = self.note and self.state.status in (None, "running")
        n = len(self.state.plan.steps)
        rows = LIVE_ROWS if going else (STATIC_ROWS if n > STATIC_ROWS else None)
        static = state_html(self.state, max_rows=rows)
        if self.note:
            static = f'<div class="{NO_MATH}" style="{DIM};font-size:11px">{esc(self.note)}</div>{static}'
        data["text/html"] = static
        if going and n > LIVE_ROWS:
            # a long plan's live display: its text is one line (the whole plan's text and Markdown
            # were half of what a live view cost; the run's record, which replaces it, has them)
            data["text/plain"] = f"{progress_line(self.state)} (live view; the run's record replaces it when it ends)"
        else:
            data["text/plain"] = format_state(self.state, max_steps=SHOWN_STEPS)
            data["text/markdown"] = state_markdown(self.state)
        return data, metadata

    def displayed(self) -> None:
        """A display was given the widget: closing it would empty that display. A finished run's record
        goes to the page, which saves it in the widget's place (never "Error displaying widget")."""
        self._shown.shown = True
        if self.stopped and not self.note and not self.widget.saved:
            self.widget.saved = self.record()

    @property
    def shown(self) -> bool:
        """True once a display was given the widget (closing it would empty that display)."""
        return self._shown.shown

    @property
    def closed(self) -> bool:
        """True once the widget is closed (:meth:`close`): displayed again, the view is its record."""
        return self.widget.comm is None

    def close(self) -> None:
        """Close the widget: ipywidgets forgets it and the browser drops its model. The run's
        display should show the record by then (a closed widget's display goes blank); the view
        still answers :meth:`record`, :meth:`pane` and its traits."""
        close_widget(self.widget)

    def leave(self, record: dict[str, str]) -> None:
        """The run's display was updated to ``record``: say so to the browser (``ended``) and keep
        the widget open until a page says its notebook shows the record (the page that ran the
        cell says so at once), or a few later runs left theirs (:data:`LEFT_OPEN`).

        A page reloaded during the run does not know the display's id, so the update missed it; it
        learns of the widget only when the kernel is free (a ``%run_plan`` cell blocks it), and then
        asks for the record and writes it in the widget's place (``static/planview.js``). Until the
        widget closes it holds the record's text, not the view or the plan."""
        self._shown.left = True
        self.widget.ended = True
        leave_open(self.widget, record)

    @property
    def stopped(self) -> bool:
        """True once the run shown has ended (completed, failed, interrupted or paused)."""
        return self.state.status not in (None, "running")

    def record(self, state: ViewState | None = None) -> dict[str, str]:
        """The display that replaces the widget when its run ends: the same text, and the static
        record as HTML, without the widget's mime type (a saved notebook then shows the run
        everywhere, with or without a kernel, widget state or JavaScript). ``state``: the run's
        final state, kept as the view's without drawing it (the record replaces the drawing)."""
        if state is not None:
            self.state = state
        from .record import record_bundle

        return record_bundle(self.state, opened=self.selected)

    def __repr__(self) -> str:
        return f"<PlanView {self.state.plan.id!r}: {len(self.state.plan.steps)} steps>"

    # ------------------------------------------------------------------ drawing
    def render(self, source: Any) -> None:
        """Show ``source`` (a ViewState, Plan, RunResult or Runner): only what changed is sent."""
        state = self.state = ViewState.of(source)
        self.renders += 1
        self._shown.ended = bool(self.note) and self.stopped
        plan = state.plan
        origin = self._origin()
        # one pass over the steps for their statuses; the counts and the window of rows whose
        # panes go now are read from that string
        codes = STATUS_CODES
        statuses = "".join([codes[s.status] if s.mark is None else status_code(s) for s in plan.steps])
        asking = tuple(s.id for s in plan.steps if s.mark is StepMark.waiting) if WAITING_CODE in statuses else ()
        key = (id(plan), plan.revision, len(plan.steps), asking)
        marks = self._cache_marks(state)
        new_bars = self._changed_bars(state, origin)
        new_panes = self._changed_panes(plan.steps, origin, self.widget.selected, statuses)
        new_executions = self.executions.changed(state, origin, key != self._rows_key, CompletedResults(plan.steps),
                                                 self._budget)
        w = self.widget
        with w.hold_sync():
            if key != self._rows_key:
                self._rows_key = key
                hide = state.gate.hider()  # the environment read once for the rows, not per row
                results = CompletedResults(plan.steps) if asking else None
                w.rows = [row_of(s, hide, results if s.id in asking else None) for s in plan.steps]
            w.statuses = statuses
            counts = {s: statuses.count(c) for s, c in codes.items()}
            counts[Status.not_started] += statuses.count(WAITING_CODE)
            w.head = self._head(state, origin, marks, counts)
            if new_panes or new_bars or new_executions:
                self._seq += 1
                w.batch = {"seq": self._seq, "full": False, "panes": new_panes, "bars": new_bars,
                           "executions": new_executions}
            revisions = [shown_diff(d, state.gate) for d in state.revisions]  # the gate's texts, never raw
            if revisions != w.revisions:
                w.revisions = revisions
            if self.handle is not None:
                shown = state.gate.shown_args  # a secret-named arg reaches the browser as ***
                waiting = {i: shown(self.state.plan.step(i).args) for i in self.handle.waiting}
                if waiting != w.waiting:
                    w.waiting = waiting
                if self._read_decisions():
                    w.decisions = list(self._decisions)
                paused = state.status == "paused"
                editable = {s.id: shown(s.args) for s in plan.steps
                            if paused and s.tool and s.status is Status.not_started}
                retryable = [s.id for s in plan.steps if paused and s.status in (Status.failed, Status.skipped)]
                if editable != w.editable:
                    w.editable = editable
                if retryable != w.retryable:
                    w.retryable = retryable

    def _cache_marks(self, state: ViewState) -> dict[str, CacheMark]:
        if id(state.events) != self._marks_of:  # another run's events: start again
            self._marks, self._marks_of = MarkBuilder(), id(state.events)
        self._last_marks = self._marks.feed_new(state.events).of(state.plan)
        return self._last_marks

    def _head(self, state: ViewState, origin: float | None, marks: dict[str, CacheMark],
              counts: dict[Status, int]) -> dict[str, Any]:
        plan = state.plan
        running = state.status in (None, "running")
        hide = state.gate.hider()
        return {
            "id": hide(plan.id), "title": hide(plan.display_title),
            "goal": shown(plan.goal, hide) if plan.goal != plan.display_title else "",
            "revision": plan.revision, "status": state.status, "reason": state.reason, "tone": state.tone,
            "verdict": verdict_line(state) if state.status is not None else "", "budgets": budget_line(state),
            "why": shown(state.why or "", hide), "error": shown(state.error or "", hide, TEXT_LIMIT),
            "counts": {s.value: n for s, n in counts.items() if n}, "done": counts[Status.completed],
            "total": len(plan.steps),
            "elapsed": round(state.elapsed, 4) if state.elapsed is not None else None,
            "elapsed_means": ELAPSED_MEANS,
            "now": round(state.now - origin, 3) if state.now is not None and origin is not None else None,
            "critical": [] if running else state.critical_path(),
            "waiting": len(self.handle.waiting) if self.handle is not None and running else 0,
            # steps that did not run here: [kind, why, when (seconds from the origin)]
            "cached": {sid: [m.kind, m.describe(), since(m.at, origin)] for sid, m in marks.items()},
            "cached_count": cached_count_text(marks),
            "lineage": headline(state.lineage, state.gate) if state.lineage else "",
            # the steps each replan removed, under their revision: [revision, why, [[id, line, execution]]]
            "removed": self.executions.removed(state),
        }

    def _changed_panes(self, steps: list[Step], origin: float | None, selected: str,
                       statuses: str) -> dict[str, dict[str, Any]]:
        """The panes that changed among the steps worth sending now (see the module docstring).
        ``statuses``: the steps' status letters (the window is read from them)."""
        start, end = window_of_codes(statuses, EAGER_ROWS)
        sent = self._sent
        # the steps worth a look: the window, and outside it those the browser has, the open
        # one and those with an error (in plan order, as a full pass would find them)
        wanted = {*sent, selected}
        look = [i for i, s in enumerate(steps[:start]) if s.error or s.id in wanted]
        look += range(start, end)
        look += [i for i, s in enumerate(steps[end:], end) if s.error or s.id in wanted]
        results: CompletedResults | None = None
        changed: dict[str, dict[str, Any]] = {}
        not_started = Status.not_started  # read once, not per step
        for i in look:
            step = steps[i]
            if step.status is not_started and not step.attempts and not step.notes and step.mark is None:
                continue
            key = self._key(step)
            if sent.get(step.id) == key:
                continue
            if results is None:
                results = CompletedResults(steps)
            sent[step.id] = key
            changed[step.id] = self._build(step, key, results, origin)
        return changed

    def _build(self, step: Step, key: tuple[Any, ...], results: Mapping[str, Any], origin: float | None) -> dict[str, Any]:
        if self._built.get(step.id) != key:
            self._built[step.id] = key
            mark = self._last_marks.get(step.id)
            ran = self._latest.get(step.id) if mark is None and step.started_at is not None else None
            data = pane(step, results, origin=origin, budget=self._budget, gate=self.state.gate, execution=ran)
            if mark is not None:  # the step did not run here: the pane says where its result came from
                data["cached"] = cached_text(mark, origin)
            if self.widget.fork and forkable(step):  # Fork from here: the editor starts from these
                data["fork"] = True
                if step.tool:
                    data["args"] = editor_args(self.state.gate, step.args)
            self.panes[step.id] = data
        return self.panes[step.id]

    def _key(self, step: Step) -> tuple[Any, ...]:
        return (*_pane_key(step), step.id in self._last_marks, bool(self.widget.fork))

    def _changed_bars(self, state: ViewState, origin: float | None) -> dict[str, list[Any]]:
        if origin is None:
            return {}
        changed: dict[str, list[Any]] = {}
        executions = state.timeline
        bars, final = self._bars, self._bars_final
        for i in range(final, len(executions)):
            ex = executions[i]
            end = ex.end
            bar = [ex.step, ex.attempt, ex.revision, ex.worker, round4(ex.start - origin),
                   None if end is None else round4(end - origin), ex.ok,
                   ex.interrupted,  # the bar's fill (charts.py rule 5: interrupted is amber, not failed)
                   ex.execution]
            # keyed by place in the timeline: a call an interrupt cut runs again under its execution number
            number = i
            if bars.get(number) != bar:
                bars[number] = bar
                changed[str(number)] = bar
            if end is not None and not ex.interrupted and i == final:  # a kept call may end it later
                final += 1
            self._latest[ex.step] = ex
        self._bars_final = final
        return changed

    def resend(self) -> None:
        """Send every pane and bar again (a browser that missed a batch asks for it)."""
        self._seq += 1
        self.widget.batch = {"seq": self._seq, "full": True, "panes": dict(self.panes),
                      "bars": {str(k): v for k, v in self._bars.items()}, "executions": dict(self.executions.panes)}
        self._sent = dict(self._built)

    def _on_front_end(self, widget: Any, content: Any, buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "resend":
            self.resend()
        elif isinstance(content, dict) and content.get("type") == "pane" and isinstance(content.get("step"), str):
            self.send_pane(content["step"])
        elif isinstance(content, dict) and content.get("type") == "control" and self._control is not None:
            error = self._control(content)
            errors = dict(self.widget.errors)
            key = str(content.get("step") or "")
            if error:
                errors[key] = self.state.gate.line(error)  # an edit's error may quote its arguments
            else:
                errors.pop(key, None)
            self.widget.errors = errors
        elif isinstance(content, dict) and content.get("type") == "fork" and self.handle is not None:
            self._fork(content)

    def _fork(self, content: dict[str, Any]) -> None:
        """A click on Fork: start the child in the background and show its live view below this one
        (the browser puts it in a new output), or say in the pane why nothing ran."""
        if self.handle is None:  # no run to fork: the Fork button shows only with a handle
            return
        child, error = fork_from_view(self.handle, content)
        key = FORK_ERROR + str(content.get("step") or "")
        errors = dict(self.widget.errors)
        errors.pop(key, None)
        if error:
            errors[key] = self.state.gate.line(error)
        self.widget.errors = errors
        if child is None:
            return
        self.forks.append(child)
        target = getattr(getattr(child, "view", None), "target", None)
        if target is not None:
            # displayed as %run_plan --background displays its handle: its displays become the child's
            # record when it ends, and its widget then asks the page to put the record in its place
            display(child)
        run_id = child.runner.run_id
        self.widget.send({"type": "forked", "step": content.get("step"), "run": run_id,
                          "model_id": getattr(getattr(target, "widget", None), "model_id", "") or "",
                          "text": self.state.gate.line(f"fork of run {self.state.run_id} at {content.get('step')}: "
                                                       f"run {run_id} (its live view is below)")})

    def send_pane(self, step_id: str) -> None:
        """Build ``step_id``'s pane now and send it, unless the browser has it (a click on a
        step whose pane was not sent, or :meth:`open`)."""
        data = self.pane(step_id)
        if data is not None and self._sent.get(step_id) != self._built.get(step_id):
            self._sent[step_id] = self._built[step_id]
            self._seq += 1
            self.widget.batch = {"seq": self._seq, "full": False, "panes": {step_id: data}, "bars": {}}

    def _read_decisions(self) -> bool:
        """Add the decisions among the run's new events (read once each), worded as the run's record
        lists them; True when some were added."""
        if self.handle is None:
            return False
        events = self.handle.runner.state.events
        end = len(events)
        added = decision_lines(events[self._events_read:end], self.state.gate) if end > self._events_read else []
        self._events_read = end
        self._decisions.extend([what, line] for what, line in added)
        return bool(added)

    def attach_handle(self, handle: SteeredRun, control: Callable[[dict[str, Any]], str]) -> None:
        """Let the view's buttons steer ``handle`` (a background run): ``control(message)`` applies
        a button's message and returns the error to show ('' when it was taken)."""
        self.handle, self._control = handle, control
        run_id = getattr(getattr(handle, "runner", None), "run_id", None)
        if run_id:
            self.widget.fork = {"run": run_id, "store": store_text(self.state.store) or ""}
        self.widget.controls = True

    # ------------------------------------------------------------------ panes
    def open(self, step_id: str) -> dict[str, Any]:
        """Open step ``step_id``'s pane (in every browser showing the view); returns its JSON."""
        step = next((s for s in self.state.plan.steps if s.id == step_id), None)
        if step is None:
            raise KeyError(f"no step {step_id!r} in plan {self.state.plan.id!r}")
        self.widget.selected = step_id
        self.send_pane(step_id)
        return self.pane(step_id) or {}

    def pane(self, step_id: str) -> dict[str, Any] | None:
        """``step_id``'s pane, built now if it was not sent yet (None for a step that has not started)."""
        step = next((s for s in self.state.plan.steps if s.id == step_id), None)
        if step is None or (step.status is Status.not_started and not step.attempts and not step.notes
                            and step.mark is None):
            return self.panes.get(step_id)
        key = self._key(step)
        if self._built.get(step_id) == key:
            return self.panes[step_id]
        results = {s.id: s.result for s in self.state.plan.steps if s.status is Status.completed}
        return self._build(step, key, results, self._origin())

    def _origin(self) -> float | None:
        if self.state.origin is not None:
            return self.state.origin
        started = [s.started_at for s in self.state.plan.steps if s.started_at is not None]
        return min(started) if started else None


def _pane_key(step: Step) -> tuple[Any, ...]:
    """What a pane shows changes only when one of these does."""
    return (step.status, step.attempts, step.started_at, step.finished_at, step.error, step.notes,
            id(step.result), step.output, step.mark)  # the text itself: a capped tail keeps its length as it moves on

