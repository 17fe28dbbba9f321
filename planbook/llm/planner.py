"""LLMPlanner: a planner that asks an OpenAI-compatible model for a plan.

Every answer is validated exactly like a hand-written plan. An invalid answer is fed
back with its problems (and "Do not ask for clarification") up to ``max_attempts``
times; then :class:`~planbook.PlanningError` carries every raw attempt. There is no
default plan: a model that does not answer properly gives an error, never made-up steps
(the OpenManus pitfall of a hard-coded three-step plan).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..data.errors import ModelCallError, PlanningError, Problem
from ..data.models import Plan, Step, StepWork, Usage
from ..spec.formats import steps_from_dicts
from ..spec.validate import check_replacement, plan_problems
from ..workers.planners import PlanningContext
from ..workers.tools import default_toolbox
from . import prompts
from .cassette import Cassette
from .client import ModelClient, UsesModel
from .completion import ChatAnswer

SUBMIT_PLAN = "submit_plan"


class ProposedStep(StepWork):
    """One step as the model writes it (the schema the model is shown)."""

    model_config = ConfigDict(extra="forbid")


class PlanProposal(BaseModel):
    """The arguments of ``submit_plan``."""

    model_config = ConfigDict(extra="forbid")

    steps: list[ProposedStep] = Field(default_factory=list, description="the plan, in order")
    no_change: bool = Field(False, description="replans only: true when the remaining plan needs no change")


def submit_plan_tool() -> dict[str, Any]:
    schema = PlanProposal.model_json_schema()
    schema.pop("title", None)
    return {
        "type": "function",
        "function": {
            "name": SUBMIT_PLAN,
            "description": "Submit the whole plan (or, when replanning, no_change=true).",
            "parameters": schema,
        },
    }


_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)


class _Rejected(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class LLMPlanner(UsesModel):
    """A planner backed by a model: ``(goal, history, last_error) -> list[Step]``.

    The runner calls :meth:`set_context` before each call, so the model sees the run's
    tools and agents, and replans see the current plan. Called on its own, it plans
    with :data:`planbook.default_toolbox` and no agents.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_attempts: int = 4,
        max_plan_steps: int = 50,
        temperature: float | None = None,
        system_prompt: str | None = None,
        cassette: Cassette | str | Path | None = None,
        tool_calling: bool = True,
        timeout: float | None = 60.0,
        max_retries: int = 2,
        result_limit: int = 200,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if max_plan_steps < 1:
            raise ValueError(f"max_plan_steps must be at least 1, got {max_plan_steps}")
        self.llm = ModelClient(
            model, client=client, base_url=base_url, api_key=api_key, cassette=cassette,
            timeout=timeout, max_retries=max_retries, what="LLMPlanner",
        )
        self.max_attempts = max_attempts
        self.max_plan_steps = max_plan_steps
        self.temperature = temperature
        self.system_prompt = system_prompt
        self.tool_calling = tool_calling
        self.result_limit = result_limit
        self.context: PlanningContext | None = None
        #: one record per model call (same data as the ``llm.call`` events), across runs
        self.calls: list[dict[str, Any]] = []
        #: the messages of the last planning call (for teaching and debugging)
        self.last_messages: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"LLMPlanner(model={self.model!r}, mode={self.llm.mode!r})"

    @property
    def model(self) -> str:
        return self.llm.model

    @property
    def usage(self) -> Usage:
        """Calls and tokens this planner has spent so far (all runs)."""
        usage = Usage()
        for call in self.calls:
            usage.add(call)
        return usage

    def set_context(self, context: PlanningContext) -> None:
        self.context = context

    # ---------------------------------------------------------------- call
    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        ctx = self.context
        self.context = None  # a context is good for one call: the next run sets its own
        tools = ctx.tools if ctx is not None else default_toolbox
        agents = ctx.agents if ctx is not None else {}
        plan = ctx.plan if ctx is not None else None
        kept_ids = list(ctx.kept_ids) if ctx is not None else [s.id for s in history if s.status == "completed"]
        replanning = plan is not None or last_error is not None
        purpose = "replan" if replanning else "plan"
        if replanning:
            request = prompts.replan_request(
                goal, tools, agents, history=history, last_error=last_error, plan=plan, kept_ids=kept_ids,
                max_steps=self.max_plan_steps, result_limit=self.result_limit, tool_calling=self.tool_calling,
            )
        else:
            request = prompts.plan_request(goal, tools, agents)
        system = self.system_prompt or prompts.planner_system(self.max_plan_steps, tool_calling=self.tool_calling)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": request}]
        self.last_messages = messages
        kept = [s for s in (plan.steps if plan else history) if s.id in kept_ids]
        attempts: list[dict[str, Any]] = []
        for attempt in range(1, self.max_attempts + 1):
            try:
                answer = self.llm.chat(
                    messages,
                    tools=[submit_plan_tool()] if self.tool_calling else None,
                    tool_choice="auto" if self.tool_calling else None,
                    temperature=self.temperature,
                    purpose=purpose,
                    attempt=attempt,
                    emit=ctx.emit if ctx is not None else None,
                    log=self.calls,
                )
            except ModelCallError as exc:
                raise PlanningError(f"the model could not be asked for a plan: {exc}", attempts=attempts) from exc
            raw = self.llm.hide(answer.raw())  # attempts are shown in errors: no secret in them
            attempts.append(raw)
            messages.append(answer.message)
            try:
                steps = self._accept(answer, tools, agents, ctx, plan, kept, replanning)
            except _Rejected as rejected:
                raw["problems"] = self.llm.hide(rejected.problems)
                self.calls[-1]["problems"] = raw["problems"]  # what %%plan lists for this attempt
                feedback = prompts.feedback(rejected.problems, tool_calling=self.tool_calling)
                if answer.tool_calls:  # every tool call needs its answer before the next user turn
                    for call in answer.tool_calls:
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": feedback})
                else:
                    messages.append({"role": "user", "content": feedback})
                continue
            self.calls[-1]["accepted"] = True
            return steps
        last = attempts[-1].get("problems", []) if attempts else []
        raise PlanningError(
            f"the model ({self.model}) gave no valid plan in {len(attempts)} attempt(s); last problems: "
            + "; ".join(last),
            attempts=attempts,
        )

    # ---------------------------------------------------------- checking
    def _accept(
        self,
        answer: ChatAnswer,
        tools: Any,
        agents: Any,
        ctx: PlanningContext | None,
        plan: Plan | None,
        kept: list[Step],
        replanning: bool,
    ) -> list[Step]:
        """The answer as steps the runner will accept, or :class:`_Rejected` with every problem."""
        data = self._proposal(answer)
        no_change = data.get("no_change", False)
        if not isinstance(no_change, bool):
            raise _Rejected([f"'no_change' must be true or false, got {no_change!r}"])
        raw_steps = data.get("steps", data.get("plan", []))
        unknown = sorted(set(data) - {"steps", "plan", "no_change"})
        if unknown:
            raise _Rejected([f"the plan has no field(s) {unknown}; it takes 'steps' and 'no_change'"])
        if not isinstance(raw_steps, list):
            raise _Rejected([f"'steps' must be a list of steps, got {type(raw_steps).__name__}"])
        if no_change:
            if not replanning or plan is None:
                raise _Rejected(["no_change is only for replanning an existing plan: write the plan"])
            if raw_steps:
                raise _Rejected(["give either no_change=true or steps, not both"])
            kept_ids = {s.id for s in kept}
            steps = [s.fresh() for s in plan.steps if s.id not in kept_ids]
            if not steps:
                raise _Rejected(["no_change, but no step is left to run: write the steps that reach the goal"])
        else:
            if not raw_steps:
                raise _Rejected(["the plan is empty: write at least one step"])
            if len(raw_steps) > self.max_plan_steps:
                raise _Rejected(
                    [f"the plan has {len(raw_steps)} steps; at most {self.max_plan_steps} are allowed: merge steps"]
                )
            steps, problems = steps_from_dicts(raw_steps)
            if problems:
                raise _Rejected([str(p) for p in problems])
        problems_: list[Problem] = []
        if replanning and kept:
            steps, problems_ = check_replacement(kept, steps)  # repeats of done steps are dropped
            if not steps and not problems_:
                raise _Rejected(["every proposed step is already done: write the steps that remain"])
        if ctx is not None and ctx.validate is not None:
            problems_ += ctx.validate(steps)
        else:
            problems_ += plan_problems(Plan(steps=steps), tools, list(agents), known_ids=[s.id for s in kept])
        if problems_:
            raise _Rejected(list(dict.fromkeys(str(p) for p in problems_)))
        return steps

    def _proposal(self, answer: ChatAnswer) -> dict[str, Any]:
        if answer.finish_reason == "length":
            raise _Rejected(["the answer was cut off (finish_reason 'length'): write a shorter plan"])
        if answer.tool_calls and not self.tool_calling:
            raise _Rejected([f"you called {answer.tool_calls[0].name!r}: there are no functions, answer with a ```json block"])
        if answer.tool_calls:
            others = [c.name for c in answer.tool_calls if c.name != SUBMIT_PLAN]
            if others:
                raise _Rejected([f"there is no function {others[0]!r}: call submit_plan (tools and agents go in steps)"])
            if len(answer.tool_calls) > 1:
                raise _Rejected(["call submit_plan once, with the whole plan"])
            text = answer.tool_calls[0].arguments
            where = "the submit_plan arguments"
        else:
            found = _FENCED_JSON.findall(answer.content or "")
            if not found:
                said = prompts.shorten(answer.content or "(nothing)", 160)
                how = "without calling submit_plan or giving a ```json plan" if self.tool_calling else "without a ```json block"
                raise _Rejected([f"you answered in text ({said!r}) {how}"])
            text = found[-1]
            where = "the ```json block"
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _Rejected([f"{where}: not valid JSON ({exc})"]) from None
        if isinstance(data, list) and not answer.tool_calls:  # a bare list of steps in a ```json block
            data = {"steps": data}
        if not isinstance(data, dict):
            raise _Rejected([f"{where} must be a JSON object {{\"steps\": [...]}}, got {type(data).__name__}"])
        return data
