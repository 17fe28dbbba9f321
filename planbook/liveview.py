"""The bridge from a runner's events to a live view, throttled.

The runner calls its handlers on the thread that runs it (in a notebook: the kernel's
main thread), and this bridge changes views only on the thread that made it: it never
starts a thread, and events from other threads wait for the next render there. Steps
can finish thousands of times a second, and the notebook server caps iopub traffic, so
updates go through a token bucket (a short burst, then about ``rate`` per second); the
final state is always flushed when the run pauses or finishes. An update the bucket
held back is not lost: the view sets the runner's heartbeat, which the runner calls on
its own thread while a slow step works, and the heartbeat draws what is pending as soon
as the bucket allows (so a slow step shows as running, not the state of a burst ago).

Which view: the ipywidgets :class:`~planbook.widget.PlanView` in a kernel with comms;
otherwise (no ipywidgets, plain IPython in a terminal) a display handle updated with the
static HTML view, like ``tqdm.autonotebook`` (in a terminal, which prints every update,
the updates' text is one progress line); outside IPython, none. Nothing here imports
ipywidgets until a widget view is shown.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .models import Plan, PlanDiff, RunResult, Usage
from .runner import Runner

FLUSH_NOW = frozenset({"run.paused", "run.finished"})


@dataclass
class ViewState:
    """What a view shows: the plan and the run's counters. Built from a runner, a result or a plan."""

    plan: Plan
    status: str | None = None  # None: not run
    reason: str | None = None
    error: str | None = None
    executions: int = 0
    replans: int = 0
    max_steps: int | None = None
    max_replans: int | None = None
    revisions: list[PlanDiff] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    elapsed: float | None = None
    why: str | None = None  # why a run paused

    @classmethod
    def of(cls, source: Any) -> "ViewState":
        if isinstance(source, ViewState):
            return source
        if isinstance(source, Runner):
            return cls.of_runner(source)
        if isinstance(source, RunResult):
            return cls(
                plan=source.plan, status=source.status, reason=source.reason, error=source.error,
                executions=source.executions, replans=source.replans, max_steps=source.max_steps,
                max_replans=source.max_replans, revisions=list(source.revisions), usage=source.usage,
                why=_pause_reason(source.events) if source.status == "paused" else None,
            )
        if isinstance(source, Plan):
            return cls(plan=source)
        raise TypeError(f"a view shows a Plan, a RunResult or a Runner; got {type(source).__name__}")

    @classmethod
    def of_runner(cls, runner: Runner, *, usage: Usage | None = None, elapsed: float | None = None) -> "ViewState":
        s = runner.state
        return cls(
            plan=s.plan, status=s.status if s.started else None, reason=s.reason, error=s.error,
            executions=s.executions, replans=s.replans, max_steps=runner.max_steps, max_replans=runner.max_replans,
            revisions=list(s.revisions), usage=usage if usage is not None else Usage.from_events(s.events),
            elapsed=elapsed,
            why=_pause_reason(s.events) if s.status == "paused" else None,
        )


def _pause_reason(events: list[Any]) -> str | None:
    for event in reversed(events):
        if event.kind == "run.paused":
            return str(event.data.get("why") or "")
    return None


class ViewTarget(Protocol):
    def render(self, state: ViewState) -> None: ...


class Throttle:
    """A token bucket: ``burst`` updates at once, then ``rate`` per second on average."""

    def __init__(self, rate: float = 10.0, burst: int = 3, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.last = clock()

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class LiveView:
    """Subscribes to a runner and renders its state into ``target``, throttled.

    ``updates`` counts renders (what a test of the throttle reads). While attached, the
    view is the runner's heartbeat (every ``heartbeat`` seconds during a step's work) and
    draws held-back updates then. Call :meth:`close` when the run returns: it flushes
    anything pending, removes the heartbeat and unsubscribes.
    """

    def __init__(
        self,
        runner: Runner,
        target: ViewTarget,
        *,
        rate: float = 10.0,
        burst: int = 3,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float = 0.1,
    ) -> None:
        self.runner = runner
        self.target = target
        self.clock = clock
        self.throttle = Throttle(rate, burst, clock)
        self.updates = 0
        self.events = 0
        self.pending = False
        self.started = clock()
        self.last_draw = self.started
        #: the thread that made the view (the kernel's execution thread): the only one that renders
        self.thread = threading.get_ident()
        self.usage = Usage.from_events(runner.state.events)
        runner.subscribe(self)
        runner.add_heartbeat(self.beat, heartbeat)

    def __call__(self, event: Any) -> None:
        self.events += 1
        if event.kind == "llm.call":
            self.usage.add(event.data)
        if event.kind in FLUSH_NOW or self.throttle.allow():
            self.flush()
        else:
            self.pending = True

    def beat(self) -> None:
        """The runner's heartbeat (its thread, during a step's work): draw a held-back update
        if the bucket allows, and about once a second anyway, so the elapsed times move on."""
        due = self.pending or self.clock() - self.last_draw >= 1.0
        if due and threading.get_ident() == self.thread and self.throttle.allow():
            self.flush()

    def state(self) -> ViewState:
        return ViewState.of_runner(self.runner, usage=self.usage, elapsed=self.clock() - self.started)

    def flush(self) -> None:
        """Render now, if on the view's own thread (elsewhere: leave it pending for that thread)."""
        if threading.get_ident() != self.thread:
            self.pending = True
            return
        self.pending = False
        self.last_draw = self.clock()
        try:
            self.target.render(self.state())
        except Exception as exc:  # the view is broken, the run is not: say so once and stop drawing
            self.close()
            warnings.warn(
                f"the live view of plan {self.runner.plan.id!r} stopped updating ({type(exc).__name__}: {exc}); "
                "the run goes on and its result shows how it ended",
                stacklevel=2,
            )
            return
        self.updates += 1

    def close(self) -> None:
        """Stop listening and stop being the runner's heartbeat; render the last state if an update is still pending."""
        self.runner.unsubscribe(self)
        self.runner.remove_heartbeat(self.beat)
        if self.pending:
            self.flush()


# ------------------------------------------------------------------ fallback view
class _Bundle:
    """A display object whose mimebundle is fixed when it is made."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return self.data


#: above the static copy of a live widget: that copy is the plan as the run started
LIVE_NOTE = "Live view (where widgets do not run, this is the plan as the run started; the run result shows how it ended)"

#: rows the fallback view re-sends while a run is going (all rows once it stops)
LIVE_ROWS = 50


def state_bundle(state: ViewState, *, one_line: bool = False) -> dict[str, str]:
    """text/plain (the deterministic plan text, or with ``one_line`` a progress line),
    text/markdown and text/html of a state."""
    from .htmlview import state_html
    from .textview import format_markdown, format_plan

    rows = LIVE_ROWS if state.status == "running" else None
    return {"text/plain": progress_line(state) if one_line else format_plan(state.plan),
            "text/markdown": format_markdown(state.plan), "text/html": state_html(state, max_rows=rows)}


def progress_line(state: ViewState) -> str:
    """``Plan sums: 2/3 steps completed · run running · steps 2/12, replans 0/5``."""
    done = sum(1 for s in state.plan.steps if s.status.value == "completed")
    text = f"Plan {state.plan.display_title}: {done}/{len(state.plan.steps)} steps completed"
    if state.status is not None:
        text += f" · run {state.status}"
        if state.reason and state.reason != "paused":
            text += f" ({state.reason})"
    if state.max_steps is not None:
        text += f" · steps {state.executions}/{state.max_steps}, replans {state.replans}/{state.max_replans}"
    return text


class HtmlView:
    """The fallback live view: one display, updated in place through its display id.

    ``one_line``: updates carry a progress line as text/plain instead of the whole plan
    (a terminal prints every update; a front end replaces the output in place).
    """

    def __init__(self, source: Any, *, one_line: bool = False) -> None:
        self.state = ViewState.of(source)
        self.one_line = one_line
        self.handle: Any = None
        self.renders = 0

    def show(self) -> "HtmlView":
        from IPython.display import display

        self.handle = display(_Bundle(state_bundle(self.state)), display_id=True)
        return self

    def render(self, state: ViewState) -> None:
        self.state = state
        self.renders += 1
        if self.handle is not None:
            self.handle.update(_Bundle(state_bundle(state, one_line=self.one_line)))


# ------------------------------------------------------------------ choosing a view
def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def widgets_available(shell: Any = None) -> bool:
    """True in a kernel with comms where ipywidgets imports (what tqdm.autonotebook checks)."""
    shell = shell if shell is not None else _shell()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def show_live(runner: Runner, **throttle: Any) -> LiveView | None:
    """Display a live view of ``runner`` and subscribe it. None outside IPython."""
    shell = _shell()
    if shell is None:
        return None
    target: Any
    if widgets_available(shell):
        from IPython.display import display

        from .widget import PlanView

        target = PlanView(runner, note=LIVE_NOTE)
        display(target)
    else:
        target = HtmlView(runner, one_line=getattr(shell, "kernel", None) is None).show()
    return LiveView(runner, target, **throttle)


@contextmanager
def watch(runner: Runner, **throttle: Any) -> Iterator[LiveView | None]:
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
