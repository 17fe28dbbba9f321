"""Fork from here: the code line a finished step's pane offers, and the live view's Fork button.

A finished step's pane says how to run a what-if from it: in the live view of a background run,
**Fork from here** opens the argument editor Edit uses, a box to pin a result instead, and the
line of Python it will run; in a saved record the pane shows that line, so a reader of the
notebook can run it too. Every value in the line passes the run's gate: a secret-named argument
is ``***``, a :class:`~planbook.Secret` is its reference (``planbook.Secret.from_ref(...)``).

A click on Fork arrives on the kernel's main thread as a comm message (as Approve and Edit do).
The fork is made as ``planbook.fork(..., background=True)`` makes it, with the parent's store and
the tools and agents its runner had; an error (arguments that do not fit the tool, a step that
never ran) comes back as one line beside the step, and nothing runs.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

from ..data.errors import PlanbookError
from ..data.lineage import lineage_of
from ..data.models import RunResult, Status, Step
from ..data.secret import Secret
from ..outbound import RunSecrets
from .steered import SteeredRun

#: the key of a fork's error in the widget's ``errors`` trait (beside Edit's, which is the step id)
ERROR_KEY = "fork:"
#: what the pin-result box's value must be, said when it is not
PIN_HELP = 'the pinned result must be JSON (a number, "text", [..] or {..}); leave the box empty to run the step again'


def forkable(step: Step) -> bool:
    """A step a fork can start from: it ran (completed, or failed after an attempt)."""
    return step.status is Status.completed or (step.status is Status.failed and step.attempts > 0)


def editor_args(gate: RunSecrets, args: Mapping[str, Any]) -> dict[str, Any]:
    """A step's arguments as the fork's editor starts from them: as the gate shows them (a secret-named
    one ``***``, a Secret as ``{"$secret": ref}``), and plain JSON (a value JSON has no form for is its repr)."""
    return json.loads(json.dumps(gate.shown_args(args), default=repr))


def store_text(location: str | None, cwd: str | None = None) -> str | None:
    """A store's location as the code line names it: relative to the working directory when
    inside it (a committed notebook names no path outside its repository), None for a store in memory."""
    if not location or location == ":memory:" or location.startswith("<"):
        return None
    here = os.path.abspath(cwd or os.getcwd())
    path = os.path.abspath(location)
    if path == here or path.startswith(here + os.sep):
        return os.path.relpath(path, here)
    return location


def py_literal(value: Any) -> str:
    """``value`` (the gate's JSON form of arguments) as a Python literal; ``{"$secret": ref}`` is
    ``planbook.Secret.from_ref(ref)``, a value with no literal its ``repr``."""
    if isinstance(value, Secret):
        return f"planbook.Secret.from_ref({json.dumps(value.ref)})"
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        if len(value) == 1 and isinstance(value.get("$secret"), str):
            return f"planbook.Secret.from_ref({json.dumps(value['$secret'])})"
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return repr(value)


def code_line(run_id: str, step: str, *, args: Mapping[str, Any] | None = None, result: Any = None,
              pinned: bool = False, store: str | None = None) -> str:
    """``planbook.fork("RUN", at="draft", args={"tone": "formal"}, store=".planbook/runs.sqlite")``:
    ``args`` as the gate shows them; ``pinned``: ``result=`` instead of ``args=``."""
    parts = [json.dumps(run_id), f"at={json.dumps(step)}"]
    if pinned:
        parts.append(f"result={py_literal(result)}")
    elif args is not None:
        parts.append(f"args={py_literal(dict(args))}")
    if store:
        parts.append(f"store={json.dumps(store)}")
    return f"planbook.fork({', '.join(parts)})"


def step_code_line(step: Step, run_id: str | None, gate: RunSecrets, store: str | None) -> str | None:
    """The line that forks the run at ``step`` with its current arguments (None when it cannot be forked)."""
    if not run_id or not forkable(step):
        return None
    line = code_line(run_id, step.id, args=gate.shown_args(step.args) if step.tool else None,
                     store=store_text(store))
    return gate.line(line)


def headline(lineage: Any, gate: RunSecrets) -> str:
    """A fork's header line (``fork of run R at draft — tone: 'casual' → 'formal'; kept 14, re-running 3``),
    through the run's gate; '' for a run that is no fork."""
    try:
        found = lineage_of(lineage)
    except (ValueError, TypeError):  # a lineage another version wrote: say what can be said
        parent = lineage.get("parent") if isinstance(lineage, Mapping) else None
        return gate.line(f"fork of run {parent}") if parent else ""
    return gate.line(found.headline()) if found is not None else ""


# ------------------------------------------------------------------ the live view's Fork button
def parse_json(text: Any, what: str, example: str) -> tuple[Any, str]:
    """``(value, error)``: ``text`` read as JSON (a value already parsed is taken as it is)."""
    if not isinstance(text, str):
        return text, ""
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as exc:
        return None, f"the {what} are not JSON ({exc.msg} at character {exc.pos}): write them as {example}"


def fork_from_view(handle: SteeredRun, content: Mapping[str, Any]) -> tuple[SteeredRun | None, str]:
    """Fork the run ``handle`` steers at ``content["step"]`` (a Fork click): ``(child_handle, '')``,
    or ``(None, error)`` with nothing created. ``content``: ``args`` (the editor's JSON, as the gate
    showed it: a secret shown as ``***`` keeps its value) and ``result`` (the pin box's JSON, or empty)."""
    runner = handle.runner
    step_id = content.get("step")
    if not isinstance(step_id, str) or not step_id:
        return None, "say which step to fork at"
    try:
        current = runner.plan.step(step_id)
    except KeyError:
        return None, f"no step {step_id!r} in this run's plan"
    if not forkable(current):
        return None, (f"step {step_id!r} has not run here (it is {current.status.value}): fork at a step that "
                      "completed or failed")
    options: dict[str, Any] = {}
    pin = content.get("result")
    if isinstance(pin, str) and pin.strip():
        value, error = parse_json(pin, "pinned result", "JSON")
        if error:
            return None, PIN_HELP + f" ({error.split(': write', 1)[0]})"
        options["result"] = value
    raw = content.get("args")
    if raw is not None and (not isinstance(raw, str) or raw.strip()):
        args, error = parse_json(raw, "arguments", '{"name": value}')
        if error:
            return None, error
        if not isinstance(args, dict):
            return None, 'the arguments must be a JSON object, like {"to": "alice"}'
        if current.tool is None:
            if args:
                return None, (f"step {step_id!r} is a task for agent {current.agent!r}: it has no arguments to "
                              "change; pin its result instead")
        elif "result" in options:
            if args != runner.secrets.shown_args(current.args):  # both edited: the engine's one line says why not
                options["args"] = args
        else:
            try:
                options["args"] = runner.secrets.kept_secrets(args, current.args)
            except ValueError as exc:
                return None, str(exc)
    store = runner.recorder.store if runner.recorder is not None else None
    location = store.location if store is not None else None
    if store is None:
        parent: RunResult | str = runner.result()  # a run without a store is forked in memory
    else:
        parent = runner.run_id
        # a file store is opened again (the child owns its connection); a store in memory is shared
        options["store"] = location if store_text(location) is not None else store
    try:
        # the views sit below the notebook surface: the handle this view steers starts the child
        child = handle.fork(parent, at=step_id, tools=runner.tools, agents=runner.agents, **options)
    except (PlanbookError, ValueError, TypeError, KeyError, RuntimeError) as exc:
        return None, runner.secrets.line(str(exc).strip("'\""))
    return child, ""


__all__ = ["ERROR_KEY", "code_line", "editor_args", "fork_from_view", "forkable", "headline", "py_literal", "step_code_line",
           "store_text"]
