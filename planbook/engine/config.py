"""A run's settings, as one checked value.

:class:`RunConfig` is everything a caller chooses about a run (policy, budgets,
retries, timeouts, parallelism, where steps execute). Together with the
:class:`~planbook.engine.state.RunState` it is enough to continue a run later, so it is plain
data: the executor object itself is kept out of what is serialised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .policies import normalise_policy


def _whole(name: str, value: Any, *, minimum: int) -> int:
    # bool is an int subclass: max_steps=True must not mean "one step"
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return value


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds (or None for no limit), got {value!r}")
    return None if math.isinf(value) else float(value)


class RunConfig(BaseModel):
    """The settings of one run. Build it with :meth:`build`, which checks every value."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    #: the failure policy chain (``("retry", "replan")``); a step's own ``on_failure`` overrides it
    policy: tuple[str, ...] = ("abort",)
    #: extra attempts per step for the retry policy
    retries: int = 1
    max_steps: int = 12
    max_replans: int = 5
    step_timeout: float | None = None
    #: how many ready steps may run at once (1: one at a time, in plan order)
    parallel: int = 1
    #: where steps run: None (planbook's own), or any ``concurrent.futures.Executor``
    executor: Any = Field(default=None, exclude=True)
    #: a description of the executor for stores and views (``"threads"``, ``"ClientExecutor"``)
    executor_name: str = "inline"
    #: the cross-run step cache (with a store): None answers only tools registered with
    #: ``cache=True`` from earlier runs, True every tool that does not say ``cache=False``,
    #: False none. Off by default: a tool that reads the world would give a stale answer.
    cache: bool | None = None

    @classmethod
    def build(
        cls,
        *,
        on_failure: str | Sequence[str] | None = None,
        has_planner: bool = False,
        retries: int | None = None,
        max_steps: int = 12,
        max_replans: int = 5,
        step_timeout: float | None = None,
        parallel: int = 1,
        executor: Any = None,
        cache: bool | None = None,
    ) -> "RunConfig":
        """Check and combine the options a caller passed (``run()``, ``Runner``, magics, CLI)."""
        _whole("max_steps", max_steps, minimum=0)
        _whole("max_replans", max_replans, minimum=0)
        _whole("parallel", parallel, minimum=1)
        if retries is not None:
            _whole("retries", retries, minimum=0)
        timeout = _seconds("step_timeout", step_timeout)
        policy = normalise_policy(on_failure, has_planner=has_planner)
        if retries == 0 and "retry" in policy:
            raise ValueError("on_failure includes 'retry' but retries=0, so nothing would be retried: "
                             "pass retries=N (N >= 1), or leave retries out for one retry")
        if cache not in (None, True, False):
            raise TypeError(f"cache must be True (reuse earlier runs' results of the same tool calls), False "
                            f"(never) or None (only tools registered with cache=True), got {cache!r}")
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError(f"executor must be a concurrent.futures.Executor (something with .submit), "
                            f"got {type(executor).__name__}")
        if executor is not None:
            name = type(executor).__name__
        elif parallel > 1:
            name = "threads"
        else:
            name = "inline"
        return cls(policy=policy, retries=1 if retries is None else retries, max_steps=max_steps,
                   max_replans=max_replans, step_timeout=timeout, parallel=parallel, executor=executor,
                   executor_name=name, cache=cache)
