"""Masking is linear in the text: no pattern run on user data rescans a word from every position.

The defect: the shape rule's pattern started a ``name=`` at any position inside a word, and
a URL scheme after any ``-`` or ``.``; each attempt read the rest of the word, so masking an
18 kB base64url word took 4 s and 40 kB 40 s. A ``name=value`` that was not a secret had
its value masked again, recursively (``a=a=a=…`` of 4 kB raised RecursionError).

No test here measures time. The work of a regex attempt is made visible by completing it:
after the word we put what the attempt looks for (``=``, ``: v``, ``://u:p@``), so an
attempt that reads through the word *succeeds*, and its match says how far it read. The
sum of those lengths over all start positions is the attempts' work: it must grow as the
text does (×4 for a text 4 times as long), not as its square (×16). (Stricter than the scan
itself, which never starts inside what a match consumed.) The scanner that drives the
pattern must never search a part of the text twice.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from typing import Any

import pytest

from planbook.outbound import mask_text, shapes
from planbook.outbound.redact import Redactor, is_secret_name

_B64URL = string.ascii_letters + string.digits + "-_"
_B64 = string.ascii_letters + string.digits + "+/"


def _word(alphabet: str, n: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice(alphabet) for _ in range(n))


#: texts that made the old pattern quadratic, each built for n characters; the ones made
#: of a word end with what completes an attempt that reads through the word
TEXTS: dict[str, Callable[[int], str]] = {
    "base64url word, then =": lambda n: _word(_B64URL, n) + "=v",
    "base64url word, then : value": lambda n: _word(_B64URL, n) + ": v",
    "base64url word, then ://user:pw@": lambda n: _word(_B64URL, n) + "://u:p@h",
    "base64 word, then =": lambda n: _word(_B64, n) + "=v",
    "hex word, then ://user:pw@": lambda n: _word("0123456789abcdef", n) + "://u:p@h",
    "dotted name, then =": lambda n: ".".join(_word(string.ascii_lowercase, 3, i) for i in range(n // 4)) + "=v",
    "credentials of a long URL": lambda n: "x://" + _word(_B64URL, n // 2) + ":" + _word(_B64URL, n // 2, 8) + "@h",
    "a=a=a=": lambda n: "a=" * (n // 2),
    '"x":"x":': lambda n: '"x":' * (n // 4),
    "'key': 'key': ": lambda n: "'key': " * (n // 7),
    "://": lambda n: "://" * (n // 3),
    "Bearer Bearer": lambda n: "Bearer " * (n // 7),
    "sk-sk-": lambda n: "sk-" * (n // 3),
    "password=(((": lambda n: "password=" + "(" * n,
    "escaped quotes": lambda n: "\\\\\\\"" * (n // 4),
}


def attempts_work(pattern: re.Pattern[str], text: str) -> int:
    """How many characters the pattern's successful attempts read, over every start position."""
    total = 0
    for start in range(len(text)):
        found = pattern.match(text, start)
        if found is not None:
            total += found.end() - start
    return total


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_the_scan_pattern_reads_a_text_a_bounded_number_of_times(name: str) -> None:
    make = TEXTS[name]
    small, large = attempts_work(shapes._SCAN, make(2_000)), attempts_work(shapes._SCAN, make(8_000))
    # linear: about 4 times the work for 4 times the text (quadratic would be 16 times)
    assert large <= 4.5 * small + 64, (name, small, large)
    assert large <= 3 * 8_000 + 64, (name, large)  # and a bounded number of reads per character


def test_the_measure_tells_a_quadratic_pattern_apart() -> None:
    """The old pattern's way of starting a name anywhere, measured the same way: ×16."""
    unanchored = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)\s*=")
    make = TEXTS["base64url word, then ="]
    small, large = attempts_work(unanchored, make(2_000)), attempts_work(unanchored, make(8_000))
    assert large > 12 * small


class _Recording:
    """Stands for the scan pattern: records where each search starts and where its match ends."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls: list[tuple[int, int | None]] = []

    def search(self, text: str, pos: int = 0) -> Any:
        found = self.pattern.search(text, pos)
        self.calls.append((pos, None if found is None else found.end()))
        return found


@pytest.mark.parametrize("text", [
    "a=" * 3_000 + "password=x",
    "x=password=token=" * 500,
    '"x":' * 2_000 + '"password": "pw" url=https://u:pw@h/?token=t',
    "user=bob " * 1_000 + "Settings(password='a b', api_key=Secret('k'))",
])
def test_the_scanner_never_searches_a_part_of_the_text_twice(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recording = _Recording(shapes._SCAN)
    monkeypatch.setattr(shapes, "_SCAN", recording)
    shapes.mask_shapes(text, is_secret_name)
    ends = [0] + [end for _, end in recording.calls[:-1]]
    assert all(pos >= end for (pos, _), end in zip(recording.calls, ends)), recording.calls[:10]
    assert recording.calls[-1][1] is None  # ends with the search that finds nothing more


def test_a_name_value_chain_is_masked_without_recursion() -> None:
    """``a=a=…`` of 200 kB: the old rule masked each value again inside the last (RecursionError)."""
    text = "a=" * 100_000 + "password=zq-chain-only-81"  # a value no other test makes known
    masked = Redactor(env={}).text(text)
    assert masked.endswith("password=***") and masked.count("a=") == 100_000


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_masking_large_texts_of_every_shape_ends(name: str) -> None:
    """Through the exit's own function, on 400 kB (what took the old pattern hours: 40 kB took
    40 s). No time is measured: a quadratic scan would not end within the suite at all, and
    an old recursion raised at once. The word "token" makes every text one the shapes look at."""
    text = "token " + TEXTS[name](400_000)
    assert mask_text(text).startswith("token ")
