"""Errors a user can act on: each names the step, the problem and what to do.

Every error planbook raises on purpose derives from :class:`PlanbookError`, and also from
the built-in class a caller would expect, so ``except ValueError`` keeps working::

    PlanbookError
    ├── PlanError (ValueError)            a plan or a planner's answer is invalid; .problems lists each
    │   └── CellPlanError                 the same, pointing into a %%plan cell (planbook.notebook.magics)
    ├── PlanningError (RuntimeError)      a planner could not make a plan; carries the attempts
    ├── RunFailed (RuntimeError)          a run ended failed and the caller asked for an exception
    ├── ResumeError (RuntimeError)        a stored run cannot continue as it is (planbook.resume)
    ├── StoreError (RuntimeError)         a run store cannot do what was asked (planbook.store)
    │   ├── StoreFormatError              the file is damaged, not a run store, or newer
    │   └── RunNotFound (LookupError)     no run with that id
    ├── LLMConfigError (RuntimeError)     the model settings are missing or wrong (planbook.llm)
    │   └── CassetteError                 a cassette file is damaged or refused
    │       └── CassetteMismatch          a replayed request differs from the recording
    └── ModelCallError (RuntimeError)     the model server failed or answered something else

``RunInterrupted`` (planbook.notebook.magics) is a ``KeyboardInterrupt``, so "Run all" stops there.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..outbound import shown_error


class PlanbookError(Exception):
    """The base of every error planbook raises on purpose (see the module docstring)."""

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
            return f"invalid plan: {self.problems[0]}"
        lines = [f"invalid plan ({len(self.problems)} problems):"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.problems]


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
