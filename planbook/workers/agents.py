"""Agents: executors that get a step's task in words and report success or failure.

An agent sees only what the step declared: the plan status, its own task and the
results of its ``needs`` (not the whole history). It must *say* whether it succeeded;
returning is not success by itself (the OpenManus pitfall of marking every step
completed whenever ``run()`` returns).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..data.models import Step


class AgentContext:
    """What an agent is told about the run when it works on one step.

    ``plan_text`` (the plan with status marks) is built only when an agent reads it:
    formatting the whole plan for every step made long agent plans quadratic.
    """

    def __init__(
        self,
        goal: str,
        plan_text: str | Callable[[], str] = "",
        step: Step | None = None,
        needs: dict[str, Any] | None = None,
        emit: Callable[..., Any] | None = None,
    ) -> None:
        self.goal = goal
        self._plan_text = plan_text
        self.step = step
        self.needs = needs if needs is not None else {}
        #: ``emit("llm.call", **data)`` records an event in the run (model agents report usage this way).
        self.emit = emit

    @property
    def plan_text(self) -> str:
        if callable(self._plan_text):
            self._plan_text = self._plan_text()
        return self._plan_text

    def __repr__(self) -> str:
        return f"AgentContext(goal={self.goal!r}, step={getattr(self.step, 'id', None)!r}, needs={list(self.needs)})"


@dataclass
class AgentReply:
    """An agent's answer. ``ok`` False makes the step fail with ``answer`` (or ``notes``) as the error.

    ``stop``: the agent says the goal is reached (OpenManus's ``FINISHED``): the run ends
    after this step with reason ``stopped``, the steps not started are skipped with
    ``stop`` as their note.
    """

    answer: Any
    ok: bool = True
    notes: str = ""
    stop: str | None = None


@runtime_checkable
class Agent(Protocol):
    name: str
    description: str

    def __call__(self, task: str, context: AgentContext) -> AgentReply: ...


class FunctionAgent:
    """Wrap a Python function as an agent.

    The function is called as ``fn(task, context)`` (or ``fn(task)`` if it takes one
    argument). Returning a value is success; raising is failure; returning an
    :class:`AgentReply` says it explicitly.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "agent")
        doc = (fn.__doc__ or "").strip()
        self.description = description if description is not None else (doc.splitlines()[0] if doc else "")
        try:
            params = [
                p
                for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
            ]
            # fn(task) only when it cannot take a second argument: fn(task, context=None) gets the context
            self._arity = 2 if len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params) else 1
        except (TypeError, ValueError):
            self._arity = 2

    def __call__(self, task: str, context: AgentContext) -> AgentReply:
        value = self.fn(task) if self._arity == 1 else self.fn(task, context)
        if inspect.isawaitable(value):  # an async function: the executor awaits the reply
            return _reply_later(value)  # type: ignore[return-value]
        return value if isinstance(value, AgentReply) else AgentReply(answer=value, ok=True)

    def __repr__(self) -> str:
        return f"<FunctionAgent {self.name}>"


async def _reply_later(awaitable: Any) -> AgentReply:
    value = await awaitable
    return value if isinstance(value, AgentReply) else AgentReply(answer=value, ok=True)


class ScriptedAgent:
    """A deterministic agent for teaching and tests.

    ``answers`` maps a regex (searched in the task) to an answer; the first match wins,
    else ``default``. An answer may be a callable ``(task, context) -> value``. Tasks
    matching any pattern in ``fail_on`` fail with ``failure``. ``calls`` records
    every task it was given, so tests can check what the agent saw.
    """

    def __init__(
        self,
        name: str,
        answers: Mapping[str, Any] | None = None,
        *,
        default: Any = "done",
        fail_on: Iterable[str] = (),
        failure: str = "the agent could not do this task",
        description: str = "a scripted agent that gives fixed answers",
    ) -> None:
        self.name = name
        self.description = description
        self.answers = dict(answers or {})
        self.default = default
        self.fail_on = list(fail_on)
        self.failure = failure
        self.calls: list[AgentContext] = []

    def __call__(self, task: str, context: AgentContext) -> AgentReply:
        self.calls.append(context)
        for pattern in self.fail_on:
            if re.search(pattern, task, re.IGNORECASE):
                return AgentReply(answer=None, ok=False, notes=f"{self.failure} (task matched {pattern!r})")
        for pattern, answer in self.answers.items():
            if re.search(pattern, task, re.IGNORECASE):
                return AgentReply(answer=answer(task, context) if callable(answer) else answer)
        return AgentReply(answer=self.default(task, context) if callable(self.default) else self.default)

    def __repr__(self) -> str:
        return f"<ScriptedAgent {self.name}>"


AgentsLike = Mapping[str, Any] | Iterable[Any] | None


class AgentRegistry(dict):
    """Agents by name, matched without regard to case.

    OpenManus routes ``[DATA_ANALYSIS]`` tags to an agent keyed ``data_analysis``; here
    the tag, the YAML ``agent:`` field and the registered name may differ in case and
    still match (exactly one agent per name, whatever its case). The keys keep the case
    they were registered with, for display.
    """

    def __init__(self, items: Iterable[tuple[str, Agent]] = ()) -> None:
        super().__init__()
        self._folded: dict[str, str] = {}
        for name, agent in items:
            folded = name.casefold()
            if folded in self._folded:
                raise ValueError(
                    f"agents {self._folded[folded]!r} and {name!r} differ only in case; "
                    "agent names are matched without regard to case, so give them different names"
                )
            self._folded[folded] = name
            super().__setitem__(name, agent)

    def _key(self, name: object) -> object:
        return self._folded.get(name.casefold(), name) if isinstance(name, str) else name

    def __contains__(self, name: object) -> bool:
        return super().__contains__(self._key(name))

    def __getitem__(self, name: str) -> Agent:
        return super().__getitem__(self._key(name))

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(self._key(name), default)


def as_agents(agents: AgentsLike) -> AgentRegistry:
    """Accept ``{name: agent_or_function}`` or a list of agents (each with ``.name``)."""
    if agents is None:
        return AgentRegistry()
    if isinstance(agents, AgentRegistry):
        return agents
    if isinstance(agents, Mapping):
        items = list(agents.items())
    elif isinstance(agents, (str, bytes)) or not isinstance(agents, Iterable):
        raise TypeError(f"agents must be a mapping of name to agent or a list of agents; got {type(agents).__name__}")
    else:
        items = []
        for a in agents:
            name = getattr(a, "name", None)
            if not isinstance(name, str):
                raise TypeError(f"agent {a!r} has no string .name; pass agents as a {{name: agent}} mapping instead")
            items.append((name, a))
    checked: list[tuple[str, Agent]] = []
    for name, agent in items:
        if not callable(agent):
            raise TypeError(f"agent {name!r} is not callable: {agent!r}")
        if not hasattr(agent, "description") or not hasattr(agent, "name"):
            agent = FunctionAgent(agent, name=name)
        checked.append((name, agent))
    return AgentRegistry(checked)
