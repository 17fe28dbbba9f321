"""The kernel's side of a page reloaded during a run, in a real kernel (the browser's side:
tests/browser/test_browser_reload.py).

A page reloaded during a run does not know the run's display id, so the update that turns the
display into the run's record misses it. The widget stays open after the run (``ended``): a page
that still shows it asks ``{"type": "record"}`` and gets the record in a custom message, and
``{"type": "recorded"}`` (its notebook shows the record) closes the widget. Where no page answers
(nbclient), only the latest few stay open.
"""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest

from helpers import Kernel, started_kernel

WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = """
%load_ext planbook
%plan_store off
import planbook

box = planbook.Toolbox()


@box.tool
def ok(label: str = "ok") -> str:
    return label


p = "steps:\\n  - {id: a, tool: ok}\\n  - {id: b, tool: ok, needs: [a]}\\n"
"""


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel(SETUP, needs=("jupyter_client", "anywidget"))


def _custom(kernel: Kernel, model_id: str, content: dict[str, Any]) -> list[dict]:
    """Send a custom widget message as the page does; return the kernel's messages in answer."""
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": model_id, "data": {"method": "custom", "content": content}})
    kernel.kc.shell_channel.send(msg)
    answer: list[dict] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            m = kernel.kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return answer
        answer.append(m)
    raise AssertionError(f"no answer to {content}")


def test_a_page_that_still_shows_the_widget_gets_the_record_and_then_it_closes(kernel: Kernel) -> None:
    reply, messages = kernel.execute("r = %run_plan p --tools box")
    assert reply["status"] == "ok"
    (shown,) = [m for m in messages if m["msg_type"] == "display_data"]
    model_id = shown["content"]["data"][WIDGET]["model_id"]
    assert "comm_close" not in [m["msg_type"] for m in messages]  # open for a reloaded page to ask

    answer = _custom(kernel, model_id, {"type": "record"})
    (record,) = [m["content"]["data"]["content"] for m in answer if m["msg_type"] == "comm_msg"]
    assert record["type"] == "record"
    assert "planbook-record" in record["data"]["text/html"] and WIDGET not in record["data"]
    assert "[✓]" in record["data"]["text/plain"]

    closed = _custom(kernel, model_id, {"type": "recorded"})
    assert model_id in [m["content"]["comm_id"] for m in closed if m["msg_type"] == "comm_close"]
    _, later = kernel.execute("pass")
    assert "comm_close" not in [m["msg_type"] for m in later]  # closed once


def test_where_no_page_answers_only_the_latest_few_stay_open(kernel: Kernel) -> None:
    from planbook.views.widgetlife import LEFT_OPEN

    opened = []
    for _ in range(LEFT_OPEN + 1):
        _, messages = kernel.execute("r = %run_plan p --tools box")
        (shown,) = [m for m in messages if m["msg_type"] == "display_data"]
        opened.append(shown["content"]["data"][WIDGET]["model_id"])
        closed = [m["content"]["comm_id"] for m in messages if m["msg_type"] == "comm_close"]
        # the widget of the run LEFT_OPEN runs back closes as this run leaves its own
        assert (opened[0] in closed) == (len(opened) == LEFT_OPEN + 1), (len(opened), closed)
        assert not set(opened[1:]) & set(closed)
