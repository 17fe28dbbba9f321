"""A background run is the engine's; its display is the notebook's.

``planbook.start`` and ``planbook.fork(background=True)`` in a plain script give the engine's
:class:`planbook.RunHandle` and load neither ``planbook.notebook`` nor IPython; in a kernel they give
the notebook's front, which is the same handle plus its display. The handle hands every decision to
the run's door, which checks it once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import planbook
import planbook.engine.approvals as approvals
from planbook.engine.background import RunHandle

ROOT = Path(planbook.__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import sys

    import planbook

    plan = planbook.Plan.model_validate({"id": "sums", "steps": [
        {"id": "a", "tool": "add", "args": {"a": 1, "b": 2}},
        {"id": "b", "tool": "add", "args": {"a": "$a", "b": 3}, "needs": ["a"]},
    ]})

    def add(a: int, b: int) -> int:
        return a + b

    h = planbook.start(plan, tools=[add])
    result = h.wait(60)
    child = planbook.fork(result, at="b", args={"a": "$a", "b": 10}, tools=[add], background=True)
    forked = child.wait(60)
    loaded = sorted(m for m in sys.modules if m == "IPython" or m.startswith(("IPython.", "planbook.notebook")))
    print(type(h).__name__, isinstance(h, planbook.RunHandle), result.status, result.outputs["b"],
          isinstance(child, planbook.RunHandle), forked.outputs["b"], loaded)
""")


def test_a_plain_script_starts_and_forks_in_the_background_without_the_notebook_or_ipython(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "RunHandle True completed 6 True 13 []", done.stdout


# ------------------------------------------------------------------ which handle, where
def _plan() -> planbook.Plan:
    return planbook.Plan.model_validate({"id": "one", "steps": [{"id": "a", "tool": "add", "args": {"a": 1, "b": 2}}]})


def add(a: int, b: int) -> int:
    return a + b


def test_outside_a_kernel_the_handle_is_the_engines_and_displays_nothing() -> None:
    handle = planbook.start(_plan(), tools=[add])
    assert type(handle) is RunHandle and planbook.RunHandle is RunHandle
    assert handle.wait(60).outputs["a"] == 3
    assert not hasattr(handle, "_ipython_display_") and not hasattr(handle, "_repr_mimebundle_")
    assert repr(handle) == "<RunHandle plan 'one': completed>"


def test_in_a_kernel_the_handle_is_the_notebooks_front(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel is found from ``sys.modules`` (IPython loaded, its shell has a kernel)."""
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    from planbook.notebook.handle import NotebookHandle

    handle = planbook.start(_plan(), tools=[add], view=False)
    assert isinstance(handle, NotebookHandle) and isinstance(handle, planbook.RunHandle)
    assert handle.view is None and handle.wait(60).outputs["a"] == 3
    shell.kernel = None  # IPython in a terminal: no kernel, the engine's handle
    assert type(planbook.start(_plan(), tools=[add])) is RunHandle


def test_view_true_outside_a_kernel_says_why_not() -> None:
    with pytest.raises(RuntimeError, match="view=True shows a background run's live view in a notebook kernel"):
        planbook.start(_plan(), tools=[add], view=True)


def test_a_fork_of_a_handle_is_a_handle_of_the_same_kind() -> None:
    handle = planbook.start(_plan(), tools=[add])
    result = handle.wait(60)
    child = handle.fork(result, at="a", args={"a": 5, "b": 5}, tools=[add])
    assert type(child) is RunHandle and child.wait(60).outputs["a"] == 10


# ------------------------------------------------------------------ a decision is checked once
def _count_edit_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count every call of ``check_edit``, wherever a planbook module holds it."""
    calls: list[str] = []
    original: Callable[..., Any] = approvals.check_edit

    def counted(step: Any, args: Any, tools: Any) -> Any:
        calls.append(step.id)
        return original(step, args, tools)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("planbook") and getattr(module, "check_edit", None) is original:
            monkeypatch.setattr(module, "check_edit", counted)
    return calls


def _mail() -> tuple[planbook.Toolbox, list[str]]:
    sent: list[str] = []
    box = planbook.Toolbox()

    @box.tool(approve=True)
    def send(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    return box, sent


MAIL = {"id": "mail", "steps": [{"id": "send", "tool": "send", "args": {"to": "bob"}}]}


def test_an_edit_given_to_the_handle_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """It was checked three times: by the handle's edit, again by its decide, once more as the run settled it."""
    calls = _count_edit_checks(monkeypatch)
    box, sent = _mail()
    handle = planbook.start(planbook.Plan.model_validate(MAIL), tools=box)
    assert handle.wait_for_approval(60) == ["send"]
    handle.edit("send", to="alice")
    assert handle.wait(60).status == "completed" and sent == ["alice"]
    assert calls == ["send"]


def test_an_edit_of_a_paused_run_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_edit_checks(monkeypatch)
    box, sent = _mail()
    plan = planbook.Plan.model_validate({"id": "two", "steps": [
        {"id": "first", "tool": "send", "args": {"to": "ann"}},
        {"id": "later", "tool": "note", "args": {"text": "x"}, "needs": ["first"]},
    ]})

    @box.tool
    def note(text: str) -> str:
        return text

    paused = threading.Event()
    handle = planbook.start(plan, tools=box, on_event=lambda e: paused.set() if e.kind == "run.paused" else None)
    assert handle.wait_for_approval(60) == ["first"]
    handle.pause()
    assert paused.wait(60) and handle.status == "paused"
    handle.edit("later", text="y")  # a step that does not ask: edited in the paused run (applied before this returns)
    handle.resume()
    handle.approve("first")
    result = handle.wait(60)
    assert result.status == "completed" and result.outputs["later"] == "y"
    assert calls == ["later"]
