"""The seed designs, runnable on planbook: OpenManus's planning tool and flow, AgenticSeek's planner.

Each design keeps its formats (the ``planning`` function schema, the plan text, the
"headline + ```json plan" answer) and, by default, planbook's fixes of its pitfalls;
``faithful=True`` reproduces the seed's behaviour on purpose, for teaching. Every fix is
listed in one table: ``planbook/compat/README.md``.

Import the submodules (``planbook.compat.openmanus``, ``planbook.compat.agenticseek``);
nothing here imports ``openai``: a model is reached through :mod:`planbook.llm`, lazily.
Importing this package registers, with the layers below, the plan formats the seeds write
(:func:`planbook.spec.formats.register_format`) and ``strategy=`` (:func:`planbook.engine.runner.register_strategies`);
the modules behind them load on first use.
"""

from __future__ import annotations

from typing import Any

from ..data.models import Plan
from ..engine.runner import register_strategies
from ..spec.formats import register_format


def _looks_like_answer(text: str) -> bool:
    from .agenticseek_answers import looks_like_answer

    return looks_like_answer(text)


def _read_answer(text: str) -> Plan:
    from .agenticseek_answers import plan_from_answer

    return plan_from_answer(text)


def _looks_like_plan_text(text: str) -> bool:
    return text.lstrip().startswith("Plan: ") and "(ID: " in text.lstrip().split("\n", 1)[0]


def _read_plan_text(text: str) -> Plan:
    from .openmanus_text import parse_plan_text

    return parse_plan_text(text)


def _adjust(strategy: str | None, faithful: bool, **options: Any) -> Any:
    from .strategies import adjust

    return adjust(strategy, faithful, **options)


register_format("agenticseek", _looks_like_answer, _read_answer)
register_format("openmanus", _looks_like_plan_text, _read_plan_text)
register_strategies(_adjust)
