"""planbook: plan-and-execute agents you can read, run, break, replan and diff in a notebook.

``import planbook`` stays light: the notebook views, the magics and the model layer
(``openai``) are imported only when used.
"""

from __future__ import annotations

from inspect import Parameter
from typing import Any, Literal, overload

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
from .engine.background import RunHandle
from .engine.background import start_runner as _start_runner
from .engine.fork import fork as _fork_run
from .engine.resume import load_run, resume, runs
from .engine.runner import Runner, run, takes_runner_options
from .engine.state import RunState
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
    "LLMPlanner", "LLMAgent", "compare", "load_ipython_extension", "replay",
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
    "replay": ("planbook.views.replay", "replay"),
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


def _in_a_kernel() -> bool:
    """True when an IPython kernel runs this process: IPython is loaded already and its shell has a
    kernel. Read from ``sys.modules`` so a script never imports IPython to find out it is not in one."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def _started(runner: Runner, view: bool | None) -> RunHandle:
    """Start ``runner`` in the background. In a notebook kernel (or when ``view=True`` asks for the
    live view) the notebook's front, displayed as the live view; anywhere else the engine's handle,
    and neither ``planbook.notebook`` nor IPython is imported."""
    if view or _in_a_kernel():
        from .notebook.handle import start_runner  # the notebook front: a kernel runs (or view=True asked)

        return start_runner(runner, view=view)
    return _start_runner(runner)


@takes_runner_options(Parameter("view", Parameter.KEYWORD_ONLY, default=None, annotation="bool | None"),
                      returns=RunHandle)
def start(plan: Plan | str, *, view: bool | None = None, **options: Any) -> RunHandle:
    """Start a run in the background and return its :class:`RunHandle` at once.

    Takes the options of :func:`planbook.run` (``approve=``, ``approve_timeout=``, ``parallel=``,
    ``store=``, ...). ``view``: show the live view when the handle is displayed (default: in a
    notebook kernel, where widgets run; ``True`` outside one is an error). Steps that ask for
    approval wait for ``handle.approve(id)`` (or the view's buttons) instead of needing a callable.
    """
    return _started(Runner(plan, **options), view)


@overload
def fork(run: Any, *, at: Any = None, background: Literal[False] = False, view: bool | None = None,
         **options: Any) -> RunResult: ...
@overload
def fork(run: Any, *, at: Any = None, background: Literal[True], view: bool | None = None,
         **options: Any) -> RunHandle: ...
def fork(run: Any, *, at: Any = None, background: bool = False, view: bool | None = None,
         **options: Any) -> RunResult | RunHandle:
    """Fork a run at a step and run the child: what if this step had other arguments, had returned
    something else, or the plan were another?

    ``run``: a :class:`RunResult`, a run id, or a plan name meaning its latest stored run (``store=``:
    where it was saved; a result in memory is forked in memory). ``at``: the step to fork at.
    ``args={...}`` runs it again with these arguments changed; ``result=VALUE`` pins what it returned
    without running it; ``plan=`` takes an edited plan (the fork points are the steps whose call
    changed); no edit is a control fork (what differs then is replay noise). The steps the change
    cannot reach are kept: not run again, their results read from the parent (``reuse=``:
    ``"independent"`` (default), ``"identical"`` also keeps a dependent whose resolved call is
    unchanged, ``"ancestors"`` keeps only the fork point's needs, as LangGraph's fork does).
    ``tools=``, ``agents=``, ``planner=``, ``rerun=`` (steps whose tool is ``idempotent=False`` that
    may run again) and the options of :func:`planbook.run` (default: the parent's). Returns the
    child's :class:`RunResult` (``result.parent``, ``result.lineage``), or with ``background=True``
    a :class:`RunHandle` as :func:`planbook.start` gives (``view=`` as there). Compare with
    :func:`planbook.diff_runs`.
    """
    if not background:
        return _fork_run(run, at=at, **options)
    return _started(_fork_run(run, at=at, start=False, **options), view)


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
