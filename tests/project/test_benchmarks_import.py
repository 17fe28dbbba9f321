"""The benchmark scripts the README quotes still import what they use from planbook (a module
that moved, as the redaction did into planbook.outbound, broke one without any test failing)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.name for p in BENCHMARKS])
def test_a_benchmark_imports_only_what_planbook_has(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("planbook"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("planbook"):
                    importlib.import_module(alias.name)
    assert not missing, f"{script.name}: {missing}"
