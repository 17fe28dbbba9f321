"""The in-memory run store: runs that last as long as the process (a notebook's kernel).

It keeps what the SQLite store keeps and redacts the same way, so a run resumed from
either looks the same — with one difference: results are kept by reference, never
encoded, so in the same process any result comes back (even one that cannot be pickled).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.errors import StoreError
from ..data.ids import new_run_id
from ..data.models import Event, Plan, Step
from ..outbound.redact import Redactor
from .base import (
    CacheHit,
    RunStateLike,
    RunSummary,
    StoredRun,
    counters_of,
    listed_settings,
    not_found,
    step_counts,
)
from .rows import (
    config_json,
    counters_json,
    diffs_from_records,
    diffs_json,
    event_from_record,
    event_json,
    plan_from_record,
    plan_json,
    step_from_record,
    step_json,
)
from .values import Unrestorable, clone, plain_json_text, redact_args, shown, type_name

LOCATION = ":memory:"


@dataclass
class _Entry:
    """A step as kept: its record (JSON, as the SQLite store keeps it), its redacted args,
    its result (by reference)."""

    id: str
    status: str
    record: str
    args: dict[str, Any]
    result: Any

    def step(self) -> Step:
        return step_from_record(json.loads(self.record), clone(self.args), self.result)


@dataclass
class _Run:
    run_id: str
    goal: str
    config: dict[str, Any]
    created: float
    updated: float
    plan: str
    steps: dict[str, _Entry] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=lambda: {"status": "running"})
    revisions: str = "[]"
    history: list[_Entry] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    model_calls: int = 0
    plan_id: str | None = None


class MemoryStore:
    """Runs in a dict, under a lock. ``secrets``: more strings to redact."""

    location = LOCATION

    def __init__(self, *, secrets: Iterable[str] = ()) -> None:
        self.redactor = Redactor(secrets)
        self._lock = threading.RLock()
        self._runs: dict[str, _Run] = {}
        self._cache: dict[str, CacheHit] = {}

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._runs)} runs)"

    def add_secrets(self, secrets: Iterable[str]) -> None:
        self.redactor.add_secrets(secrets)

    def close(self) -> None:
        """Nothing to release; the runs stay until the store is dropped."""

    # --------------------------------------------------------------- runs
    def create_run(self, plan: Plan, *, goal: str | None = None, config: Mapping[str, Any] | None = None,
                   run_id: str | None = None, lineage: Mapping[str, Any] | None = None) -> str:
        """A new run. ``lineage``: a fork's origin; here a kept result is the parent's own object."""
        self.redactor.refresh()
        config_copy = json.loads(config_json(config, self.redactor))
        now = time.time()
        with self._lock:
            run_id = run_id or new_run_id()
            if run_id in self._runs:
                raise StoreError(f"a run {run_id!r} is already in the run store {LOCATION}: "
                                 "choose another run id, or leave it out")
            run = _Run(run_id=run_id, goal=self.redactor.text(goal if goal is not None else plan.goal),
                       config=config_copy, created=now, updated=now, plan=plan_json(plan, self.redactor),
                       plan_id=self.redactor.text(plan.id))
            run.steps = {st.id: self._entry(st) for st in plan.steps}
            if lineage:
                run.counters["lineage"] = json.loads(counters_json({"lineage": dict(lineage)}, self.redactor))["lineage"]
            self._runs[run_id] = run
        return run_id

    def save_state(self, run_id: str, state: RunStateLike) -> None:
        self.redactor.refresh()
        with self._lock:
            run = self._run(run_id)
            entries = {st.id: self._entry(st) for st in state.plan.steps}
            counters = self._counters(state)
            self._sync_lists(run, state)
            run.steps = entries
            run.plan = plan_json(state.plan, self.redactor)
            # again: a secret learned since the run was created leaves no trace in them
            run.goal, run.plan_id = self.redactor.text(state.plan.goal), self.redactor.text(state.plan.id)
            run.revisions = diffs_json(list(state.revisions), self.redactor)
            run.counters, run.updated = counters, time.time()

    def record_step(self, run_id: str, step: Step | Sequence[Step], state: RunStateLike) -> None:
        steps = [step] if isinstance(step, Step) else list(step)
        with self._lock:
            run = self._run(run_id)
            for st in steps:
                if st.id not in run.steps:
                    raise StoreError(f"step {st.id!r} is not in the stored plan of run {run_id!r}: save_state must "
                                     "be called after the plan changes (a replan) and before its steps are recorded")
            entries, counters = [self._entry(st) for st in steps], self._counters(state)
            self._sync_lists(run, state)
            for entry in entries:
                run.steps[entry.id] = entry
            run.counters, run.updated = counters, time.time()

    def append_events(self, run_id: str, events: Sequence[Event]) -> None:
        records = [event_json(e, self.redactor) for e in events]
        with self._lock:
            run = self._run(run_id)
            run.events.extend(records)
            run.model_calls += sum(1 for e in events if e.kind == "llm.call")
            run.updated = time.time()

    def _sync_lists(self, run: _Run, state: RunStateLike) -> None:
        """Keep the history entries and events ``state`` gained since the last save."""
        history, events = state.history, state.events
        if len(history) < len(run.history) or len(events) < len(run.events):
            raise StoreError(
                f"run {run.run_id!r} has {len(run.history)} history entries and {len(run.events)} events in the "
                f"run store {LOCATION}, but the state has {len(history)} and {len(events)}: a resumed run must "
                "continue from the state loaded from the store"
            )
        new_history = [self._entry(st) for st in history[len(run.history):]]
        new_events = events[len(run.events):]
        records = [event_json(e, self.redactor) for e in new_events]
        run.history.extend(new_history)
        run.events.extend(records)
        run.model_calls += sum(1 for e in new_events if e.kind == "llm.call")

    def _entry(self, step: Step) -> _Entry:
        args, paths = redact_args(step.args, self.redactor)
        return _Entry(step.id, step.status.value, step_json(step, self.redactor, paths), clone(args),
                      self._kept(step.result))

    def _kept(self, value: Any) -> Any:
        """The result itself, unless it holds a known secret (then, as in any store, it is not kept)."""
        if value is None or not self.redactor.has_secrets:
            return value
        text = plain_json_text(value)
        if text is not None and self.redactor.has_known_secret(text):
            return Unrestorable(shown(value, self.redactor), type_name(value),
                                "it held a secret, which is never written")
        return value

    def _counters(self, state: RunStateLike) -> dict[str, Any]:
        return json.loads(counters_json(counters_of(state), self.redactor))

    def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            raise not_found(run_id, LOCATION, self._latest_ids())
        return run

    # ------------------------------------------------------------ reading
    def load_run(self, run_id: str, *, plan_only: bool = False) -> StoredRun:
        with self._lock:
            run = self._run(run_id)
            steps = [e.step() for e in run.steps.values()]
            return StoredRun(
                run_id=run.run_id, goal=run.goal, config=clone(run.config),
                plan=plan_from_record(json.loads(run.plan), steps), counters=clone(run.counters),
                history=[e.step() for e in run.history], revisions=diffs_from_records(json.loads(run.revisions)),
                events=[event_from_record(json.loads(r)) for r in run.events],
                created=run.created, updated=run.updated,
            )

    def list_runs(self, *, limit: int | None = None) -> list[RunSummary]:
        with self._lock:
            runs = self._ordered()[:limit]
            return [
                RunSummary(
                    run_id=r.run_id, goal=r.goal, status=r.counters.get("status", "running"),
                    reason=r.counters.get("reason"), started=r.created, updated=r.updated,
                    steps_done=sum(1 for e in r.steps.values() if e.status == "completed"),
                    steps_total=len(r.steps), model_calls=r.model_calls,
                    executions=int(r.counters.get("executions", 0) or 0), writer_pid=os.getpid(),
                    plan_id=r.plan_id, parent=(r.counters.get("lineage") or {}).get("parent"),
                    step_counts=step_counts(e.status for e in r.steps.values()), settings=listed_settings(r.config),
                )
                for r in runs
            ]

    def _ordered(self) -> list[_Run]:
        # dicts keep insertion order: newest first by creation time, then by insertion
        runs = list(self._runs.values())
        runs.reverse()
        return sorted(runs, key=lambda r: r.created, reverse=True)

    def _latest_ids(self, n: int = 5) -> list[str]:
        return [r.run_id for r in self._ordered()[:n]]

    def latest_run_id(self, *, plan_id: str | None = None) -> str | None:
        with self._lock:
            if plan_id is None:
                ids = self._latest_ids(1)
            else:
                ids = [r.run_id for r in self._ordered() if r.plan_id == plan_id][:1]
        return ids[0] if ids else None

    def claim_run(self, run_id: str, *, force: bool = False, updated: float | None = None,
                  mine: bool = False) -> None:
        """Runs in memory are written by this process only: nothing to claim but the run's existence."""
        with self._lock:
            self._run(run_id)

    def delete_run(self, run_id: str) -> None:
        with self._lock:
            self._run(run_id)
            forks = [r.run_id for r in self._runs.values() if (r.counters.get("lineage") or {}).get("parent") == run_id]
            if forks:
                raise StoreError(f"run {run_id} has forks that keep its results ({', '.join(forks)}): delete them "
                                 "first, then this run")
            del self._runs[run_id]

    # -------------------------------------------------------------- cache
    def cache_get(self, key: str) -> CacheHit | None:
        with self._lock:
            return self._cache.get(key)

    def cache_put(self, key: str, result: Any, *, tool: str, run_id: str, step_id: str) -> bool:
        kept = self._kept(result)
        if isinstance(kept, Unrestorable):
            return False
        with self._lock:
            self._cache[key] = CacheHit(key=key, result=kept, tool=tool, run_id=run_id, step_id=step_id,
                                        created=time.time())
        return True

    def clear_cache(self) -> int:
        with self._lock:
            n = len(self._cache)
            self._cache.clear()
        return n
