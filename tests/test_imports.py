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


ENGINE = ["models", "spec", "refs", "validate", "tools", "agents", "planners", "policies", "execute", "executors",
          "interrupts", "eventbus", "scheduler", "budget", "config", "state", "acceptance", "timeline", "runner",
          "dispatch", "replanning", "persistence", "resume", "gcwindow", "ids", "specload", "diff", "errors"]
FRONT_ENDS = {"IPython", "ipywidgets", "anywidget", "openai", "rich"}
VIEWS = {"textview", "htmlview", "liveview", "widget", "termview", "views", "magics", "cli", "demo", "llm"}


def _imports(path):
    """Every module a file imports, anywhere in it (lazy imports in functions included), as absolute names."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from .textview import x / from . import textview
                base = "planbook." + (node.module or "") if node.module else "planbook"
                yield base
                if not node.module:
                    yield from (f"planbook.{a.name}" for a in node.names)
            else:
                yield node.module or ""


def test_engine_modules_never_import_front_ends_or_views() -> None:
    """The engine is shared by the magics, the CLI and scripts: it depends on none of them,
    and on no view (absolute or relative imports, at the top or inside functions)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "planbook"
    for name in ENGINE:
        for mod in _imports(root / f"{name}.py"):
            parts = mod.split(".")
            assert parts[0] not in FRONT_ENDS, f"planbook/{name}.py imports {mod}"
            if parts[0] == "planbook" and len(parts) > 1:
                assert parts[1] not in VIEWS, f"planbook/{name}.py imports the view or surface {mod}"


def test_nothing_below_compat_imports_the_seed_designs() -> None:
    """The reader and the engine know no seed design: plan formats and ``strategy=`` register
    themselves with them (spec.register_format, runner.register_strategies)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "planbook"
    for name in ENGINE:
        for mod in _imports(root / f"{name}.py"):
            assert not mod.startswith("planbook.compat"), f"planbook/{name}.py imports {mod}"


def test_the_seed_formats_and_strategies_are_registered_by_import_planbook() -> None:
    code = (
        "import sys, planbook\n"
        "from planbook.spec import PLAN_FORMATS\n"
        "print(sorted(PLAN_FORMATS), 'planbook.compat.strategies' in sys.modules)\n"
        "r = planbook.run('1. [WRITER] hi', agents={'writer': planbook.ScriptedAgent('writer')}, strategy='openmanus')\n"
        "print(r.status, 'planbook.compat.strategies' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["['agenticseek', 'openmanus'] False", "completed True"]
