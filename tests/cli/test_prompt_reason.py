"""Without a terminal, ``planbook run`` says what makes a step ask and what to do. Before, it always
said "drop --approve", even when ``--approve`` was not given and the tool's own ``approve=True``
was what asked (dropping a flag nobody gave changes nothing)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from planbook import Plan, Runner, Toolbox
from planbook.cli.prompt import attach_prompt

PLAN = "steps:\n  - {id: draft, tool: draft}\n  - {id: send, tool: send, needs: [draft]}\n"


def tools() -> Toolbox:
    box = Toolbox()

    @box.tool
    def draft() -> str:
        """A draft."""
        return "dear bob"

    @box.tool(approve=True)
    def send() -> str:
        """Sends; asks first, always."""
        return "sent"

    return box


def refusal(**options: Any) -> str:
    runner = Runner(Plan.parse(PLAN), tools=tools(), **options)
    with pytest.raises(ValueError) as info:
        attach_prompt(runner, stdin=io.StringIO(""))  # not a terminal
    return str(info.value)


def test_a_tool_registered_with_approve_is_named_and_no_flag_is_blamed() -> None:
    text = refusal()
    assert text.startswith("step 'send' waits for approval, and standard input is not a terminal")
    assert "its tool 'send' is registered with approve=True" in text
    assert "register it without approve=True" in text and "run the command from a terminal" in text
    assert "--approve" not in text  # before: "... or drop --approve ..."


def test_the_flag_is_named_when_it_is_what_asks() -> None:
    every = refusal(approve=True)
    assert every.startswith("step 'draft' waits for approval") and "the run was given --approve" in every
    assert every.endswith("or run it without --approve")
    named = refusal(approve=["draft"])
    assert "--approve names step 'draft'" in named and named.endswith("or leave 'draft' out of --approve")
