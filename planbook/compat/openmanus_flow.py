"""OpenManus's PlanningFlow on planbook's runner: a model writes the plan with the
``planning`` tool, each step goes to the agent its ``[TAG]`` names, a model sums up.

The flow is a bundle over the public engine: a planner (:class:`OpenManusPlanner`, the
model offered only the planning tool), agent wrappers (routing, the seed's step prompt,
the per-agent step budget, the FINISHED check as ``AgentReply(stop=...)``) and an event handler that writes the run's statuses into
the :class:`~planbook.compat.openmanus.PlanningTool`, so ``get`` shows the truth.

By default planbook's fixes apply; ``faithful=True`` behaves as the seed's flow, each
pitfall included (a raising step runs again until ``max_steps`` ends the run, a step is
completed whenever its agent returns, an unknown tag goes to the first agent...). Every
difference is listed, once, in the table of ``planbook/compat/README.md``.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..data.errors import PlanError, PlanningError, Problem
from ..data.models import Event, Plan, RunResult, Status, Step
from ..engine.runner import Runner
from ..llm.text import shorten
from ..spec.formats import is_plan_spec
from ..workers.agents import AgentContext, AgentReply, as_agents
from ..workers.planners import PlanningContext
from .model import as_chat_model
from .openmanus import PlanningTool, ToolError
from .openmanus_agents import SEED_AGENT_MAX_STEPS
from .openmanus_text import TAG, step_text

__all__ = [
    "AGENTS_NOTE", "DEFAULT_STEPS", "FlowResult", "OpenManusPlanner", "PLANNING_REQUEST", "PLANNING_SYSTEM",
    "PlanningFlow", "RERUN_FOREVER", "SEED_STEP_PROMPT", "STEP_PROMPT", "SUMMARY_REQUEST", "SUMMARY_SYSTEM",
]

# The seed's prompts, word for word (typos included: a ported prompt must be the same prompt).
PLANNING_SYSTEM = (
    "You are a planning assistant. Create a concise, actionable plan with clear steps. "
    "Focus on key milestones rather than detailed sub-steps. "
    "Optimize for clarity and efficiency."
)
AGENTS_NOTE = (
    "\nNow we have {agents} agents. "
    "The infomation of them are below: {agents_json}\n"
    "When creating steps in the planning tool, please specify the agent names using the format '[agent_name]'."
)
PLANNING_REQUEST = "Create a reasonable plan with clear steps to accomplish the task: {request}"
STEP_PROMPT = """\
CURRENT PLAN STATUS:
{plan_status}

YOUR CURRENT TASK:
You are now working on step {index}: "{step_text}"

Please only execute this current step using the appropriate tools. When you're done, provide a summary of what you accomplished.
"""
SUMMARY_SYSTEM = "You are a planning assistant. Your task is to summarize the completed plan."
#: the seed's step prompt as it reaches the model: the source's indentation is part of the string
SEED_STEP_PROMPT = (
    "\n        CURRENT PLAN STATUS:\n        {plan_status}\n\n        YOUR CURRENT TASK:\n"
    "        You are now working on step {index}: \"{step_text}\"\n\n"
    "        Please only execute this current step using the appropriate tools. "
    "When you're done, provide a summary of what you accomplished.\n        "
)
SUMMARY_REQUEST = (
    "The plan has been completed. Here is the final plan status:\n\n{plan_text}\n\n"
    "Please provide a summary of what was accomplished and any final thoughts."
)
#: planbook's words when the plan did not complete (the seed says "completed" whatever happened)
SUMMARY_REQUEST_UNFINISHED = (
    "The run ended {status} ({reason}){error}. Here is the final plan status:\n\n{plan_text}\n\n"
    "Please provide a summary of what was accomplished and what was not."
)
#: planbook's addition: after a failure (policy ``replan``) the model updates the plan with the same tool
REPLAN_REQUEST = (
    "The plan needs changing: {error}\n\nHere is the current plan status:\n\n{plan_text}\n\n"
    "Call the planning tool with command \"update\" and the whole new list of steps to accomplish the task: "
    "{request}. Steps whose text you keep unchanged keep their progress."
)
DEFAULT_STEPS = ["Analyze request", "Execute task", "Verify results"]
#: faithful: a step whose agent raises runs again (the seed picks the first step not completed,
#: and a raising step stays in progress): only the run's ``max_steps`` stops it
RERUN_FOREVER = 10**9

_LOOSE_TAG = re.compile(r"\[([A-Za-z][A-Za-z0-9_ \-]*)\]")


@dataclass
class FlowResult:
    """What :meth:`PlanningFlow.run` returns: the run, the tool's final plan text and the summary."""

    run: RunResult
    plan_text: str
    summary: str | None = None
    summary_error: str | None = None
    #: each step's prompt in the seed's words (plan status + current task): with ``faithful``,
    #: exactly what the agent was given; by default the agent is given its task, and the plan
    #: text in its context, and this is the same prompt without the source's indentation
    step_prompts: list[str] = field(default_factory=list)
    #: ``(step id, agent, budget given, steps spent)`` for agents that count steps
    budgets: list[tuple[str, str, int, int]] = field(default_factory=list)
    summary_call: dict[str, Any] | None = None
    #: faithful: each step's index in the tool's plan, for the seed's "Error executing step N" lines
    positions: dict[str, int] | None = None
    #: faithful: what the seed's ``execute()`` returns when it makes no plan
    #: (``Execution failed: ...`` where it raises, ``Failed to create plan for: ...``)
    ending: str | None = None

    @property
    def ok(self) -> bool:
        return self.run.ok

    @property
    def status(self) -> str:
        return self.run.status

    @property
    def reason(self) -> str | None:
        return self.run.reason

    @property
    def answers(self) -> list[tuple[str, Any]]:
        """Every execution's answer, in order: ``(step id, answer)``."""
        return [(s.id, s.result) for s in self.run.history]

    def text(self) -> str:
        """What the seed's ``execute()`` returns: each step's result, then ``Plan completed:`` and the summary.

        With ``faithful`` an execution that raised is the seed's ``Error executing step N: message``,
        and a request that made no plan returns the seed's text for it (:attr:`ending`).
        """
        if self.ending is not None:
            return self.ending
        out = ""
        for step in self.run.history:
            if self.positions is not None and step.status is Status.failed and step.error is not None:
                out += f"Error executing step {self.positions.get(step.id, step.id)}: {_message(step.error)}\n"
            else:
                out += f"{step.result}\n"
        return out + (f"Plan completed:\n\n{self.summary}" if self.summary is not None else "")

    def __str__(self) -> str:
        tail = f"\nSummary: {self.summary}" if self.summary else ""
        return f"{self.plan_text}\nRun: {self.run.status} ({self.run.reason}){tail}"


def _message(error: str) -> str:
    """An exception's own message (``str(exc)``) from a step's error, which starts with its type."""
    kind, sep, message = error.partition(": ")
    if sep and re.fullmatch(r"[A-Za-z_][\w.]*", kind):
        return message
    return "" if re.fullmatch(r"[A-Za-z_][\w.]*", error) else error


class PlanningFlow:
    """OpenManus's PlanningFlow. ``agents``: one agent, a list or a ``{key: agent}`` dict.

    ``planner`` is the model that writes the plan and the summary: a
    :class:`~planbook.compat.model.ScriptedModel`, an ``LLMPlanner``/``LLMAgent`` (its
    client is used with the seed's prompts) or a ``ModelClient``. ``executor_keys`` are the
    agents steps may be routed to (all by default); untagged steps go to
    ``primary_agent`` (the first agent by default). ``agent_max_steps`` is the step
    budget given to agents that count steps (``max_iterations`` + ``calls``, like
    ``LLMAgent``): each step gets all of it, or, with ``faithful``, what the previous
    steps left (20 by default, as Manus). ``max_attempts`` asks the model again, with the
    tool's error, when it makes no plan (1: the seed asks once; with ``faithful`` the first
    plan is asked for once, and a planning call that fails ends the run as the seed's does).
    """

    def __init__(
        self,
        agents: Any,
        *,
        planner: Any,
        executor_keys: Iterable[str] | None = None,
        primary_agent: str | None = None,
        faithful: bool = False,
        planning_tool: PlanningTool | None = None,
        plan_id: str | None = None,
        agent_max_steps: int | None = None,
        max_attempts: int = 1,
    ) -> None:
        self.faithful = faithful
        #: None: the flow runs written plans only (``planbook.run(plan, strategy="openmanus")``)
        self.model = as_chat_model(planner) if planner is not None else None
        self.agents = as_agents(self._agent_dict(agents))
        if not self.agents:
            raise ValueError("PlanningFlow needs at least one agent")
        keys = list(self.agents)
        self.primary_agent = primary_agent if primary_agent is not None else keys[0]
        self.executor_keys = list(executor_keys) if executor_keys is not None else keys
        for key in [self.primary_agent, *self.executor_keys]:
            if key not in self.agents:
                raise ValueError(f"{key!r} is not one of the agents: {', '.join(keys)}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.max_attempts = max_attempts
        self.tool = planning_tool or PlanningTool(faithful=faithful)
        self._id_base = plan_id or "plan"
        self.plan_id = plan_id or "plan_1"
        if agent_max_steps is None and faithful:
            agent_max_steps = SEED_AGENT_MAX_STEPS
        if agent_max_steps is not None and agent_max_steps < 1:
            raise ValueError(f"agent_max_steps must be at least 1, got {agent_max_steps}")
        self.agent_max_steps = agent_max_steps
        self._spent: dict[str, int] = {}  # faithful: steps each agent used since its counter last reset
        self._prompts: list[str] = []
        self._budgets: list[tuple[str, str, int, int]] = []
        self._ending: str | None = None  # faithful: the seed's execute() text when no plan was made

    def _agent_dict(self, agents: Any) -> Any:
        """One agent, a list or a dict, as the seed's BaseFlow accepts them.

        The seed keys one agent ``"default"`` and a list ``"agent_0"``, ``"agent_1"``...
        (so no ``[TAG]`` can name them); by default they are keyed by their names.
        """
        single = callable(agents) and not isinstance(agents, Mapping)
        if self.faithful and single:
            return {"default": agents}
        if self.faithful and not isinstance(agents, Mapping):
            return {f"agent_{i}": agent for i, agent in enumerate(agents)}
        return [agents] if single else agents

    # ------------------------------------------------------------------ prompts
    def system_prompt(self) -> str:
        """The seed's planning system prompt; with more than one executor, their names and descriptions."""
        described = [
            {"name": key.upper(), "description": getattr(self.agents[key], "description", "")}
            for key in self.executor_keys
        ]
        content = PLANNING_SYSTEM
        if len(described) > 1:
            content += AGENTS_NOTE.format(agents=described, agents_json=json.dumps(described))
        return content

    def route(self, text: str, index: int) -> str:
        """The agent key a step goes to; raises PlanError (default) for a tag that names no executor."""
        match = TAG.search(text)
        tag = match.group(1) if match else None
        if self.faithful:  # the seed's get_executor: the tag's agent, else the first executor, else primary
            if tag and tag.lower() in self.agents:
                return tag.lower()
            return next((key for key in self.executor_keys if key in self.agents), self.primary_agent)
        tags = ", ".join(f"[{key.upper()}]" for key in self.executor_keys)
        if tag is not None:
            key = self._executor(tag)
            if key is not None:
                return key
            raise PlanError([Problem(
                f"the step is tagged [{tag}], which names no agent; the agents are {tags}: tag the step with one "
                f"of them, or leave the tag out for the primary agent {self.primary_agent!r}",
                step=str(index), code="unknown_agent")])
        loose = _LOOSE_TAG.search(text)
        if loose:
            written = loose.group(1).strip()
            key = self._executor(re.sub(r"[\s\-]+", "_", written))
            if key is not None and re.fullmatch(r"\w+", written):
                return key  # [manus], [Data_Analysis]: the name in another case
            if key is not None:
                raise PlanError([Problem(
                    f"the step is tagged [{written}]; OpenManus reads only [A-Z_]+ tags and would silently send it to "
                    f"{self.primary_agent!r}: write [{key.upper()}]", step=str(index), code="unknown_agent")])
        return self.primary_agent

    def _executor(self, name: str) -> str | None:
        return next((key for key in self.executor_keys if key.casefold() == name.casefold()), None)

    def routed_steps(self, plan: Plan, *, skip_done: bool = False) -> list[Step]:
        """The tool's steps as the run executes them (agent = the routed key); every routing problem at once."""
        steps, problems = [], []
        for index, step in enumerate(plan.steps):
            if skip_done and step.status in (Status.completed, Status.skipped):
                continue
            if step.tool is not None:
                steps.append(step.fresh())
                continue
            try:
                agent = self.route(self.tool.text_of(step, self.plan_id) if plan.id == str(self.plan_id)
                                   else step_text(step), index)
            except PlanError as exc:
                problems += exc.problems
                continue
            steps.append(Step(id=step.id, task=step.task, agent=agent, needs=list(step.needs), expect=step.expect))
        if problems:
            raise PlanError(problems)
        return steps

    # -------------------------------------------------------------------- running
    def run(self, request: str, **options: Any) -> FlowResult:
        """Plan ``request``, run every step, sum up. ``options`` go to :class:`~planbook.Runner`
        (``on_failure``, ``max_steps``, ``max_replans``, ``on_event``, ...)."""
        if is_plan_spec(request):
            raise ValueError("the request reads as a plan spec; PlanningFlow plans from a request in words "
                             "(to run a written plan, use planbook.run or tool.write(plan))")
        if self.model is None:
            raise ValueError("PlanningFlow.run plans with a model: pass planner=a model (a ScriptedModel, an "
                             "LLMPlanner...), or run a written plan with planbook.run(plan, strategy='openmanus')")
        number = 1
        while self.plan_id in self.tool.plans and not self.faithful:  # the seed reuses its plan id, so
            number += 1  # a second request on the same flow fails to create its plan
            self.plan_id = f"{self._id_base}_{number}"
        runner = Runner(request, **self.runner_options(OpenManusPlanner(self), options))
        result = runner.run()
        plan_text = self.tool.execute(command="get", plan_id=self.plan_id) if self.plan_id in self.tool.plans else ""
        positions = ({s.id: i for i, s in enumerate(self.tool.plans[self.plan_id].steps)}
                     if self.faithful and self.plan_id in self.tool.plans else None)
        flow = FlowResult(run=result, plan_text=plan_text, step_prompts=list(self._prompts), budgets=list(self._budgets),
                          positions=positions, ending=self._ending)
        if plan_text and self._ending is None:
            self._summarize(flow, request)
        return flow

    def runner_options(self, planner: Any, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` for :class:`~planbook.Runner` with the flow's agents, ``planner`` and the tool's mirror.

        With ``faithful`` a failure (only an exception is one there) has the ``retry`` policy
        with no limit of its own unless ``on_failure`` says otherwise: the seed leaves a
        raising step in progress and picks it again, so only ``max_steps`` ends the run.
        """
        self._prompts, self._budgets, self._ending = [], [], None
        handlers = options.get("on_event")
        handlers = [] if handlers is None else [handlers] if callable(handlers) else list(handlers)
        merged = dict(options, planner=planner, on_event=[self._mirror, *handlers],
                      agents={key: _FlowAgent(self, key, agent) for key, agent in self.agents.items()})
        if self.faithful and merged.get("on_failure") is None:
            merged["on_failure"], merged["retries"] = "retry", RERUN_FOREVER
        return merged

    def execute(self, request: str, **options: Any) -> str:
        """The seed's API: the text of :meth:`FlowResult.text`."""
        return self.run(request, **options).text()

    def _summarize(self, flow: FlowResult, request: str) -> None:
        assert self.model is not None
        result = flow.run
        if self.faithful or (result.ok and result.reason == "goal_met"):
            user = SUMMARY_REQUEST.format(plan_text=flow.plan_text)
        else:
            error = f": {result.error}" if result.error else ""
            user = SUMMARY_REQUEST_UNFINISHED.format(status=result.status, reason=result.reason, error=error,
                                                     plan_text=flow.plan_text)
        records: list[dict[str, Any]] = []
        try:
            answer = self.model.chat(
                [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": user}],
                purpose="summary", emit=lambda kind, **data: records.append(data),
            )
            flow.summary = answer.content or ""
        except Exception as exc:  # the run is over and kept; only the summary is missing, and says why
            flow.summary_error = f"{type(exc).__name__}: {exc}"
        flow.summary_call = records[0] if records else None

    # ------------------------------------------------- the tool follows the run
    def _mirror(self, event: Event) -> None:
        """Write the run's statuses into the tool, so ``get`` shows what happened.

        With ``faithful`` only what the seed writes reaches the tool: ``in_progress`` when a
        step starts, ``completed`` when it returns (a failure stays ``in_progress``;
        ``blocked`` is never written — the run's ``continue`` policy lets dependents run).
        """
        plan = self.tool.plans.get(self.plan_id)
        if plan is None:
            return
        if event.kind == "run.finished":
            if not self.faithful and event.data.get("status") == "failed":
                for step in plan.steps:
                    if step.status is Status.not_started:
                        step.status, step.notes = Status.blocked, f"not run: the run ended ({event.data.get('reason')})"
            return
        found = next((s for s in plan.steps if s.id == event.step), None)
        if found is None:
            return
        step = found
        if event.kind == "step.finished":
            step.status = Status.completed
        elif self.faithful:  # a raising step stays in progress until it runs again  # the seed never writes blocked, nor anything about a failure
            return
        elif event.kind == "step.retry":
            step.status = Status.not_started
        elif event.kind == "step.failed":
            step.status, step.notes = Status.failed, str(event.data.get("error") or "failed")
        elif event.kind == "step.skipped":
            by, reason = event.data.get("by"), event.data.get("reason")
            step.status = Status.skipped
            step.notes = f"not run: step {by} ended the run ({reason})" if by else f"skipped after: {event.data.get('error')}"
        elif event.kind == "step.blocked":
            step.status, step.notes = Status.blocked, f"blocked: needs {', '.join(event.data.get('because', []))}"

    # ------------------------------------------------ per-agent step budgets
    def _give_budget(self, key: str, agent: Any) -> tuple[int, int] | None:
        if self.agent_max_steps is None or not hasattr(agent, "max_iterations") or not hasattr(agent, "calls"):
            return None
        original = agent.max_iterations
        agent.max_iterations = self.agent_max_steps - self._spent.get(key, 0) if self.faithful else self.agent_max_steps
        return original, len(agent.calls)

    def _take_budget(self, key: str, agent: Any, step_id: str, token: tuple[int, int] | None) -> None:
        if token is None:
            return
        original, before = token
        spent = len(agent.calls) - before
        self._budgets.append((step_id, key, agent.max_iterations, spent))
        agent.max_iterations = original
        if self.faithful:  # the seed's current_step: counted across run() calls, reset only when it hits max
            total = self._spent.get(key, 0) + spent
            self._spent[key] = 0 if total >= self.agent_max_steps else total  # type: ignore[operator]

    def _finished(self, agent: Any) -> bool:
        """Whether the agent says the whole request is done (OpenManus: ``state == FINISHED``)."""
        if not hasattr(agent, "state"):
            return False
        said = str(getattr(agent.state, "value", agent.state)).upper() == "FINISHED"
        if self.faithful or said:
            agent.state = "IDLE"  # the seed's run() restores IDLE in a finally: its check comes too late
        return said and not self.faithful


class _FlowAgent:
    """One agent as the flow calls it: marks the step in progress, shows the tool's plan text,
    gives the step budget, and applies the flow's idea of "completed"."""

    def __init__(self, flow: PlanningFlow, key: str, agent: Any) -> None:
        self.flow, self.key, self.agent = flow, key, agent
        self.name = key
        self.description = getattr(agent, "description", "")

    def __call__(self, task: str, context: AgentContext) -> Any:
        flow, tool = self.flow, self.flow.tool
        if context.step is None:  # the runner always gives the step; a direct call may not
            raise ValueError(f"{self!r} works on one step of the flow's plan: give AgentContext(step=...)")
        index = tool.index_of(context.step.id, flow.plan_id)
        tool.execute(command="mark_step", plan_id=flow.plan_id, step_index=index, step_status="in_progress")
        plan_text = tool.execute(command="get", plan_id=flow.plan_id)
        written = tool.text_of(tool.plans[flow.plan_id].steps[index], flow.plan_id)
        prompt = (SEED_STEP_PROMPT if flow.faithful else STEP_PROMPT).format(
            plan_status=plan_text, index=index, step_text=written)
        flow._prompts.append(prompt)
        inner = AgentContext(goal=context.goal, plan_text=plan_text, step=context.step, needs=context.needs,
                             emit=context.emit)
        token = flow._give_budget(self.key, self.agent)
        try:  # the seed's agent.run() receives the step prompt; planbook's agent its task (the plan in its context)
            reply = self.agent(prompt if flow.faithful else task, inner)
        except BaseException:
            flow._take_budget(self.key, self.agent, context.step.id, token)
            raise
        if inspect.isawaitable(reply):
            return self._later(reply, context.step.id, token)
        return self._after(reply, context.step.id, token)

    async def _later(self, awaitable: Any, step_id: str, token: tuple[int, int] | None) -> Any:
        try:
            reply = await awaitable
        except BaseException:
            self.flow._take_budget(self.key, self.agent, step_id, token)
            raise
        return self._after(reply, step_id, token)

    def _after(self, reply: Any, step_id: str, token: tuple[int, int] | None) -> Any:
        flow = self.flow
        flow._take_budget(self.key, self.agent, step_id, token)
        if not flow.faithful:
            if flow._finished(self.agent):  # the fixed FINISHED check: the run ends after this step
                if not isinstance(reply, AgentReply):
                    reply = AgentReply(answer=reply)
                if reply.ok:
                    reply.stop = f"agent {self.key!r} finished the request"
            return reply
        # the seed: the step is completed whenever run() returned, whatever the agent said
        if not isinstance(reply, AgentReply):
            return AgentReply(answer=reply)
        return AgentReply(answer=reply.answer if reply.answer is not None else reply.notes, ok=True, notes=reply.notes)

    def __repr__(self) -> str:
        return f"<PlanningFlow agent {self.key}: {self.agent!r}>"


class OpenManusPlanner:
    """The planbook planner of a :class:`PlanningFlow`: the model, offered only the planning
    tool, creates the plan (and, after a failure with policy ``replan``, updates it)."""

    def __init__(self, flow: PlanningFlow) -> None:
        self.flow = flow
        self.context: PlanningContext | None = None

    def set_context(self, context: PlanningContext) -> None:
        self.context = context

    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        context, self.context = self.context, None
        emit = context.emit if context is not None else None
        flow, tool = self.flow, self.flow.tool
        model = flow.model
        if model is None:  # PlanningFlow.run and strategy="openmanus" make this planner only with a model
            raise ValueError("OpenManusPlanner plans with its flow's model: make the PlanningFlow with planner=a model")
        first = last_error is None and (context is None or context.plan is None)
        if first:
            user = PLANNING_REQUEST.format(request=goal)
        else:
            plan_text = tool.execute(command="get", plan_id=flow.plan_id)
            user = REPLAN_REQUEST.format(error=last_error, plan_text=plan_text, request=goal)
        messages: list[dict[str, Any]] = [{"role": "system", "content": flow.system_prompt()}, {"role": "user", "content": user}]
        attempts: list[dict[str, Any]] = []
        for attempt in range(1, flow.max_attempts + 1):
            answer = model.chat(messages, tools=[tool.to_param()], purpose="plan" if first else "replan",
                                attempt=attempt, emit=emit)
            attempts.append(answer.raw())
            problem = self._apply(answer, goal, first)
            if problem is None:
                plan = tool.plans[flow.plan_id]
                plan.goal = goal
                if not first:  # steps that will run again start clean in the tool too
                    for step in plan.steps:
                        if step.status not in (Status.completed, Status.skipped):
                            step.status = Status.not_started
                return flow.routed_steps(plan, skip_done=not first)
            attempts[-1]["problem"] = problem
            messages.append(answer.message)
            for call in answer.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": f"Error: {problem}"})
            if not answer.tool_calls:
                messages.append({"role": "user", "content": f"{problem}. Call the planning tool."})
        raise PlanningError(f"the model made no plan: {attempts[-1]['problem']}", attempts=attempts)

    def _apply(self, answer: Any, goal: str, first: bool) -> str | None:
        """Carry out the model's planning call as the seed does; the problem in words, or None."""
        flow, tool = self.flow, self.flow.tool
        if flow.faithful and first:
            self._seed_apply(answer, goal)
            return None
        calls = [c for c in answer.tool_calls if c.name == tool.name]
        if not calls:
            said = shorten(answer.content or "(nothing)", 200)
            return f"the model did not call the planning tool; it answered {said!r}"
        try:  # the seed carries out the first planning call only
            args = json.loads(calls[0].arguments or "{}")
        except ValueError as exc:
            return f"the planning arguments are not valid JSON ({exc})"
        if not isinstance(args, dict):
            return f"the planning arguments must be a JSON object, got {type(args).__name__}"
        expected = "create" if first else "update"
        if not flow.faithful and args.get("command") != expected:
            return f"the model called planning with command {args.get('command')!r}; {expected!r} was needed"
        args["plan_id"] = flow.plan_id  # the seed overrides the model's plan id with the flow's
        try:
            tool.execute(**args)
        except ToolError as exc:
            return str(exc)
        if flow.plan_id not in tool.plans:
            return f"the planning call (command {args.get('command')!r}) made no plan"
        return None

    def _seed_apply(self, answer: Any, goal: str) -> None:
        """The seed's first planning call: the first ``planning`` call whose arguments are JSON is
        carried out (others are skipped), else the 3-step default plan is created. Where the seed
        raises (a tool error, arguments that are not an object) the request ends there:
        :class:`~planbook.UpstreamCrash`, and ``execute()`` says
        ``Execution failed: ...``; no plan under the flow's id is ``Failed to create plan for: ...``."""
        from ..data.errors import UpstreamCrash

        flow, tool = self.flow, self.flow.tool
        try:
            for call in answer.tool_calls:
                if call.name != tool.name:
                    continue
                try:
                    args = json.loads(call.arguments)
                except ValueError:
                    continue  # the seed logs "Failed to parse tool arguments" and tries the next call
                args["plan_id"] = flow.plan_id
                tool.execute(**args)
                break
            else:  # the seed's fallback: a plan nobody asked for
                title = f"Plan for: {goal[:50]}{'...' if len(goal) > 50 else ''}"
                tool.execute(command="create", plan_id=flow.plan_id, title=title, steps=list(DEFAULT_STEPS))
        except Exception as exc:  # noqa: BLE001 - the seed's execute() catches every exception here
            flow._ending = f"Execution failed: {exc}"
            raise UpstreamCrash(exc, "the flow's planning call") from exc
        if flow.plan_id not in tool.plans:
            flow._ending = f"Failed to create plan for: {goal}"
            raise PlanningError(f"{flow._ending} (the planning call made no plan {flow.plan_id!r}; OpenManus stops here)",
                                attempts=[answer.raw()])
        return None
