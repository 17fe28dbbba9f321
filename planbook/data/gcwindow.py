"""Keep the garbage collector's cost per step flat in long runs.

A run keeps a few small objects per execution (its history, events, timing records).
CPython's full collections scan every tracked object, so in a 100,000-step run each
one was scanned again and again, and the per-step cost doubled (measured with
``benchmarks/engine_overhead.py``). While a run goes, this moves the objects that have
survived so far into the collector's permanent generation every few thousand
executions (``gc.freeze``), so each is scanned a bounded number of times; when the run
returns, everything is handed back (``gc.unfreeze``) and collected as usual.

Young garbage is collected before each freeze, so what is held back is at most the
garbage that was already old. Nothing is done when the process froze objects itself
(a pre-fork server): their freeze is theirs to undo, not ours.

Before a run, checking its plan runs with the collector paused (``collector_paused``);
a long plan's copy then goes straight to the oldest generation, by the same rules.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: executions between two freezes
EVERY = 4096

#: steps from which a run's copy of its plan is kept out of the young generations (see
#: collector_paused): below it, the young collection that must come first costs about what
#: scanning the copy would (250-340 µs against a 2,000-step plan, benchmark section 1)
KEEP_FROM = 4096


#: the same when a run is created in a store: its rows' signatures and args copies are about
#: six more objects a step that live as long as the run. Collection time per step of a
#: stored run, with a 200,000-object heap beside, left young -> kept: 500 steps 3.5 -> 4.1 µs,
#: 700 steps 4.1 -> 2.7, 1,000 steps 4.6 -> 3.4, 2,000 steps 6.2 -> 3.5: it pays from 500-700
#: steps, and this keeps a margin
KEEP_STORED_FROM = 1024


def worth_keeping(steps: int, *, stored: bool = False) -> bool:
    """Whether a plan of ``steps`` steps is long enough for ``collector_paused(keep=True)`` to
    pay; ``stored``: for creating its run in a store."""
    return steps >= (KEEP_STORED_FROM if stored else KEEP_FROM)


class FreezeWindow:
    def __init__(self, *, active: bool = True) -> None:
        self.active = active and gc.isenabled() and gc.get_freeze_count() == 0
        self.count = 0
        self.froze = False

    def tick(self) -> None:
        """Called once per recorded execution."""
        self.count += 1
        if self.active and self.count % EVERY == 0:
            gc.collect(1)  # young garbage goes now, not into the permanent generation
            gc.freeze()
            self.froze = True


@contextmanager
def freeze_window() -> Iterator[FreezeWindow]:
    window = FreezeWindow()
    try:
        yield window
    finally:
        if window.froze:
            gc.unfreeze()


@contextmanager
def collector_paused(*, keep: bool = False) -> Iterator[None]:
    """No collections while planbook reads, copies or checks a plan (no user code runs there).

    Reading a spec or copying a 100,000-step plan makes half a million small objects that
    all live on; collecting while they are made rescans them (and the caller's heap)
    several times over. The collector is switched back on, if it was on, however it ends.

    ``keep``: what is made here lives on (a run's copy of its plan and its indexes). Left
    young, it would all be scanned by the first collection after this (0.5 µs a step at
    100,000 steps, a pass over memory no cache holds), then again when it is promoted.
    Instead, when the block ends normally, it joins the oldest generation at once:
    ``gc.freeze()`` then ``gc.unfreeze()`` move whole generations, in constant time. The
    caller's young objects are collected first (a young collection, as would have come
    soon anyway), so no young garbage of theirs is promoted with it. Nothing is moved when
    objects are frozen already (a pre-fork server, a run going on in another thread): that
    freeze is not ours to undo. After an exception nothing is moved either: what was made
    is garbage then.
    """
    was_enabled = gc.isenabled()
    promote = keep and was_enabled and gc.get_freeze_count() == 0
    if promote and gc.get_count()[:2] != (0, 0):
        gc.collect(1)
    gc.disable()
    try:
        yield
        if promote and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
    finally:
        if was_enabled:
            gc.enable()
