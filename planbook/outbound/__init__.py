"""The gate: the one way out of a run.

Everything that leaves a run — a store's rows, every view (text, HTML, Markdown, the widget's
state, the static record, the terminal view), OpenTelemetry spans, the CLI's output and its
approval prompt, the MCP server's answers, revision diffs, a run result's error and ``str`` —
passes through this package. Its parts:

- :mod:`.redact`: what is secret (by name, by value, by shape) and how it is hidden;
- :mod:`.text`: text made inert for a terminal, a one-line cell, and Markdown;
- :mod:`.html`: HTML from results, sanitised by a maintained sanitizer (nh3) and kept in its pane.

It sits in the data layer: it imports nothing of the engine, the views or the surfaces.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from ..data.refs import WHOLE_REF, find_refs
from .checkpoint import mask_bytes, mask_data, mask_text, remember
from .redact import (
    MIN_SECRET_LENGTH,
    Redactor,
    is_secret_name,
    named_secrets,
    secret_texts,
    shown_arg,
    suspicious,
)
from .shapes import REDACTED_TEXT
from .text import TEXT_LIMIT, bounded, html_text, indent_lines, md_code, md_text, neutralise, one_line
from .vault import VAULT

#: the parts of a reference after a step id: ``$login.token``, ``$login[0]``
_REF_TAIL = re.compile(r"[.\[]")


def secret_arg_values(args: Mapping[str, Any], ids: Collection[str] | None = None) -> tuple[list[Any], list[str]]:
    """The literal values given to ``args``' secret-named arguments (or to secret-named keys
    inside any argument: ``headers={"Authorization": ...}``), and the ids of the steps whose
    results feed them by reference (``token: $login``).

    ``ids``: the plan's step ids, when known. A ``$``-value that names none of them
    (``password: "$ecret-pw"``) is a literal, so a secret: it is never read as a reference."""
    values, refs = named_secrets(args)
    holders: list[str] = []
    for value in refs:
        named, literal = _ref_value(value, ids)
        holders += named
        if literal:
            values.append(value)
    return values, holders


def _ref_value(value: str, ids: Collection[str] | None) -> tuple[list[str], bool]:
    """The steps a ``$``-value under a secret-named key names, and whether it is (or holds)
    a literal: ``"Bearer ${login}"``'s literal part is secret too."""
    found = find_refs(value)
    # ``$login.token`` names the step ``login`` (or one called ``login.token``)
    named = {part for ref in found for part in (ref, _REF_TAIL.split(ref, maxsplit=1)[0])}
    if ids is not None:
        named = {part for part in named if part in ids}
    return sorted(named), not named or not WHOLE_REF.match(value)


def plan_secret_values(steps: Iterable[Any], known_ids: Iterable[str] = ()) -> list[Any]:
    """The literal values under secret-named keys of ``steps``' args (Steps or a spec's raw
    step mappings), ``$``-values that name no step of them (nor ``known_ids``) included: what
    a refused plan's error must not quote, learned before the error is made."""
    steps = list(steps)
    ids: set[str] = set(known_ids)
    for i, step in enumerate(steps):
        sid = step.get("id", str(i + 1)) if isinstance(step, Mapping) else getattr(step, "id", None)
        ids.add(str(sid))
    values: list[Any] = []
    for step in steps:
        args = step.get("args") if isinstance(step, Mapping) else getattr(step, "args", None)
        if isinstance(args, Mapping) and args:
            values += secret_arg_values(args, ids)[0]
        elif isinstance(args, (list, tuple)):  # not a mapping (a mistake the error names): its secret-named keys
            values += named_secrets(args)[0]
    return values


def _feeders(step: Any) -> list[str]:
    """The steps whose results ``step`` is given: its ``$id`` references (whole or ``${id}``
    inline, ``$id.field`` naming ``id``), and an agent step's ``needs`` (it is shown their results)."""
    fed = [part for ref in find_refs(step.args) for part in (ref, _REF_TAIL.split(ref, maxsplit=1)[0])] \
        if step.args else []
    if getattr(step, "agent", None):
        fed += list(step.needs)
    return fed


def holder_texts(result: Any) -> list[Any]:
    """What of a result that feeds a secret-named argument is the secret: a text or a number
    whole; in a mapping (or an object's fields) the values under secret-named keys when it has
    such keys (``access_token``, not ``token_type: "Bearer"`` or ``expires_in: 3600``), else its
    longer texts; in a list, each item so."""
    if isinstance(result, (str, bytes, int, float)) and not isinstance(result, bool):
        return [result]
    if isinstance(result, (list, tuple, set, frozenset)):
        return [text for item in result for text in holder_texts(item)]
    fields = result if isinstance(result, Mapping) else getattr(result, "__dict__", None)
    if isinstance(fields, Mapping):
        named, _ = named_secrets(dict(fields))
        if named:
            return named
        return [t for t in secret_texts(list(fields.values())) if len(t) >= MIN_SECRET_LENGTH]
    return [result]


#: event fields only the engine writes (counts, times, the worker's name): never text of a run
ENGINE_FIELDS = frozenset({"attempt", "execution", "worker", "duration", "call_start", "call_end", "kept"})


class RunSecrets:
    """The gate of one run: what the run knows to be secret, and the one way its text and values
    are made fit to leave it.

    A value given to a secret-named argument (``password=``, ``api_key=``) is a secret of the
    run, in every form it takes: the goal or title that mentions it, an error that echoes it, a
    result that repeats it, the arguments of an edit. A step whose result feeds a secret-named
    argument of a later step (``token: $login``) *holds* a secret: its result is shown as ``***``
    and its texts are hidden wherever they turn up. The store, the views, the spans and the
    command line all ask this object (through the run, its result or its view state), so a
    new surface is safe by going through it, not by its own care.

    Thread-safe: steps finish on worker threads while a view reads on the main thread.
    """

    def __init__(self, secrets: Iterable[str] = (), *, env: Mapping[str, str] | None = None) -> None:
        self.redactor = Redactor(secrets, env=env)
        #: ids of the steps whose results are secrets (they feed a secret-named argument)
        self.holders: set[str] = set()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[list[str]], None]] = []
        self._known: set[str] = set()
        #: the redactor's patterns, the sorted forms of the known secrets, the longest's length
        self._sorted_forms: tuple[Any, tuple[str, ...], int] | None = None

    # --------------------------------------------------------------- learning
    @classmethod
    def of_plan(cls, plan: Any, *, env: Mapping[str, str] | None = None) -> "RunSecrets":
        """The secrets a plan names (a plan not run, a stored run read back)."""
        secrets = cls(env=env)
        secrets.learn_plan(plan)
        return secrets

    def learn_plan(self, plan: Any) -> None:
        """Every secret-named argument of ``plan``'s steps: its value is a secret, and the steps
        it references hold one, as does every step that feeds a holder, through any number of
        steps (``login -> pick(x: $login) -> fetch(token: $pick)``: ``pick`` and ``login``).
        Holders' results, if they have any yet, are learned too."""
        values: list[Any] = []
        refs: list[Any] = []
        for step in plan.steps:
            if step.args:
                v, r = named_secrets(step.args)
                values += v
                refs += r
        if refs or self.holders:
            by_id = {s.id: s for s in plan.steps}
            direct: list[str] = []
            for value in refs:
                named, literal = _ref_value(value, by_id)
                direct += named
                if literal:
                    values.append(value)
            new = self._upstream(by_id, direct)
            if new:
                values += [t for sid in new if (s := by_id[sid]).result is not None for t in holder_texts(s.result)]
        if values:
            self.learn(values)

    def _upstream(self, by_id: Mapping[str, Any], direct: list[str]) -> set[str]:
        """Add ``direct`` holders and every step upstream of a holder to :attr:`holders`; the new ones."""
        with self._lock:
            holders = set(self.holders)
        known = set(holders)
        todo = [sid for sid in dict.fromkeys(direct) if sid in by_id] + [sid for sid in holders if sid in by_id]
        holders.update(todo)
        seen: set[str] = set()
        while todo:
            sid = todo.pop()
            if sid in seen:
                continue
            seen.add(sid)
            for fed in _feeders(by_id[sid]):
                if fed in by_id and fed not in holders:
                    holders.add(fed)
                    todo.append(fed)
        new = holders - known
        if new:
            with self._lock:
                self.holders |= new
        return new

    def learn_result(self, step: Any) -> None:
        """``step`` has a result: if it feeds a secret-named argument, the result is a secret."""
        self.learn_outcome(step.id, step.result)

    def learn_outcome(self, step_id: str, result: Any) -> bool:
        """A call of ``step_id`` returned ``result``: if the step holds a secret, the result is
        one from now on (called before anything about the call is written, shown or sent).
        True when it does."""
        if step_id not in self.holders:
            return False
        if result is not None:
            self.learn(holder_texts(result))
        return True

    def learn(self, values: Iterable[Any]) -> None:
        """The strings and numbers in ``values`` are secrets of this run from now on."""
        texts = [t for t in secret_texts(values) if len(t) >= Redactor.MIN_SECRET]
        with self._lock:
            new = [t for t in dict.fromkeys(texts) if t not in self._known]
            if not new:
                return
            self._known.update(new)
            self.redactor.add_secrets(new)
            VAULT.add(new)  # every exit of the process hides it from now on, whichever surface forgets
            listeners = list(self._listeners)
        for listener in listeners:
            listener(new)

    def on_learn(self, listener: Callable[[list[str]], None]) -> None:
        """Call ``listener(texts)`` with the secrets known now and with every one learned later
        (a store's redactor: a run's secrets reach its file as ``***``)."""
        with self._lock:
            self._listeners.append(listener)
            known = sorted(self._known)
        if known:
            listener(known)

    @property
    def known(self) -> frozenset[str]:
        """The secret texts this run has learned (not the environment's)."""
        return frozenset(self._known)

    # ---------------------------------------------------------------- hiding
    def text(self, text: str | None) -> str:
        """``text`` with this run's secrets, the environment's and every secret shape (``Bearer …``,
        ``user:pw@`` in a URL, ``password=…``) replaced by ``***``."""
        if not text:
            return text or ""
        self.redactor.refresh()
        return self.redactor.text(text)

    def _forms(self) -> tuple[str, ...]:
        """Every form of every known secret (as is, escaped, encoded), sorted: made again only
        when a secret is learned or the environment's change."""
        patterns = self.redactor.patterns  # refreshed: another object once a secret is learned
        cached = self._sorted_forms
        if cached is not None and cached[0] is patterns:
            return cached[1]
        forms = tuple(sorted(self.redactor.known_forms))
        self._sorted_forms = (patterns, forms, max(map(len, forms), default=0))
        return forms

    def longest_form(self) -> int:
        """The length of the longest form of a known secret (what a carry must be able to hold)."""
        self._forms()
        return self._sorted_forms[2] if self._sorted_forms is not None else 0

    def unfinished_tail(self, text: str) -> int:
        """How many of ``text``'s last characters may be the start of a known secret whose rest
        is not there yet (a password printed half by half): a live view holds them back until
        more is printed. 0 when the end of ``text`` starts no secret."""
        forms = self._forms()
        if not forms or not text:
            return 0
        longest = self.longest_form()
        for start in range(max(0, len(text) - longest + 1), len(text)):  # the longest start first
            tail = text[start:]
            i = bisect_left(forms, tail)  # the first form not below ``tail``: it starts with it if any does
            if i < len(forms) and forms[i].startswith(tail):
                return len(text) - start
        return 0

    def hider(self) -> Callable[[str | None], str]:
        """:meth:`text` for one render: the environment's secrets are read once here, not once per
        text (a record of 1,000 steps hides thousands of texts; each read of the environment
        costs more than hiding a clean text). Use it for one view built at once, not kept."""
        self.redactor.refresh()
        hide = self.redactor.text

        def text(value: str | None) -> str:
            return hide(value) if value else (value or "")

        return text

    def data(self, value: Any) -> Any:
        """Plain data redacted as :meth:`text` (secret-named keys whole); other objects as they are."""
        self.redactor.refresh()
        return self.redactor.data(value)

    def event_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """An event's data as the run keeps, stores and sends it: every field passes the gate,
        but for a ``step.started``'s (its attempt and execution counts and the thread it ran on:
        the engine's own, no text of a run's) — two events a step, the hot path of every run.
        The redactor's patterns follow the vault; the model variables are read again where text
        leaves the process, not for each event."""
        if ENGINE_FIELDS.issuperset(data):
            return data
        redactor = self.redactor
        text = redactor.text
        for name, value in data.items():  # the common case inline: numbers and short clean texts
            kind = type(value)
            if kind is str:
                if text(value) is not value:
                    break
            elif kind is int or kind is float or kind is bool or value is None:
                if value is not None and name not in ENGINE_FIELDS and is_secret_name(name):
                    break
            else:
                break
        else:
            return data  # nothing to hide: the dict itself (its shared key table kept)
        return redactor.data(data)

    def result(self, step: Any) -> Any:
        """What may be shown of ``step``'s result: ``***`` for a step that holds a secret."""
        if step.id in self.holders and step.result is not None:
            return REDACTED_TEXT
        return step.result

    def value(self, step_id: str, value: Any) -> Any:
        """A step's result as an answer may carry it (the command line, the MCP server): ``***``
        for a step that holds a secret, plain data redacted, other objects as they are (their
        text goes through :meth:`text` when printed)."""
        if step_id in self.holders:
            return REDACTED_TEXT
        return self.data(value)

    def shown_args(self, args: Mapping[str, Any], *, as_json: bool = True) -> dict[str, Any]:
        """A step's arguments as a browser or a model may see them (the widget's editor, a
        replan's prompt): under a secret-named key at any depth a literal is ``***``, a ``$id``
        reference and a :class:`~planbook.Secret` are shown (its ``{"$secret": ...}`` form with
        ``as_json``, else the object, whose every form is its reference); texts and numbers
        elsewhere are redacted (a URL's credentials, a known secret inside a text, as ``***``)."""
        hide = self.hider()
        data = self.redactor.data

        def leaf(value: Any) -> Any:
            return hide(value) if isinstance(value, str) else data(value)

        return {name: shown_value(value, leaf, named=type(name) is str and is_secret_name(name), as_json=as_json)
                for name, value in args.items()}

    def kept_secrets(self, edited: Mapping[str, Any], current: Mapping[str, Any],
                     shown: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Arguments edited from :meth:`shown_args` (``shown``: what was shown, if not made again
        now): what comes back as it was shown keeps its real value, key by key at any depth (a
        password as ``***``, a header beside an edited one), and a text that still shows a hidden
        part's ``***`` gets that part back, in order (``https://***@host/new-path``). An edit
        never sets a secret to ``***``. ValueError when an edited text shows another number of
        ``***`` than it hid: which one is which cannot be told, and it is not guessed."""
        if shown is None:
            shown = self.shown_args(current, as_json=True)
        return {name: _kept(value, current[name], shown[name], (name,)) if name in current and name in shown
                else value for name, value in edited.items()}

    def holds_secret(self, step_id: str) -> bool:
        return step_id in self.holders

    def scrub(self, outcome: Any, fields: tuple[str, ...] = ("error", "traceback", "output")) -> None:
        """Hide secrets in an outcome's texts in place (a failed call's error and traceback, its
        printed output): the step, its events, the run's error and every view then hold only
        what may leave."""
        hide: Callable[[str], str] | None = None
        for field in fields:
            value = getattr(outcome, field, None)
            if value:
                if hide is None:  # the environment's secrets read once for all the fields (once a step)
                    self.redactor.refresh()
                    hide = self.redactor.text
                hidden = hide(value)
                if hidden != value:
                    setattr(outcome, field, hidden)

    # ------------------------------------------------------------- rendering
    def terminal(self, text: str | None) -> str:
        """Text for a terminal: secrets hidden, control sequences shown as escapes."""
        return neutralise(self.text(text))

    def line(self, text: str | None) -> str:
        """One line of text for a terminal or a table cell: secrets hidden, breaks shown as ⏎."""
        return one_line(self.text(text))


#: the key of a secret's JSON form, ``{"$secret": "env:NAME"}``: :data:`planbook.data.secret.SECRET_KEY`
#: (that module imports this package, through the vault and the errors: it cannot be imported here)
SECRET_JSON_KEY = "$secret"


def _is_secret(value: Any) -> bool:
    """A :class:`planbook.Secret` (known by what it does: see :data:`SECRET_JSON_KEY` for why not by import)."""
    kind = type(value)
    return hasattr(kind, "reveal") and hasattr(kind, "to_json") and hasattr(kind, "ref")


def _is_secret_json(value: Any) -> bool:
    return type(value) is dict and len(value) == 1 and isinstance(value.get(SECRET_JSON_KEY), str)


def shown_value(value: Any, leaf: Callable[[Any], Any], *, named: bool = False, as_json: bool = True) -> Any:
    """``value`` as it may be shown to a person or a model (see :meth:`RunSecrets.shown_args`):
    ``named``: it is under a secret-named key; ``leaf`` hides a text or a number elsewhere.
    ``value`` itself when nothing changes."""
    if _is_secret(value):
        return value.to_json() if as_json else value
    if named:
        if value is None or (isinstance(value, str) and WHOLE_REF.match(value)) or _is_secret_json(value):
            return value  # a reference names the secret, it is not one
        return REDACTED_TEXT
    if isinstance(value, dict):
        out = {k: shown_value(v, leaf, named=type(k) is str and is_secret_name(k), as_json=as_json)
               for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, (list, tuple)):
        items = [shown_value(v, leaf, as_json=as_json) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return leaf(value)
    return value


def _where(path: tuple[Any, ...]) -> str:
    return f"argument {path[0]!r}" + "".join(f"[{p!r}]" for p in path[1:])


def _kept(edited: Any, current: Any, shown: Any, path: tuple[Any, ...]) -> Any:
    """One edited value with the secrets :func:`shown_value` hid in ``current`` put back (see
    :meth:`RunSecrets.kept_secrets`)."""
    if type(edited) is type(shown) and edited == shown:
        return current  # not changed: its real value, whatever was hidden in it
    if isinstance(edited, dict) and isinstance(current, dict) and isinstance(shown, dict):
        return {k: _kept(v, current[k], shown[k], (*path, k)) if k in current and k in shown else v
                for k, v in edited.items()}
    if isinstance(edited, (list, tuple)) and isinstance(current, (list, tuple)) and isinstance(shown, (list, tuple)) \
            and len(edited) == len(current) == len(shown):
        items = [_kept(e, c, s, (*path, i)) for i, (e, c, s) in enumerate(zip(edited, current, shown))]
        return items if isinstance(edited, list) else tuple(items)
    if isinstance(edited, str) and isinstance(current, str) and isinstance(shown, str) and REDACTED_TEXT in shown:
        return _kept_text(edited, current, shown, path)
    return edited


def _kept_text(edited: str, current: str, shown: str, path: tuple[Any, ...]) -> str:
    """An edited text with each hidden part of ``current`` back where the edit still shows its ``***``."""
    count = edited.count(REDACTED_TEXT)
    if count == 0:
        return edited  # every hidden part was taken out: nothing to put back
    hidden = hidden_parts(current, shown)
    if hidden is None:
        raise ValueError(f"{_where(path)}: its hidden parts cannot be told apart in the text as it was shown; "
                         f"write the whole value again, without {REDACTED_TEXT}")
    if count != len(hidden):
        raise ValueError(f"{_where(path)} hid {len(hidden)} part(s) as {REDACTED_TEXT} and the edit shows {count}: "
                         f"keep each {REDACTED_TEXT} where its part stays (take one out to drop it), or write the "
                         f"whole value again without {REDACTED_TEXT}")
    pieces = edited.split(REDACTED_TEXT)
    return "".join(piece + (hidden[i] if i < len(hidden) else "") for i, piece in enumerate(pieces))


def hidden_parts(original: str, shown: str) -> list[str] | None:
    """The parts of ``original`` that ``shown`` (made from it by replacing parts with ``***``)
    hides, in order; None when ``shown`` does not fit ``original`` or the parts could be cut
    more than one way (a hidden part that holds the shown text after it). Linear in the texts
    times the number of parts: each shown piece is found once from the left and once from the
    right, and the two must agree."""
    pieces = shown.split(REDACTED_TEXT)
    head, tail = pieces[0], pieces[-1]
    end = len(original) - len(tail)
    if not original.startswith(head) or not original.endswith(tail) or end - len(head) < len(pieces) - 1:
        return None
    middle = pieces[1:-1]
    # the earliest place of each middle piece (every hidden part at least one character long) ...
    left: list[int] = []
    at = len(head)
    for piece in middle:
        found = original.find(piece, at + 1, end - 1)
        if found < 0:
            return None
        left.append(found)
        at = found + len(piece)
    if at >= end:
        return None
    # ... and the latest: the same places, or the cut is not the only one
    right: list[int] = []
    at = end
    for piece in reversed(middle):
        found = original.rfind(piece, len(head) + 1, at - 1)
        if found < 0:
            return None
        right.append(found)
        at = found
    right.reverse()
    if left != right:
        return None
    bounds = [len(head)] + [p for i, start in enumerate(left) for p in (start, start + len(middle[i]))] + [end]
    return [original[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2)]


def plain_gate() -> RunSecrets:
    """A gate that knows no run's secrets: name, shape and environment rules only (an error
    raised before a run, a plan printed on its own)."""
    return RunSecrets()


def shown_error(text: str) -> str:
    """An error message as a notebook or a terminal shows it: secret shapes and the model's
    credentials hidden, control sequences shown as escapes (line breaks kept)."""
    return neutralise(plain_gate().text(text))


__all__ = [
    "REDACTED_TEXT", "Redactor", "TEXT_LIMIT", "VAULT", "bounded", "mask_bytes", "mask_data", "mask_text", "remember", "RunSecrets", "hidden_parts", "html_text", "indent_lines", "is_secret_name", "md_code", "md_text",
    "neutralise", "one_line", "plain_gate", "plan_secret_values", "secret_arg_values", "secret_texts", "shown_arg",
    "shown_error", "shown_value", "suspicious",
]
