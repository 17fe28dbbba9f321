"""Who writes a run: the claim a process takes before it runs anything of a stored run.

A run is written by one process at a time. The process that creates a run holds it; a
resume (or a paused run continued) *claims* it first, in one write transaction: when the
store says the run is ``running`` and its writer is another process that is still alive,
the claim is refused with :class:`RunClaimed` before anything runs. A writer that is gone
(its pid no longer alive on this host) is taken over; a writer on another host cannot be
checked from here, so only ``force`` takes its run over.
"""

from __future__ import annotations

import os

from ..data.errors import RunClaimed, this_host


def process_alive(pid: int | None) -> bool:
    """True when a process with this id runs on this host (or it cannot be told)."""
    if not pid or pid < 0:
        return False
    if os.name != "posix":  # os.kill(pid, 0) is no probe on Windows: it would signal the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        return True
    return True


def writer_gone(status: str, pid: int | None, host: str | None) -> bool:
    """A ``running`` run whose writer process died on this host (a run written by an older
    planbook has no host: it is taken to be this one)."""
    return status == "running" and (host is None or host == this_host()) and not process_alive(pid)


def is_me(pid: int | None, host: str | None) -> bool:
    return pid == os.getpid() and (host is None or host == this_host())


def refuse_claim(run_id: str, status: str, pid: int | None, host: str | None, since: float | None,
                 force: bool) -> None:
    """Raise :class:`RunClaimed` unless this process may take the run over."""
    if force or status != "running" or is_me(pid, host) or writer_gone(status, pid, host):
        return
    raise RunClaimed(run_id, pid, host, since)
