"""planbook: plan-and-execute agents you can read, run, break, replan and diff in a notebook.

``import planbook`` stays light: the notebook views, the magics and the model layer
(``openai``) are imported only when used.
"""

from __future__ import annotations

from typing import Any

# compat is imported for its effect: the seed designs register their plan formats and strategy= with the layers below
from . import compat as _compat  # noqa: F401  (used only for its registrations)
from .data.diff import diff_plans
from .data.errors import (
    CassetteError,
    CassetteMismatch,
    CellPlanError,
    ForkError,
    LLMConfigError,
    MCPError,
    MCPServerNotFound,
    ModelCallError,
    NothingToResume,
    OTelMissing,
    PlanbookError,
    PlanError,
    PlanningError,
    Problem,
    ResumeError,
    RunClaimed,
    RunEnded,
    RunFailed,
    RunNotFound,
    SecretError,
    StoreError,
    StoreFormatError,
    UpstreamCrash,
)
from .data.models import Event, Plan, PlanDiff, RunResult, Status, Step, Usage
from .data.secret import Secret
from .engine.approvals import ApprovalContext, Decision
from .engine.resume import load_run, resume, runs
from .engine.runner import Runner, RunState, run
from .notebook.handle import RunHandle, fork, start
from .spec.validate import validate_plan
from .views.text import format_diff, format_plan, format_result
from .workers.agents import Agent, AgentContext, AgentReply, FunctionAgent, ScriptedAgent
from .workers.planners import Planner, PlanningContext, ScriptedPlanner, make_plan
from .workers.tools import Tool, Toolbox, default_toolbox, tool

__all__ = [
    "Agent", "AgentContext", "AgentReply", "CellPlanError", "Event", "FunctionAgent", "Plan", "PlanDiff", "PlanError", "PlanbookError",
    "ResumeError", "load_run", "resume", "runs", "fork", "diff_runs", "ForkError", "ApprovalContext", "Decision", "RunEnded", "RunHandle", "start",
    "Planner", "PlanningContext", "PlanningError", "Problem", "RunFailed", "RunResult", "RunState", "Runner",
    "ScriptedAgent", "ScriptedPlanner", "Status", "Step", "Tool", "Toolbox", "Usage", "default_toolbox",
    "diff_plans", "format_diff", "format_plan", "format_result", "make_plan", "run", "tool", "validate_plan",
    "LLMPlanner", "LLMAgent", "compare", "load_ipython_extension",
    # every error planbook raises on purpose (planbook.data.errors)
    "CassetteError", "CassetteMismatch", "LLMConfigError", "MCPError", "MCPServerNotFound", "ModelCallError",
    "NothingToResume", "OTelMissing", "RunClaimed", "RunNotFound", "SecretError", "StoreError", "StoreFormatError",
    "UpstreamCrash",
    # a secret as a value: only the call boundary sees what it holds (planbook.data.secret)
    "Secret",
]
# PlanView and watch are importable by name but not star-imported: they load ipywidgets

_LAZY = {
    "LLMPlanner": ("planbook.llm", "LLMPlanner"),
    "LLMAgent": ("planbook.llm", "LLMAgent"),
    "PlanView": ("planbook.views.widget", "PlanView"),
    "watch": ("planbook.views.show", "watch"),
    "compare": ("planbook.compat.compare", "compare"),
    "diff_runs": ("planbook.data.rundiff", "diff_runs"),
}


def __getattr__(name: str) -> Any:
    """Heavy parts (the model layer imports openai) load on first use; so does ``__version__``
    (its one home, :mod:`planbook.data.version`, looks it up when first read)."""
    if name == "__version__":
        from .data.version import version

        return version()
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'planbook' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


def _otel_from_environment(runner: Any) -> None:
    """``PLANBOOK_OTEL=1``: trace runs; OpenTelemetry is imported at the first run, not here."""
    from .engine.eventbus import RUN_HOOKS
    from .otel import instrument_from_environment

    RUN_HOOKS.pop("otel-environment", None)
    instrument_from_environment()
    if "otel" in RUN_HOOKS:
        RUN_HOOKS["otel"](runner)


def _watch_environment() -> None:
    import os

    if os.environ.get("PLANBOOK_OTEL", "").strip().lower() not in ("", "0", "false", "no", "off"):
        from .engine.eventbus import RUN_HOOKS

        RUN_HOOKS["otel-environment"] = _otel_from_environment


_watch_environment()


def _guard_the_kernel() -> None:
    """Inside a Jupyter kernel, its one exit (the session's ``send``) passes the checkpoint from
    the first ``import planbook``, not only from the first view displayed: a secret a Secret or a
    run made known is ``***`` in whatever the kernel sends after (planbook.views.publish)."""
    import sys

    if "ipykernel" in sys.modules:
        from .views.publish import ensure_checkpoint

        ensure_checkpoint()


_guard_the_kernel()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext planbook``: register the ``%%plan`` and ``%run_plan`` magics."""
    from .notebook.magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook.magics import unregister

    unregister(ipython)
