"""Repository-wide test settings (they apply to tests/ and to the notebooks under nbval).

Tests never call a model over the network: the model settings of whoever runs the
suite are removed before any test or notebook kernel starts, so notebook 04 replays its
cassette instead of going live (and re-recording it) when a developer has a key set.
"""

from __future__ import annotations

import os

#: the fixtures planbook offers for testing your own planners (``fake_openai``) are used here too
pytest_plugins = ["planbook.testing.pytest_plugin"]

MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PLANBOOK_MODEL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")


def pytest_configure(config: object) -> None:
    for name in MODEL_ENV:
        os.environ.pop(name, None)
