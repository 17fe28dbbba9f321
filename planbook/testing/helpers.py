"""Small pytest-friendly helpers around the fake server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: Environment variables the model layer reads.
MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PLANBOOK_MODEL")


@contextmanager
def model_env_removed() -> Iterator[None]:
    """Hide OPENAI_API_KEY, OPENAI_BASE_URL and PLANBOOK_MODEL, so a test never reaches a real model."""
    saved = {k: os.environ.pop(k) for k in MODEL_ENV if k in os.environ}
    try:
        yield
    finally:
        for key in MODEL_ENV:
            os.environ.pop(key, None)
        os.environ.update(saved)
