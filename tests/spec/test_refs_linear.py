"""Finding and resolving ``${id}`` references is linear in the text: the inline pattern never
reads from a ``${`` that no ``}`` closes.

The defect: ``\\$\\$|\\$\\{([^}]*)\\}`` tried every ``${``; one with no ``}`` after it read to the end
of the text and failed, and the next ``${`` read it again. An argument of ``"${" * 50_000``
(100 kB, a plan a model wrote) took 40 s to check (``find_refs`` for every arg, and
:func:`planbook.spec.reftypes.misfit`), and as long again to resolve when its step was called.

No test here measures time. The pattern is watched: every text it is given is recorded, and
the reading its failed attempts do (from each ``${`` with no ``}`` after it, to the end) is
summed. It must be nothing. What the references are, and what a resolved text says, are
compared with the old way of finding them on texts made of ``$ { } a`` at random.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

import planbook
from planbook.data import refs
from planbook.spec import reftypes

OLD_INLINE = re.compile(r"\$\$|\$\{([^}]*)\}")


class _Watched:
    """A stand-in for :data:`planbook.data.refs.INLINE_REF` that records each text it is given."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.texts: list[str] = []

    def finditer(self, text: str) -> Any:
        self.texts.append(text)
        return self.pattern.finditer(text)

    def sub(self, repl: Any, text: str) -> str:
        self.texts.append(text)
        return self.pattern.sub(repl, text)


def _unclosed_reading(text: str) -> int:
    """Characters read by the attempts that start at a ``${`` with no ``}`` after it."""
    last = text.rfind("}")
    return sum(len(text) - i for i in range(len(text) - 1) if text.startswith("${", i) and i > last)


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> _Watched:
    pattern = _Watched(refs.INLINE_REF)
    monkeypatch.setattr(refs, "INLINE_REF", pattern)
    return pattern


TEXTS = {
    "${ many times": "${" * 2_000,
    "a reference, then ${ many times": "see ${a} " + "${" * 2_000,
    "an unclosed ${ then $$": "${x " * 500 + "$$" * 500,
}


@pytest.mark.parametrize("name", list(TEXTS))
def test_no_unclosed_reference_is_read_twice(watched: _Watched, name: str) -> None:
    text = TEXTS[name]
    results = {"a": "A"}
    refs.find_refs(text)
    refs.resolve(text, results)
    reftypes.misfit(text, list[str], lambda ref: reftypes.UNKNOWN)
    assert watched.texts, "the pattern was not used"
    assert sum(_unclosed_reading(t) for t in watched.texts) == 0


def _old_refs(text: str) -> list[str]:
    return [m.group(1) for m in OLD_INLINE.finditer(text) if m.group(1) and refs.is_step_id(m.group(1))]


def _old_resolve(text: str, results: dict[str, Any]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return str(results[m.group(1)]) if refs.is_step_id(m.group(1)) else m.group(0)

    return OLD_INLINE.sub(sub, text)


def test_the_references_and_resolved_texts_are_what_they_were() -> None:
    rnd = random.Random(11)
    for _ in range(3_000):
        text = "x" + "".join(rnd.choice(["$", "{", "}", "a", "b", " ", "$$", "${a}", "${"]) for _ in range(rnd.randint(0, 14)))
        found = refs.inline_refs(text)
        assert found == _old_refs(text), text
        results = {ref: ref.upper() for ref in found}
        assert refs.resolve(text, results) == _old_resolve(text, results), text


def test_a_plan_with_a_long_unclosed_reference_is_checked_and_runs() -> None:
    box = planbook.Toolbox()

    @box.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    arg = "${" * 5_000 + "$$"
    plan = planbook.Plan(goal="echo", steps=[planbook.Step(id="a", tool="echo", args={"text": arg})])
    result = planbook.run(plan, tools=box)
    assert result.outputs["a"] == "${" * 5_000 + "$"
