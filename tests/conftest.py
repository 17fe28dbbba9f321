"""Shared fixtures. One IPython shell for the whole session (globalipapp): mixing it with
``InteractiveShell.instance()`` raises MultipleInstanceError."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def ip() -> Any:
    """The session's IPython shell with ``%load_ext planbook`` done."""
    from IPython.testing import globalipapp

    # the module-attribute form on purpose: ``from IPython.testing.globalipapp import
    # get_ipython`` binds a function that returns None from its second call on
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "planbook")
    return shell


@pytest.fixture
def server(fake_openai: Any) -> Any:
    """The scripted OpenAI-compatible server of the model-layer tests (from
    ``planbook.testing.pytest_plugin``: one per module, reset for each test, model
    environment variables hidden, and no request beyond the script)."""
    return fake_openai
