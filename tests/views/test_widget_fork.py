"""Fork from here in the live view (a Fork click → a child run in the background), the fork's
header in the view and the record, and the code line a saved record's pane offers."""

from __future__ import annotations

import html
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Plan, Toolbox
from planbook.views.forkbox import code_line, py_literal, store_text
from planbook.views.record import record_html
from planbook.views.state import ViewState

pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")
from planbook.views.widget import PlanView  # noqa: E402

N = 3
#: two chains of N steps and a join
PLAN = "goal: two chains and a join\nsteps:\n" + "".join(
    f"  - {{id: {c}{i}, tool: add, args: {{x: {'0' if i == 1 else f'${c}{i - 1}'}, by: 1}}"
    + (f", needs: [{c}{i - 1}]" if i > 1 else "") + "}\n"
    for c in "ab" for i in range(1, N + 1)
) + f"  - {{id: join, tool: total, args: {{left: $a{N}, right: $b{N}}}, needs: [a{N}, b{N}]}}\n"


def tools(calls: list[str]) -> Toolbox:
    box = Toolbox()
    lock = threading.Lock()

    @box.tool
    def add(x: int, by: int) -> int:
        """Add ``by``."""
        with lock:
            calls.append(f"add({x},{by})")
        return x + by

    @box.tool
    def total(left: int, right: int) -> int:
        """The sum."""
        with lock:
            calls.append("total")
        return left + right

    return box


@pytest.fixture
def parent_view(tmp_path: Path) -> tuple[PlanView, Any, list[str], Path]:
    """A finished background run, stored, with a live view whose buttons steer its handle."""
    calls: list[str] = []
    db = tmp_path / "runs.sqlite"
    handle = planbook.start(Plan.parse(PLAN), tools=tools(calls), store=str(db), view=False)
    result = handle.wait(60)
    assert result.status == "completed" and len(calls) == 2 * N + 1
    view = PlanView(handle.runner)
    view.attach_handle(handle, lambda content: "")
    calls.clear()
    return view, handle, calls, db


def click_fork(view: PlanView, step: str, args: Any = None, result: str = "") -> None:
    content = {"type": "fork", "step": step, "args": args if isinstance(args, str) or args is None else json.dumps(args),
               "result": result}
    view._on_front_end(view.widget, content, [])


def test_the_fork_message_starts_a_child_with_the_edit(parent_view: Any) -> None:
    view, handle, calls, db = parent_view
    assert view.widget.fork == {"run": handle.runner.run_id, "store": store_text(str(db))}
    pane = view.pane("a1")
    assert pane is not None and pane["fork"] is True and pane["args"] == {"x": 0, "by": 1}
    click_fork(view, "a1", {"x": 0, "by": 5})
    assert view.widget.errors.get("fork:a1") is None
    assert len(view.forks) == 1
    child = view.forks[0].wait(60)
    assert child.status == "completed"
    # the chain a (3 steps) and the join ran again; chain b was kept
    assert len(calls) == N + 1 and calls.count("total") == 1 and calls[0] == "add(0,5)"
    assert child.outputs["join"] == (5 * 1 + (N - 1)) + N
    assert child.parent == handle.runner.run_id
    assert sum(1 for s in child.plan.steps if s.notes.startswith("kept from run ")) == N
    assert child.plan.step("a1").args == {"x": 0, "by": 5}


def test_a_pinned_result_runs_only_what_depends_on_it(parent_view: Any) -> None:
    view, handle, calls, db = parent_view
    click_fork(view, f"a{N}", {"x": f"$a{N - 1}", "by": 1}, result="100")
    child = view.forks[0].wait(60)
    assert calls == ["total"] and child.outputs["join"] == 100 + N
    assert child.plan.step(f"a{N}").notes.startswith("pinned: ")


@pytest.mark.parametrize("args, result, wording", [
    ({"x": "many", "by": 1}, "", "argument 'x' of tool 'add' expects int"),
    ('{"x": 1,', "", "the arguments are not JSON"),
    ("[1]", "", "must be a JSON object"),
    ({"x": 0, "by": 9}, "7", "cannot go together"),
    ({"x": 0, "by": 1}, "{oops", "the pinned result must be JSON"),
])
def test_bad_input_is_one_line_beside_the_step_and_nothing_runs(parent_view: Any, args: Any, result: str,
                                                                 wording: str) -> None:
    view, handle, calls, db = parent_view
    before = planbook.runs(store=str(db)) if hasattr(planbook, "runs") else None
    click_fork(view, "a1", args, result)
    error = view.widget.errors.get("fork:a1", "")
    assert wording in error and "\n" not in error
    assert view.forks == [] and calls == []
    if before is not None:
        assert len(planbook.runs(store=str(db))) == len(before)  # no run was created
    # a good click afterwards clears the error
    click_fork(view, "a1", {"x": 0, "by": 2})
    assert "fork:a1" not in view.widget.errors
    view.forks[0].wait(60)


def test_a_step_that_did_not_finish_offers_no_fork(tmp_path: Path) -> None:
    calls: list[str] = []
    runner = planbook.Runner(Plan.parse(PLAN), tools=tools(calls), store=str(tmp_path / "r.sqlite"))
    view = PlanView(runner)
    view.attach_handle(type("H", (), {"runner": runner})(), lambda content: "")
    assert view.pane("a1") is None or "fork" not in (view.pane("a1") or {})
    click_fork(view, "a1", {"x": 1, "by": 1})
    assert "has not run here" in view.widget.errors["fork:a1"] and calls == []


def test_the_forks_header_in_the_view_and_the_record(parent_view: Any) -> None:
    view, handle, calls, db = parent_view
    click_fork(view, "a1", {"x": 0, "by": 5})
    child = view.forks[0].wait(60)
    line = f"fork of run {handle.runner.run_id} at a1 — by: 1 → 5; kept {N}, re-running {N + 1}"
    child_view = PlanView(child)
    assert child_view.head["lineage"] == line
    record = html.unescape(record_html(ViewState.of(child)))
    assert line in record and 'class="planbook-lineage"' in record
    # kept rows: the ⟲ mark with where the result came from, like cached ones
    row = re.search(r'<tr data-step="b1"[^>]*>.*?</tr>', record, re.S)
    assert row is not None and "⟲" in row.group(0) and f"run {handle.runner.run_id}" in row.group(0)
    assert child_view.head["cached"]["b1"][0] == "kept" and f"{N} kept" in child_view.head["cached_count"]
    # a run that is no fork says nothing of the kind
    assert PlanView(handle.runner).head["lineage"] == ""
    assert "planbook-lineage" not in record_html(ViewState.of(handle.result))


def test_the_saved_record_offers_the_code_line_with_secrets_masked() -> None:
    box = Toolbox()

    @box.tool
    def login(user: str, password: str, n: int = 1) -> str:
        """Log in."""
        return f"hello {user}"

    plan = Plan.parse("steps:\n  - {id: s, tool: login, args: {user: ann, password: hunter2-canary-77, n: 3}}\n")
    result = planbook.run(plan, tools=box)
    record = record_html(ViewState.of(result))
    assert "hunter2-canary-77" not in record
    lines = [html.unescape(m) for m in re.findall(r'<pre class="planbook-fork-code"[^>]*>(.*?)</pre>', record)]
    assert lines == [f'planbook.fork("{result.run_id}", at="s", args={{"user": "ann", "password": "***", "n": 3}})']


def test_code_line_literals() -> None:
    assert py_literal({"a": [1, 2.5, None, True], "s": planbook.Secret.from_ref("api")}) == \
        '{"a": [1, 2.5, None, True], "s": planbook.Secret.from_ref("api")}'
    assert py_literal({"$secret": "api"}) == 'planbook.Secret.from_ref("api")'
    assert code_line("R", "draft", args={"tone": "formal"}, store=".planbook/runs.sqlite") == \
        'planbook.fork("R", at="draft", args={"tone": "formal"}, store=".planbook/runs.sqlite")'
    assert code_line("R", "d", result=[], pinned=True) == 'planbook.fork("R", at="d", result=[])'
    assert store_text(":memory:") is None
