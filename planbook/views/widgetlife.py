"""How long the live view's widget lives in the kernel.

ipywidgets keeps every open widget (and its callbacks) for the kernel's life. So a widget's
message callback holds its view weakly, a view nobody holds closes its widget unless a display
shows it, and a finished run's widget stays open, answering with the run's record, until a page
reloaded during the run has put the record in its place (:data:`LEFT_OPEN` at most). What the
widget sends, and when, is :class:`planbook.views.widget.PlanView`'s; this module sends nothing
but the record that view made.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any


class WeakHandler:
    """The widget's message callback, holding its view's handler (a ``PlanView`` method) weakly: a
    view nobody holds is garbage."""

    def __init__(self, method: Callable[[Any, Any, Any], None]) -> None:
        self._method = weakref.WeakMethod(method)

    def __call__(self, widget: Any, content: Any, buffers: Any) -> None:
        method = self._method()
        if method is not None:
            method(widget, content, buffers)


class Shown:
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
#: those widgets by model id, oldest first (a test counts them apart from the widgets a view holds)
LEFT_WIDGETS: dict[str, Any] = {}
_LEFT_LOCK = threading.Lock()


def leave_open(widget: Any, record: dict[str, str]) -> None:
    """Keep ``widget`` open, answering a page that asks for ``record``, until a page says its
    notebook shows the record or :data:`LEFT_OPEN` later runs left theirs (without an IPython
    shell there is no page: it is closed now). Not "until the next cell": Run All queues the next
    cells before a reload, and they start before the reloaded page can ask."""
    if _shell() is None or widget.comm is None:
        close_widget(widget)
        return
    widget.on_msg(_RecordAnswer(record))
    with _LEFT_LOCK:
        LEFT_WIDGETS[widget.model_id] = widget
        older = list(LEFT_WIDGETS)[:-LEFT_OPEN]
        closing = [LEFT_WIDGETS.pop(model_id) for model_id in older]
    for old in closing:
        close_widget(old)


#: the views made in the running cell, held until it ends: in ``display(PlanView(result).widget)``
#: nothing else holds the view once ``.widget`` is read, and its widget would be closed before the display
CELL_VIEWS: list[Any] = []
_RELEASING: set[int] = set()  # id() of the shells whose cells' end releases them


def hold_for_cell(view: Any) -> None:
    """Hold ``view`` until the running cell ends (outside a running cell nothing displays it: not held,
    so a shell that runs no cell — a test process, an embedding — keeps no view for ever)."""
    shell = _shell()
    if shell is None or not _in_a_cell(shell):
        return
    if id(shell) not in _RELEASING:
        _RELEASING.add(id(shell))
        shell.events.register("post_run_cell", release_cell_views)
    CELL_VIEWS.append(view)


def _in_a_cell(shell: Any) -> bool:
    """Whether ``shell`` is running a cell now: IPython sets its display hook's ``exec_result`` for the
    cell's run and clears it when the cell ends (``InteractiveShell.run_cell``)."""
    return getattr(getattr(shell, "displayhook", None), "exec_result", None) is not None


def release_cell_views(*_: Any) -> None:
    """The cell ended: its views live on only if someone holds them (a display keeps their widgets)."""
    CELL_VIEWS.clear()


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
                held = LEFT_WIDGETS.pop(widget.model_id, None)
            if held is not None:
                close_widget(held)


def close_widget(widget: Any) -> None:
    """Close the widget and the layout ipywidgets made for it (a widget of its own, kept too)."""
    layout = widget._trait_values.get("layout")  # made when the widget opened; do not make one now
    widget.close()
    if layout is not None:
        layout.close()


def close_unshown(widget: Any, shown: Shown) -> None:
    """The view is garbage: close its widget unless a display still shows it (it would go blank
    there; that widget holds the JSON it sent, not the plan)."""
    if not shown.left and (not shown.shown or shown.ended):
        close_widget(widget)
