"""Deterministic scenarios for :func:`planbook.compare`: one task, scripted agents, scripted
models, injected failures — set up afresh for each design, in that design's own formats.

A scenario is the same task for every design: the same goal, the same four steps, the
same agents and the same failure. What differs is how each design asks its model (the
OpenManus ``planning`` function, AgenticSeek's "headline + ```json plan" answers and its
review after every step, a pure planner for planbook and the lesson), so each design gets
its own scripted model, written from the same steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.models import Plan, Step
from ..workers.agents import AgentContext, ScriptedAgent

__all__ = ["Scenario", "TaskStep", "trip"]


@dataclass(frozen=True)
class TaskStep:
    """One step of a scenario, in the terms every design shares."""

    id: str
    agent: str
    task: str
    needs: tuple[str, ...] = ()

    def step(self) -> Step:
        return Step(id=self.id, agent=self.agent, task=self.task, needs=list(self.needs))

    def tagged(self) -> str:
        """The step as OpenManus writes it (no needs: OpenManus has none)."""
        return f"[{self.agent.upper()}] {self.task}"

    def seek(self) -> dict[str, Any]:
        """The step as an AgenticSeek task."""
        return {"agent": self.agent.capitalize(), "id": self.id, "need": list(self.needs), "task": self.task}


@dataclass
class Scenario:
    """A task, its steps, what replaces a step that fails, and the agents that do the work.

    ``failing`` is the id of the step whose agent reports failure; ``recovery`` are the steps
    that replace it and everything after it when a design repairs the plan.
    ``model_notices_failure`` False makes the AgenticSeek reviewer answer ``NO_UPDATE`` even
    after the failure (a weak model), which is where a soft ``need`` shows.
    """

    name: str
    goal: str
    steps: list[TaskStep]
    failing: str
    recovery: list[TaskStep]
    #: a factory per agent name: every run gets fresh agents (their ``calls`` are that run's)
    agents: dict[str, Callable[[], Any]] = field(default_factory=dict)
    model_notices_failure: bool = True

    # ------------------------------------------------------------- the plan
    def plan(self) -> Plan:
        """The plan every design starts from when it is given a plan rather than the goal."""
        return Plan(id=self.name, goal=self.goal, title=self.goal, steps=[s.step() for s in self.steps])

    def _after(self, *, keep_failed: bool = False) -> list[TaskStep]:
        """The whole plan once the failing step is repaired: the steps before it (and the failed
        one itself, which AgenticSeek's review must repeat), then the recovery steps."""
        index = [s.id for s in self.steps].index(self.failing) + (1 if keep_failed else 0)
        return [*self.steps[:index], *self.recovery]

    # ---------------------------------------------------------- each design
    def setup(self, strategy: str, faithful: bool = False, *, planned: bool = True) -> dict[str, Any]:
        """Fresh run options (``agents``, ``planner``) for ``strategy``; ``planned``: the design makes
        the first plan from the goal (else it is given the plan and its model only replans)."""
        from .model import ScriptedModel

        agents = self.make_agents()
        if strategy in ("planbook", "lesson"):
            return {"agents": agents, "planner": self.pure_planner}
        if strategy == "openmanus":
            if faithful:  # the seed's agent is given the step prompt, which lists every step
                agents = {name: _OwnStep(agent) for name, agent in agents.items()}
            create = {"name": "planning", "arguments": {"command": "create", "title": self.goal,
                                                        "steps": [s.tagged() for s in self.steps]}}
            update = {"name": "planning", "arguments": {"command": "update",
                                                        "steps": [s.tagged() for s in self._after()]}}
            return {"agents": agents, "planner": ScriptedModel([create, update] if planned else [update])}
        if strategy == "agenticseek":
            replies: list[Any] = [self.seek_answer(self.steps)] if planned else []
            replies += [self._review] * (len(self.steps) + len(self.recovery) + 2)
            return {"agents": agents, "planner": ScriptedModel(replies)}
        raise ValueError(f"scenario {self.name!r} has no setup for strategy {strategy!r}")

    def pure_planner(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        """The lesson's deterministic planner: the plan first, the repair after the failure, else nothing."""
        if last_error is None:
            return [s.step() for s in self.steps]
        if f"step {self.failing} failed" in last_error:
            return [s.step() for s in self.recovery]
        return []

    def seek_answer(self, steps: Sequence[TaskStep]) -> str:
        """An AgenticSeek planner answer: one headline per task, then the ```json plan."""
        heads = "".join(f"## Task {i}: {s.task}\n\n" for i, s in enumerate(steps, start=1))
        return heads + "```json\n" + json.dumps({"plan": [s.seek() for s in steps]}) + "\n```"

    def _review(self, messages: list[dict[str, Any]], tools: list[Any]) -> str:
        """The scripted reviewer: a repaired plan after the failing step's failure (if it notices), else NO_UPDATE."""
        asked = str(messages[-1].get("content") or "")
        if self.model_notices_failure and f"Agent {self.failing} work was a failure" in asked:
            return self.seek_answer(self._after(keep_failed=True))
        return "NO_UPDATE"

    def make_agents(self) -> dict[str, Any]:
        return {name: factory() for name, factory in self.agents.items()}


class _OwnStep:
    """A scripted agent in a faithful OpenManus flow: it is given the seed's step prompt, which
    quotes the whole plan, and answers its own step (``context.step``), as a model reading
    "You are now working on step N" would; matching the whole prompt would match every step."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.name = agent.name
        self.description = getattr(agent, "description", "")

    def __call__(self, task: str, context: AgentContext) -> Any:
        return self.agent(context.step.task if context.step is not None else task, context)

    def __repr__(self) -> str:
        return f"<{self.agent!r} reading its own step>"


# -------------------------------------------------------------------- trip
def _itinerary(task: str, context: AgentContext) -> str:
    """The writer uses what reached it: its needs' results, or the results quoted in its prompt."""
    seen = task + "\n" + "\n".join(str(v) for v in context.needs.values())
    hotel = "Hôtel des Canuts" if "Hôtel des Canuts" in seen else "no hotel"
    train = "TGV 8:04" if "TGV 8:04" in seen else "no train"
    return f"Saturday: {train} to Lyon, {hotel}; Sunday: Vieux Lyon and Fourvière"


def trip(*, model_notices_failure: bool = True) -> Scenario:
    """A weekend in Lyon: trains, a hotel (the old town is full: the web agent reports failure),
    an itinerary that needs both, and sending it. The repair looks in Villeurbanne instead."""
    steps = [
        TaskStep("1", "web", "Find trains from Paris to Lyon on Saturday morning"),
        TaskStep("2", "web", "Find a hotel in the old town under 120 EUR a night"),
        TaskStep("3", "writer", "Write the itinerary from the train times and the hotel", ("1", "2")),
        TaskStep("4", "writer", "Send the itinerary to both travellers", ("3",)),
    ]
    recovery = [
        TaskStep("5", "web", "Find a hotel in Villeurbanne under 120 EUR a night"),
        TaskStep("3", "writer", "Write the itinerary from the train times and the hotel", ("1", "5")),
        TaskStep("4", "writer", "Send the itinerary to both travellers", ("3",)),
    ]

    def web() -> ScriptedAgent:
        return ScriptedAgent(
            "web", {"trains": "TGV 8:04 Paris → Lyon 10:00, 2 × 39 EUR", "Villeurbanne": "Hôtel des Canuts, 95 EUR"},
            fail_on=["old town"], failure="every hotel in the old town is full",
            description="searches the web and browses pages")

    def writer() -> ScriptedAgent:
        return ScriptedAgent("writer", {"itinerary from": _itinerary, "Send": "sent to both travellers"},
                             description="writes and sends documents")

    return Scenario(
        name="trip", goal="Plan a weekend in Lyon for two: trains, a hotel and an itinerary",
        steps=steps, failing="2", recovery=recovery,
        agents={"web": web, "writer": writer},
        model_notices_failure=model_notices_failure,
    )
