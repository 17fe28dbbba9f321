"""What a run writes to its store, and when: the runner's only link to :mod:`planbook.store`.

The durability rule: a step's result and status are in the store before the next step
starts. Status changes are collected and written together with the start of the next
call (one transaction per step), and the whole state is saved at a replan, a pause, an
interrupt and the end. A crash therefore loses at most the outcome of the call that
was running, which a resume runs again (or, for a tool declared ``idempotent=False``,
asks about first).
"""

from __future__ import annotations

from typing import Any

from .models import Step


class RunRecorder:
    """Writes one run to one store; owns the step cache lookups of that run."""

    def __init__(self, store: Any, *, cache: bool, run_id: str | None = None) -> None:
        self.store = store
        self.cache = cache
        self.run_id = run_id
        self._changed: dict[str, Step] = {}
        #: this process holds the run's claim: it created the run, or claimed it when it
        #: (re)started writing it; a pause, an interrupt or the end lets it go
        self._claimed = False

    def begin(self, state: Any, config: dict[str, Any]) -> None:
        """Create the run in the store (a resumed run exists already) and save its state."""
        if self.run_id is None:
            self.run_id = self.store.create_run(state.plan, goal=state.plan.goal, config=config)
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
        claim = getattr(self.store, "claim_run", None)
        if claim is not None:
            claim(self.run_id, mine=True)  # this process wrote it last: anyone else meanwhile makes its state stale
        self._claimed = True

    def _written(self, state: Any) -> None:
        if state.status != "running":
            self._claimed = False  # paused, interrupted or ended: another process may take it

    def changed(self, step: Step) -> None:
        """``step``'s status or result changed: written with the next call's start, or the next save."""
        self._changed[step.id] = step

    def before_call(self, step: Step, state: Any) -> None:
        """The durability point: what changed so far, and ``step`` now in progress."""
        self._claim(state)
        self._changed.pop(step.id, None)
        steps = [*self._changed.values(), step]
        self._changed.clear()
        self.store.record_step(self.run_id, steps, state)

    def save(self, state: Any) -> None:
        """Everything: after the plan itself changed (a replan, a first plan, a resumed run)."""
        self._claim(state)
        self._changed.clear()
        self.store.save_state(self.run_id, state)
        self._written(state)

    def flush(self, state: Any) -> None:
        """What changed since the last write, and the counters (a pause, the end): rewriting
        every step of a long plan at its end cost as much as a tenth of the run's writes."""
        self._claim(state)
        steps = list(self._changed.values())
        self._changed.clear()
        self.store.record_step(self.run_id, steps, state)
        self._written(state)

    # ------------------------------------------------------------------ cache
    def cache_key(self, tool: Any, args: dict[str, Any]) -> str | None:
        """The key of this call, or None when it must not be cached.

        Besides the tool's name and arguments, the key holds the tool's ``version`` or,
        when it gives none, a fingerprint of its code: two notebooks' different ``add``
        tools, or a tool edited since, never share a result.
        """
        if not (self.cache and getattr(tool, "cache", True)):
            return None
        from .store import step_cache_key

        version = getattr(tool, "version", None)
        return step_cache_key(tool.name, args, version=version if version is not None else code_fingerprint(tool.fn))

    def cached(self, key: str) -> Any:
        return self.store.cache_get(key)

    def remember(self, key: str, result: Any, *, tool: str, step_id: str) -> None:
        self.store.cache_put(key, result, tool=tool, run_id=self.run_id, step_id=step_id)


def code_fingerprint(fn: Any) -> str:
    """A digest of what a function does (its bytecode, constants and names), stable across processes."""
    import hashlib

    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None:  # a builtin or a callable object without Python code: its qualified name
        return f"{type(fn).__module__}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    digest = hashlib.sha256()
    todo = [code]
    while todo:  # nested functions and comprehensions are constants of their parent
        current = todo.pop()
        digest.update(current.co_code)
        digest.update(repr(current.co_names).encode())
        for const in current.co_consts:
            if hasattr(const, "co_code"):
                todo.append(const)
            else:
                digest.update(repr(const).encode())
    return "code:" + digest.hexdigest()[:16]
