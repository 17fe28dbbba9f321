"""The comparison of runs (:class:`planbook.data.rundiff.RunDiff`) as text and as static HTML.

The HTML is a record like :mod:`.record`'s: it reads in a saved notebook untrusted and without a
kernel (no script, no ``<style>``, no SVG, no ``var()``: JupyterLab's sanitizer strips them), in a
light or a dark theme (text keeps the theme's colour; colours are faint tints and left rules, as
in :mod:`.html`), with every text through the runs' gates and escaped with :func:`.html.esc`.
The baseline stands left, one row per step; a delta is tinted by its direction (green: faster or
fewer tokens, red: slower or more; an arrow says it too) and the first divergent row is marked
(⚑). The changed-only filter needs no JavaScript: runs of unchanged rows fold into one row, a
``<details>`` that opens to them; when there are many they fold into a count (the record stays
small), and a line says so and how to see every row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..data.models import STATUS_MARKS
from ..data.rundiff import CHANGE_MEANS, HOW_MEANS, Change, DiffRow, RunDiff, RunSummary, call_text, result_text
from ..data.wording import plural
from ..outbound import one_line
from .html import DIM, FILLS, TONE_COLORS, box, esc, fg, format_duration, tint
from .marks import CACHED_MARK
from .publish import ensure_checkpoint
from .record import DONE

#: unchanged rows a record keeps inside its folds; above this they fold into counts only
UNCHANGED_ROWS = 200
#: changed rows a record keeps at most, and the bytes its rows may take (the rest: ``diff.rows()``)
CHANGED_ROWS = 1000
ROW_BYTES = 120_000
#: changed steps (after the first divergence, which has its own box) whose calls and results are
#: offered side by side in a fold under their row: the first ones, so a long run stays small
PANE_ROWS = 25
#: a time delta is tinted when it is at least this many seconds and this share of the base's time
TINT_SECONDS, TINT_SHARE = 0.001, 0.10
FIRST_MARK = "⚑"
_MARKS = {status.value: mark for status, mark in STATUS_MARKS.items()}
_REUSED = frozenset({"kept", "pinned", "cached"})
_CHANGE_TINTS = {
    "edited": tint(FILLS["blocked"], 0.25),  # "follows" is the common, expected case: untinted, a byte less a row
    "noise": tint(FILLS["cached"], 0.15), "new": tint(FILLS["completed"], 0.2),
    "removed": tint(FILLS["failed"], 0.2), "differs": tint(FILLS["not_started"], 0.2),
}
_BETTER, _WORSE = tint(FILLS["completed"], 0.2), tint(FILLS["failed"], 0.2)
_LEFT = ' style="text-align:left"'


# ------------------------------------------------------------------ shared pieces
def side_text(how: str, status: str | None) -> str:
    """``[✓] re-ran``, ``[✓] ⟲ kept``, ``removed``."""
    mark = _MARKS.get(status or "", "")
    how = f"{CACHED_MARK} {how}" if how in _REUSED else how
    return f"{mark} {how}" if mark else how


def delta_seconds(base: float | None, other: float | None) -> tuple[str, int]:
    """``(+1.2 ms ▲, 1)``: the text and the direction (1 slower, -1 faster, 0 unmarked)."""
    if base is None or other is None:
        return "", 0
    d = other - base
    size = format_duration(abs(d))
    text = f"±{size}" if size == "0.0 ms" else f"{'+' if d > 0 else '−'}{size}"
    if abs(d) >= TINT_SECONDS and abs(d) >= TINT_SHARE * abs(base):
        return text + (" ▲" if d > 0 else " ▼"), 1 if d > 0 else -1
    return text, 0


def delta_number(base: int | float, other: int | float, unit: str = "") -> tuple[str, int]:
    d = other - base
    if not d:
        return "±0", 0
    text = f"{'+' if d > 0 else '−'}{abs(d):,}{unit}"
    return text + (" ▲" if d > 0 else " ▼"), 1 if d > 0 else -1


def _time(seconds: float | None) -> str:
    return format_duration(seconds) if seconds is not None else "—"


def _folds(steps: list[DiffRow]) -> list[DiffRow | list[DiffRow]]:
    """Rows in order, each run of consecutive unchanged rows as one list (a fold)."""
    out: list[DiffRow | list[DiffRow]] = []
    for row in steps:
        if row.changed:
            out.append(row)
        elif out and isinstance(out[-1], list):
            out[-1].append(row)
        else:
            out.append([row])
    return out


def _fold_label(rows: list[DiffRow], hide: Callable[[str | None], str]) -> str:
    ends = rows[0].step if len(rows) == 1 else f"{rows[0].step} … {rows[-1].step}"
    return f"{one_line(hide(ends))}: {plural(len(rows), 'step')} the same in every run"


def _tone(verdict: str) -> str:
    if verdict.startswith("identical"):
        return "ok"
    return "info" if "replay noise only" in verdict else "warn"


def _label(diff: RunDiff, i: int) -> str:
    """A run's name in a column: ``base R`` for the base, ``R`` else (``run N`` when ids repeat)."""
    ids = diff.run_ids
    name = ids[i] if ids.count(ids[i]) == 1 or i == 0 else f"{ids[i]} (#{i + 1})"
    return f"base {name}" if i == 0 else name


# ------------------------------------------------------------------ text
def rundiff_text(diff: RunDiff, changed_only: bool = False, times: bool = True) -> str:
    """The comparison as text: header, verdicts, plan changes, totals, decisions, one line per
    changed step and one per run of unchanged steps (``changed_only``: none of those);
    ``times``: durations in the totals (off for a deterministic ``text/plain``)."""
    hide = diff.hider()
    base = diff.summaries[0]
    lines = [f"Compare runs: base {base.run_id} — goal: {one_line(hide(diff.base.goal))}"]
    for i, (summary, header) in enumerate(zip(diff.summaries[1:], diff.headers), 1):
        lines.append(f"  {_label(diff, i)}: {one_line(header)}")
    if diff.goals_differ:
        lines.append("  goals differ: " + " · ".join(f"{_label(diff, i)} {one_line(goal)!r}"
                                                      for i, goal in enumerate(diff.goals)))
    for i, verdict in enumerate(diff.verdicts, 1):
        lines.append(f"Verdict{'' if len(diff.verdicts) == 1 else ' (' + _label(diff, i) + ')'}: {verdict}")
    for i, plan_diff in enumerate(diff.plan_diffs, 1):
        told = _plan_change_words(plan_diff)
        lines.append(f"Plan ({_label(diff, i)}): {told or 'no change'}")
    lines.append("Totals: " + "; ".join(_totals_text(diff, times)))
    given = [f"{_label(diff, i)}: " + ", ".join(_decision(*d) for d in s.decisions)
             for i, s in enumerate(diff.summaries) if s.decisions]
    if given:
        lines.append("Decisions: " + "; ".join(given))
    width = min(20, max((len(row.step) for row in diff.steps), default=4))
    heads = " | ".join(_label(diff, i) for i in range(len(diff.summaries)))
    lines.append(f"Steps ({heads}; {FIRST_MARK} first divergence):")
    first = diff.first_divergence
    left_out = 0
    for item in _folds(diff.steps):
        if isinstance(item, list):
            if changed_only:
                left_out += len(item)
            else:
                lines.append(f"  = {_fold_label(item, hide)}")
            continue
        cells = [side_text(item.sides[0].how, item.sides[0].status).ljust(14)]
        for side, change in zip(item.sides[1:], item.changes):
            same = "" if change.result_same is None else (" =" if change.result_same else " ≠")
            cells.append(f"{side_text(side.how, side.status)}{same} {change.kind}".ljust(24))
        mark = FIRST_MARK if item.step == first else " "
        lines.append(f"{mark} {one_line(hide(item.step)).ljust(width)}  {' | '.join(cells).rstrip()}")
    if left_out:
        lines.append(f"  ({plural(left_out, 'unchanged step')} not shown: changed only)")
    return "\n".join(lines)


def _decision(step: str, what: str, who: str, why: str) -> str:
    """``s2: approved (api)``, ``run: stopped (view) — the reason``."""
    return f"{step or 'run'}: {DONE.get(what, what)}" + (f" ({who})" if who else "") + (f" — {why}" if why else "")


def _plan_change_words(plan_diff: Any) -> str:
    parts = []
    for name, ids in (("removed", plan_diff.removed), ("added", plan_diff.added), ("revised", plan_diff.revised)):
        if ids:
            parts.append(f"{name} {', '.join(ids[:12])}{' …' if len(ids) > 12 else ''}")
    return "; ".join(parts)


def _totals(diff: RunDiff, times: bool) -> list[tuple[str, list[tuple[str, str, int]]]]:
    """``[(what, [(value, delta, direction) per run])]``: executions, time, model calls and tokens."""
    def row(what: str, get: Callable[[RunSummary], Any], fmt: Callable[[Any], str],
            delta: Callable[..., tuple[str, int]]) -> tuple[str, list[tuple[str, str, int]]]:
        base = get(diff.summaries[0])
        cells = [(fmt(base), "", 0)]
        for s in diff.summaries[1:]:
            value = get(s)
            d, direction = delta(base, value) if base is not None and value is not None else ("", 0)
            cells.append((fmt(value), d, direction))
        return what, cells

    out = [row("executions", lambda s: s.executions, str, delta_number)]
    if times:
        out.append(row("time", lambda s: s.wall, _time, delta_seconds))
        out.append(row("calls' time", lambda s: s.step_time, _time, delta_seconds))
    out.append(row("model calls", lambda s: s.model_calls, str, delta_number))
    out.append(row("tokens", lambda s: s.tokens, lambda v: f"{v:,}", delta_number))
    return out


def _totals_text(diff: RunDiff, times: bool) -> list[str]:
    return [f"{what} " + " | ".join(f"{value}{' (' + d + ')' if d else ''}" for value, d, _ in cells)
            for what, cells in _totals(diff, times)]


# ------------------------------------------------------------------ HTML
def rundiff_html(diff: RunDiff, changed_only: bool = False) -> str:
    """The comparison as a static record (see the module docstring)."""
    hide = diff.hider()
    base = diff.summaries[0]
    parts = [f'<div style="font-weight:600;font-size:14px">Compare runs: base {esc(base.run_id)} '
             f'<span style="font-weight:normal;{DIM}">(goal: {esc(one_line(hide(diff.base.goal)))})</span></div>']
    for i, header in enumerate(diff.headers, 1):
        parts.append(f'<div class="planbook-rundiff-header"><b>{esc(_label(diff, i))}</b>: {esc(one_line(header))}</div>')
    if diff.goals_differ:
        goals = " · ".join(f"{esc(_label(diff, i))}: {esc(one_line(goal))}" for i, goal in enumerate(diff.goals))
        parts.append(f'<div class="planbook-goals-differ" style="{fg(TONE_COLORS["warn"])}">'
                     f'The goals differ: {goals}</div>')
    for i, verdict in enumerate(diff.verdicts, 1):
        who = "" if len(diff.verdicts) == 1 else f"{esc(_label(diff, i))}: "
        parts.append(f'<div class="planbook-verdict planbook-tone-{_tone(verdict)}" '
                     f'style="{fg(TONE_COLORS[_tone(verdict)])};font-weight:600;margin:2px 0">{who}{esc(verdict)}</div>')
    parts.append(_totals_html(diff))
    for i, plan_diff in enumerate(diff.plan_diffs, 1):
        told = _plan_change_words(plan_diff)
        if told:
            parts.append(f'<div class="planbook-plan-changes"><b>Plan changes ({esc(_label(diff, i))})</b>: '
                         f'{esc(hide(told))}</div>')
    for i, summary in enumerate(diff.summaries):
        if summary.decisions:
            items = "; ".join(esc(_decision(*d)) for d in summary.decisions)
            parts.append(f'<div class="planbook-decisions"><b>Decisions ({esc(_label(diff, i))})</b>: {items}</div>')
    parts.append(_first_html(diff, hide))
    parts.append(_steps_html(diff, hide, changed_only))
    return box("rundiff", "".join(parts))


def _totals_html(diff: RunDiff) -> str:
    heads = "".join(f"<th>{esc(_label(diff, i))}</th>" for i in range(len(diff.summaries)))
    body = []
    for what, cells in _totals(diff, True):
        tds = []
        for value, d, direction in cells:
            style = f' style="{_WORSE if direction > 0 else _BETTER}"' if direction else ""
            tds.append(f"<td{style}>{esc(value)}{' (' + esc(d) + ')' if d else ''}</td>")
        body.append(f"<tr><th{_LEFT}>{what}</th>{''.join(tds)}</tr>")
    return (f'<table class="planbook-rundiff-totals" style="border-collapse:collapse;margin:4px 0">'
            f"<thead><tr><th></th>{heads}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def _first_html(diff: RunDiff, hide: Callable[[str | None], str]) -> str:
    """The first divergent step's call and result in each run, side by side."""
    first = diff.first_divergence
    if first is None:
        return ""
    row = next(r for r in diff.steps if r.step == first)
    return (f'<div class="planbook-first-divergence-box" style="margin:4px 0">'
            f'<div style="{fg(TONE_COLORS["bad"])};font-weight:600">{FIRST_MARK} First divergence at '
            f'{esc(one_line(hide(first)))} — {esc(row.changes[0].kind)}: {esc(CHANGE_MEANS[row.changes[0].kind])}</div>'
            f'{_side_by_side(diff, row, hide)}</div>')


def _side_by_side(diff: RunDiff, row: DiffRow, hide: Callable[[str | None], str]) -> str:
    """A step's call and result in each run, side by side (the baseline left)."""
    runs = [diff.base, *diff.others]
    cells = []
    for i, side in enumerate(row.sides):
        call = call_text(side.step, hide) or HOW_MEANS["absent"]
        result = result_text(side.step, runs[i].secrets, hide) if side.step is not None else None
        cells.append(f'<td{_LEFT}><div style="{DIM};font-size:11px">{esc(_label(diff, i))}</div>'
                     f"<code>{esc(call)}</code>" + (f"<div>→ {esc(result)}</div>" if result is not None else "")
                     + "</td>")
    return f'<table style="border-collapse:collapse;margin:2px 0"><tr>{"".join(cells)}</tr></table>'


def _panes_row(diff: RunDiff, row: DiffRow, hide: Callable[[str | None], str], columns: int) -> str:
    """Under a changed step's row, a fold holding its call and result in each run, side by side."""
    return (f'<tr class="planbook-panes"><td colspan="{columns}"{_LEFT}><details><summary style="{DIM}">'
            f"{esc(one_line(hide(row.step)))}: each run's call and result</summary>"
            f"{_side_by_side(diff, row, hide)}</details></td></tr>")


def _steps_html(diff: RunDiff, hide: Callable[[str | None], str], changed_only: bool) -> str:
    others = len(diff.others)
    tokens = any(side.tokens for row in diff.steps for side in row.sides)
    head = f"<th>step</th><th>{esc(_label(diff, 0))}</th><th>time</th>"
    for i in range(1, others + 1):
        head += f"<th>{esc(_label(diff, i))}</th><th>change</th><th>Δ time</th>" + ("<th>Δ tokens</th>" if tokens else "")
    columns = 3 + others * (4 if tokens else 3)
    unchanged = sum(1 for row in diff.steps if not row.changed)
    open_folds = not changed_only and unchanged <= UNCHANGED_ROWS
    first = diff.first_divergence
    body: list[str] = []
    size = shown_changed = panes = 0
    changed_total = sum(1 for row in diff.steps if row.changed)
    for item in _folds(diff.steps):
        if isinstance(item, list):
            label = esc(_fold_label(item, hide))
            if open_folds:
                # the fold's own table sizes its columns apart from the outer one: it heads them
                # again, or the fork's cells would stand under the baseline's heading
                inner = "".join(_row_html(r, hide, tokens, first) for r in item)
                body.append(f'<tr class="planbook-fold"><td colspan="{columns}"{_LEFT}><details><summary style="{DIM}">'
                            f'= {label}</summary><table style="border-collapse:collapse"><thead><tr>{head}</tr></thead>'
                            f'<tbody>{inner}</tbody></table></details></td></tr>')
            else:
                body.append(f'<tr class="planbook-fold"><td colspan="{columns}" style="text-align:left;{DIM}">= {label}</td></tr>')
            size += len(body[-1])
            continue
        if shown_changed >= CHANGED_ROWS or size >= ROW_BYTES:
            continue
        shown_changed += 1
        body.append(_row_html(item, hide, tokens, first))
        if item.step != first and panes < PANE_ROWS:
            panes += 1
            body.append(_panes_row(diff, item, hide, columns))
        size += len(body[-1])
    notes = []
    if shown_changed < changed_total:
        notes.append(f"this record keeps {shown_changed:,} of {changed_total:,} changed steps")
    if changed_only and unchanged:
        notes.append(f"changed only: {plural(unchanged, 'unchanged step')} folded into counts")
    elif unchanged and not open_folds:
        notes.append(f"{plural(unchanged, 'unchanged step')} (more than {UNCHANGED_ROWS}) are folded into counts, "
                     "so a saved notebook stays small")
    legend = (f"Unchanged steps fold into one row{' (a click opens it)' if open_folds else ''}. change: edited = its own call changed; follows = an input "
              "changed because of the edit; noise = replay noise (the same call gave another outcome); new/removed = in "
              "one plan only. = / ≠: the result is / is not the base's. Δ: green ▼ faster or fewer tokens, red ▲ slower "
              f"or more. {CACHED_MARK} kept, pinned or cached: not run in that run.")
    if notes:
        legend = f"{'; '.join(notes).capitalize()}: diff.rows() or planbook diff A B lists every step. " + legend
    table = (f'<table class="planbook-rundiff-steps" style="border-collapse:collapse;margin:4px 0">'
             f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
    if len(body) > 30:
        table = f'<div style="max-height:520px;overflow:auto">{table}</div>'
    return f'{table}<div class="planbook-rundiff-legend" style="{DIM};font-size:11px">{esc(legend)}</div>'


def _row_html(row: DiffRow, hide: Callable[[str | None], str], tokens: bool, first: str | None) -> str:
    base = row.sides[0]
    sid = esc(one_line(hide(row.step)))
    if row.step == first:
        start = (f'<tr class="planbook-first-divergence" title="first divergence">'
                 f'<th style="border-left:4px solid {FILLS["failed"]}">{FIRST_MARK} {sid}</th>')
    else:
        start = f"<tr><th>{sid}</th>"
    cells = [start, f"<td>{esc(side_text(base.how, base.status))}</td><td>{_time(base.seconds) if base.seconds is not None else ''}</td>"]
    for side, change in zip(row.sides[1:], row.changes):
        cells.append(_other_cells(base.seconds, base.tokens, side.how, side.status, side.seconds, side.tokens, change,
                                  tokens))
    return "".join(cells) + "</tr>"


def _other_cells(base_seconds: float | None, base_tokens: int, how: str, status: str | None, seconds: float | None,
                 tokens: int, change: Change, with_tokens: bool) -> str:
    same = "" if change.result_same is None else (" =" if change.result_same else " ≠")
    kind = change.kind
    tinted = _CHANGE_TINTS.get(kind)
    out = f"<td>{esc(side_text(how, status))}{same}</td>"
    out += f'<td style="{tinted}">{kind}</td>' if tinted else f"<td>{kind}</td>"
    d, direction = delta_seconds(base_seconds, seconds)
    out += f'<td style="{_WORSE if direction > 0 else _BETTER}">{d}</td>' if direction else f"<td>{d}</td>"
    if with_tokens:
        t, direction = delta_number(base_tokens, tokens) if (base_tokens or tokens) else ("", 0)
        out += f'<td style="{_WORSE if direction > 0 else _BETTER}">{t}</td>' if direction else f"<td>{t}</td>"
    return out


def rundiff_bundle(diff: RunDiff) -> dict[str, str]:
    """What a notebook shows of a comparison: the text without durations (deterministic) and the HTML."""
    ensure_checkpoint()
    return {"text/plain": rundiff_text(diff, diff.changed_only, False), "text/html": rundiff_html(diff, diff.changed_only)}


__all__ = ["rundiff_bundle", "rundiff_html", "rundiff_text"]
