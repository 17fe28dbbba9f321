"""A deterministic stand-in for OpenManus's ReAct agents (for teaching and tests).

:class:`ScriptedReActAgent` takes steps the way OpenManus's agents do — a task needs a number
of them, a run() stops at its maximum — so a flow can show the per-agent step budget and the
FINISHED state without a model. It is importable from :mod:`planbook.compat.openmanus_flow`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..workers.agents import AgentContext, AgentReply

__all__ = ["SEED_AGENT_MAX_STEPS", "ScriptedReActAgent"]

#: OpenManus's Manus agent takes at most 20 steps per run()
SEED_AGENT_MAX_STEPS = 20


class ScriptedReActAgent:
    """A deterministic stand-in for an OpenManus ReAct agent: a task takes a number of steps.

    ``iterations`` maps a regex (searched in the task) to the steps that task needs
    (``default_iterations`` otherwise). Each step is recorded in ``calls``; a task that
    needs more than ``max_iterations`` stops there and fails with the seed's
    ``Terminated: Reached max steps``. A task matching ``finish_on`` sets ``state`` to
    ``"FINISHED"`` (OpenManus's terminate tool does that: the agent means the whole request
    is done).
    """

    def __init__(
        self,
        name: str,
        description: str = "a scripted agent that works in steps",
        *,
        iterations: Mapping[str, int] | None = None,
        default_iterations: int = 1,
        max_iterations: int = SEED_AGENT_MAX_STEPS,
        answers: Mapping[str, Any] | None = None,
        finish_on: Iterable[str] = (),
    ) -> None:
        self.name, self.description = name, description
        self.iterations = dict(iterations or {})
        self.default_iterations = default_iterations
        self.max_iterations = max_iterations
        self.answers = dict(answers or {})
        self.finish_on = list(finish_on)
        self.state = "IDLE"
        #: one record per step taken (what a model-backed agent's ``calls`` holds)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, task: str, context: AgentContext) -> AgentReply:
        if context.step is not None:  # faithful flows give the seed's step prompt: match the step's own task
            task = context.step.task
        needed = next((n for p, n in self.iterations.items() if re.search(p, task, re.IGNORECASE)), self.default_iterations)
        taken = min(needed, self.max_iterations)
        self.calls.extend({"task": task, "step": i + 1} for i in range(taken))
        if needed > self.max_iterations:
            return AgentReply(answer=f"Terminated: Reached max steps ({self.max_iterations})", ok=False,
                              notes=f"agent {self.name!r} needed {needed} steps and had {self.max_iterations}")
        if any(re.search(p, task, re.IGNORECASE) for p in self.finish_on):
            self.state = "FINISHED"
        answer = next((a for p, a in self.answers.items() if re.search(p, task, re.IGNORECASE)), f"done: {task}")
        return AgentReply(answer=answer, notes=f"{taken} step(s)")

    def __repr__(self) -> str:
        return f"<ScriptedReActAgent {self.name}>"
