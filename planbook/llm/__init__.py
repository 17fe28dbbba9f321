"""The model layer: planners and agents over the ``openai`` SDK, with cassettes.

Importing this package does not import ``openai``; building a client does.
"""

from __future__ import annotations

from .agent import LLMAgent
from .cassette import MODE_ENV, Cassette, CassetteMismatch
from .cassette_file import CassetteError
from .client import ModelClient
from .config import DEFAULT_MODEL, LLMConfig, LLMConfigError, ModelCallError, resolve_config
from .planner import LLMPlanner, PlanProposal, ProposedStep
from .text import estimate_tokens, redact_url

__all__ = [
    "MODE_ENV", "Cassette", "CassetteError", "CassetteMismatch", "DEFAULT_MODEL", "LLMAgent", "LLMConfig", "LLMConfigError", "LLMPlanner",
    "ModelCallError", "ModelClient", "PlanProposal", "ProposedStep", "estimate_tokens", "redact_url", "resolve_config",
]
