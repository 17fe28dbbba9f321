"""Where the model is: explicit arguments win, then OPENAI_API_KEY, OPENAI_BASE_URL, PLANBOOK_MODEL.

PLANBOOK_CASSETTE_MODE (record, off or replay) decides what a cassette left on its
default mode does (see :mod:`planbook.llm.cassette`): a cassette file that exists is
replayed unless it says record or off. Nothing here imports ``openai``; a missing key
is an error that says how to set one up, and never shows a secret (the key, or a user,
password or query value in the base URL).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..data.errors import LLMConfigError
from ..outbound.redact import model_secrets, redact_url

__all__ = ["DEFAULT_MODEL", "LLMConfig", "resolve_config"]

#: Used when neither ``model=`` nor PLANBOOK_MODEL says which model to ask.
DEFAULT_MODEL = "gpt-4o-mini"

#: Sent to servers that need no key (a local OpenAI-compatible server, a cassette replay).
#: It is a placeholder, not a secret, and it is never written anywhere.


SETUP_HELP = (
    "To use a model, set OPENAI_API_KEY (e.g. `export OPENAI_API_KEY=...` in the shell that starts "
    "Jupyter, or os.environ['OPENAI_API_KEY'] = ... before creating the planner), or point "
    "OPENAI_BASE_URL at an OpenAI-compatible server that needs no key (e.g. http://localhost:11434/v1); "
    "choose the model with model=... or PLANBOOK_MODEL. To run offline, pass cassette='path.json' "
    "to replay recorded responses (PLANBOOK_CASSETTE_MODE=record re-records a cassette from the model, "
    "=off calls the model without one)."
)


@dataclass(frozen=True)
class LLMConfig:
    """The resolved model settings. ``repr`` shows neither the key nor credentials in the URL."""

    model: str
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"LLMConfig(model={self.model!r}, base_url={self.shown_url!r}, has_key={self.has_key})"

    @property
    def shown_url(self) -> str | None:
        """The base URL as errors and events show it: user, password and query values masked."""
        return redact_url(self.base_url)

    @property
    def has_key(self) -> bool:
        return bool(self.api_key)

    @property
    def live(self) -> bool:
        """A key, or a server that may need none: enough to call a model."""
        return bool(self.api_key or self.base_url)

    def secrets(self) -> list[str]:
        """Strings that must never be written (used to redact errors, events and cassettes):
        the key, and the credentials a base URL may carry (user:password, query values), each
        of at least :data:`~planbook.outbound.redact.MIN_SECRET_LENGTH` characters (shorter ones are
        not secrets worth garbling every message for: ``EMPTY``, ``ollama``, ``none``)."""
        return model_secrets(self.api_key, self.base_url)


def resolve_config(
    model: str | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> LLMConfig:
    """Explicit arguments, else the environment, else the default model (no key, no server)."""
    env = os.environ if env is None else env
    return LLMConfig(
        model=model or env.get("PLANBOOK_MODEL") or DEFAULT_MODEL,
        api_key=api_key or env.get("OPENAI_API_KEY") or None,
        base_url=base_url or env.get("OPENAI_BASE_URL") or None,
    )


def missing_setup_error(what: str) -> LLMConfigError:
    return LLMConfigError(f"{what} has no model to call: no API key, no server and no cassette. {SETUP_HELP}")

