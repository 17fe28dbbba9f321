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
VIEWS = {"views", "magics", "cli", "demo", "llm"}


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
        "from planbook.spec.formats import PLAN_FORMATS\n"
        "print(sorted(PLAN_FORMATS), 'planbook.compat.strategies' in sys.modules)\n"
        "r = planbook.run('1. [WRITER] hi', agents={'writer': planbook.ScriptedAgent('writer')}, strategy='openmanus')\n"
        "print(r.status, 'planbook.compat.strategies' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["['agenticseek', 'openmanus'] False", "completed True"]


# ------------------------------------------------------------------ the layers of the views
ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent / "planbook"


def _module_imports(path):
    """Every planbook module a file imports (lazy ones too), resolved against the file's own package."""
    import ast

    package = ["planbook", *path.relative_to(ROOT).parent.parts]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("planbook"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                if node.module:
                    yield ".".join([*base, node.module])
                else:
                    yield from (".".join([*base, a.name]) for a in node.names)
            elif (node.module or "").startswith("planbook"):
                yield node.module


def test_the_top_level_re_export_modules_of_the_views_are_gone() -> None:
    """0.1 kept htmlview, liveview, termview, textview and widget beside planbook.views: one home each now."""
    left = [name for name in ("htmlview", "liveview", "termview", "textview", "widget") if (ROOT / f"{name}.py").exists()]
    assert left == [], f"planbook/{left}.py only re-export planbook.views: import from planbook.views.*"


def test_the_data_layer_imports_nothing_above_it() -> None:
    """models.py reaches the spec reader and _render.py the views through registries, never by importing them."""
    for name in ("models", "_render"):
        upward = [m for m in _module_imports(ROOT / f"{name}.py")
                  if m.split(".")[1:2] and m.split(".")[1] in {"spec", "specload", "views", *VIEWS}]
        assert upward == [], f"planbook/{name}.py imports {upward} (lazily counts): register from above instead"


def test_the_view_modules_import_each_other_without_a_circle() -> None:
    from graphlib import CycleError, TopologicalSorter

    graph = {f"planbook.views.{p.stem}": {m for m in _module_imports(p) if m.startswith("planbook.views.")}
             for p in (ROOT / "views").glob("*.py") if p.stem != "__init__"}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"the views import each other in a circle: {exc.args[1]}") from None


def test_plan_parse_and_print_work_from_any_first_import() -> None:
    """The registries are filled by ``import planbook`` (which any planbook import runs first)."""
    code = ("from planbook.data.models import Plan\n"
            "p = Plan.parse('steps: [{id: a, tool: t}]', id='p')\n"
            "print(p.steps[0].id, 'a. [ ] t()' in str(p))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["a", "True"]
