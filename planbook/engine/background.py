"""A run in the background: :func:`start_runner` runs a built runner on a thread of its own and
returns its :class:`RunHandle` at once.

This is the handle's core, the same in a script, under the CLI and in a notebook: ask the run how
it stands, wait for it, and steer it. It displays nothing and imports no front end; a notebook
kernel gets :class:`planbook.notebook.handle.NotebookHandle`, which adds the live view on top
(tqdm's split: a core, and a notebook front). The handle only *gives* decisions to the run's door
(:mod:`planbook.engine.door`), which checks them in the caller's thread and which the run
alone applies: the handle never changes the run.

The thread runs in a copy of the starting thread's context (a notebook cell's parent header
travels with it). A SIGINT reaches only the main thread: it never stops a background run, which
has its own :meth:`RunHandle.stop`.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Generator, Mapping
from typing import Any

from ..data.errors import RunEnded
from ..data.models import Event, RunResult, Status, Step
from .approvals import Decision, Who
from .door import Door
from .fork import fork as fork_run
from .runner import Runner

__all__ = ["RunHandle", "start_runner"]


class RunHandle:
    """A run going on in the background: ask it how it stands, wait for it, steer it.

    ``status``: ``running``, ``waiting`` (a step waits for your decision), ``paused``,
    then ``completed``/``failed``. ``result`` once it ended; ``wait(timeout)`` or ``await
    handle`` for it. ``pause()`` finishes the running steps and starts nothing new,
    ``resume()`` goes on, ``stop()`` ends it like the ``abort`` policy (running steps finish;
    the result is ``failed (aborted)``). ``approve(id)``, ``skip(id, why)``, ``edit(id,
    **args)`` decide for a step that waits — or will: a decision given before the step asks
    is kept for it, so code can decide and run the same way every time. A decision covers
    the step as it is when given (a replan or edit that changes it makes it ask again); a
    later one replaces it, except after a skip (refused: retry the step).

    A front end that shows the run subclasses this and fills in the hooks (``_on_run_thread``,
    ``_run_ended``, ``_result_read``, ``_child``); here they do nothing.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.steering = runner.steer()
        self.steering.answered_elsewhere()
        door = runner.door
        if door is None:  # steer() makes it; a runner without one cannot be steered
            raise RuntimeError("the runner has no door for decisions: build it with planbook.Runner")
        #: where every decision given here goes (the run applies them)
        self.door: Door = door
        self._future: concurrent.futures.Future[RunResult] = concurrent.futures.Future()
        #: notified when a step starts waiting, and when the run ends (wait_for_approval)
        self._asked = threading.Condition()
        #: the steps whose ``step.waiting`` was announced: the run writes the wait to its store first,
        #: and a step is in ``waiting`` a moment before that (wait_for_approval returns after both)
        self._announced: set[str] = set()
        runner.subscribe(self._on_event)
        context = contextvars.copy_context()  # what the starting thread's context holds travels with the run
        self._thread = threading.Thread(target=context.run, args=(self._main,), daemon=True,
                                        name=f"planbook-run-{runner.plan.id}")

    def begin(self) -> RunHandle:
        """Start the run's thread (once a front end has wired what it shows); returns the handle."""
        self.steering.check_askers(self.runner)
        self._thread.start()
        return self

    # ------------------------------------------------------------------ the hooks of a front end
    def _on_run_thread(self) -> None:
        """First thing on the run's thread (a live view draws on it from then on)."""

    def _run_ended(self) -> None:
        """On the run's thread once the run ended, before whoever waits is told (a display ends here)."""

    def _result_read(self) -> None:
        """In the caller's thread, when ``wait()``, ``result`` or ``await`` found the run ended."""

    def _child(self, runner: Runner) -> RunHandle:
        """The handle of a fork started from this one (:meth:`fork`): of the same kind."""
        return start_runner(runner)

    # ------------------------------------------------------------------ the thread
    def _main(self) -> None:
        runner = self.runner
        self._on_run_thread()
        try:
            result = runner.run()
            while result.status == "paused":  # the run applies decisions until a resume or a stop
                result = runner.run() if self.door.idle() else runner.result()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits, never lost in a thread
            runner.release_store()
            self._run_ended()
            self._future.set_exception(exc)
        else:
            runner.release_store()  # before wait() returns: the run has ended, its file is free
            self._run_ended()
            self._future.set_result(result)
        self.door.close()  # an edit or a retry given as the run ended is answered, never left waiting
        with self._asked:
            self._asked.notify_all()

    def _on_event(self, event: Event) -> None:
        if event.kind in ("step.waiting", "run.finished", "run.paused"):
            with self._asked:
                if event.kind == "step.waiting" and event.step is not None:
                    self._announced.add(event.step)
                self._asked.notify_all()

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
        self._result_read()
        return self._future.result()

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run ends and return its result; TimeoutError after ``timeout`` s
        (the run goes on). An interrupt stops the waiting, not the run."""
        try:
            result = self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            waiting = self.waiting
            raise TimeoutError(f"the run of plan {self.runner.plan.id!r} is still {self.status} after {timeout:g} s "
                               f"(it goes on{'; waiting for you: ' + ', '.join(waiting) if waiting else ''})"
                               ) from None
        finally:
            if self._future.done():
                self._result_read()
        return result

    def wait_for_approval(self, timeout: float | None = None) -> list[str]:
        """Block until a step waits for your decision (or the run ended or paused); returns the
        steps that wait ([] when none does). TimeoutError after ``timeout`` s."""
        with self._asked:
            # a step counts once its wait was announced: by then it is in the store too (a process that
            # copies the store when this returns finds the run waiting, as a crash would leave it)
            # (a step the run's callable or prompt is asked about has no announcement: it counts at once)
            asking = self.steering.asking

            def told() -> bool:
                return any(step in self._announced or step in asking for step in self.waiting)

            if not self._asked.wait_for(lambda: told() or self.done or self.status == "paused", timeout):
                raise TimeoutError(f"no step of plan {self.runner.plan.id!r} asked for a decision within "
                                   f"{timeout:g} s (the run is {self.status})")
        return self.waiting

    def __await__(self) -> Generator[Any, None, RunResult]:
        import asyncio  # only when awaited: importing it costs `import planbook` about 50 ms

        result = yield from asyncio.wrap_future(self._future).__await__()
        self._result_read()
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

        The door checks them against the tool's signature before anything is queued (its
        ValueError names each problem); the edit is a new revision with a ``revised`` diff. A
        step that does not wait for approval can be edited in a paused run only: then this
        returns once the edit took effect; with the run going on (or a resume on its way) it
        raises at once."""
        self._running_or_raise("edit")
        step = self._step(step_id)
        if args is not None and not isinstance(args, Mapping):
            raise TypeError(f"handle.edit takes the new arguments of step {step_id!r} as a dict (or as keywords), "
                            f"got {type(args).__name__}")
        new = {**(args if args is not None else step.args), **kwargs}
        if self.steering.rule.asks(step):
            self.decide(step_id, Decision.edit(new, who=who))
            return
        # any step that has not started can change in a paused run (a revision with a diff)
        if step.status is not Status.not_started:
            raise ValueError(f"step {step_id!r} is {step.status.value}: only a step that has not started can be "
                             "edited (retry a failed one with handle.retry)")
        self.door.change_paused("edit", step, who, new)

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
        """Give a :class:`Decision` about ``step_id`` (now, or kept until it asks). The door checks an
        edit's arguments (once, in this thread: its ValueError reaches you before anything is queued)."""
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
        self.door.decide(step, decision)

    def _step(self, step_id: str) -> Step:
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

    # ------------------------------------------------------------------ what-if
    def fork(self, parent: RunResult | str, *, at: str, **options: Any) -> RunHandle:
        """Fork ``parent`` (this run's id or result) at ``at`` and run the child in the background, as
        ``planbook.fork(..., background=True)`` does; the child's handle is of this handle's kind (a
        view's Fork from here starts it through the handle it steers)."""
        return self._child(fork_run(parent, at=at, start=False, **options))

    def __repr__(self) -> str:
        return f"<RunHandle plan {self.runner.plan.id!r}: {self.status}>"  # a notebook's front is one too


def start_runner(runner: Runner) -> RunHandle:
    """Start a built runner in the background, with no display: its handle at once."""
    return RunHandle(runner).begin()
