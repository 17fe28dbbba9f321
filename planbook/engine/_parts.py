"""The parts a runner is made of, declared once for the modules that make up what it does.

:class:`~planbook.engine.runner.Runner` sets them in its ``__init__``; its tick loop
(:mod:`~planbook.engine._loop`), its recording of outcomes (:mod:`~planbook.engine._outcomes`)
and its stopping (:mod:`~planbook.engine._stop`) are its parts and reach them through
``self``. What the door and the plan changes may use of a run, the parts use too: that is
:class:`~planbook.engine.control.RunAccess`, declared once there; here is only what the parts
read besides. The declarations are for type checkers: at run time this class is empty (a
Protocol as a real base would bring its read-only ``door`` property along, and ``Runner``
assigns ``self.door``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..data.models import RunResult
    from .control import RunAccess
    from .door import Door
else:
    RunAccess = object  # for type checkers only: see the module's docstring


class RunnerParts(RunAccess):
    """What the runner's parts read of the runner that is made of them: a run's :class:`RunAccess`,
    its door as the door itself (the parts apply its inbox), and its other options and helpers."""

    if TYPE_CHECKING:
        door: Door | None
        clock: Any
        _stale: bool
        _adopted: bool
        _until: str | None
        _cache_keys: dict[str, str]

        @property
        def policy(self) -> tuple[str, ...]: ...
        @property
        def retries(self) -> int: ...
        @property
        def max_steps(self) -> int: ...
        @property
        def max_replans(self) -> int: ...
        @property
        def run_id(self) -> str: ...
        def result(self) -> RunResult: ...
