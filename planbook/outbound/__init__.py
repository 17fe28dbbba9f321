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
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..data.refs import WHOLE_REF, find_refs
from .redact import (MIN_SECRET_LENGTH, REDACTED_TEXT, Redactor, is_secret_name, masked_names, named_secrets,
                     secret_texts, shown_arg, suspicious)
from .checkpoint import mask_bytes, mask_data, mask_text, remember
from .vault import VAULT
from .text import TEXT_LIMIT, bounded, html_text, indent_lines, md_code, md_text, neutralise, one_line

#: the parts of a reference after a step id: ``$login.token``, ``$login[0]``
_REF_TAIL = re.compile(r"[.\[]")


def secret_arg_values(args: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
    """The literal values given to ``args``' secret-named arguments (or to secret-named keys
    inside any argument: ``headers={"Authorization": ...}``), and the ids of the steps whose
    results feed them by reference (``token: $login``)."""
    values, refs = named_secrets(args)
    holders: list[str] = []
    for value in refs:
        found = find_refs(value)
        # ``$login.token`` names the step ``login`` (or one called ``login.token``)
        holders.extend({part for ref in found for part in (ref, _REF_TAIL.split(ref, maxsplit=1)[0])})
        if not found or not WHOLE_REF.match(value):
            values.append(value)  # ``"Bearer ${login}"``: the literal part is secret too
    return values, holders


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

    # --------------------------------------------------------------- learning
    @classmethod
    def of_plan(cls, plan: Any, *, env: Mapping[str, str] | None = None) -> "RunSecrets":
        """The secrets a plan names (a plan not run, a stored run read back)."""
        secrets = cls(env=env)
        secrets.learn_plan(plan)
        return secrets

    def learn_plan(self, plan: Any) -> None:
        """Every secret-named argument of ``plan``'s steps: its value is a secret, and the steps
        it references hold one (their results, if they have any yet, are learned too)."""
        values: list[Any] = []
        holders: list[str] = []
        for step in plan.steps:
            if step.args:
                v, h = secret_arg_values(step.args)
                values += v
                holders += h
        if holders:
            with self._lock:
                new = set(holders) - self.holders
                self.holders |= new
            if new:
                values += [t for s in plan.steps if s.id in new and s.result is not None for t in holder_texts(s.result)]
        if values:
            self.learn(values)

    def learn_result(self, step: Any) -> None:
        """``step`` has a result: if it feeds a secret-named argument, the result is a secret."""
        if step.id in self.holders and step.result is not None:
            self.learn(holder_texts(step.result))

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

    def shown_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """A step's arguments as a browser may hold them (the widget's editor): a secret-named
        one as ``***`` (a ``$id`` reference as written), the others redacted as plain data."""
        return {name: REDACTED_TEXT if shown_arg(name, value, str) == REDACTED_TEXT
                else self.data(masked_names(value)) for name, value in args.items()}

    def kept_secrets(self, edited: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments edited from :meth:`shown_args`: one that comes back as it was shown (a
        password as ``***``, a URL with its credentials hidden, a dict with a hidden key) was not
        changed, and keeps its real value (an edit never sets a password to ``***``)."""
        shown = self.shown_args(current)
        return {name: current[name] if name in current and value == shown[name] else value
                for name, value in edited.items()}

    def holds_secret(self, step_id: str) -> bool:
        return step_id in self.holders

    def scrub(self, outcome: Any, fields: tuple[str, ...] = ("error", "traceback", "output")) -> None:
        """Hide secrets in an outcome's texts in place (a failed call's error and traceback, its
        printed output): the step, its events, the run's error and every view then hold only
        what may leave."""
        for field in fields:
            value = getattr(outcome, field, None)
            if value:
                hidden = self.text(value)
                if hidden != value:
                    setattr(outcome, field, hidden)

    # ------------------------------------------------------------- rendering
    def terminal(self, text: str | None) -> str:
        """Text for a terminal: secrets hidden, control sequences shown as escapes."""
        return neutralise(self.text(text))

    def line(self, text: str | None) -> str:
        """One line of text for a terminal or a table cell: secrets hidden, breaks shown as ⏎."""
        return one_line(self.text(text))

    def markdown(self, text: str | None) -> str:
        """Inert Markdown of ``text``, secrets hidden."""
        return md_text(self.text(text))


def plain_gate() -> RunSecrets:
    """A gate that knows no run's secrets: name, shape and environment rules only (an error
    raised before a run, a plan printed on its own)."""
    return RunSecrets()


def shown_error(text: str) -> str:
    """An error message as a notebook or a terminal shows it: secret shapes and the model's
    credentials hidden, control sequences shown as escapes (line breaks kept)."""
    return neutralise(plain_gate().text(text))


__all__ = [
    "REDACTED_TEXT", "Redactor", "TEXT_LIMIT", "VAULT", "bounded", "mask_bytes", "mask_data", "mask_text", "remember", "RunSecrets", "html_text", "indent_lines", "is_secret_name", "md_code", "md_text",
    "neutralise", "one_line", "plain_gate", "secret_arg_values", "secret_texts", "shown_arg", "shown_error",
    "suspicious",
]
