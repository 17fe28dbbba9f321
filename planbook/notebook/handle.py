"""A background run in a notebook: the engine's handle, displayed as its live view.

:func:`start_runner` starts a run on a thread of its own (:mod:`planbook.engine.background`) and
returns a :class:`NotebookHandle`: the same handle a script gets, plus what a kernel shows. The
cell that starts a run returns at once, so the notebook stays usable: other cells run, the live
view's buttons reach the kernel (a click is not delivered while a cell blocks), and decisions
steer the run through its one door. Under ipykernel 7 what the run's thread displays belongs to
the cell that started it (the thread runs in a copy of that cell's context, so its parent header
goes along), and a step's printed output goes to its pane only (captured per thread by the runner).

``planbook.start`` and ``planbook.fork(background=True)`` come here only when an IPython kernel
runs the process (or ``view=True`` asks for the live view); a script gets the engine's handle and
never loads this module or IPython.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..engine.background import RunHandle
from ..engine.runner import Runner
from ..views.html import DIM, NO_MATH, esc, state_html
from ..views.live import LiveView
from ..views.publish import display, update_display
from ..views.show import choose_view
from ..views.state import ViewState
from ..views.steer import background_view, connect, final_record
from ..views.text import state_markdown

__all__ = ["HandleDisplays", "NotebookHandle", "start_runner"]

Bundle = tuple[dict[str, Any], dict[str, Any]]


class NotebookHandle(RunHandle):
    """A :class:`~planbook.engine.background.RunHandle` shown in a notebook kernel: displayed, it is
    the live view (with its buttons) while the run goes, and that output becomes the run's static
    record when the run ends (every display of it).

    A subclass, not a wrapper around the core: it *is* the run's handle (``isinstance(h,
    planbook.RunHandle)`` holds, code written in a script runs unchanged in a notebook), and all
    it adds is the display, through the core's hooks — the view draws on the run's thread, the
    displays end when the run ends, and they are settled again when the kernel's main thread
    reads the result. A wrapper would repeat each of the core's twenty methods and properties.
    """

    def __init__(self, runner: Runner, *, view: LiveView | None = None) -> None:
        super().__init__(runner)
        #: the live view's bridge when one is shown
        self.view = view
        #: the plan as the run started (what a saved notebook shows where widgets do not run)
        self._initial = runner.plan.copy_plan()
        #: where the handle is displayed in the kernel
        self._displays: HandleDisplays | None = None
        self._displays_lock = threading.Lock()
        self._ended = False

    # ------------------------------------------------------------------ the core's hooks
    def _on_run_thread(self) -> None:
        if self.view is not None:
            self.view.thread = threading.get_ident()  # the view draws on the run's thread from now on

    def _run_ended(self) -> None:
        """The view draws its last state, and every display of the handle becomes the run's static
        record (before whoever waits is told, so ``wait()`` finds it ready)."""
        if self.view is not None:
            self.view.close()
        with self._displays_lock:
            displays, self._ended = self._displays, True
        if displays is not None:
            displays.end(final_record(self.runner, self.view))

    def _result_read(self) -> None:
        """On the kernel's main thread, once the run ended: send the record to the displays again,
        in the running cell (see :class:`HandleDisplays`)."""
        displays = self._displays
        if displays is not None and threading.current_thread() is threading.main_thread():
            displays.settle()

    def _child(self, runner: Runner) -> RunHandle:
        return start_runner(runner)  # a fork from the live view gets a live view of its own

    # ------------------------------------------------------------------ display
    def _ipython_display_(self) -> None:
        """Displayed in a notebook kernel: the live view through a display with a display id, which
        becomes the run's static record when the run ends (each display, if shown twice)."""
        if choose_view() not in ("widget", "html"):  # a terminal: no display to update later
            display(self._live_bundle()[0], raw=True)
            return
        with self._displays_lock:
            if self._displays is None:
                leave = getattr(getattr(self.view, "target", None), "leave", None)
                self._displays = HandleDisplays(self._live_bundle, leave)
                if self._ended:  # the run ended before its first display: show its record
                    self._displays.final = final_record(self.runner, self.view)
            displays = self._displays
        displays.show()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        """The live view while the run goes (the record once a display showed how it ended)."""
        final = self._displays.final if self._displays is not None else None
        return dict(final) if final is not None else self._live_bundle(include, exclude)

    def _live_bundle(self, include: Any = None, exclude: Any = None) -> Bundle:
        """The live view (its widget where widgets run). The other forms show the plan as the run
        started, whatever it did since: they do not depend on how far the run got by the time
        the cell's output was made (notebooks compare them)."""
        line = self.runner.secrets.line(f"background run of plan {self.runner.plan.id!r} ({len(self._initial.steps)} "
                                        "steps): the live view shows it; handle.status, handle.wait()")
        start = ViewState.of(self._initial)
        data: dict[str, Any] = {
            "text/plain": line,
            "text/html": f'<div class="{NO_MATH}" style="{DIM};font-size:11px">{esc(line)}; as it started:'
                         f"</div>{state_html(start)}",
            "text/markdown": state_markdown(start),
        }
        target = self.view.target if self.view is not None else None
        if target is None or not hasattr(target, "_repr_mimebundle_"):
            return data, {}
        bundle = target._repr_mimebundle_(include, exclude)
        widget, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        return {**widget, **data}, metadata


def start_runner(runner: Runner, *, view: bool | None = None) -> NotebookHandle:
    """Start a built runner in the background, shown in the notebook (``%run_plan --background``,
    ``planbook.start`` in a kernel). ``view``: the live view (None: where widgets run; True: it
    must be shown, or a clear error; False: none)."""
    bridge = background_view(runner, required=bool(view)) if view or view is None else None
    handle = NotebookHandle(runner, view=bridge)
    if bridge is not None:
        connect(bridge, handle)
    handle.begin()
    return handle


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

    ``live``: the handle's live view as a display bundle; ``leave``: the widget's way to hand a
    reloaded page the record (None without a widget).
    """

    def __init__(self, live: Callable[[], Bundle], leave: Callable[[dict[str, str]], Any] | None = None) -> None:
        self.live, self.leave = live, leave
        self._lock = threading.Lock()
        self._shown: list[Any] = []  # IPython DisplayHandles
        self._owed: list[Any] = []  # displays the main thread still has to update
        #: the run's static record, once it ended
        self.final: dict[str, str] | None = None

    def show(self) -> None:
        """Display the handle (on the main thread): the live view, or the record if the run ended."""
        with self._lock:  # the run cannot end between choosing what to show and keeping its display
            if self.final is not None:
                display(self.final, raw=True)
                return
            data, metadata = self.live()
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
        for shown_display in shown:
            _update(shown_display, final)
        if shown and self.leave is not None:  # a page reloaded during the run asks the widget for the record
            self.leave(final)

    def settle(self) -> None:
        """Send the record again from the kernel's main thread, in the running cell (see the class)."""
        with self._lock:
            owed, self._owed = self._owed, []
            final = self.final
        for owed_display in owed:
            _update(owed_display, final)


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
    from IPython import get_ipython  # a display was shown, so IPython runs; planbook never imports it at load

    shell = get_ipython()
    if shell is None or id(shell) in _WATCHING:
        return
    _WATCHING.add(id(shell))
    shell.events.register("pre_run_cell", settle_all)
    shell.events.register("post_run_cell", settle_all)


def _update(shown: Any, final: dict[str, str] | None) -> None:
    try:
        update_display(shown, final, raw=True)
    except Exception as exc:  # the run's result is still there: say so, do not raise into a thread
        warnings.warn(f"a display of a background run could not show how the run ended "
                      f"({type(exc).__name__}: {exc}); display the handle again", stacklevel=2)
