"""Errors a user can act on: each names the step, the problem and what to do.

Every error planbook raises on purpose derives from :class:`PlanbookError`, and also from
the built-in class a caller would expect, so ``except ValueError`` keeps working::

    PlanbookError
    ├── PlanError (ValueError)            a plan or a planner's answer is invalid; .problems lists each
    │   └── CellPlanError                 the same, pointing into a %%plan cell (raised by the magics)
    ├── SecretError (ValueError)          a Secret cannot be made or resolved (an unset variable)
    ├── PlanningError (RuntimeError)      a planner could not make a plan; carries the attempts
    ├── RunFailed (RuntimeError)          a run ended failed and the caller asked for an exception
    ├── RunEnded (RuntimeError)           a decision given after the run ended
    ├── ResumeError (RuntimeError)        a stored run cannot continue as it is (planbook.resume)
    │   └── NothingToResume               the stored run already completed or failed
    ├── ForkError (ValueError)            a fork or a comparison of runs cannot be made as asked
    ├── StoreError (RuntimeError)         a run store cannot do what was asked (planbook.store)
    │   ├── StoreFormatError              the file is damaged, not a run store, or newer
    │   ├── RunNotFound (LookupError)     no run with that id
    │   └── RunClaimed                    another live process is writing the run
    ├── LLMConfigError (RuntimeError)     the model settings are missing or wrong (planbook.llm)
    │   └── CassetteError                 a cassette file is damaged or refused
    │       └── CassetteMismatch          a replayed request differs from the recording
    ├── ModelCallError (RuntimeError)     the model server failed or answered something else
    ├── MCPError (RuntimeError)           an MCP server cannot be reached, started or used (planbook.mcp)
    │   └── MCPServerNotFound (FileNotFoundError)  its command is not installed here
    ├── OTelMissing (ImportError)         OpenTelemetry is not installed (planbook.otel)
    └── UpstreamCrash (RuntimeError)      a seed design's own code raises here (planbook.compat)

Every one is defined here and exported from ``planbook``, so ``except planbook.StoreError`` works
without knowing which layer raised it (httpx's ``_exceptions.py`` is the model).

``RunInterrupted`` (planbook.notebook.magics) is a ``KeyboardInterrupt``, so "Run all" stops there.
"""

from __future__ import annotations

import difflib
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..outbound import neutralise, shown_error
from ..outbound.checkpoint import mask_text


class PlanbookError(Exception):
    """The base of every error planbook raises on purpose (see the module docstring).

    An error is an exit too (raised to a caller, printed, logged, answered over MCP): its
    message passes the process's checkpoint when it is made, so a secret the process knows
    is ``***`` in its ``str``, its ``repr`` and its ``args``, whoever raised it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(mask_text(a) if isinstance(a, str) else a for a in args))

    def _message(self) -> str:
        return str(self)

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of a long traceback: the message is the point. It leaves
        through the gate (an echoed secret or a credential in a URL shows as ***, a control
        sequence as its escape)."""
        return [shown_error(f"{type(self).__name__}: {self._message()}")]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan. ``step`` is None for plan-wide problems."""

    message: str
    step: str | None = None
    code: str = "invalid"
    line: int | None = None

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "plan"
        if self.line is not None:
            where += f" (line {self.line})"
        return f"{where}: {self.message}"


class PlanError(PlanbookError, ValueError):
    """A plan that cannot run. ``problems`` lists every problem found, not only the first."""

    def __init__(self, problems: Iterable[Problem] | str, *, source: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(self._message())

    def _message(self) -> str:
        if len(self.problems) == 1:
            return mask_text(f"invalid plan: {self.problems[0]}")
        lines = [f"invalid plan ({len(self.problems)} problems):"]
        lines += [f"  - {p}" for p in self.problems]
        return mask_text("\n".join(lines))

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.problems]


class CellPlanError(PlanError):
    """A :class:`PlanError` about a ``%%plan`` cell: its short traceback quotes the cell's lines
    (``offset``: the cell's first line is the ``%%plan`` line, so the spec's line 1 is its line 2)."""

    def __init__(self, problems: Iterable[Problem], *, source: str | None = None, offset: int = 0) -> None:
        shifted = [Problem(p.message, step=p.step, code=p.code, line=p.line + offset if p.line is not None else None)
                   for p in problems]
        super().__init__(shifted, source=source)

    def _render_traceback_(self) -> list[str]:
        lines = [f"PlanError: {self._message()}"]
        cell = self.source.splitlines() if self.source is not None else []
        quoted = sorted({p.line for p in self.problems if p.line is not None and 1 <= p.line <= len(cell)})
        if quoted:
            lines.append("")
            width = len(str(quoted[-1]))
            lines += [f"  {n:>{width}} | {cell[n - 1]}" for n in quoted]
        if self.source is not None:
            lines.append("Fix the plan in the cell and run it again.")
        # a planner's words (an LLM's step ids and messages) reach the notebook inert
        return [neutralise(line) for line in lines]


class SecretError(PlanbookError, ValueError):
    """A :class:`planbook.Secret` cannot be made or resolved (an unset variable, an unknown name)."""


class PlanningError(PlanbookError, RuntimeError):
    """A planner could not produce a valid plan; ``attempts`` holds every raw answer."""

    def __init__(self, message: str, *, attempts: list[Any] | None = None) -> None:
        super().__init__(message)
        self.attempts: list[Any] = list(attempts or [])


class RunFailed(PlanbookError, RuntimeError):
    """Raised by ``--check`` and pipelines when a run ends failed; carries the result."""

    def __init__(self, result: Any) -> None:
        self.result = result
        super().__init__(f"run {result.status} ({result.reason}): {result.error or 'no error message'}")


def closest(name: str, known: Iterable[str]) -> str:
    """'; did you mean X?' when something close exists (ignoring case), else ''."""
    by_folded = {k.casefold(): k for k in known}
    match = difflib.get_close_matches(name.casefold(), list(by_folded), n=1, cutoff=0.6)
    return f"; did you mean {by_folded[match[0]]!r}?" if match else ""


class RunEnded(PlanbookError, RuntimeError):
    """A decision given after the run ended: said in one line (a notebook shows no traceback)."""


class ResumeError(PlanbookError, RuntimeError):
    """A stored run cannot continue as it is; the message says what to do."""


class ForkError(PlanbookError, ValueError):
    """A fork (:func:`planbook.fork`) or a comparison (:func:`planbook.diff_runs`) cannot be made as
    asked; the message names the problem and what to do, and nothing was created."""


class NothingToResume(ResumeError):
    """The stored run already completed or failed: there is nothing to continue (callers
    that show the run instead catch this, not every :class:`ResumeError`)."""


class StoreError(PlanbookError, RuntimeError):
    """A run store cannot do what was asked; the message says which store and what to do."""


class StoreFormatError(StoreError):
    """The file is not a planbook run store, is damaged, or was written by a newer planbook.
    The file is left exactly as it was."""


class RunNotFound(StoreError, LookupError):
    """No run with that id in the store."""


@lru_cache(maxsize=1)
def this_host() -> str:
    """This machine's name, as a store's claims record it."""
    return socket.gethostname() or "localhost"


class RunClaimed(StoreError):
    """Another live process is writing the run: nothing was run."""

    def __init__(self, run_id: str, pid: int | None, host: str | None, since: float | None,
                 changed: str | None = None) -> None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if since else "an unknown time"
        where = f"process {pid} on host {host or this_host()}"
        if changed is None:
            text = (f"run {run_id} is being written by {where} since {when}; wait for it, or pass --force if that "
                    "process is gone (force=True in Python)")
        elif changed in ("completed", "failed"):
            text = f"run {run_id} was {changed} meanwhile by {where}: nothing to continue (planbook show {run_id})"
        else:
            text = (f"run {run_id} was written by {where} meanwhile (it is {changed} now), so what this process "
                    "holds of it is out of date: resume it again to continue from where it is")
        super().__init__(text)
        self.run_id, self.pid, self.host, self.since = run_id, pid, host, since


class LLMConfigError(PlanbookError, RuntimeError):
    """The model layer is not set up (no key, no server, no cassette); the message says how."""


class CassetteError(LLMConfigError):
    """A cassette that cannot be used as it is: damaged, or asked for something it cannot do."""


class CassetteMismatch(CassetteError):
    """A request the cassette has no recording for (the prompt, tools or model changed)."""


class ModelCallError(PlanbookError, RuntimeError):
    """A call to the model server failed (HTTP error, timeout, connection); secrets are redacted."""

    def __init__(self, message: str, *, status: int | None = None, kind: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class MCPError(PlanbookError, RuntimeError):
    """An MCP server cannot be reached, started or used; the message says which and why.
    One line in a notebook and on the command line (:class:`PlanbookError`'s short traceback)."""


class MCPServerNotFound(MCPError, FileNotFoundError):
    """A stdio server's command is not installed here: the message says how to install it."""

    #: servers whose package on the index has the command's name
    KNOWN = {"mcp-server-time": "mcp-server-time", "mcp-server-git": "mcp-server-git",
             "mcp-server-fetch": "mcp-server-fetch"}
    #: the servers the tutorials use (``planbook[tutorials]`` installs them)
    TUTORIALS = frozenset({"mcp-server-time"})

    def __init__(self, label: str, program: str) -> None:
        name = os.path.basename(program)
        package = self.KNOWN.get(name)
        also = ' (or pip install "planbook[tutorials]", which has it)' if name in self.TUTORIALS else ""
        how = (f"pip install {package}{also}" if package
               else "install that server (its own instructions say how: pip, uv tool or npm), or give the full path "
                    "of its command")
        super().__init__(f"the MCP server {label} is not installed here (no command {program!r} on PATH): {how}")
        self.program = program


class OTelMissing(PlanbookError, ImportError):
    """The OpenTelemetry API/SDK is not installed."""


class UpstreamCrash(PlanbookError, RuntimeError):
    """The seed's code raises here; ``upstream`` is the exception it raises (same type and message).

    Not a :class:`~planbook.PlanError`: nothing retries it, because upstream does not.
    """

    def __init__(self, upstream: BaseException, where: str = "") -> None:
        self.upstream = upstream
        self.where = where
        super().__init__(f"upstream raises here: {self.described}" + (f" ({where})" if where else ""))

    @property
    def described(self) -> str:
        """The upstream exception as ``"Type: message"``."""
        text = str(self.upstream)
        return f"{type(self.upstream).__name__}: {text}" if text else type(self.upstream).__name__
