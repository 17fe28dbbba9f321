"""The parts a runner is made of, declared once for the modules that make up what it does.

:class:`~planbook.engine.runner.Runner` sets them in its ``__init__``; its tick loop
(:mod:`~planbook.engine._loop`), its recording of outcomes (:mod:`~planbook.engine._record`)
and its stopping (:mod:`~planbook.engine._stop`) are its parts and reach them through
``self``. The declarations are for type checkers: at run time this class is empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..data.gcwindow import FreezeWindow
    from ..data.models import Plan, RunResult, Step
    from ..data.stepmark import StepMark
    from ..outbound import RunSecrets
    from ..workers.agents import AgentRegistry
    from ..workers.planners import Planner
    from ..workers.tools import Toolbox
    from .budget import Budget
    from .config import RunConfig
    from .decisions import Door
    from .dispatch import Dispatcher, Flight
    from .eventbus import EventBus
    from .persistence import RunRecorder
    from .scheduler import Scheduler
    from .state import RunState
    from .steering import Steering


class RunnerParts:
    """What the runner's parts share: its state, its options and helpers, and each other's methods."""

    if TYPE_CHECKING:
        state: RunState
        config: RunConfig
        budget: Budget
        dispatch: Dispatcher
        scheduler: Scheduler
        bus: EventBus
        tools: Toolbox
        agents: AgentRegistry
        planner: Planner | None
        secrets: RunSecrets
        recorder: RunRecorder | None
        door: Door | None
        steering: Steering | None
        goal_only: str | None
        after_step: Any
        clock: Any
        _gc: FreezeWindow
        _shared: dict[int, int]
        _stale: bool
        _adopted: bool
        _until: str | None
        _cache_keys: dict[str, str]
        _run_id: str
        #: a fork with ``reuse="identical"``: step id -> the parent's (tool, resolved args, result)
        _parent_calls: dict[str, tuple[Any, Any, Any]]
        _ending: tuple[Any, ...] | None
        _replan_for: Step | None
        _pause_why: str | None

        @property
        def plan(self) -> Plan: ...
        @property
        def finished(self) -> bool: ...
        @property
        def policy(self) -> tuple[str, ...]: ...
        @property
        def retries(self) -> int: ...
        @property
        def max_steps(self) -> int: ...
        @property
        def max_replans(self) -> int: ...
        @property
        def parallel(self) -> int: ...
        def emit(self, kind: Any, step: str | None = None, **data: Any) -> Any: ...
        def result(self) -> RunResult: ...
        # each part's methods the others call
        def _finish(self, status: Any, reason: Any, error: str | None = None,
                    exc: BaseException | None = None) -> None: ...
        def _complete(self) -> None: ...
        def _pause(self, why: str) -> None: ...
        def _interrupt(self, why: str = "") -> None: ...
        def _settle_leftovers(self) -> None: ...
        def _record(self, flight: Flight, *, kept: bool = False) -> None: ...
        def _uncount(self, flight: Flight, mark: StepMark | None) -> None: ...
        def _unshare(self, step: Step) -> None: ...
        def _unshare_history(self) -> None: ...
        def _changed(self, step: Step) -> None: ...
        def _apply_policy(self, step: Step) -> None: ...
