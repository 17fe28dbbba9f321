"""planbook: plan-and-execute agents you can read, run, break, replan and diff in a notebook.

``import planbook`` stays light: the notebook views, the magics and the model layer
(``openai``) are imported only when used.
"""

from __future__ import annotations

from typing import Any

from .agents import Agent, AgentContext, AgentReply, FunctionAgent, ScriptedAgent
from .diff import diff_plans
from .errors import PlanError, PlanningError, Problem, RunFailed
from .models import Event, Plan, PlanDiff, RunResult, Status, Step, Usage
from .planners import Planner, PlanningContext, ScriptedPlanner
from .planners import make_plan
from .runner import Runner, RunState, run
from .textview import format_diff, format_plan, format_result
from .tools import Tool, Toolbox, default_toolbox, tool
from .validate import validate_plan

__version__ = "0.1.0"

__all__ = [
    "Agent", "AgentContext", "AgentReply", "Event", "FunctionAgent", "Plan", "PlanDiff", "PlanError",
    "Planner", "PlanningContext", "PlanningError", "Problem", "RunFailed", "RunResult", "RunState", "Runner",
    "ScriptedAgent", "ScriptedPlanner", "Status", "Step", "Tool", "Toolbox", "Usage", "default_toolbox",
    "diff_plans", "format_diff", "format_plan", "format_result", "make_plan", "run", "tool", "validate_plan",
    "LLMPlanner", "LLMAgent", "load_ipython_extension",
]
# PlanView and watch are importable by name but not star-imported: they load ipywidgets

_LAZY = {
    "LLMPlanner": ("planbook.llm", "LLMPlanner"),
    "LLMAgent": ("planbook.llm", "LLMAgent"),
    "PlanView": ("planbook.views.widget", "PlanView"),
    "watch": ("planbook.views.live", "watch"),
}


def __getattr__(name: str) -> Any:
    """Heavy parts (the model layer imports openai) load on first use."""
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'planbook' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext planbook``: register the ``%%plan`` and ``%run_plan`` magics."""
    from .magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unregister

    unregister(ipython)
