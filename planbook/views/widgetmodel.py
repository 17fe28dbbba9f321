"""The live view's anywidget model and its life in the kernel.

:class:`PlanWidget` holds the synced traits that ``static/planview.js`` draws (and sends the
JSON ones without ipywidgets' search for binary buffers). The rest of this module is how long
a widget lives: its message callback holds its view weakly, a view nobody holds closes its
widget unless a display shows it, and a finished run's widget stays open for a page reloaded
during the run to ask for the record (:data:`LEFT_OPEN` at most). What the view sends, and
when, is :class:`planbook.views.widget.PlanView`'s.
"""

from __future__ import annotations

import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

STATIC = Path(__file__).with_name("static")


#: the traits this module fills only with JSON it builds (str, numbers, None, lists, dicts):
#: they are sent without ipywidgets' search of the whole state for binary buffers, which
#: costs more than the update itself for a long plan's rows and bars. ``waiting`` and
#: ``editable`` hold steps' arguments (any value a tool takes) and take the general path.
JSON_TRAITS = frozenset({"head", "rows", "statuses", "batch", "revisions", "selected", "uid", "controls", "ended",
                         "decisions"})


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
    rows = t.List().tag(sync=True)
    statuses = t.Unicode("").tag(sync=True)
    batch = t.Dict().tag(sync=True)
    revisions = t.List().tag(sync=True)
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
    retryable = t.List().tag(sync=True)
    #: the decisions people gave, in order: ``[what, line]`` (the record's words: record.decision_lines)
    decisions = t.List().tag(sync=True)
    #: the run's display is its record now (:meth:`~planbook.views.widget.PlanView.leave`): a page that still shows the
    #: widget (reloaded during the run, so the record's display update missed it) asks for the record
    #: and puts it in its notebook in the widget's place
    ended = t.Bool(False).tag(sync=True)


class _WeakHandler:
    """The widget's message callback, holding its view (a ``PlanView``) weakly: a view nobody holds is garbage."""

    def __init__(self, view: Any) -> None:
        self._view = weakref.ref(view)

    def __call__(self, widget: Any, content: Any, buffers: Any) -> None:
        view = self._view()
        if view is not None:
            view._on_front_end(widget, content, buffers)


class _Shown:
    """What the finalizer of a view needs to know of it (it cannot hold the view): whether a display
    was given the widget, and whether that display is a live view whose run has ended (its
    display is replaced by the run's record: by :class:`~planbook.views.live.LiveView` for a
    ``%run_plan``, by the handle's displays for a background run)."""

    shown = False
    ended = False
    #: the display is the record and the widget waits to be closed (:meth:`~planbook.views.widget.PlanView.leave`)
    left = False


#: finished runs' widgets kept open for a page to ask their record (the latest ones; see
#: :meth:`~planbook.views.widget.PlanView.leave`): a few, holding the JSON they sent and the record's text, never a plan
LEFT_OPEN = 3
#: those widgets by model id, oldest first
_LEFT: dict[str, PlanWidget] = {}
_LEFT_LOCK = threading.Lock()


def _leave_open(widget: PlanWidget, record: dict[str, str]) -> None:
    """Keep ``widget`` open, answering a page that asks for ``record``, until a page says its
    notebook shows the record or :data:`LEFT_OPEN` later runs left theirs (without an IPython
    shell there is no page: it is closed now). Not "until the next cell": Run All queues the next
    cells before a reload, and they start before the reloaded page can ask."""
    if _shell() is None or widget.comm is None:
        _close(widget)
        return
    widget.on_msg(_RecordAnswer(record))
    with _LEFT_LOCK:
        _LEFT[widget.model_id] = widget
        older = list(_LEFT)[:-LEFT_OPEN]
        closing = [_LEFT.pop(model_id) for model_id in older]
    for old in closing:
        _close(old)


def _shell() -> Any:
    """The running IPython shell with cell events (None outside IPython: not imported for nothing)."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "events", None) is not None else None


class _RecordAnswer:
    """A left widget's message callback: a page asks for the run's record (it still shows the
    widget), or says its notebook shows the record (the widget is closed then)."""

    def __init__(self, record: dict[str, str]) -> None:
        self.record = record

    def __call__(self, widget: Any, content: Any, buffers: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "record":
            widget.send({"type": "record", "data": self.record})
        elif kind == "recorded":
            with _LEFT_LOCK:
                held = _LEFT.pop(widget.model_id, None)
            if held is not None:
                _close(held)


def _close(widget: PlanWidget) -> None:
    """Close the widget and the layout ipywidgets made for it (a widget of its own, kept too)."""
    layout = widget._trait_values.get("layout")  # made when the widget opened; do not make one now
    widget.close()
    if layout is not None:
        layout.close()


def _close_unshown(widget: PlanWidget, shown: _Shown) -> None:
    """The view is garbage: close its widget unless a display still shows it (it would go blank
    there; that widget holds the JSON it sent, not the plan)."""
    if not shown.left and (not shown.shown or shown.ended):
        _close(widget)
