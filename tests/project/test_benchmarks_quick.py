"""Every benchmark still runs: each script in ``benchmarks/``, in its quick mode (tiny sizes, one
repeat), exits 0 and prints its figures. No timing is asserted: a quick run's figures mean
nothing, only that the script the README quotes would print them (``llm_calls.py`` crashed
on a private runner method that had gone, and the README's token table could not be
reproduced)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"

#: per script: the modules it needs (skipped with the reason when one is missing) and the
#: lines it must print, as patterns with numbers in them
FIGURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "engine_overhead.py": ((), (
        rf"overhead\s+{NUMBER} µs/step",
        rf"run it\s+{NUMBER} µs\s+{NUMBER} µs.*: {NUMBER}",
        rf"kept per step, Runner included: {NUMBER} KiB",
        rf"live widget view {NUMBER} ms CPU\s+ratio {NUMBER}",
    )),
    "fork_cost.py": ((), (
        rf"load_run of the parent: {NUMBER} ms CPU; fork up to its first re-run step: {NUMBER} ms CPU -> ratio {NUMBER}",
        rf"store rows added by a fork re-running 2 of {NUMBER} steps: {NUMBER}",
    )),
    "run_diff.py": ((), (
        rf"steps, fork at s{NUMBER}\s+\(\s*{NUMBER} rows changed\): diff\s+{NUMBER} ms, HTML\s+{NUMBER} ms,\s+{NUMBER} kB",
    )),
    "llm_calls.py": ((), (
        rf"\|\s+{NUMBER}\s+{NUMBER} \|\s+{NUMBER}\s+{NUMBER} \|",
        rf"replanning after every step sends {NUMBER}x the prompt tokens",
    )),
    "masking.py": ((), (
        rf"base64 word\s+{NUMBER}ms\s+{NUMBER}ms\s+{NUMBER}",
        rf"slowest {NUMBER} kB: {NUMBER} s CPU",
    )),
    "mcp_otel.py": (("mcp", "mcp_server_time", "opentelemetry.sdk"), (
        rf"MCP call: SDK {NUMBER} ms, through planbook's tool {NUMBER} ms -> {NUMBER}x",
        rf"MCP step in a run: {NUMBER} ms .* -> {NUMBER}x",
        rf"OpenTelemetry: .* -> -?{NUMBER} us per step",
    )),
    "parallel.py": (("distributed",), (
        rf"parallel=8, threads\s+wall\s+{NUMBER} s .* ratio\s+{NUMBER}",
        rf"parallel=8, Dask in-process\s+wall\s+{NUMBER} s .* ratio\s+{NUMBER}",
        rf"planbook parallel=16 on Dask\s+{NUMBER} ms\s+ratio\s+{NUMBER}",
    )),
    "parse_answer.py": ((), (
        rf"faithful=False\s+{NUMBER} tasks:\s+{NUMBER} ms CPU",
        rf"faithful=True\s+{NUMBER} tasks:\s+{NUMBER} ms CPU",
    )),
    "parse_spec.py": (("yaml",), (
        rf"JSON\s+{NUMBER} ms \(\s*{NUMBER} ms\)",
        rf"YAML\s+{NUMBER} ms \(\s*{NUMBER} ms\)",
        rf"JSON target: under 500 ms for {NUMBER} steps: {NUMBER} ms",
    )),
    "steering.py": ((), (
        rf"background {NUMBER} ms \(ratio {NUMBER}\)",
        rf"median over {NUMBER}: {NUMBER} ms",
    )),
    "store_overhead.py": ((), (
        rf"store's extra CPU per step: -?{NUMBER} µs = -?{NUMBER}x the bare transaction",
        rf"split of the extra .*: SQLite {NUMBER} µs, JSON {NUMBER} µs, Python {NUMBER} µs",
        rf"a save of the {NUMBER}-step plan with one step changed: {NUMBER} ms CPU, {NUMBER} rows written",
    )),
    "view_traffic.py": (("jupyter_client", "ipykernel", "anywidget"), (
        rf"widget updates: {NUMBER} \({NUMBER} kB\)",
        rf"everything the cell sent: {NUMBER} MB",
    )),
    "record_size.py": ((), (
        rf"serial\s+10\s+{NUMBER} kB\s+{NUMBER} kB\s+{NUMBER} ms\s+{NUMBER} ms",
        rf"mixed\s+100\s+{NUMBER} kB\s+{NUMBER} kB\s+{NUMBER} ms\s+{NUMBER} ms",
    )),
    "kernel_view.py": (("jupyter_client", "ipykernel", "anywidget"), (
        rf"CPU in the kernel: .* ms -> ratio {NUMBER}",
        rf"IOPub bytes of a view run: {NUMBER} kB",
        r"display_data\s+" + NUMBER,
        rf"kernel memory after {NUMBER} view runs: {NUMBER} -> {NUMBER} MiB",
        rf"live Step objects {NUMBER} -> {NUMBER}",
    )),
}


def test_every_benchmark_has_a_quick_check() -> None:
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert scripts == sorted(name for name in FIGURES if (BENCHMARKS / name).exists())
    missing = [name for name in scripts if "--quick" not in (BENCHMARKS / name).read_text(encoding="utf-8")]
    assert not missing, f"no --quick mode: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_benchmark_runs_in_quick_mode_and_prints_its_figures(name: str) -> None:
    script = BENCHMARKS / name
    if not script.exists():
        pytest.skip(f"{name} is not in this tree")
    needs, patterns = FIGURES[name]
    absent = [module for module in needs if importlib.util.find_spec(module) is None]
    if absent:
        pytest.skip(f"{name} needs {', '.join(absent)} (not installed)")
    env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, str(script), "--quick"], cwd=script.parents[1], env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert done.returncode == 0, f"{name} --quick exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    missing = [p for p in patterns if not re.search(p, done.stdout)]
    assert not missing, f"{name} --quick did not print {missing}:\n{done.stdout}"
