"""A run's budget defaults, written once.

The engine's options (:data:`planbook.engine.config.OPTIONS`) own every run option and its
default; these two live down here because the data layer needs them too: a
:class:`~planbook.data.models.RunResult` states its budgets, and a store (below the engine)
reads a run's budgets back from an older file that did not record them.
"""

from __future__ import annotations

#: executions a run may make, replans included (DESIGN's vocabulary: "budget")
MAX_STEPS = 12
#: new plans a run may ask its planner for
MAX_REPLANS = 5

__all__ = ["MAX_REPLANS", "MAX_STEPS"]
