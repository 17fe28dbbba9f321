"""Where the model layer meets the ``openai`` SDK's HTTP library (imported only when called)."""

from __future__ import annotations

import importlib
from types import ModuleType


def http_module() -> ModuleType:
    """The HTTP library the installed ``openai`` SDK is built on (``httpx2`` since openai 3.0,
    ``httpx`` before), found through the SDK's own client class rather than imported by name,
    so planbook follows the SDK if it changes its HTTP library again."""
    import openai

    for cls in openai.DefaultHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if root not in ("openai", "builtins"):
            return importlib.import_module(root)
    raise ImportError(f"cannot tell which HTTP library openai {openai.__version__} uses")  # pragma: no cover
