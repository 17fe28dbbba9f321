"""Where the model layer meets the ``openai`` SDK's HTTP library (imported only when called),
and the checkpoint of the model exit: every request body is masked at this layer."""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

from ..outbound.checkpoint import mask_known


def http_module() -> ModuleType:
    """The HTTP library the installed ``openai`` SDK is built on (``httpx2`` since openai 3.0,
    ``httpx`` before), found through the SDK's own client class rather than imported by name,
    so planbook follows the SDK if it changes its HTTP library again."""
    import openai

    for cls in openai.DefaultHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if root not in ("openai", "builtins"):
            return importlib.import_module(root)
    raise ImportError(f"cannot tell which HTTP library openai {openai.__version__} uses")  # pragma: no cover


def masking_transport(inner: Any) -> Any:
    """``inner`` (a transport of the SDK's HTTP library) behind the checkpoint of the model exit:
    every request body passes :func:`mask_body` before anything — a cassette that records it, the
    network — sees it. The one transport every client of the model layer is built with, so a
    prompt that forgot the gate (a replan's results, an agent's context) sends ``***`` for every
    secret the process knows."""
    http = http_module()

    class MaskingTransport(http.BaseTransport):  # type: ignore[name-defined]  # a module found at run time (httpx or httpx2)
        def handle_request(self, request: Any) -> Any:
            return inner.handle_request(masked_request(request))

        def close(self) -> None:
            inner.close()

    return MaskingTransport()


def masked_request(request: Any) -> Any:
    """``request`` with its body masked (itself when nothing secret was in it)."""
    body = request.read()
    hidden = mask_body(body)
    if hidden is body:
        return request
    http = http_module()
    headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() != "content-length"]
    return http.Request(request.method, request.url, headers=headers, content=hidden, extensions=request.extensions)


def mask_body(body: bytes) -> bytes:
    """A request or response body as it may leave: a JSON body's every string through
    :func:`~planbook.outbound.checkpoint.mask_known` (decoded first, so no escape hides a secret,
    and the JSON stays valid whatever is masked); another body as text the same way. ``body``
    itself when nothing changed.

    Known secrets only, not the gate's shape rules: a prompt is read by a model and a cassette
    is matched and replayed, and a shape rule would change their meaning (``"token": "$login"``
    in a replan's plan names a step; ``"password": {"type": "string"}`` in a tool's schema is a
    schema)."""
    if not body:
        return body
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "surrogateescape")
        hidden_text = mask_known(text)
        return body if hidden_text == text else hidden_text.encode("utf-8", "surrogateescape")
    hidden = mask_strings(data)
    if hidden is data:
        return body
    return json.dumps(hidden, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def mask_strings(value: Any) -> Any:
    """Decoded JSON with every string (keys too) through :func:`~planbook.outbound.checkpoint.mask_known`
    (by text, not by name: a tool schema's ``"token": {"type": "string"}`` is a schema, not a
    secret). ``value`` itself when nothing changed."""
    if isinstance(value, str):
        hidden = mask_known(value)
        return value if hidden == value else hidden
    if isinstance(value, dict):
        items = [(mask_known(k) if isinstance(k, str) else k, mask_strings(v)) for k, v in value.items()]
        if all(k == k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, list):
        masked = [mask_strings(v) for v in value]
        return value if all(a is b for a, b in zip(masked, value)) else masked
    return value
