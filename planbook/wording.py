"""How counts and cut labels are written, once for every surface: ``1 execution`` and
``2 executions`` (never ``execution(s)``), and a label too long for its place cut at a
word boundary with an ellipsis (never in the middle of a word when a boundary is near)."""

from __future__ import annotations

import re

#: characters that end a word in an id or a label (a cut prefers to fall just before one)
_BOUNDARY = re.compile(r"[-_.\s/:]")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 execution``, ``0 executions``, ``3 executions`` (``many`` for irregular plurals)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def shorten(text: str, width: int, ellipsis: str = "…") -> str:
    """``text`` within ``width`` characters: whole, or cut after the last whole word that
    fits (a word boundary in the last half of the room), then ``ellipsis``. A single word
    longer than the room is cut where the room ends: the ellipsis says it was cut."""
    if len(text) <= width:
        return text
    room = max(width - len(ellipsis), 0)
    head = text[:room]
    cuts = [m.start() for m in _BOUNDARY.finditer(text[: room + 1])]
    if cuts and cuts[-1] >= room // 2:
        head = text[: cuts[-1]]
    return head.rstrip("-_. /:") + ellipsis


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
