"""``outbound.bounded`` keeps at most its limit of a text, also at the smallest limits: ``text[-0:]``
is the whole text, so a limit of 0 (a view's pane budget spent) kept every character it was
meant to leave out, and the views carried a copy of the rule to get round it."""

from __future__ import annotations

import pytest

from planbook.outbound import bounded

TEXT = "first line of a long error\n" + "x" * 5_000 + "\nValueError: the point is at the end"


def test_a_limit_of_0_keeps_only_the_texts_size() -> None:
    assert bounded(TEXT, 0) == f"… [{len(TEXT):,} characters left out] …"


@pytest.mark.parametrize("limit", [1, 2, 3, 10, 400])
def test_no_more_than_the_limit_is_kept_of_the_text(limit: int) -> None:
    cut = bounded(TEXT, limit)
    assert f"{len(TEXT) - limit:,} characters left out" in cut
    kept = cut.replace("\n… [", "[").split("[", 1)
    head = kept[0]
    tail = cut.rsplit("] …", 1)[1].lstrip("\n")
    assert len(head) + len(tail) == limit
    assert TEXT.startswith(head) and TEXT.endswith(tail)


def test_a_text_within_the_limit_is_kept_whole() -> None:
    assert bounded("short", 5) == "short"
    assert bounded("", 0) == ""
