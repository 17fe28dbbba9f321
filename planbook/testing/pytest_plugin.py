"""Fixtures for your own tests. Installing planbook registers this plugin with pytest (its
``pytest11`` entry point), so ``fake_openai`` needs no ``pytest_plugins`` line; turn it off
with ``-p no:planbook.testing.pytest_plugin``.

``fake_openai`` is one FakeOpenAIServer per test module, reset before each test;
the model environment variables are hidden for every test that uses it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_server import FakeOpenAIServer
from .helpers import MODEL_ENV


@pytest.fixture(scope="module")
def _fake_openai_module() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(strict=False) as server:
        yield server


@pytest.fixture
def fake_openai(_fake_openai_module: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    for key in MODEL_ENV:
        monkeypatch.delenv(key, raising=False)
    server = _fake_openai_module.reset()
    yield server
    server.check()  # a request beyond the script, or a scripted reply that raised, fails the test
