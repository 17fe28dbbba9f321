"""Reading a large plan spec: ``Plan.parse`` against the parsers underneath it.

A JSON spec is parsed once (the standard library's C scanner, with the top levels walked
so every step and field keeps its line for error messages); a YAML spec is parsed by
libyaml's C parser when PyYAML has it. The target: a 10,000-step JSON spec in under half a
second, and a small multiple of ``json.loads`` (the bare parse, which keeps no lines).

Each row prints the best of a few runs of ``Plan.parse`` and of the bare parser on the same
text, measured in this run: wall-clock time, CPU time in parentheses (steadier when other
work shares the machine), and the ratio of the CPU times.

Run: python benchmarks/parse_spec.py [STEPS] [--quick]

``--quick``: tiny sizes, one repeat (what the tests run to check the script still works;
its figures mean nothing).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import yaml

from planbook import Plan
from planbook.spec.write import plan_spec

QUICK = "--quick" in sys.argv[1:]
REPEATS = 1 if QUICK else 5


def steps(n: int) -> list[dict[str, Any]]:
    """A realistic chain: every step calls a tool with args, most use an earlier result."""
    out: list[dict[str, Any]] = []
    for i in range(1, n + 1):
        step: dict[str, Any] = {"id": f"s{i}", "task": f"step number {i}", "tool": "work",
                                "args": {"name": f"item {i}", "size": i % 7, "tags": ["a", "b"]}}
        if i > 1:
            step["needs"] = [f"s{i - 1}"]
            step["args"]["previous"] = f"$s{i - 1}"
        out.append(step)
    return out


def best(fn: Callable[[], Any]) -> tuple[float, float]:
    """The best wall-clock and CPU time of a few runs (CPU time is steadier on a busy machine)."""
    wall, cpu = [], []
    for _ in range(REPEATS):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def main(n: int) -> None:
    data = {"goal": "a long chain", "steps": steps(n)}
    json_text = json.dumps(data, indent=2)
    yaml_text = plan_spec(Plan.parse(json_text))
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    print(f"{n:,} steps; PyYAML with libyaml: {getattr(yaml, '__with_libyaml__', False)}")
    print(f"{'spec':<6} {'Plan.parse (cpu)':>22} {'bare parser':>24} {'(cpu)':>9} {'ratio':>7}")
    results = {}
    for name, text, bare_name, bare in (
        ("JSON", json_text, "json.loads", lambda: json.loads(json_text)),
        ("YAML", yaml_text, f"yaml.load ({loader.__name__})", lambda: yaml.load(yaml_text, Loader=loader)),
    ):
        assert len(Plan.parse(text).steps) == n
        parse, parse_cpu = best(lambda: Plan.parse(text))
        base, base_cpu = best(bare)
        results[name] = parse
        print(f"{name:<6} {parse * 1000:>9.1f} ms ({parse_cpu * 1000:>6.1f} ms) {bare_name:>16} {base * 1000:>6.1f} ms "
              f"({base_cpu * 1000:>5.1f} ms) {parse_cpu / base_cpu:>6.1f}x")
    verdict = "meets" if results["JSON"] < 0.5 else "MISSES"
    print(f"JSON target: under 500 ms for {n:,} steps: {results['JSON'] * 1000:.0f} ms wall-clock ({verdict} it)")


if __name__ == "__main__":
    positional = [a for a in sys.argv[1:] if a != "--quick"]
    main(int(positional[0]) if positional else 500 if QUICK else 10_000)
