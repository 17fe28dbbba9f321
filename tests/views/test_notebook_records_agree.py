"""Every committed notebook's saved records agree with themselves (issue 37 §5): a step's pane says
it started when its Timeline bar says it did.

The pane and the bar once read two different times (the step's, and its execution's: a call
handed to an executor keeps the run's times on its step and its own on its execution), so
notebook 01's record said ``fetch`` started at +5.2 ms in its pane and +1.7 ms on its bar. Both
read the execution's now (:func:`planbook.views.panes.pane`, ``execution=``). This reads the
``.ipynb`` files as committed, so a notebook saved with an older planbook fails here until it is
executed again.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
#: a step's pane in a record, up to the next pane, and its start
_PANE = re.compile(r'<div class="planbook-pane-body" data-pane="([^"]+)"')
_STARTED = re.compile(r"<b>time</b> started \+([\d.]+ m?s)")
#: a bar of a record's timeline: its step and start (the last bar of a step is its latest execution)
_BAR = re.compile(r'data-step="([^"]+)" title="#\d+ step [^"]*?: \+([\d.]+ m?s) ')


def records(path: Path) -> list[str]:
    """The HTML of every run record a notebook's outputs hold."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            markup = output.get("data", {}).get("text/html", "")
            markup = "".join(markup) if isinstance(markup, list) else markup
            if "planbook-record" in markup:
                found.append(markup)
    return found


def disagreements(markup: str) -> list[tuple[str, str, str]]:
    """``(step, pane's start, bar's start)`` of each step whose pane and latest bar disagree."""
    bars = {html.unescape(step): start for step, start in _BAR.findall(markup)}  # the last bar of a step wins
    out = []
    matches = list(_PANE.finditer(markup))
    for i, match in enumerate(matches):
        body = markup[match.end(): matches[i + 1].start() if i + 1 < len(matches) else len(markup)]
        started = _STARTED.search(body)
        step = html.unescape(match.group(1))
        if started and step in bars and bars[step] != started.group(1):
            out.append((step, started.group(1), bars[step]))
    return out


def test_the_check_finds_a_disagreement() -> None:
    """Notebook 01's record as it was once committed (its fetch step: pane +5.2 ms, bar +1.7 ms)."""
    markup = ('<div class="planbook-record"><div class="planbook-pane-body" data-pane="fetch" style="">'
              '<div><b>time</b> started +5.2 ms, ended +5.9 ms (0.7 ms)</div></div>'
              '<div class="pb-bar pb-completed" data-step="fetch" title="#1 step fetch, attempt 1, revision 1, main: '
              '+1.7 ms → +2.4 ms (0.7 ms, completed)" style="">fetch 0.7 ms</div></div>')
    assert disagreements(markup) == [("fetch", "5.2 ms", "1.7 ms")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_a_panes_start_is_its_bars_start_in_every_committed_record(path: Path) -> None:
    found = [(i, *d) for i, markup in enumerate(records(path)) for d in disagreements(markup)]
    assert not found, (f"{path.name}: (record, step, pane's start, bar's start) that disagree: {found}; "
                       f"execute the notebook again")
