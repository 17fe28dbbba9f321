"""The terminal announces a person's edit as theirs: ``Edited by you (cli): Revision 1 → 2``.
Before, every new revision was announced as ``Replanned Revision 1 → 2 (after: edited by you
(cli))``: nobody replanned, and the one who edited was named last, as a cause."""

from __future__ import annotations

import io
from typing import Any

import pytest

from planbook import Runner, Toolbox
from planbook.data.wording import edited_by_you, revision_news
from planbook.engine.approvals import Decision
from planbook.spec.formats import plan_from_dict

pytest.importorskip("rich")
from rich.console import Console  # noqa: E402

from planbook.views.terminal import TerminalView  # noqa: E402


def test_a_persons_edit_is_announced_as_an_edit_not_a_replan() -> None:
    box = Toolbox()

    @box.tool
    def inc(x: int) -> int:
        """Add one."""
        return x + 1

    def approve(step: Any, context: Any) -> Decision:
        return Decision.edit({"x": 41}, who="cli") if step.id == "two" else Decision.approve(who="cli")

    plan = plan_from_dict({"goal": "count", "steps": [{"id": "one", "tool": "inc", "args": {"x": 1}},
                                                      {"id": "two", "tool": "inc", "args": {"x": 2}}]})
    runner = Runner(plan, tools=box, approve=approve)
    with TerminalView(runner, console=Console(file=io.StringIO(), width=100, force_terminal=False)) as view:
        result = runner.run()
    text = view.console.file.getvalue()
    assert result.ok and result.plan.step("two").result == 42
    assert "Edited by you (cli): Revision 1 → 2\n" in text, text
    assert "  ~ two: inc(x=41)  (revised)" in text
    assert "Replanned" not in text and "after: edited by you" not in text
    assert result.revisions[-1].reason == "edited by you (cli)"  # the record keeps why, as before


def test_the_words_have_one_owner() -> None:
    assert edited_by_you("widget") == "edited by you (widget)"
    assert revision_news("api") == "Edited by you (api)" and revision_news(None) == "Replanned"
