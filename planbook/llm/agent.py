"""LLMAgent: a model that works on one step with a bounded tool-calling loop.

Its prompt holds the plan status, the step's task and only the results of the step's
``needs``. It must end by calling ``finish(status, answer)``; running out of
iterations or stopping without ``finish`` is a failure that says so. The iteration
budget is a local of each call, so every step gets the whole budget (the OpenManus
pitfall of a step budget leaking across plan steps cannot happen).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..data.errors import ModelCallError
from ..data.wording import plural
from ..engine.calls import call_awaited
from ..workers.agents import AgentContext, AgentReply
from ..workers.tools import Toolbox, ToolsLike, as_toolbox
from . import prompts
from .cassette import Cassette
from .client import ModelClient, UsesModel

FINISH = "finish"


def finish_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": FINISH,
            "description": "End this step: say whether it succeeded and give the answer (or what went wrong).",
            "parameters": {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["success", "failure"]},
                    "answer": {"type": "string", "description": "the step's result, or why it failed"},
                },
                "required": ["status", "answer"],
                "additionalProperties": False,
            },
        },
    }


class LLMAgent(UsesModel):
    """An agent ``(task, context) -> AgentReply`` backed by a model and its own tools.

    ``tools`` is a Toolbox, a mapping or a list of functions; None means no tools (only
    ``finish``). ``max_iterations`` bounds the model calls for *each* step.
    """

    def __init__(
        self,
        name: str,
        description: str,
        *,
        tools: ToolsLike = None,
        model: str | None = None,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_iterations: int = 10,
        system_prompt: str | None = None,
        temperature: float | None = None,
        cassette: Cassette | str | Path | None = None,
        timeout: float | None = 60.0,
        max_retries: int = 2,
        result_limit: int = 2000,
    ) -> None:
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        self.name = name
        self.description = description
        self.tools: Toolbox = as_toolbox(tools) if tools is not None else Toolbox()
        if FINISH in self.tools:
            raise ValueError(f"a tool may not be called {FINISH!r}: the agent uses it to end a step")
        self.llm = ModelClient(
            model, client=client, base_url=base_url, api_key=api_key, cassette=cassette,
            timeout=timeout, max_retries=max_retries, what=f"LLMAgent {name!r}",
        )
        self.max_iterations = max_iterations
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.result_limit = result_limit
        #: one record per model call (same data as the ``llm.call`` events)
        self.calls: list[dict[str, Any]] = []
        #: the messages of the last step (for teaching and debugging)
        self.last_messages: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"LLMAgent({self.name!r}, model={self.llm.model!r}, tools={sorted(self.tools)})"

    def _schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": t.schema()} for t in self.tools.values()] + [finish_tool()]

    def __call__(self, task: str, context: AgentContext) -> AgentReply:
        if context.step is None:  # the runner always gives the step; a direct call may not
            raise ValueError(f"{self!r} works on one step: give AgentContext(step=...)")
        step = context.step.model_copy(update={"task": task})
        system = self.system_prompt or prompts.AGENT_SYSTEM.format(name=self.name, description=self.description)
        user = prompts.agent_request(context.goal, context.plan_text, step, context.needs, self.result_limit)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self.last_messages = messages
        used_tools: list[str] = []
        first_call = len(self.calls)  # this step's model calls are self.calls[first_call:]
        for iteration in range(1, self.max_iterations + 1):  # the budget is local: it resets every step
            try:
                answer = self.llm.chat(
                    messages, tools=self._schemas(), tool_choice="auto", temperature=self.temperature,
                    purpose="agent", attempt=iteration, emit=context.emit, log=self.calls,
                )
            except ModelCallError as exc:
                return AgentReply(answer=None, ok=False, notes=f"agent {self.name!r}: {exc}")
            messages.append(answer.message)
            if not answer.tool_calls:
                cut = " (the answer was cut off: finish_reason 'length')" if answer.finish_reason == "length" else ""
                said = self.llm.hide(answer.content)
                return AgentReply(
                    answer=said,
                    ok=False,
                    notes=f"agent {self.name!r} stopped without calling finish{cut}, so the step did not succeed; "
                    f"its last words: {prompts.shorten(said or '(nothing)', 200)!r}",
                )
            self.calls[-1]["called"] = [call.name for call in answer.tool_calls]
            for call in answer.tool_calls:
                if call.name == FINISH:
                    reply = self._finish(call.arguments, used_tools, self.calls[first_call:])
                    if reply is not None:
                        return reply
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": "error: finish needs status 'success' or 'failure' and an answer"})
                    continue
                messages.append({"role": "tool", "tool_call_id": call.id, "content": self._run_tool(call.name, call.arguments)})
                used_tools.append(call.name)
        return AgentReply(
            answer=None,
            ok=False,
            notes=f"agent {self.name!r} used all {self.max_iterations} iterations of this step without calling finish "
            f"(tools called: {', '.join(used_tools) or 'none'}); raise max_iterations or simplify the task",
        )

    def _finish(self, arguments: str, used: list[str], calls: list[dict[str, Any]]) -> AgentReply | None:
        try:
            data = json.loads(arguments or "{}")
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("status") not in ("success", "failure"):
            return None
        answer = self.llm.hide(data.get("answer", ""))  # the step's result: no secret in outputs
        notes = f"{plural(len(calls), 'model call')}; tools: {', '.join(used) or 'none'}\n{calls_note(calls)}"
        if data["status"] == "success":
            return AgentReply(answer=answer, ok=True, notes=notes)
        return AgentReply(answer=answer, ok=False, notes=f"agent {self.name!r} reported failure: {answer}\n{notes}")

    def _run_tool(self, name: str, arguments: str) -> str:
        """The tool's result (or error) as the text the model reads next."""
        tool = self.tools.get(name)
        if tool is None:
            return f"error: there is no tool {name!r}; the tools are {', '.join(sorted(self.tools)) or '(none)'} and finish"
        try:
            args = json.loads(arguments or "{}")
        except ValueError as exc:
            return f"error: the arguments are not valid JSON ({exc}); call {name} again with a JSON object"
        if not isinstance(args, dict):
            return f"error: the arguments must be a JSON object, got {type(args).__name__}"
        problems = tool.validate(args)
        if problems:
            return "error: " + "; ".join(problems)
        try:
            value = call_awaited(tool.fn, **tool.coerce(args))
        except (Exception, SystemExit) as exc:  # the model reads the error and decides what to do; a tool's
            return f"error: {type(exc).__name__}: {exc}"  # sys.exit() ends its call, not the step
        return prompts.shorten(value, self.result_limit)


def calls_note(calls: list[dict[str, Any]]) -> str:
    """One line per model call of a step (what its pane lists): tokens, and what the model did."""
    lines = []
    for i, call in enumerate(calls, 1):
        did = ", ".join(call.get("called") or []) or "answered in text"
        lines.append(f"  call {i}: {call.get('prompt_tokens', 0)} prompt + {call.get('completion_tokens', 0)} "
                      f"completion tokens → {did}")
    return "\n".join(lines)
