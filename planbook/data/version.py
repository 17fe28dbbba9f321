"""planbook's version, in one low module: the package's top, the command line and the MCP
server read it from here (the surfaces must not climb to ``planbook/__init__`` for it)."""

from __future__ import annotations


def _version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written);
    a checkout used without installing (``PYTHONPATH=.``) says so instead of guessing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("planbook")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _version()

__all__ = ["__version__"]
