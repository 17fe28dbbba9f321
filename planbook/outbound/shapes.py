"""Redaction by shape, in time linear in the text: what looks like a secret, known or not.

The shapes: ``Bearer …``, ``Authorization: …``, ``sk-…`` keys, ``user:password@`` in a
URL, and a secret-named field (see :func:`~planbook.outbound.redact.is_secret_name`) in
every form a program writes one:

- ``name=value`` (a URL query, an environment dump, ``--password=x``) and Python's keyword
  form ``Settings(password='x')``, ``password = "x y"``;
- ``"name": value`` (JSON) and ``'name': value`` (a dict's ``repr``), their quotes escaped
  once or more (JSON inside JSON, a repr of a JSON text) or written as HTML entities;
- ``name: value`` (YAML, a log line), the value up to the end of the line.

Why a scanner and not one ``re.sub``: a pattern that may start a name anywhere inside a
word rescans the word from every position (an 18 kB base64url word took 4 s, 40 kB 40 s),
and matching a value that is not a secret's only to scan it again (``a=a=a=…``) is
quadratic too. Here a name starts only where a run of name characters starts (a
lookbehind), a quoted value is matched only after a secret's name and then replaced, and
the scan goes on right after a name that is not a secret's: every character is looked at
a bounded number of times.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: What a redacted value is written as (and shown as).
REDACTED_TEXT = "***"

_NAME_CHARS = r"A-Za-z0-9_.\-"
#: an HTML entity a quote may be written as (a repr shown in a page)
_ENTITY_QUOTES = r"&quot;|&\#x27;|&\#39;|&\#x22;|&\#34;|&apos;"

_SCAN = re.compile(
    # ``Authorization: Basic …`` / ``authorization="…"``: the rest of the line
    r"(?P<auth>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)(?P<av>[^\r\n\"']+)"
    r"|(?P<bearer>\bbearer\s+)(?P<bv>[A-Za-z0-9\-._~+/]+=*)"
    r"|(?P<sk>(?<![A-Za-z0-9_\-])sk-)(?P<kv>[A-Za-z0-9_\-]{16,})"
    # a scheme starts where a run of scheme characters starts: never rescanned from inside it
    r"|(?P<url>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)(?P<uv>[^/\s:@\"']+:[^/\s@\"']+)@"
    # "name": / 'name': / \"name\": / &quot;name&quot;: (the same quote on both sides)
    rf"|(?P<nq>\\{{0,7}}[\"']|{_ENTITY_QUOTES})(?P<qname>[A-Za-z_][A-Za-z0-9_.\- ]*)(?P=nq)\s*(?P<qsep>[:=])\s*"
    # name= / name = / name: / --name=  (a name starts only where a run of name characters starts)
    rf"|(?<![{_NAME_CHARS}])(?P<name>[\-.]*[A-Za-z_][{_NAME_CHARS}]*)"
    r"(?:\s*=(?!=)\s*|(?P<colon>[ \t]*:(?!//)[ \t]*))",
    re.IGNORECASE,
)
#: the groups that hold a shape's secret part, by the group of the shape
_SECRET_PART = (("auth", "av"), ("bearer", "bv"), ("sk", "kv"), ("url", "uv"))

#: a quoted value's opening quote: a string prefix (``b'…'``), escaping backslashes, the quote
_OPEN = re.compile(rf"[rbuf]{{0,2}}(\\{{0,7}}[\"']|{_ENTITY_QUOTES})", re.IGNORECASE)
#: a quoted value's body, its own escapes skipped (a repr's ``\'`` does not end it): unambiguous
_BODY = {"'": re.compile(r"(?:[^'\\\n]|\\.)*"), '"': re.compile(r'(?:[^"\\\n]|\\.)*')}
#: the body of a value whose quotes are escaped once (a repr's repr, JSON inside JSON): two
#: backslashes and the token after them are one escape of the text inside (content, even a
#: quote); a lone backslash before the quote closes it. Each token starts differently: linear
_ESCAPED_BODY = {"\\" + q: re.compile(rf"(?:[^\\\n]|\\\\(?:[^\\\n]|\\[^\n])|\\[^{q}\\\n])*") for q in "'\""}
#: an unquoted value after ``=`` (a URL query's ``&`` ends it) and after ``:`` (up to the line's end)
_EQ_VALUE = re.compile(r"[^\s&\"';,}\]]+")
_COLON_VALUE = re.compile(r"[^\s,;}\]\"'](?:[^\r\n,;}\]\"']*[^\s,;}\]\"'])?")
#: what is not a parenthesis: the jumps of :func:`_call_end`
_NOT_PAREN = re.compile(r"[^()\n]*")


def mask_shapes(text: str, is_secret_name: Callable[[str], bool]) -> str:
    """``text`` with every secret shape's value replaced by :data:`REDACTED_TEXT`."""
    out: list[str] = []
    done = 0  # text[:done] is decided: copied to ``out`` or replaced
    pos = 0
    search = _SCAN.search
    while True:
        m = search(text, pos)
        if m is None:
            break
        pos = m.end()
        for shape, part in _SECRET_PART:
            if m.start(shape) >= 0:
                out += (text[done:m.start(part)], REDACTED_TEXT)
                done = m.end(part)
                break
        else:
            qname = m.group("qname")
            if not is_secret_name(qname if qname is not None else m.group("name")):
                continue  # its value is scanned as any text is (``"url": "https://u:pw@host"``)
            bare_colon = m.start("colon") >= 0
            if bare_colon and not _field_like(text, m.start("name"), m.group("name")):
                continue  # prose: "the key: turn it twice"
            if text.startswith(("{", "["), pos):
                start, end = pos, _bracket_end(text, pos)  # a mapping or list under a secret's name: whole
            else:
                start, end = _value(text, pos, colon=bare_colon or m.group("qsep") == ":")
            if end > start and not text.startswith(REDACTED_TEXT, start):
                out += (text[done:start], REDACTED_TEXT)
                done = pos = end
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


#: what may stand before a ``name: value`` field on its line (spaces apart): YAML's list dash
#: and flow mappings, a log line's separators, a quote or a markup tag
_FIELD_AFTER = frozenset("\n\r{[(,;:|#>-=\"'`")


def _field_like(text: str, at: int, name: str) -> bool:
    """True when ``name: …`` at ``at`` is a field (YAML, a log line), not a sentence with a
    colon: the name is written as a program writes one (``api_key``, ``X-Api-Key``,
    ``apiKey``, ``PASSWORD``), or it starts its line or follows a separator."""
    if any(c in name for c in "_.-") or name.isupper() or name[1:] != name[1:].lower():
        return True
    i, stop = at, max(0, at - 64)  # at most 64 spaces looked back over: a bounded cost per name
    while i > stop and text[i - 1] in " \t":
        i -= 1
    return i == 0 or text[i - 1] in _FIELD_AFTER


def _value(text: str, at: int, *, colon: bool) -> tuple[int, int]:
    """Where the value written at ``at`` starts and ends, its quotes left out: a quoted
    value runs to its closing quote (escapes inside skipped) or the end of its line."""
    opened = _OPEN.match(text, at)
    if opened is not None:
        quote = opened.group(1)
        start = opened.end()
        if quote in _BODY:  # a plain quote: its body, with the escapes a repr or JSON writes
            return start, _BODY[quote].match(text, start).end()  # type: ignore[union-attr]
        if quote in _ESCAPED_BODY:  # \' or \": escaped once (a repr's repr), so its own quotes twice
            return start, _ESCAPED_BODY[quote].match(text, start).end()  # type: ignore[union-attr]
        # an escaped quote (``\"``) or an entity: up to the same closing one, on this line
        line_end = text.find("\n", start)
        if line_end < 0:
            line_end = len(text)
        close = text.find(quote, start, line_end)
        return start, close if close >= 0 else line_end
    found = (_COLON_VALUE if colon else _EQ_VALUE).match(text, at)
    end = found.end() if found is not None else at
    call = text.find("(", at, end)
    if call >= 0:  # an object's repr: up to its closing parenthesis
        return at, _call_end(text, call)
    while end > at and text[end - 1] == ")":  # ``Settings(password=x)``: the ``)`` is the repr's
        end -= 1
    return at, end


def _call_end(text: str, at: int) -> int:
    """Where the call written at ``at`` (its ``(``) ends: an object's repr as a secret's value,
    ``password=Secret('x')``, is hidden whole, up to its closing parenthesis or its line's end."""
    depth = 0
    size = len(text)
    while at < size:
        char = text[at]
        if char == "\n":
            return at
        depth += 1 if char == "(" else -1
        at += 1
        if depth == 0:
            return at
        at = _NOT_PAREN.match(text, at).end()  # type: ignore[union-attr]
    return at


#: what is not a bracket: the jumps of :func:`_bracket_end`
_NOT_BRACKET = re.compile(r"[^\[\]{}]*")


def _bracket_end(text: str, at: int) -> int:
    """Where the mapping or list that opens at ``at`` ends (brackets counted,
    any kind), or the text's end: ``"token": {"type": "string"}`` is hidden whole, never as
    ``***"type": …`` with a piece of the value left standing."""
    depth = 0
    size = len(text)
    while at < size:
        char = text[at]
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth <= 0:
                return at + 1
        at = _NOT_BRACKET.match(text, at + 1).end()  # type: ignore[union-attr]
    return at
