"""The parts a runner is made of, declared once for the modules that make up what it does.

:class:`~planbook.engine.runner.Runner` sets them in its ``__init__``; its tick loop
(:mod:`~planbook.engine._loop`), its recording of outcomes (:mod:`~planbook.engine._outcomes`)
and its stopping (:mod:`~planbook.engine._stop`) are its parts and reach them through
``self``. The declarations are for type checkers: at run time this class is empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..data.models import Plan, RunResult
    from ..outbound import RunSecrets
    from ..workers.agents import AgentRegistry
    from ..workers.planners import Planner
    from ..workers.tools import Toolbox
    from .budget import Budget
    from .config import RunConfig
    from .control import RunControl
    from .dispatch import Dispatcher
    from .door import Door
    from .eventbus import EventBus
    from .persistence import RunRecorder
    from .scheduler import Scheduler
    from .state import RunState
    from .steering import Steering


class RunnerParts:
    """What the runner's parts read of the runner that is made of them: its state, its options and helpers."""

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
        control: RunControl
        goal_only: str | None
        after_step: Any
        clock: Any
        _stale: bool
        _adopted: bool
        _until: str | None
        _cache_keys: dict[str, str]

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
        @property
        def run_id(self) -> str: ...
        def emit(self, kind: Any, step: str | None = None, **data: Any) -> Any: ...
        def result(self) -> RunResult: ...
