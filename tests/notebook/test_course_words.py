"""What the committed course notebooks say and show (issue 37 §5): a record's verdict is not
printed again under it, a measurement prints its numbers, the words about Run All match what
JupyterLab does, and no chapter points at a file a student cannot see."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def repeated_verdicts(cells: list[dict[str, Any]]) -> list[str]:
    """Lines a cell printed that a run's record in the same cell already shows ("Run completed …")."""
    found = []
    for i, cell in enumerate(cells):
        shown: set[str] = set()
        printed: list[str] = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                printed += _text(out.get("text")).splitlines()
            else:
                shown |= set(_text(out.get("data", {}).get("text/plain")).splitlines())
        found += [f"cell {i}: {line}" for line in printed if line.startswith("Run ") and line in shown]
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_prints_the_verdict_its_record_shows(path: Path) -> None:
    """02 and 03 printed summary_line(result) under the record that ends with that very line."""
    assert repeated_verdicts(_cells(path)) == []


def printed_measurement(cells: list[dict[str, Any]]) -> str:
    """What chapter 3's comparison of one-at-a-time and --parallel 4 printed about wall and critical path."""
    cell = next(c for c in cells if "critical" in _text(c["source"]) and "one_by_one" in _text(c["source"])
                and c["cell_type"] == "code")
    return "".join(_text(o.get("text")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_chapter_3_prints_the_wall_and_critical_path_times() -> None:
    """It printed "wall / critical path is about 4" instead of the numbers."""
    said = printed_measurement(_cells(ROOT / "notebooks" / "03-dependencies.ipynb"))
    assert "is about" not in said
    assert re.search(r"^one at a time +wall \d+\.\d\d s, critical path \d+\.\d\d s \(wall / critical path ≈ \d\)$", said, re.M), said
    assert re.search(r"^--parallel 4 +wall \d+\.\d\d s, critical path \d+\.\d\d s \(wall / critical path ≈ 1\)$", said, re.M), said


def run_all_words(cells: list[dict[str, Any]]) -> list[str]:
    """Markdown that says Run All stops at a cell tagged raises-exception (JupyterLab goes on past it)."""
    found = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and i + 1 < len(cells):
            tagged = "raises-exception" in cells[i + 1].get("metadata", {}).get("tags", [])
            if tagged and re.search(r"run all\W*\s+stops", _text(cell["source"]), re.I):
                found.append(f"cell {i}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_words_about_run_all_match_jupyterlab(path: Path) -> None:
    """06 §3 said 'run all stops here too' before a raises-exception cell; 03 §5 says, rightly, it goes on."""
    assert run_all_words(_cells(path)) == []


UNSEEN = re.compile(r"design notes?|\.\./shared|DESIGN\.md|/work/", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_points_at_what_a_student_cannot_see(path: Path) -> None:
    """05 explained its seeds as 'five design notes', which no student has."""
    words = "\n".join(_text(c["source"]) for c in _cells(path) if c["cell_type"] == "markdown")
    assert not UNSEEN.findall(words)
