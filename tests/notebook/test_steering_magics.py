"""``%run_plan NAME --background`` returns a RunHandle; ``--approve`` in the foreground explains why it cannot."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

import planbook
from planbook import RunHandle

SPEC = """
steps:
  - {id: draft, tool: draft_note, args: {to: bob}}
  - {id: send, tool: send_note, args: {text: $draft, to: bob}, needs: [draft]}
"""


@pytest.fixture()
def mail(ip: Any) -> Any:
    box = planbook.Toolbox()
    sent: list[tuple[str, str]] = []

    @box.tool
    def draft_note(to: str) -> str:
        return f"dear {to}"

    @box.tool
    def send_note(text: str, to: str) -> str:
        sent.append((text, to))
        return "sent"

    ip.user_ns.update(mailbox=box, mail_spec=SPEC)
    return sent


def cell(ip: Any, text: str) -> Any:
    result = ip.run_cell(text)
    for error in (result.error_before_exec, result.error_in_exec):
        if error is not None:
            raise error
    return result.result


def test_approve_in_the_foreground_says_it_needs_background(ip: Any, mail: Any) -> None:
    with pytest.raises(UsageError, match=r"--approve makes steps wait .* add --background"):
        cell(ip, "%run_plan mail_spec --tools mailbox --approve send")
    assert mail == []


def test_a_tool_that_asks_in_a_foreground_run_is_a_usage_error(ip: Any, mail: Any) -> None:
    ip.user_ns["mailbox"].add(ip.user_ns["mailbox"]["send_note"], approve=True)
    with pytest.raises(UsageError, match=r"step 'send' waits for approval .*%run_plan mail_spec --background"):
        cell(ip, "%run_plan mail_spec --tools mailbox --no-view")
    assert mail == []


def test_background_returns_a_handle_that_takes_decisions(ip: Any, mail: Any) -> None:
    handle = cell(ip, "%run_plan mail_spec --tools mailbox --background --approve send --no-view")
    assert isinstance(handle, RunHandle)
    handle.edit("send", to="alice")
    result = handle.wait(30)
    assert result.status == "completed" and mail == [("dear bob", "alice")]
    with pytest.raises(UsageError, match="drop --step, --until"):
        cell(ip, "%run_plan mail_spec --tools mailbox --background --step")
    with pytest.raises(UsageError, match="approve= names 'nope'"):
        cell(ip, "%run_plan mail_spec --tools mailbox --background --approve nope --no-view")
