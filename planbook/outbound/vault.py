"""The process's vault: every secret value any run, toolbox, model setting or :class:`Secret`
of this process has made known, and the checkpoint every real exit passes.

Why one vault for the process and not one set per surface: a surface (a view, a diff, an
error raised before a run exists, a span, a cassette) that forgets to ask its run's gate
still sends its bytes through one of a handful of exits — the store's write path, the
notebook's IOPub publishing, the CLI's streams, the MCP server's answers, span export,
model requests and cassette writes. Each exit masks with :mod:`.checkpoint`'s functions,
which know every secret the process has learned,
so what a surface forgot is caught at the door it leaves by. Every :class:`Redactor`
(a run's gate, a store's) is backed by the vault too.

Secrets are kept for the life of the process: a finished run's result may be shown, saved
or exported long after it ended, and its secrets must still be hidden then.

``PLANBOOK_UNSAFE_UNMASKED=1`` in the environment (read at import) switches masking off
everywhere: it exists only so the canary test can show that it finds leaks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

#: a secret shorter than this is not hunted for inside other text (masking every "1" garbles it)
MIN_VAULT_SECRET = 4


class Vault:
    """A thread-safe, growing set of secret texts; ``version`` changes whenever one is added,
    so a redactor can tell in one comparison whether its patterns are stale."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: frozenset[str] = frozenset()
        self.version = 0

    def add(self, texts: Iterable[str]) -> list[str]:
        """Keep ``texts`` (each of :data:`MIN_VAULT_SECRET` characters or more); the new ones."""
        wanted = {t for t in texts if isinstance(t, str) and len(t) >= MIN_VAULT_SECRET}
        with self._lock:
            new = wanted - self._texts
            if new:
                self._texts = self._texts | new
                self.version += 1
        return sorted(new)

    @property
    def texts(self) -> frozenset[str]:
        return self._texts

    def __contains__(self, text: object) -> bool:
        return text in self._texts

    def __len__(self) -> int:
        return len(self._texts)


#: the one vault of this process
VAULT = Vault()

#: False only when ``PLANBOOK_UNSAFE_UNMASKED=1`` (the canary test's proof that it can fail)
MASKING = os.environ.get("PLANBOOK_UNSAFE_UNMASKED", "") != "1"
