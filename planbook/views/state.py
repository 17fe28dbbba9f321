"""The view model: one :class:`ViewState` that every view (text, HTML, widget, terminal) renders.

A state is built from a :class:`~planbook.data.models.Plan` (not run), a
:class:`~planbook.data.models.RunResult` (a finished or paused run) or a live
:class:`~planbook.engine.runner.Runner` (while it runs). It holds the plan (with each step's
status, timings, results), the run's counters and budgets, the revisions with their
diffs, the model usage and the timeline of executions, which it builds from the run's
events itself (``step.started`` / ``step.finished`` / ``step.failed``), so it works for
any engine that emits those events.

The layout logic every view shares is here, written once: the verdict and the budget
line (:func:`budget_line`, :func:`verdict_line`), the frontier (:func:`frontier`) and the
window of rows around the running steps (:func:`row_window`).

Nothing here imports IPython, ipywidgets or rich: the text view and ``print(plan)`` use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..data.models import Event, Plan, PlanDiff, RunResult, Status, Step, Usage

# the one record of an execution and its builder live in the data layer; here for the views' callers
from ..data.timeline import Execution, TimelineBuilder, critical_chain, with_overlaps
from ..outbound import RunSecrets, bounded

if TYPE_CHECKING:
    from ..engine.runner import Runner

#: how a run's verdict looks: ``ok`` (green), ``warn`` (amber), ``bad`` (red), ``info`` (blue)
RUN_TONES = {"completed": "ok", "failed": "bad", "interrupted": "warn", "paused": "info", "running": "info"}
#: a completed run that left steps undone is not a success colour
WARN_REASONS = frozenset({"steps_skipped"})
#: characters of a step's task, call, notes or error wherever a view shows it (a 2 MB error is
#: shown cut to this, saying so: :func:`planbook.outbound.bounded`); a run's own error gets
#: :data:`planbook.outbound.TEXT_LIMIT`
LINE_LIMIT = 2_000


def shown(text: str, hide: Any, limit: int = LINE_LIMIT) -> str:
    """``text`` as a view shows it: through ``hide`` (the run's gate) first, then cut to ``limit``
    characters, saying so (masked before the cut, so no fragment of a secret is left at the cut)."""
    return bounded(hide(text), limit) if text else text


#: rows of a going run in a view that cannot scroll the widget's way (the live view's fallback,
#: which re-sends them; the widget's static copy): a window around the running step, every row once it stops
LIVE_ROWS = 50
#: what ``elapsed`` means, wherever it is shown (the widget's tooltip says it)
ELAPSED_MEANS = "the run's working time: time paused at a breakpoint or after an interrupt is not counted"


def critical_path(executions: Sequence[Execution], plan: Plan) -> list[int]:
    """The chain of executions that had to run one after another — the same definition as
    ``RunResult.timeline`` (:mod:`planbook.data.timeline`), with the plan's needs."""
    needs = {s.id: s.needs for s in plan.steps}
    found = needs.get
    return critical_chain(executions, lambda i, ex: found(ex.step, ()))[0]


@dataclass
class ViewState:
    """What a view shows: the plan, the run's counters, budgets, revisions, usage and timeline."""

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
    #: the run's working time in seconds (:data:`ELAPSED_MEANS`); None before it runs
    elapsed: float | None = None
    why: str | None = None  # why a run paused
    timeline: list[Execution] = field(default_factory=list)
    #: time of the run's first event: timeline times are shown relative to it
    origin: float | None = None
    #: the run's clock when the state was taken (a running step's time so far)
    now: float | None = None
    #: the run's events (what marks a step answered from the cache or a resume: :mod:`.marks`)
    events: Sequence[Event] = ()
    #: the run's gate (its secrets): every text and result a view shows goes through it
    secrets: RunSecrets | None = None
    #: the run's id, and its lineage when it is a fork (a dict: planbook.data.lineage.Lineage dumped)
    run_id: str | None = None
    lineage: dict[str, Any] | None = None
    #: where the run is stored (a store's location), when known: a record's fork line names it
    store: str | None = None
    #: each execution's step as it ended (``RunResult.history``): the pane of every execution, also
    #: of a step a replan removed (:func:`planbook.views.panes.entry_of`)
    history: Sequence[Step] = ()

    @property
    def gate(self) -> RunSecrets:
        """The run's secrets; a plan not run (or read back) has those its own args name."""
        if self.secrets is None:
            self.secrets = RunSecrets.of_plan(self.plan)
        return self.secrets

    @classmethod
    def of(cls, source: Any) -> "ViewState":
        """A state of a Plan, a RunResult, a Runner (or a ViewState, returned as it is)."""
        if isinstance(source, ViewState):
            return source
        if isinstance(source, RunResult):
            return cls.of_result(source)
        if isinstance(source, Plan):
            return cls(plan=source)
        if hasattr(source, "state") and hasattr(source, "subscribe"):  # a Runner (no import: views sit above the engine)
            return cls.of_runner(source)
        raise TypeError(f"a view shows a Plan, a RunResult or a Runner; got {type(source).__name__}")

    @classmethod
    def of_result(cls, result: RunResult) -> "ViewState":
        builder = TimelineBuilder(result.history).feed_all(result.events)
        return cls(
            plan=result.plan, status=result.status, reason=result.reason, error=result.error,
            executions=result.executions, replans=result.replans, max_steps=result.max_steps,
            max_replans=result.max_replans, revisions=list(result.revisions), usage=result.usage,
            why=pause_reason(result.events) if result.status == "paused" else None,
            timeline=with_overlaps(builder.executions), origin=builder.origin,
            now=result.events[-1].time if result.events else None, elapsed=builder.working_time(),
            events=result.events, secrets=result.secrets, run_id=result.run_id, lineage=result.lineage,
            history=result.history,
        )

    @classmethod
    def of_runner(cls, runner: Runner, *, usage: Usage | None = None,
                  timeline: TimelineBuilder | None = None) -> "ViewState":
        """The state of a runner now. ``usage`` and ``timeline``: kept up to date by a live view
        from the events as they come (else rebuilt from all the events)."""
        s = runner.state
        if timeline is None:
            timeline = TimelineBuilder(s.history).feed_all(s.events)
        now = runner.clock()
        elapsed = timeline.working_time(now)
        return cls(
            plan=s.plan, status=s.status if s.started else None, reason=s.reason, error=s.error,
            executions=s.executions, replans=s.replans, max_steps=runner.max_steps, max_replans=runner.max_replans,
            revisions=list(s.revisions), usage=usage if usage is not None else Usage.from_events(s.events),
            elapsed=elapsed, why=pause_reason(s.events) if s.status == "paused" else None,
            timeline=list(timeline.executions), origin=timeline.origin, now=now, events=s.events,
            secrets=runner.secrets, run_id=runner.run_id, lineage=s.lineage,
            store=runner.recorder.store.location if runner.recorder is not None else None,
            history=s.history,
        )

    # ------------------------------------------------------------------ derived
    @property
    def counts(self) -> dict[Status, int]:
        return self.plan.counts()

    @property
    def done(self) -> int:
        return self.counts[Status.completed]

    @property
    def total(self) -> int:
        return len(self.plan.steps)

    @property
    def tone(self) -> str:
        """``ok``, ``warn``, ``bad`` or ``info``: the colour of the verdict and the progress bar."""
        if self.status is None:
            return "info"
        if self.status == "completed" and self.reason in WARN_REASONS:
            return "warn"
        return RUN_TONES.get(self.status, "info")

    def critical_path(self) -> list[int]:
        return critical_path(self.timeline, self.plan)


def pause_reason(events: list[Event]) -> str | None:
    for event in reversed(events):
        if event.kind == "run.paused":
            return str(event.data.get("why") or "")
    return None


# ------------------------------------------------------------------ shared layout
def budget_line(state: Any) -> str:
    """``steps 3/12, replans 0/5`` (+ ``, model calls 2, tokens 120``); '' before a run has budgets.

    ``state`` is a ViewState or a RunResult (they share these fields).
    """
    if state.max_steps is None:
        return ""
    text = f"steps {state.executions}/{state.max_steps}, replans {state.replans}/{state.max_replans}"
    if state.usage.calls:
        text += f", model calls {state.usage.calls}, tokens {state.usage.total_tokens}"
    return text


def verdict_line(state: Any) -> str:
    """``Run completed (goal_met): steps 3/12, replans 0/5``; a state not run yet: ``Not run``."""
    status = state.status
    if status is None:
        return "Not run"
    text = f"Run {status}"
    if state.reason and state.reason != status and state.reason != "paused":
        text += f" ({state.reason})"
    budgets = budget_line(state)
    return f"{text}: {budgets}" if budgets else text


def frontier(steps: Sequence[Step]) -> int:
    """Index of the first running step, else of the last step that is no longer waiting."""
    at = 0
    running, waiting = Status.in_progress, Status.not_started  # read once, not per step
    for i, step in enumerate(steps):
        status = step.status
        if status is running:
            return i
        if status is not waiting:
            at = i
    return at


def row_window(steps: Sequence[Step], max_rows: int, *, before: int | None = None) -> tuple[int, int]:
    """``(start, end)`` of the rows to show when a plan is longer than ``max_rows``.

    The window holds every running step when they fit (several run at once in a parallel
    run), with ``before`` rows of context above the first one (default: a third of the
    window), and follows the last finished step when nothing runs.
    """
    n = len(steps)
    if n <= max_rows:
        return 0, n
    in_progress = Status.in_progress
    running = [i for i, s in enumerate(steps) if s.status is in_progress]
    if running:
        return window_around(n, max_rows, running[0], running[-1], running[0], before)
    return window_around(n, max_rows, None, None, frontier(steps), before)


def window_around(n: int, max_rows: int, first: int | None, last: int | None, front: int,
                  before: int | None = None) -> tuple[int, int]:
    """:func:`row_window` from what it looks at: ``n`` rows, the first and last running ones
    (None: nothing runs) and the :func:`frontier` (a view that has the statuses as a string
    finds these without a pass over the steps)."""
    if n <= max_rows:
        return 0, n
    context = max_rows // 3 if before is None else before
    if first is not None and last is not None:
        start = first - context
        if last - start >= max_rows:  # the running steps are spread out: keep the first ones in view
            start = first - min(context, max(0, max_rows - 1 - (last - first)))
    else:
        start = front - context
    start = max(0, min(start, n - max_rows))
    return start, start + max_rows


def window_of_codes(codes: str, max_rows: int) -> tuple[int, int]:
    """:func:`row_window` of steps given as their status letters (``r`` running, ``n`` not
    started: see ``planbook.views.widget.STATUS_CODES``), read with string searches."""
    first = codes.find("r")
    if first >= 0:
        return window_around(len(codes), max_rows, first, codes.rfind("r"), first)
    return window_around(len(codes), max_rows, None, None, max(0, len(codes.rstrip("n")) - 1))
