"""``planbook.runs()`` displayed in a notebook: a table of the newest runs, not of every run a store
ever kept (a store of thousands of runs put every row into the notebook, as HTML and as text)."""

from __future__ import annotations

from planbook.store.base import RunSummary
from planbook.views.runlist import SHOWN_RUNS, runlist_bundle, runlist_text


def summaries(n: int) -> list[RunSummary]:
    return [RunSummary(f"run-{i:05d}", goal=f"goal {i}", status="completed", reason="goal_met", started=1.7e9 + i,
                       updated=1.7e9 + i + 1, steps_done=3, steps_total=3, model_calls=0) for i in range(n)]


def test_a_store_of_many_runs_displays_its_newest_and_says_how_many_more() -> None:
    listed = summaries(SHOWN_RUNS + 250)
    bundle = runlist_bundle(listed)
    for text in bundle.values():
        assert "run-00000" in text and f"run-{SHOWN_RUNS - 1:05d}" in text and f"run-{SHOWN_RUNS:05d}" not in text
        assert "250 more runs" in text
    assert bundle["text/html"].count("<tr>") == SHOWN_RUNS + 1  # the header and the rows shown
    assert f"run-{SHOWN_RUNS + 249:05d}" in runlist_text(listed)  # print() and the CLI list them all


def test_a_few_runs_display_whole() -> None:
    bundle = runlist_bundle(summaries(3))
    assert "more runs" not in bundle["text/plain"] + bundle["text/html"]
    assert bundle["text/html"].count("<tr>") == 4
