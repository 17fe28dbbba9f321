"""Background runs: :func:`start` runs a plan on a thread of its own and returns a :class:`RunHandle`.

The cell that starts a run returns at once, so the notebook stays usable: other cells
run, the live view's buttons reach the kernel (a click is not delivered while a cell
blocks), and decisions steer the run through its one inbox, applied by the runner
(:mod:`planbook.engine.decisions`): the handle only gives them, checked, and never changes the run. The thread runs in a copy of the starting cell's context,
so under ipykernel 7 what it displays belongs to that cell (its parent header), and a
step's printed output goes to its pane only (captured per thread by the runner).
A kernel interrupt (SIGINT) reaches only the main thread: it never stops a background
run, which has its own :meth:`RunHandle.stop`.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import threading
from collections.abc import Generator, Mapping
from typing import Any

from ..data.models import Plan, RunResult, Status
from ..engine.approvals import Decision, Who, check_edit
from ..engine.decisions import Door, RunEnded
from ..engine.runner import Runner, takes_runner_options

__all__ = ["RunHandle", "start", "start_runner"]


class RunHandle:
    """A run going on in the background: ask it how it stands, wait for it, steer it.

    ``status``: ``running``, ``waiting`` (a step waits for your decision), ``paused``,
    then ``completed``/``failed``. ``result`` once it ended; ``wait(timeout)`` or ``await
    handle`` for it. ``pause()`` finishes the running steps and starts nothing new,
    ``resume()`` goes on, ``stop()`` ends it like the ``abort`` policy (running steps finish;
    the result is ``failed (aborted)``). ``approve(id)``, ``skip(id, why)``, ``edit(id,
    **args)`` decide for a step that waits — or will: a decision given before the step asks
    is kept for it, so a notebook can decide in code and run the same way every time. A
    decision covers the step as it is when given (a replan or edit that changes it makes it
    ask again); a later one replaces it, except after a skip (refused: retry the step).

    Displayed in a notebook, the handle is the live view (with its buttons) while the run goes,
    and that output becomes the run's static record when the run ends (every display of it).
    """

    def __init__(self, runner: Runner, *, view: Any = None) -> None:
        self.runner = runner
        self.steering = runner.steer()
        self.steering.answered_elsewhere()
        #: where every decision given here goes (the run applies them)
        self.door: Door = runner.door  # type: ignore[assignment]  # steer() made it
        self._future: concurrent.futures.Future[RunResult] = concurrent.futures.Future()
        #: notified when a step starts waiting, and when the run ends (wait_for_approval)
        self._asked = threading.Condition()
        #: the steps whose ``step.waiting`` was announced: the run writes the wait to its store first,
        #: and a step is in ``waiting`` a moment before that (wait_for_approval returns after both)
        self._announced: set[str] = set()
        runner.subscribe(self._on_event)
        #: the live view's bridge (planbook.views.live.LiveView) when one is shown
        self.view = view
        #: the plan as the run started (what a saved notebook shows where widgets do not run)
        self._initial = runner.plan.copy_plan()
        #: where the handle is displayed in a notebook kernel (planbook.views.steer.HandleDisplays)
        self._displays: Any = None
        self._displays_lock = threading.Lock()
        self._ended = False
        context = contextvars.copy_context()  # the cell's parent header travels with the thread
        self._thread = threading.Thread(target=context.run, args=(self._main,), daemon=True,
                                        name=f"planbook-run-{runner.plan.id}")

    def _begin(self) -> "RunHandle":
        self.steering.check_askers(self.runner)
        self._thread.start()
        return self

    # ------------------------------------------------------------------ the thread
    def _main(self) -> None:
        runner = self.runner
        if self.view is not None:
            self.view.thread = threading.get_ident()  # the view draws on the run's thread from now on
        try:
            result = runner.run()
            while result.status == "paused":  # the run applies decisions until a resume or a stop
                result = runner.run() if self.door.idle() else runner.result()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits, never lost in a thread
            self.runner.release_store()
            self._close_view()
            self._future.set_exception(exc)
        else:
            self.runner.release_store()  # before wait() returns: the run has ended, its file is free
            self._close_view()
            self._future.set_result(result)
        self.door.close()  # an edit or a retry given as the run ended is answered, never left waiting
        with self._asked:
            self._asked.notify_all()

    def _on_event(self, event: Any) -> None:
        if event.kind in ("step.waiting", "run.finished", "run.paused"):
            with self._asked:
                if event.kind == "step.waiting" and event.step is not None:
                    self._announced.add(event.step)
                self._asked.notify_all()

    def _close_view(self) -> None:
        """The run ended: the view draws its last state, and every display of the handle becomes
        the run's static record (before whoever waits is told, so ``wait()`` finds it ready)."""
        if self.view is not None:
            self.view.close()
        with self._displays_lock:
            displays, self._ended = self._displays, True
        if displays is not None:
            from ..views.steer import final_record

            displays.end(final_record(self.runner, self.view))

    def _settle_displays(self) -> None:
        """On the kernel's main thread, once the run ended: send the record to the displays again,
        in the running cell (see planbook.views.steer.HandleDisplays)."""
        displays = self._displays
        if displays is not None and threading.current_thread() is threading.main_thread():
            displays.settle()

    # ------------------------------------------------------------------ state
    @property
    def status(self) -> str:
        """``running``, ``waiting``, ``paused``, ``completed``, ``failed`` (or ``interrupted``)."""
        state = self.runner.state.status
        if state == "running" and self.steering.waiting:
            return "waiting"
        return state

    @property
    def waiting(self) -> list[str]:
        """The steps waiting for your decision, in plan order."""
        waiting = set(self.steering.waiting)
        return [s.id for s in self.runner.plan.steps if s.id in waiting]

    @property
    def done(self) -> bool:
        return self._future.done()

    @property
    def result(self) -> RunResult:
        """The run's result (only once it ended: ``wait()`` or ``await handle`` for it)."""
        if not self._future.done():
            raise RuntimeError(f"the run of plan {self.runner.plan.id!r} is still {self.status}: "
                               "call handle.wait() (or `await handle`) for its result")
        self._settle_displays()
        return self._future.result()

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run ends and return its result; TimeoutError after ``timeout`` s
        (the run goes on). A kernel interrupt stops the waiting, not the run."""
        try:
            result = self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the run of plan {self.runner.plan.id!r} is still {self.status} after {timeout:g} s "
                               f"(it goes on{'; waiting for you: ' + ', '.join(self.waiting) if self.waiting else ''})"
                               ) from None
        finally:
            if self._future.done():
                self._settle_displays()
        return result

    def wait_for_approval(self, timeout: float | None = None) -> list[str]:
        """Block until a step waits for your decision (or the run ended or paused); returns the
        steps that wait ([] when none does). TimeoutError after ``timeout`` s."""
        with self._asked:
            # a step counts once its wait was announced: by then it is in the store too (a process that
            # copies the store when this returns finds the run waiting, as a crash would leave it)
            # (a step the run's callable or prompt is asked about has no announcement: it counts at once)
            asking = self.steering.asking
            told = lambda: any(step in self._announced or step in asking for step in self.waiting)  # noqa: E731
            if not self._asked.wait_for(lambda: told() or self.done or self.status == "paused", timeout):
                raise TimeoutError(f"no step of plan {self.runner.plan.id!r} asked for a decision within "
                                   f"{timeout:g} s (the run is {self.status})")
        return self.waiting

    def __await__(self) -> Generator[Any, None, RunResult]:
        import asyncio  # only when awaited: importing it costs `import planbook` about 50 ms

        result = yield from asyncio.wrap_future(self._future).__await__()
        self._settle_displays()
        return result

    # ------------------------------------------------------------------ controls
    def pause(self, *, who: Who = "api") -> None:
        """Finish the running steps and start nothing new (``resume()`` goes on; a pause given right
        after a resume pauses the run again)."""
        self._running_or_raise("pause")
        self.door.pause(who)

    def resume(self, *, who: Who = "api") -> None:
        """Go on after a pause (a second resume before the run goes on adds nothing)."""
        self.door.resume(who)

    def stop(self, *, who: Who = "api") -> None:
        """End the run like the ``abort`` policy: running steps finish, nothing new starts."""
        if not self.done:
            self.door.stop(who)

    def _running_or_raise(self, what: str) -> None:
        if self.done or self.runner.finished:
            raise RunEnded(f"the run of plan {self.runner.plan.id!r} has ended ({self.status}): nothing to {what}")

    # ------------------------------------------------------------------ decisions
    def approve(self, step_id: str | None = None, *, who: Who = "api") -> None:
        """Let ``step_id`` run (without an id: the one step that waits)."""
        self._running_or_raise("approve")
        self.decide(self._which(step_id, "approve"), Decision.approve(who=who))

    def skip(self, step_id: str | None = None, reason: str = "", *, who: Who = "api") -> None:
        """Do not run ``step_id``: it is ``skipped`` (with your reason), and what needs it is blocked."""
        self._running_or_raise("skip")
        self.decide(self._which(step_id, "skip"), Decision.skip(reason, who=who))

    def edit(self, step_id: str, args: Mapping[str, Any] | None = None, *, who: Who = "api",
             **kwargs: Any) -> None:
        """Run ``step_id`` with new arguments (``args`` replaces them; keywords change some of them).

        They are checked against the tool's signature now (ValueError names each problem);
        the edit is a new revision with a ``revised`` diff. A step that does not wait for
        approval can be edited in a paused run only: then this returns once the edit took
        effect; with the run going on (or a resume on its way) it raises at once."""
        self._running_or_raise("edit")
        step = self._step(step_id)
        new = dict(args) if args is not None else {**step.args, **kwargs}
        if args is not None and kwargs:
            new.update(kwargs)
        checked = check_edit(step, new, self.runner.tools)
        if self.steering.rule.asks(step):
            self.decide(step_id, Decision.edit(checked, who=who))
            return
        # any step that has not started can change in a paused run (a revision with a diff)
        if step.status is not Status.not_started:
            raise ValueError(f"step {step_id!r} is {step.status.value}: only a step that has not started can be "
                             "edited (retry a failed one with handle.retry)")
        self.door.change_paused("edit", step, who, checked)

    def retry(self, step_id: str, *, who: Who = "api") -> None:
        """In a paused run: run failed (or skipped) step ``step_id`` again when the run continues."""
        self._running_or_raise("retry")
        step = self._step(step_id)
        if self.runner.state.status != "paused":
            raise RuntimeError(f"the run of plan {self.runner.plan.id!r} is {self.status}: pause it first "
                               "(a step is retried only in a paused run)")
        if step.status not in (Status.failed, Status.skipped):
            raise ValueError(f"step {step_id!r} is {step.status.value}: only a failed or skipped step can be retried")
        self.door.change_paused("retry", step, who)

    def decide(self, step_id: str, decision: Decision) -> None:
        """Give a :class:`Decision` about ``step_id`` (now, or kept until it asks)."""
        if not isinstance(decision, Decision):
            raise TypeError(f"decide() takes a planbook Decision, got {type(decision).__name__}")
        self._running_or_raise(decision.action)
        step = self._step(step_id)
        if decision.about is None:  # the step as it is now, as the person saw it
            decision = decision.naming(step, self.runner.plan.revision)
        if not self.steering.rule.asks(step):
            raise ValueError(f"step {step_id!r} does not wait for approval (its tool was not registered with "
                             "approve=True and approve= does not name it): there is nothing to decide")
        if step.status is not Status.not_started:
            raise ValueError(f"step {step_id!r} is {step.status.value}: it can no longer be decided about")
        if decision.action == "edit":
            check_edit(step, decision.args or {}, self.runner.tools)
        self.door.decide(step, decision)

    def _step(self, step_id: str) -> Any:
        return self.runner.plan.step(step_id)  # KeyError names the known ids

    def _which(self, step_id: str | None, what: str) -> str:
        if step_id is not None:
            return step_id
        waiting = self.waiting
        if len(waiting) != 1:
            raise ValueError(f"say which step to {what}: "
                             + (f"{len(waiting)} steps wait ({', '.join(waiting)})" if waiting
                                else "no step waits yet (a decision given early needs the step's id)"))
        return waiting[0]

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        return f"<RunHandle plan {self.runner.plan.id!r}: {self.status}>"

    def _ipython_display_(self) -> None:
        """Displayed in a notebook kernel: the live view through a display with a display id, which
        becomes the run's static record when the run ends (each display, if shown twice)."""
        from ..views.publish import display
        from ..views.show import choose_view

        if choose_view() not in ("widget", "html"):  # a terminal: no display to update later
            display(self._live_bundle()[0], raw=True)
            return
        with self._displays_lock:
            if self._displays is None:
                from ..views.steer import HandleDisplays

                self._displays = HandleDisplays(self)
                if self._ended:  # the run ended before its first display: show its record
                    from ..views.steer import final_record

                    self._displays.final = final_record(self.runner, self.view)
            displays = self._displays
        displays.show()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        """The live view while the run goes (the record once a display showed how it ended)."""
        final = self._displays.final if self._displays is not None else None
        return dict(final) if final is not None else self._live_bundle(include, exclude)

    def fork(self, parent: Any, *, at: str, **options: Any) -> "RunHandle":
        """Fork ``parent`` (this run's id or result) at ``at`` in the background: the view's Fork from
        here (the views sit below this surface, so they start a child through the handle they steer)."""
        child = fork(parent, at=at, background=True, **options)
        assert isinstance(child, RunHandle)
        return child

    def _live_bundle(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The live view (its widget where widgets run). The other forms show the plan as the run
        started, whatever it did since: they do not depend on how far the run got by the time
        the cell's output was made (notebooks compare them)."""
        from ..views.html import DIM, NO_MATH, esc, state_html
        from ..views.state import ViewState
        from ..views.text import state_markdown

        line = self.runner.secrets.line(f"background run of plan {self.runner.plan.id!r} ({len(self._initial.steps)} "
                                        "steps): the live view shows it; handle.status, handle.wait()")
        start = ViewState.of(self._initial)
        data: dict[str, Any] = {
            "text/plain": line,
            "text/html": f'<div class="{NO_MATH}" style="{DIM};font-size:11px">{esc(line)}; as it started:'
                         f"</div>{state_html(start)}",
            "text/markdown": state_markdown(start),
        }
        target = getattr(self.view, "target", None)
        if target is None or not hasattr(target, "_repr_mimebundle_"):
            return data, {}
        bundle = target._repr_mimebundle_(include, exclude)
        widget, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        return {**widget, **data}, metadata


def start(plan: Plan | str, *, view: bool | None = None, **options: Any) -> RunHandle:
    """Start a run in the background and return its :class:`RunHandle` at once.

    Takes the options of :func:`planbook.run` (``approve=``, ``approve_timeout=``, ``parallel=``,
    ``store=``, ...). ``view``: show the live view when the handle is displayed (default: in a
    notebook kernel). Steps that ask for approval wait for ``handle.approve(id)`` (or the view's
    buttons) instead of needing a callable.
    """
    return start_runner(Runner(plan, **options), view=view)


start = takes_runner_options(
    inspect.Parameter("view", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="bool | None"),
    returns=RunHandle)(start)


def start_runner(runner: Runner, *, view: bool | None = None) -> RunHandle:
    """Start a built runner in the background (``%run_plan --background`` comes here too)."""
    bridge = None
    if view or view is None:
        from ..views.steer import background_view  # the views layer, loaded only when a view is wanted

        bridge = background_view(runner, required=bool(view))
    handle = RunHandle(runner, view=bridge)
    if bridge is not None:
        from ..views.steer import connect

        connect(bridge, handle)
    return handle._begin()


def fork(run: Any, *, at: Any = None, background: bool = False, view: bool | None = None,
         **options: Any) -> RunResult | RunHandle:
    """Fork a run at a step and run the child: what if this step had other arguments, had returned
    something else, or the plan were another?

    ``run``: a :class:`RunResult`, a run id, or a plan name meaning its latest stored run (``store=``:
    where it was saved; a result in memory is forked in memory). ``at``: the step to fork at.
    ``args={...}`` runs it again with these arguments changed; ``result=VALUE`` pins what it returned
    without running it; ``plan=`` takes an edited plan (the fork points are the steps whose call
    changed); no edit is a control fork (what differs then is replay noise). The steps the change
    cannot reach are kept: not run again, their results read from the parent (``reuse=``:
    ``"independent"`` (default), ``"identical"`` also keeps a dependent whose resolved call is
    unchanged, ``"ancestors"`` keeps only the fork point's needs, as LangGraph's fork does).
    ``tools=``, ``agents=``, ``planner=``, ``rerun=`` (steps whose tool is ``idempotent=False`` that
    may run again) and the options of :func:`planbook.run` (default: the parent's). Returns the
    child's :class:`RunResult` (``result.parent``, ``result.lineage``), or with ``background=True``
    a :class:`RunHandle` as :func:`planbook.start` gives. Compare with :func:`planbook.diff_runs`.
    """
    from ..engine.fork import fork as fork_run

    if not background:
        return fork_run(run, at=at, **options)
    runner = fork_run(run, at=at, start=False, **options)
    return start_runner(runner, view=view)
