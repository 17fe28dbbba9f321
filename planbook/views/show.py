"""Which live view to show, and showing it: the one place that knows every live view.

Like ``tqdm.autonotebook``: the anywidget view in a kernel with comms; the static HTML
updated in place where a kernel has no anywidget; the ``rich`` terminal table in terminal
IPython on a terminal; nothing live otherwise (the returned result prints the final
state). Every notebook view is displayed with a display id and, when the run returns,
updated with its *final* ``text/plain`` and ``text/html``, so a saved notebook shows how
the run ended without a kernel. This module sits above :mod:`.live` (the bridge) and the
views it chooses between, so none of them imports another to be chosen.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from .live import LIVE_NOTE, HtmlView, LiveView

ViewKind = Literal["widget", "html", "terminal", "plain"]


# ------------------------------------------------------------------ choosing a view
def _shell() -> Any:
    if "IPython" not in sys.modules:  # not in IPython (and importing it would cost time for nothing)
        return None
    from IPython import get_ipython

    return get_ipython()


def widgets_available(shell: Any = None) -> bool:
    """True in a kernel with comms where anywidget imports (what tqdm.autonotebook checks)."""
    shell = shell if shell is not None else _shell()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        import anywidget  # noqa: F401
    except ImportError:
        return False
    return True


def choose_view(shell: Any = None, *, stdout: Any = None) -> ViewKind:
    """``widget`` (a kernel with anywidget), ``html`` (a kernel without it), ``terminal``
    (IPython in a terminal, on a tty that ``rich`` can draw on) or ``plain`` (no live view)."""
    shell = shell if shell is not None else _shell()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        return "widget" if widgets_available(shell) else "html"
    stdout = stdout if stdout is not None else sys.stdout
    if shell is not None and _isatty(stdout):
        return "terminal"
    return "plain"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _TerminalBridge:
    """The terminal view as a bridge: it owns its ``rich`` Live display, so close ends it."""

    def __init__(self, view: Any) -> None:
        self.view = view
        view.__enter__()

    @property
    def target(self) -> Any:
        return self.view

    def close(self) -> None:
        self.view.__exit__(None, None, None)


def show_live(runner: Any, *, kind: ViewKind | None = None, **throttle: Any) -> Any:
    """Display a live view of ``runner`` and subscribe it; returns the bridge (close it
    when the run returns), or None where there is no live view (plain)."""
    kind = kind or choose_view()
    if kind == "plain":
        return None
    if kind == "terminal":
        from .terminal import TerminalView

        return _TerminalBridge(TerminalView(runner, **throttle))
    from .publish import display

    target: Any
    if kind == "widget":
        from .widget import PlanView

        target = PlanView(runner, note=LIVE_NOTE)
        handle = display(target, display_id=True)
    else:
        target = HtmlView(runner).show()
        handle = None  # it updates its own display at every draw
    return LiveView(runner, target, handle=handle, **throttle)


@contextmanager
def watch(runner: Any, **throttle: Any) -> Iterator[Any]:
    """Show a live view while the block runs the runner (the Python API's ``%run_plan``)::

        with watch(runner):
            result = runner.run()
    """
    bridge = show_live(runner, **throttle)
    try:
        yield bridge
    finally:
        if bridge is not None:
            bridge.close()
