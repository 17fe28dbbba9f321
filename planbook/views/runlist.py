"""The list of stored runs (``planbook runs``, ``planbook.runs()``) as a text table and as HTML.

One row per run: its id, its verdict, its steps (done of all, and how many ended in each
status: ``5 completed, 1 failed``), how long it took, its model calls, when it started (``today
14:03``, never a raw timestamp) and its goal; and, only when the listed runs differ in them, the
settings that tell them apart (parallel, planner, model: :data:`~planbook.store.base.LISTED_SETTINGS`).
The HTML is a record like the others (:mod:`.html`): no script, no ``<style>``, text in the theme's
colour, every text escaped by the gate's :func:`.html.esc` and made one line by its ``one_line``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..data.wording import plural
from ..outbound import mask_text, one_line
from .html import DIM, TONE_COLORS, box, esc, fg
from .publish import ensure_checkpoint

if TYPE_CHECKING:  # a list of runs comes from a store: the store package is loaded by then, not here
    from ..store.base import RunSummary

#: how long a goal may be in a row (the rest is cut with …)
GOAL_WIDTH = 48
#: the runs a notebook's display of ``planbook.runs()`` shows, newest first (``print()`` and the CLI list
#: every one; ``planbook.runs(limit=N)`` chooses)
SHOWN_RUNS = 200
#: the words of a step status in a row's counts
_STATUS_WORDS = {"not_started": "not started", "in_progress": "in progress"}
#: each setting's column header
_SETTING_HEADS = {"parallel": "parallel", "planner": "planner", "model": "model"}
_DAY = 86400


def verdict(summary: RunSummary) -> str:
    """``completed (goal_met)``, ``waiting for approval``, ``stopped (writer gone)``, ``damaged``."""
    if getattr(summary, "damage", None):
        return "damaged"
    if getattr(summary, "writer_gone", False):  # "running", but its process died: it was cut short
        return "stopped (writer gone)"
    if (summary.status, summary.reason) == ("running", "waiting"):
        return "waiting for approval"  # a step waits for a person's decision (planbook.engine.steering)
    if summary.reason and summary.reason != summary.status:
        return f"{summary.status} ({summary.reason})"
    return summary.status


def _tone(summary: RunSummary) -> str:
    shown = verdict(summary)
    if shown == "damaged" or summary.status == "failed":
        return "bad"
    if shown.startswith("completed"):
        counts = getattr(summary, "step_counts", None) or {}
        return "warn" if any(counts.get(k) for k in ("failed", "skipped", "blocked")) else "ok"
    return "info" if summary.status == "running" and not shown.startswith("stopped") else "warn"


def counts_text(summary: RunSummary) -> str:
    """``5 completed, 1 failed``; a run still going: ``3 completed, 4 to go`` (a store counts
    by status when a run stops or changes status); ``?`` for a damaged row."""
    if getattr(summary, "damage", None):
        return "?"
    counts = getattr(summary, "step_counts", None)
    going = summary.status == "running" and summary.reason != "waiting" and not getattr(summary, "writer_gone", False)
    if counts is None or going:
        left = max(0, summary.steps_total - summary.steps_done)
        return f"{summary.steps_done} completed" + (f", {left} to go" if left and going else
                                                    f" of {summary.steps_total}" if left else "")
    return ", ".join(f"{n} {_STATUS_WORDS.get(status, status)}" for status, n in counts.items() if n) or "no steps"


def duration_text(seconds: float | None) -> str:
    """``0.4 ms``, ``12 ms``, ``3.4 s``, ``2 min 05 s``, ``1 h 03 min``, ``2 d 4 h``; ``?`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < _DAY:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // _DAY} d {whole % _DAY // 3600} h"


def took_text(summary: RunSummary) -> str:
    """How long the run took (``… so far`` while it goes)."""
    text = duration_text(summary.duration)
    return f"{text} so far" if text != "?" and summary.status == "running" and not summary.writer_gone else text


def when_text(when: Any, now: float | None = None) -> str:
    """A run's start as a person reads it: ``today 14:03``, ``yesterday 09:12``, ``2026-12-03 14:03``
    (local time); ``?`` for a time no clock can show (a damaged row)."""
    try:
        if not isinstance(when, (int, float)) or when <= 0:
            return "?"
        at = time.localtime(when)
        today = time.localtime(time.time() if now is None else now)
        clock = time.strftime("%H:%M", at)
        day = (at.tm_year, at.tm_yday)
        if day == (today.tm_year, today.tm_yday):
            return f"today {clock}"
        yesterday = time.localtime(time.mktime(today) - _DAY)
        if day == (yesterday.tm_year, yesterday.tm_yday):
            return f"yesterday {clock}"
        return time.strftime("%Y-%m-%d %H:%M", at)
    except (OverflowError, OSError, ValueError, TypeError):
        return "?"


def differing_settings(listed: Sequence[RunSummary]) -> list[str]:
    """The settings (:data:`LISTED_SETTINGS`) whose values differ between the listed runs (a damaged
    row's are not counted): only those are worth a column."""
    from ..store.base import LISTED_SETTINGS

    found = []
    for name in LISTED_SETTINGS:
        values = {repr((getattr(s, "settings", None) or {}).get(name)) for s in listed if not getattr(s, "damage", None)}
        if len(values) > 1:
            found.append(name)
    return found


def setting_text(summary: RunSummary, name: str) -> str:
    """A setting's value in a row: ``—`` when the run had none (or its store did not keep it)."""
    value = (getattr(summary, "settings", None) or {}).get(name)
    return "—" if value is None else one_line(str(value))


def run_label(summary: RunSummary, tree: bool = False) -> str:
    """A run's id; in a tree a fork under its parent, one step further in per generation."""
    depth = int(getattr(summary, "depth", 0) or 0) if tree else 0
    return ("   " * (depth - 1) + "└─ " if depth else "") + one_line(summary.run_id)


def goal_text(summary: RunSummary) -> str:
    """A goal masked whole before it is cut: a secret cut in half is no longer one the exit
    finds, and its first half would be listed."""
    goal = one_line(mask_text(summary.goal))  # a line break in a goal must not forge a row
    return goal if len(goal) <= GOAL_WIDTH else goal[:GOAL_WIDTH - 1] + "…"


def rows(listed: Sequence[RunSummary], *, tree: bool = False, now: float | None = None) -> list[list[str]]:
    """The table as cells, its header first: what the text and the HTML both show."""
    settings = differing_settings(listed)
    table = [["run", "status", "steps", "step statuses", "took", "model calls", "started",
              *(_SETTING_HEADS[n] for n in settings), "goal"]]
    for s in listed:
        damaged = bool(getattr(s, "damage", None))  # its numbers may be placeholders: not shown as counted
        table.append([
            run_label(s, tree), one_line(verdict(s)), "?" if damaged else f"{s.steps_done}/{s.steps_total}",
            counts_text(s), "?" if damaged else took_text(s), "?" if damaged else str(s.model_calls),
            when_text(s.started, now), *(setting_text(s, n) for n in settings), goal_text(s),
        ])
    return table


#: the columns whose cells stand at the right (numbers)
_RIGHT = frozenset({"steps", "model calls"})


def runlist_text(listed: Sequence[RunSummary], tree: bool = False, *, now: float | None = None) -> str:
    """The table as aligned text (``planbook runs``); the goal, last, is not padded."""
    table = rows(listed, tree=tree, now=now)
    head = table[0]
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    lines = []
    for row in table:
        cells = [cell.rjust(w) if head[i] in _RIGHT else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def runlist_html(listed: Sequence[RunSummary], tree: bool = False) -> str:
    """The table as a static record: a row per run, its verdict marked by a rule of its tone."""
    table = rows(listed, tree=tree)
    head = table[0]
    left = ' style="text-align:left;padding:2px 8px"'
    right = ' style="text-align:right;padding:2px 8px"'
    cells = "".join(f"<th{right if h in _RIGHT else left}>{esc(h)}</th>" for h in head)
    body = [f"<tr>{cells}</tr>"]
    for summary, row in zip(listed, table[1:]):
        out = []
        for h, cell in zip(head, row):
            if h == "status":
                out.append(f'<td style="text-align:left;padding:2px 8px"><span class="planbook-tone-{_tone(summary)}" '
                           f'style="{fg(TONE_COLORS[_tone(summary)])}">{esc(cell)}</span></td>')
            elif h == "run":
                out.append(f'<td style="text-align:left;padding:2px 8px;font-family:monospace;white-space:pre">'
                           f'{esc(cell)}</td>')
            else:
                out.append(f"<td{right if h in _RIGHT else left}>{esc(cell)}</td>")
        body.append(f"<tr>{''.join(out)}</tr>")
    title = (f'<div style="font-weight:600;font-size:14px">{esc(plural(len(listed), "run"))}'
             f'<span style="font-weight:normal;{DIM}"> newest first</span></div>') if listed else \
        '<div style="font-weight:600;font-size:14px">No runs in the store yet</div>'
    return box("runs", title + (f'<table style="border-collapse:collapse">{"".join(body)}</table>' if listed else ""))


def runlist_bundle(listed: Sequence[RunSummary], tree: bool = False) -> dict[str, str]:
    """What a notebook shows of ``planbook.runs()``: the table as text and as HTML, of the newest
    :data:`SHOWN_RUNS` runs, saying how many more there are."""
    ensure_checkpoint()
    shown, more = listed[:SHOWN_RUNS], max(0, len(listed) - SHOWN_RUNS)
    note = (f"and {plural(more, 'more run')} (print(planbook.runs()) lists every one; planbook.runs(limit=N) "
            "chooses how many)") if more else ""
    text = runlist_text(shown, tree=tree) if listed else "no runs"
    html = runlist_html(shown, tree)
    if note:
        text += "\n" + note
        html += f'<div style="{DIM}">{esc(note)}</div>'
    return {"text/plain": text, "text/html": html}


__all__ = ["SHOWN_RUNS", "counts_text", "differing_settings", "duration_text", "rows", "run_label", "runlist_bundle",
           "runlist_html", "runlist_text", "setting_text", "took_text", "verdict", "when_text"]
