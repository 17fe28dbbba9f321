"""Small text helpers of the model layer: shortening, token estimates and redaction.

One definition each, shared by the planner, the agent, the cassettes and
``planbook.testing`` (which imports from here, never the other way round).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

#: A query value shorter than this is masked in a shown URL but not hunted for in other
#: text: masking every "1" or "v1" would garble prompts and answers.
MIN_ECHOED_SECRET = 4


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


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***`` (longest first, so no part of one is left)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


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
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_ECHOED_SECRET]
