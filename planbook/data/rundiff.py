"""Compare runs: which steps of a run differ from a baseline's, and why.

``diff_runs(base, *others)`` aligns the runs' steps by id (the base plan's order, then each
other run's new steps) and says, for each step and each other run, how the step came to be in
that run (``kept``, ``re-ran``, ``pinned``, ``cached``, ``ran``, ``new``, ``removed``, ``not run``),
whether its call and its result are the base's, and what kind of change it is:

- ``edited``: the step's own call changed (new arguments, another tool, a pinned result): the edit;
- ``follows``: its call is the same but an input changed because of an edit upstream: a change
  that follows from the edit;
- ``noise``: the same resolved call (tool and arguments with ``$refs`` filled in from that run's
  results) gave another outcome, or its inputs differ only through such steps: **replay noise**
  (a tool that is not deterministic), not a consequence of the edit;
- ``new`` / ``removed``: the step is in one plan only; ``differs``: anything else (one run did
  not get to the step, for no reason upstream: a budget, a stop);
- ``same``: same call, same outcome.

It is pure data (the text and the HTML are views, reached through :mod:`.render`); every text it
gives out (rows, headers, decisions) passes the runs' gates (:class:`planbook.outbound.RunSecrets`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..outbound import RunSecrets, bounded, one_line
from .diff import diff_plans
from .lineage import Lineage
from .models import PlanDiff, RunResult, Status, Step
from .refs import resolve
from .render import render
from .stepmark import REUSED, StepMark
from .wording import plural

#: how a step came to be in a run, in words (``absent``: the step is not in that run's plan)
HOW_MEANS: dict[str, str] = {
    "ran": "ran in this run", "re-ran": "ran again in this fork", "kept": "kept from the parent run, not run again",
    "pinned": "the fork pinned its result; it did not run", "cached": "answered from the step cache, not run",
    "new": "not in the base run's plan", "removed": "in the base run's plan, not in this one",
    "not run": "in the plan, never ran", "absent": "not in this run's plan",
}
#: what each kind of change means (per step, per other run, against the base)
CHANGE_MEANS: dict[str, str] = {
    "same": "same call, same outcome",
    "edited": "its own call changed (the edit itself)",
    "follows": "an input changed because of an edit upstream (a change that follows from the edit)",
    "noise": "replay noise: the same call gave another outcome (or its inputs differ only through replay noise)",
    "new": "in this run's plan only", "removed": "in the base run's plan only",
    "differs": "one run did not get to the step, for no reason upstream (a budget, a stop)",
}
#: characters of a call or a result a row holds
SHOWN = 160

_COMPLETED = Status.completed
_NOT_RUN = frozenset({Status.not_started, Status.blocked, Status.skipped})
_UNRESOLVED = object()


@dataclass(slots=True)
class Side:
    """One run's step in a row: how it came to be, its status, its time and tokens in that run."""

    how: str
    status: str | None
    #: seconds its call took in this run (None when it did not run here: kept, pinned, cached, not run)
    seconds: float | None
    tokens: int
    step: Step | None = None


@dataclass(slots=True)
class Change:
    """How another run's step compares with the base's."""

    kind: str
    #: the resolved call (tool and arguments, ``$refs`` filled in) is the base's; None when one side is absent
    call_same: bool | None
    #: the outcome (status and result, deep and type for type) is the base's
    result_same: bool | None

    @property
    def changed(self) -> bool:
        return self.kind != "same"

    @property
    def noise(self) -> bool:
        return self.kind == "noise"


@dataclass(slots=True)
class DiffRow:
    """One step id, across the runs: ``sides[0]`` is the base, ``changes[i]`` compares ``sides[i + 1]`` with it."""

    step: str
    sides: list[Side]
    changes: list[Change]

    @property
    def changed(self) -> bool:
        return any(c.kind != "same" for c in self.changes)


@dataclass(slots=True)
class RunSummary:
    """One run's totals: executions, times, model usage and the decisions people gave."""

    run_id: str
    status: str
    executions: int
    #: seconds from the run's start to its end (its events), None when unknown
    wall: float | None
    #: seconds the run's own calls took, added up
    step_time: float
    model_calls: int
    tokens: int
    #: ``(step, decision, who, reason)``, the reason through the run's gate
    decisions: list[tuple[str, str, str, str]] = field(default_factory=list)


@dataclass
class RunDiff:
    """What :func:`diff_runs` finds: see the module docstring. ``rows()`` for pandas, ``text()``,
    ``html()``; displayed in a notebook as text and static HTML."""

    base: RunResult
    others: list[RunResult]
    steps: list[DiffRow]
    #: per other run, in order: the first step whose call or result differs (None when none does)
    divergences: list[str | None]
    plan_diffs: list[PlanDiff]
    summaries: list[RunSummary]
    verdicts: list[str]
    #: per other run: its lineage headline when it is a fork of the base, else ``run R vs run S`` (gated)
    headers: list[str]
    goals_differ: bool
    #: displayed with only the steps whose call or result differs (``%diff_runs --changed-only``)
    changed_only: bool = False

    # ----------------------------------------------------------------- answers
    @property
    def run_ids(self) -> list[str]:
        return [s.run_id for s in self.summaries]

    @property
    def first_divergence(self) -> str | None:
        """The first step (base plan order, then the other run's new steps) whose call or result differs
        in the first other run; None when none does."""
        return self.divergences[0] if self.divergences else None

    @property
    def first_divergences(self) -> dict[str, str | None]:
        """``first_divergence`` per other run, by run id."""
        return {s.run_id: d for s, d in zip(self.summaries[1:], self.divergences)}

    @property
    def verdict(self) -> str:
        """``identical``, ``11 steps differ: first at a1 (1 edited, 10 follow from the edit)``; one line per
        other run (its id first) when there are several."""
        if len(self.verdicts) == 1:
            return self.verdicts[0]
        return "; ".join(f"run {s.run_id}: {v}" for s, v in zip(self.summaries[1:], self.verdicts))

    @property
    def identical(self) -> bool:
        return not any(row.changed for row in self.steps)

    @property
    def goals(self) -> list[str]:
        hide = self.hider()
        return [hide(run.goal) for run in (self.base, *self.others)]

    def changed_steps(self) -> list[str]:
        return [row.step for row in self.steps if row.changed]

    def hider(self) -> Callable[[str | None], str]:
        """Every run's gate, for one render: a text leaves through all of them (a secret one run
        learned stays hidden in a row of another)."""
        hiders = [self.base.secrets.hider()] + [run.secrets.hider() for run in self.others
                                                 if run.secrets is not self.base.secrets]

        def hide(text: str | None) -> str:
            if not text:
                return text or ""
            for h in hiders:
                text = h(text)
            return text

        return hide

    # ------------------------------------------------------------------ rows
    def rows(self, changed_only: bool = False) -> list[dict[str, Any]]:
        """One flat dict per step (strings, numbers, booleans, None: ``pandas.DataFrame(diff.rows())``);
        columns ``base_*`` for the base and ``other_*`` (``other1_*``, ``other2_*`` for several) for
        each other run, every text through the runs' gates."""
        hide = self.hider()
        runs = [self.base, *self.others]
        prefixes = ["base_"] + (["other_"] if len(self.others) == 1 else
                                [f"other{i}_" for i in range(1, len(self.others) + 1)])
        first = self.first_divergence
        out = []
        for row in self.steps:
            if changed_only and not row.changed:
                continue
            flat: dict[str, Any] = {"step": row.step, "changed": row.changed, "first_divergence": row.step == first}
            for i, (side, prefix) in enumerate(zip(row.sides, prefixes)):
                flat[prefix + "how"] = side.how
                flat[prefix + "status"] = side.status
                flat[prefix + "seconds"] = side.seconds
                flat[prefix + "tokens"] = side.tokens
                flat[prefix + "call"] = call_text(side.step, hide)
                flat[prefix + "result"] = result_text(side.step, runs[i].secrets, hide)
                if i:
                    change = row.changes[i - 1]
                    base = row.sides[0]
                    flat[prefix + "change"] = change.kind
                    flat[prefix + "noise"] = change.noise
                    flat[prefix + "call_same"] = change.call_same
                    flat[prefix + "result_same"] = change.result_same
                    flat[prefix + "seconds_delta"] = (None if side.seconds is None or base.seconds is None
                                                      else side.seconds - base.seconds)
                    flat[prefix + "tokens_delta"] = side.tokens - base.tokens
            out.append(flat)
        return out

    # ------------------------------------------------------------------ views
    def text(self, changed_only: bool = False, *, times: bool = True) -> str:
        """The comparison as text (``times=False``: no durations, for a deterministic ``text/plain``)."""
        return render("rundiff_text", self, changed_only, times)

    def html(self, changed_only: bool = False) -> str:
        """The comparison as static HTML (readable untrusted, without JavaScript)."""
        return render("rundiff_html", self, changed_only)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<RunDiff {' vs '.join(self.run_ids)}: {self.hider()(self.verdict)}>"

    def only_changed(self) -> "RunDiff":
        """This comparison, displayed with only the steps whose call or result differs."""
        return dataclasses.replace(self, changed_only=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return render("rundiff_bundle", self)


# ---------------------------------------------------------------------- building
def diff_runs(base: RunResult, *others: RunResult) -> RunDiff:
    """Compare ``others`` with ``base`` step by step (see the module docstring). Runs with other goals
    may be compared (the header says so); a run compared with itself is ``identical``."""
    if not others:
        raise TypeError("diff_runs(base, other, ...) needs at least one run to compare with the base")
    for i, run in enumerate((base, *others)):
        if not isinstance(run, RunResult):
            raise TypeError(f"diff_runs takes RunResults (argument {i + 1} is a {type(run).__name__}); load a "
                            "stored run with planbook.load_run(ID) or pass what planbook.run returned")
    runs = [base, *others]
    base_steps = {st.id: st for st in base.plan.steps}
    order = list(base_steps)
    seen = set(order)
    for run in others:
        for st in run.plan.steps:
            if st.id not in seen:
                seen.add(st.id)
                order.append(st.id)
    plans = [base_steps] + [{st.id: st for st in run.plan.steps} for run in others]
    tokens = [_tokens_by_step(run) for run in runs]
    forks = [run.lineage is not None for run in runs]
    sides_by_run = [[_side(plans[r].get(sid), sid in base_steps, r, forks[r], tokens[r]) for sid in order]
                    for r in range(len(runs))]
    changes_by_other = [_changes(order, base, base_steps, run, plans[k + 1]) for k, run in enumerate(others)]
    rows = [DiffRow(sid, [sides_by_run[r][i] for r in range(len(runs))], [c[i] for c in changes_by_other])
            for i, sid in enumerate(order)]
    divergences = [next((sid for sid, ch in zip(order, chs) if ch.kind != "same"), None) for chs in changes_by_other]
    summaries = [_summary(run) for run in runs]
    verdicts = [_verdict(chs, div, run is base or (run.run_id is not None and run.run_id == base.run_id))
                for chs, div, run in zip(changes_by_other, divergences, others)]
    headers = [_header(base, run) for run in others]
    goals_differ = any(run.goal != base.goal for run in others)
    return RunDiff(base, list(others), rows, divergences, [diff_plans(base.plan, run.plan) for run in others],
                   summaries, verdicts, headers, goals_differ)


def _side(step: Step | None, in_base: bool, index: int, fork: bool, tokens: dict[str, int]) -> Side:
    if step is None:
        return Side("absent" if index == 0 or not in_base else "removed", None, None, 0)
    how = _how(step, fork)
    if index and not in_base:
        how = "new" if how in ("ran", "re-ran") else how
    ran = how in ("ran", "re-ran", "new")
    started, finished = step.started_at, step.finished_at
    seconds = finished - started if ran and started is not None and finished is not None else None
    return Side(how, step.status.value, seconds, tokens.get(step.id, 0), step)


def _how(step: Step, fork: bool) -> str:
    status, mark = step.status, step.mark
    if status is _COMPLETED and mark in REUSED:
        return str(mark)  # "kept", "pinned", "cached"
    if status in _NOT_RUN and not step.attempts:
        return "not run"
    return "re-ran" if fork else "ran"


def _tokens_by_step(run: RunResult) -> dict[str, int]:
    """Model tokens per step, from the run's ``llm.call`` events (those of a planner have no step)."""
    out: dict[str, int] = {}
    for event in run.events:
        if event.kind == "llm.call" and event.step is not None:
            data = event.data
            out[event.step] = (out.get(event.step, 0) + int(data.get("prompt_tokens") or 0)
                               + int(data.get("completion_tokens") or 0))
    return out


def _changes(order: list[str], base: RunResult, base_steps: dict[str, Step], other: RunResult,
             other_steps: dict[str, Step]) -> list[Change]:
    """Each step of ``order`` in ``other`` against ``base``: the kind of change, worked out needs first
    (a step's kind depends on its needs'), without recursion (a chain may be thousands of steps deep)."""
    kinds: dict[str, Change] = {}
    base_results, other_results = base.outputs, other.outputs
    same = Change("same", True, True)

    def need_change(need: str) -> Change:
        return kinds.get(need, same)  # a need in neither plan (or on a cycle) changes nothing here

    for sid in needs_first(order, base_steps, other_steps):
        a, b = base_steps.get(sid), other_steps.get(sid)
        if a is None or b is None:
            kinds[sid] = Change("new" if a is None else "removed", None, None)
        elif a is b:
            kinds[sid] = same
        else:
            kinds[sid] = _compare(a, b, base_results, other_results, need_change)
    return [kinds[sid] for sid in order]


def needs_first(order: list[str], *plans: dict[str, Step]) -> list[str]:
    """``order`` rearranged so that every step comes after the steps it needs in either plan (plan order
    when it already does: the common case costs one pass)."""
    out: list[str] = []
    placed: set[str] = set()
    entered: set[str] = set()  # a step met again before it is placed is on a cycle: not entered twice
    known = set(order)
    for root in order:
        if root in placed:
            continue
        stack = [(root, False)]
        while stack:
            sid, expanded = stack.pop()
            if sid in placed:
                continue
            if expanded:
                placed.add(sid)
                out.append(sid)
                continue
            if sid in entered:
                continue
            entered.add(sid)
            stack.append((sid, True))
            for plan in plans:
                step = plan.get(sid)
                if step is not None:
                    stack.extend((n, False) for n in step.needs if n in known and n not in placed)
    return out


def _compare(a: Step, b: Step, base_results: dict[str, Any], other_results: dict[str, Any],
             need_change: Callable[[str], Change]) -> Change:
    a_pinned, b_pinned = _pinned(a), _pinned(b)
    outcome = _same_outcome(a, b)
    if a_pinned or b_pinned:
        return Change("same" if outcome else "edited", None if a_pinned != b_pinned else True, outcome)
    if not (a.tool == b.tool and a.agent == b.agent and a.task == b.task and same_value(a.args, b.args)):
        return Change("edited", False, outcome)
    changed_needs = [n for n in dict.fromkeys((*a.needs, *b.needs)) if need_change(n).kind != "same"]
    ran = (bool(a.attempts) or a.status is _COMPLETED) and (bool(b.attempts) or b.status is _COMPLETED)
    call_same = _same_resolved(a, b, base_results, other_results) if changed_needs else True
    if call_same is True:  # the same call: what differs is the outcome alone
        return Change("same" if outcome else "noise" if ran else "differs", True, outcome)
    if call_same is None and outcome:  # neither could be called (a need did not complete in either) alike
        return Change("same", None, True)
    # the call differs (or one side could not make it) because an input differs: from an edit, or from noise
    upstream_noise = all(need_change(n).kind == "noise" for n in changed_needs)
    return Change("noise" if upstream_noise else "follows", call_same, outcome)


def _pinned(step: Step) -> bool:
    return step.status is _COMPLETED and step.mark == StepMark.pinned


def _same_outcome(a: Step, b: Step) -> bool:
    if a.status is not b.status:
        return False
    if a.status is _COMPLETED:
        return same_value(a.result, b.result)
    if a.status is Status.failed:
        return a.error == b.error
    return True


def _same_resolved(a: Step, b: Step, base_results: dict[str, Any], other_results: dict[str, Any]) -> bool | None:
    """Whether the two calls, ``$refs`` filled in from each run's results, are the same (None: one of
    them cannot be filled in, a need did not complete)."""
    if all(base_results.get(n, _UNRESOLVED) is other_results.get(n, _UNRESOLVED) for n in a.needs):
        return True  # the same result objects (kept steps): the same call, without building it
    try:
        left, right = resolve(a.args, base_results), resolve(b.args, other_results)
    except KeyError:
        return None
    return same_value(left, right)


def same_value(a: Any, b: Any) -> bool:
    """Deep equality, type for type (``1``, ``1.0`` and ``True`` differ; NaN equals NaN); a value whose
    ``==`` gives no plain answer (an array, a frame) is compared with its ``equals`` or ``all()``."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same_value(v, b[k]) for k, v in a.items())
    if kind is list or kind is tuple:
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if kind is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    if kind is str or kind is int or kind is bool or kind is bytes:
        return a == b
    try:
        equals = getattr(a, "equals", None)
        if callable(equals):
            return bool(equals(b))
        eq = a == b
        if isinstance(eq, bool):
            return eq
        every = getattr(eq, "all", None)
        return bool(every()) if callable(every) else bool(eq)
    except Exception:  # noqa: BLE001 - a value that cannot say it equals another is taken as another
        return False


# ---------------------------------------------------------------------- summaries
def _summary(run: RunResult) -> RunSummary:
    start = end = None
    decisions: list[tuple[str, str, str, str]] = []
    hide = None
    for event in run.events:
        kind = event.kind
        if kind == "run.started" and start is None:
            start = event.time
        elif kind == "run.finished" or kind == "run.paused":
            end = event.time
        elif kind == "step.decided" or kind == "run.steered":
            if hide is None:
                hide = run.secrets.hider()
            data = event.data
            what = str(data.get("decision", data.get("action", "")))
            decisions.append((event.step or "", what, str(data.get("who", "") or ""),
                              one_line(hide(str(data.get("reason", "") or "")))))
    step_time = 0.0
    for record in run.records:  # this run's own executions (a kept or pinned step has none)
        step_time += record.duration
    usage = run.usage
    return RunSummary(run.run_id or "(no id)", run.status, run.executions,
                      None if start is None or end is None else end - start, step_time,
                      usage.calls, usage.total_tokens, decisions)


def _verdict(changes: list[Change], first: str | None, itself: bool) -> str:
    if first is None:
        return "identical (a run compared with itself)" if itself else "identical"
    counts: dict[str, int] = {}
    for change in changes:
        if change.kind != "same":
            counts[change.kind] = counts.get(change.kind, 0) + 1
    total = sum(counts.values())
    line = f"{plural(total, 'step')} differ{'s' if total == 1 else ''}: first at {first}"
    if counts.keys() == {"noise"}:
        return line + " — replay noise only (the same calls gave other outcomes): nothing follows from an edit"
    words = {"edited": "edited", "follows": "follows from the edit" if counts.get("follows") == 1 else "follow from the edit", "noise": "replay noise", "new": "new",
             "removed": "removed", "differs": "not reached in one run"}
    parts = [f"{counts[k]} {words[k]}" for k in ("edited", "follows", "new", "removed", "differs", "noise") if k in counts]
    return f"{line} ({', '.join(parts)})"


def _header(base: RunResult, other: RunResult) -> str:
    hide = other.secrets.hider()
    base_hide = base.secrets.hider()
    if other is base or (other.run_id is not None and other.run_id == base.run_id):
        return f"run {base.run_id} compared with itself"
    lineage = other.lineage
    if lineage is not None and lineage.get("parent") == base.run_id:
        return base_hide(hide(Lineage(**lineage).headline()))
    line = f"run {base.run_id} vs run {other.run_id}"
    if lineage is not None:
        line += f" ({Lineage(**lineage).headline()})"
    return base_hide(hide(line))


# ---------------------------------------------------------------------- shown texts
def call_text(step: Step | None, hide: Callable[[str | None], str]) -> str | None:
    """A step's call as a row shows it (a secret-named argument as ``***``, a Secret as its reference)."""
    if step is None:
        return None
    return bounded(one_line(hide(step.describe())), SHOWN)


def result_text(step: Step | None, gate: RunSecrets, hide: Callable[[str | None], str]) -> str | None:
    """A step's result as a row shows it (``***`` for a step that holds a secret); its error when it failed."""
    if step is None:
        return None
    if step.status is not _COMPLETED:
        return bounded(one_line(hide(step.error)), SHOWN) if step.error else None
    value = gate.result(step)
    return bounded(one_line(hide(value if isinstance(value, str) else repr(value))), SHOWN)


__all__ = ["CHANGE_MEANS", "Change", "DiffRow", "HOW_MEANS", "RunDiff", "RunSummary", "Side", "diff_runs",
           "same_value"]
