"""FakeOpenAIServer: a real HTTP server on 127.0.0.1 that speaks chat completions.

It answers from a script (one :class:`Reply` per request, in order), including tool
calls, usage, error statuses and slow answers, and records every request it received
so a test can check the prompts. Use it with the real ``openai`` client to test a
planner or an agent deterministically and offline::

    with FakeOpenAIServer([Reply.plan([{"id": "1", "tool": "add", "args": {"a": 1, "b": 2}}])]) as server:
        planner = LLMPlanner(base_url=server.base_url, api_key="test-key")
        ...
    assert server.requests[0].messages[0]["role"] == "system"

``Reply.raw_body(...)`` sends any body as it is (an HTML page, a cut-off completion, tool
arguments as an object) to test how a client copes with a server that is not quite
OpenAI-compatible. A scripted callable that raises answers HTTP 500 and fails the test.

Token usage is a deterministic estimate (about four characters a token of the request's
messages and tools, and of the answer), so benchmarks can compare prompt sizes.
"""

from __future__ import annotations

import json
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

from ..llm.cassette import FAKE_SERVER_HEADER  # one definition, shared with the cassettes
from ..llm.text import estimate_tokens  # the same estimate as planbook.llm.estimate_tokens

__all__ = ["FakeOpenAIServer", "FakeRequest", "Reply"]


@dataclass
class FakeRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("tools") or []) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.tools]

    def text(self) -> str:
        """Every message's content joined: handy for ``assert "..." in request.text()``."""
        parts = []
        for m in self.messages:
            if m.get("content"):
                parts.append(str(m["content"]))
        return "\n".join(parts)


@dataclass
class Reply:
    """One scripted answer. Build them with the class methods."""

    status: int = 200
    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON arguments)
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    delay: float = 0.0
    usage: bool = True
    raw: bytes | None = None  # sent as it is, instead of a chat completion (see :meth:`raw_body`)

    @classmethod
    def text(cls, content: str, *, finish_reason: str = "stop") -> "Reply":
        """A plain text answer (e.g. a model asking for clarification)."""
        return cls(content=content, finish_reason=finish_reason)

    @classmethod
    def tool_call(cls, name: str, arguments: Any, *, finish_reason: str = "tool_calls", content: str | None = None) -> "Reply":
        """A call of function ``name``; ``arguments`` is JSON-encoded unless it is already a string."""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(content=content, tool_calls=[(name, raw)], finish_reason=finish_reason)

    @classmethod
    def calls(cls, calls: Iterable[tuple[str, Any]], *, finish_reason: str = "tool_calls") -> "Reply":
        """Several calls in one answer."""
        raw = [(n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls]
        return cls(tool_calls=raw, finish_reason=finish_reason)

    @classmethod
    def plan(cls, steps: list[dict[str, Any]], *, no_change: bool = False) -> "Reply":
        """``submit_plan`` with these steps (what :class:`planbook.LLMPlanner` asks for)."""
        args: dict[str, Any] = {"steps": steps}
        if no_change:
            args["no_change"] = True
        return cls.tool_call("submit_plan", args)

    @classmethod
    def no_change(cls) -> "Reply":
        return cls.tool_call("submit_plan", {"steps": [], "no_change": True})

    @classmethod
    def finish(cls, answer: str, *, status: str = "success") -> "Reply":
        """``finish`` (what :class:`planbook.LLMAgent` calls to end a step)."""
        return cls.tool_call("finish", {"status": status, "answer": answer})

    @classmethod
    def http_error(cls, status: int, message: str = "", *, headers: dict[str, str] | None = None,
                   retry_after_ms: int | None = 1) -> "Reply":
        """An error status. ``retry-after-ms`` (1 by default) keeps SDK retries fast in tests."""
        hdrs = dict(headers or {})
        if retry_after_ms is not None:
            hdrs.setdefault("retry-after-ms", str(retry_after_ms))
        return cls(status=status, error=message or f"scripted HTTP {status}", headers=hdrs)

    @classmethod
    def raw_body(cls, body: Any, *, status: int = 200, content_type: str = "application/json",
                 headers: dict[str, str] | None = None) -> "Reply":
        """Exactly this body (bytes or text as they are; anything else JSON-encoded): for servers
        that answer with an HTML page, a stream, a truncated or hand-made completion."""
        if isinstance(body, str):
            data = body.encode()
        elif isinstance(body, bytes):
            data = body
        else:
            data = json.dumps(body).encode()
        return cls(status=status, raw=data, headers={"content-type": content_type, **(headers or {})})

    @classmethod
    def slow(cls, seconds: float, then: "Reply | None" = None) -> "Reply":
        """``then`` (default: a short text) after ``seconds``: for client timeouts."""
        reply = then if then is not None else cls.text("late answer")
        reply.delay = seconds
        return reply

    def body(self, request: FakeRequest, number: int) -> dict[str, Any]:
        model = request.body.get("model", "fake-model") if isinstance(request.body, dict) else "fake-model"
        if self.status >= 400:
            kind = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(self.status, "server_error")
            return {"error": {"message": self.error, "type": kind, "code": str(self.status)}}
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{number}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in enumerate(self.tool_calls)
            ]
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason, "logprobs": None}],
        }
        if self.usage:
            asked = json.dumps(request.messages, sort_keys=True) + json.dumps(request.tools, sort_keys=True)
            said = (self.content or "") + "".join(n + a for n, a in self.tool_calls)
            prompt, completion = estimate_tokens(asked), estimate_tokens(said)
            body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return body


ScriptItem = Union[Reply, Callable[[FakeRequest], Reply]]


class FakeOpenAIServer:
    """A scripted OpenAI-compatible server on 127.0.0.1 (a context manager).

    ``script`` holds :class:`Reply` objects or callables ``(FakeRequest) -> Reply``,
    used one per request in order. A request beyond the script gets HTTP 400 with
    ``x-should-retry: false`` and is listed in ``unexpected``. A callable that raises
    gets HTTP 500 with the error text and ``x-should-retry: false`` (a dropped connection
    would make the SDK retry, and the next scripted reply would answer in its place); the
    error and its traceback go into ``errors`` and ``tracebacks``. With ``strict`` (the
    default) leaving the ``with`` block after either raises AssertionError.
    """

    def __init__(self, script: Iterable[ScriptItem] = (), *, strict: bool = True, api_key: str | None = None) -> None:
        self.script: list[ScriptItem] = list(script)
        self.strict = strict
        self.api_key = api_key  # when set, any other Bearer key gets HTTP 401
        self.requests: list[FakeRequest] = []
        self.unexpected: list[FakeRequest] = []
        #: one line per scripted reply that raised, and its traceback
        self.errors: list[str] = []
        self.tracebacks: list[str] = []
        self._position = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------- control
    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not running: use it in a with block or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "FakeOpenAIServer":
        if self._httpd is not None:
            return self
        server = self

        class Handler(_Handler):
            fake = server

        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()  # wakes slow replies
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop()
        if self.strict and exc_type is None:
            self.check()

    def check(self) -> None:
        """AssertionError if a request went beyond the script or a scripted reply raised."""
        if self.errors:
            raise AssertionError(
                f"FakeOpenAIServer: {self.errors[0]} (answered HTTP 500)"
                + (f", and {len(self.errors) - 1} more error(s)" if len(self.errors) > 1 else "")
                + "\n" + self.tracebacks[0]
            )
        if self.unexpected:
            raise AssertionError(
                f"FakeOpenAIServer got {len(self.unexpected)} request(s) beyond its script of {len(self.script)}; "
                f"the first one's last message: {self.unexpected[0].messages[-1:]!r}"
            )

    def add(self, *replies: ScriptItem) -> "FakeOpenAIServer":
        """Append to the script."""
        with self._lock:
            self.script.extend(replies)
        return self

    def reset(self, script: Iterable[ScriptItem] = ()) -> "FakeOpenAIServer":
        """A new script and empty request logs (share one server across a module's tests)."""
        with self._lock:
            self.script, self._position = list(script), 0
            self.requests, self.unexpected, self.errors, self.tracebacks = [], [], [], []
        return self

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self.script) - self._position

    def client(self, *, api_key: str = "test-key", max_retries: int = 2, timeout: float = 10.0) -> Any:
        """A real ``openai.OpenAI`` client pointed at this server."""
        import openai

        return openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=max_retries, timeout=timeout)

    # ------------------------------------------------------------ serving
    def _next(self, request: FakeRequest) -> tuple[Reply | None, int]:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            if self._position >= len(self.script):
                self.unexpected.append(request)
                return None, number
            item = self.script[self._position]
            self._position += 1
            position = self._position
        if not callable(item) or isinstance(item, Reply):
            return item, number
        try:
            reply = item(request)
            if not isinstance(reply, Reply):
                raise TypeError(f"a script callable must return a Reply, not {type(reply).__name__}")
        except Exception as exc:  # noqa: BLE001 - reported to the client and to the test
            error = f"scripted reply #{position} raised {type(exc).__name__}: {exc}"
            with self._lock:
                self.errors.append(error)
                self.tracebacks.append(traceback.format_exc())
            return Reply(status=500, error=error, headers={"x-should-retry": "false"}), number
        return reply, number


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # idle keep-alive connections end on their own
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK stall
    fake: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"content-type": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}}
        try:
            self.send_response(status)
            self.send_header("content-length", str(len(data)))
            self.send_header(FAKE_SERVER_HEADER, "1")
            for key, value in sent.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "planbook"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}}, {"x-should-retry": "false"})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        request = FakeRequest(
            method="POST", path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body
        )
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"the fake server only serves chat/completions, not {self.path}"}},
                       {"x-should-retry": "false"})
            return
        fake = self.fake
        if fake.api_key is not None and request.headers.get("authorization") != f"Bearer {fake.api_key}":
            with fake._lock:
                fake.requests.append(request)
            self._send(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}})
            return
        reply, number = fake._next(request)
        if reply is None:
            self._send(400, {"error": {"message": f"FakeOpenAIServer: no scripted reply left for request #{number}",
                                       "type": "invalid_request_error"}}, {"x-should-retry": "false"})
            return
        if reply.delay and fake._stopping.wait(reply.delay):
            self.close_connection = True
            return
        self._send(reply.status, reply.raw if reply.raw is not None else reply.body(request, number), reply.headers)
