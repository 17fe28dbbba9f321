"""nbval, taught to apply ``update_display_data`` the way every notebook front end does.

planbook's live views display a run with a display id and, when the run returns, update
that display with the run's final state, which is what JupyterLab, nbclient and
``jupyter nbconvert --execute`` then store. nbval compares only the first version of
each display (it ignores updates), so it would compare the stored final state with the
state at the start of the run. This hook holds back a cell's displays that carry a
display id (and the displays after them, to keep their order) until the cell is idle,
applying the updates that arrive meanwhile, so nbval compares what the notebook really
holds: the final state, as text.
"""

from __future__ import annotations

from collections import deque
from typing import Any

HELD = ("display_data", "execute_result")


def _apply_display_updates(get_message: Any) -> Any:
    held: list[dict[str, Any]] = []
    ready: deque[dict[str, Any]] = deque()

    def get_kernel_message(*args: Any, **kwargs: Any) -> Any:
        while not ready:
            msg = get_message(*args, **kwargs)
            kind = msg.get("msg_type")
            content = msg.get("content", {})
            display_id = (content.get("transient") or {}).get("display_id")
            if kind in HELD and (display_id or held):
                held.append(msg)
                continue
            if kind == "update_display_data" and display_id:
                for old in held:
                    if (old["content"].get("transient") or {}).get("display_id") == display_id:
                        old["content"]["data"] = content["data"]
                        old["content"]["metadata"] = content.get("metadata", {})
                continue  # applied (nbval would only print "unhandled iopub msg")
            if kind == "status" and content.get("execution_state") == "idle":
                ready.extend(held)
                held.clear()
            ready.append(msg)
        return ready.popleft()

    return get_kernel_message


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        notebook = getattr(item, "parent", None)
        if type(notebook).__name__ == "IPyNbFile" and not getattr(notebook, "_planbook_updates", False):
            notebook.get_kernel_message = _apply_display_updates(notebook.get_kernel_message)
            notebook._planbook_updates = True
