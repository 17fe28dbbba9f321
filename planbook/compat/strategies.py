"""Strategies: each design of the seeds as a bundle of the runner's options.

``planbook.run(plan, strategy="openmanus")`` (and ``Runner``, ``%run_plan --strategy``,
``planbook run --strategy``) asks :func:`adjust` for the options of that design: its
agents wrapped, its planner, its review after each step, its failure policy. The runner
itself stays one engine; a design is only how it is driven.

============  ======================  ==========================  =========================  ==========================
strategy      when it replans         what counts as completed    how results flow           routing
============  ======================  ==========================  =========================  ==========================
planbook      after a failure         the executor says it        a step gets its needs'     the step's tool or agent
              (policy ``replan``)     succeeded                   results; parallel allowed
lesson        after a failure, from   as planbook                 as planbook, one step at   the step's tool or agent
              the cursor (seed 004)                               a time, in plan order
openmanus     after a failure, with   the agent says it           the agent sees the plan    ``[TAG]`` in the step text;
              the planning tool       succeeded (a FINISHED       text and its own step      untagged → the first agent
              (``update``)            agent ends the run)
agenticseek   after every step (the   the agent says it           a step gets only its       the plan's ``agent`` field
              review; ``NO_UPDATE``   succeeded                   ``need`` results, each
              keeps the plan)                                     with "succeeded/failed"
============  ======================  ==========================  =========================  ==========================

``faithful=True`` reproduces a design's pitfalls on purpose (see :attr:`Strategy.pitfalls`);
``planbook`` and ``lesson`` have none, so ``faithful`` with them is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..data.errors import PlanError, Problem, closest
from ..data.models import Plan, RunResult, Status, Step
from ..engine.config import DEFAULTS
from ..spec.formats import is_plan_spec
from ..workers.agents import AgentContext, as_agents
from ..workers.planners import planner_steps, tell_planner

if TYPE_CHECKING:
    from ..engine.runner import Runner
    from ..workers.planners import PlanningContext
    from .agenticseek import AgenticSeekPlanner
    from .openmanus_flow import PlanningFlow

__all__ = ["STRATEGIES", "Options", "Strategy", "adjust", "flow_of", "strategy_named"]


@dataclass
class Options:
    """The runner's options a strategy may change (the rest pass through untouched)."""

    plan: Any
    planner: Any = None
    tools: Any = None
    agents: Any = None
    on_failure: Any = None
    retries: int | None = None
    parallel: int = DEFAULTS.parallel
    after_step: Any = None
    on_event: Any = None
    #: called with the :class:`~planbook.Runner` once it is built: a wrapper that reads the run's
    #: plan, a review that reports its model calls as the run's ``llm.call`` events
    attach: list[Callable[[Runner], None]] = field(default_factory=list)


@dataclass(frozen=True)
class Strategy:
    """One design: what it does, the pitfalls ``faithful`` reproduces, and how it sets up a run."""

    name: str
    design: str
    replans: str
    completed: str
    results: str
    routing: str
    #: what ``faithful=True`` reproduces (empty: the design has no pitfall to show)
    pitfalls: tuple[str, ...]
    build: Callable[[Options, bool], Options]
    #: what the design hands back as its answer(s): ``{step id: answer}``
    returns: Callable[[RunResult, bool], dict[str, Any]]

    def describe(self, faithful: bool = False) -> str:
        lines = [f"{self.name}: {self.design}", f"  replans:   {self.replans}", f"  completed: {self.completed}",
                 f"  results:   {self.results}", f"  routing:   {self.routing}"]
        if self.pitfalls:
            lines.append("  faithful=True reproduces:" if faithful else "  fixed by default (faithful=True shows them):")
            lines += [f"    - {p}" for p in self.pitfalls]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def strategy_named(name: str) -> Strategy:
    """The strategy called ``name``; an unknown name is an error naming the known ones."""
    if not isinstance(name, str):
        raise TypeError(f"strategy must be a name ({', '.join(STRATEGIES)}), got {type(name).__name__}")
    try:
        return STRATEGIES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}{closest(name, STRATEGIES)}; the strategies are "
                         f"{', '.join(STRATEGIES)}") from None


def adjust(strategy: str | None, faithful: bool = False, **options: Any) -> Options:
    """The runner's options for ``strategy`` (``None``: planbook), with its pitfalls if ``faithful``."""
    chosen = strategy_named("planbook" if strategy is None else strategy)
    if not isinstance(faithful, bool):
        raise TypeError(f"faithful must be True or False, got {faithful!r}")
    if faithful and not chosen.pitfalls:
        with_pitfalls = [s.name for s in STRATEGIES.values() if s.pitfalls]
        raise ValueError(f"strategy {chosen.name!r} has no pitfalls to reproduce, so faithful=True does nothing "
                         f"there: use it with {' or '.join(with_pitfalls)}, or drop faithful")
    return chosen.build(Options(**options), faithful)


# ----------------------------------------------------------------- helpers
def _chain(on_failure: str | Sequence[str] | None) -> tuple[str, ...]:
    if on_failure is None:
        return ()
    return (on_failure,) if isinstance(on_failure, str) else tuple(on_failure)


def _handlers(on_event: Any) -> list[Any]:
    return [] if on_event is None else [on_event] if callable(on_event) else list(on_event)


def _model(planner: Any) -> Any:
    """``planner`` as a chat model when it is one (a ScriptedModel, an LLMPlanner's client...), else None."""
    if planner is None:
        return None
    from .model import as_chat_model

    try:
        return as_chat_model(planner)
    except TypeError:
        return None  # a planbook planner: a function (goal, history, last_error) -> steps


def _named_agents(options: Options, strategy: str) -> Any:
    agents = as_agents(options.agents)
    if not agents:
        raise ValueError(f"strategy {strategy!r} hands every step to an agent: pass agents=... "
                         "(a {name: agent} mapping or a list of agents)")
    return agents


def _written_plan(plan: Plan | str) -> Plan:
    return plan if isinstance(plan, Plan) else Plan.parse(plan)


def _is_goal(options: Options) -> bool:
    return isinstance(options.plan, str) and options.planner is not None and not is_plan_spec(options.plan)


# ---------------------------------------------------------------- planbook
def _planbook(options: Options, faithful: bool) -> Options:
    return options


def _outputs(result: RunResult, faithful: bool) -> dict[str, Any]:
    return dict(result.outputs)


# ------------------------------------------------------------------ lesson
LESSON_POLICIES = ("abort", "skip", "replan")


def _lesson(options: Options, faithful: bool) -> Options:
    if options.parallel != 1:
        raise ValueError("strategy 'lesson' runs one step at a time, in plan order (the lesson's executor is "
                         "serial): drop parallel, or use strategy 'planbook'")
    other = [p for p in _chain(options.on_failure) if p not in LESSON_POLICIES]
    if other:
        raise ValueError(f"strategy 'lesson' knows the failure policies {', '.join(LESSON_POLICIES)}; "
                         f"{', '.join(other)} is planbook's: drop it, or use strategy 'planbook'")
    return options


# --------------------------------------------------------------- openmanus
def _route(flow: PlanningFlow, steps: Iterable[Step], plan: Plan | None = None) -> list[Step]:
    """Steps routed as OpenManus does: the ``[TAG]`` of an agent step names its agent, untagged steps
    go to the primary agent (tool steps stay as they are); every routing problem at once."""
    from .openmanus_text import step_text

    routed, problems = [], []
    for index, step in enumerate(steps):
        if step.tool is not None:
            routed.append(step)
            continue
        try:
            key = flow.route(step_text(step), index)
        except PlanError as exc:
            problems += [Problem(p.message, step=step.id, code=p.code, line=plan.line_of(step.id) if plan else None)
                         for p in exc.problems]
            continue
        routed.append(step.model_copy(update={"agent": key}))
    if problems:
        raise PlanError(problems)
    return routed


class _RoutedPlanner:
    """A planbook planner driven as OpenManus: its steps are routed by tag and written into the
    planning tool, so the agents' plan text and ``get`` show the plan the run follows."""

    def __init__(self, flow: PlanningFlow, planner: Any) -> None:
        self.flow, self.planner = flow, planner
        self.context: PlanningContext | None = None

    def set_context(self, context: PlanningContext) -> None:
        self.context = context
        tell_planner(self.planner, context)

    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        context, self.context = self.context, None
        steps = _route(self.flow, planner_steps(self.planner(goal, history, last_error)))
        kept = [s for s in context.plan.steps if s.id in context.kept_ids] if context and context.plan else []
        base = context.plan if context is not None and context.plan is not None else Plan(id=self.flow.plan_id, goal=goal)
        self.flow.tool.write(Plan(id=self.flow.plan_id, goal=goal, title=base.title, steps=[*kept, *steps]),
                             plan_id=self.flow.plan_id)
        return steps

    def __repr__(self) -> str:
        return f"<{self.planner!r} routed as OpenManus>"


def _openmanus(options: Options, faithful: bool) -> Options:
    from .openmanus_flow import OpenManusPlanner, PlanningFlow

    agents = _named_agents(options, "openmanus")
    model = _model(options.planner)
    flow = PlanningFlow(agents, planner=model, faithful=faithful)
    if not _is_goal(options):
        plan = _written_plan(options.plan)
        flow.plan_id = plan.id
        routed = plan.copy_plan()
        routed.steps = _route(flow, routed.steps, plan)
        flow.tool.write(routed, plan_id=plan.id)
        options.plan = routed
    if model is not None:
        planner: Any = OpenManusPlanner(flow)
    else:
        planner = None if options.planner is None else _RoutedPlanner(flow, options.planner)
    adjusted = flow.runner_options(planner, {"on_failure": options.on_failure, "on_event": options.on_event})
    options.planner, options.agents = adjusted["planner"], adjusted["agents"]
    options.on_failure, options.on_event = adjusted["on_failure"], adjusted["on_event"]
    options.retries = adjusted.get("retries", options.retries)
    return options


def _every_answer(result: RunResult, faithful: bool) -> dict[str, Any]:
    """OpenManus's ``execute()`` text holds every execution's result, in order."""
    return {step.id: step.result for step in result.history}


# ------------------------------------------------------------- agenticseek
class _Review:
    """``after_step`` for AgenticSeek: the planner is asked after every step whether the rest changes."""

    def __init__(self, planner: AgenticSeekPlanner) -> None:
        self.planner = planner
        self.runner: Runner | None = None
        #: faithful: every answer by its id as written (upstream's agents_work_result: a repeated id overwrites)
        self.results: dict[Any, str] = {}

    def attach(self, runner: Runner) -> None:
        self.runner = runner

    def _emit(self, kind: str, **data: Any) -> None:
        if self.runner is not None:  # the review's model calls are the run's, in its usage and views
            self.runner.emit(kind, **data)  # type: ignore[arg-type]

    def __call__(self, goal: str, plan: Plan, step: Step) -> list[Step] | None:
        succeeded = step.status is Status.completed
        answer = step.result if succeeded or step.result is not None else step.error
        seed = self.planner.seeds.get(step.id)
        if seed is None:
            return self.planner.review(goal, plan, step.id, answer, succeeded, emit=self._emit)
        from ..data.errors import UpstreamCrash
        from .agenticseek import work_result

        try:
            self.results[seed.id] = work_result(answer, succeeded)
        except TypeError as exc:  # an id that cannot be a key (a list): upstream's loop raises here
            raise UpstreamCrash(exc, f"keeping the answer of task {seed.id!r} by its id") from exc
        new = self.planner.review(goal, plan, step.id, answer, succeeded, emit=self._emit)
        ids = [s.id for s in plan.steps]
        following = new if new is not None else plan.steps[ids.index(step.id) + 1:]
        if following:  # upstream's loop goes on to the next task in array order
            self.planner.before_task(following[0].id, self.results)
        return new

    def seed_prompt(self, step: Step, task: str) -> str | None:
        """Faithful: the prompt upstream builds from the results of the step's need, typed as written.

        A need ``"12"`` is read character by character and an integer id never matches a text
        need. (A need upstream cannot look up, ``null`` or a number, ended the run before this
        step started: :meth:`~planbook.compat.agenticseek.AgenticSeekPlanner.before_task`.)
        None for a step that was not read faithfully.
        """
        from .agenticseek import need_prompt

        seed = self.planner.seeds.get(step.id)
        if seed is None:
            return None
        need = seed.need if seed.has_need else []
        infos = {k: self.results[k] for k in need if k in self.results}
        return need_prompt(task, {str(k): v for k, v in infos.items()})


class _NeedAgent:
    """An agent as AgenticSeek calls it: its prompt holds only the results of the step's ``need``
    ("According to agent N: ..."), each followed by whether that agent succeeded."""

    def __init__(self, agent: Any, review: _Review, limit: int | None) -> None:
        self.agent, self.review, self.limit = agent, review, limit
        self.name = agent.name
        self.description = getattr(agent, "description", "")

    def __call__(self, task: str, context: AgentContext) -> Any:
        from .agenticseek import need_context

        step = context.step
        runner = self.review.runner
        if step is None or runner is None:
            return self.agent(task, context)
        prompt = self.review.seed_prompt(step, task)
        if prompt is None:
            prompt = need_context(step, runner.plan.steps, limit=self.limit)
        inner = AgentContext(goal=context.goal, plan_text=lambda: context.plan_text, step=step, needs=context.needs,
                             emit=context.emit)
        return self.agent(prompt, inner)

    def __repr__(self) -> str:
        return f"<{self.agent!r} given its needs as AgenticSeek does>"


def _agenticseek(options: Options, faithful: bool) -> Options:
    from .agenticseek import AgenticSeekPlanner

    agents = _named_agents(options, "agenticseek")
    if isinstance(options.planner, AgenticSeekPlanner):
        planner = options.planner
    else:
        model = _model(options.planner)
        if model is None:
            raise ValueError("strategy 'agenticseek' asks its planner after every step: pass planner=a model "
                             "(a ScriptedModel, an LLMPlanner, a ModelClient) or an AgenticSeekPlanner")
        planner = AgenticSeekPlanner(model, agents={name: agent.description for name, agent in agents.items()},
                                     faithful=faithful)
    if options.after_step is not None:
        raise ValueError("strategy 'agenticseek' reviews the plan after every step itself: drop after_step")
    if "replan" in _chain(options.on_failure):
        raise ValueError("strategy 'agenticseek' asks the planner after every step, failures included, so "
                         "on_failure 'replan' would ask twice: choose abort, skip, retry or continue")
    if planner.faithful and isinstance(options.plan, str) and not _is_goal(options):
        from .agenticseek_answers import looks_like_answer

        if looks_like_answer(options.plan):  # a written answer, read as upstream reads the model's
            steps = planner.read(options.plan)  # raises UpstreamCrash where upstream's reading raises
            if steps:
                planner.before_task(steps[0].id, {})  # and where its loop raises before the first task
            options.plan = Plan(steps=steps)
    review = _Review(planner)
    limit = None if faithful else planner.answer_limit
    options.planner = planner
    options.agents = {name: _NeedAgent(agent, review, limit) for name, agent in agents.items()}
    options.after_step = review
    if options.on_failure is None:
        # the seed's need is a soft constraint: a failed step's dependents run anyway (continue);
        # planbook's default blocks them, unless the review rewrites them (skip)
        options.on_failure = "continue" if faithful else "skip"
    options.attach.append(review.attach)
    return options


def _last_or_every(result: RunResult, faithful: bool) -> dict[str, Any]:
    """The seed's ``process()`` returns the last executed task's answer only (pitfall 1)."""
    if faithful:
        last = result.history[-1] if result.history else None
        return {last.id: last.result} if last is not None else {}
    return dict(result.outputs)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy(
        name="planbook", design="planbook's fixed design (the default)",
        replans="after a failure, with policy replan (the default with a planner)",
        completed="a step whose tool returned or whose agent said it succeeded",
        results="each step gets its needs' results; independent steps may run in parallel",
        routing="the step's tool or agent, checked before anything runs",
        pitfalls=(), build=_planbook, returns=_outputs,
    ),
    Strategy(
        name="lesson", design="the plan-execute lesson (seed 004): EXEC -> NEXT/REPLAN -> DONE/FAILED",
        replans="after a failure, from the cursor, with the last error (abort, skip or replan)",
        completed="as planbook",
        results="as planbook, one step at a time in plan order",
        routing="the step's tool (or agent)",
        pitfalls=(), build=_lesson, returns=_outputs,
    ),
    Strategy(
        name="openmanus", design="OpenManus's PlanningFlow: the planning tool, [TAG] routing, one agent per step",
        replans="after a failure, the model updates the plan with the planning tool (planbook's addition)",
        completed="the agent says it succeeded; an agent that says FINISHED ends the run",
        results="the agent sees the plan text with marks and its own step",
        routing="the [TAG] in the step text; an untagged step goes to the first agent",
        pitfalls=(
            "an unknown [TAG] goes silently to the first agent",
            "a step is completed whenever the agent returns, whatever it said (false ✓)",
            "a step whose agent raises stays in progress and runs again, until it stops raising or max_steps "
            "runs out; blocked is never written",
            "an agent's step budget carries over from one step to the next",
            "an agent that says FINISHED is never noticed",
            "no planning call: a 3-step default plan",
            "the agent is given the step prompt, the whole plan's text, rather than its task",
        ),
        build=_openmanus, returns=_every_answer,
    ),
    Strategy(
        name="agenticseek", design="AgenticSeek's planner: headline + ```json plan, a review after every step",
        replans="after every step the planner reviews the rest (NO_UPDATE keeps it and costs no replan); "
                "only later steps may change, the plan may grow by one step",
        completed="the agent says it succeeded",
        results="a step gets only its need's results, each with whether that agent succeeded",
        routing="the plan's agent field (matched without regard to case)",
        pitfalls=(
            "need is a soft constraint: a failed step's dependents run anyway (policy continue)",
            "tasks run in array order, ids and needs as written: duplicate ids, a need \"12\" read by character",
            "a review that never parses, or says NO_UPDATE next to a plan, keeps the plan",
            "the planner's memory only grows: every question resends the whole conversation",
            "the planner's example reuses an id",
            "only the last step's answer is returned",
            "where upstream's code raises (a task without agent, a plan that is not a list, a title that is not "
            "text) the run ends there, once, not asked again: \"upstream raises here\"",
        ),
        build=_agenticseek, returns=_last_or_every,
    ),
)}


def flow_of(runner: Runner) -> PlanningFlow:
    """The :class:`~planbook.compat.openmanus_flow.PlanningFlow` behind a run with strategy
    ``openmanus`` (its ``tool`` holds the plan in OpenManus's text: ``flow_of(r).tool.execute(command="get")``)."""
    for agent in runner.agents.values():
        flow = getattr(agent, "flow", None)
        if flow is not None:
            return flow
    raise ValueError(f"this run's strategy is {getattr(runner, 'strategy', 'planbook')!r}: only strategy "
                     "'openmanus' runs through a PlanningFlow")
