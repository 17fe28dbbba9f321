"""Test helpers for model-backed planners and agents: a scripted OpenAI-compatible server.

Nothing here is imported by ``import planbook``.
"""

from __future__ import annotations

from .fake_server import FakeOpenAIServer, FakeRequest, Reply
from .helpers import MODEL_ENV, model_env_removed

# the server's token estimate is the model layer's: planbook.llm.estimate_tokens
__all__ = ["FakeOpenAIServer", "FakeRequest", "MODEL_ENV", "Reply", "model_env_removed"]
