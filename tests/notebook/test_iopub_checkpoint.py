"""The checkpoint on everything a real kernel publishes (planbook.views.publish): whatever a
surface forgets, a secret the process knows leaves no Jupyter kernel — not in display data,
a display update, an execute result, streamed output, an error, or a widget's comm messages
(state sync and JSON buffers) — and every message keeps its shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import Kernel, started_kernel

#: a canary secret, and one that only a secret shape names (the vault never learns it)
CANARY = "canary-iopub-Zq81xW4v"
SHAPED = "shaped-iopub-Kp27rT9m"
#: the same canary in the forms a program echoes it in
FORMS = (CANARY, json.dumps(CANARY)[1:-1], CANARY.encode("utf-8").hex())

SETUP = f'''
import json
import planbook
from IPython.display import display

secret = planbook.Secret({CANARY!r}, name="iopub-canary")
kernel_session = get_ipython().kernel.session

spec = """
steps:
  - {{id: a, tool: echo, args: {{value: hello}}}}
"""
box = planbook.Toolbox()


@box.tool
def echo(value: str) -> str:
    return value
'''


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel(SETUP, needs=("jupyter_client", "ipywidgets"))


def run(kernel: Kernel, code: str, *, ok: bool = True) -> list[dict]:
    reply, messages = kernel.execute(code)
    if ok:
        assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    return [{"msg_type": m["msg_type"], "content": m["content"], "metadata": m["metadata"],
             "buffers": [bytes(b) for b in m.get("buffers") or []]} for m in messages] + [
        {"msg_type": "execute_reply", "content": reply, "metadata": {}, "buffers": []}]


def leaks(messages: list[dict], secret: str = CANARY) -> list[str]:
    """Where ``secret`` (in any of its forms) is found in the messages' content, metadata or buffers."""
    forms = FORMS if secret == CANARY else (secret,)
    found = []
    for m in messages:
        text = json.dumps([m["content"], m["metadata"]], ensure_ascii=False)
        blob = b"".join(m["buffers"])
        for form in forms:
            if form in text or form.encode() in blob:
                found.append(f"{m['msg_type']}: {form}")
    return found


def printed(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def test_import_planbook_in_a_kernel_installs_the_checkpoint_once(kernel: Kernel) -> None:
    # in place from the first import, before any view is shown or %load_ext is run: a secret
    # made known (the Secret above) is *** in the user's own print
    before = run(kernel, f"print(type(kernel_session.send).__name__); print({CANARY!r})")
    assert printed(before) == "CheckpointSend\n***\n"
    shown = run(kernel, "result = planbook.run(spec, tools=box)\nresult")
    assert any(m["msg_type"] == "execute_result" for m in shown)
    after = run(kernel, f"print(type(kernel_session.send).__name__); print({CANARY!r})")
    assert printed(after) == "CheckpointSend\n***\n"
    # %load_ext and displaying again install nothing more: one wrapper, not a chain
    again = run(kernel, "%load_ext planbook\nresult\n"
                        "print(type(kernel_session.send.wrapped).__name__)")
    assert printed(again) == "method\n"


def test_display_data_updates_and_execute_results_are_masked(kernel: Kernel) -> None:
    messages = run(kernel, f'''
value = {CANARY!r}
handle = display({{"text/plain": "shown: " + value, "text/html": "<b>" + value + "</b>",
                  "application/json": {{"nested": [value], "n": 3, "ok": True}}}},
                 raw=True, display_id=True, metadata={{"note": value}})
handle.update({{"text/plain": "updated: " + value}}, raw=True)
display({{"text/plain": "password: {SHAPED}"}}, raw=True)
{{"holder": value, "count": 2}}
''')
    assert not leaks(messages) and not leaks(messages, SHAPED)
    kinds = [m["msg_type"] for m in messages]
    assert {"display_data", "update_display_data", "execute_result"} <= set(kinds)
    first = next(m for m in messages if m["msg_type"] == "display_data")
    assert first["content"]["data"]["text/plain"] == "shown: ***"
    assert first["content"]["data"]["application/json"] == {"nested": ["***"], "n": 3, "ok": True}  # types kept
    assert first["content"]["metadata"] == {"note": "***"}
    update = next(m for m in messages if m["msg_type"] == "update_display_data")
    assert update["content"]["transient"]["display_id"] == first["content"]["transient"]["display_id"]
    result = next(m for m in messages if m["msg_type"] == "execute_result")
    assert "***" in result["content"]["data"]["text/plain"] and "'count': 2" in result["content"]["data"]["text/plain"]


def test_streams_and_errors_are_masked(kernel: Kernel) -> None:
    messages = run(kernel, f'''
import sys
print("token echo:", {CANARY!r})
print(json.dumps({{"v": {CANARY!r}}}), file=sys.stderr)
raise ValueError("login refused for " + repr({CANARY!r}))
''', ok=False)
    assert not leaks(messages)
    error = next(m for m in messages if m["msg_type"] == "error")
    assert error["content"]["ename"] == "ValueError" and "***" in error["content"]["evalue"]
    assert messages[-1]["content"]["status"] == "error" and "***" in messages[-1]["content"]["evalue"]
    assert "token echo: ***" in printed(messages)


def test_widget_state_sync_and_json_buffers_are_masked_binary_buffers_kept(kernel: Kernel) -> None:
    messages = run(kernel, f'''
import ipywidgets
w = ipywidgets.Text(value={CANARY!r}, description="plain")
w.value = "again " + {CANARY!r}
w.send({{"kind": "custom"}}, buffers=[json.dumps({{"inner": {CANARY!r}, "n": 1}}).encode(),
                                      b"\\x00\\x01binary" + {CANARY!r}.encode()])
''')
    opened = next(m for m in messages if m["msg_type"] == "comm_open" and
                  m["content"]["data"]["state"].get("_model_name") == "TextModel")
    state = opened["content"]["data"]["state"]
    assert state["value"] == "***" and state["description"] == "plain" and state["_view_module"] == "@jupyter-widgets/controls"
    synced = [m for m in messages if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"]
    assert any(m["content"]["data"]["state"].get("value") == "again ***" for m in synced)
    custom = next(m for m in messages if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "custom")
    assert custom["content"]["comm_id"] == opened["content"]["comm_id"]  # routing ids are never touched
    as_json, binary = custom["buffers"]
    assert json.loads(as_json) == {"inner": "***", "n": 1}
    assert binary == b"\x00\x01binary" + CANARY.encode()  # not JSON: kept byte for byte
    assert leaks([{**m, "buffers": m["buffers"][:1]} for m in messages]) == []
