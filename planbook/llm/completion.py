"""Reading a chat completion from the bytes a server sent.

The ``openai`` SDK builds its response objects without validating them: an HTML page, a
JSON list or a string come back as a ``str`` or a ``list``, and a truncated body as a raw
``JSONDecodeError``. Here every such answer is one :class:`NotACompletion` that says what
came back, and a valid one becomes a :class:`ChatAnswer` of plain data (no SDK objects).
Answers are never redacted here: what the model wrote is what gets parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .text import json_cut_off, json_kind, shorten

__all__ = ["ChatAnswer", "NotACompletion", "ToolCall", "read_completion"]

#: Where a server that is not an OpenAI-compatible API is most often configured.
CHECK_URL = (
    "check OPENAI_BASE_URL (or base_url=...): it must point at an OpenAI-compatible API, "
    "whose URL usually ends in /v1"
)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the API defines it (an object sent instead is encoded)


@dataclass
class ChatAnswer:
    """What one model call returned, in plain data."""

    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    message: dict[str, Any] = field(default_factory=dict)  # to append to the conversation

    def __post_init__(self) -> None:
        if not self.message:
            self.message = {"role": "assistant", "content": self.content}
            if self.tool_calls:
                self.message["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in self.tool_calls
                ]

    def raw(self) -> dict[str, Any]:
        """The answer as recorded in a PlanningError's attempts (redact it before showing it)."""
        return {
            "content": self.content,
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "finish_reason": self.finish_reason,
        }


class NotACompletion(ValueError):
    """An answer that is not a chat completion: ``what`` came back, and ``advice`` on what to do."""

    def __init__(self, what: str, advice: str = CHECK_URL) -> None:
        super().__init__(what)
        self.what = what
        self.advice = advice


def read_completion(body: bytes, content_type: str | None) -> ChatAnswer:
    """The chat completion in ``body``, or :class:`NotACompletion` saying what it is instead."""
    media = (content_type or "").split(";")[0].strip().lower()
    text = body.decode("utf-8", "replace")
    start = text.lstrip()
    if not start:
        return _fail("an empty body, not a chat completion")
    seen = f"it starts {shorten(start, 120)!r}"
    if media == "text/event-stream" or start.startswith(("data:", "event:")):
        return _fail(
            f"a stream of server-sent events ({seen}), not a chat completion",
            "the request did not ask to stream: the server is not OpenAI-compatible, or a proxy in between "
            "changes the request; " + CHECK_URL,
        )
    if "html" in media or start[:15].lower().startswith(("<!doctype", "<html")):
        return _fail(f"an HTML page ({seen}), not a chat completion", "a web page is not an API: " + CHECK_URL)
    try:
        data = json.loads(text)
    except ValueError as exc:
        if json_cut_off(text):
            return _fail(f"JSON that stops early after {len(body)} bytes ({seen}), not a whole chat completion",
                         "the answer was truncated on its way (a proxy, a crashed server or a dropped "
                         "connection): try again, and " + CHECK_URL)
        where = f"line {getattr(exc, 'lineno', '?')}, column {getattr(exc, 'colno', '?')}"
        kind = f"{media} text" if media and "json" not in media else "text that is not JSON"
        return _fail(f"{kind} ({getattr(exc, 'msg', exc)} at {where}; {seen}), not a chat completion")
    if not isinstance(data, dict):
        return _fail(f"a JSON {json_kind(data)} ({_show(data)}), not a chat completion")
    return _answer(data)


def _answer(data: dict[str, Any]) -> ChatAnswer:
    error = data.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, dict) else error
        return _fail(f"an error object ({_show(message)}), not a chat completion",
                     "the server reported an error with a success status: read its message")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        keys = ", ".join(sorted(map(str, data))[:8]) or "none"
        what = "an empty 'choices' list" if isinstance(choices, list) else f"a JSON object without 'choices' (its keys: {keys})"
        return _fail(what + ", not a chat completion")
    choice = _object(choices[0], "choices[0]")
    message = _object(choice.get("message"), "choices[0].message")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        _fail(f"a chat completion whose 'usage' is a JSON {json_kind(usage)}, not an object with token counts")
    usage = usage or {}
    finish = choice.get("finish_reason")
    return ChatAnswer(
        content=_content(message.get("content")),
        tool_calls=_tool_calls(message.get("tool_calls")),
        finish_reason=None if finish is None else str(finish),
        prompt_tokens=_tokens(usage, "prompt_tokens"),
        completion_tokens=_tokens(usage, "completion_tokens"),
    )


def _content(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep their text
        texts = [t for p in content if isinstance(p, dict) and isinstance(t := p.get("text"), str)]
        if len(texts) == len(content):  # every part a dict with a text
            return "".join(texts)
    return _fail(f"a chat completion whose 'choices[0].message.content' is a JSON {json_kind(content)} ({_show(content)}), "
                 "not text")


def _tool_calls(calls: Any) -> list[ToolCall]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        return _fail(f"a chat completion whose 'choices[0].message.tool_calls' is a JSON {json_kind(calls)}, not a list")
    found = []
    for index, raw in enumerate(calls):
        call = _object(raw, f"choices[0].message.tool_calls[{index}]")
        function = _object(call.get("function"), f"choices[0].message.tool_calls[{index}].function")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):  # an object (or anything else) sent as it is: JSON text again;
            arguments = json.dumps(arguments, ensure_ascii=False)  # the planner and agent judge what it holds
        name = function.get("name")
        found.append(ToolCall(id=str(call.get("id") or f"call_{index}"), name="" if name is None else str(name),
                              arguments=arguments))
    return found


def _tokens(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())  # a count sent as text: the number is still exact
    return _fail(f"a chat completion whose 'usage.{name}' is {_show(value)}, not a number of tokens",
                 "the server is not OpenAI-compatible in its token counts: report it to its authors, "
                 "or put a proxy in front that fixes them")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        what = "missing" if value is None else f"a JSON {json_kind(value)}, not an object"
        _fail(f"an object whose '{where}' is {what}, not a chat completion")
    return value


def _show(value: Any) -> str:
    return shorten(json.dumps(value, ensure_ascii=False), 120)


def _fail(what: str, advice: str = CHECK_URL) -> Any:
    raise NotACompletion(what, advice)
