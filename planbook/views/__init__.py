"""Views of plans and runs: one view model (:class:`ViewState`), four renderers.

- :mod:`.state` — the view model and the layout every view shares (verdict, budget line,
  frontier, the window of rows around the running steps);
- :mod:`.text` — the plan text (``text/plain``, nbval, the terminal's plain output);
- :mod:`.html` — the static HTML (``text/html``: GitHub, nbviewer, nbconvert);
- :mod:`.widget` — the live anywidget view (a hand-written ES module in ``static/``);
- :mod:`.terminal` — the live ``rich`` table of the command line;
- :mod:`.live` — the throttled bridge from a runner's events to a view;
- :mod:`.show` — the one place that chooses which live view to show (:func:`choose_view`).

Importing this package is light (no IPython, anywidget or rich): the models reach the
text and HTML renderers through :mod:`planbook.data.render`, which this module fills in.
"""

from __future__ import annotations

from typing import Any

from ..data import render as _render
from .html import diff_html, plan_html, result_html, state_html
from .record import record_html, step_pane  # registers the static record of a stopped run with .html
from .rundiff import rundiff_bundle, rundiff_html, rundiff_text
from .runlist import runlist_bundle, runlist_text
from .state import ViewState, budget_line, frontier, row_window, verdict_line
from .text import (
    diff_mimebundle,
    format_diff,
    format_markdown,
    format_plan,
    format_result,
    format_state,
    plan_mimebundle,
    progress_line,
    result_mimebundle,
    state_bundle,
    summary_line,
)

for _name, _fn in (("plan_text", format_plan), ("plan_bundle", plan_mimebundle), ("diff_text", format_diff),
                   ("diff_bundle", diff_mimebundle), ("result_text", format_result), ("result_bundle", result_mimebundle),
                   ("step_pane", step_pane), ("rundiff_text", rundiff_text), ("rundiff_html", rundiff_html),
                   ("rundiff_bundle", rundiff_bundle), ("runlist_text", runlist_text), ("runlist_bundle", runlist_bundle)):
    _render.register(_name, _fn)

_LAZY = {
    "PlanView": ("planbook.views.widget", "PlanView"),
    "TerminalView": ("planbook.views.terminal", "TerminalView"),
    "LiveView": ("planbook.views.live", "LiveView"),
    "choose_view": ("planbook.views.show", "choose_view"),
    "show_live": ("planbook.views.show", "show_live"),
    "watch": ("planbook.views.show", "watch"),
}


def __getattr__(name: str) -> Any:
    """The live views load IPython, anywidget or rich: only when asked for."""
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'planbook.views' has no attribute {name!r}")


__all__ = [
    "ViewState", "budget_line", "diff_html", "format_diff", "format_markdown",
    "format_plan", "format_result", "format_state", "frontier", "plan_html", "plan_mimebundle", "progress_line",
    "record_html", "result_html", "result_mimebundle", "row_window", "state_bundle", "state_html", "summary_line",
    "verdict_line",
    *_LAZY,
]
