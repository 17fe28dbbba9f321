"""Text from a run made safe to show: in a terminal, in a plan a model reads, in Markdown.

A step's task, result, error or printed output is data from tools, models and store
files, and any of them may hold an escape sequence (OSC 52 sets the clipboard, others
retitle the terminal or clear the screen) or a line break that forges a plan line
(``b. [✓] ...``). Every view that prints such text goes through these functions:

- :func:`neutralise` shows control characters as escapes (``\\x1b``), keeping line breaks
  and tabs;
- :func:`one_line` also shows line breaks as ``⏎``: for a line that must stay one line
  (a step line, a table cell);
- :func:`indent_lines` also indents every continuation line, so no line of the text
  starts where a plan's own lines start;
- :func:`md_text` and :func:`md_code` make text inert in Markdown (no HTML, no emphasis,
  no links, no maths, no new block);
- :func:`html_text` makes text inert in HTML (every view's HTML escapes with it, and with
  nothing else).
"""

from __future__ import annotations

import html
import re

#: C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and
#: isolates (a "Trojan Source" reordering) → the escape that names them
_CONTROLS: dict[int, str] = {
    code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7F, 0xA0)) if code not in (0x09, 0x0A)
}
_CONTROLS.update({code: f"\\u{code:04x}" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})

#: what ends a line for a reader: a terminal, an editor, or str.splitlines (a model's tokenizer
#: may do the same); CR LF is one break
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

#: what replaces a line break in :func:`one_line`
RETURN_MARK = " ⏎ "


def neutralise(text: str) -> str:
    """``text`` with every control character shown as its escape (``\\x1b``, ``\\x07``, ``\\x9b``,
    ``\\u202e``); newlines and tabs stay, a CR LF line end becomes a newline.

    What a terminal shows of stored text: it can no longer set the clipboard (OSC 52),
    retitle the window, move the cursor, clear the screen or reorder a line.
    """
    if text.isprintable():  # the usual case, checked in C
        return text
    return text.replace("\r\n", "\n").translate(_CONTROLS)


def one_line(text: str) -> str:
    """``text`` neutralised, on one line: each line break shows as ``⏎``."""
    if text.isprintable():
        return text
    return neutralise(_LINE_BREAK.sub("\n", text)).replace("\n", RETURN_MARK)


def indent_lines(text: str, indent: str) -> str:
    """``text`` neutralised, with ``indent`` before every line after the first.

    Give an indent deeper than any line the surrounding text starts with: then a line
    break inside ``text`` cannot make a line that reads like one of them.
    """
    if text.isprintable():
        return text
    return neutralise(_LINE_BREAK.sub("\n", text)).replace("\n", "\n" + indent)


def html_text(value: object) -> str:
    """``value``'s text, inert in HTML: ``<``, ``>``, ``&`` and both quotes escaped (safe in an
    element and in a quoted attribute)."""
    return html.escape(str(value), quote=True)


# ------------------------------------------------------------------ Markdown
#: characters that mean something inline wherever they stand (``_`` is handled apart), and
#: the ``]`` of ``](``: with no line of its own, text cannot define a link reference, so the
#: inline form is the only link (or image) it could make, and ``[RESEARCHER]`` stays as written
_MD_SPECIAL = re.compile(r"[\\`*$~|]|\](?=\()")
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # not between two letters/digits


def md_text(text: str) -> str:
    """``text`` as inert Markdown: shown as written, on one line.

    HTML is escaped (``<img onerror=...>`` is text); ``*`` ``_`` ````` ``~`` ``|`` ``\\``,
    ``$`` (maths in Jupyter) and the ``]`` of ``](`` (a link) are backslash-escaped; a line
    break is ``<br>``, so no text can start a list item, a heading or a link reference of
    its own. What cannot mean anything is left as written, so the Markdown stays readable:
    an ``_`` between two letters (``load_csv``) and a bracket that makes no link (``[WRITER]``).
    """
    text = html.escape(neutralise(_LINE_BREAK.sub("\n", text)), quote=False)
    text = _MD_SPECIAL.sub(r"\\\g<0>", text)
    if "_" in text:
        text = _MD_UNDERSCORE.sub(r"\\_", text)
    return text.replace("\n", "<br>")


def md_code(text: str) -> str:
    """``text`` as a Markdown code span (HTML inside shows as text), on one line.

    The fence is one backtick longer than any run of backticks inside, so none closes it.
    """
    text = one_line(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    edges = text[:1] + text[-1:]
    # CommonMark strips one space from each end of a span that starts and ends with one
    pad = " " if not text or "`" in edges or edges == "  " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# ------------------------------------------------------------------ bounds
#: how much of an error, a task or a result's text is shown or stored (a 2 MB error must not
#: make a 12 MB record)
TEXT_LIMIT = 20_000


def bounded(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to about ``limit`` characters, saying how much was left out: its head
    and its tail are kept (an error's last line is often the point). Cut at a character,
    never inside a secret's mask (masking happens before the cut: a cut cannot keep a
    fragment of a secret that masking would have hidden whole)."""
    if len(text) <= limit:
        return text
    if limit <= 0:  # nothing kept (a view's budget spent): the text's size only
        return f"… [{len(text):,} characters left out] …"
    head = limit * 3 // 4
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n… [{left_out:,} characters left out of {len(text):,}] …\n{text[len(text) - tail:]}"
