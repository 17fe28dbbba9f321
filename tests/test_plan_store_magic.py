"""``%plan_store``: choosing where runs go, and whether earlier results are reused."""

from __future__ import annotations

from typing import Any

from planbook.magics import magics_of


def test_plan_store_without_arguments_only_says_where_runs_go(ip: Any, capsys: Any) -> None:
    magics = magics_of(ip)
    ip.run_line_magic("plan_store", ":memory: --no-cache")
    assert "in memory (until the kernel stops); earlier results of the same tool calls are not reused" in (
        capsys.readouterr().out)
    ip.run_line_magic("plan_store", "")  # a question, not a change: the cache stays off
    assert magics.cache is False and magics.store_choice == ":memory:"
    assert "are not reused" in capsys.readouterr().out
    ip.run_line_magic("plan_store", ":memory:")  # choosing a store again says both things again
    assert magics.cache is True and "are reused" in capsys.readouterr().out
    ip.run_line_magic("plan_store", "--no-cache")  # the cache alone, the store kept
    assert magics.cache is False and magics.store_choice == ":memory:"
