"""Exercises that check themselves: a course's checking cell reads a run's result and says,
in words a student understands, what is right and what is still missing.

A check reads the :class:`~planbook.data.models.RunResult` (its status, steps, history,
events and revisions), never the student's code, so any way of solving an exercise counts.
"Not yet" is an answer, not an error: :func:`check` never raises for it, so a notebook with
its exercises unsolved runs to the end (and its tests pass)::

    from planbook import teaching
    teaching.check(result, teaching.completed(), teaching.step_ran("deploy"))

prints ``right: ...`` when every check holds, else ``not yet: ...`` with each thing still
wrong and what to do about it. The words name steps, tools and statuses; a step's error, notes
or result is shown on one line, through the run's gate and cut short (:func:`planbook.views.state.shown`),
and every line of the verdict passes the gate again (a check of your own included).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .data.errors import PlanbookError
from .data.models import RunResult, Step
from .outbound.text import indent_lines, one_line
from .views.state import shown

#: how long a step's error, notes or result may be in a verdict (its head and tail are kept)
ERROR_LIMIT = 160

#: a check's answer: None when it holds, else what is still wrong, in words
Test = Callable[[RunResult], "str | None"]


@dataclass(frozen=True)
class Check:
    """One thing an exercise wants of a run: ``wants`` says it when it holds, ``test`` says
    what is still wrong (None: it holds)."""

    wants: str
    test: Test


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` found: ``right`` when every check held; its text is what a student reads."""

    right: bool
    held: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def text(self) -> str:
        if self.right:
            return "right: " + "; ".join(self.held)
        lines = ["not yet: " + self.missing[0]] if len(self.missing) == 1 else \
            ["not yet:", *(f"  - {problem}" for problem in self.missing)]
        if self.held:
            lines.append("already right: " + "; ".join(self.held))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:  # a checking cell ends with check(...): the student reads this
        return self.text

    def __bool__(self) -> bool:
        return self.right


def check(result: Any, *checks: Check) -> Verdict:
    """Run ``checks`` on ``result`` and say what holds and what is still missing.

    ``result`` that is not a run's result yet (None, a plan, a handle) is a "not yet" that
    says what to put there; a check that cannot even read the result says so in its line.
    """
    if not checks:
        raise ValueError("check(result, ...) needs at least one check, e.g. teaching.completed()")
    if isinstance(result, PlanbookError):
        return Verdict(False, (), (f"the run did not start: {indent_lines(str(result), '  ')}",))
    if not isinstance(result, RunResult):
        what = "nothing yet (None)" if result is None else f"a {type(result).__name__}"
        return Verdict(False, (), (f"this needs a run's result (what %run_plan, planbook.run or handle.wait() "
                                   f"return), and it got {what}: run your exercise cell first",))
    hide = result.secrets.text  # the run's gate: a check words what the run holds (a result, an error, notes)
    held: list[str] = []
    missing: list[str] = []
    for one in checks:
        problem = one.test(result)
        if problem is None:
            held.append(hide(one.wants))
        elif (problem := hide(problem)) not in missing:  # two checks of one absent step say it once
            missing.append(problem)
    return Verdict(not missing, tuple(held), tuple(missing))


def attempt(run: Callable[[], RunResult]) -> RunResult | PlanbookError:
    """``run()``'s result, or the planbook error it raised (a plan refused before it ran): an
    exercise whose plan is still wrong gets a "not yet" from :func:`check`, not a traceback."""
    try:
        return run()
    except PlanbookError as error:
        return error


# ------------------------------------------------------------------ reading a result
def _shown(result: RunResult, text: str) -> str:
    """``text`` of the run (an error, notes, a result) as a verdict shows it: through the run's gate
    before it is cut (no fragment of a secret is left at the cut), on one line."""
    return one_line(shown(text, result.secrets.text, ERROR_LIMIT))


def _error(step: Step | None, result: RunResult) -> str:
    return _shown(result, (step.error if step is not None else None) or result.error or "no error was recorded")


def _ended(result: RunResult) -> str:
    return f"{result.status} ({result.reason or 'no reason'})"


def _ids(ids: Iterable[str]) -> str:
    ids = list(ids)
    return ", ".join(ids) if ids else "none"


def _step(result: RunResult, step_id: str) -> Step | None:
    return next((s for s in result.plan.steps if s.id == step_id), None)


def _not_in_plan(result: RunResult, step_id: str) -> str:
    return f"the plan has no step {step_id!r} (its steps: {_ids(s.id for s in result.plan.steps)}): add it"


def _executions(result: RunResult) -> Counter[str]:
    """How many times each step started in this run (a resumed run's earlier part included)."""
    return Counter(e.step for e in result.events if e.kind == "step.started" and e.step)


def _failed(result: RunResult) -> list[Step]:
    return [s for s in result.history if s.status == "failed"]


# ------------------------------------------------------------------ the checks
def completed(reason: str = "goal_met") -> Check:
    """The run completed, for ``reason`` (``goal_met``: every step of its final plan completed)."""

    def test(result: RunResult) -> str | None:
        if result.status == "completed" and result.reason == reason:
            return None
        if result.status == "completed":
            left = [s.id for s in result.plan.steps if s.status != "completed"]
            return f"the run completed ({_ended(result)}), not {reason}: steps {_ids(left)} did not complete"
        failed = _failed(result)
        where = f" after step {failed[-1].id} failed: {_error(failed[-1], result)}" if failed else \
            f": {_error(None, result)}"
        return f"the run ended {_ended(result)}{where}"

    return Check(f"the run completed ({reason})", test)


def step_ran(step_id: str, tool: str | None = None) -> Check:
    """Step ``step_id`` ran and completed (with ``tool``, when given)."""

    def test(result: RunResult) -> str | None:
        step = _step(result, step_id)
        if step is None:
            return _not_in_plan(result, step_id)
        if tool is not None and step.tool != tool:
            return f"step {step_id} calls {step.tool or f'agent {step.agent}'}, not {tool}"
        if step.status == "completed":
            return None
        if step.status in ("not_started", "blocked"):
            why = f" ({_shown(result, step.notes)})" if step.notes else ""
            return f"step {step_id} never ran: it is {step.status.value}{why}"
        return f"step {step_id} ran but is {step.status.value}: {_error(step, result)}"

    return Check(f"step {step_id} ran" + (f" {tool}" if tool else "") + " and completed", test)


def output(step_id: str, expected: Any) -> Check:
    """Step ``step_id`` completed and returned ``expected``."""

    def test(result: RunResult) -> str | None:
        if step_id not in result.outputs:
            return (f"step {step_id} has no result (the steps with one: {_ids(result.outputs)})"
                    if _step(result, step_id) else _not_in_plan(result, step_id))
        got = result.outputs[step_id]
        return None if got == expected else \
            f"step {step_id} returned {_shown(result, repr(got))}, not {_shown(result, repr(expected))}"

    return Check(f"step {step_id} returned {expected!r}", test)


def used_tool(tool: str) -> Check:
    """A step of the final plan called ``tool`` and completed."""

    def test(result: RunResult) -> str | None:
        steps = [s for s in result.plan.steps if s.tool == tool]
        if not steps:
            return f"no step of the plan calls {tool} (the tools it calls: {_ids(sorted({s.tool or '' for s in result.plan.steps} - {''}))})"
        if any(s.status == "completed" for s in steps):
            return None
        return f"step {steps[0].id} calls {tool} but is {steps[0].status.value}"

    return Check(f"a step called {tool}", test)


def no_failure() -> Check:
    """No execution failed: the plan worked the first time, with no retry and no replan."""

    def test(result: RunResult) -> str | None:
        failed = _failed(result)
        if failed:
            return f"step {failed[0].id} failed: {_error(failed[0], result)}"
        if result.revisions:
            return f"the plan was revised {len(result.revisions)} time(s): a plan that works needs no revision"
        return None

    return Check("no step failed", test)


def survived_failure(step_id: str | None = None) -> Check:
    """A step failed (``step_id``, when given) and the run completed all the same."""

    def test(result: RunResult) -> str | None:
        failed = [s for s in _failed(result) if step_id is None or s.id == step_id]
        which = f"step {step_id}" if step_id else "any step"
        if not failed:
            return f"{which} never failed, so there was no failure to survive: keep the failure the exercise sets up"
        if result.status != "completed":
            return (f"step {failed[-1].id} failed and the run ended {_ended(result)}: choose what happens "
                    "after a failure (a policy: retry, skip or replan)")
        return None

    return Check("a step failed and the run completed all the same", test)


def replanned() -> Check:
    """The plan was revised at least once (a replan or a person's edit)."""

    def test(result: RunResult) -> str | None:
        if result.revisions:
            return None
        failed = _failed(result)
        if failed:
            return f"step {failed[0].id} failed and the plan was never revised"
        return "the plan was never revised: no failure was noticed, so nothing was repaired"

    return Check("the plan was revised after a failure", test)


def needs(step_id: str, *ids: str) -> Check:
    """Step ``step_id`` needs every step of ``ids`` (a need, or a ``$id`` reference) and completed."""

    def test(result: RunResult) -> str | None:
        step = _step(result, step_id)
        if step is None:
            return _not_in_plan(result, step_id)
        lacking = [i for i in ids if i not in step.needs]
        if lacking:
            return (f"step {step_id} needs {_ids(step.needs)}, not {_ids(lacking)}: use their results "
                    f"(${lacking[0]} or ${{{lacking[0]}}}) or list them under needs")
        if step.status != "completed":
            return f"step {step_id} needs {_ids(ids)} but is {step.status.value}"
        return None

    return Check(f"step {step_id} needs {' and '.join(ids)}", test)


def needs_both(step_id: str, first: str, second: str) -> Check:
    """Step ``step_id`` joins two branches: it needs ``first`` and ``second``."""
    return needs(step_id, first, second)


def approved_only(ids: Iterable[str]) -> Check:
    """Exactly the steps ``ids`` asked for a decision, and each was approved (and ran)."""
    wanted = list(ids)

    def test(result: RunResult) -> str | None:
        asked = list(dict.fromkeys(e.step for e in result.events if e.kind == "step.waiting" and e.step))
        decided = {e.step: e.data.get("decision") for e in result.events if e.kind == "step.decided" and e.step}
        problems = []
        extra = [s for s in asked if s not in wanted]
        if extra:
            problems.append(f"step {_ids(extra)} asked for approval too: only {_ids(wanted)} should ask "
                            "(approve= names the steps that ask)")
        for step_id in wanted:
            if step_id not in asked:
                problems.append(f"step {step_id} never asked for approval")
            elif decided.get(step_id) != "approve":
                done = {None: "never decided about", "skip": "skipped", "edit": "edited", "stop": "stopped"}
                problems.append(f"step {step_id} asked but was {done.get(decided.get(step_id), 'not approved')}: "
                                "approve it")
        return "; ".join(problems) or None

    return Check(f"only {_ids(wanted)} asked, and was approved", test)


def continued(earlier: RunResult) -> Check:
    """The run is ``earlier`` continued (resumed), and no step that had completed ran again."""

    def test(result: RunResult) -> str | None:
        done = [s.id for s in earlier.plan.steps if s.status == "completed"]
        now = _executions(result)
        if result.run_id != earlier.run_id:
            return (f"this is a new run, which ran {_ids(s for s in done if now[s])} again: "
                    "continue the interrupted run instead (resume it)")
        before = _executions(earlier)
        again = [s for s in done if now[s] > before[s]]
        if again:
            return f"steps {_ids(again)} had completed and ran again"
        return None

    return Check("the interrupted run went on, and what had completed did not run again", test)


def custom(wants: str, test: Test) -> Check:
    """A check of your own: ``test(result)`` returns None when it holds, else what is still wrong."""
    return Check(wants, test)
