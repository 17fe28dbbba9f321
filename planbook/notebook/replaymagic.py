"""``%replay RUN_OR_NAME [--speed 0.5] [--step]``: a finished run played again in the live view.

The line is read here and handed to :mod:`planbook.views.replay` (which finds the run, plays its
events and leaves the run's record). RUN_OR_NAME is a variable holding a ``RunResult`` (or a
``Plan``: its latest stored run), a run id, or a plan name (its latest run in the session's store).
The store is only read: a path is opened read-only, and a missing file is an error, never a new store.
"""

from __future__ import annotations

import os
from typing import Any

from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class, no_var_expand

from ..data.errors import PlanbookError
from ..data.models import Plan, RunResult
from ..views.replay import Replay, check_speed, find_run
from .magicargs import parse, readable_help


@magics_class
class ReplayMagics(Magics):
    """``%replay``, next to the planbook magics (``plans``: theirs, for the session's store)."""

    def __init__(self, shell: Any, plans: Any) -> None:
        super().__init__(shell)
        self.plans = plans

    @no_var_expand
    @readable_help
    @ma.magic_arguments()
    @ma.argument("run", metavar="RUN_OR_NAME", help="a RunResult variable, a run id, or a plan name (its latest stored run)")
    @ma.argument("--speed", metavar="X", default="1", help="a factor of the run's real pace (0.5: half as fast); each pause lasts at least 0.3 s / X")
    @ma.argument("--step", action="store_true", help="show one moment at a time (a step starting or ending, a plan changing): the view's Next button goes on")
    @line_magic
    def replay(self, line: str) -> Replay:
        """Play a finished run again in the live view, at a pace you can click along with; it ends as
        the run's record. Nothing runs again, and the run store is only read."""
        args = parse(self.replay, line)
        try:
            speed = check_speed(float(args.speed))
        except ValueError:
            raise UsageError(f"%replay --speed {args.speed}: give a number from 0.01 to 100, a factor of the run's "
                             "real pace (0.5 is half as fast)") from None
        result = self._result(args.run)
        try:
            player = Replay(result, speed=speed, step=args.step).show()
        except RuntimeError as exc:
            raise UsageError(f"%replay {args.run}: {exc}") from None
        return player if args.step else player.play()

    def _result(self, word: str) -> RunResult:
        held = self.shell.user_ns.get(word) if self.shell is not None else None
        if isinstance(held, RunResult):
            return held
        name = held.id if isinstance(held, Plan) else word
        choice = self.plans.session.store_choice
        if choice == "off":
            raise UsageError(f"%replay {word}: no RunResult variable {word!r}, and this session keeps no runs "
                             "(%plan_store PATH turns the store on; or replay a result: %replay VARIABLE)")
        if choice == ":memory:":
            where: Any = self.plans.session.store()  # the session's own (a new one holds no runs)
        else:
            from ..store import default_store_path

            where = choice or default_store_path()
            if not os.path.exists(os.path.expanduser(os.fspath(where))):
                raise UsageError(f"%replay {word}: no RunResult variable {word!r}, and no run store at "
                                 f"{os.fspath(where)} yet (%run_plan stores runs there)")
        try:
            return find_run(name, store=where)
        except PlanbookError as exc:
            raise UsageError(f"%replay {word}: {exc}") from None


def register(ipython: Any, plans: Any) -> ReplayMagics:
    """Register ``%replay`` beside the planbook magics ``plans`` (whose session knows the store)."""
    magics = ReplayMagics(ipython, plans)
    ipython.register_magics(magics)
    return magics


def unregister(ipython: Any) -> None:
    """Remove ``%replay`` (``%unload_ext planbook``)."""
    manager = ipython.magics_manager
    fn = manager.magics["line"].get("replay")
    if fn is not None and isinstance(getattr(fn, "__self__", None), ReplayMagics):
        del manager.magics["line"]["replay"]
    manager.registry.pop(ReplayMagics.__name__, None)


__all__ = ["ReplayMagics", "register", "unregister"]
