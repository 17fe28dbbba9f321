"""What a view calls on the handle of a background run it steers: a Protocol, so the views type
the handle without importing a surface (they sit below the notebook).

:class:`planbook.engine.background.RunHandle` is one, and so is the notebook's front that adds
the live view to it (:class:`planbook.notebook.handle.NotebookHandle`). The live view's buttons
(:mod:`planbook.views.steer`) and its Fork from here (:mod:`planbook.views.forkbox`) call only
what is listed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..data.models import RunResult
from ..engine.approvals import Who
from ..engine.runner import Runner


class SteeredRun(Protocol):
    """A background run's handle, as the views use it: read the run, give decisions, fork it."""

    @property
    def runner(self) -> Runner:
        """The run (read only: decisions go through the methods below, to the run's door)."""
        ...

    @property
    def waiting(self) -> list[str]:
        """The steps that wait for a decision, in plan order."""
        ...

    def pause(self, *, who: Who = "api") -> None: ...

    def resume(self, *, who: Who = "api") -> None: ...

    def stop(self, *, who: Who = "api") -> None: ...

    def approve(self, step_id: str | None = None, *, who: Who = "api") -> None: ...

    def skip(self, step_id: str | None = None, reason: str = "", *, who: Who = "api") -> None: ...

    def retry(self, step_id: str, *, who: Who = "api") -> None: ...

    def edit(self, step_id: str, args: Mapping[str, Any] | None = None, *, who: Who = "api",
             **kwargs: Any) -> None: ...

    def fork(self, parent: RunResult | str, *, at: str, **options: Any) -> SteeredRun:
        """Fork ``parent`` at ``at`` in the background: the child's handle, of the same kind."""
        ...


__all__ = ["SteeredRun"]
