"""Small pytest-friendly helpers around the fake server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: Every environment variable that selects a model, an endpoint, an account or whether a
#: cassette replays: the planbook variables and those the ``openai`` SDK reads itself.
MODEL_ENV = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "PLANBOOK_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
    "OPENAI_ORGANIZATION", "OPENAI_PROJECT", "PLANBOOK_CASSETTE_MODE",
)


@contextmanager
def model_env_removed() -> Iterator[None]:
    """Hide every variable of :data:`MODEL_ENV`, so a test never reaches a real model (restored after)."""
    saved = {k: os.environ.pop(k) for k in MODEL_ENV if k in os.environ}
    try:
        yield
    finally:
        for key in MODEL_ENV:
            os.environ.pop(key, None)
        os.environ.update(saved)
