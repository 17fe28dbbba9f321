"""Background runs in a real kernel (jupyter_client): a step's print lands only in its pane,
other cells answer while the run goes, a kernel interrupt does not stop the run, and twenty
runs leave no thread behind."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import Kernel, started_kernel

WIDGET = "application/vnd.jupyter.widget-view+json"

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
    yield from started_kernel(SETUP, needs=("jupyter_client", "anywidget"), kind=RecordingKernel)


def ok(kernel: Kernel, code: str, **kwargs: Any) -> list[dict]:
    reply, messages = kernel.execute(code, **kwargs)
    assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    return messages


def printed(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def test_a_steps_print_lands_only_in_its_pane_and_other_cells_answer(kernel: RecordingKernel) -> None:
    ok(kernel, "gate.clear()")
    messages = ok(kernel, "handle = %run_plan spec --tools box --background\nhandle")
    (shown,) = [m for m in messages if m["msg_type"] == "display_data"]
    assert WIDGET in shown["content"]["data"]
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


def wait_for_message(kernel: RecordingKernel, found: Any, timeout: float = 60) -> dict:
    """The first iopub message (read so far or from now on, whatever request it belongs to) for
    which ``found(msg)`` is true; fails when none came within ``timeout`` s."""
    import queue
    import time

    deadline = time.monotonic() + timeout
    seen = 0
    while True:
        for msg in kernel.everything[seen:]:
            if found(msg):
                return msg
        seen = len(kernel.everything)
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no such iopub message within {timeout} s: "
                                 f"{[m['msg_type'] for m in kernel.everything[-20:]]}")
        try:
            kernel.kc.get_iopub_msg(timeout=min(left, 0.5))  # recorded in kernel.everything
        except queue.Empty:
            pass


def kernel_major() -> int:
    import ipykernel

    return int(ipykernel.__version__.split(".")[0])


def display_id(msg: dict) -> str | None:
    return (msg["content"].get("transient") or {}).get("display_id")


def test_a_displayed_background_run_ends_as_its_record_in_every_display(kernel: RecordingKernel) -> None:
    ok(kernel, "gate.clear()")
    started = ok(kernel, "shown = %run_plan spec --tools box --background\nshown")
    again = ok(kernel, "display(shown)")  # shown twice: each display is updated
    ids = []
    for messages in (started, again):
        (live,) = [m for m in messages if m["msg_type"] == "display_data"]
        assert WIDGET in live["content"]["data"] and display_id(live), live["content"]
        ids.append(display_id(live))
    assert ids[0] != ids[1]
    start_cell = started[0]["parent_header"]["msg_id"]

    # the run ends on its own thread: it updates both displays from there (JupyterLab and Notebook 7
    # apply an update by its display id), under ipykernel 7 with the parent header of the cell that
    # started it (the thread runs in that cell's context; older kernels have one global parent header)
    ok(kernel, "gate.set(); shown.approve('b')")
    from_start_cell = kernel_major() >= 7
    for shown_id in ids:
        update = wait_for_message(kernel, lambda m, i=shown_id: m["msg_type"] == "update_display_data"
                                  and display_id(m) == i
                                  and (not from_start_cell or m["parent_header"].get("msg_id") == start_cell))
        data = update["content"]["data"]
        assert WIDGET not in data, "the ended run's display is still a widget: a saved notebook shows an error"
        assert "planbook-record" in data["text/html"]
        assert "[✓] talk(word='one')" in data["text/plain"] and "[✓] risky(word='two')" in data["text/plain"]
        assert "b: approved by you (api)" in data["text/plain"]
        assert 'class="planbook-decision planbook-decision-approve">b: approved by you (api)' in data["text/html"]

    # the next cell sends the record again, as its own output (nbclient and nbconvert read only
    # the running cell's messages), and the handle now shows the record wherever it is displayed
    later = ok(kernel, "shown.wait(60); display(shown)")
    updates = {display_id(m): m["content"]["data"] for m in later if m["msg_type"] == "update_display_data"}
    assert set(ids) <= set(updates) and all(WIDGET not in updates[i] for i in ids)
    (record,) = [m for m in later if m["msg_type"] == "display_data"]
    assert WIDGET not in record["content"]["data"] and "planbook-record" in record["content"]["data"]["text/html"]
    # sent once from the main thread: a later cell sends nothing again
    assert not [m for m in ok(kernel, "print(shown.status)") if m["msg_type"] == "update_display_data"]


def test_a_paused_background_run_keeps_its_live_view(kernel: RecordingKernel) -> None:
    ok(kernel, "gate.clear()")
    started = ok(kernel, "paused = %run_plan spec --tools box --background\npaused")
    (live,) = [m for m in started if m["msg_type"] == "display_data"]
    ok(kernel, "paused.pause(); gate.set(); paused.wait_for_approval(60)")
    assert printed(ok(kernel, "print(paused.status)")) == "paused\n"
    mine = [m for m in kernel.everything if m["msg_type"] == "update_display_data" and display_id(m) == display_id(live)]
    assert mine == []  # its Continue button is how it goes on
    ok(kernel, "paused.resume(); paused.approve('b')")
    assert printed(ok(kernel, "print(paused.wait(60).status)")) == "completed\n"
    wait_for_message(kernel, lambda m: m["msg_type"] == "update_display_data" and display_id(m) == display_id(live)
                     and WIDGET not in m["content"]["data"])
