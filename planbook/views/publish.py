"""The one way planbook's views reach a notebook, and the checkpoint on everything a kernel publishes.

Why a checkpoint on the kernel and not only on the views: a view, a widget trait, a diff,
a printed line or a traceback that forgets the gate still leaves the kernel by one door, the
kernel session's ``send`` (display data, display updates, execute results, streams, errors,
widget ``comm_open``/``comm_msg`` state sync, replies). :func:`install_checkpoint` wraps that
``send`` once: every string in a message's content and metadata passes
:func:`planbook.outbound.checkpoint.mask_text` (the process's vault, every form a secret is
echoed in, and every secret shape) and a string under a secret-named key is ``***``. It masks
decoded strings, never the raw JSON text, so a message keeps its shape: numbers, booleans,
keys and the ids a front end routes by (``comm_id``, ``model_id``, ``display_id``, a widget's
module and model names) are left as they are. A binary buffer is left intact unless it is
UTF-8 JSON, which is masked the same way and written back.

It is installed by ``%load_ext planbook`` and the first time a planbook view is displayed in a
kernel (:func:`ensure_checkpoint`, called by every view's display bundle and by
:func:`display`), so a user who only ``import planbook`` and runs with a live view is covered.

Views display and update only through :func:`display` and :func:`update_display` here.
IPython is imported lazily: importing this module costs nothing outside a kernel.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..outbound import vault
from ..outbound.checkpoint import mask_text
from ..outbound.redact import Redactor, dump_json, is_secret_name
from ..outbound.shapes import REDACTED_TEXT

#: keys whose string values are ids or protocol names, not text: never masked (a 4-character
#: secret inside a comm id would otherwise break the message's routing)
STRUCTURAL_KEYS = frozenset({
    "comm_id", "model_id", "display_id", "msg_id", "msg_type", "target_name", "target_module", "execution_state",
    "buffer_paths", "method", "version", "version_major", "version_minor",
})
#: a widget's model and view names and versions (``_model_module``, ``_view_name``...)
_STRUCTURAL_PREFIXES = ("_model_", "_view_")
#: the first byte of a buffer that may be JSON (an object, an array or a string)
_JSON_STARTS = (b"{", b"[", b'"')
#: attribute set on the wrapped ``send`` (what makes installing twice a no-op)
MARK = "planbook_checkpoint"

_installed: set[int] = set()  # id() of the sessions whose send is wrapped
#: a container with this many items or more is first checked whole, as one JSON text
FAST_CHECK_ITEMS = 8
_checker: Redactor | None = None


def _clean(value: Any) -> bool:
    """True when masking would change nothing in ``value`` (a dict or a list): its compact JSON is
    searched once, in C, for a known secret in any form and for every word a secret shape or a
    secret-named key holds. The live view's rows are thousands of short texts: asked one by one
    they cost thirty times the JSON packing of the message; asked at once, a fraction of it."""
    global _checker
    if _checker is None:
        _checker = Redactor()
    try:
        text = dump_json(value)
    except (TypeError, ValueError, RecursionError):  # not plain JSON: walked item by item
        return False
    return _checker.unchanged(text)


# ------------------------------------------------------------------ masking a message
def mask_value(value: Any) -> Any:
    """``value`` (a message's content or metadata) with every string masked; the same object
    when nothing changed (no copy on the usual path). Keys, numbers and booleans stay."""
    t = type(value)
    if t is str:
        return mask_text(value) if value else value
    if (t is dict or t is list or t is tuple) and len(value) >= FAST_CHECK_ITEMS and _clean(value):
        return value
    if t is dict:
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            tv = type(v)
            if tv is not str and tv is not dict and tv is not list and tv is not tuple:
                continue  # a number, a boolean, None: its type is part of the protocol
            if type(k) is str and (k in STRUCTURAL_KEYS or k.startswith(_STRUCTURAL_PREFIXES)):
                continue
            if tv is str and v and type(k) is str and is_secret_name(k):
                new: Any = REDACTED_TEXT if v != REDACTED_TEXT else v  # a password field's text, whole
            else:
                new = mask_value(v)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if t is list or t is tuple:
        items = [mask_value(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if t is list else tuple(items)
    return value


def mask_buffer(buffer: Any) -> Any:
    """A binary buffer as it may leave: itself, unless it is UTF-8 JSON holding something to mask
    (then the masked JSON, as bytes). Pictures and arrays are never touched."""
    try:
        view = memoryview(buffer)
        if not view.contiguous:
            return buffer
        view = view.cast("B")
    except (TypeError, ValueError):
        return buffer
    if bytes(view[:64]).lstrip()[:1] not in _JSON_STARTS:
        return buffer
    try:
        data = json.loads(view.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return buffer
    masked = mask_value(data)
    if masked is data:
        return buffer
    return json.dumps(masked, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def mask_buffers(buffers: Any) -> Any:
    if not buffers:
        return buffers
    out = [mask_buffer(b) for b in buffers]
    return buffers if all(a is b for a, b in zip(out, buffers)) else out


def mask_message(msg: dict[str, Any]) -> dict[str, Any]:
    """A whole message dict (as ``Session.msg`` builds it) with its content, metadata and buffers
    masked; the same dict when nothing changed. Headers are left as they are (ids and times)."""
    content, metadata = msg.get("content"), msg.get("metadata")
    new_content, new_metadata = mask_value(content), mask_value(metadata)
    buffers = msg.get("buffers")
    new_buffers = mask_buffers(buffers)
    if new_content is content and new_metadata is metadata and new_buffers is buffers:
        return msg
    out = dict(msg)
    out["content"], out["metadata"] = new_content, new_metadata
    if buffers is not None:
        out["buffers"] = new_buffers
    return out


class CheckpointSend:
    """The kernel session's ``send``, with :func:`mask_message` applied to every message first
    (the signature of :meth:`jupyter_client.session.Session.send`)."""

    planbook_checkpoint = True

    def __init__(self, send: Any) -> None:
        self.wrapped = send

    def __call__(self, stream: Any, msg_or_type: Any, content: Any = None, parent: Any = None, ident: Any = None,
                 buffers: Any = None, track: bool = False, header: Any = None, metadata: Any = None) -> Any:
        if vault.MASKING:
            if isinstance(msg_or_type, dict):
                msg_or_type = mask_message(msg_or_type)
            else:
                content, metadata = mask_value(content), mask_value(metadata)
            buffers = mask_buffers(buffers)
        return self.wrapped(stream, msg_or_type, content, parent, ident, buffers, track, header, metadata)


# ------------------------------------------------------------------ installing it
def _shell() -> Any:
    """The running IPython shell, or None (IPython is not imported for nothing)."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython  # lazily: the views layer may use IPython, never at import

    return get_ipython()


def install_checkpoint(shell: Any = None) -> bool:
    """Wrap the kernel session's ``send`` of ``shell`` (default: the running one) with the
    checkpoint; True when it is in place (it was already, or is now), False outside a kernel.
    Installing again does nothing."""
    shell = shell if shell is not None else _shell()
    kernel = getattr(shell, "kernel", None)
    session = getattr(kernel, "session", None)
    send = getattr(session, "send", None)
    if session is None or send is None:  # (no session has no send)
        return False
    if not getattr(send, MARK, False):
        session.send = CheckpointSend(send)
    _installed.add(id(session))
    return True


def ensure_checkpoint() -> None:
    """:func:`install_checkpoint` if a kernel runs and it is not in place yet: what every view's
    display calls. Once installed, one set lookup; outside IPython, one dictionary lookup."""
    if _installed or "ipykernel" not in sys.modules:
        return
    install_checkpoint()


# ------------------------------------------------------------------ the one publish function
def display(obj: Any, *, raw: bool = False, metadata: dict[str, Any] | None = None,
            display_id: bool | str | None = None) -> Any:
    """Show ``obj`` in the notebook (IPython's ``display``), the checkpoint installed first;
    with ``display_id=True`` returns the handle to update it with (:func:`update_display`)."""
    ensure_checkpoint()
    from IPython.display import display as ipython_display  # lazily: only when a view is shown

    kwargs: dict[str, Any] = {"raw": raw}
    if metadata is not None:
        kwargs["metadata"] = metadata
    if display_id is not None:
        kwargs["display_id"] = display_id
    return ipython_display(obj, **kwargs)


def update_display(handle: Any, obj: Any, *, raw: bool = False) -> None:
    """Replace what ``handle`` (from :func:`display`) shows with ``obj``, through the checkpoint."""
    ensure_checkpoint()
    handle.update(obj, raw=raw)
