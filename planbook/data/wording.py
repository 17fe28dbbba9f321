"""How counts and ids made from words are written, once for every surface: ``1 execution``
and ``2 executions`` (never ``execution(s)``), an id made from a goal cut between words,
never inside one, and how a person's edit of a plan is named (``edited by you (cli)``)."""

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


def edited_by_you(who: str) -> str:
    """A person's edit of a step, as every surface names it (a revision's reason, the decision's
    words): ``edited by you (cli)``; ``who`` is where it was given (cli, widget, api)."""
    return f"edited by you ({who})"


def revision_news(edited_by: str | None) -> str:
    """How a live view announces a new revision: ``Replanned`` when a planner or a review changed
    the plan, ``Edited by you (cli)`` when a person did (nobody replanned then)."""
    if edited_by is None:
        return "Replanned"
    said = edited_by_you(edited_by)
    return said[:1].upper() + said[1:]
