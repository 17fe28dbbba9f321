"""A comparison of runs saved in a notebook passes nbval: its HTML is the same, once the notebooks'
sanitize file has replaced times, whichever run was faster.

The comparison shows each time's change against the base, signed, with an arrow and a colour when
it is large (``−1.2 ms ▼`` in green, ``+3.4 s ▲`` in red, ``±0.0 ms`` plain). Which of those a cell
shows depends on how fast the steps ran that time, so chapter 9 (which displays comparisons) failed
nbval on every run until the sanitize file folded them into ``DURATION``."""

from __future__ import annotations

import re
from configparser import ConfigParser
from pathlib import Path
from typing import Any

import planbook

ROOT = Path(__file__).resolve().parents[2]
SPEC = """
goal: Two readings
steps:
  - {id: a, tool: reading, args: {n: 1}}
  - {id: b, tool: reading, args: {n: $a}}
"""


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()

    @tools.tool
    def reading(n: int) -> int:
        "A reading."
        return n + 1

    return tools


def _clock(step: float) -> Any:
    now = [0.0]

    def read() -> float:
        now[0] += step
        return now[0]

    return read


def _sanitize(text: str) -> str:
    cfg = ConfigParser()
    cfg.read(ROOT / "notebooks" / "nbval-sanitize.cfg", encoding="utf-8")
    for section in cfg.sections():
        text = re.sub(cfg[section]["regex"], cfg[section]["replace"], text)
    return text


def test_a_comparison_is_the_same_after_sanitizing_whichever_run_was_faster() -> None:
    tools = _tools()
    other = planbook.run(SPEC, tools=tools, clock=_clock(1.0))
    faster = planbook.diff_runs(planbook.run(SPEC, tools=tools, clock=_clock(0.0001)), other)
    slower = planbook.diff_runs(planbook.run(SPEC, tools=tools, clock=_clock(3.5)), other)
    same = planbook.diff_runs(planbook.run(SPEC, tools=tools, clock=_clock(1.0)), other)
    pages = [d._repr_mimebundle_()["text/html"] for d in (faster, slower, same)]
    assert "▲" in pages[0] and "▼" in pages[1] and "±" in pages[2]  # each direction is shown
    assert _sanitize(pages[0]) == _sanitize(pages[1]) == _sanitize(pages[2])
    texts = [d._repr_mimebundle_()["text/plain"] for d in (faster, slower, same)]
    assert _sanitize(texts[0]) == _sanitize(texts[1]) == _sanitize(texts[2])
