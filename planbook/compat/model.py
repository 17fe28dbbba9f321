"""The model a seed design talks to: a real one (the ``openai`` SDK, through planbook's
model layer) or a scripted one, behind one ``chat`` call.

The seed designs ask a model with their own prompts and tools (OpenManus offers only its
``planning`` function; AgenticSeek reads a text answer), so they cannot use
:class:`~planbook.LLMPlanner`'s ``submit_plan`` protocol; they share its client instead
(an ``LLMPlanner``, an ``LLMAgent`` or a ``ModelClient`` is accepted), so settings,
cassettes and ``llm.call`` events are the same. :class:`ScriptedModel` answers from a
script, for teaching and tests, and counts tokens with the fake server's estimate.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from ..llm.client import ModelClient
from ..llm.completion import ChatAnswer, ToolCall
from ..llm.text import estimate_tokens
from .openmanus_text import parse_plan_text

__all__ = ["ChatModel", "ModelScriptExhausted", "OpenAIChatModel", "ScriptedModel", "as_chat_model"]

Emit = Callable[..., Any]


@runtime_checkable
class ChatModel(Protocol):
    """One chat call: messages (and function schemas) in, a :class:`ChatAnswer` out."""

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        purpose: str,
        attempt: int = 1,
        emit: Emit | None = None,
    ) -> ChatAnswer: ...


class OpenAIChatModel:
    """A model behind planbook's :class:`~planbook.llm.ModelClient` (``openai`` is imported on the first call)."""

    def __init__(self, model: str | None = None, *, temperature: float | None = None, **settings: Any) -> None:
        """``settings``: :class:`~planbook.llm.ModelClient`'s (``client``, ``base_url``, ``api_key``,
        ``cassette``...), passed on as given, so the two never disagree; ``client`` may also be a
        ``ModelClient`` to share."""
        client = settings.get("client")
        self.llm = client if isinstance(client, ModelClient) else ModelClient(
            model, **settings, what="the seed design's model")
        self.temperature = temperature
        #: one record per call (the same data as the ``llm.call`` events)
        self.calls: list[dict[str, Any]] = []

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        purpose: str,
        attempt: int = 1,
        emit: Emit | None = None,
    ) -> ChatAnswer:
        return self.llm.chat(
            messages, tools=tools, tool_choice="auto" if tools else None, temperature=self.temperature,
            purpose=purpose, attempt=attempt, emit=emit, log=self.calls,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.llm.model!r})"


class ModelScriptExhausted(RuntimeError):
    """A :class:`ScriptedModel` was asked more often than its script allows."""


#: a scripted reply: text, a function call ``{"name": ..., "arguments": {...}}``, an
#: answer, or a callable ``(messages, tools) -> one of those``
ScriptedReply = Union[str, dict, ChatAnswer, Callable[[list, list], Any]]


class ScriptedModel:
    """A deterministic model for teaching and tests: replies are used in order.

    A reply is a text answer (``"NO_UPDATE"``), a function call
    ``{"name": "planning", "arguments": {...}}`` (or a list of them), a
    :class:`ChatAnswer`, or a callable ``(messages, tools)`` returning one of those.
    Calls whose purpose is ``"summary"`` never use the script: they take the next of
    ``summaries``, or :func:`summary` writes a deterministic one. Every call
    is recorded in ``requests`` and reported as an ``llm.call`` event with token counts
    estimated like the fake server's (about four characters a token).
    """

    model = "scripted"

    def __init__(self, replies: Iterable[ScriptedReply] = (), *, summaries: Iterable[str] = ()) -> None:
        self.replies: list[ScriptedReply] = list(replies)
        self.summaries: list[str] = list(summaries)
        self.requests: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []

    @classmethod
    def planning(cls, steps: Sequence[str], *, title: str = "Plan", command: str = "create", **more: Any) -> "ScriptedModel":
        """A model whose one reply calls OpenManus's ``planning`` function with these steps."""
        return cls([{"name": "planning", "arguments": {"command": command, "title": title, "steps": list(steps), **more}}])

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        purpose: str,
        attempt: int = 1,
        emit: Emit | None = None,
    ) -> ChatAnswer:
        self.requests.append({"messages": [dict(m) for m in messages], "tools": list(tools or []), "purpose": purpose})
        if purpose == "summary":
            answer = _answer(self.summaries.pop(0) if self.summaries else summary(messages), len(self.requests))
        elif not self.replies:
            raise ModelScriptExhausted(
                f"the scripted model has no reply left for call {len(self.requests)} (purpose {purpose!r}); "
                "add replies to its script"
            )
        else:
            reply = self.replies.pop(0)
            if callable(reply) and not isinstance(reply, ChatAnswer):
                reply = reply(messages, list(tools or []))
            answer = _answer(reply, len(self.requests))
        said = (answer.content or "") + "".join(c.name + c.arguments for c in answer.tool_calls)
        answer.prompt_tokens = estimate_tokens(json.dumps(messages, sort_keys=True) + json.dumps(tools or [], sort_keys=True))
        answer.completion_tokens = estimate_tokens(said)
        record = {"model": self.model, "purpose": purpose, "attempt": attempt, "prompt_tokens": answer.prompt_tokens,
                  "completion_tokens": answer.completion_tokens, "latency": 0.0, "finish_reason": answer.finish_reason}
        self.calls.append(dict(record))
        if emit is not None:
            emit("llm.call", **record)
        return answer

    @property
    def remaining(self) -> int:
        return len(self.replies)

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.replies)} replies left)"


def _answer(reply: Any, number: int) -> ChatAnswer:
    if isinstance(reply, ChatAnswer):
        return reply
    if isinstance(reply, str):
        answer = ChatAnswer(content=reply, tool_calls=[], finish_reason="stop")
    elif isinstance(reply, dict) or (isinstance(reply, list) and all(isinstance(r, dict) for r in reply)):
        calls = []
        for i, call in enumerate(reply if isinstance(reply, list) else [reply]):
            if "name" not in call:
                raise ValueError(f"a scripted function call needs a 'name': {call!r}")
            arguments = call.get("arguments", {})
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            calls.append(ToolCall(id=f"call_{number}_{i}", name=str(call["name"]), arguments=raw))
        answer = ChatAnswer(content=None, tool_calls=calls, finish_reason="tool_calls")
    else:
        raise TypeError(f"a scripted reply is text, a function call dict or a ChatAnswer; got {type(reply).__name__}")
    answer.message = {"role": "assistant", "content": answer.content}
    if answer.tool_calls:
        answer.message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in answer.tool_calls
        ]
    return answer


def summary(messages: list[dict[str, Any]]) -> str:
    """A deterministic summary of the plan text in the last user message (for scripted runs).

    It counts the marks of the step lines, so it is true to the plan it was shown.
    """
    text = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    start = text.find("\nPlan: ") + 1 if "\nPlan: " in text else text.find("Plan: ")
    end = text.find("\n\nPlease provide", start)
    try:
        plan = parse_plan_text(text[start:end if end >= 0 else None]) if start >= 0 else None
    except ValueError:
        plan = None
    if plan is None or not plan.steps:
        return "No plan was carried out."
    counts: dict[str, int] = {}
    for step in plan.steps:
        counts[step.status.value] = counts.get(step.status.value, 0) + 1
    done = counts.get("completed", 0)
    parts = [f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if status != "completed"]
    tail = f"; {', '.join(parts)}" if parts else ""
    return f"{plan.display_title}: {done} of {len(plan.steps)} steps completed{tail}."


def as_chat_model(model: Any) -> ChatModel:
    """A :class:`ChatModel` from what a user has: one already, an ``LLMPlanner`` /
    ``LLMAgent`` (their client is shared) or a ``ModelClient``."""
    if isinstance(model, ModelClient):
        return OpenAIChatModel(client=model)
    llm = getattr(model, "llm", None)
    if isinstance(llm, ModelClient) and not hasattr(model, "chat"):
        return OpenAIChatModel(client=llm, temperature=getattr(model, "temperature", None))
    if isinstance(model, ChatModel):
        return model
    raise TypeError(
        f"expected a model: a ScriptedModel, an OpenAIChatModel, an LLMPlanner or LLMAgent, or a ModelClient; "
        f"got {type(model).__name__}"
    )
