"""``%replay RUN_OR_NAME [--speed X] [--step]``: a finished run played again in the live view."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

import planbook
from planbook.views import replay as replay_module

pytest.importorskip("anywidget")

PLAN = """steps:
  - {id: a, tool: inc, args: {x: 0}}
  - {id: b, tool: inc, args: {x: $a}}
"""


@pytest.fixture
def stored(ip: Any, tmp_path: Any, monkeypatch: Any) -> Any:
    monkeypatch.setattr(replay_module, "choose_view", lambda: "widget")  # the test shell has no kernel
    box = planbook.Toolbox()

    @box.tool
    def inc(x: int) -> int:
        return x + 1

    ip.user_ns["incbox"] = box
    ip.run_line_magic("plan_store", str(tmp_path / "runs.sqlite"))
    ip.run_cell_magic("plan", "counting --tools incbox", PLAN)
    result = ip.run_line_magic("run_plan", "counting --no-view")
    assert result.outputs["b"] == 2
    return result


def test_replay_by_plan_name_run_id_and_variable(ip: Any, stored: Any) -> None:
    ip.user_ns["done_run"] = stored
    for word in ("counting", stored.run_id, "done_run"):
        player = ip.run_line_magic("replay", f"{word} --speed 100")
        assert player.done and player.result.run_id == stored.run_id
        assert player.view is None  # its display is the run's record now, and the replay let go of the view
    assert "ended as its record" in repr(player)


def test_replay_step_waits_for_next(ip: Any, stored: Any) -> None:
    player = ip.run_line_magic("replay", "counting --step")
    widget = player.view.widget
    assert not player.done and widget.replay["next"]
    while not player.done:
        player.next()
    assert widget.statuses == "cc" and widget.ended and not widget.replay  # the record, its Next button gone


def test_bad_input_is_a_usage_error_naming_it(ip: Any, stored: Any) -> None:
    with pytest.raises(UsageError, match=r"%replay countng: .*no run or plan 'countng'.*counting"):
        ip.run_line_magic("replay", "countng")
    with pytest.raises(UsageError, match="--speed fast: give a number"):
        ip.run_line_magic("replay", "counting --speed fast")
    with pytest.raises(UsageError, match="--speed 0: give a number"):
        ip.run_line_magic("replay", "counting --speed 0")
    ip.run_line_magic("plan_store", "off")
    with pytest.raises(UsageError, match="this session keeps no runs"):
        ip.run_line_magic("replay", "counting")
