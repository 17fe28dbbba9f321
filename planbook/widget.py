"""The live plan view: an ipywidgets view of a plan or a run.

Layout: a header (title, goal, counts, budgets used, elapsed time), a progress bar, the
steps as one HTML table (a page of ``page_size`` rows, following the running step), a
chooser that opens a step's result pane, and the revision history.

A 1,000-step plan costs the same handful of widget models as a 3-step one: rows are
HTML, not widgets, and a step's pane (its return value displayed richly, what it
printed, its error and traceback, its notes) is built only when the step is opened.
:meth:`PlanView.render` changes traits only, batched with ``hold_sync``; the
:class:`~planbook.liveview.LiveView` bridge calls it on the thread that made the view (the kernel's main thread).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import Any

import ipywidgets as w

from . import htmlview
from .liveview import ViewState
from .models import Status, Step
from .textview import format_markdown, format_plan

#: the chooser's first entry, selected while no step's pane is open. Its value is "" (no
#: step has an empty id), not None: a Dropdown whose value is None selects nothing and
#: shows a blank box
NO_STEP = "— choose a step —"

PANES_KEPT = 16  # opened panes kept for quick reopening; older ones are closed

BAR_STYLES = {None: "", "running": "info", "paused": "info", "completed": "success", "failed": "danger",
              "interrupted": "warning"}


class PlanView:
    """A live view of a :class:`Plan`, a :class:`RunResult` or a :class:`Runner`.

    ``view.render(state)`` redraws it; ``view.open(step_id)`` opens a step's pane (what a
    click in the chooser does); ``view.widget`` is the ipywidgets box. Displayed, it
    shows the widget, with the plan text as ``text/plain`` for nbval and GitHub.
    """

    def __init__(self, source: Any, *, page_size: int = 25, note: str = "") -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.page_size = page_size
        #: a line above the static HTML (where widgets do not render, e.g. on GitHub)
        self.note = note
        self.state = ViewState.of(source)
        self.page = 0
        self.follow = True  # the page follows the running step until the user pages by hand
        self.renders = 0
        self.open_id: str | None = None
        self.panes: OrderedDict[str, Any] = OrderedDict()
        self._pane_keys: dict[str, tuple[Any, ...]] = {}
        self._quiet = False  # set while the view changes the chooser itself

        self.header = w.HTML()
        self.progress = w.IntProgress(min=0, max=1, value=0, layout=w.Layout(width="100%", max_width="480px"))
        self.verdict = w.HTML()
        self.rows = w.HTML()
        self.prev_button = w.Button(description="◀", tooltip="previous rows", layout=w.Layout(width="36px"))
        self.next_button = w.Button(description="▶", tooltip="next rows", layout=w.Layout(width="36px"))
        self.page_label = w.Label()
        self.pager = w.HBox([self.prev_button, self.page_label, self.next_button], layout=w.Layout(display="none"))
        self.chooser = w.Dropdown(options=[(NO_STEP, "")], value="", description="Open step",
                                  layout=w.Layout(width="max-content", max_width="100%"))
        self.pane_box = w.VBox([])
        self.revisions = w.HTML()
        self.widget = w.VBox(
            [self.header, self.progress, self.verdict, self.rows, self.pager, self.chooser, self.pane_box, self.revisions],
            layout=w.Layout(width="100%"),
        )
        self.chooser.observe(self._on_choose, names="value")
        self.prev_button.on_click(lambda _: self._turn(-1))
        self.next_button.on_click(lambda _: self._turn(+1))
        self.render(self.state)

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = dict(self.widget._repr_mimebundle_())
        plan = self.state.plan
        data["text/plain"] = format_plan(plan)
        data["text/html"] = htmlview.plan_html(plan)
        if self.note:
            data["text/html"] = f'<div style="color:#666;font-size:11px">{htmlview.esc(self.note)}</div>' + data["text/html"]
        data["text/markdown"] = format_markdown(plan)
        return data

    def __repr__(self) -> str:
        return f"<PlanView {self.state.plan.id!r}: {len(self.state.plan.steps)} steps>"

    # ------------------------------------------------------------------ drawing
    @property
    def pages(self) -> int:
        return max(1, -(-len(self.state.plan.steps) // self.page_size))

    def visible_steps(self) -> list[Step]:
        start = self.page * self.page_size
        return self.state.plan.steps[start : start + self.page_size]

    def render(self, state: ViewState | Any) -> None:
        """Show ``state`` (a ViewState, Plan, RunResult or Runner). Only changed traits are sent."""
        self.state = ViewState.of(state)
        self.renders += 1
        plan = self.state.plan
        if self.follow:
            self.page = self._frontier_page()
        self.page = min(self.page, self.pages - 1)
        parts = [self.header, self.progress, self.verdict, self.rows, self.pager, self.page_label, self.chooser,
                 self.revisions, self.pane_box]
        with contextlib.ExitStack() as stack:
            for part in parts:
                stack.enter_context(part.hold_sync())
            self.header.value = htmlview.header_html(plan, extra=self._budgets_html(), bar=False)
            counts = plan.counts()
            self.progress.max = max(1, len(plan.steps))
            self.progress.value = counts[Status.completed]
            self.progress.bar_style = BAR_STYLES.get(self.state.status, "")
            self.verdict.value = htmlview.verdict_html(self.state) if self.state.status not in (None, "running") else ""
            self.rows.value = htmlview.steps_table_html(self.visible_steps(), highlight=self.open_id)
            self._draw_pager()
            self._draw_chooser()
            self.revisions.value = htmlview.revisions_html(self.state.revisions)
            self._refresh_pane()

    def _budgets_html(self) -> str:
        s = self.state
        bits = []
        if s.max_steps is not None:
            bits.append(f"steps {s.executions}/{s.max_steps}")
            bits.append(f"replans {s.replans}/{s.max_replans}")
        if s.usage.calls:
            bits.append(f"model calls {s.usage.calls}, tokens {s.usage.total_tokens}")
        if s.elapsed is not None:
            bits.append(f"elapsed {htmlview.format_duration(s.elapsed)}")
        if s.status == "running":
            bits.append("running")
        return f'<div style="color:#555">{htmlview.esc(" · ".join(bits))}</div>' if bits else ""

    def _frontier_page(self) -> int:
        """The page of the running step, else of the last step that finished."""
        return htmlview.frontier(self.state.plan.steps) // self.page_size

    def _draw_pager(self) -> None:
        total = len(self.state.plan.steps)
        if total <= self.page_size:
            self.pager.layout.display = "none"
            return
        self.pager.layout.display = "flex"
        start = self.page * self.page_size
        self.page_label.value = f"rows {start + 1}–{min(start + self.page_size, total)} of {total}"
        self.prev_button.disabled = self.page == 0
        self.next_button.disabled = self.page >= self.pages - 1

    def _draw_chooser(self) -> None:
        options = [(NO_STEP, "")] + [(_label(s), s.id) for s in self.visible_steps()]
        if self.open_id is not None and self.open_id not in {v for _, v in options}:
            step = self._step(self.open_id)
            if step is not None:
                options.insert(1, (_label(step), step.id))
        self._quiet = True
        try:
            if tuple(options) != tuple(self.chooser.options):
                self.chooser.options = options
            ids = {v for _, v in options}
            self.chooser.value = self.open_id if self.open_id in ids else ""
        finally:
            self._quiet = False

    def _turn(self, delta: int) -> None:
        self.follow = False
        self.set_page(self.page + delta)

    def set_page(self, page: int) -> None:
        """Show rows of page ``page`` (0-based); the view stops following the run."""
        self.follow = False
        self.page = max(0, min(page, self.pages - 1))
        self.render(self.state)

    # ------------------------------------------------------------------ panes
    def _on_choose(self, change: dict[str, Any]) -> None:
        if self._quiet:
            return
        if not change["new"]:  # the "choose a step" entry (or no selection)
            self.close_pane()
        else:
            self.open(change["new"])

    def open(self, step_id: str) -> Any:
        """Open step ``step_id``'s result pane (built now if it was never opened). Returns it."""
        step = self._step(step_id)
        if step is None:
            raise KeyError(f"no step {step_id!r} in plan {self.state.plan.id!r}")
        page = self.state.plan.steps.index(step) // self.page_size
        if page != self.page:
            self.follow = False
            self.page = page
        self.open_id = step_id
        self.render(self.state)
        return self.panes[step_id]

    def close_pane(self) -> None:
        self.open_id = None
        self.render(self.state)

    def pane(self, step_id: str) -> Any:
        """The pane of ``step_id`` if it was opened, else None (panes are built lazily)."""
        return self.panes.get(step_id)

    def _step(self, step_id: str) -> Step | None:
        for step in self.state.plan.steps:
            if step.id == step_id:
                return step
        return None

    def _refresh_pane(self) -> None:
        step = self._step(self.open_id) if self.open_id is not None else None
        if step is None:
            self.open_id = None
            if self.pane_box.children:
                self.pane_box.children = ()
            return
        key = _pane_key(step, self.state.plan.revision)
        pane = self.panes.get(step.id)
        if pane is None:
            pane = w.VBox([w.HTML(), w.Output()], layout=w.Layout(border="1px solid #ddd", padding="4px"))
            self.panes[step.id] = pane
            self._evict()
        self.panes.move_to_end(step.id)
        if self._pane_keys.get(step.id) != key:
            info, out = pane.children
            with info.hold_sync(), out.hold_sync():
                info.value = htmlview.step_detail_html(step)
                out.outputs = tuple(step_outputs(step))
            self._pane_keys[step.id] = key
        if self.pane_box.children != (pane,):
            self.pane_box.children = (pane,)

    def _evict(self) -> None:
        while len(self.panes) > PANES_KEPT:
            old_id, old = self.panes.popitem(last=False)
            self._pane_keys.pop(old_id, None)
            for child in old.children:
                child.close()
            old.close()


def _label(step: Step) -> str:
    text = step.task or step.describe()
    text = text if len(text) <= 60 else text[:59] + "…"
    return f"{step.id}. {text}"


def _pane_key(step: Step, revision: int) -> tuple[Any, ...]:
    return (revision, step.status, step.attempts, step.started_at, step.finished_at, id(step.result), step.notes,
            step.error)


def step_outputs(step: Step) -> list[dict[str, Any]]:
    """A step as notebook outputs, each part under a small label: its value displayed
    richly, what it printed, its error with the traceback."""
    outputs: list[dict[str, Any]] = []
    if step.status is Status.completed or step.result is not None:
        data, metadata = rich_data(step.result)
        outputs += [_label_output("returned"), {"output_type": "display_data", "data": data, "metadata": metadata}]
    if step.output:
        outputs += [_label_output("printed"), {"output_type": "stream", "name": "stdout", "text": step.output}]
    if step.error:
        text = step.traceback or step.error + "\n"
        outputs += [_label_output("error"), {"output_type": "stream", "name": "stderr", "text": text}]
    return outputs


def _label_output(label: str) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {"text/html": f'<div style="color:#666;font-size:11px;margin-top:4px">{label}</div>', "text/plain": f"{label}:"},
        "metadata": {},
    }


def rich_data(value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The mimebundle IPython would display for ``value`` (a DataFrame as a table, a figure as an image).

    Like ``Output.append_display_data``, but it never creates a shell: it uses the kernel's
    formatter (with the user's registered formatters), else a standalone one (a terminal
    shell's formatter is limited to text/plain).
    """
    from IPython import get_ipython
    from IPython.core.formatters import DisplayFormatter

    global _formatter
    shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        formatter = shell.display_formatter
    else:
        _formatter = _formatter or DisplayFormatter()
        formatter = _formatter
    try:
        data, metadata = formatter.format(value)
        if data:
            return dict(data), dict(metadata)
    except Exception:  # a broken _repr_*_ must not break the view: show the repr
        pass
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unprintable {type(value).__name__}: {exc!r}>"
    return {"text/plain": text}, {}


_formatter: Any = None
