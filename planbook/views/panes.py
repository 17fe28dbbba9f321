"""What a step's result pane shows, as JSON the browser can draw without asking the kernel.

The widget sends a step's pane when the step starts and again when it ends, so a click
on a row during the run opens it at once in the browser (the kernel is busy running the
cell and could not answer). A pane holds the step's status, its call with the values
that were passed (``inc(x=2)``, not ``inc(x='$one')``), timings, the error with a
traceback that starts at the user's code, what the step printed, and its result as HTML
(a DataFrame as its table, an image as an image, a multi-line string as text). A result's
own HTML passes the gate's sanitiser (:mod:`planbook.outbound.html`), and given the run's gate
every text, the call and the result hide the run's secrets. Each pane
is capped (:data:`PANE_CAP` bytes) and so is the total a view sends (:class:`PaneBudget`);
what is cut says where the full value is: ``result.outputs['id']``.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..data.models import Status, Step
from ..data.stepmark import CUT, StepMark
from ..data.timeline import Execution
from ..engine.liveoutput import OUTPUT_TAIL
from ..outbound import bounded, html_text
from ..outbound.shapes import REDACTED_TEXT

if TYPE_CHECKING:
    from ..outbound import RunSecrets
    from .state import ViewState

#: bytes of one step's pane (result, printed text and traceback together): as much as a running step's
#: ``step.output`` event carries of what it printed (the engine owns the figure: it imports no view)
PANE_CAP = OUTPUT_TAIL
#: bytes of all the panes one view sends
TOTAL_CAP = 2_000_000
#: characters of one argument's value in the ``call`` line
ARG_CAP = 200
#: the status line of a step whose call an interrupt cut (its status is back to not started)
INTERRUPTED_STATUS = "interrupted — runs again when the run continues"
#: the status line of a step that waits for a person's decision (approve, skip or edit)
WAITING_STATUS = "waiting for your decision (approve, skip or edit)"

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+, in ')


def truncated_note(step_id: str) -> str:
    return f"truncated; the full value is in result.outputs[{step_id!r}]"


def clean_traceback(text: str | None, *, package: str = _PACKAGE) -> str | None:
    """The traceback without planbook's own frames (the runner calling the tool), so it
    starts at the user's code. A traceback made only of planbook frames is kept whole."""
    if not text:
        return text
    out: list[str] = []
    skipping = False
    dropped = kept = 0
    for line in text.splitlines(keepends=True):
        frame = _FRAME.match(line)
        if frame:
            skipping = os.path.abspath(frame.group("file")).startswith(package + os.sep)
            dropped += skipping
            kept += not skipping
            if skipping:
                continue
        elif skipping and line.startswith("    "):
            continue  # the source line (and ^^^ markers) of a dropped frame
        else:
            skipping = False
        out.append(line)
    return "".join(out) if kept else text


def _short_repr(value: Any, cap: int = ARG_CAP, hide: Callable[[str], str] | None = None) -> str:
    """The repr of ``value`` cut to ``cap`` characters; ``hide``: the run's gate, applied before the
    cut (a secret cut in half would no longer be found)."""
    try:
        text = repr(value)
    except Exception as exc:  # a value whose repr is broken is still a value
        text = f"<{type(value).__name__} (repr failed: {type(exc).__name__})>"
    if hide is not None:
        text = hide(text)
    return text if len(text) <= cap else text[: cap - 1] + "…"


def call_line(step: Step, results: Mapping[str, Any], hide: Callable[[str], str] | None = None) -> str:
    """``tool(a=1, b='text')`` with ``$id`` references replaced by the values passed, once
    the steps they name have results; a reference still waiting shows as ``$id``. A
    secret-named arg shows as ``***``; every other value through ``hide`` (the run's gate:
    a value taken from a step whose result is a secret is hidden too)."""
    if step.agent:
        line = f"[{step.agent.upper()}] {step.task}".rstrip()
        return hide(line) if hide is not None else line
    from ..data.refs import find_refs, resolve
    from ..outbound.redact import shown_arg

    parts = []
    for name, value in step.args.items():
        refs = find_refs(value) if not isinstance(value, (int, float)) else ()
        if refs and all(r in results for r in refs):
            try:
                value = resolve(value, results)
            except (KeyError, TypeError, ValueError):
                pass
        parts.append(f"{name}={shown_arg(name, value, lambda v: _short_repr(v, ARG_CAP, hide))}")
    return f"{step.tool}({', '.join(parts)})"


def result_html(value: Any, cap: int, hide: Callable[[str], str] | None = None) -> tuple[str, bool]:
    """``(html, truncated)``: the value as IPython would display it, within ``cap`` characters.

    A string with line breaks is shown as its text; other values use the display
    formatter (the kernel's, with the user's registered formatters): HTML first, then
    images, then the plain repr. A value's own HTML goes through the gate's sanitiser
    (:func:`planbook.outbound.html.sanitize_html`): what it cannot keep safe without losing
    more than presentation is shown as the value's text, with a line saying so; an image is
    drawn from its decoded bytes (an ``<img>`` draws SVG without scripts or external resources).
    ``hide``: the run's gate; HTML that holds a secret (or a secret's shape) is shown as its
    text with the secret hidden.
    """
    show = hide if hide is not None else _same
    if isinstance(value, str) and "\n" in value:
        return _pre(show(value), cap)
    if type(value) in _SCALARS:  # what IPython would show is the repr: skip its dozen formatter lookups
        return _pre(show(repr(value)), cap)
    from ..outbound.html import AS_TEXT_NOTE, SECRET_NOTE, sanitize_html

    data = _mimebundle(value)

    def as_text() -> tuple[str, bool]:  # the value's plain text, through the gate
        return _pre(show(str(data.get("text/plain", "")) or _short_repr(value, cap, hide)), cap)

    for mime in ("text/html", "image/svg+xml", "image/png", "image/jpeg"):
        body = data.get(mime)
        if not body:
            continue
        if mime == "text/html":
            if not isinstance(body, str) or len(body) > cap:
                continue
            kept = sanitize_html(body)
            secret = kept is not None and hide is not None and _holds_secret(kept.html, hide)
            if kept is None or secret:
                text, cut = as_text()
                return _note(SECRET_NOTE if secret else AS_TEXT_NOTE) + text, cut
            rendered = (_note(kept.left_out) if kept.left_out else "") + kept.html
        else:
            if mime == "image/svg+xml" and hide is not None and isinstance(body, (str, bytes)) and _holds_secret(
                    body if isinstance(body, str) else body.decode("utf-8", "replace"), hide):
                text, cut = as_text()
                return _note(SECRET_NOTE) + text, cut
            picture = _image(mime, body)
            if picture is None:
                continue
            rendered = picture
        if len(rendered) <= cap:
            return rendered, False
    return as_text()


def _same(text: str) -> str:
    return text


def _holds_secret(markup: str, hide: Callable[[str], str]) -> bool:
    """True when ``markup`` as a person reads it (its text without tags, its attributes, the
    SVG pictures inside it) or its source (entities decoded) holds something the gate hides."""
    from ..outbound.html import readable_text

    decoded = html.unescape(markup)
    readable = readable_text(markup)
    return hide(decoded) != decoded or hide(readable) != readable


def _note(text: str) -> str:
    """A line above a result that says how it is shown (as text, without its styles)."""
    return f'<div class="pb-note" style="font-style:italic;font-size:11px;opacity:0.8">{html_text(text)}</div>'


def _image(mime: str, body: Any) -> str | None:
    """An ``<img>`` of a value's picture, from its bytes (base64 text is decoded and checked
    first: a formatter's string is not trusted to be base64); None when it is not a picture."""
    import base64
    import binascii

    if isinstance(body, str):
        if mime == "image/svg+xml":
            raw = body.encode("utf-8")
        else:
            try:
                raw = base64.b64decode(body.strip(), validate=True)
            except (binascii.Error, ValueError):
                return None
    elif isinstance(body, (bytes, bytearray)):
        raw = bytes(body)
    else:
        return None
    return f'<img alt="result" src="data:{mime};base64,{base64.b64encode(raw).decode("ascii")}">'


#: result types shown as their repr without asking the display formatter (a fast step's
#: pane must not cost more than the step: a run sends one pane per finished step)
_SCALARS = frozenset({int, float, bool, type(None), str, complex})


def _pre(text: str, cap: int) -> tuple[str, bool]:
    cut = len(text) > cap
    return f'<pre class="pb-text">{html_text(text[:cap])}</pre>', cut


def _mimebundle(value: Any) -> dict[str, Any]:
    """IPython's display formatter applied to ``value`` (never raises: a broken repr shows as such)."""
    try:
        formatter = _formatter()
        data, _ = formatter.format(value)
        if data:
            return dict(data)
    except Exception:  # a broken _repr_*_ must not break the view: fall back to repr
        pass
    return {"text/plain": _short_repr(value, PANE_CAP)}


_standalone: Any = None


def _formatter() -> Any:
    """The kernel's display formatter (with the user's formatters), else a standalone one."""
    global _standalone
    from IPython import get_ipython
    from IPython.core.formatters import DisplayFormatter

    shell = get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        return shell.display_formatter
    if _standalone is None:
        _standalone = DisplayFormatter()
    return _standalone


class PaneBudget:
    """The bytes of panes a view may still send (:data:`TOTAL_CAP` in all)."""

    def __init__(self, total: int | None = None, per_pane: int | None = None) -> None:
        self.left = TOTAL_CAP if total is None else total
        self.per_pane = PANE_CAP if per_pane is None else per_pane

    def cap(self) -> int:
        return max(0, min(self.per_pane, self.left))

    def spend(self, size: int) -> None:
        self.left -= size


def pane(step: Step, results: Mapping[str, Any], *, origin: float | None, budget: PaneBudget,
         gate: "RunSecrets | None" = None, execution: Execution | None = None) -> dict[str, Any]:
    """The JSON of ``step``'s pane (see the module docstring). Times are seconds from ``origin``.

    ``execution``: the step's execution the pane shows (its latest, or an earlier one): the times
    are that execution's, the times its timeline bar shows (a call handed to an executor keeps the
    run's times on the step, and its own on the execution), so a pane and its bar never disagree.

    Built for every step that finishes (a click may come at any time), so the common case
    — a short call, a short result, nothing printed — takes no detour. ``gate``: the run's
    secrets; every text, the call and the result go through it (a step whose result is a
    secret shows ``***``). Without one, only secret-named args are hidden.
    """
    cap = budget.cap()
    hide = gate.text if gate is not None else None
    show = hide if hide is not None else _same
    call = call_line(step, results, hide)
    began, ended = (step.started_at, step.finished_at) if execution is None else (execution.start, execution.end)
    data: dict[str, Any] = {
        "status": step.status.value, "attempts": step.attempts, "call": call,
        "start": since(began, origin), "end": since(ended, origin),
        "duration": step.duration if execution is None or execution.end is None else execution.duration,
    }
    if step.status is Status.not_started and step.mark in CUT:
        data["status_text"] = INTERRUPTED_STATUS
    elif step.status is Status.not_started and step.mark is StepMark.waiting:
        data["status_text"] = WAITING_STATUS
    used = len(call) + 60  # the numbers and the status
    for key in ("task", "expect", "notes", "error"):
        value = getattr(step, key)
        if value:
            data[key] = value = bounded(show(value), cap)  # cut after masking, saying so
            used += len(value)
    if step.needs:
        data["needs"] = list(step.needs)
        used += sum(len(n) + 4 for n in step.needs)
    cut = False
    if step.traceback:
        tb = show(clean_traceback(step.traceback) or "")
        room = max(0, cap - used)
        data["traceback"], cut = tb[len(tb) - room:] if room else "", len(tb) > room  # its end: the error
        used += len(data["traceback"])
    if step.output:
        room = max(0, cap - used)
        output = show(step.output)
        # a running step's latest lines are the news; a finished step's text reads from its start
        data["output"] = (output[len(output) - room:] if step.status is Status.in_progress else output[:room])
        cut = cut or len(output) > room
        used += len(data["output"])
    if step.status is Status.completed or step.result is not None:
        room = max(0, cap - used)
        if gate is not None and step.result is not None and gate.holds_secret(step.id):
            body, more = _pre(REDACTED_TEXT, room)  # it feeds a secret-named argument: it is a secret
        else:
            body, more = result_html(step.result, room, hide) if room > 200 else ("", True)
        data["result"] = body
        cut = cut or more
        used += len(body)
    if cut:
        data["truncated"] = truncated_note(step.id)
    budget.spend(used)
    return data


# ------------------------------------------------------------------ one execution's pane
def last_executions(executions: Sequence[Execution]) -> dict[str, Execution]:
    """Each step's latest execution (the one its row and pane show), by step id."""
    return {ex.step: ex for ex in executions}


def history_by_step(history: Sequence[Step]) -> dict[str, list[Step]]:
    """The history's entries of each step, in the order they ended."""
    out: dict[str, list[Step]] = {}
    for entry in history:
        out.setdefault(entry.id, []).append(entry)
    return out


def entry_of(executions: Sequence[Execution], index: int, entries: Mapping[str, Sequence[Step]]) -> Step | None:
    """The step as execution ``executions[index]`` left it (its history entry), or None while it runs
    or when an interrupt cut it. A step runs one execution at a time and every execution that ended
    (not cut) left one entry, so its k-th such execution is its k-th entry."""
    return entries_at(executions, (index,), entries)[index]


def entries_at(executions: Sequence[Execution], indexes: Iterable[int],
               entries: Mapping[str, Sequence[Step]]) -> dict[int, Step | None]:
    """:func:`entry_of` of each of ``indexes``, in one pass over the executions up to the last of them
    (one pass each made a view of a run of 16,000 retried steps take 27 s)."""
    wanted = set(indexes)
    found: dict[int, Step | None] = {}
    ended: dict[str, int] = {}  # each step's executions that ended (not cut) so far
    for i in range(max(wanted, default=-1) + 1):
        ex = executions[i]
        done = ex.end is not None and not ex.interrupted
        if i in wanted:
            k, own = ended.get(ex.step, 0), entries.get(ex.step, ())
            found[i] = own[k] if done and k < len(own) else None
        if done:
            ended[ex.step] = ended.get(ex.step, 0) + 1
    return found


def execution_status(ex: Execution) -> str:
    """How an execution ended, as a bar's colour says it: completed, failed, interrupted or in_progress."""
    if ex.end is None:
        return "in_progress"
    if ex.interrupted:
        return "interrupted"
    return "completed" if ex.ok else "failed"


def execution_pane(ex: Execution, entry: Step | None, step: Step | None, results: Mapping[str, Any], *,
                   origin: float | None, budget: PaneBudget, gate: "RunSecrets | None" = None) -> dict[str, Any]:
    """The JSON of one execution's pane: what a click on its timeline bar opens. ``entry``: the step
    as that execution left it (:func:`entry_of`: its call, result or traceback and printed output);
    ``step``: the plan's step of that id, for a call still running or cut (None: a replan removed it)."""
    shown = entry if entry is not None else step
    if shown is not None:
        data = pane(shown, results, origin=origin, budget=budget, gate=gate, execution=ex)
        if data.get("truncated"):
            data["truncated"] = f"truncated; the full text is in result.history (execution #{ex.execution})"
    else:
        data = {"call": ex.step, "start": since(ex.start, origin), "end": since(ex.end, origin),
                "duration": ex.duration, "attempts": ex.attempt}
        if ex.error:
            data["error"] = bounded(gate.text(ex.error) if gate is not None else ex.error, budget.cap())
    data.pop("status_text", None)
    data.update(status=execution_status(ex), execution=ex.execution, step=ex.step, attempt=ex.attempt,
                revision=ex.revision, worker=ex.worker)
    return data


class CompletedResults(Mapping[str, Any]):
    """The results of a plan's completed steps by id, gathered when a pane first asks (a pane
    reads them only for a call whose arguments name other steps: ``$id``)."""

    def __init__(self, steps: list[Step]) -> None:
        self._steps = steps
        self._by_id: dict[str, Any] | None = None

    def _all(self) -> dict[str, Any]:
        if self._by_id is None:
            completed = Status.completed
            self._by_id = {s.id: s.result for s in self._steps if s.status is completed}
        return self._by_id

    def __getitem__(self, key: str) -> Any:
        return self._all()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())



#: the steps a revision removed that never ran, listed under it (in a live view, in a record) at most:
#: the revision's diff lists every one (a replan may replace a plan of thousands of steps)
REMOVED_LINES = 12


def few_removed(removed: Sequence[str], ran: Container[str]) -> tuple[list[str], int]:
    """The steps of a revision's ``removed`` listed under it, in its order: every one that ran (``ran``
    holds their ids) and the first :data:`REMOVED_LINES` that never ran; and how many more never ran."""
    never = [sid for sid in removed if sid not in ran]
    keep = set(never[:REMOVED_LINES])
    return [sid for sid in removed if sid in ran or sid in keep], max(0, len(never) - REMOVED_LINES)

class LiveOtherPanes:
    """What a live view sends of the executions a step's own pane does not show: their panes, each
    built once (the one before a step's newest: a retry's failed attempt; after a replan, those of the
    steps it removed), and the steps each replan removed, listed under their revision."""

    def __init__(self) -> None:
        #: by execution number: what the browser opens on a click on their bars
        self.panes: dict[str, dict[str, Any]] = {}
        self._built: dict[int, tuple[Any, ...]] = {}  # timeline place -> the key its pane was built for
        self._seen = 0  # executions looked at
        self._latest: dict[str, int] = {}  # each step's newest execution, by its place in the timeline
        self._removed_key: int | None = None
        self._removed: list[Any] = []

    def changed(self, state: "ViewState", origin: float | None, replanned: bool, results: Mapping[str, Any],
                budget: PaneBudget) -> dict[str, dict[str, Any]]:
        """The panes of executions a step's own pane no longer shows, built once each: the one before a
        step's newest (a retry's failed attempt), and, after a replan, those of the steps it removed."""
        executions = state.timeline
        todo: list[int] = []
        latest = self._latest
        for i in range(self._seen, len(executions)):
            step = executions[i].step
            before = latest.get(step)
            if before is not None and before != i:
                todo.append(before)
            latest[step] = i
        self._seen = len(executions)
        if replanned:
            current = {s.id for s in state.plan.steps}
            todo += [i for step, i in latest.items() if step not in current]
        if not todo:
            return {}
        entries = history_by_step(state.history)
        steps = {s.id: s for s in state.plan.steps}
        changed: dict[str, dict[str, Any]] = {}
        left_by = entries_at(executions, todo, entries)
        for i in sorted(set(todo)):
            ex = executions[i]
            if ex.end is None:
                continue  # still running: its step's pane shows it
            key = (ex.end, ex.ok, ex.interrupted)
            if self._built.get(i) == key:
                continue
            self._built[i] = key
            data = execution_pane(ex, left_by[i], steps.get(ex.step), results, origin=origin,
                                  budget=budget, gate=state.gate)
            self.panes[str(ex.execution)] = changed[str(ex.execution)] = data
        return changed

    def removed(self, state: "ViewState") -> list[Any]:
        """``[[revision, why, [[step id, its line in the diff, its last execution or None]]]]``: the steps
        each replan removed, listed in the Steps tab under their revision (a click opens that execution)."""
        key = len(state.revisions)  # a replan comes after the executions of the steps it removes
        if key == self._removed_key:
            return self._removed
        self._removed_key = key
        hide = state.gate.line
        groups = []
        for diff in state.revisions:
            if diff.rejected or not diff.removed:
                continue
            last = {ex.step: ex.execution for ex in state.timeline if ex.revision < diff.to_revision}
            listed, more = few_removed(diff.removed, last)
            rows: list[list[Any]] = [[sid, hide(diff.steps.get(sid, "")), last.get(sid)] for sid in listed]
            if more:  # drawn as the others that never ran: "…: and 288 more (never ran)"
                rows.append(["…", f"and {more:,} more", None])
            groups.append([diff.to_revision, hide(diff.reason or ""), rows])
        self._removed = groups
        return groups


def since(t: float | None, origin: float | None) -> float | None:
    """Seconds from ``origin`` to ``t``, to 0.1 ms (None if either is unknown): the times a pane and
    the widget's cache marks send."""
    if t is None:
        return None
    return round(t - origin, 4) if origin is not None else None
