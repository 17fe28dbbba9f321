"""What a run writes to its store, and when: the runner's only link to :mod:`planbook.store`.

The durability rule: a step's result and status are in the store before the next step
starts. Status changes are collected and written together with the start of the next
call (one transaction per step), and the whole state is saved at a replan, a pause, an
interrupt and the end. A crash therefore loses at most the outcome of the call that
was running, which a resume runs again (or, for a tool declared ``idempotent=False``,
asks about first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..data.gcwindow import collector_paused, worth_keeping
from ..data.models import Step

if TYPE_CHECKING:  # a run without a store never loads the store package (import planbook stays light)
    from ..store.base import RunStore

#: how the note on a step begins when the cache was asked for and this call could not use it
UNCACHED_NOTE = "not cached: "


class RunRecorder:
    """Writes one run to one store; owns the step cache lookups of that run."""

    def __init__(self, store: RunStore, *, cache: bool | None, run_id: str | None = None, secrets: Any = None) -> None:
        from ..store.base import RedactingStore  # loaded already: a store was made

        self.store = store
        if secrets is not None and isinstance(store, RedactingStore):
            # the run's secrets (a password arg, a token a step returned) reach the file as ***
            secrets.on_learn(store.redactor.add_secrets)
        #: the run's cache choice: True (every tool that allows it), False (none), None (only
        #: tools registered with ``cache=True``); see :func:`uses_cache`
        self.cache = cache
        #: why the last call :meth:`cache_key` was asked about is not cached although it was asked to be
        self.uncached: str | None = None
        self.run_id = run_id
        self._changed: dict[str, Step] = {}
        #: this process holds the run's claim: it created the run, or claimed it when it
        #: (re)started writing it; a pause, an interrupt or the end lets it go
        self._claimed = False

    def begin(self, state: Any, config: dict[str, Any], run_id: str | None = None) -> None:
        """Create the run in the store under ``run_id`` (a resumed run exists already) and save its state.

        A fork's kept steps are written as references to its parent's rows (``lineage``), never copied."""
        if self.run_id is None:
            lineage = getattr(state, "lineage", None)
            fork = {"lineage": lineage} if lineage else {}
            # a row and what it was written from, for every step: all of it lives on, as the
            # plan's copy does (see gcwindow.collector_paused)
            with collector_paused(keep=worth_keeping(len(state.plan.steps), stored=True)):
                self.run_id = self.store.create_run(state.plan, goal=state.plan.goal, config=config, run_id=run_id,
                                                    **fork)
            self._claimed = True
            # the plan was just written as it is (a full save would write every step again):
            # what the state adds is its counters and first events
            self._changed.clear()
            self.store.record_step(self.run_id, [], state)
        else:
            self.save(state)

    def _claim(self, state: Any) -> None:
        """Before the first write of a run going on again (a paused run continued, a resume):
        claim it, so a run another live process took meanwhile stops here, before anything runs."""
        if self._claimed or state.status != "running":
            return
        from ..store.base import ClaimingStore

        if isinstance(self.store, ClaimingStore) and self.run_id is not None:
            # this process wrote it last: anyone else meanwhile makes its state stale
            self.store.claim_run(self.run_id, mine=True)
        self._claimed = True

    def _written(self, state: Any) -> None:
        if state.status != "running":
            self._claimed = False  # paused, interrupted or ended: another process may take it

    def _created(self) -> str:
        """The run's id in the store (it was created by :meth:`begin`, or adopted from a resume)."""
        run_id = self.run_id
        if run_id is None:
            raise RuntimeError("the run is not in its store yet: begin() creates it before anything is written")
        return run_id

    def changed(self, step: Step) -> None:
        """``step``'s status or result changed: written with the next call's start, or the next save."""
        self._changed[step.id] = step

    def before_call(self, step: Step, state: Any) -> None:
        """The durability point: what changed so far, and ``step`` now in progress."""
        self._claim(state)
        self._changed.pop(step.id, None)
        steps = [*self._changed.values(), step]
        self._changed.clear()
        self.store.record_step(self._created(), steps, state)

    def save(self, state: Any) -> None:
        """Everything: after the plan itself changed (a replan, a first plan, a resumed run)."""
        self._claim(state)
        self._changed.clear()
        self.store.save_state(self._created(), state)
        self._written(state)

    def flush(self, state: Any) -> None:
        """What changed since the last write, and the counters (a pause, the end): rewriting
        every step of a long plan at its end cost as much as a tenth of the run's writes."""
        self._claim(state)
        steps = list(self._changed.values())
        self._changed.clear()
        self.store.record_step(self._created(), steps, state)
        self._written(state)

    # ------------------------------------------------------------------ cache
    def cache_key(self, tool: Any, args: dict[str, Any]) -> str | None:
        """The key of this call, or None when it must not come from (or go to) the cache.

        Only calls :func:`uses_cache` allows are keyed. Besides the tool's name and
        arguments, the key holds the tool's ``version`` or, when it gives none, a
        fingerprint of its code (defaults, closure and wrapped function included): two
        notebooks' different ``add`` tools, or a tool edited since, never share a result.
        A call with a secret in it is never keyed (see :mod:`planbook.store.cachekey`);
        :attr:`uncached` then says why.
        """
        self.uncached = None
        if not uses_cache(tool, self.cache):
            return None
        # here, not above: only a cached call loads the key's makers (and the store package, sqlite3 with it)
        from ..store.cachekey import code_fingerprint, fingerprint_problem, step_cache_key, why_uncacheable

        secret = self._secret_text()
        version = getattr(tool, "version", None)
        if version is None:
            version = code_fingerprint(tool.fn, secret_text=secret)
            if version is None:
                self.uncached = f"tool {tool.name!r} cannot be fingerprinted: {fingerprint_problem(tool.fn, secret_text=secret)}"
                return None
        key = step_cache_key(tool.name, args, version=version, secret_text=secret)
        if key is None:
            self.uncached = f"its arguments cannot be keyed: {why_uncacheable(args, secret_text=secret)}"
        return key

    def _secret_text(self) -> Any:
        from ..store.base import RedactingStore

        if not isinstance(self.store, RedactingStore):
            return None
        redactor = self.store.redactor
        return lambda text: redactor.text(text) != text

    def cached(self, key: str) -> Any:
        return self.store.cache_get(key)

    def remember(self, key: str, result: Any, *, tool: str, step_id: str) -> None:
        self.store.cache_put(key, result, tool=tool, run_id=self._created(), step_id=step_id)


def uses_cache(tool: Any, run_cache: bool | None) -> bool:
    """Whether a step of ``tool`` may be answered from, and stored in, the cross-run step cache.

    Off unless asked for: a tool that reads the world (a clock, a price, a file) would
    otherwise serve an earlier run's answer. ``idempotent=False`` is never cached (its
    side effect would be skipped); ``cache=False`` on the tool or on the run (``--no-cache``)
    turns it off; ``@planbook.tool(cache=True)`` or a run's ``cache=True`` turns it on.
    Agent steps never reach here. A resumed run's completed steps are not affected: they
    are never run again, cache or not.
    """
    if tool is None or not getattr(tool, "idempotent", True) or run_cache is False:
        return False
    wanted = getattr(tool, "cache", None)
    return bool(wanted) if wanted is not None else run_cache is True
