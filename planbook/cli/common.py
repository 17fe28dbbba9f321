"""What the command line and ``planbook mcp serve`` share: the exit codes, the errors that are a
usage problem, loading ``module:object`` refs and plan specs, a run's answers, and printing values
through the gate.

Kept apart from :mod:`planbook.cli.app` (the argument parsing and the commands) so the MCP
server uses them without importing the command line, and the command line can start the
server without a circle.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from ..data.errors import PlanbookError, closest
from ..data.models import Plan, RunResult
from ..outbound import RunSecrets, neutralise, plain_gate

#: the command's exit codes: the run completed; it failed or was interrupted; a bad spec or usage
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageProblem(Exception):
    """A command-line mistake: printed with the usage hint, exit code 2."""


#: what a command reports as one line and exit code 2 (a bad spec, flag, ref or ``--store``), and
#: what an MCP tool answers as an error for the client's model to read
USAGE_ERRORS = (PlanbookError, UsageProblem, ValueError, TypeError)


def load_object(ref: str, what: str, *, label: str | None = None) -> Any:
    """``module:object`` (module importable from the current directory) → the object.
    ``label`` starts each error instead of ``--WHAT`` (``mcp serve`` names the ref too)."""
    label = label or f"--{what}"
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UsageProblem(f"{label}: not module:object (e.g. mytools:toolbox)" if label != f"--{what}" else
                           f"{label} takes module:object (e.g. mytools:toolbox), got {ref!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = closest(module_name, _local_modules()) if getattr(exc, "name", None) == module_name else ""
        raise UsageProblem(f"{label}: cannot import module {module_name!r}: {exc}{hint}") from None
    except Exception as exc:  # a SyntaxError or a crash while the module runs: still a usage problem
        raise UsageProblem(f"{label}: importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    obj, where, parts = module, f"module {module_name!r}", attr.split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            public = [name for name in dir(obj) if not name.startswith("_")]
            raise UsageProblem(f"{label}: {where} has no {part!r}{closest(part, public)}")
        obj, where = getattr(obj, part), f"{module_name}:{'.'.join(parts[: i + 1])}"
    return obj


def load_given(ref: str | None, what: str) -> Any:
    """The object a ``--tools``/``--agents``/``--planner`` flag names; None when it is not given."""
    return load_object(ref, what) if ref else None


def read_spec(path: str) -> Plan:
    """The plan spec in the file ``path`` (``-``: standard input); a file that cannot be read is a
    usage problem naming it."""
    if path == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise UsageProblem(f"cannot read plan spec {path!r}: {exc.strerror}") from None
    return Plan.parse(text)


def _local_modules() -> list[str]:
    """Modules importable from the current directory (for "did you mean" on a module name)."""
    try:
        names = os.listdir(os.getcwd())
    except OSError:
        return []
    return [n[:-3] if n.endswith(".py") else n for n in names
            if n.endswith(".py") or os.path.isfile(os.path.join(n, "__init__.py"))]


def printable(value: Any, gate: RunSecrets | None = None) -> str:
    """``str(value)`` through the gate (``gate``: the run's secrets) with its control characters
    shown as escapes; a result whose ``__str__`` raises is described instead (the run is done:
    printing its answers must not turn it into a crash)."""
    hide = (gate or plain_gate()).text
    try:
        return neutralise(hide(str(value)))
    except Exception as exc:
        try:
            text = repr(value)
        except Exception:
            text = f"a {type(value).__name__} object"
        return neutralise(hide(f"{text} (printing it failed: {type(exc).__name__}: {exc})"))


def final_outputs(result: RunResult) -> dict[str, Any]:
    """Results of the completed steps no other step needs: the run's answers.

    (AgenticSeek returns only the last agent's answer; a plan can have several leaves.)
    """
    needed = {n for step in result.plan.steps for n in step.needs}
    gate = result.secrets  # a step that feeds a secret-named argument answers ***
    return {sid: gate.value(sid, value) for sid, value in result.outputs.items() if sid not in needed}


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "USAGE_ERRORS", "UsageProblem", "final_outputs", "load_given",
           "load_object", "printable", "read_spec"]
