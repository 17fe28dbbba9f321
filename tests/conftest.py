"""Shared fixtures. One IPython shell for the whole session (globalipapp): mixing it with
``InteractiveShell.instance()`` raises MultipleInstanceError."""

from __future__ import annotations

from typing import Any

import pytest

# the browser tests' fixtures (tests/browser/ and the first-hour test), found by pytest under these
# names here rather than imported into each test module, where each use would redefine the import
from browser_support import browser, lab, notebook7

__all__ = ["browser", "lab", "notebook7"]


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


@pytest.fixture(autouse=True)
def own_run_store(tmp_path_factory: Any, monkeypatch: Any) -> Any:
    """Each test keeps runs in a store of its own: no result is reused from another test.

    The magics' step cache starts as a new kernel's does (only tools registered with
    ``cache=True``); the cache tests (tests/notebook/test_cache_magics.py) turn it on.
    """
    home = tmp_path_factory.mktemp("planbook-home")
    monkeypatch.setenv("PLANBOOK_HOME", str(home))
    import builtins

    shell = getattr(builtins, "_ip", None)  # the session's shell, once the ip fixture started it
    magics = shell.magics_manager.registry.get("PlanMagics") if shell is not None else None
    if magics is not None:
        magics.store_choice, magics._store, magics.cache = None, None, None
    return home


@pytest.fixture(autouse=True, scope="module")
def vault_of_this_module() -> Any:
    """The process's vault of secrets as each test module found it, put back when the module ends.

    A process keeps every secret it learns for good (planbook.outbound.vault), and the test session
    is one process: a module that teaches it ``"a number"`` (a store test) would mask that phrase in
    every later module's errors, and a secret that shows up in a plan's text makes a store write it
    step by step. Within a module the secrets stay, as in a real session (a module-scoped run's
    secrets stay hidden for all its tests)."""
    from planbook.outbound.vault import VAULT

    before = VAULT.texts
    yield
    if VAULT.texts != before:
        with VAULT._lock:  # the vault has no public way to forget: only the tests may
            VAULT._texts = before
            VAULT.version += 1  # every redactor rebuilds its patterns
