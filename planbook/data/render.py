"""The one door from the models to the views.

Models must not import views (views sit above them), yet ``print(plan)`` and a notebook's
display of a plan or a run result need the text and HTML views. The views register
their renderers here when :mod:`planbook.views` is imported (``import planbook`` does,
and it is light: no IPython, no widgets); a model asks for one by name. This module
imports nothing above it: a renderer missing here is an error that says what to import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_RENDERERS: dict[str, Callable[..., Any]] = {}

#: the names a model may ask for (what planbook.views registers)
NAMES = ("plan_text", "plan_bundle", "diff_text", "diff_bundle", "result_text", "result_bundle", "step_pane",
         "rundiff_text", "rundiff_html", "rundiff_bundle", "runlist_text", "runlist_bundle")


def register(name: str, renderer: Callable[..., Any]) -> None:
    """Make ``renderer`` the one used for ``name`` (a view module calls this when imported)."""
    if name not in NAMES:
        raise ValueError(f"unknown renderer name {name!r}; use one of {', '.join(NAMES)}")
    _RENDERERS[name] = renderer


def render(name: str, obj: Any, *args: Any) -> Any:
    """Render ``obj`` (with ``args``: which step of a run) with the renderer registered for ``name``."""
    renderer = _RENDERERS.get(name)
    if renderer is None:
        raise LookupError(f"no renderer registered for {name!r}: import planbook.views (import planbook does) "
                          "before showing a plan or a run")
    return renderer(obj, *args)
