"""The checkpoint every real exit of the process passes (see :mod:`.vault` for why).

The exits — the store's write path, the notebook's IOPub publishing, the CLI's streams, the
MCP server's answers, span export, model requests, cassette writes, errors raised — call
these, and nothing else decides what may leave: every secret the process's vault holds, in
every form it is echoed in, and every secret shape is ``***``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import vault
from .redact import Redactor, secret_texts
from .vault import VAULT


def remember(values: Iterable[Any]) -> list[str]:
    """The strings and numbers in ``values`` (through lists, dicts, objects' fields) are
    secrets of this process from now on; the ones that were not known yet."""
    return VAULT.add(secret_texts(values))


_exit_redactor: Redactor | None = None


def _redactor() -> Redactor:
    global _exit_redactor
    if _exit_redactor is None:
        _exit_redactor = Redactor()
    return _exit_redactor


def mask_text(text: str) -> str:
    """``text`` as it may leave the process: every known secret, in every form it is echoed
    in, and every secret shape, as ``***``."""
    if not text or not vault.MASKING:
        return text
    return str(_redactor().text(text))


def mask_data(value: Any) -> Any:
    """Plain data (dicts, lists, tuples, texts) as it may leave the process: secret-named
    keys' values and known secrets in texts as ``***``; ``value`` itself when clean."""
    if not vault.MASKING:
        return value
    return _redactor().data(value)


def mask_known(text: str) -> str:
    """``text`` with every known secret (the vault's, the model's key and base-URL credentials),
    in every form it is echoed in, as ``***``, and nothing else: for text a program reads back
    (a request to the model, a cassette), where a shape rule would change what it means (a
    replan prompt's ``"token": "$login"`` names a step; a tool schema's ``"password": {...}`` is
    a schema). Secrets that overlap or touch are hidden as one, so no fragment is left."""
    return _redactor().known(text)


def mask_bytes(data: bytes) -> bytes:
    """UTF-8 bytes (a JSON body, a message frame) as they may leave the process."""
    if not data or not vault.MASKING:
        return data
    text = data.decode("utf-8", "surrogateescape")
    hidden = mask_text(text)
    return data if hidden is text or hidden == text else hidden.encode("utf-8", "surrogateescape")
