"""The run store protocol: what the runner asks of a store, and what a store gives back.

Shaped like LangGraph's checkpointer and pydantic-graph's state persistence: a store
saves a run's config and state, appends events, records each step's status changes
(the durability point: a step's result is in the store before the next step starts),
loads a run, lists runs, and keeps a step cache. Two implementations:
:class:`~planbook.store.memory.MemoryStore` and :class:`~planbook.store.sqlite.SQLiteStore`.

One process writes a run at a time (a resumed run is written by the process resuming
it, which claims it first: an optional ``claim_run(run_id, force=False)`` raises
:class:`~planbook.store.claims.RunClaimed` while another live process writes it); any
number of processes may write *different* runs to one store at once.

The call sequence a runner follows (``state`` is its ``RunState``)::

    run_id = store.create_run(state.plan, goal=..., config=config_dict)   # before anything runs
    store.save_state(run_id, state)                 # run.started / plan.created emitted
    for each execution:
        store.record_step(run_id, step, state)      # after step -> in_progress (+ step.started)
        store.record_step(run_id, step, state)      # after step -> completed/failed (+ history, step.finished)
    store.record_step(run_id, step, state)          # any other status change (skipped, blocked)
    store.save_state(run_id, state)                 # after a replan (new plan, revision, diff) and at the end

``record_step`` and ``save_state`` also write the history entries and events that
``state`` gained since the last call (they are append-only lists), all in one
transaction; ``append_events`` is for events outside a run's state.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from types import UnionType
from typing import Any, Literal, Protocol, Union, get_args, get_origin, runtime_checkable

from ..data import budgets, results
from ..data.errors import RunNotFound
from ..data.models import Event, Plan, PlanDiff, RunResult, Status, Step
from . import claims
from .values import Redacted, Unrestorable, has_marker

#: the RunState fields that are not lists (saved as one record, read back as is)
COUNTER_FIELDS = (
    "status", "reason", "error", "traceback", "executions", "replans", "retries_used", "last_error",
    "pending_failures", "started",
)
#: the RunState fields a store keeps as lists of records
LIST_FIELDS = ("plan", "history", "revisions", "events")


#: the settings a run's summary names (``RunSummary.settings``), from the config the run stored:
#: the run options that change how a run goes and what a model planned it with
LISTED_SETTINGS = ("parallel", "planner", "model")
#: the key of a run's counters (in the store) holding its steps' count by status (``RunSummary.step_counts``)
STEP_COUNTS = "step_counts"


def step_counts(statuses: Iterable[str]) -> dict[str, int]:
    """How many steps are in each status, from the steps' status values (``"completed"``), in the
    order of :class:`Status` (``planbook runs`` lists them so); a status no step is in is left out.
    The SQLite store counts a run's plan with it, the memory store its rows."""
    counts = dict.fromkeys((s.value for s in Status), 0)
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return {k: n for k, n in counts.items() if n}


def listed_settings(config: Any) -> dict[str, Any]:
    """The :data:`LISTED_SETTINGS` a stored config keeps (JSON scalars only: a damaged one is left out)."""
    if not isinstance(config, Mapping):
        return {}
    return {k: config[k] for k in LISTED_SETTINGS if k in config and isinstance(config[k], (str, int, float, type(None)))}


def counts_from(value: Any) -> dict[str, int] | None:
    """``step_counts`` as a store read them back: a mapping of status names to counts, else None."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and type(n) is int and n >= 0
                                                 for k, n in value.items()):
        return None
    return dict(value)


@dataclass(frozen=True)
class RunSummary:
    """One line of ``planbook runs``."""

    run_id: str
    goal: str
    status: str
    reason: str | None
    started: float
    updated: float
    steps_done: int
    steps_total: int
    model_calls: int
    executions: int = 0
    #: the process that last wrote the run (a "running" run whose process is gone was cut short)
    writer_pid: int | None = None
    #: the id of the plan the run was made from (``%run_plan NAME --resume`` looks runs up by it)
    plan_id: str | None = None
    #: the host of the writing process, and since when it writes the run
    writer_host: str | None = None
    writer_since: float | None = None
    #: what is damaged in the run's stored row (then it cannot be shown or resumed, and the
    #: fields it spoils hold placeholders), or None: a damaged run is listed, not dropped
    damage: str | None = None
    #: the run this one was forked from (``planbook.fork``), None for a run that is no fork
    parent: str | None = None
    #: how deep in its fork tree (``planbook.runs(tree=True)``): 0 for a run that is no fork
    depth: int = 0
    #: how many steps are in each status (``{"completed": 5, "failed": 1}``), as the store last
    #: counted them: when the run last changed status or was saved, so exact for a run that ended,
    #: paused or waits; None when the store cannot say (a run an older planbook wrote, a damaged row)
    step_counts: Mapping[str, int] | None = field(default=None, hash=False)
    #: the settings a run was made with that tell runs apart (:data:`LISTED_SETTINGS`: parallel,
    #: planner, model), from its stored config; a setting the config does not keep is left out
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def duration(self) -> float | None:
        """Seconds from the run's start to its last write (so far, for a run still going); None
        when a time is missing or damaged. A run resumed later counts the time between too."""
        started, updated = self.started, self.updated
        if not (isinstance(started, (int, float)) and isinstance(updated, (int, float))) or started <= 0 \
                or updated < started or self.damage:
            return None
        return float(updated - started)

    @property
    def writer_gone(self) -> bool:
        """True for a ``running`` run whose writing process died on this host: it was cut
        short (``planbook runs`` shows it as ``stopped (writer gone)``; a resume takes it over)."""
        return claims.writer_gone(self.status, self.writer_pid, self.writer_host)


@dataclass(frozen=True)
class CacheHit:
    """A cached step result and where it came from (views show ``[✓] cached`` with the run)."""

    key: str
    result: Any
    tool: str
    run_id: str
    step_id: str
    created: float


@dataclass
class StoredRun:
    """Everything a store holds about one run: enough to rebuild its ``RunState`` and config."""

    run_id: str
    goal: str
    config: dict[str, Any]
    plan: Plan
    counters: dict[str, Any]
    history: list[Step] = field(default_factory=list)
    revisions: list[PlanDiff] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    created: float = 0.0
    updated: float = 0.0

    @property
    def status(self) -> str:
        return str(self.counters.get("status", "running"))

    @property
    def reason(self) -> str | None:
        return self.counters.get("reason")

    def state_fields(self) -> dict[str, Any]:
        """Keyword arguments for ``RunState(**fields)``."""
        return {**self.counters, "plan": self.plan, "history": self.history, "revisions": self.revisions,
                "events": self.events}

    def interrupted_steps(self) -> list[str]:
        """Steps that were ``in_progress`` when the writing process stopped (they run again)."""
        return [st.id for st in self.plan.steps if st.status is Status.in_progress]

    def missing_args(self) -> dict[str, list[str]]:
        """Unfinished steps with args that were not stored — secrets (:class:`Redacted`) or
        values that could not be restored (:class:`Unrestorable`) — and their names: they
        need those args given again (from the plan) before they can run."""
        found: dict[str, list[str]] = {}
        for st in self.plan.steps:
            if st.status is not Status.completed:
                names = [k for k, v in st.args.items() if has_marker(v, Redacted) or has_marker(v, Unrestorable)]
                if names:
                    found[st.id] = names
        return found

    def steps_to_rerun(self) -> list[str]:
        """Completed steps whose result could not be restored and that an unfinished step
        needs (directly or through another such step), in plan order."""
        by_id = {st.id: st for st in self.plan.steps}
        lost = {sid for sid, st in by_id.items()
                if st.status is Status.completed and isinstance(st.result, Unrestorable)}
        waiting = [st for st in self.plan.steps if st.status is not Status.completed]
        needed: set[str] = set()
        while waiting:
            step = waiting.pop()
            for dep in step.needs:
                if dep in lost and dep not in needed:
                    needed.add(dep)
                    waiting.append(by_id[dep])
        return [st.id for st in self.plan.steps if st.id in needed]

    def result(self) -> RunResult:
        """The run as a :class:`RunResult` (``planbook.load_run`` / ``planbook show``), built as the
        live run builds its own (:mod:`planbook.data.results`); its timing records are rebuilt
        from the history and the events (a store does not keep them)."""
        c = self.counters
        return results.run_result(
            plan=self.plan, history=list(self.history), revisions=list(self.revisions), events=list(self.events),
            status=c.get("status", "running"), reason=c.get("reason"), error=c.get("error"),
            traceback=c.get("traceback"), executions=c.get("executions", 0), replans=c.get("replans", 0),
            max_steps=self.config.get("max_steps", budgets.MAX_STEPS),
            max_replans=self.config.get("max_replans", budgets.MAX_REPLANS),
            run_id=self.run_id, lineage=c.get("lineage"),
        )


class RunStateLike(Protocol):
    """What a store reads of a run's state: the engine's ``RunState`` is one (the store sits
    below the engine, so it names what it reads instead of importing the class), as
    pydantic-graph's persistence is typed by the state it keeps.

    ``history`` and ``events`` only grow (a write stores what was added since the last);
    :func:`counters_of` also reads every field that is not one of :data:`LIST_FIELDS`.
    Read-only here: a store never changes the state it is given."""

    @property
    def plan(self) -> Plan: ...

    @property
    def history(self) -> Sequence[Step]: ...

    @property
    def events(self) -> Sequence[Event]: ...

    @property
    def revisions(self) -> Sequence[PlanDiff]: ...

    @property
    def status(self) -> str: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def executions(self) -> int: ...


@runtime_checkable
class RunStore(Protocol):
    """What the runner needs from a store (see the module docstring for the call sequence).

    Implementations are thread-safe, and redact secrets before anything is kept.
    """

    #: where the runs are (a path, or ``":memory:"``), for messages
    location: str

    def create_run(self, plan: Plan, *, goal: str, config: Mapping[str, Any], run_id: str | None = None,
                   lineage: Mapping[str, Any] | None = None) -> str:
        """A new run with its config (JSON-able) and first plan; returns its id."""
        ...

    def save_state(self, run_id: str, state: RunStateLike) -> None:
        """The whole state: counters, the plan (every step; steps no longer in it are dropped),
        the revisions, and the history entries and events added since the last save."""
        ...

    def record_step(self, run_id: str, step: Step | Sequence[Step], state: RunStateLike) -> None:
        """A step's status change and result (or several steps', in one transaction: a
        parallel batch, or a completion with the next step's start), the counters, and the
        history entries and events added since the last save — in the store when this returns."""
        ...

    def append_events(self, run_id: str, events: Sequence[Event]) -> None:
        """Events that are not in a run's state list (they are not counted by ``save_state``)."""
        ...

    def load_run(self, run_id: str, *, plan_only: bool = False) -> StoredRun:
        """Everything about a run; :class:`RunNotFound` names the latest runs."""
        ...

    def list_runs(self, *, limit: int | None = None) -> list[RunSummary]:
        """Runs, newest first (by creation)."""
        ...

    def latest_run_id(self, *, plan_id: str | None = None) -> str | None:
        """The id of the run created last (of the plan ``plan_id`` when given), or None."""
        ...

    def delete_run(self, run_id: str) -> None:
        """Forget a run (its cache entries stay: they are keyed by the call, not the run)."""
        ...

    def cache_get(self, key: str) -> CacheHit | None:
        """The cached result for a key from :func:`~planbook.store.cachekey.step_cache_key`."""
        ...

    def cache_put(self, key: str, result: Any, *, tool: str, run_id: str, step_id: str) -> bool:
        """Cache a step's result; False (nothing kept) when it could not be restored later."""
        ...

    def clear_cache(self) -> int:
        """Forget every cached step result; returns how many there were."""
        ...

    def close(self) -> None:
        ...


class StoreRedactor(Protocol):
    """A store's redaction of what it keeps (planbook.outbound's Redactor is one)."""

    def add_secrets(self, secrets: Iterable[str]) -> None: ...
    def text(self, text: str) -> str: ...


@runtime_checkable
class RedactingStore(RunStore, Protocol):
    """A store that masks secrets itself, and learns a run's secrets as the run learns them."""

    redactor: StoreRedactor


@runtime_checkable
class ClaimingStore(RunStore, Protocol):
    """A store that several processes may write: a run is claimed before it is written again."""

    def claim_run(self, run_id: str, *, force: bool = False, updated: float | None = None,
                  mine: bool = False) -> None:
        """Take the run to write it: :class:`~planbook.data.errors.RunClaimed` when another live
        process writes it (or it was written since ``updated``); ``force`` takes it anyway."""
        ...


#: what ``store=`` takes: a path, ``":memory:"``, a store object, or None (no store)
StoreLike = Union[str, "os.PathLike[str]", RunStore, None]


_COUNTER_NAMES: dict[type, tuple[str, ...]] = {}


def counters_of(state: RunStateLike) -> dict[str, Any]:
    """The non-list fields of a ``RunState`` (every field of a pydantic state but the lists),
    containers copied (a later change to the state must not change what was taken)."""
    names = _COUNTER_NAMES.get(type(state))
    if names is None:
        fields = getattr(type(state), "model_fields", None)
        names = (tuple(n for n in fields if n not in LIST_FIELDS)
                 if fields else COUNTER_FIELDS)
        _COUNTER_NAMES[type(state)] = names
    values = state.__dict__ if hasattr(state, "__dict__") else {}
    out = {}
    for name in names:
        value = values[name] if name in values else getattr(state, name, None)
        out[name] = value.copy() if isinstance(value, (dict, list)) else value
    return out


_COUNTER_KEYS: dict[type, tuple[Callable[[dict[str, Any]], Any], Callable[[tuple[Any, ...]], Any]]] = {}


def counters_key(state: RunStateLike) -> tuple[Any, ...]:
    """What :func:`counters_of` would give, but ``executions``, as one tuple to compare with
    the last one written: a step changes only ``executions`` as a rule, and telling that
    this way costs a tenth of building the dict. Containers are compared by a snapshot of
    their items (the state changes them in place)."""
    known = _COUNTER_KEYS.get(type(state))
    if known is None:
        names = tuple(n for n in counters_of(state) if n != "executions")
        values = state.__dict__ if hasattr(state, "__dict__") else {}
        if not names or not all(n in values for n in names):  # not a pydantic state: the slow way
            return tuple(sorted((k, repr(v)) for k, v in counters_of(state).items() if k != "executions"))
        getter = itemgetter(*names) if len(names) > 1 else (lambda d, n=names[0]: (d[n],))
        fields = getattr(type(state), "model_fields", {})
        containers = [i for i, n in enumerate(names) if _may_hold_container(fields.get(n))]
        pick = (itemgetter(*containers) if len(containers) > 1 else
                (lambda t, i=containers[0]: (t[i],)) if containers else (lambda t: ()))
        known = _COUNTER_KEYS[type(state)] = (getter, pick)
    get_flat, get_containers = known
    flat = get_flat(state.__dict__)
    return flat + tuple(map(_snapshot, get_containers(flat)))


def _may_hold_container(field: Any) -> bool:
    """True unless the field's type says it holds only scalars (str, int, a Literal, None...)."""
    if field is None:
        return True
    scalar = (str, int, float, bool, type(None))
    annotation = field.annotation
    args = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return not all(a in scalar or get_origin(a) is Literal for a in args)


def _snapshot(value: Any) -> Any:
    """A container's items as they are now (a state changes its dicts and lists in place)."""
    if not value and type(value) in (dict, list):
        return type(value)
    if type(value) is dict:
        return tuple((k, _snapshot(v)) for k, v in value.items())
    if type(value) in (list, tuple, set):
        return (type(value), tuple(map(_snapshot, value)))
    return value


def not_found(run_id: str, location: str, latest: Sequence[str]) -> RunNotFound:
    hint = f"; the latest are {', '.join(latest)}" if latest else "; it holds no runs"
    return RunNotFound(f"no run {run_id!r} in the run store {location}{hint} (planbook runs lists them)")

