"""Builds the ``openai`` SDK client lazily (with :mod:`.sdk`, the only modules that import it) and makes calls.

Every call goes through :meth:`ModelClient.chat`, which times it, turns SDK errors into
one clear :class:`ModelCallError` (secrets redacted) and reports an ``llm.call`` record
(model, purpose, tokens, latency, attempt) to whoever asked.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..data.errors import CassetteError, ModelCallError
from ..outbound import remember
from ..outbound.redact import PLACEHOLDER_KEY, redact_data, redact_url
from .cassette import Cassette, cassette_for
from .completion import ChatAnswer, NotACompletion, read_completion
from .config import LLMConfig, missing_setup_error, resolve_config
from .sdk import http_module, masking_transport

__all__ = ["ModelClient", "UsesModel"]

Emit = Callable[..., Any]
#: Where the SDK sends requests when no base URL is set.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
Self = TypeVar("Self", bound="UsesModel")


def as_cassette(cassette: Cassette | str | Path | None) -> Cassette | None:
    """A Cassette as given, or the one cassette of a path (shared by a planner and its agents)."""
    if cassette is None or isinstance(cassette, Cassette):
        return cassette
    return cassette_for(cassette)


class UsesModel:
    """``close()`` and ``with`` support for objects that own a :class:`ModelClient` as ``self.llm``."""

    llm: "ModelClient"

    def close(self) -> None:
        """Close the model client's connections (it is rebuilt if the object is used again)."""
        self.llm.close()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ModelClient:
    """Settings plus a lazily built ``openai.OpenAI`` client (shared by a planner's calls)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        cassette: Cassette | str | Path | None = None,
        timeout: float | None = 60.0,
        max_retries: int = 2,
        what: str = "the planner",
    ) -> None:
        self.config: LLMConfig = resolve_config(model, api_key=api_key, base_url=base_url)
        remember(self.config.secrets())  # the key and the URL's credentials: hidden by every exit from now on
        self.cassette = as_cassette(cassette)
        self.timeout = timeout
        self.max_retries = max_retries
        self._client = client
        if client is not None and self.cassette is not None:
            raise ValueError("pass either client= (your own openai.OpenAI) or cassette=, not both")
        if client is None:
            mode = self.cassette.resolve(live=self.config.live) if self.cassette is not None else "off"
            if mode == "off" and not self.config.live:  # an impossible setup fails now, not mid-run
                raise missing_setup_error(what)
            if mode == "replay" and model is None and self.cassette is not None:
                # a replay asks for the model it recorded, whatever PLANBOOK_MODEL says now
                recorded = self.cassette.recorded_models()
                if len(recorded) == 1:
                    self.config = replace(self.config, model=recorded[0])

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def mode(self) -> str:
        """``replay`` or ``record`` (a cassette is in use), else ``live``."""
        if self.cassette is not None and self.cassette.active_mode in ("replay", "record"):
            return str(self.cassette.active_mode)
        return "live"

    def openai_client(self) -> Any:
        """The SDK client, built on first use (importing openai costs most of a second)."""
        if self._client is None:
            import openai

            http = http_module()
            mode = self.cassette.active_mode if self.cassette is not None else None
            key = self.config.api_key or PLACEHOLDER_KEY
            # what the SDK appends to this path is the endpoint a recording is matched on
            base_path = urlsplit(self.config.base_url or DEFAULT_BASE_URL).path
            if mode == "replay":
                assert self.cassette is not None
                transport = self.cassette.transport(secrets=self.config.secrets(), base_path=base_path)
                key = PLACEHOLDER_KEY
            elif mode == "record":
                assert self.cassette is not None
                transport = self.cassette.transport(inner=http.HTTPTransport(), secrets=self.config.secrets(),
                                                    base_path=base_path)
            else:
                transport = http.HTTPTransport()
            # the model exit's checkpoint, outermost: a cassette records, and the server receives, the masked body
            transport = masking_transport(transport)
            http_client = openai.DefaultHttpxClient(transport=transport, timeout=self.timeout, follow_redirects=True)
            self._finalizer = weakref.finalize(self, http_client.close)  # our client: we close its sockets
            self._client = openai.OpenAI(
                api_key=key,
                base_url=self.config.base_url,
                http_client=http_client,
                max_retries=self.max_retries,
                timeout=self.timeout,
            )
        return self._client

    def close(self) -> None:
        """Close the connections of a client built here (a client passed in is yours to close)."""
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()
            self._client = None

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        temperature: float | None = None,
        purpose: str,
        attempt: int,
        emit: Emit | None = None,
        log: list[dict[str, Any]] | None = None,
    ) -> ChatAnswer:
        """One chat-completions call; reports an ``llm.call`` record to ``emit`` and ``log``."""
        client = self.openai_client()
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        if temperature is not None:
            kwargs["temperature"] = temperature
        started = time.perf_counter()
        record: dict[str, Any] = {"model": self.model, "purpose": purpose, "attempt": attempt}
        try:
            try:
                # the raw answer, so a body that is not a chat completion is one clear error
                # (the SDK itself turns an HTML page into a str and a cut-off body into a JSONDecodeError)
                response = client.chat.completions.with_raw_response.create(**kwargs)
            except openai.APIError as exc:
                refused = _cassette_error(exc)
                if refused is not None:  # SDKs before openai 3 wrap a transport's error as a connection error
                    raise refused from None
                raise self._explain(exc, client) from None
            answer = self._read(response.http_response, client)
        except ModelCallError as error:
            record.update(prompt_tokens=0, completion_tokens=0, latency=round(time.perf_counter() - started, 3),
                          error=str(error))
            _report(record, emit, log)
            raise
        record.update(
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            latency=round(time.perf_counter() - started, 3),
            finish_reason=answer.finish_reason,
        )
        _report(record, emit, log)
        return answer

    def hide(self, value: Any) -> Any:
        """``value`` (text or decoded JSON) with the key and URL credentials masked: for what
        errors, events, notes and outputs show, never for text that is still to be parsed."""
        return redact_data(value, self.config.secrets())

    def _where(self, client: Any) -> str:
        """The server as messages name it (credentials masked)."""
        return self.config.shown_url or redact_url(str(getattr(client, "base_url", "") or "")) or "the OpenAI API"

    def _read(self, http_response: Any, client: Any) -> ChatAnswer:
        try:
            return read_completion(http_response.content, http_response.headers.get("content-type"))
        except NotACompletion as exc:
            try:
                url = redact_url(str(http_response.request.url))
            except RuntimeError:  # a response built without its request
                url = None
            raise ModelCallError(
                f"the model server at {url or self._where(client)} answered HTTP {http_response.status_code} with "
                f"{self.hide(exc.what)}; {exc.advice}",
                status=http_response.status_code, kind="answer",
            ) from None

    def _explain(self, exc: Exception, client: Any) -> ModelCallError:
        """One clear error per failure kind; the server's message is kept, secrets are not."""
        import openai

        where = self._where(client)
        detail = self.hide(_server_message(exc))
        if isinstance(exc, openai.AuthenticationError):
            return ModelCallError(
                f"the model server at {where} refused the API key (HTTP 401: {detail}); check OPENAI_API_KEY "
                "(or api_key=...) and OPENAI_BASE_URL; the request was not retried",
                status=401, kind="authentication",
            )
        retries = _retries(exc, self.max_retries)
        if isinstance(exc, openai.APITimeoutError):
            return ModelCallError(
                f"the model server at {where} did not answer within "
                f"{'the SDK default time' if self.timeout is None else f'{self.timeout:g} s'}"
                f"{retries}; raise timeout=... or try again later",
                kind="timeout",
            )
        if isinstance(exc, openai.APIConnectionError):
            return ModelCallError(
                f"could not connect to the model server at {where} ({detail}){retries}; check OPENAI_BASE_URL",
                kind="connection",
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retryable = status in (408, 409, 429) or status >= 500
            return ModelCallError(
                f"the model server at {where} answered HTTP {status} ({detail})"
                + (retries if retryable else "")
                + self._advice(status),
                status=status, kind="status",
            )
        return ModelCallError(f"the model call failed: {self.hide(str(exc))}")

    def _advice(self, status: int) -> str:
        """What to do about a request the server turned down (most often a wrong model or URL)."""
        check = (
            f"check the model name (model=... or PLANBOOK_MODEL; it is {self.model!r}) and OPENAI_BASE_URL "
            "(or base_url=...; an OpenAI-compatible server's URL usually ends in /v1)"
        )
        if status == 404:
            return f"; the model {self.model!r} or the endpoint does not exist at that server: {check}"
        if status == 400:
            return f"; the server rejected the request: {check}, and that the model supports tool calling"
        return ""


def _cassette_error(exc: BaseException) -> CassetteError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, CassetteError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _retries(exc: Exception, max_retries: int) -> str:
    """How often the SDK retried, as it stamps every request it sends (``x-stainless-retry-count``)."""
    try:
        taken = int(exc.request.headers.get("x-stainless-retry-count"))  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return f" (after up to {max_retries} retries)"
    if taken:
        return f" after {taken} retr{'y' if taken == 1 else 'ies'}"
    return _why_not_retried(getattr(exc, "response", None), max_retries)


def _why_not_retried(response: Any, max_retries: int) -> str:
    """Why the SDK did not retry (a status it retries, a timeout): say what happened, not the budget."""
    headers = getattr(response, "headers", None) or {}
    if max_retries == 0:
        return " and was not retried (max_retries=0)"
    if str(headers.get("x-should-retry", "")).lower() == "false":
        return " and was not retried: the server said not to (x-should-retry: false)"
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        if headers.get(name) is not None:
            try:
                wait = f"{float(headers[name]) * scale:g} s"
            except ValueError:
                wait = "until " + str(headers[name])
            return (f" and was not retried: the server asked to wait {wait} ({name}: {headers[name]}), "
                    "longer than the SDK waits; try again later")
    return " and was not retried"


def _server_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return json.dumps(body)[:300]
    return str(getattr(exc, "message", None) or exc)[:300]


def _report(record: dict[str, Any], emit: Emit | None, log: list[dict[str, Any]] | None) -> None:
    if log is not None:
        log.append(dict(record))
    if emit is not None:
        emit("llm.call", **record)

