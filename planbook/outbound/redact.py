"""What never reaches a store: API keys, Authorization headers, and values named like secrets.

Three rules, applied to step args, step records, run state and event data before a
store writes them:

- **by name**: the value of a mapping key (an argument, a header, an event field) whose
  name is secret-like is replaced, whole (the user and password of ``auth=(user, pw)``
  alike). A name is secret-like, in any case and with any separator, when one of its
  words (split at ``_``, ``-``, ``.``, spaces and camelCase) is ``key``, ``token``,
  ``secret``, ``password``, ``passwd``, ``pw``, ``pwd``, ``passphrase``, ``auth``,
  ``authorization``, ``cookie``, ``credential(s)``, ``session``, ``secrets``,
  ``passwords``, or ends with one of them (``apikey``, ``accesstoken``, ``basicauth``) —
  unless its last word says it *describes* a secret rather than holds one
  (``token_count``, ``key_name``, ``secret_path``, ``auth_url``, ``session_id``,
  ``max_tokens``, ``keys`` and ``KeyError`` are kept).
- **by value**: strings that are known secrets (the model key and base-URL credentials of
  the environment — the same set a model cassette redacts — plus any given to the store,
  plus every value redacted by name, learned: the strings and numbers in it, plus the
  process's vault), in every form they can be echoed in (:func:`echo_forms`) — as they are,
  as ``repr``, ``ascii`` or JSON escape them, escaped twice (a JSON echo kept as a repr),
  URL-encoded, HTML-escaped. Forms that overlap are hidden together: no fragment is left.
- **by shape** (:mod:`.shapes`, linear in the text): ``Bearer …``, ``Authorization: …``,
  ``sk-…`` keys, ``user:password@`` in URLs, and a secret-named field in every form a
  program writes one (``name=value``, ``Settings(password='x')``, ``{'api_key': 'x'}``,
  ``"name": value``, ``password: x``).
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

from ..data.refs import WHOLE_REF
from . import vault
from .shapes import REDACTED_TEXT, mask_shapes
from .vault import VAULT

#: an argument or field named with one of these words holds a secret (its value is masked)
HOLDING_WORDS = frozenset({
    "key", "token", "secret", "secrets", "password", "passwords", "passwd", "pwd", "pw", "passphrase",
    "auth", "authorization", "cookie", "cookies", "credential", "credentials", "apikey", "privatekey",
    "session", "sessions",
})
#: ... or a name ending in one of these (``api_key``, ``github_token``)
HOLDING_SUFFIXES = ("key", "token", "secret", "password", "passwd", "passphrase", "auth", "cookie", "credentials")
#: a last word like these names a property of a secret, not the secret itself
_DESCRIBING_WORDS = frozenset({
    "count", "counts", "limit", "limits", "max", "min", "len", "length", "size", "type", "kind", "name",
    "names", "id", "ids", "file", "path", "env", "var", "field", "fields", "used", "usage", "budget",
    "url", "uri", "endpoint", "method", "scheme", "provider", "timeout", "ttl", "expiry", "expires",
    "error", "errors", "exception", "warning", "warnings",  # KeyError: 'v', TokenError: expired
})
#: words ending in "key" that are not keys
_NOT_KEYS = frozenset({"monkey", "donkey", "turkey", "whiskey", "hockey", "jockey", "turnkey"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when a value under ``name`` is treated as a secret (see the module docstring)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or words[-1] in _DESCRIBING_WORDS:
        return False
    return any(
        w in HOLDING_WORDS or (w.endswith(HOLDING_SUFFIXES) and w not in _NOT_KEYS) for w in words
    )


def environment_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The secrets a model cassette redacts: the model key and the base URL's credentials."""
    env = os.environ if env is None else env
    key, url = env.get("OPENAI_API_KEY"), env.get("OPENAI_BASE_URL")
    if not key and not url:  # the usual offline case
        return []
    return model_secrets(key, url)


_MODEL_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
try:  # os.environ's own mapping and how it spells a key (bytes on POSIX, upper case on Windows)
    _RAW_KEYS = tuple(os.environ.encodekey(k) for k in _MODEL_VARIABLES)
    _RAW_DATA = os.environ._data  # type: ignore[attr-defined]
except (AttributeError, TypeError):  # another Python: read it the documented way
    _RAW_KEYS, _RAW_DATA = (), None


def _model_variables(env: Mapping[str, str]) -> tuple[object, object]:
    """The model key and base URL as ``env`` holds them, only to tell whether they changed.

    Every text a run shows is redacted and first asks this; ``os.environ.get`` encodes the key,
    decodes the value and, for a missing key, raises and catches twice (about 4 µs, more than
    hiding a clean text): ``os.environ``'s own mapping answers in two dictionary lookups."""
    if env is os.environ and _RAW_DATA is not None and os.environ._data is _RAW_DATA:  # type: ignore[attr-defined]
        return _RAW_DATA.get(_RAW_KEYS[0]), _RAW_DATA.get(_RAW_KEYS[1])
    return env.get(_MODEL_VARIABLES[0]), env.get(_MODEL_VARIABLES[1])


class _Known(NamedTuple):
    """The compiled form of one set of secrets (see :func:`_compiled`)."""

    pattern: re.Pattern[str] | None
    starts: re.Pattern[str] | None
    as_bytes: tuple[bytes, ...]
    forms: tuple[str, ...]


@lru_cache(maxsize=8)
def _compiled(found: frozenset[str]) -> _Known:
    """Every form each secret of ``found`` is echoed in (see :func:`echo_forms`), and each of
    them as JSON text writes it, as one pattern: longest first, so at one place the longest
    wins; and every place a form starts, with the longest there, so overlapping secrets are
    hidden together."""
    forms = {form for s in found for form in echo_forms(s)}
    forms |= {json_form for f in forms for json_form in (_dump(f)[1:-1], json.dumps(f)[1:-1])}
    ordered = sorted(forms, key=len, reverse=True)
    if not ordered:
        return _Known(None, None, (), ())
    alternatives = "|".join(map(re.escape, ordered))
    return _Known(re.compile(alternatives), re.compile(f"(?=({alternatives}))"),
                  tuple(s.encode("utf-8", "surrogatepass") for s in ordered), tuple(ordered))


class Redactor:
    """Redacts text and plain data (dicts, lists, tuples); other objects are left to the caller.

    ``secrets``: strings never to be written, besides the environment's (read again on
    :meth:`refresh`, so a key set after the store was opened is still hidden).
    """

    #: secrets shorter than this are not hunted for in text (masking every "1" garbles it)
    MIN_SECRET = 4

    def __init__(self, secrets: Iterable[str] = (), *, env: Mapping[str, str] | None = None) -> None:
        self._given = {s for s in secrets if s}
        VAULT.add(self._given)
        self._env = env
        self._env_key: tuple[object, ...] | None = None  # what the two variables and the vault were (to tell a change)
        self._vault_version = -1
        self._known: re.Pattern[str] | None = None
        self._known_bytes: tuple[bytes, ...] = ()
        self._known_text: re.Pattern[str] | None = None
        self._known_at: re.Pattern[str] | None = None
        #: every form of every secret it knows (as is, escaped, encoded): the gate's checks search texts for them
        self.known_forms: tuple[str, ...] = ()
        self._exact: frozenset[str] = frozenset()
        self.refresh()

    def add_secrets(self, secrets: Iterable[str]) -> None:
        """Hide these strings too (e.g. an LLM config's ``secrets()``). Compiled when next used:
        a run that learns secrets one step at a time compiles its patterns once per use, not
        once per secret learned while nothing reads them."""
        new = {s for s in secrets if s} - self._given
        if new:
            self._given |= new
            self._env_key = None
            VAULT.add(new)  # what one gate hides, every exit hides (and all share one compiled set)

    def learn(self, values: Iterable[Any]) -> None:
        """Values that were redacted by name (a ``password=`` arg, the tuple of ``auth=``):
        the strings and numbers in them are hidden wherever else they turn up from now on —
        an error message that echoes the argument, a result, an event — not only under their name."""
        new = {v for v in secret_texts(values) if len(v) >= self.MIN_SECRET and v not in self._given}
        if new:
            self.add_secrets(new)

    def refresh(self) -> None:
        """Re-read the environment's secrets if the key or base URL changed, and the vault's if
        it grew. The patterns are compiled once per set of secrets and shared by every redactor
        that knows that set (every run's gate, every store's, the exits'): a kernel with many
        runs compiles once per secret learned, not once per redactor."""
        env = os.environ if self._env is None else self._env
        now = (*_model_variables(env), VAULT.version)
        if now == self._env_key:
            return
        self._env_key, self._vault_version = now, VAULT.version
        # the process's vault too: a secret any run, toolbox or Secret made known is hidden by every gate
        found = frozenset(s for s in self._given | VAULT.texts | set(environment_secrets(env))
                          if len(s) >= self.MIN_SECRET)
        known = _compiled(found)
        self._exact = found
        self._known = self._known_text = known.pattern
        self._known_at = known.starts
        self._known_bytes = known.as_bytes
        self.known_forms = known.forms

    @property
    def patterns(self) -> re.Pattern[str] | None:
        """What the known secrets are matched with now: another object once a secret is learned
        (a store compares it to tell whether a row written before may hold one)."""
        if self._env_key is None or self._vault_version != VAULT.version:
            self.refresh()
        return self._known_text

    @property
    def has_secrets(self) -> bool:
        """True when there are known secret strings to look for."""
        self.refresh()
        return self._known is not None

    def has_known_secret(self, data: str | bytes) -> bool:
        """True when ``data`` (text, JSON text, or a pickle's bytes) holds a known secret."""
        self.refresh()
        if self._known_text is None:
            return False
        if isinstance(data, bytes):
            return any(s in data for s in self._known_bytes)
        return self._known_text.search(data) is not None

    def json_text(self, value: Any) -> str:
        """``value`` (plain data) as compact JSON, redacted. The fast path: the JSON text is
        searched once for anything redaction could change (a known secret, a secret-like word,
        credentials in a URL); only then is the data walked. TypeError for non-JSON data."""
        text = _dump(value)
        if self.unchanged(text):
            return text
        return _dump(self.data(value))

    def unchanged(self, text: str) -> bool:
        """True when redaction would change nothing in ``text`` (False may be a false alarm:
        see :data:`SUSPECT_WORDS`)."""
        if self._env_key is None or self._vault_version != VAULT.version:
            self.refresh()
        return not suspicious(text) and not any(s in text for s in self.known_forms)

    def json_record(self, value: dict[str, Any], texts: list[str]) -> str:
        """Like :meth:`json_text` for data whose names are planbook's own and whose every text
        is in ``texts`` (a step's record: see ``planbook.store.rows.record_texts``): only those are
        searched, not the JSON around them."""
        text = _dump(value)
        if not texts or self.unchanged("\x00".join(texts)):
            return text
        return _dump(self.data(value))

    def text(self, text: str) -> str:
        """``text`` with known secrets and secret shapes replaced by ``***``."""
        text = self.known(text)
        return mask_shapes(text, is_secret_name) if text and suspicious(text) else text

    def known(self, text: str) -> str:
        """``text`` with the known secrets, in every form they are echoed in, as ``***`` (those
        that overlap or touch as one), and nothing else: no shape rule (see :meth:`text`)."""
        if not text or not vault.MASKING:
            return text
        if self._env_key is None or self._vault_version != VAULT.version:
            self.refresh()
        if self._known is not None:
            found = self._known.search(text)
            if found is not None:
                text = _hide_spans(text, self._known_at, found.start())  # type: ignore[arg-type]
        return text

    def data(self, value: Any) -> Any:
        """A redacted copy of plain data: secret-named mapping values and secrets in strings.

        Returns ``value`` itself when nothing had to change (no copy on the fast path).
        """
        t = type(value)
        if not vault.MASKING:
            return value
        if self._env_key is None or self._vault_version != VAULT.version:
            self.refresh()
        if t in _SCALARS:
            # a number given as a secret (a PIN) is hidden where it stands as a number too
            if (t is int or t is float) and self._exact and str(value) in self._exact:
                return REDACTED_TEXT
            return value
        if t is str:
            return self.text(value) if value else value
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            for k, v in value.items():
                if type(v) in _SCALARS:
                    if v is None or type(k) is not str or not is_secret_name(k):
                        continue
                    new: Any = REDACTED_TEXT
                elif type(k) is str and is_secret_name(k):
                    new = REDACTED_TEXT
                else:
                    new = self.data(v)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
            return value if out is None else out
        if isinstance(value, (list, tuple)):
            items = [self.data(v) for v in value]
            if all(a is b for a, b in zip(items, value)):
                return value
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, str):
            return self.text(value)
        return value


_SCALARS = frozenset({int, float, bool, type(None)})


class DeferredChecks:
    """A redactor's JSON encoding with its check left for later: each text is encoded as it
    is and kept, and :meth:`clean` tells, in one pass over them all, whether redaction would
    have changed any (then the caller encodes them again with the redactor itself). A step's
    write encodes about six small texts: one check of them all costs a fraction of six."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.texts: list[str] = []

    def json_text(self, value: Any) -> str:
        text = _dump(value)
        self.texts.append(text)
        return text

    def json_record(self, value: dict[str, Any], texts: list[str]) -> str:
        """:meth:`Redactor.json_record`, its check left for :meth:`clean`."""
        self.texts.extend(texts)
        return _dump(value)

    def data(self, value: Any) -> Any:
        return self.redactor.data(value)

    def text(self, text: str) -> str:
        return self.redactor.text(text)

    def clean(self) -> bool:
        """True when redaction would have changed none of the texts (what ``json_text`` checks)."""
        # a separator no JSON text holds: no match spans two texts
        return self.redactor.unchanged("\x00".join(self.texts))


def echo_forms(secret: str) -> set[str]:
    """The texts ``secret`` shows as when a program echoes it: itself; as ``repr``, ``ascii`` and
    JSON (``ensure_ascii`` or not) escape it, without the quotes (a quote escaped whichever
    quotes a repr chose); each of those escaped once more (a tool's JSON-escaped echo kept
    as a repr); URL-encoded (``quote``, ``quote_plus``); and every one of them HTML-escaped
    (``&amp;``, ``&lt;``, ``&quot;``, ``&#x27;`` or ``&#39;``), as a page shows it."""
    once = _escaped(secret)
    forms = {twice for form in once for twice in _escaped(form)}
    forms |= {quote(secret, safe=""), quote(secret), quote_plus(secret)}  # in a URL's query or path
    forms |= {escaped for form in forms for escaped in _html_forms(form)}
    slugged = "-".join(_SLUG_WORDS.findall(secret.lower()))
    # a plan id made from a goal that mentions it (``log-in-with-tok-zq81``); only when the slug is
    # as long as a secret hunted inside text must be: "${login}" slugs to the word "login", which
    # the vault would then hide in every text of the process (a stored ``$login`` among them)
    if len(slugged) >= MIN_SECRET_LENGTH:
        forms.add(slugged)
    return {f for f in forms if f}


def _escaped(text: str) -> set[str]:
    """``text`` as it is and as each escaping of a string literal writes it, quotes left out."""
    both = text + "'\""  # inside the repr of a text with both quotes: ' escaped too
    return {text, repr(text)[1:-1], repr(both)[1:-4], ascii(text)[1:-1], ascii(both)[1:-4],
            json.dumps(text)[1:-1], _dump(text)[1:-1]}


def _html_forms(text: str) -> set[str]:
    """``text`` HTML-escaped as the usual escapers write it (quotes as entities or not)."""
    if not any(c in text for c in "&<>\"'"):
        return {text}
    bare = html.escape(text, quote=False)
    return {text, bare, html.escape(text), bare.replace('"', "&#34;").replace("'", "&#39;")}


def _hide_spans(text: str, starts: re.Pattern[str], first: int) -> str:
    """``text`` with every place a known form stands as one ``***``: forms that overlap or
    touch (one secret a prefix of another, a secret inside another's URL-encoded form) are
    hidden together, so no fragment of either is left. ``starts`` finds, at each place, the
    longest form starting there; ``first``: where the first one starts."""
    out: list[str] = []
    done = 0
    span_start = span_end = -1
    for m in starts.finditer(text, first):
        begin, end = m.start(), m.end(1)
        if begin <= span_end:  # inside or touching the span so far: it grows
            if end > span_end:
                span_end = end
            continue
        if span_end >= 0:
            out += (text[done:span_start], REDACTED_TEXT)
            done = span_end
        span_start, span_end = begin, end
    if span_end < 0:
        return text
    out += (text[done:span_start], REDACTED_TEXT, text[span_end:])
    return "".join(out)


#: the words of an id made from text (:func:`planbook.data.wording.slug`)
_SLUG_WORDS = re.compile(r"[a-z0-9]+")


def secret_texts(values: Iterable[Any]) -> list[str]:
    """The strings in ``values``, and their numbers as text, through lists, tuples, sets and
    dict values (the password in requests' ``auth=(user, password)``)."""
    found: list[str] = []
    todo = list(values)
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, bytes):
            found.append(value.decode("utf-8", "replace"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            found.append(str(value))
        elif isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            todo.extend(value)
        elif value is not None and not isinstance(value, bool):
            # an object (a token class, a model): what it shows as, and what it holds
            try:
                found.append(str(value))
                fields = getattr(value, "__dict__", None)
            except Exception:  # noqa: BLE001 - an object that cannot say what it is holds nothing to learn
                continue
            if isinstance(fields, dict):
                todo.extend(fields.values())
    return found


def shown_arg(name: Any, value: Any, show: Callable[[Any], str]) -> str:
    """How a view prints an arg: ``***`` for a secret-named one (a ``$id`` reference is shown:
    it names a step, not a secret), else ``show(value)`` — with the secret-named keys inside it
    (``headers={'X-Api-Key': ...}``) shown as ``***`` too."""
    if type(name) is str and is_secret_name(name) and not (isinstance(value, str) and WHOLE_REF.match(value)):
        return REDACTED_TEXT
    if isinstance(value, (dict, list, tuple)):
        value = masked_names(value)
    return show(value)


def masked_names(value: Any) -> Any:
    """``value`` with the values of its secret-named keys, at any depth, as ``***`` (``$id``
    references kept); ``value`` itself when it has none."""
    if isinstance(value, dict):
        out = {k: REDACTED_TEXT if type(k) is str and is_secret_name(k)
               and not (isinstance(v, str) and WHOLE_REF.match(v)) else masked_names(v) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, (list, tuple)):
        items = [masked_names(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def named_secrets(value: Any) -> tuple[list[Any], list[Any]]:
    """The values under secret-named keys anywhere inside ``value`` (a ``headers`` dict's
    ``Authorization``), and the other values of those keys that are ``$id`` references."""
    values: list[Any] = []
    refs: list[Any] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if type(k) is str and is_secret_name(k):
                    (refs if isinstance(v, str) and "$" in v else values).append(v)
                else:
                    todo.append(v)
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return values, refs


# ------------------------------------------------------------------ model credentials
#: A secret shorter than this is never hunted for inside other text. Local servers take
#: keys like ``k``, ``EMPTY``, ``ollama`` or ``none``: replacing every "k" or "none" would
#: garble prompts, recordings and messages. Such keys are kept out by structure instead
#: (the Authorization header is never written; a URL's credentials are masked where shown).
MIN_SECRET_LENGTH = 8

#: the key sent to a model server that needs none: no secret
PLACEHOLDER_KEY = "no-key-needed"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret of :data:`MIN_SECRET_LENGTH` or more characters replaced by
    ``***`` (longest first, so no part of one is left). For messages, never for text that is parsed."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def redact_data(value: Any, secrets: Iterable[str]) -> Any:
    """A copy of decoded JSON data with :func:`redact` applied to every string, keys included.

    Redacting the decoded strings, not their JSON text, finds a secret whatever escapes
    (``\\u00e4``, ``\\"``, ``\\\\``) the JSON encoder would write for it."""
    hidden = list(secrets)
    if isinstance(value, str):
        return redact(value, hidden)
    if isinstance(value, dict):
        return {redact(str(k), hidden): redact_data(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_data(v, hidden) for v in value]
    return value


def redact_url(url: str | None) -> str | None:
    """``url`` with its user, password and query values shown as ``***`` (safe to print)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not a URL we can take apart: show nothing of it that could be secret
        return "(an unparsable URL)"
    netloc = ("***@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host)
    if port is not None:
        netloc += f":{port}"
    query = "&".join(
        f"{name}=***" if value else name for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    fragment = "***" if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def url_secrets(url: str | None) -> list[str]:
    """The parts of ``url`` that may be credentials (userinfo, query values), raw and decoded."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        found += [userinfo, unquote(userinfo)]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found += [password, unquote(password)]
    raw_values = [pair.split("=", 1)[1] for pair in parts.query.split("&") if "=" in pair]
    for value in raw_values:
        found += [value, unquote(value.replace("+", " "))]
    if parts.fragment:
        found += [parts.fragment, unquote(parts.fragment)]
    return list(dict.fromkeys(found))


def model_secrets(api_key: str | None, base_url: str | None) -> list[str]:
    """What a model configuration must never show: the key and the credentials a base URL may
    carry (user:password, query values), each of :data:`MIN_SECRET_LENGTH` characters or more."""
    found = [api_key] if api_key and api_key != PLACEHOLDER_KEY else []
    return [s for s in found + url_secrets(base_url) if len(s) >= MIN_SECRET_LENGTH]


#: compact JSON, one encoder for every call (json.dumps with options builds one each time)
def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _compact_json() -> Callable[[Any], str]:
    """Compact JSON, made by one C encoder for every call: ``JSONEncoder.encode`` builds a new
    one each time, which costs more than encoding a step's record. Without cycle markers
    (nothing is shared between calls, so threads may call it at once), a value that
    contains itself raises RecursionError, as deep nesting does."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the pure-Python encoder
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    chunks = make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    return lambda value: "".join(chunks(value, 0))


#: compact JSON (``ensure_ascii=False``): what every stored text is written with
dump_json = _dump = _compact_json()
#: a superset of what redaction changes, apart from known secrets: the words every secret-like
#: name and secret shape holds, and the "://" of credentials in a URL. Plain substring tests
#: of the lowercased text, spelled out: a case-insensitive regex is ten times slower here.
SUSPECT_WORDS = ("key", "token", "secret", "passw", "pw", "passphrase", "auth", "cookie", "credential",
                 "session", "bearer", "sk-", "://")


def suspicious(text: str) -> bool:
    """True when ``text`` may hold something redaction changes, apart from known secrets
    (False proves it holds none: see :data:`SUSPECT_WORDS`)."""
    low = text.lower()
    return ("key" in low or "token" in low or "secret" in low or "passw" in low or "pw" in low
            or "passphrase" in low or "auth" in low or "cookie" in low or "credential" in low
            or "session" in low or "bearer" in low or "sk-" in low or "://" in low)
