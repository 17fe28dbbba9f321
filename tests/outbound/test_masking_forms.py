"""Masking hides every form of a known secret, the secret-named fields of every form a program
writes, never leaves a fragment, and what a store keeps of a text is bounded.

- **Forms**: a known secret is hidden as it is, ``repr``-escaped, JSON- and ASCII-escaped,
  URL-encoded, HTML-escaped, and escaped twice (a tool's JSON-escaped echo kept as a repr:
  the old rule knew one escaping only), by the masking itself and by the store's fast
  checks (``unchanged``, ``has_known_secret``), which decide whether masking runs at all.
- **Fields**: ``Settings(password='x')``, ``{'api_key': 'x'}``, ``password: x``,
  ``password = "x"`` were kept in clear by the shape rule; ``token_count=3`` stays shown.
- **Fragments**: overlapping secrets (one a prefix of another, one inside another's
  URL-encoded form) are hidden together: the old rule hid the one it met first and kept
  the rest of the other.
- **Bounds**: a 2 MB error made 16 MB of store.
"""

from __future__ import annotations

import html
import json
import sqlite3
from pathlib import Path
from typing import Callable
from urllib.parse import quote, quote_plus

import pytest

import planbook
from planbook import Plan, Step
from planbook.engine.resume import load_run
from planbook.outbound.redact import Redactor, dump_json
from planbook.outbound.text import TEXT_LIMIT
from planbook.store import SQLiteStore

#: quotes, a backslash, a tab, a newline, non-ASCII, HTML's specials
SECRET = "pa\"ss'w\\\tö\nrd<&>Zq81"


def _fragments(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def _repr_inner(text: str) -> str:
    return repr(text)[1:-1]


def _json_inner(text: str) -> str:
    return json.dumps(text)[1:-1]


FORMS: dict[str, Callable[[str], str]] = {
    "as is": lambda s: s,
    "repr": repr,
    "repr inside a text with both quotes": lambda s: repr(f"'\"{s}")[1:-1],
    "ascii": ascii,
    "JSON": json.dumps,
    "JSON, non-ASCII kept": lambda s: json.dumps(s, ensure_ascii=False),
    "URL-encoded (quote)": lambda s: quote(s, safe=""),
    "URL-encoded (quote_plus)": quote_plus,
    "HTML-escaped": html.escape,
    "HTML-escaped, quotes kept": lambda s: html.escape(s, quote=False),
    "HTML-escaped repr": lambda s: html.escape(repr(s)),
    "JSON echo kept as a repr": lambda s: repr(json.dumps({"echo": s})),
    "JSON echo kept as a repr, non-ASCII kept": lambda s: repr(json.dumps({"echo": s}, ensure_ascii=False)),
    "JSON of JSON": lambda s: json.dumps(json.dumps(s)),
    "repr of a repr": lambda s: repr(repr(s)),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_of_a_known_secret_is_masked(form: str) -> None:
    redactor = Redactor([SECRET], env={})
    shown = FORMS[form](SECRET)
    masked = redactor.text(f"tool said: {shown} (end)")
    assert masked.startswith("tool said: ") and masked.endswith(" (end)")
    assert "***" in masked
    wrapper = FORMS[form]("")  # what the form writes around any text: no part of the secret
    left = [f for f in _fragments(SECRET) | _fragments(shown) if f in masked and f not in wrapper]
    assert not left, (form, masked)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_store_fast_checks_see_every_form(form: str) -> None:
    """A store skips masking when ``unchanged`` says so and refuses to keep a value that
    ``has_known_secret`` finds: both look at the text as written, and at its JSON text."""
    redactor = Redactor([SECRET], env={})
    text = f"tool said: {FORMS[form](SECRET)}"
    for written in (text, dump_json(text), dump_json({"result": text}), json.dumps(text)):
        assert not redactor.unchanged(written), (form, written)
        assert redactor.has_known_secret(written), (form, written)
    assert redactor.has_known_secret(text.encode("utf-8"))
    assert redactor.json_text({"result": text}) == dump_json({"result": redactor.text(text)})


class _Echo:
    """A tool's answer that pickle cannot keep (a lambda inside), so a store keeps its repr."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.hook = lambda: None

    def __repr__(self) -> str:
        return f"Echo({self.body!r})"


def test_a_json_escaped_echo_kept_as_a_repr_is_masked_in_the_store(tmp_path: Path) -> None:
    """The echo, JSON-escaped by the tool and repr-escaped by the store, is escaped twice:
    the gate knew one escaping, so the store file and ``load_run`` kept it in clear."""
    def call(url: str, password: str) -> _Echo:
        return _Echo(json.dumps({"sent": {"url": url, "body": password}}))

    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    plan = Plan(goal="call", steps=[Step(id="c", tool="call", args={"url": "u", "password": SECRET})])
    result = planbook.run(plan, tools={"call": call}, store=store)
    store.close()
    assert result.status == "completed"
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    loaded = load_run(store=path)
    shown = repr(loaded.plan.steps[0].result) + str(loaded)
    twice = repr(json.dumps(SECRET))[1:-1]
    for where in (stored.decode("utf-8", "replace"), shown):
        assert twice not in where and not [f for f in _fragments(twice) if f in where]


# ---------------------------------------------------------------- secret-named fields
@pytest.mark.parametrize("text, expected", [
    ("Settings(password='x')", "Settings(password='***')"),
    ("Settings(host='h', Password='x y', port=1)", "Settings(host='h', Password='***', port=1)"),
    ("{'api_key': 'x', 'n': 1}", "{'api_key': '***', 'n': 1}"),
    ('{"api_key": "x y"}', '{"api_key": "***"}'),
    ("password: x", "password: ***"),
    ("db:\n  password: correct horse\n  user: bob", "db:\n  password: ***\n  user: bob"),
    ("2024-05-01 INFO login, password: hunter2", "2024-05-01 INFO login, password: ***"),
    ('password = "x"', 'password = "***"'),
    ("password = 'x'", "password = '***'"),
    ("Config(api_key=SecretKey('k-1'), n=2)", "Config(api_key=***, n=2)"),
    ("Conn(password=b'x')", "Conn(password=b'***')"),
    ("'Settings(password=\\'it\\\\\\'s\\')'", "'Settings(password=\\'***\\')'"),
    ('{\\"token\\": \\"x y\\"}', '{\\"token\\": \\"***\\"}'),
    ("{&#x27;api_key&#x27;: &#x27;x&#x27;}", "{&#x27;api_key&#x27;: &#x27;***&#x27;}"),
    ("--password=x --user=bob", "--password=*** --user=bob"),
    # today's rules stay
    ('{"password": "pw1", "n": 1}', '{"password": "***", "n": 1}'),
    ("OPENAI_API_KEY=abc123 PLANBOOK_MODEL=m", "OPENAI_API_KEY=*** PLANBOOK_MODEL=m"),
    ("https://u:pw@host/p?api_key=zzz&q=1", "https://***@host/p?api_key=***&q=1"),
    # names that describe a secret, prose and errors stay shown
    ("token_count=3 max_tokens=100 key_name=k", "token_count=3 max_tokens=100 key_name=k"),
    ("{'token_count': 3}", "{'token_count': 3}"),
    ("the key: turn it twice", "the key: turn it twice"),
    ("KeyError: 'v'", "KeyError: 'v'"),
    ("Settings(password=***)", "Settings(password=***)"),
])
def test_secret_named_fields_of_every_form(text: str, expected: str) -> None:
    assert Redactor(env={}).text(text) == expected


# ---------------------------------------------------------------- no fragment
@pytest.mark.parametrize("secrets, text", [
    (["abcdefgh12", "gh12345678"], "x abcdefgh12345678 y"),  # overlapping
    (["gh12345678", "abcdefgh12"], "x abcdefgh12345678 y"),
    (["secret-value", "secret-value-longer"], "x secret-value-longer y"),  # a prefix of another
    (["xy-secret", "secret-zz9"], "x xy-secret-zz9 y"),
    # a secret inside another's URL-encoded form, starting before it
    (["p@ss w0rd!", "qp%40s"], "x " + "q" + quote_plus("p@ss w0rd!") + " y"),
])
def test_no_fragment_of_a_secret_is_kept(secrets: list[str], text: str) -> None:
    masked = Redactor(secrets, env={}).text(text)
    assert masked == "x *** y"


def test_a_secret_repeated_is_masked_whole() -> None:
    masked = Redactor(["abab"], env={}).text("ababababab!")
    assert masked == "***!"


# ---------------------------------------------------------------- bounds
def _boom() -> None:
    raise ValueError("x" * 2_000_000 + " the end")


def test_a_huge_error_makes_a_bounded_store_row_and_load_run_says_it_was_cut(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path)
    planbook.run(Plan(goal="g", steps=[Step(id="b", tool="boom")]), tools={"boom": _boom}, store=store)
    store.close()
    con = sqlite3.connect(path)
    sizes = [sum(len(v) for v in row if isinstance(v, (str, bytes)))
             for table in ("runs", "log", "steps") for row in con.execute(f"SELECT * FROM {table}")]
    con.close()
    # every text of a row is cut to TEXT_LIMIT: a row holds a handful of them (error, traceback,
    # the failure's events, the counters), not 2 MB each
    assert max(sizes) < 10 * TEXT_LIMIT, sizes
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert total < 40 * TEXT_LIMIT, total
    loaded = load_run(store=path)
    error = loaded.plan.steps[0].error or ""
    assert "characters left out of" in error and error.endswith(" the end") and len(error) < 2 * TEXT_LIMIT


def test_a_cut_text_is_masked_before_it_is_cut() -> None:
    """A secret across the cut is hidden whole, not cut into a part masking no longer knows."""
    from planbook.store.rows import bounded_text

    secret = "Zq81-" + "s" * 40
    at = TEXT_LIMIT * 3 // 4 - 20  # the head ends inside it
    text = "a" * at + secret + "b" * (3 * TEXT_LIMIT)
    cut = bounded_text(text, Redactor([secret], env={}))
    assert "Zq81" not in cut and "s" * 8 not in cut and "characters left out" in cut


class _Long:
    """A result pickle cannot keep, whose repr is longer than a store keeps, a secret across the cut."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.hook = lambda: None

    def __repr__(self) -> str:
        return "Long(" + "a" * 1985 + self.secret + "b" * 3000 + ")"


def test_a_stored_repr_cut_through_a_secret_keeps_no_part_of_it(tmp_path: Path) -> None:
    """A repr is cut to REPR_LIMIT characters: cut before it was masked, the part of the
    secret before the cut was no longer a form masking knows, and was stored."""
    secret = "Zq81-cut-" + "k" * 30
    path = tmp_path / "runs.sqlite"
    store = SQLiteStore(path, secrets=[secret])
    plan = Plan(goal="g", steps=[Step(id="l", tool="long")])
    result = planbook.run(plan, tools={"long": lambda: _Long(secret)}, store=store)
    store.close()
    assert result.status == "completed"
    written = b"".join(p.read_bytes() for p in tmp_path.iterdir()).decode("utf-8", "replace")
    loaded = repr(load_run(store=path).plan.steps[0].result)
    for where in (written, loaded):
        assert "Zq81-cut" not in where and "k" * 8 not in where


def test_a_mapping_or_list_under_a_secret_name_is_hidden_whole_not_cut_open() -> None:
    """``"token": {"type": "string"}`` (a schema, a nested config) showed as ``***"type":
    "string"}``: the first character hidden, the rest left standing as broken text."""
    from planbook.outbound.checkpoint import mask_text

    assert mask_text('{"token": {"type": "string"}, "x": 1}') == '{"token": ***, "x": 1}'
    assert mask_text("{'auth': {'user': 'ada', 'pass': 'pw'}, 'b': 2}") == "{'auth': ***, 'b': 2}"
    assert mask_text("api_key=[1, [2]] ok") == "api_key=*** ok"
    assert mask_text('password="{not a mapping}" ok') == 'password="***" ok'


def test_masking_known_secrets_only_leaves_no_fragment_of_overlapping_ones() -> None:
    """``mask_known`` (model requests, cassettes) replaced one form after another: of two secrets
    that overlap, the second lost its first part to the first's ``***`` and its tail stayed."""
    from planbook.outbound.checkpoint import mask_known, remember

    remember(["kn0wn-first-Qz81", "Qz81-kn0wn-second"])
    assert mask_known("a kn0wn-first-Qz81-kn0wn-second b") == "a *** b"
    # and nothing but known secrets: a reference and a schema are kept as written
    assert mask_known('{"token": "$login", "password": {"type": "string"}}') == \
        '{"token": "$login", "password": {"type": "string"}}'
