"""``import planbook`` stays light: no openai, IPython or ipywidgets until they are used."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("openai", "ipywidgets", "IPython", "httpx2", "rich")


def test_import_planbook_loads_no_heavy_module() -> None:
    code = (
        "import sys, planbook\n"
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import planbook imported {out}: import these lazily, where they are used"


# The scans of the source (the engine imports no front end, no view, no seed design; the data
# layer imports nothing above it; the views import each other without a circle) are in
# tests/architecture/test_architecture.py, over every folder of the package: here are the tests that import.


def test_the_seed_formats_and_strategies_are_registered_by_import_planbook() -> None:
    code = (
        "import sys, planbook\n"
        "from planbook.spec.formats import PLAN_FORMATS\n"
        "print(sorted(PLAN_FORMATS), 'planbook.compat.strategies' in sys.modules)\n"
        "r = planbook.run('1. [WRITER] hi', agents={'writer': planbook.ScriptedAgent('writer')}, strategy='openmanus')\n"
        "print(r.status, 'planbook.compat.strategies' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["['agenticseek', 'openmanus'] False", "completed True"]


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2] / "planbook"


def test_the_top_level_re_export_modules_of_the_views_are_gone() -> None:
    """0.1 kept htmlview, liveview, termview, textview and widget beside planbook.views: one home each now."""
    left = [name for name in ("htmlview", "liveview", "termview", "textview", "widget") if (ROOT / f"{name}.py").exists()]
    assert left == [], f"planbook/{left}.py only re-export planbook.views: import from planbook.views.*"


def test_plan_parse_and_print_work_from_any_first_import() -> None:
    """The registries are filled by ``import planbook`` (which any planbook import runs first)."""
    code = ("from planbook.data.models import Plan\n"
            "p = Plan.parse('steps: [{id: a, tool: t}]', id='p')\n"
            "print(p.steps[0].id, 'a. [ ] t()' in str(p))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["a", "True"]
