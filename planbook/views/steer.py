"""The live view of a background run, with its controls wired to the run's handle.

A background run's view draws on the run's thread (the kernel's main thread is free for
other cells and for clicks), and its buttons — Pause / Continue / Stop, and Approve /
Skip / Edit on a step that waits — arrive on the kernel's main thread as comm messages,
where they become decisions of the :class:`~planbook.handle.RunHandle` (``who="widget"``).
A decision the handle refuses (an edit that does not fit the tool) is shown in the
view, beside the step, instead of being raised into a cell nobody is running.
"""

from __future__ import annotations

from typing import Any

from .live import LIVE_NOTE, LiveView
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


def connect(bridge: LiveView, handle: Any) -> None:
    """Wire the view's buttons to ``handle`` (the run's thread draws; clicks arrive on the main thread)."""
    bridge.target.attach_handle(handle, lambda content: on_control(handle, content))


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
            handle.edit(step, args, who="widget")
        else:
            return f"unknown control {action!r}"
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        return str(exc).strip("'\"")
    return ""
