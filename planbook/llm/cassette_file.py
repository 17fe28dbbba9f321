"""Reading a cassette file, checked whole before anything replays.

A cassette is a file people commit, merge and edit by hand. Every way it can be damaged
(a write cut off, merge conflict markers, a hand edit that breaks the structure, another
encoding) is one :class:`CassetteError` at load that names the file and the problem, never
a ``JSONDecodeError`` or ``KeyError`` from the middle of a run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..data.errors import CassetteError
from .text import json_cut_off, json_kind, shorten

__all__ = ["FORMAT_VERSION", "MODE_ENV", "read_cassette"]

FORMAT_VERSION = 1
MODE_ENV = "PLANBOOK_CASSETTE_MODE"
RERECORD = f"re-record it (Cassette(..., mode='record') or {MODE_ENV}=record, with OPENAI_API_KEY or OPENAI_BASE_URL set)"
_CONFLICT = re.compile(r"^(<{7}|={7}|>{7})( |$)")


class _Damaged(Exception):
    def __init__(self, problem: str, advice: str = "Fix the file, or") -> None:
        super().__init__(problem)
        self.advice = advice


def read_cassette(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The interactions and the metadata of the cassette at ``path``, each checked."""
    try:
        data = _decode(path.read_bytes())
        interactions = _interactions(data)
    except _Damaged as problem:
        raise CassetteError(
            f"cassette {str(path)!r} cannot be replayed: {problem}. {problem.advice} {RERECORD}"
        ) from None
    return interactions, {k: v for k, v in data.items() if k != "interactions"}


def _decode(raw: bytes) -> dict[str, Any]:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(raw) > 1 and b"\x00" in raw[:2]):
        raise _Damaged("it is UTF-16 text, not UTF-8 (an editor saved it so)", "Save it as UTF-8, or")
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark some editors add is harmless
    except UnicodeDecodeError as exc:
        raise _Damaged(
            f"it is not UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start}; it was probably "
            "saved in another encoding)", "Save it as UTF-8, or",
        ) from None
    for number, line in enumerate(text.splitlines(), 1):
        if _CONFLICT.match(line):
            raise _Damaged(
                f"it holds merge conflict markers (line {number}: {shorten(line, 60)!r})",
                "Keep one side of the conflict (two recordings do not merge line by line), or",
            )
    try:
        data = json.loads(text)
    except ValueError as exc:
        if json_cut_off(text):
            raise _Damaged(f"it stops early (cut off after {len(raw)} bytes: a write that did not finish)") from None
        raise _Damaged(
            f"it is not valid JSON (line {getattr(exc, 'lineno', '?')}, column {getattr(exc, 'colno', '?')}: "
            f"{getattr(exc, 'msg', exc)})"
        ) from None
    if not isinstance(data, dict):
        raise _Damaged(f"it is a JSON {json_kind(data)}, not a planbook cassette (an object with 'interactions')")
    if "interactions" not in data:
        raise _Damaged("it has no 'interactions': it is not a planbook cassette")
    version = data.get("planbook_cassette", FORMAT_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise _Damaged(
            f"it is in format {shorten(json.dumps(version), 40)}, and this planbook reads format {FORMAT_VERSION}",
            "Upgrade planbook, or",
        )
    return data


def _interactions(data: dict[str, Any]) -> list[dict[str, Any]]:
    interactions = data["interactions"]
    if not isinstance(interactions, list):
        raise _Damaged(f"'interactions' is a JSON {json_kind(interactions)}, not a list")
    for number, interaction in enumerate(interactions, 1):
        where = f"interaction #{number}"
        if not isinstance(interaction, dict):
            raise _Damaged(f"{where} is a JSON {json_kind(interaction)}, not an object")
        request = _object(interaction, "request", where)
        body = _object(request, "body", where, "request.")
        for name in ("path", "endpoint", "method"):
            if name in request and not isinstance(request[name], str):
                raise _Damaged(f"{where}: 'request.{name}' is a JSON {json_kind(request[name])}, not text")
        if body.get("stream"):
            raise _Damaged(f"{where} is a streamed answer (stream=true), which cassettes do not replay")
        response = _object(interaction, "response", where)
        status = response.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise _Damaged(f"{where}: 'response.status' is {shorten(json.dumps(status), 40)}, not an HTTP status number")
        headers = response.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            shown = f"a JSON {json_kind(headers)}" if not isinstance(headers, dict) else "an object with a value that is not text"
            raise _Damaged(f"{where}: 'response.headers' is {shown}, not an object of texts")
        if "body" not in response and "text" not in response:
            raise _Damaged(f"{where}: 'response' has neither 'body' nor 'text'")
        if "text" in response and not isinstance(response["text"], str):
            raise _Damaged(f"{where}: 'response.text' is a JSON {json_kind(response['text'])}, not text")
    return interactions


def _object(parent: dict[str, Any], name: str, where: str, prefix: str = "") -> dict[str, Any]:
    value = parent.get(name)
    if value is None:
        raise _Damaged(f"{where}: '{prefix}{name}' is missing")
    if not isinstance(value, dict):
        raise _Damaged(f"{where}: '{prefix}{name}' is a JSON {json_kind(value)}, not an object")
    return value
