"""The ready set over a plan's dependency graph.

A step is *ready* when it has not started and every step it ``needs`` is completed.
Ready steps are handed out in plan order (the reading and display order), so a serial
run takes exactly the first runnable step of the plan each time. A step whose need
failed, was skipped or is blocked becomes ``blocked`` itself, through any number of
levels.

Why not ``graphlib.TopologicalSorter``: a run un-does work (a retry or an interrupt puts
a step back), which the sorter cannot; this keeps its idea — a count of unmet needs
per step and a ready set — in a form that can. Each step is touched O(needs) times,
so scheduling is linear in the size of the plan; cycles never reach here (validation
finds them without recursion).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection

from ..data.models import Plan, Status, Step

_DEAD = (Status.failed, Status.skipped, Status.blocked)


class Scheduler:
    """Tracks which steps of one plan revision may run now.

    ``on_blocked(step, dead_needs)`` is called for each step it blocks (the runner emits
    ``step.blocked``). Call :meth:`rebuild` after a step's status changed behind its back
    (a replan, a retry put back by hand, a resumed run).
    """

    def __init__(
        self, plan: Plan, on_blocked: Callable[[Step, list[str]], None], *, position: dict[str, int] | None = None
    ) -> None:
        self.on_blocked = on_blocked
        self.rebuild(plan, position=position)

    def rebuild(
        self, plan: Plan, undecided: Collection[str] = (), *, position: dict[str, int] | None = None
    ) -> None:
        """Index ``plan`` afresh. ``undecided``: failed steps whose policy is still to be
        applied (an interrupt came first); a retry may yet run them, so what needs them
        is not blocked. ``position``: each step id's index in ``plan.steps`` when the caller
        has it (validation builds it: see planbook.spec.validate.checked_positions), its keys in
        plan order; it becomes the scheduler's own."""
        self.plan = plan
        steps = plan.steps
        if position is None:
            position = {s.id: i for i, s in enumerate(steps)}
        self.position = position
        # one key per step, in plan order (so each key goes with its step): filled in one C
        # loop, without hashing again, rather than one insertion per step
        self.by_id = dict(zip(position, steps)) if len(position) == len(steps) else {s.id: s for s in steps}
        dependents: dict[str, list[str]] = {}
        #: not-started steps that need others: how many of their needs are not met yet (a
        #: step that needs nothing is ready at once and is never counted down)
        unmet: dict[str, int] = {}
        self.dependents, self.unmet = dependents, unmet
        #: failed steps whose dependents run anyway
        kept: set[str] = getattr(self, "released", set())
        released = self.released = kept & position.keys()
        heap: list[int] = []
        self._heap = heap
        dead: list[Step] = []
        not_started, completed, failed = Status.not_started, Status.completed, Status.failed
        # one pass, one lookup per need: this runs for every plan before it starts, at any size
        for i, step in enumerate(steps):
            sid, needs = step.id, step.needs
            if len(needs) > 1:
                needs = list(dict.fromkeys(needs))
            for need in needs:
                waiting = dependents.get(need)
                if waiting is None:
                    dependents[need] = [sid]
                else:
                    waiting.append(sid)
            status = step.status
            if status is not_started:
                if not needs:
                    heap.append(i)
                    continue
                count = 0
                for need in needs:
                    state = steps[position[need]].status
                    if state is not completed and not (state is failed and need in released):
                        count += 1
                unmet[sid] = count
                if count == 0:
                    heap.append(i)
            elif status in _DEAD and sid not in released and sid not in undecided:
                dead.append(step)
        # no heapify: positions were appended in increasing order, and a sorted list is a heap
        for step in dead:
            self._block_dependents(step)

    def clear(self) -> None:
        """Let go of the indexes (a finished run keeps no second view of its plan); rebuild to use again."""
        self.by_id, self.position, self.dependents, self.unmet, self._heap = {}, {}, {}, {}, []

    # ----------------------------------------------------------- handing out
    def peek(self) -> Step | None:
        """The first ready step in plan order, without taking it."""
        self._drop_stale()
        return self.plan.steps[self._heap[0]] if self._heap else None

    def take(self) -> Step | None:
        """Take the first ready step in plan order (None when nothing is ready)."""
        self._drop_stale()
        if not self._heap:
            return None
        return self.plan.steps[heapq.heappop(self._heap)]

    def take_peeked(self) -> Step:
        """Take the step :meth:`peek` just returned (nothing changed in between)."""
        return self.plan.steps[heapq.heappop(self._heap)]

    def ready_count(self) -> int:
        """About how many steps are ready (an upper bound: stale entries are dropped lazily)."""
        return len(self._heap)

    def _drop_stale(self) -> None:
        # a step can sit in the heap after its status changed (blocked, reset by a policy)
        heap, steps = self._heap, self.plan.steps
        while heap and steps[heap[0]].status is not Status.not_started:
            heapq.heappop(heap)

    # --------------------------------------------------------------- outcomes
    def completed(self, step: Step) -> None:
        """``step`` completed: its dependents have one unmet need fewer."""
        for dep_id in self.dependents.get(step.id, ()):
            if dep_id in self.unmet:
                self.unmet[dep_id] -= 1
                if self.unmet[dep_id] == 0 and self.by_id[dep_id].status is Status.not_started:
                    heapq.heappush(self._heap, self.position[dep_id])

    def release(self, step: Step) -> None:
        """``step`` failed, but its dependents may run anyway (the ``continue`` policy)."""
        self.released.add(step.id)
        self.completed(step)

    def ended_without_result(self, step: Step) -> None:
        """``step`` failed for good, was skipped or blocked: block what needs it."""
        self._block_dependents(step)

    def again(self, step: Step) -> None:
        """``step`` is ``not_started`` again (a retry, an interrupted call): it is ready once more."""
        if step.id in self.position and all(self._satisfied(self.by_id[n]) for n in step.needs):
            if step.needs:
                self.unmet[step.id] = 0
            heapq.heappush(self._heap, self.position[step.id])

    def _satisfied(self, need: Step) -> bool:
        return need.status is Status.completed or (need.status is Status.failed and need.id in self.released)

    def _block_dependents(self, step: Step) -> None:
        todo = [step]
        while todo:  # iterative: a chain of thousands of dependents must not recurse
            current = todo.pop()
            for dep_id in self.dependents.get(current.id, ()):
                dep = self.by_id[dep_id]
                if dep.status is not Status.not_started:
                    continue
                dead = [n for n in dict.fromkeys(dep.needs)
                        if self.by_id[n].status in _DEAD and n not in self.released]
                dep.status = Status.blocked
                dep.notes = f"blocked: needs {', '.join(dead)}, which did not complete"
                self.unmet.pop(dep_id, None)
                self.on_blocked(dep, dead)
                todo.append(dep)
