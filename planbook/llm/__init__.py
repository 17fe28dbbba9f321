"""The model layer: planners and agents over the ``openai`` SDK, with cassettes.

Importing this package does not import ``openai``; building a client does.
"""

from __future__ import annotations

from .agent import LLMAgent
from .cassette import Cassette
from .cassette_file import MODE_ENV
from .client import ModelClient
from .config import DEFAULT_MODEL, LLMConfig, resolve_config
from .planner import LLMPlanner, PlanProposal, ProposedStep
from .text import estimate_tokens

# The model layer's errors (CassetteError, CassetteMismatch, LLMConfigError, ModelCallError) are
# planbook's, like every error: import them from planbook.
__all__ = [
    "MODE_ENV", "Cassette", "DEFAULT_MODEL", "LLMAgent", "LLMConfig", "LLMPlanner", "ModelClient", "PlanProposal",
    "ProposedStep", "estimate_tokens", "resolve_config",
]
