"""The command's one writer: while ``planbook`` runs, ``sys.stdout`` and ``sys.stderr`` are
:class:`MaskingStream` s, so every byte the process prints — the command's own lines, the live
table, the approval prompt, a tool that prints to stderr, argparse's errors, a traceback —
passes :func:`planbook.outbound.checkpoint.mask_text` on its way out.

Why at the streams and not at each ``print``: a surface that forgets the gate (a new message,
a tool writing straight to ``sys.stderr``) still writes to these streams, so it cannot reach
the terminal unmasked.

A secret written in parts (``print(pw[:9], end=""); print(pw[9:])``) must still be found,
so text is held until a line ends (or the stream is flushed), and then masked whole; at a
flush, a tail that could be the start of a known secret is held back too, so no fragment of
one leaves before the rest of it has been seen (at the end, such a tail is written as ``***``). What a subprocess writes to the file
descriptors directly does not pass through Python's streams, and is not masked.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

from ..outbound import REDACTED_TEXT, VAULT, mask_text
from ..outbound.redact import echo_forms, environment_secrets

#: text held for a line to end before it is masked and written anyway (a line without end)
HOLD_LIMIT = 64 * 1024
#: a tail this long or longer that starts a known secret is held back at a flush (one character:
#: a secret cut after its first letter would otherwise leave whole but that letter)
MIN_HELD = 1
#: at the end, a held tail that starts a known secret is written as ``***`` from this length on
#: (shorter is no part of a secret worth garbling the end of the output for)
MIN_FRAGMENT = 4


class _Prefixes:
    """Every proper prefix (of :data:`MIN_HELD` characters or more) of every form of every known
    secret, rebuilt when the vault or the model's environment changes."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._prefixes: frozenset[str] = frozenset()
        self.longest = 0
        #: whether a form holds a line break (only then can a text that ends a line end inside one)
        self.multiline = False

    def _refresh(self) -> None:
        key = (VAULT.version, os.environ.get("OPENAI_API_KEY"), os.environ.get("OPENAI_BASE_URL"))
        if key != self._key:
            forms = {form for s in (*VAULT.texts, *environment_secrets()) for form in echo_forms(s)}
            self._prefixes = frozenset(f[:k] for f in forms for k in range(MIN_HELD, len(f)))
            self.longest = max((len(f) for f in forms), default=0)
            self.multiline = any("\n" in f for f in forms)
            self._key = key

    def held_from(self, text: str, *, line_end: bool = False) -> int:
        """Where the longest tail of ``text`` that starts a known secret begins (``len(text)``: none).
        ``line_end``: ``text`` ends a line (it can end inside a secret only if one holds a line break)."""
        self._refresh()
        if not self._prefixes or (line_end and not self.multiline):
            return len(text)
        for start in range(max(0, len(text) - self.longest + 1), len(text) - MIN_HELD + 1):
            if text[start:] in self._prefixes:
                return start
        return len(text)


_PREFIXES = _Prefixes()


class MaskingStream(io.TextIOBase):
    """A text stream that masks what it is given and writes it to ``inner`` (see the module)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._held = ""
        self._lock = threading.RLock()

    # ------------------------------------------------------------ writing
    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            self._held += text
            if "\n" in text or len(self._held) > HOLD_LIMIT:
                self._emit(whole=False)
        return len(text)

    def _emit(self, *, whole: bool, at_flush: bool = False) -> None:
        """Write what is held, masked: up to its last line end (``whole``: all of it); at a flush,
        all but a tail that starts a known secret."""
        if not self._held:
            return
        masked = mask_text(self._held)
        if whole:  # the last of it: a secret's start never followed by its rest is a fragment
            start = _PREFIXES.held_from(masked)
            if len(masked) - start >= MIN_FRAGMENT:
                masked = masked[:start] + REDACTED_TEXT
            cut = len(masked)
        elif at_flush:
            cut = _PREFIXES.held_from(masked)
        else:
            end = masked.rfind("\n") + 1
            if not end and len(masked) > HOLD_LIMIT:  # a line without end: written, all but a secret's start
                end = len(masked)
            cut = _PREFIXES.held_from(masked[:end], line_end=masked[end - 1:end] == "\n") if end else 0
        out, self._held = masked[:cut], masked[cut:]
        if out:
            self.inner.write(out)

    def flush(self) -> None:
        with self._lock:
            self._emit(whole=False, at_flush=True)
            self.inner.flush()

    def close_out(self) -> None:
        """Write everything still held (the command ends), masked, and flush."""
        with self._lock:
            try:
                self._emit(whole=True)
            finally:
                self._held = ""
            self.inner.flush()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    # ------------------------------------------------------------ what it is
    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def isatty(self) -> bool:
        return bool(getattr(self.inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return int(self.inner.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)

    @property
    def buffer(self) -> "_MaskingBuffer":
        """Bytes written to ``sys.stdout.buffer`` are masked too (decoded with the stream's encoding)."""
        return _MaskingBuffer(self)

    def reconfigure(self, **kwargs: Any) -> None:
        self.inner.reconfigure(**kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:  # what else a caller asks of the real stream
        return getattr(self.inner, name)


class _MaskingBuffer:
    """``sys.stdout.buffer`` of a :class:`MaskingStream`: bytes go through the text's masking."""

    def __init__(self, text: MaskingStream) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        self._text.write(bytes(data).decode(self._text.encoding, "replace"))
        return len(data)

    def flush(self) -> None:
        self._text.flush()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._text.inner.buffer, name)


@contextlib.contextmanager
def masked_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`MaskingStream` s for the duration; at the
    end what they hold is written (masked) and the real streams are put back."""
    wrapped = [(name, getattr(sys, name)) for name in ("stdout", "stderr")]
    streams = {name: MaskingStream(stream) for name, stream in wrapped if stream is not None}
    for name, stream in streams.items():
        setattr(sys, name, stream)
    try:
        yield
    finally:
        try:
            for stream in streams.values():
                stream.close_out()
        finally:
            for name, original in wrapped:
                if getattr(sys, name) is streams.get(name):
                    setattr(sys, name, original)
