"""The live view of a background run, with its controls wired to the run's handle.

A background run's view draws on the run's thread (the kernel's main thread is free for
other cells and for clicks), and its buttons — Pause / Continue / Stop, and Approve /
Skip / Edit on a step that waits — arrive on the kernel's main thread as comm messages,
where they become decisions of the run's handle (``who="widget"``), typed as the
:class:`~planbook.views.steered.SteeredRun` it is. A decision the handle refuses (an edit that
does not fit the tool, an edit after Continue, any decision once the run ended) is shown in
the view as one line, beside the step, instead of being raised into a cell nobody is running.
When the run ends, every display of its handle becomes the run's static record
(:func:`final_record`, which lists the decisions people gave); keeping those displays is the
notebook's (:mod:`planbook.notebook.handle`), which owns the kernel's display plumbing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..engine.runner import Runner
from .live import LIVE_NOTE, LiveView
from .show import choose_view
from .steered import SteeredRun


def background_view(runner: Runner, *, required: bool = False) -> LiveView | None:
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

    def attach_handle(self, handle: SteeredRun, control: Callable[[dict[str, Any]], str]) -> None: ...


def connect(bridge: LiveView, handle: SteeredRun) -> None:
    """Wire the view's buttons to ``handle`` (the run's thread draws; clicks arrive on the main thread)."""
    target = bridge.target
    if not isinstance(target, Steerable):  # background_view's bridges draw on a PlanView: it has them
        raise TypeError(f"{type(target).__name__} has no buttons to wire to a run's handle")
    target.attach_handle(handle, lambda content: on_control(handle, content))


def on_control(handle: SteeredRun, content: dict[str, Any]) -> str:
    """Apply one message from the view's buttons; returns the error to show ('' when it was taken)."""
    action, step = content.get("action"), content.get("step") or None
    if action in ("retry", "edit") and not isinstance(step, str):
        return f"say which step to {action}"
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
        elif action == "retry" and isinstance(step, str):
            handle.retry(step, who="widget")
        elif action == "edit" and isinstance(step, str):
            args = content.get("args")
            if isinstance(args, str):
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


def final_record(runner: Runner, bridge: LiveView | None) -> dict[str, str]:
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
