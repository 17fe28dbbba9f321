"""What the course and the help tell a newcomer matches what exists: controls the view has,
help that opens with the usage, an install that gives the Jupyter front ends the README names."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the test extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _markdown(notebook: Path) -> str:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_the_tutorials_name_no_control_the_live_view_lost() -> None:
    """The 'Open step' chooser went when rows became clickable; notebook 01 still sent students to it."""
    script = (ROOT / "planbook" / "views" / "static" / "planview.js").read_text(encoding="utf-8")
    assert "Open step" not in script
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert "Open step" not in _markdown(notebook), f"{notebook.name} tells students to use 'Open step'"


def test_magic_help_opens_with_the_usage(ip: Any) -> None:
    """``%run_plan?`` began with the ``::`` that IPython's magic_arguments writes for Sphinx."""
    ip.run_line_magic("load_ext", "planbook")
    magics = ip.magics_manager.magics
    for kind, name, usage in (("line", "run_plan", "%run_plan ["), ("cell", "plan", "%%plan ["),
                              ("line", "plan_store", "%plan_store [")):
        doc = magics[kind][name].__doc__
        assert doc.startswith(usage), f"%{name}? starts with {doc[:20]!r}"
        assert "\n::" not in doc and "positional arguments:" in doc


def test_the_lab_extra_installs_notebook_7_as_the_readme_says() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lab = {Requirement(r).name: Requirement(r) for r in project["optional-dependencies"]["lab"]}
    assert "notebook" in lab and lab["notebook"].specifier.contains("7.0") and not lab["notebook"].specifier.contains("6.5")
    assert "Notebook 7" in (ROOT / "README.md").read_text(encoding="utf-8")
