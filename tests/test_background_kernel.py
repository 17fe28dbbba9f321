"""Background runs in a real kernel (jupyter_client): a step's print lands only in its pane,
other cells answer while the run goes, a kernel interrupt does not stop the run, and twenty
runs leave no thread behind."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import Kernel

SETUP = '''
%load_ext planbook
import threading
import planbook

box = planbook.Toolbox()
gate = threading.Event()


@box.tool
def talk(word: str) -> str:
    print(f"PRINTED-{word}")
    assert gate.wait(60)
    return word


@box.tool(approve=True)
def risky(word: str) -> str:
    print(f"PRINTED-risky-{word}")
    return word


spec = """
steps:
  - {id: a, tool: talk, args: {word: one}}
  - {id: b, tool: risky, args: {word: two}, needs: [a]}
"""
'''


class RecordingKernel(Kernel):
    """The shared kernel helper, keeping every iopub message whatever request it belongs to."""

    def __init__(self) -> None:
        super().__init__()
        self.everything: list[dict] = []
        get = self.kc.get_iopub_msg

        def recording(*args: Any, **kwargs: Any) -> dict:
            msg = get(*args, **kwargs)
            self.everything.append(msg)
            return msg

        self.kc.get_iopub_msg = recording  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def kernel() -> Any:
    pytest.importorskip("jupyter_client")
    pytest.importorskip("anywidget")
    k = RecordingKernel()
    reply, messages = k.execute(SETUP, timeout=120)
    assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    yield k
    k.close()


def ok(kernel: Kernel, code: str, **kwargs: Any) -> list[dict]:
    reply, messages = kernel.execute(code, **kwargs)
    assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    return messages


def printed(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def test_a_steps_print_lands_only_in_its_pane_and_other_cells_answer(kernel: RecordingKernel) -> None:
    ok(kernel, "gate.clear()")
    messages = ok(kernel, "handle = %run_plan spec --tools box --background\nhandle")
    (shown,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert "application/vnd.jupyter.widget-view+json" in shown["content"]["data"]
    assert shown["content"]["data"]["text/plain"].startswith("background run of plan")
    # the run waits in step a (on the gate): another cell runs and answers meanwhile
    assert printed(ok(kernel, "print('other cell answers:', handle.status)")) == "other cell answers: running\n"
    out = printed(ok(kernel, "gate.set(); handle.approve('b'); r = handle.wait(60)\n"
                             "print(r.status, r.plan.step('a').output.count('PRINTED-one'),"
                             " r.plan.step('b').output.count('PRINTED-risky-two'))"))
    assert out == "completed 1 1\n"  # each print is in its step's pane, once
    streams = [m for m in kernel.everything if m["msg_type"] == "stream" and "PRINTED-" in m["content"]["text"]]
    assert streams == []  # and in no cell's output, whichever cell was running


def test_a_kernel_interrupt_does_not_stop_a_background_run(kernel: RecordingKernel) -> None:
    ok(kernel, "gate.clear(); h2 = planbook.start(spec, tools=box, view=False); h2.approve('b')")
    reply, _ = kernel.execute("print('waiting now', flush=True); h2.wait()", interrupt_when="waiting now")
    assert (reply["status"], reply.get("ename")) == ("error", "KeyboardInterrupt"), reply
    assert printed(ok(kernel, "print(h2.status)")) == "running\n"
    assert printed(ok(kernel, "gate.set(); print(h2.wait(60).status)")) == "completed\n"


def test_twenty_background_runs_with_views_leave_no_thread_behind(kernel: RecordingKernel) -> None:
    out = printed(ok(kernel, """
before = set(threading.enumerate())
gate.set()
for i in range(20):
    h = planbook.start(spec, tools=box)
    h.approve('b')
    assert h.wait(60).status == 'completed'
for t in set(threading.enumerate()) - before:
    t.join(10)
print(sorted(t.name for t in set(threading.enumerate()) - before if t.is_alive()))
""", timeout=180))
    assert out == "[]\n"
