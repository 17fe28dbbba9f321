"""A finished run played again in the live view, at a pace a person can follow.

The tutorial runs take milliseconds: their live view is a record before anyone can click. A
replay shows such a run (in memory or in the store) in the same live view a run shows, with its
real events in their real order (plan revisions and their diffs, failures, retries, approvals,
parallel lanes) and ends as the run's record, the one a live run leaves. Nothing runs again, and
the store is only read (a path is opened read-only; nothing is written).

:class:`RunReplay` is the source: to the live view's bridge (:class:`~planbook.views.live.LiveView`)
it looks like a runner (``state``, ``subscribe``, ``add_heartbeat``, ``clock``), and it re-emits the
recorded events one at a time, rebuilding from each what the run's state was then: the plan of
the revision in force, each step's status and times, the history of executions so far. A step
that ends takes its recorded snapshot (result, error, traceback, printed output), so its pane is
the run's. What the record cannot tell is said here: a step a replan rewrote before it ran shows
with the arguments it has in the run's last plan, and a step a replan removed before it ran shows
its line from the diff. When the run's last event is re-emitted the state is the run's own.

The pace (:data:`MIN_GAP`, :data:`MAX_GAP`): each gap between two events lasts as long as it did,
but at least 0.3 s and at most 4 s, divided by ``speed``. A 4 ms run of ten events plays in about
three seconds at ``speed=1``; a 40 s model call takes 4 s. ``step=True`` plays one step's moment
at a time (a step starting or ending, a plan changing), when the view's Next button is clicked.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..data.errors import RunNotFound, closest
from ..data.models import Event, Plan, PlanDiff, RunResult, Status, Step
from ..data.stepmark import StepMark
from .live import LiveView
from .publish import display
from .show import choose_view, show_live

#: a gap between two events lasts at least this long at ``speed=1`` (seconds): a click can land
MIN_GAP = 0.3
#: and at most this long (a long model call need not be waited out again)
MAX_GAP = 4.0
#: ``speed`` is a factor of the real pace, within these
SPEEDS = (0.01, 100.0)
#: the events that end one moment of step mode: a step starting or ending, a plan made or
#: changed, the run pausing or ending (the events between join the next moment)
MOMENTS = frozenset({"plan.created", "step.started", "step.finished", "step.failed", "step.skipped", "step.blocked",
                     "step.cached", "step.waiting", "run.paused", "run.finished"})
#: a completed step whose result a fork took over: no event says so, it is done from the start
_TAKEN_OVER = frozenset({StepMark.kept, StepMark.pinned})
#: step-by-step replays left unfinished that keep their widget open for the Next button (the latest
#: ones): an older one ends as its record, else every abandoned one would keep its view for the kernel's life
STEP_OPEN = 3
#: those replays, oldest first
STEPPING: list["Replay"] = []
#: above the live view's static copy, where widgets do not run
REPLAY_NOTE = "Replay of a finished run (where widgets do not run, this is how it stood when the cell finished)"


# ------------------------------------------------------------------ finding the run
def find_run(run: RunResult | str, *, store: Any = None) -> RunResult:
    """``run`` as a result: a :class:`RunResult` as it is, else a run id or a plan name (its latest
    run) in ``store`` (default: the one the magics and the CLI use). Reads only: a path is opened
    read-only, and a path with no store is an error, not a new store."""
    if isinstance(run, RunResult):
        return run
    if not isinstance(run, str) or not run.strip():
        raise TypeError(f"replay takes a RunResult, a run id or a plan name; got {type(run).__name__} {run!r}")
    from ..store import default_store_path, open_store

    where = store if store is not None else default_store_path()
    if isinstance(where, (str, os.PathLike)) and os.fspath(where) != ":memory:" \
            and not os.path.exists(os.path.expanduser(os.fspath(where))):
        raise RunNotFound(f"there is no run store at {os.fspath(where)}: pass store= the path the run was saved in "
                          "(the magics and the CLI use .planbook/runs.sqlite under the current directory)")
    opened = open_store(where, readonly=True)
    try:
        listed = opened.list_runs()
        ids = [summary.run_id for summary in listed]
        run_id = run if run in ids else opened.latest_run_id(plan_id=run)
        if run_id is None:
            known = ids + sorted({str(summary.plan_id) for summary in listed if summary.plan_id})
            raise RunNotFound(f"no run or plan {run!r} in the run store {opened.location}{closest(run, known)} "
                              "(planbook.runs() lists its runs; a plan name replays its latest run)")
        return opened.load_run(str(run_id)).result()
    finally:
        if isinstance(where, (str, os.PathLike)):
            opened.close()


def check_speed(speed: Any) -> float:
    """``speed`` as a float, or a ValueError naming what it takes."""
    low, high = SPEEDS
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not math.isfinite(speed) \
            or not low <= speed <= high:
        raise ValueError(f"speed={speed!r}: give a factor of the real pace from {low:g} to {high:g} "
                         "(0.5 is half as fast, 2 twice as fast)")
    return float(speed)


def shown_gap(gap: float, speed: float) -> float:
    """How long a recorded gap of ``gap`` seconds lasts in the replay (see the module docstring)."""
    return min(max(gap, MIN_GAP), MAX_GAP) / speed


# ------------------------------------------------------------------ the source of events
@dataclass
class ReplayState:
    """What a view reads of a run's state (the fields of ``engine.state.RunState`` it uses), as it was."""

    plan: Plan
    history: list[Step] = field(default_factory=list)
    revisions: list[PlanDiff] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    status: str = "running"
    started: bool = True
    reason: str | None = None
    error: str | None = None
    executions: int = 0
    replans: int = 0
    lineage: dict[str, Any] | None = None


class RunReplay:
    """A finished run's events re-emitted one by one; to a live view's bridge it reads as a runner."""

    #: a replay writes nowhere (a view reads the store a runner writes through this)
    recorder = None

    def __init__(self, result: RunResult) -> None:
        self.result = result
        self.recorded: list[Event] = list(result.events)
        self.max_steps, self.max_replans = result.max_steps, result.max_replans
        self.secrets, self.run_id = result.secrets, result.run_id
        self.at = 0  # events re-emitted so far
        self.now = self.recorded[0].time if self.recorded else 0.0
        self._final = {s.id: s for s in result.plan.steps}
        self._ended = 0  # step.finished / step.failed re-emitted (the history holds one entry each)
        self._diffs = 0
        self._handlers: list[Callable[[Event], None]] = []
        self._beats: list[Callable[[], None]] = []
        first = next((e for e in self.recorded if e.kind == "plan.created"), None)
        ids = list(first.data.get("steps") or []) if first is not None else []
        plan = self._plan_of(ids, first.revision) if ids and first is not None else self._plan_of(
            [s.id for s in result.plan.steps], result.plan.revision)
        self.state = ReplayState(plan=plan, lineage=result.lineage)
        self._where = self._index()  # step id -> its place in the state's plan (a long run: no scan per event)

    # the runner's surface a live view uses
    @property
    def plan(self) -> Plan:
        return self.state.plan

    def clock(self) -> float:
        """The run's clock where the replay is (a running step's time so far moves on with it)."""
        return self.now

    def subscribe(self, handler: Callable[[Event], None]) -> None:
        self._handlers.append(handler)

    def unsubscribe(self, handler: Callable[[Event], None]) -> None:
        if handler in self._handlers:
            self._handlers.remove(handler)

    def add_heartbeat(self, beat: Callable[[], None], every: float = 0.1) -> None:
        self._beats.append(beat)

    def remove_heartbeat(self, beat: Callable[[], None]) -> None:
        if beat in self._beats:
            self._beats.remove(beat)

    def beat(self) -> None:
        """Time passes between two events: the views draw what they held back."""
        for beat in list(self._beats):
            beat()

    # moving on
    @property
    def done(self) -> bool:
        return self.at >= len(self.recorded)

    def gap(self) -> float:
        """The recorded time between the last event re-emitted and the next one (seconds)."""
        if self.done or self.at == 0:
            return 0.0
        return max(0.0, self.recorded[self.at].time - self.recorded[self.at - 1].time)

    def emit(self) -> Event:
        """Re-emit the next event: the state becomes what it was after it, and the views hear it."""
        event = self._take()
        for handler in list(self._handlers):
            handler(event)
        return event

    def _take(self) -> Event:
        """Take in the next event: the state becomes what it was after it (the views are not told)."""
        event = self.recorded[self.at]
        self.at += 1
        self.now = event.time
        self._apply(event)
        self.state.events.append(event)
        if self.done and event.kind != "run.finished":  # a run that paused, or whose process died
            self._finish()
        return event

    def moment(self) -> int:
        """Re-emit the events up to the end of the next moment (see :data:`MOMENTS`); how many."""
        count = 0
        while not self.done:
            count += 1
            if self.emit().kind in MOMENTS:
                break
        return count

    def moments(self) -> int:
        """How many moments the whole run has (what step mode counts)."""
        return sum(e.kind in MOMENTS for e in self.recorded) + (not self.recorded or
                                                                self.recorded[-1].kind not in MOMENTS)

    # rebuilding the state
    def _spec(self, step_id: str) -> Step:
        """A step as its plan had it before it ran."""
        final = self._final.get(step_id)
        if final is not None:
            return final if final.mark in _TAKEN_OVER else final.fresh()
        ran = [s for s in self.result.history if s.id == step_id]
        if ran:
            return ran[-1].fresh()
        described = next((d.steps[step_id] for d in self.result.revisions if step_id in d.steps), "")
        return Step(id=step_id, task=described or step_id)

    def _plan_of(self, ids: list[str], revision: int) -> Plan:
        return self.result.plan.model_copy(update={"steps": [self._spec(i) for i in ids], "revision": revision})

    def _index(self) -> dict[str, int]:
        return {step.id: i for i, step in enumerate(self.state.plan.steps)}

    def _set(self, step_id: str | None, update: dict[str, Any] | None = None, *, to: Step | None = None) -> None:
        i = self._where.get(step_id) if step_id is not None else None
        if i is not None:
            steps = self.state.plan.steps
            steps[i] = to if to is not None else steps[i].copy_with(update or {})

    def _apply(self, event: Event) -> None:
        kind, s, data = event.kind, self.state, event.data
        if kind == "step.started":
            s.status = "running"
            s.executions += 1
            self._set(event.step, {"status": Status.in_progress, "attempts": int(data.get("attempt") or 1),
                                   "started_at": event.time, "finished_at": None, "result": None, "error": None,
                                   "traceback": None, "output": "", "mark": None, "from_run": None,
                                   "from_step": None})
        elif kind in ("step.finished", "step.failed"):
            history = self.result.history
            entry = history[self._ended] if self._ended < len(history) else None
            self._ended += 1
            if entry is not None and entry.id == event.step:
                s.history.append(entry)
                self._set(event.step, to=entry)
            else:  # a record without its history entry: its status at least
                self._set(event.step, {"status": Status.completed if kind == "step.finished" else Status.failed,
                                       "finished_at": event.time, "error": data.get("error")})
        elif kind in ("step.skipped", "step.blocked", "step.cached"):
            final = self._final.get(event.step or "")
            status = {"step.skipped": Status.skipped, "step.blocked": Status.blocked}.get(kind, Status.completed)
            if final is not None and final.status is status:
                self._set(event.step, to=final)
            else:
                self._set(event.step, {"status": status})
        elif kind == "step.waiting":
            self._set(event.step, {"mark": StepMark.waiting})
        elif kind == "step.decided":
            self._set(event.step, {"mark": None})
        elif kind == "plan.diff":
            diffs = self.result.revisions
            if self._diffs < len(diffs):
                s.revisions.append(diffs[self._diffs])
                s.replans += not diffs[self._diffs].rejected
            self._diffs += 1
        elif kind == "plan.created" and event.revision != s.plan.revision:
            now = {step.id: step for step in s.plan.steps}
            plan = self._plan_of(list(data.get("steps") or []), event.revision)
            plan.steps = [now[st.id] if st.id in now and now[st.id].status is Status.completed else st
                          for st in plan.steps]
            s.plan = plan
            self._where = self._index()
        elif kind == "run.paused":
            s.status = "paused"
        elif kind == "run.started":
            s.status = "running"
        elif kind == "run.finished":
            if self.done:
                self._finish()
            else:  # a run interrupted and resumed later: it stood interrupted here, its plan not yet the last
                s.status, s.reason, s.error = str(data.get("status") or "interrupted"), data.get("reason"), \
                    data.get("error")

    def _finish(self) -> None:
        """The run's last event: its state is the run's own."""
        r, s = self.result, self.state
        self._where = {}  # the run's own plan now: nothing sets its steps (they are the result's)
        s.plan, s.history, s.revisions = r.plan, list(r.history), list(r.revisions)
        s.status, s.reason, s.error, s.executions, s.replans = r.status, r.reason, r.error, r.executions, r.replans

    def skip_to_end(self) -> None:
        """Take in every event left without telling the views (an interrupted replay shows how it ended)."""
        while not self.done:
            self._take()
        if self.state.status in ("running", "paused") and self.result.status not in ("running", "paused"):
            self._finish()


# ------------------------------------------------------------------ playing it in a view
class Replay:
    """A replay shown in the live view: :func:`replay` makes one and plays it (or, ``step=True``,
    leaves it for the view's Next button or :meth:`next`). Displayed, it is one line."""

    def __init__(self, result: RunResult, *, speed: float = 1.0, step: bool = False,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.result, self.speed, self.step = result, check_speed(speed), step
        self.source = RunReplay(result)
        self.total = self.source.moments()
        self.moments = 0  # moments shown (step mode)
        self.sleep, self.clock = sleep, clock
        self.bridge: LiveView | Any = None
        self.view: Any = None  # the PlanView, where widgets run
        #: one moment at a time: a click (on the kernel's widget thread) and a cell's next() may meet
        self._stepping = threading.Lock()

    @property
    def done(self) -> bool:
        """True once the run's last event was shown and the view became the run's record."""
        return self.source.done and self.bridge is None

    def show(self, kind: str | None = None) -> "Replay":
        """Display the live view of the run as it started (a widget where widgets run)."""
        kind = kind or choose_view()
        if kind == "plain":
            raise RuntimeError("planbook.replay plays a run in a live view, and this process has none (no notebook "
                               "kernel, no IPython in a terminal): replay it in a notebook, or print(result) for its text")
        if self.step and kind != "widget":
            raise RuntimeError("replay(step=True) is driven by the live view's Next button, which needs a notebook "
                               "where widgets run; here, replay at a slower speed (speed=0.25)")
        if kind != "widget":
            self.bridge = show_live(self.source, kind=kind, rate=50.0, burst=5)  # type: ignore[arg-type]
            return self
        from .record import record_bundle
        from .state import ViewState
        from .widget import PlanView

        view = self.view = PlanView(self.source, note=REPLAY_NOTE)
        # a notebook saved during the replay keeps the run's record in its place
        view.widget.saved = record_bundle(ViewState.of_result(self.result))
        self._line()
        handle = display(view, display_id=True)
        self.bridge = LiveView(self.source, view, handle=handle, rate=50.0, burst=5)
        if self.step:
            view.widget.on_msg(self._on_front_end)  # the widget holds the replay until it ends
            STEPPING.append(self)
            for older in STEPPING[:-STEP_OPEN]:
                older.finish()
        return self

    def _line(self) -> None:
        if self.view is None:
            return
        what = f"Replay of run {self.result.run_id or '(not stored)'}"
        if self.step:
            line = f"{what}, step by step: {self.moments} of {self.total} moments shown"
        else:
            line = f"{what} at {self.speed:g}× its pace (each pause at least {MIN_GAP / self.speed:.2g} s)"
        self.view.widget.replay = {"line": self.result.secrets.line(line),
                                   "next": self.step and not self.source.done}

    def _on_front_end(self, widget: Any, content: Any, buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "replay" and content.get("action") == "next":
            self.next()

    def next(self) -> int:
        """Show the next moment (a step starting or ending, a plan changing); how many events it took.
        The last one turns the view into the run's record."""
        with self._stepping:
            if self.source.done:
                return 0
            count = self.source.moment()
            self.moments += 1
            if self.bridge is not None:
                self.bridge.draw_here()
            self._line()
            if self.source.done:
                self.end()
            return count

    def play(self, tick: float = 0.1) -> "Replay":
        """Re-emit every event at the replay's pace, drawing between them; the view ends as the run's
        record (also when interrupted: then at once, with the whole run)."""
        try:
            while not self.source.done:
                gap = self.source.gap()
                wait = shown_gap(gap, self.speed) if self.source.at else 0.0
                start, before = self.clock(), self.source.now
                while (left := start + wait - self.clock()) > 0:
                    self.source.now = before + gap * min(1.0, (self.clock() - start) / wait)
                    self.source.beat()
                    self.sleep(min(tick, left))
                self.source.emit()
        finally:
            self.finish()
        return self

    def finish(self) -> None:
        """Show the rest of the run at once: the view becomes the run's record."""
        self.source.skip_to_end()
        self.end()

    def end(self) -> None:
        """The view becomes the run's record (the one its live view left), and the replay lets go of
        it: a replay kept as a cell's value holds the run's result, not its view or widget."""
        bridge, self.bridge = self.bridge, None
        view, self.view = self.view, None
        if self in STEPPING:
            STEPPING.remove(self)
        if view is not None:
            view.widget.replay = {}
            if self.step:
                view.widget.on_msg(self._on_front_end, remove=True)
        if bridge is not None:
            bridge.close()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.result.secrets.line(repr(self))}

    def __repr__(self) -> str:
        how = "step by step" if self.step else f"at {self.speed:g}× its pace"
        where = "ended as its record above" if self.done else f"{self.moments} of {self.total} moments shown"
        return f"<replay of run {self.result.run_id or '(not stored)'} {how}: {where}>"


def replay(run: RunResult | str, *, speed: float = 1.0, step: bool = False, store: Any = None) -> Replay:
    """Play a finished run again in the live view, at ``speed`` × its real pace (each gap between
    two events at least :data:`MIN_GAP` seconds at speed 1): its real events in their real order,
    clickable throughout, ending as the run's record. ``run``: a :class:`RunResult`, a run id or a
    plan name (its latest stored run; ``store=`` as :func:`planbook.load_run` takes it). ``step=True``:
    the view's Next button shows one moment at a time (a step starting or ending, a plan changing).
    Nothing runs again; the store is only read."""
    player = Replay(find_run(run, store=store), speed=speed, step=step).show()
    return player if step else player.play()
