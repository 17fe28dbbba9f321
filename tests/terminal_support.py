"""The CLI on a real terminal (a pty), for the tests that answer its prompts: the approval
prompt's tests and the first-hour test share this one copy."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path


def _env(workdir: Path) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, str(workdir)]), "PYTHONUNBUFFERED": "1"}


class Terminal:
    """The CLI on a pseudo-terminal: read until a text appears, then type."""

    opened: list["Terminal"] = []

    def __init__(self, workdir: Path, *argv: str, command: list[str] | None = None) -> None:
        """``planbook run plan.yaml ... ARGV``, or ``planbook COMMAND``."""
        self.master, slave = pty.openpty()
        command = command or ["run", "plan.yaml", "--tools", "mailtools:tools", "--no-store", *argv]
        self.proc = subprocess.Popen([sys.executable, "-m", "planbook.cli", *command], cwd=workdir,
                                     env=_env(workdir), stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        self.text = ""
        Terminal.opened.append(self)
        self.seen = 0  # expect() searches after what it matched last: a prompt asked again is a new match

    def expect(self, wanted: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while wanted not in self.text[self.seen:]:
            left = end - time.monotonic()
            assert left > 0, f"{wanted!r} never appeared; the terminal shows:\n{self.text}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                assert chunk, f"the command ended before {wanted!r}; the terminal shows:\n{self.text}"
                self.text += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        self.seen = self.text.index(wanted, self.seen) + len(wanted)

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> None:
        """A test that failed half way leaves no command waiting at its prompt, nor an open terminal."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.close(self.master)
        except OSError:
            pass  # finish() closed it

    def finish(self) -> int:
        code = self.proc.wait(60)
        try:
            while True:
                ready, _, _ = select.select([self.master], [], [], 0.5)
                if not ready:
                    break
                chunk = os.read(self.master, 4096)
                if not chunk:
                    break
                self.text += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        except OSError:
            pass
        os.close(self.master)
        return code
