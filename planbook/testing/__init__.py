"""Test helpers for model-backed planners and agents: a scripted OpenAI-compatible server.

Nothing here is imported by ``import planbook``.
"""

from __future__ import annotations

from .fake_server import FakeOpenAIServer, FakeRequest, Reply, estimate_tokens
from .helpers import MODEL_ENV, model_env_removed

__all__ = ["FakeOpenAIServer", "FakeRequest", "MODEL_ENV", "Reply", "estimate_tokens", "model_env_removed"]
