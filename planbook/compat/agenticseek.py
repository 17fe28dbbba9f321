"""AgenticSeek's planner: "headline + ```json plan" answers, retries, context by ``need``,
and the review after every step — as pure functions and a planner.

The answer format::

    ## Task 1: I will search for a weather API with the web agent.

    ```json
    {"plan": [{"agent": "Web", "id": "1", "need": [], "task": "Search for weather APIs"},
              {"agent": "Coder", "id": "2", "need": ["1"], "task": "Write the app"}]}
    ```

:func:`parse_answer` reads it whole or rejects it whole (never half a plan): an unknown
agent (matched without regard to case), a missing or empty ``agent``/``id``/``task``, or
invalid JSON is a :class:`~planbook.PlanError` naming every problem. Duplicate ids and
``need`` ids that point forward or nowhere do not stop the parse (the seed's own example
has a duplicate id); they are listed in :attr:`ParsedAnswer.report`.

The replan-after-every-step rules are here as code the runner can call:
:func:`update_prompt` (the seed's review prompt, with the context bounded) and
:func:`review_update` (``NO_UPDATE`` keeps the plan; otherwise only the steps after the
current one may change, and the plan may grow by one step at most — enforced, not only
asked). :func:`all_answers` returns every step's answer, not only the last one's.

``faithful=True`` (:func:`parse_answer`, :class:`AgenticSeekPlanner`) reads and runs answers
as upstream does; every difference from the default is in the table of
``planbook/compat/README.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..data.errors import PlanError, PlanningError, Problem
from ..data.models import Plan, RunResult, Status, Step
from .agenticseek_answers import AGENTS, ParsedAnswer, SeedTask, looks_like_answer, need_report, parse_answer

if TYPE_CHECKING:  # Plan.parse reads answers through this module: it stays free of the model layer
    from ..workers.planners import PlanningContext

# the reader of answers (parse_answer, ParsedAnswer, AGENTS, ...) is planbook.compat.agenticseek_answers
__all__ = [
    "NO_UPDATE", "RETRY_PROMPT", "AgenticSeekPlanner", "all_answers", "last_answer", "need_context", "need_prompt",
    "planner_prompt", "review_update", "update_prompt", "work_result",
]

NO_UPDATE = "NO_UPDATE"
#: The seed's stricter prompt after an answer it could not parse, word for word.
RETRY_PROMPT = ("Failed to parse the tasks. Please write down your task followed by a json plan within ```json. "
                "Do not ask for clarification.")
SUCCEEDED = "Agent succeeded with task."
FAILED = "Agent failed with task (Error detected)."

# ---------------------------------------------------------- context by need
def work_result(answer: Any, success: bool) -> str:
    """What AgenticSeek keeps of a task: the answer and a plain success line."""
    return f"{answer}\n{SUCCEEDED if success else FAILED}"


def need_prompt(task: str, infos: Mapping[str, str]) -> str:
    """The seed's prompt for a task: the needed results ("According to agent N: ..."), then the task."""
    if infos:
        given = "".join(f"- According to agent {need}:\n{info}\n\n" for need, info in infos.items())
    else:
        given = "No needed informations.\n\n"
    return f"You are given informations from your AI friends work:\n{given}Your task is:\n{task}"


def need_context(step: Step, plan: Plan | Sequence[Step], *, limit: int | None = None) -> str:
    """The prompt for an agent ``step``: only the results of its needs, each with whether it succeeded.

    A need that has no result (not run yet, or no such id) says so instead of vanishing.
    ``limit`` shortens each result (``None``: whole, as the seed passes them).
    """
    steps = plan.steps if isinstance(plan, Plan) else list(plan)
    by_id = {s.id: s for s in steps}
    infos = {}
    for need in step.needs:
        done = by_id.get(need)
        if done is None:
            infos[need] = "(no result: no task has this id)"
        elif done.status is Status.completed:
            infos[need] = work_result(_short(done.result, limit), True)
        elif done.status is Status.failed:
            infos[need] = work_result(_short(done.result if done.result is not None else done.error, limit), False)
        else:
            infos[need] = f"(no result: task {need} is {done.status})"
    return need_prompt(step.task, infos)


def _short(value: Any, limit: int | None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def all_answers(result: RunResult) -> list[dict[str, Any]]:
    """Every step's answer in plan order (pitfall 1: the seed returns only the last one)."""
    return [
        {"id": s.id, "agent": s.agent, "task": s.task, "status": s.status.value,
         "answer": s.result if s.status is Status.completed else (s.result if s.result is not None else s.error)}
        for s in result.plan.steps if s.attempts or s.status is not Status.not_started
    ]


def last_answer(result: RunResult) -> Any:
    """What the seed's ``process()`` returns: the last executed task's answer, and nothing else."""
    return result.history[-1].result if result.history else None


# ------------------------------------------------------------------ prompts
def planner_prompt(agents: Mapping[str, str] | Iterable[str] = AGENTS, *, example_ids: Sequence[str] = ("1", "2", "3", "4")) -> str:
    """The planner's system prompt in the seed's format (agents, headlines + ```json plan, an example).

    ``example_ids`` are the example's ids, one task each (four or five); the seed's example
    has five tasks, the fifth reusing ``"3"`` (pitfall 3), which a model tends to copy —
    :data:`SEED_EXAMPLE_IDS` reproduces it.
    """
    described = agents if isinstance(agents, Mapping) else {name: "" for name in agents}
    lines = [f"- {name}: {desc}" if desc else f"- {name}" for name, desc in described.items()]
    a, b, c, d = example_ids[:4]
    example = {"plan": [
        {"agent": "Web", "id": a, "need": [], "task": "Search for reliable weather APIs"},
        {"agent": "Web", "id": b, "need": [a], "task": "Obtain API key from the selected service"},
        {"agent": "File", "id": c, "need": [], "task": "Create and setup a web app folder for a python project"},
        {"agent": "Coder", "id": d, "need": [b, c], "task": "Develop a Python application using the API and key"},
    ]}
    if len(example_ids) > 4:  # the seed's fifth task: a conclusion that needs the others
        example["plan"].append({"agent": "Casual", "id": example_ids[4], "need": [b, c, d],
                                "task": "Sum up what was done to make the weather app and conclude"})
    return (
        "You are a project manager. You do not do the work: you split the user's goal into tasks for these agents:\n"
        + "\n".join(lines)
        + "\n\nFirst write one headline per task (## Task N: ...), then the plan within ```json, for example:\n\n"
        "## Task 1: I will search for available weather api with the help of the web agent.\n\n"
        "## Task 2: I will create an api key for the weather api using the web agent\n\n"
        "## Task 3: I will create the project folder with the file agent\n\n"
        "## Task 4: I will write the application with the coder agent\n\n"
        f"```json\n{json.dumps(example, indent=2)}\n```\n\n"
        "Every task has agent, id, need (the ids whose results it uses) and task. Do not ask for clarification."
    )


#: the ids of the seed's example plan (five tasks; the fifth reuses "3")
SEED_EXAMPLE_IDS = ("1", "2", "3", "4", "3")


def update_prompt(
    goal: str,
    plan: Plan | Sequence[Step],
    current_id: str,
    answer: Any,
    success: bool,
    *,
    limit: int | None = 2000,
    with_plan: bool = True,
    label: str | None = None,
) -> str:
    """The seed's review prompt after task ``current_id``, with its answer shortened to ``limit``
    characters (``None``: whole, as the seed) and the current plan included (``with_plan``), so
    the planner needs no growing memory to rewrite it (pitfall 4)."""
    steps = plan.steps if isinstance(plan, Plan) else list(plan)
    ids = [s.id for s in steps]
    outcome = "success" if success else "failure"
    position = ids.index(current_id) if current_id in ids else len(ids) - 1
    current_id = current_id if label is None else label  # the id as the model wrote it
    following = (f"Next task is: {steps[position + 1].task}." if position + 1 < len(steps)
                 else "No task follow, this was the last step. If it failed add a task to recover.")
    parts = [
        f"Your goal is: {goal}",
        "You previously made a plan, agents are currently working on it.",
        f"The last agent working on task {current_id} did the following work:",
        _short(answer, limit),
        f"Agent {current_id} work was a {outcome} according to system interpreter.",
        following,
        f"If agent work was good: answer {NO_UPDATE}",
        "If agent work is leading to failure: update the plan; if a task failed, add a task to try again or recover.",
        f"You need to rewrite the whole plan, but only change the tasks after task {current_id}.",
        "Make the plan the same length as the original one or with only one additional step.",
    ]
    if with_plan:
        current = {"plan": [{"agent": s.agent, "id": s.id, "need": s.needs, "task": s.task} for s in steps]}
        parts.append(f"The plan now:\n```json\n{json.dumps(current, ensure_ascii=False)}\n```")
    return "\n".join(parts)


# ------------------------------------------------------------------- review
def review_update(
    plan: Plan | Sequence[Step],
    current_step_id: str,
    answer: str,
    *,
    agents: Iterable[str] | Mapping[str, Any] | None = None,
) -> list[Step] | None:
    """Check the planner's answer after step ``current_step_id``.

    A ``NO_UPDATE`` answer keeps the plan: returns ``None`` (not a failure, not a replan).
    Otherwise the answer is a whole plan that must repeat every step up to and including
    the current one unchanged, have at most one step more than the plan, and use ids
    once; returns the steps that replace everything *after* the current step. Anything
    else raises :class:`~planbook.PlanError` naming each problem.
    """
    steps = plan.steps if isinstance(plan, Plan) else list(plan)
    ids = [s.id for s in steps]
    if current_step_id not in ids:
        raise KeyError(f"no step {current_step_id!r} in the plan; its steps are {ids}")
    has_plan = looks_like_answer(answer)
    if NO_UPDATE in answer and not has_plan:
        return None
    if NO_UPDATE in answer:
        raise PlanError([Problem(f"the answer says {NO_UPDATE} and also gives a plan: answer one or the other",
                                 code="ambiguous")])
    new = parse_answer(answer, agents=agents).steps
    cursor = ids.index(current_step_id)
    problems: list[Problem] = []
    if len(new) > len(steps) + 1:
        problems.append(Problem(f"the new plan has {len(new)} tasks; the plan had {len(steps)}: write the same number "
                                f"or one more ({len(steps) + 1} at most)", code="too_long"))
    for position, old in enumerate(steps[: cursor + 1]):
        if position >= len(new):
            problems.append(Problem(f"the new plan drops task {old.id!r}, which is done or running: keep every task up "
                                    f"to task {current_step_id} as it is", step=old.id, code="rewrites_done_step"))
            continue
        got = new[position]
        if (got.id, (got.agent or "").casefold(), got.task, got.needs) != (old.id, (old.agent or "").casefold(), old.task, old.needs):
            problems.append(Problem(f"the new plan changes task {old.id!r} (position {position + 1}), which is done or "
                                    f"running: only the tasks after task {current_step_id} may change",
                                    step=old.id, code="rewrites_done_step"))
    problems += [p for p in need_report(new) if p.code in ("duplicate_id", "unknown_need", "cycle")]
    if problems:
        raise PlanError(problems)
    return [s.fresh() for s in new[cursor + 1:]]


# ------------------------------------------------------------------ planner
class AgenticSeekPlanner:
    """AgenticSeek's planner on planbook: a planbook planner for the first plan (and for a
    replan after a failure) plus :meth:`review`, the question asked after every step.

    An answer that does not parse is asked again with the seed's stricter prompt (with
    the problems listed, unless ``faithful``), ``max_attempts`` answers in all (the seed
    gives up at four); then :class:`~planbook.PlanningError` carries every attempt. With
    ``faithful`` the planner's memory keeps every message (pitfall 4: the context only
    grows) and its example reuses an id (pitfall 3); by default each question starts from
    the system prompt and a bounded request.
    """

    def __init__(
        self,
        model: Any,
        *,
        agents: Mapping[str, str] | Iterable[str] = AGENTS,
        max_attempts: int = 4,
        faithful: bool = False,
        answer_limit: int = 2000,
        system_prompt: str | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        from .model import as_chat_model

        self.model = as_chat_model(model)
        self.agents = dict(agents) if isinstance(agents, Mapping) else {name: "" for name in agents}
        self.max_attempts = max_attempts
        self.faithful = faithful
        self.answer_limit = answer_limit
        self.system_prompt = system_prompt or planner_prompt(
            self.agents, example_ids=SEED_EXAMPLE_IDS if faithful else ("1", "2", "3", "4"))
        #: every message sent or received (only what a question needs is sent, unless faithful)
        self.memory: list[dict[str, Any]] = []
        #: the titles of the last plan read (headlines, or the tasks)
        self.titles: list[str] = []
        #: faithful: each step's id and need as the model wrote them, by planbook step id
        self.seeds: dict[str, SeedTask] = {}
        self._numbered = 0
        self.context: PlanningContext | None = None

    def set_context(self, context: PlanningContext) -> None:
        self.context = context

    def ask(self, prompt: str, *, purpose: str = "plan", allow_no_update: bool = False, emit: Any = None,
            keep_on_failure: bool = False) -> ParsedAnswer | None:
        """One question with retries: a parsed answer, or ``None`` for ``NO_UPDATE`` when allowed.

        With ``faithful``, as upstream's ``make_plan``: any answer containing ``NO_UPDATE``
        ends the question (``None``, or "Failed to parse the tasks." for a first plan), and
        ``keep_on_failure`` makes running out of attempts ``None`` (the plan is kept).
        """
        attempts: list[dict[str, Any]] = []
        start = len(self.memory)
        text = prompt
        for attempt in range(1, self.max_attempts + 1):
            self.memory.append({"role": "user", "content": text})
            sent = self.memory if self.faithful else self.memory[start:]
            answer = self.model.chat([{"role": "system", "content": self.system_prompt}, *sent],
                                     purpose=purpose, attempt=attempt, emit=emit)
            content = answer.content or ""
            self.memory.append({"role": "assistant", "content": content})
            if self.faithful and NO_UPDATE in content:
                if allow_no_update:
                    return None
                raise PlanningError(f"Failed to parse the tasks. (the answer says {NO_UPDATE}: upstream gives up)",
                                    attempts=[*attempts, {"content": content, "problems": [f"says {NO_UPDATE}"]}])
            try:
                if allow_no_update and NO_UPDATE in content and not looks_like_answer(content):
                    return None
                parsed = parse_answer(content, agents=self.agents, faithful=self.faithful)
            except PlanError as exc:
                attempts.append({"content": content, "problems": [str(p) for p in exc.problems]})
                text = RETRY_PROMPT if self.faithful else RETRY_PROMPT + "\nProblems:\n" + "\n".join(
                    f"- {p}" for p in exc.problems)
                continue
            self.titles = parsed.titles
            return parsed
        if keep_on_failure:
            return None
        raise PlanningError(
            f"the planner gave no valid plan in {len(attempts)} attempt(s); last problems: "
            + "; ".join(attempts[-1]["problems"]), attempts=attempts)

    def adopt(self, steps: Sequence[Step], seeds: Sequence[SeedTask], taken: Iterable[str] = ()) -> list[Step]:
        """Steps read with ``faithful``, each with a planbook id no other step of the plan has (the
        id as written when it can be one: ``"3"`` then ``"3_2"`` for a repeat, ``t5`` for an id
        such as ``" 1 "``), and its id and need as written kept in :attr:`seeds`."""
        from ..data.ids import id_problem

        used = set(taken)
        adopted = []
        for step, seed in zip(steps, seeds):
            self._numbered += 1
            written = seed.id if isinstance(seed.id, str) else json.dumps(seed.id) if isinstance(seed.id, int) else ""
            base = written if written and id_problem(written) is None else f"t{self._numbered}"
            new_id, copy = base, 1
            while new_id in used:
                copy += 1
                new_id = f"{base}_{copy}"
            used.add(new_id)
            new = step.model_copy(update={"id": new_id})
            self.seeds[new.id] = seed
            adopted.append(new)
        return adopted

    def before_task(self, step_id: str, results: Mapping[Any, str]) -> None:
        """Faithful: what upstream's loop does with a task before running it, raising where it raises.

        It lower-cases the task's title (a ``task`` that is not text, with no headlines, is a
        title without ``.lower()``) and looks the task's ``need`` up among the answers kept so
        far (``null``, a number or a list in it cannot be looked up). Raises
        :class:`~planbook.UpstreamCrash`; nothing for a step not read faithfully.
        """
        from ..data.errors import UpstreamCrash

        seed = self.seeds.get(step_id)
        if seed is None:
            return
        need = seed.need if seed.has_need else []
        try:
            seed.title.lower()
            {k: results[k] for k in need if k in results}
        except (TypeError, AttributeError) as exc:
            raise UpstreamCrash(exc, f"before running task {seed.id!r}") from exc

    def read(self, answer: str) -> list[Step]:
        """The steps of a written answer, read as this planner reads the model's."""
        parsed = parse_answer(answer, agents=self.agents, faithful=self.faithful)
        self.titles = parsed.titles
        return self.adopt(parsed.steps, parsed.seeds) if self.faithful else parsed.steps

    def __call__(self, goal: str, history: list[Step], last_error: str | None) -> list[Step]:
        context, self.context = self.context, None
        emit = context.emit if context is not None else None
        if last_error is None and (context is None or context.plan is None):
            parsed = self.ask(goal, purpose="plan", emit=emit)
            assert parsed is not None
            if not self.faithful:
                return parsed.steps
            steps = self.adopt(parsed.steps, parsed.seeds)
            self.before_task(steps[0].id, {})  # upstream's loop, before its first task
            return steps
        plan = context.plan if context is not None and context.plan is not None else Plan(steps=history)
        failed = history[-1] if history else None
        prompt = update_prompt(goal, plan, failed.id if failed else "", failed.error if failed else last_error, False,
                               limit=None if self.faithful else self.answer_limit, with_plan=not self.faithful)
        parsed = self.ask(prompt, purpose="replan", emit=emit)
        assert parsed is not None
        kept = set(context.kept_ids) if context is not None else set()
        return [s for s in parsed.steps if s.id not in kept]

    def review(self, goal: str, plan: Plan, current_id: str, answer: Any, success: bool, *, emit: Any = None) -> list[Step] | None:
        """After step ``current_id``: ``None`` to keep the plan (``NO_UPDATE``), else the steps
        that replace those after it, checked by :func:`review_update` (retried like a plan).

        With ``faithful``, as upstream's ``update_plan``: a task whose id is not an integer is
        never reviewed; an answer holding ``NO_UPDATE`` keeps the plan, even with a plan in it;
        four answers that do not parse keep the plan too; otherwise the new plan's tasks after
        the current position replace the rest, unchecked.
        """
        if self.faithful:
            return self._seed_review(goal, plan, current_id, answer, success, emit=emit)
        prompt = update_prompt(goal, plan, current_id, answer, success,
                               limit=None if self.faithful else self.answer_limit, with_plan=not self.faithful)
        attempts: list[dict[str, Any]] = []
        for _ in range(self.max_attempts):
            parsed = self.ask(prompt, purpose="review", allow_no_update=True, emit=emit)
            if parsed is None:
                return None
            text = self.memory[-1]["content"]
            try:
                return review_update(plan, current_id, text, agents=self.agents)
            except PlanError as exc:
                attempts.append({"content": text, "problems": [str(p) for p in exc.problems]})
                prompt = "Your plan was rejected:\n" + "\n".join(f"- {p}" for p in exc.problems) + "\n" + prompt
        raise PlanningError(f"the planner's updates broke the rules {len(attempts)} time(s); last problems: "
                            + "; ".join(attempts[-1]["problems"]), attempts=attempts)

    def _seed_review(self, goal: str, plan: Plan, current_id: str, answer: Any, success: bool, *,
                     emit: Any = None) -> list[Step] | None:
        seed = self.seeds.get(current_id)
        written = seed.id if seed is not None else current_id
        try:
            int(written)
        except (TypeError, ValueError):
            return None  # upstream: int(id) fails, the plan is returned as it is, the model is not asked
        prompt = update_prompt(goal, plan, current_id, answer, success, limit=None, with_plan=False, label=str(written))
        parsed = self.ask(prompt, purpose="review", allow_no_update=True, emit=emit, keep_on_failure=True)
        if parsed is None:
            return None
        ids = [s.id for s in plan.steps]
        cursor = ids.index(current_id)
        return self.adopt(parsed.steps[cursor + 1:], parsed.seeds[cursor + 1:], taken=ids[:cursor + 1])
