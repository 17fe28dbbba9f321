"""The live view of a background run, with its controls wired to the run's handle.

A background run's view draws on the run's thread (the kernel's main thread is free for
other cells and for clicks), and its buttons — Pause / Continue / Stop, and Approve /
Skip / Edit on a step that waits — arrive on the kernel's main thread as comm messages,
where they become decisions of the :class:`~planbook.notebook.handle.RunHandle` (``who="widget"``).
A decision the handle refuses (an edit that does not fit the tool, an edit after Continue,
any decision once the run ended) is shown in the view as one line, beside the step,
instead of being raised into a cell nobody is running.
When the run ends, every display of its handle becomes the run's static record
(:class:`HandleDisplays`), which lists the decisions people gave.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .live import LIVE_NOTE, LiveView
from .publish import update_display
from .show import choose_view


def background_view(runner: Any, *, required: bool = False) -> LiveView | None:
    """A live view for a run about to start in the background (None outside a notebook kernel,
    unless ``required``: then a clear error)."""
    kind = choose_view()
    if kind != "widget":
        if required:
            raise RuntimeError("view=True shows a background run's live view in a notebook kernel with anywidget; "
                               f"here the view would be {kind!r}: drop view=True (use handle.status, handle.wait())")
        return None
    from .widget import PlanView

    target = PlanView(runner, note=LIVE_NOTE, controls=True)
    return LiveView(runner, target)


@runtime_checkable
class Steerable(Protocol):
    """A view with buttons (the widget's :class:`~planbook.views.widget.PlanView`)."""

    def attach_handle(self, handle: Any, control: Callable[[dict[str, Any]], str]) -> None: ...


def connect(bridge: LiveView, handle: Any) -> None:
    """Wire the view's buttons to ``handle`` (the run's thread draws; clicks arrive on the main thread)."""
    target = bridge.target
    if not isinstance(target, Steerable):  # background_view's bridges draw on a PlanView: it has them
        raise TypeError(f"{type(target).__name__} has no buttons to wire to a run's handle")
    target.attach_handle(handle, lambda content: on_control(handle, content))


def on_control(handle: Any, content: dict[str, Any]) -> str:
    """Apply one message from the view's buttons; returns the error to show ('' when it was taken)."""
    action, step = content.get("action"), content.get("step") or None
    try:
        if action == "pause":
            handle.pause(who="widget")
        elif action == "continue":
            handle.resume(who="widget")
        elif action == "stop":
            handle.stop(who="widget")
        elif action == "approve":
            handle.approve(step, who="widget")
        elif action == "skip":
            handle.skip(step, "skipped in the live view", who="widget")
        elif action == "retry":
            handle.retry(step, who="widget")
        elif action == "edit":
            args = content.get("args")
            if isinstance(args, str):
                import json

                try:
                    args = json.loads(args)
                except json.JSONDecodeError as exc:
                    return f"the arguments are not JSON ({exc.msg} at character {exc.pos}): write them as {{\"name\": value}}"
            if not isinstance(args, dict):
                return "the arguments must be a JSON object, like {\"to\": \"alice\"}"
            # the editor was given the args as the gate shows them (a password as ***): what comes
            # back unchanged keeps its real value
            current = handle.runner.plan.step(step).args
            handle.edit(step, handle.runner.secrets.kept_secrets(args, current), who="widget")
        else:
            return f"unknown control {action!r}"
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        return str(exc).strip("'\"")
    return ""


# ------------------------------------------------------------------ where the handle is displayed
class HandleDisplays:
    """Every display of a background run's handle, each with a display id: the live view while
    the run goes, replaced by the run's static record once it ends (a saved notebook then holds
    no widget that needs its kernel: no "Error displaying widget", no blank nbconvert HTML).

    A paused run keeps its live view: its Continue button, editor and retry are how it goes on.

    The record is sent twice, because front ends route it differently. From the run's thread
    (with the parent header of the cell that started the run): JupyterLab and Notebook 7 apply
    an update by its display id wherever it was shown, even while the kernel is idle. Then once
    more from the kernel's main thread at the next occasion — ``handle.wait()``, ``await
    handle``, ``handle.result``, or the start or end of any cell — with the running cell's parent
    header: nbclient, ``nbconvert --execute`` and papermill read only the messages of the cell
    they run, and would drop the first.
    """

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._lock = threading.Lock()
        self._shown: list[Any] = []  # IPython DisplayHandles
        self._owed: list[Any] = []  # displays the main thread still has to update
        #: the run's static record, once it ended
        self.final: dict[str, str] | None = None

    def show(self) -> None:
        """Display the handle (on the main thread): the live view, or the record if the run ended."""
        from .publish import display

        with self._lock:  # the run cannot end between choosing what to show and keeping its display
            if self.final is not None:
                display(self.final, raw=True)
                return
            data, metadata = self.handle._live_bundle()
            self._shown.append(display(data, raw=True, metadata=metadata, display_id=True))
        _watch_cells()

    def end(self, final: dict[str, str]) -> None:
        """The run ended (its thread): every display becomes ``final`` (and is owed once more)."""
        with self._lock:
            self.final = final
            shown = list(self._shown)
            self._owed = list(shown)
        if shown:
            with _OWING_LOCK:
                _OWING.append(self)
        for display in shown:
            _update(display, final)
        leave = getattr(getattr(self.handle.view, "target", None), "leave", None)
        if shown and leave is not None:  # a page reloaded during the run asks the widget for the record
            leave(final)

    def settle(self) -> None:
        """Send the record again from the kernel's main thread, in the running cell (see the class)."""
        with self._lock:
            owed, self._owed = self._owed, []
            final = self.final
        for display in owed:
            _update(display, final)


_OWING: list[HandleDisplays] = []
_OWING_LOCK = threading.Lock()
_WATCHING: set[int] = set()  # id() of the shells whose cells settle the owed displays


def settle_all(*_: Any) -> None:
    """Update the displays of every run that ended since (the main thread, at a cell's start and end)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _OWING_LOCK:
        owing = list(_OWING)
        _OWING.clear()
    for displays in owing:
        displays.settle()


def _watch_cells() -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or id(shell) in _WATCHING:
        return
    _WATCHING.add(id(shell))
    shell.events.register("pre_run_cell", settle_all)
    shell.events.register("post_run_cell", settle_all)


def _update(display: Any, final: dict[str, str] | None) -> None:
    try:
        update_display(display, final, raw=True)
    except Exception as exc:  # the run's result is still there: say so, do not raise into a thread
        warnings.warn(f"a display of a background run could not show how the run ended "
                      f"({type(exc).__name__}: {exc}); display the handle again", stacklevel=2)


def final_record(runner: Any, bridge: LiveView | None) -> dict[str, str]:
    """How a background run ended, as its displays keep it: the live view's static record (or,
    without a view, the same from the runner's state), which lists the decisions people gave;
    its text lists them too."""
    from .record import decision_lines

    record = getattr(getattr(bridge, "target", None), "record", None)
    if record is not None:
        data = dict(record())
    else:
        from .record import record_bundle
        from .state import ViewState

        data = record_bundle(ViewState.of_runner(runner))
    decisions = decision_lines(runner.state.events, runner.secrets)
    if decisions:
        data["text/plain"] += "\n\nDecisions:\n" + "\n".join(f"  {line}" for _, line in decisions)
    return data
