"""Cassettes: model traffic recorded at the HTTP layer and replayed offline.

A cassette is a transport under the real ``openai`` SDK (the SDK's HTTP client with
``transport=...``), so the SDK still builds every request and parses every response: a
notebook replaying a cassette runs the same code as one talking to a model. A request is
answered by the first unused recording of the same endpoint (``/chat/completions``,
whatever the base URL's path) with the same body (model, messages, tools, tool_choice,
temperature, seed, n, token limits, stream and anything else sent), in order.
Authorization headers, keys, cookies and the credentials of a base URL are never
written; other secrets are masked in the decoded data, so no JSON escape hides them: every
string of every recording passes the checkpoint when the file is written, and the request
bodies were masked before they were sent (:func:`~planbook.llm.sdk.masking_transport`).
Streamed answers (``stream=True``) are refused: a cassette holds whole answers.

One file is one cassette: planners and agents given the same path share one
:class:`Cassette` while it records (or before any call), so every recording goes into the file.

Recording is always asked for: a cassette file that exists is replayed whatever keys are
set, until ``mode="record"`` (or ``"off"``) or the environment variable
``PLANBOOK_CASSETTE_MODE=record|off|replay`` says otherwise.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from ..data.errors import CassetteError, CassetteMismatch, LLMConfigError
from ..outbound.redact import redact_data
from .cassette_file import FORMAT_VERSION, MODE_ENV, read_cassette
from .config import SETUP_HELP
from .sdk import http_module, mask_strings
from .text import shorten

CassetteMode = Literal["auto", "replay", "record", "off"]
MODES = ("auto", "replay", "record", "off")
#: The fields a mismatch message compares first (then every other field of the body).
MATCHED_FIELDS = ("endpoint", "model", "stream", "n", "max_tokens", "max_completion_tokens", "seed", "tools",
                  "tool_choice", "response_format", "temperature", "messages")
#: The only response headers written (none of them can hold a secret).
#: Sent by planbook.testing.FakeOpenAIServer with every answer, so a recording says it is not from a model.
FAKE_SERVER_HEADER = "x-planbook-fake-server"
KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-should-retry", FAKE_SERVER_HEADER)
FAKE_SERVER_NOTE = "scripted fake server (planbook.testing.FakeOpenAIServer), not a real model"


def canonical(body: Any) -> dict[str, Any]:
    """The request body a recording is matched on: every field that is set."""
    if not isinstance(body, dict):
        return {"body": body}
    return {k: v for k, v in body.items() if v is not None}


_VERSION_SEGMENT = re.compile(r"^v\d+[a-z0-9]*$")


def endpoint(path: str, base_path: str | None = None) -> str:
    """The part of a request path the SDK appended to the base URL (``/chat/completions``).

    A replay matches on it rather than on the whole path, so a cassette recorded against
    ``http://host/api/v1`` replays where no base URL is set. Without ``base_path``, the
    path after its version segment (``/v1``, ``/v1beta``) is taken, else the whole path."""
    if base_path is not None:
        base = base_path.rstrip("/")
        if path.startswith(base + "/"):
            return path[len(base):]
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if _VERSION_SEGMENT.match(segment):
            return "/" + "/".join(segments[index + 1:])
    return path


#: The live cassette of each file: one path is one cassette (see :func:`cassette_for`).
_OPEN: "weakref.WeakValueDictionary[str, Cassette]" = weakref.WeakValueDictionary()
#: The cassette of each file that may write it: the one that started recording last.
_WRITERS: "weakref.WeakValueDictionary[str, Cassette]" = weakref.WeakValueDictionary()


def _file_key(path: Path) -> str:
    return os.path.realpath(path)


def cassette_for(path: str | os.PathLike[str]) -> "Cassette":
    """The cassette for ``path``: the live one of that file if no call went through it yet (a
    planner and its agents created together share it), else a new one (a planner created
    again, say by a notebook cell run again, replays the file from its start). A new one
    that would record over a file another live cassette has recorded into is refused when
    it resolves its mode: nothing recorded is overwritten without being asked for."""
    current = _OPEN.get(_file_key(Path(path)))
    if current is not None and current.fresh:
        return current
    cassette = Cassette(path)
    cassette._by_path = True
    return cassette


class Cassette:
    """Record or replay model traffic in a readable JSON file.

    ``mode``: ``"replay"`` answers from the file and never touches the network;
    ``"record"`` calls the model and (re)writes the file; ``"off"`` does neither (the
    calls go to the model); ``"auto"`` (default) takes ``PLANBOOK_CASSETTE_MODE`` when it
    is set, else replays when the file exists (whatever keys are set), records when it
    does not and a key or server is configured, and is an error otherwise. Share one
    Cassette between a planner and its agents so their calls go into one file in order
    (giving them the same path does that too: see :func:`cassette_for`).
    A file is written by the cassette that started recording it last: an older one that
    tries to record it again is refused rather than overwrite the newer recordings.
    """

    def __init__(self, path: str | os.PathLike[str], mode: CassetteMode = "auto", *, recorded_from: str | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown cassette mode {mode!r}; choose from {', '.join(MODES)}")
        self.path = Path(path)
        self.mode: CassetteMode = mode
        self.recorded_from = recorded_from
        self.interactions: list[dict[str, Any]] = []
        self.metadata: dict[str, Any] = {}
        self._active: str | None = None
        self._used: set[int] = set()
        self._sent = 0
        self._by_path = False  # made from a path by cassette_for, not asked for by its user

    @property
    def fresh(self) -> bool:
        """No request went through this cassette yet (another planner or agent may still join it)."""
        return self._sent == 0

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.active_mode or self.mode!r})"

    # ----------------------------------------------------------------- mode
    @property
    def active_mode(self) -> str | None:
        """The mode in use once a client was built (auto resolved to replay/record/off)."""
        return self._active

    def resolve(self, *, live: bool, env: Mapping[str, str] | None = None) -> str:
        """Fix the mode for this session; ``live`` = a key or a server is configured."""
        if self._active is not None:
            return self._active
        mode: str = self.mode
        if mode == "auto":
            chosen = (os.environ if env is None else env).get(MODE_ENV, "").strip().lower()
            if chosen and chosen not in ("replay", "record", "off", "auto"):
                raise LLMConfigError(
                    f"{MODE_ENV}={chosen!r} is not a cassette mode: use record (call the model and re-record), "
                    "off (call the model, write nothing) or replay (offline), or unset it"
                )
            mode = chosen if chosen and chosen != "auto" else mode
        if mode == "auto":
            if self.path.exists():
                mode = "replay"  # a shipped cassette replays even with a key set: recording is asked for
            elif live:
                mode = "record"
            else:
                raise LLMConfigError(
                    f"cassette {str(self.path)!r} does not exist and there is no model to record it from. {SETUP_HELP}"
                )
        if mode == "replay":
            self.load()
        elif mode == "record":
            if not live:
                raise LLMConfigError(f"cannot record cassette {str(self.path)!r}: no model to call. {SETUP_HELP}")
            writer = _WRITERS.get(_file_key(self.path))
            if self._by_path and writer is not None and writer.interactions:
                raise CassetteError(
                    f"cassette {str(self.path)!r} is being recorded by a planner or agent created earlier "
                    f"({len(writer.interactions)} recording(s) so far), and recording it here would start the file "
                    "over. Give this one the same cassette (cassette=planner.llm.cassette), or create the planner "
                    "and its agents before their first call; to record the file again from the start, pass "
                    "Cassette(path, mode='record')"
                )
            self.interactions, self.metadata = [], {}
            _WRITERS[_file_key(self.path)] = self  # an older recorder of the file stops (see _check)
        _OPEN[_file_key(self.path)] = self
        self._active = mode
        return mode

    def recorded_models(self) -> list[str]:
        """The models the recorded requests asked for (a replay asks for the same)."""
        return sorted({str(i["request"]["body"].get("model")) for i in self.interactions})

    def load(self) -> None:
        if not self.path.exists():
            raise LLMConfigError(
                f"cassette {str(self.path)!r} does not exist: record it first (mode='record' or "
                f"{MODE_ENV}=record, with OPENAI_API_KEY or OPENAI_BASE_URL set)"
            )
        self.interactions, self.metadata = read_cassette(self.path)
        self._used = set()

    @property
    def real_model(self) -> bool | None:
        """False when the recording came from the scripted fake server; None before anything is known."""
        return self.metadata.get("real_model")

    # ------------------------------------------------------------ transport
    def transport(self, *, inner: Any = None, secrets: list[str] | None = None, base_path: str | None = None) -> Any:
        """A transport of the SDK's HTTP library that replays (``inner`` None) or records through ``inner``.
        ``base_path`` is the path of the client's base URL (``/v1``): what follows it is the endpoint."""
        http = http_module()
        cassette = self
        hidden = list(secrets or [])

        class CassetteTransport(http.BaseTransport):  # type: ignore[name-defined]  # a module found at run time (httpx or httpx2)
            def handle_request(self, request: Any) -> Any:
                body = _json_body(request.read())
                cassette._check(body, recording=inner is not None)
                point = endpoint(request.url.path, base_path)
                if inner is None:
                    status, headers, content = cassette._replay(body, point)
                    return http.Response(status, headers=headers, content=content, request=request)
                response = inner.handle_request(request)
                content = response.read()
                cassette._record(request, body, point, response.status_code, response.headers, content, hidden)
                return http.Response(
                    response.status_code, headers=response.headers, content=content, request=request
                )

            def close(self) -> None:
                if inner is not None:
                    inner.close()

        return CassetteTransport()

    def _check(self, body: Any, *, recording: bool) -> None:
        """Refuse what a cassette cannot do, before anything is sent."""
        self._sent += 1
        if isinstance(body, dict) and body.get("stream"):
            raise CassetteError(
                f"cassette {str(self.path)!r} holds whole answers and cannot record or replay a streamed one "
                "(stream=True): ask for an answer that is not streamed (planbook's planners and agents never stream)"
            )
        if recording and _WRITERS.get(_file_key(self.path)) is not self:
            raise CassetteError(
                f"cassette {str(self.path)!r} is now recorded by a newer Cassette for the same file (a planner or "
                "agent created later with that path); this one stops rather than overwrite its recordings. Give "
                "a run's planner and agents one Cassette (or one path), and create them together"
            )

    def _replay(self, body: Any, point: str) -> tuple[int, dict[str, str], bytes]:
        key = _key(point, canonical(body))
        for index, interaction in enumerate(self.interactions):
            if index in self._used:
                continue
            if _recorded_key(interaction) == key:
                self._used.add(index)
                response = interaction["response"]
                headers = dict(response.get("headers") or {})
                headers.setdefault("content-type", "application/json")
                if "text" in response:  # an answer that was not JSON, byte for byte as it came
                    return response["status"], headers, response["text"].encode()
                return response["status"], headers, json.dumps(response.get("body")).encode()
        raise CassetteMismatch(self._mismatch_message(key))

    def _mismatch_message(self, key: dict[str, Any]) -> str:
        unused = [i for i in range(len(self.interactions)) if i not in self._used]
        head = f"cassette {str(self.path)!r} has no recording for request #{self._sent} of this session"
        advice = (
            "The prompt, the tools or the model changed since the cassette was recorded: re-record it "
            f"(Cassette(..., mode='record') or {MODE_ENV}=record, with OPENAI_API_KEY or OPENAI_BASE_URL set) "
            "or undo the change."
        )
        if not self.interactions:
            return f"{head}: it holds no recordings. {advice}"
        if not unused:
            return f"{head}: all {len(self.interactions)} recordings were used already. {advice}"
        recorded = _recorded_key(self.interactions[unused[0]])
        return f"{head}. First difference from the next unused recording (#{unused[0] + 1}): {first_difference(recorded, key)}. {advice}"

    def _record(self, request: Any, body: Any, point: str, status: int, headers: Any, content: bytes,
                secrets: list[str]) -> None:
        response: dict[str, Any] = {"status": status, "headers": {k: headers[k] for k in KEPT_HEADERS if k in headers}}
        try:
            response["body"] = json.loads(content)
        except ValueError:  # kept as text, and replayed as it came
            response["text"] = content.decode("utf-8", "replace")
        interaction = {
            "request": {"method": request.method, "path": request.url.path, "endpoint": point, "body": canonical(body)},
            "response": response,
        }
        # masked in the decoded data: a secret with a non-ASCII letter, a quote or a backslash
        # looks different in JSON text (\u00e4, \", \\) and would slip past a search there
        self.interactions.append(redact_data(interaction, secrets))
        if FAKE_SERVER_HEADER in headers:
            self.metadata["real_model"] = False
        elif "real_model" not in self.metadata:
            self.metadata["real_model"] = True
        self.save()

    def save(self) -> None:
        """Write the file (indent 2, sorted keys): diffs of a re-recording stay readable."""
        real = self.real_model
        note = self.recorded_from or (FAKE_SERVER_NOTE if real is False else "a model server (recorded live)")
        models = self.recorded_models()
        data = {
            "planbook_cassette": FORMAT_VERSION,
            "recorded_from": note,
            "real_model": real,
            "models": models,
            # the cassette exit's checkpoint: every recorded request and response, each string masked
            # with every secret the process knows now (one learned after a recording too)
            "interactions": mask_strings(self.interactions),
        }
        self.metadata = {k: v for k, v in data.items() if k != "interactions"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # atomically: a temporary file in the same folder, then a rename, so a crash or an
        # error while writing leaves the previous cassette whole
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, sort_keys=True, ensure_ascii=False)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _json_body(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")


def _shown(value: Any) -> str:
    return shorten(value, 240, as_json=True)


def _key(point: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"endpoint": point, **body}


def _recorded_key(interaction: dict[str, Any]) -> dict[str, Any]:
    request = interaction["request"]
    return _key(request.get("endpoint") or endpoint(request.get("path") or "/v1/chat/completions"), request["body"])


def first_difference(recorded: dict[str, Any], sent: dict[str, Any]) -> str:
    """Where two requests (endpoint and body) first differ, in words (for mismatch errors)."""
    others = sorted((set(recorded) | set(sent)) - set(MATCHED_FIELDS))
    for name in [n for n in MATCHED_FIELDS if n != "messages"] + others:
        if recorded.get(name) != sent.get(name):
            return f"{name}: recorded {_shown(recorded.get(name))}, sent {_shown(sent.get(name))}"
    old, new = recorded.get("messages") or [], sent.get("messages") or []
    for index in range(max(len(old), len(new))):
        a = old[index] if index < len(old) else None
        b = new[index] if index < len(new) else None
        if a != b:
            role = (b or a or {}).get("role", "?") if isinstance(b or a, dict) else "?"
            return (
                f"message {index + 1} ({role}): recorded {_shown(a) if a is not None else '(none)'}, "
                f"sent {_shown(b) if b is not None else '(none)'}"
            )
    return "no difference in the matched fields (the recording was already used)"
