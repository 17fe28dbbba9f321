"""planbook's version, in one low module: the package's top, the command line and the MCP
server read it from here (the surfaces must not climb to ``planbook/__init__`` for it).

It is looked up on first use, not at import: finding the installed distribution scans the
import path (about a millisecond and a half of every ``import planbook`` otherwise).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written);
    a checkout used without installing (``PYTHONPATH=.``) says so instead of guessing."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("planbook")
    except PackageNotFoundError:
        return "0+unknown"


#: declared, not assigned: the module's ``__getattr__`` makes it when first read (this line
#: tells readers and checkers the name exists; an assignment here would end the laziness)
__version__: str


def __getattr__(name: str) -> Any:
    """``__version__``, made when first read."""
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "version"]
