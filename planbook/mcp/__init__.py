"""MCP (Model Context Protocol) for planbook: a server's tools as a Toolbox, and planbook as a server.

Needs the ``mcp`` extra (``pip install "planbook[mcp]"``). Nothing here is imported by
``import planbook``; the SDK itself loads only when a connection or the server starts.
"""

from __future__ import annotations

from typing import Any

# MCPError, like every error, is planbook's: import it from planbook
__all__ = ["MCPToolbox", "connect", "close_all"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'planbook.mcp' has no attribute {name!r}")
