"""What a step id may contain: the one rule that spec reading, validation and ``$id``
references share.

An id is a word a ``$id`` reference can name and a text view can print on one line:
letters and digits of any script (``données``, ``数据``, ``हिन्दी``), ``_``, ``.`` and
``-``, starting with a letter, a digit or ``_``. Spaces, control characters (a NUL or a
newline breaks the plan text) and punctuation that plans give a meaning to (``$``,
braces, commas, colons) are refused, with the character named.
"""

from __future__ import annotations

import secrets
import time
import unicodedata

#: the rule in words, for error messages
ID_RULE = "letters and digits of any script, '_', '.' and '-', starting with a letter, digit or '_'"


def _id_char(ch: str, first: bool) -> bool:
    if ch.isalnum() or ch == "_":
        return True
    if first:
        return False
    # '.', '-' and the combining marks that letters of many scripts need (Devanagari vowel
    # signs, a decomposed 'é'); str.isalnum() says no to those, \w in a regex too
    return ch in ".-" or unicodedata.category(ch).startswith("M")


def is_step_id(text: str) -> bool:
    """Whether ``text`` may be a step id (and so be named by ``$text``)."""
    return bool(text) and all(_id_char(ch, i == 0) for i, ch in enumerate(text))


def id_problem(text: str) -> str | None:
    """Why ``text`` cannot be a step id, in words; None when it can."""
    if not text:
        return "the id is empty"
    for i, ch in enumerate(text):
        if not _id_char(ch, i == 0):
            where = "starts with" if i == 0 else "holds"
            return f"the id {text!r} {where} {_describe(ch)}: an id is {ID_RULE}"
    return None


def _describe(ch: str) -> str:
    """A character as a person can find it in the file: printable ones quoted, others by code point."""
    name = unicodedata.name(ch, "")
    if ch.isprintable() and not ch.isspace():
        return f"{ch!r}"
    return f"U+{ord(ch):04X}" + (f" ({name.lower()})" if name else " (a control character)")


def new_run_id(now: float | None = None) -> str:
    """A readable, sortable, unique id: ``20250101-120000-1a2b3c``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"
