"""``%plan_store``: choosing where runs go, and whether earlier results are reused."""

from __future__ import annotations

from typing import Any

from planbook.notebook.magics import magics_of


def test_plan_store_without_arguments_only_says_where_runs_go(ip: Any, capsys: Any) -> None:
    magics = magics_of(ip)
    ip.run_line_magic("plan_store", ":memory: --no-cache")
    assert "in memory (until the kernel stops); earlier results of the same tool calls are not reused" in (
        capsys.readouterr().out)
    ip.run_line_magic("plan_store", "")  # a question, not a change: the cache stays off
    assert magics.cache is False and magics.store_choice == ":memory:"
    assert "are not reused" in capsys.readouterr().out
    ip.run_line_magic("plan_store", ":memory:")  # choosing a store again: the default, only cache=True tools
    assert magics.cache is None and "reused only for tools registered with cache=True" in capsys.readouterr().out
    ip.run_line_magic("plan_store", "--cache")  # the cache alone, the store kept
    assert magics.cache is True and magics.store_choice == ":memory:"
    assert capsys.readouterr().out.endswith("earlier results of the same tool calls are reused\n")
    ip.run_line_magic("plan_store", "--no-cache")
    assert magics.cache is False and magics.store_choice == ":memory:"


def test_resume_asks_before_calling_a_non_idempotent_tool_again(ip: Any, tmp_path: Any) -> None:
    """A stored run cut short while a step of an idempotent=False tool ran: ``--resume`` raises
    a UsageError naming the step and ``--rerun`` (it does not return the stored run as if it had ended)."""
    import pytest
    from IPython.core.error import UsageError

    import planbook
    from planbook.data.models import Status
    from planbook.store import SQLiteStore

    paid: list[int] = []
    box = planbook.Toolbox()
    box.add(lambda amount: paid.append(amount) or "paid", name="pay", idempotent=False)
    ip.user_ns["box"] = box
    ip.run_cell_magic("plan", "payment --tools box", "steps:\n  - {id: p, tool: pay, args: {amount: 3}}\n")
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)  # what a process killed in the call leaves: the step in progress
    plan = ip.user_ns["payment"].model_copy(deep=True)
    run_id = store.create_run(plan, goal=plan.goal, config={})
    runner = planbook.Runner(plan, tools=box)
    plan.steps[0].set_state(status=Status.in_progress, attempts=1)
    runner.state.executions = 1
    store.record_step(run_id, plan.steps[0], runner.state)
    store.close()
    ip.run_line_magic("plan_store", str(path))
    with pytest.raises(UsageError, match=r"step 'p' was running .* %run_plan NAME --resume --rerun p"):
        ip.run_line_magic("run_plan", "payment --resume --no-view")
    assert paid == []
    result = ip.run_line_magic("run_plan", "payment --resume --rerun p --no-view")
    assert result.ok and paid == [3]


def test_resume_continues_the_stored_run_even_when_the_kernel_holds_it_paused(ip: Any, tmp_path: Any) -> None:
    """``--resume`` means the store's run: with the same run paused in the kernel (``--step``), it
    is resumed from the store, its completed steps marked as resumed and not run again. (The
    notebook session's split once sent it to the kept run instead, and the record lost its ⟲ marks.)"""
    import planbook
    from planbook.views.marks import MarkBuilder

    calls: list[str] = []
    box = planbook.Toolbox()
    box.add(lambda: calls.append("a") or 1, name="first")
    box.add(lambda x: calls.append("b") or x + 1, name="second")
    ip.user_ns["box"] = box
    ip.run_cell_magic("plan", "twice --tools box",
                      "steps:\n  - {id: a, tool: first}\n  - {id: b, tool: second, args: {x: $a}}\n")
    ip.run_line_magic("plan_store", str(tmp_path / "runs.sqlite"))
    paused = ip.run_line_magic("run_plan", "twice --step --no-view")
    assert paused.status == "paused" and calls == ["a"]
    result = ip.run_line_magic("run_plan", "twice --resume --no-view")
    assert result.ok and calls == ["a", "b"]
    assert any(e.kind == "run.started" and e.data.get("resumed") for e in result.events)
    marks = MarkBuilder().feed_new(result.events).of(result.plan)
    assert {step: mark.kind for step, mark in marks.items()} == {"a": "resumed"}
