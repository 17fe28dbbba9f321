"""What the magics remember between cells: the runs kept per plan NAME, how each ``%%plan``
cell made its plan, where runs are stored, the background runs, the MCP servers started.

One :class:`Session` per shell (held by :class:`~planbook.notebook.magics.PlanMagics`). The
magics parse a line and decide; the session keeps what outlives the cell, and answers the
questions that need it (is there a stored run this kernel forgot? which store? which cache?).
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError

from ..data.models import Event, Plan
from ..engine.runner import Runner
from .words import magic_words


@dataclass
class Origin:
    """What a ``%%plan`` cell used, so ``%run_plan NAME`` can use the same by default."""

    plan: Plan
    tools: str | None = None
    agents: str | None = None
    planner: str | None = None
    model: str | None = None
    planner_obj: Any = None
    #: the model calls that made the plan, counted in the usage of its first run
    planning: list[Event] = field(default_factory=list)


@dataclass
class Run:
    """A run kept for plan NAME, with the options it was started with (its ``key``)."""

    value: Any
    key: tuple[Any, ...]
    runner: Runner
    objects: list[Any] = field(default_factory=list)  # keeps looked-up objects alive for the identity key


#: what ``%plan_store`` says about the step cache
_REUSE = {None: "earlier results of the same tool calls are reused only for tools registered with cache=True",
          True: "earlier results of the same tool calls are reused",
          False: "earlier results of the same tool calls are not reused"}


def _one_cache_flag(cache: bool, no_cache: bool) -> None:
    if cache and no_cache:
        raise UsageError("--cache and --no-cache contradict each other: give one of them")


class Session:
    """The notebook's state between cells (see the module's docstring)."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.origins: dict[str, Origin] = {}
        #: where runs persist: None is the default file (opened on the first run), "off" is nowhere
        self.store_choice: str | None = None
        self._store: Any = None
        #: the cross-run step cache of this notebook's runs: None (only tools registered with
        #: ``cache=True``), True (``%plan_store --cache``: every tool that allows it), False (none)
        self.cache: bool | None = None
        #: the review cell inserted per NAME (a review cell run again inserts nothing more)
        self.reviewed: dict[str, str] = {}
        #: the MCP servers each %plan_tools NAME started (closed when the cell runs again)
        self.tool_servers: dict[str, list[Any]] = {}
        #: the runner %run_plan NAME --background started last in this kernel
        #: (held weakly: a finished run's plan and history must not live as long as the kernel; a
        #: run nobody holds can only be continued with --resume, as after a restart)
        self.background: dict[str, weakref.ref[Runner]] = {}

    # ------------------------------------------------------------------ the store
    def store(self) -> Any:
        """The run store of this session (opened when first needed), or None when it is off."""
        if self.store_choice == "off":
            return None
        if self._store is None:
            from ..store import default_store_path, open_store

            try:
                self._store = open_store(self.store_choice or default_store_path())
            except Exception as exc:  # noqa: BLE001 - a damaged store must not hide behind a traceback
                raise UsageError(f"{exc} (%plan_store PATH chooses another file; %plan_store off keeps no runs)") from None
        return self._store

    def choose_store(self, where: str | None, cache: bool, no_cache: bool) -> str:
        """``%plan_store WHERE [--cache|--no-cache]``: change what was asked, say where runs go."""
        _one_cache_flag(cache, no_cache)
        choice = self.store_choice if where is None else None if where == "default" else where
        reuse = self.cache
        if where is not None or cache or no_cache:
            reuse = True if cache else False if no_cache else None
        if reuse and choice == "off":
            raise UsageError("--cache reuses results kept in a run store, and %plan_store off keeps none: "
                             "choose a store (%plan_store default --cache)")
        if where is not None:
            self.store_choice, self._store = (os.path.expanduser(choice) if choice else choice), None  # ~: home
        self.cache = reuse
        places = {"off": "nowhere (runs are not kept)", ":memory:": "in memory (until the kernel stops)"}
        from ..store import default_store_path

        place = places.get(self.store_choice or "", str(self.store_choice or default_store_path()))
        return f"planbook keeps runs {place if self.store_choice in places else 'in ' + place}; {_REUSE[self.cache]}"

    def cache_choice(self, cache: bool, no_cache: bool, resume: bool) -> bool | None:
        """The step cache of one run: its own flag, else the notebook's (``%plan_store``)."""
        _one_cache_flag(cache, no_cache)
        if resume and (cache or no_cache):
            raise UsageError("--resume finishes the stored run with the cache choice it started with (its completed "
                             "steps never run again): drop --cache/--no-cache")
        chosen = True if cache else False if no_cache else self.cache
        if chosen and self.store_choice == "off":
            raise UsageError("--cache reuses results kept in a run store, and %plan_store off keeps none: "
                             "%plan_store default turns it on")
        return chosen

    @property
    def keeps_runs_on_disk(self) -> bool:
        """Whether a kernel restart leaves this session's runs behind to resume."""
        return self.store_choice not in ("off", ":memory:")

    # ------------------------------------------------------------------ stored runs
    def resumed(self, name: str, plan: Any, *, tools: Any, agents: Any, planner: Any, rerun: list[str],
                executor: Any, force: bool = False) -> Any:
        """The latest stored run of plan NAME, ready to continue (or its result, if it ended)."""
        from ..data.errors import NothingToResume, ResumeError
        from ..engine.resume import resume

        store = self.store()
        if store is None:
            raise UsageError("--resume needs a run store, and %plan_store is off: %plan_store default turns it on")
        run_id = store.latest_run_id(plan_id=name)  # one indexed query, whatever the store holds
        if run_id is None:
            raise UsageError(f"no stored run of plan {name!r} in {store.location}: %run_plan {name} starts one")
        try:
            return resume(run_id, store=store, tools=tools, agents=agents, planner=planner,
                          plan=plan if isinstance(plan, Plan) else None, rerun=rerun, executor=executor, run=False,
                          force=force)
        except NothingToResume:
            return store.load_run(run_id).result()
        except ResumeError as exc:
            raise UsageError(magic_words(str(exc))) from None

    def refuse_over_stored(self, name: str, background: bool = False) -> None:
        """After a kernel restart the kernel has no run of NAME, but the store may hold one
        that did not finish: a plain ``%run_plan NAME`` (or ``--background``) would start over
        from step 1 and repeat its work. Refused before anything runs, saying how to continue or
        start over (the same way it was asked: in the foreground or in the background)."""
        store = self.store()
        if store is None:
            return
        run_id = store.latest_run_id(plan_id=name)
        if run_id is None:
            return
        held = self.background.get(name)
        mine = held() if held is not None else None
        if mine is not None and mine.recorder is not None and mine.recorder.run_id == run_id:
            return  # this kernel's own background run (paused, or waiting): not left over by a restart
        summary = next((s for s in store.list_runs() if s.run_id == run_id), None)
        if summary is None or summary.damage:
            return
        if summary.status in ("interrupted", "paused"):
            how = summary.status
        elif summary.writer_gone:  # its kernel (or process) died while it ran
            how = "cut short (its kernel stopped while it ran)"
        else:  # completed, failed, or running in a process that is alive (a background run of this kernel)
            return
        also = " --background" if background else ""
        raise UsageError(
            f"plan {name!r} has an unfinished run in the store: run {run_id}, {how}, "
            f"{summary.steps_done}/{summary.steps_total} steps completed. %run_plan {name} --resume{also} continues "
            f"it (completed steps are not run again); %run_plan {name} --restart{also} starts a new run from the "
            "first step"
        )

    def started_in_background(self, name: str, runner: Runner) -> None:
        """Remember the background run of NAME: a paused one is stored unfinished, yet no restart left
        it behind (the latest is enough: only the store's latest run of NAME is checked)."""
        self.background[name] = weakref.ref(runner)

    def origin_of(self, name: str, value: Any) -> Origin | None:
        """How NAME's plan was made, while NAME still holds that plan (else its options no longer apply)."""
        origin = self.origins.get(name)
        return origin if origin is not None and origin.plan is value else None


__all__ = ["Origin", "Run", "Session"]
