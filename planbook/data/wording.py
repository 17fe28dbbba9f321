"""How counts and ids made from words are written, once for every surface: ``1 execution``
and ``2 executions`` (never ``execution(s)``), and an id made from a goal cut between
words, never inside one."""

from __future__ import annotations

import re


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 execution``, ``0 executions``, ``3 executions`` (``many`` for irregular plurals)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def slug(text: str, width: int = 40) -> str:
    """An id from words (``Book trains and hotels`` -> ``book-trains-and-hotels``), cut
    between words, never inside one, when it is longer than ``width``."""
    words = re.findall(r"[A-Za-z0-9]+", text.lower())
    out = ""
    for word in words:
        candidate = f"{out}-{word}" if out else word
        if len(candidate) > width:
            return out or word[:width]
        out = candidate
    return out
