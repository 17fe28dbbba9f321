"""``planbook.compare``: one deterministic scenario through several designs, side by side.

Each design gets fresh scripted agents and a scripted model from the scenario; every
agent call is recorded underneath the design's wrappers, so the table can say which
steps were marked completed although their agent reported a failure (false ✓ marks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..data.models import Plan, RunResult, Status
from ..outbound import html_text
from ..workers.agents import AgentContext, AgentReply
from .scenarios import Scenario, trip
from .strategies import strategy_named

__all__ = ["COLUMNS", "Comparison", "compare", "DEFAULT_STRATEGIES"]

DEFAULT_STRATEGIES = ("planbook", "lesson", "openmanus", "openmanus:faithful", "agenticseek", "agenticseek:faithful")
#: (record key, column heading)
COLUMNS = (
    ("strategy", "strategy"),
    ("executed", "steps executed"),
    ("model_calls", "model calls"),
    ("prompt_tokens", "prompt tokens"),
    ("replans", "replans"),
    ("status", "final status"),
    ("false_marks", "false ✓"),
    ("on_failed_need", "ran on a failed need"),
    ("answers", "answers returned"),
)


class _Recorded:
    """An agent whose every reply is written down (under the design's wrappers): ``ok`` per step id."""

    def __init__(self, agent: Any, ledger: dict[str, bool]) -> None:
        self.agent, self.ledger = agent, ledger
        self.name, self.description = agent.name, getattr(agent, "description", "")

    def __call__(self, task: str, context: AgentContext) -> Any:
        step_id = context.step.id if context.step is not None else "?"
        try:
            reply = self.agent(task, context)
        except BaseException:
            self.ledger[step_id] = False
            raise
        self.ledger[step_id] = not (isinstance(reply, AgentReply) and not reply.ok)
        return reply


@dataclass
class Comparison:
    """The comparison table: ``str()`` for text, ``_repr_html_`` in a notebook, ``records()`` for pandas.

    ``results`` keeps each run's :class:`~planbook.RunResult` by strategy label.
    """

    scenario: str
    rows: list[dict[str, Any]]
    results: dict[str, RunResult]

    def records(self) -> list[dict[str, Any]]:
        """One dict per strategy (``pandas.DataFrame(table.records())``)."""
        return [dict(row) for row in self.rows]

    def __getitem__(self, label: str) -> dict[str, Any]:
        for row in self.rows:
            if row["strategy"] == label:
                return dict(row)
        raise KeyError(f"no strategy {label!r} in this comparison; it has {', '.join(r['strategy'] for r in self.rows)}")

    def __str__(self) -> str:
        cells = [[heading for _, heading in COLUMNS]] + [[str(row[key]) for key, _ in COLUMNS] for row in self.rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]

        def line(values: list[str]) -> str:
            return "  ".join(v.ljust(w) if i in (0, 5) else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths))).rstrip()

        rule = "  ".join("-" * w for w in widths)
        return "\n".join([f"scenario: {self.scenario}", line(cells[0]), rule, *(line(c) for c in cells[1:])])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html_text(h)}</th>" for _, h in COLUMNS)
        body = "".join(
            "<tr>" + "".join(
                f"<td style=\"text-align:{'left' if k in ('strategy', 'status') else 'right'}\">{html_text(str(r[k]))}</td>"
                for k, _ in COLUMNS) + "</tr>"
            for r in self.rows)
        return (f"<table><caption>scenario: {html_text(self.scenario)}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")


def _label(entry: str) -> tuple[str, bool]:
    """``"openmanus"`` or ``"openmanus:faithful"`` → (strategy, faithful)."""
    if not isinstance(entry, str):
        raise TypeError(f"a strategy to compare is a name such as 'openmanus' or 'openmanus:faithful', got {entry!r}")
    name, _, mode = entry.partition(":")
    if mode not in ("", "faithful"):
        raise ValueError(f"{entry!r}: after the strategy's name only ':faithful' may follow")
    return strategy_named(name).name, mode == "faithful"


def compare(
    goal_or_plan: str | Plan | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    scenario: Scenario | None = None,
    **options: Any,
) -> Comparison:
    """Run ``scenario`` (default :func:`~planbook.compat.scenarios.trip`) through each strategy.

    ``goal_or_plan``: a goal in words (each design makes its own first plan; default the
    scenario's goal) or a plan (each design is given it). ``strategies``: names, with
    ``":faithful"`` for a design's pitfalls (``"agenticseek:faithful"``). ``options`` go to
    every run (``max_steps``, ``max_replans``...).
    """
    scenario = scenario if scenario is not None else trip()
    start: str | Plan = scenario.goal if goal_or_plan is None else goal_or_plan
    planned = not isinstance(start, Plan)
    entries = [_label(entry) for entry in strategies] if not isinstance(strategies, str) else [_label(strategies)]
    if not entries:
        raise ValueError(f"nothing to compare: name at least one strategy ({', '.join(DEFAULT_STRATEGIES)})")
    from ..engine.runner import run

    rows, results = [], {}
    for name, faithful in entries:
        label = f"{name}:faithful" if faithful else name
        setup = scenario.setup(name, faithful, planned=planned)
        ledger: dict[str, bool] = {}
        agents = {key: _Recorded(agent, ledger) for key, agent in setup.pop("agents").items()}
        seeds: dict[str, Any] = {}
        if name == "agenticseek" and faithful and setup.get("planner") is not None:
            from .agenticseek import AgenticSeekPlanner

            if not isinstance(setup["planner"], AgenticSeekPlanner):  # kept, to read the needs as written
                setup["planner"] = AgenticSeekPlanner(setup["planner"], faithful=True,
                                                      agents={k: a.description for k, a in agents.items()})
            seeds = setup["planner"].seeds
        result = run(start.copy_plan() if isinstance(start, Plan) else start, strategy=name, faithful=faithful,
                     agents=agents, **setup, **options)
        results[label] = result
        rows.append(_row(label, result, ledger, strategy_named(name).returns(result, faithful), seeds))
    return Comparison(scenario=scenario.name, rows=rows, results=results)


def _soft_needs(step_id: str, plan_ids: list[str], seeds: dict[str, Any]) -> list[str]:
    """The steps a faithfully read AgenticSeek step takes results from: those whose id as written
    is in its need as written (upstream's typing: ``"12"`` names ``"1"`` and ``"2"``)."""
    seed = seeds.get(step_id)
    if seed is None or not seed.has_need:
        return []
    try:
        wanted = list(seed.need)
        return [i for i in plan_ids if i in seeds and any(w == seeds[i].id for w in wanted)]
    except TypeError:  # a need upstream cannot iterate: the run ended before this step
        return []


def _row(label: str, result: RunResult, ledger: dict[str, bool], answers: dict[str, Any],
         seeds: dict[str, Any] | None = None) -> dict[str, Any]:
    by_id = {s.id: s for s in result.plan.steps}
    ids = list(by_id)
    false_marks = sum(1 for s in result.plan.steps if s.status is Status.completed and ledger.get(s.id) is False)
    dead = (Status.failed, Status.skipped, Status.blocked)
    on_failed_need = sum(
        1 for s in result.plan.steps
        if s.attempts and any(n in by_id and by_id[n].status in dead
                              for n in (_soft_needs(s.id, ids, seeds) if seeds else s.needs))
    )
    return {
        "strategy": label,
        "executed": result.executions,
        "model_calls": result.usage.calls,
        "prompt_tokens": result.usage.prompt_tokens,
        "replans": result.replans,
        "status": f"{result.status} ({result.reason})",
        "false_marks": false_marks,
        "on_failed_need": on_failed_need,
        "answers": len(answers),
    }

