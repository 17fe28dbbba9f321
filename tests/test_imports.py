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


def test_engine_modules_never_import_front_ends() -> None:
    """The engine is shared by the magics, the CLI and scripts: it must not depend on them."""
    import ast
    from pathlib import Path

    engine = ["models", "spec", "refs", "validate", "tools", "agents", "planners", "policies", "execute", "stepthreads", "runner", "diff",
              "textview", "errors"]
    root = Path(__file__).resolve().parent.parent / "planbook"
    for name in engine:
        tree = ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            for mod in mods:
                assert mod.split(".")[0] not in ("IPython", "ipywidgets", "openai"), f"planbook/{name}.py imports {mod}"
