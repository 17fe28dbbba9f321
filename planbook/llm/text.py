"""Small text helpers of the model layer: shortening, token estimates and redaction.

One definition each, shared by the planner, the agent, the cassettes and
``planbook.testing`` (which imports from here, never the other way round).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

#: A secret shorter than this is never hunted for inside other text. Local servers take
#: keys like ``k``, ``EMPTY``, ``ollama`` or ``none``: replacing every "k" or "none" would
#: garble prompts, recordings and messages. Such keys are kept out by structure instead
#: (the Authorization header is never written; a URL's credentials are masked where shown).
MIN_SECRET_LENGTH = 8


def shorten(value: Any, limit: int = 200, *, as_json: bool = False) -> str:
    """A value as a prompt or a message shows it (its repr, or JSON), cut to ``limit`` characters."""
    if isinstance(value, str):
        text = value
    elif as_json:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token."""
    return (len(text) + 3) // 4


def json_cut_off(text: str) -> bool:
    """Whether JSON ``text`` ends inside a string or with a bracket still open: cut off, not mistyped."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


def json_kind(value: Any) -> str:
    """``list``, ``string``, ... : what a JSON value is, in words (for errors)."""
    if isinstance(value, bool):
        return "true/false"
    return {list: "list", str: "string", dict: "object", int: "number", float: "number"}.get(type(value), "null")


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret of :data:`MIN_SECRET_LENGTH` or more characters replaced by
    ``***`` (longest first, so no part of one is left). For messages, never for text that is parsed."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def redact_data(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of decoded JSON data with :func:`redact` applied to every string, keys included.

    Redacting the decoded strings, not their JSON text, finds a secret whatever escapes
    (``\\u00e4``, ``\\"``, ``\\\\``) the JSON encoder would write for it."""
    hidden = list(secrets)
    if isinstance(value, str):
        return redact(value, hidden)
    if isinstance(value, dict):
        return {redact(str(k), hidden): redact_data(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_data(v, hidden) for v in value]
    return value


def redact_url(url: str | None) -> str | None:
    """``url`` with its user, password and query values shown as ``***`` (safe to print)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not a URL we can take apart: show nothing of it that could be secret
        return "(an unparsable URL)"
    netloc = ("***@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host)
    if port is not None:
        netloc += f":{port}"
    query = "&".join(
        f"{name}=***" if value else name for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    fragment = "***" if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def url_secrets(url: str | None) -> list[str]:
    """The parts of ``url`` that may be credentials (userinfo, query values), raw and decoded."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        found += [userinfo, unquote(userinfo)]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found += [password, unquote(password)]
    raw_values = [pair.split("=", 1)[1] for pair in parts.query.split("&") if "=" in pair]
    for value in raw_values:
        found += [value, unquote(value.replace("+", " "))]
    if parts.fragment:
        found += [parts.fragment, unquote(parts.fragment)]
    return list(dict.fromkeys(found))
