"""The thread that asks the ``approve=`` callable or the terminal prompt, for the door.

The door (:mod:`planbook.engine.door`) asks one question at a time, and the answer
comes back through the run's inbox like anyone's decision, so the run's one deadline
(``approve_timeout``) holds while the callable decides. This is only the thread: it holds
one question (a slot, not a queue: there is never a second) and touches no run state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["AskingThread"]


class AskingThread:
    """One daemon thread per run that runs each question given to it (started by the first).

    A daemon: a callable that never answers holds no process open. A thread for each question
    cost a start-up handshake each (2,000 asked steps: 0.58 s of CPU against 0.36 s)."""

    def __init__(self, name: str = "planbook-approve") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._question: Callable[[], None] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._busy = False  # a question is being asked (its callable may never return)

    def ask(self, question: Callable[[], None]) -> None:
        """Run ``question`` on the asking thread (the door gives one only when none is running)."""
        with self._cond:
            if self._closed:
                return
            self._question = question
            self._cond.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def close(self) -> None:
        """The run ended: the thread ends, and is waited for unless a question holds it (a
        callable that never answered): a thread that outlives its run frees its objects at
        some later moment, in whatever the process does then."""
        with self._cond:
            self._closed = True
            self._question = None
            self._cond.notify_all()
            thread, busy = self._thread, self._busy
        if thread is not None and not busy and thread is not threading.current_thread():
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._question is not None or self._closed)
                if self._closed:
                    return
                question, self._question = self._question, None
                self._busy = True
            assert question is not None
            try:
                question()
            finally:
                with self._cond:
                    self._busy = False
