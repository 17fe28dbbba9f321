"""Canaries: plant distinct secrets through every route a run learns one by, have careless tools
echo them in every form, drive every exit a run's bytes leave by, and scan every byte.

Why canaries and not assertions per surface: a surface that forgets the gate is found only if
someone thought to test it. Here each secret is unique (so a found leak names its route), every
exit's bytes are collected whole, and the scan looks for every escaped form of every canary and
for any 8-character fragment of one (a text cut inside a secret leaks its first half).

Used by ``tests/outbound/test_canaries.py``; ``python tests/canary_support.py REPORT`` runs the
in-process and command-line drives and writes the leak list to REPORT (its own masking-off check
runs it with ``PLANBOOK_UNSAFE_UNMASKED=1``, which is read at import, so in a new process).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import planbook
from planbook import Decision, Plan, Secret, Step, Toolbox

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# ------------------------------------------------------------------------------ the canaries
#: route -> a two-letter code put in its canary, so a leak's text names the route it came by
ROUTES = {
    "secret-named argument": "PW", "JSON-escaped argument": "JE", "nested header": "HD", "nested config key": "CF",
    "tuple": "TU", "by reference (two steps)": "RF", "Secret.env": "SE", "named Secret": "SN",
    "MCP toolbox env": "ME", "edit": "ED", "model key": "MK", "model base URL": "MU",
    "fork edit": "FK",
}
ENV_SECRET = "PLANBOOK_CANARY_FROM_ENV"  # the variable Secret.env reads
SECRET_NAME = "deploy-key"


def _canary(route: str) -> str:
    """``CANARY`` + the route's code + a tail that looks random but is the same every run (a leak
    report stays comparable from one run to the next)."""
    digest = hashlib.sha256(f"planbook canary {route}".encode()).hexdigest()
    tail = "".join(c.upper() if i % 3 == 0 else c for i, c in enumerate(digest[:12]))
    if route == "JSON-escaped argument":  # a quote, a tab, a newline, a backslash and non-ASCII inside
        return f'CANARY{ROUTES[route]}{tail[:6]}"q\tt\nn\\bé€{tail[6:]}x9Qz'
    return f"CANARY{ROUTES[route]}{tail}x9Qz"


CANARIES: dict[str, str] = {route: _canary(route) for route in ROUTES}

#: the named literal Secret, made at import so a command-line run that imports these tools knows it
NAMED_SECRET = Secret(CANARIES["named Secret"], name=SECRET_NAME)


# ------------------------------------------------------------------------------ the forms
def forms_of(canary: str) -> dict[str, str]:
    """Every form a careless tool or surface may write ``canary`` in, lowercased (the scan is
    case-insensitive: an id made from a goal lowercases it), the longest first."""
    forms = {
        "as is": canary,
        "repr-escaped": repr(canary)[1:-1],
        "ascii-escaped": ascii(canary)[1:-1],
        "unicode-escaped": canary.encode("unicode_escape").decode("ascii"),
        "JSON-escaped": json.dumps(canary)[1:-1],
        "JSON-escaped (UTF-8)": json.dumps(canary, ensure_ascii=False)[1:-1],
        "JSON-escaped twice": json.dumps(json.dumps(canary)[1:-1])[1:-1],
        "repr of JSON": repr(json.dumps(canary)[1:-1])[1:-1],
        "URL-encoded": quote(canary, safe=""),
        "URL-encoded (path)": quote(canary),
        "URL-encoded (form, +)": quote_plus(canary),
        "HTML-escaped": html.escape(canary),
        "HTML-escaped (quotes kept)": html.escape(canary, quote=False),
    }
    seen: dict[str, str] = {}
    for name, text in forms.items():
        seen.setdefault(text.lower(), name)
    return {name: text for text, name in sorted(seen.items(), key=lambda kv: -len(kv[0]))}


FORMS = {route: forms_of(canary) for route, canary in CANARIES.items()}
GRAM = 8


def _grams() -> dict[str, set[str]]:
    grams: dict[str, set[str]] = {}
    for route, canary in CANARIES.items():
        low = canary.lower()
        for i in range(len(low) - GRAM + 1):
            grams.setdefault(low[i:i + GRAM], set()).add(route)
    return grams


GRAMS = _grams()


@dataclass(frozen=True)
class Leak:
    route: str
    exit: str
    form: str
    context: str

    def line(self) -> str:
        return f"{self.route} | {self.exit} | {self.form} | {self.context}"


def _context(text: str, start: int) -> str:
    return repr(text[max(0, start - 20):start + 40])


def scan(text: str, exit: str) -> list[Leak]:
    """Every whole form of every canary in ``text``, and every 8-character fragment of one that
    no whole form covers. Linear in ``text``: one ``find`` pass per form, and one set lookup
    per position for the fragments."""
    if not text:
        return []
    low = text.lower()
    leaks: list[Leak] = []
    covered = bytearray(len(low) + 1)
    for route, forms in FORMS.items():
        for name, form in forms.items():
            at = low.find(form)
            while at != -1:
                if not covered[at]:
                    leaks.append(Leak(route, exit, name, _context(text, at)))
                covered[at:at + len(form)] = b"\1" * len(form)
                at = low.find(form, at + 1)
    grams = GRAMS
    last = -GRAM
    for i in range(len(low) - GRAM + 1):
        routes = grams.get(low[i:i + GRAM])
        if routes is not None and not covered[i]:
            if i > last + GRAM:  # a new run of fragments (not the next position of the last one)
                leaks.extend(Leak(route, exit, "8-character fragment", _context(text, i)) for route in sorted(routes))
            last = i
    return leaks


# ------------------------------------------------------------------------------ what leaves
def as_text(value: Any) -> str:
    """Any collected thing as text: bytes decoded (invalid bytes replaced), data as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    try:
        return json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass
class Exits:
    """The bytes of every exit, by exit name."""

    texts: dict[str, list[str]] = field(default_factory=dict)

    def add(self, exit: str, *values: Any) -> None:
        self.texts.setdefault(exit, []).extend(as_text(v) for v in values)

    def guarded(self, exit: str, make: Callable[[], Any]) -> None:
        """``make()``'s value, or the error it raised (str, repr, traceback): an exit either way."""
        try:
            self.add(exit, make())
        except BaseException as error:  # noqa: BLE001 - an error raised is an exit too
            self.add("errors raised", *error_texts(error))

    def leaks(self) -> list[Leak]:
        found: list[Leak] = []
        for exit, texts in self.texts.items():
            for text in dict.fromkeys(texts):
                found.extend(scan(text, exit))
        return found


def error_texts(error: BaseException) -> list[str]:
    return [str(error), repr(error), "".join(traceback.format_exception(type(error), error, error.__traceback__))]


def report(leaks: Iterable[Leak]) -> str:
    """One line per (route, exit, form), with the first context found."""
    first: dict[tuple[str, str, str], Leak] = {}
    for leak in leaks:
        first.setdefault((leak.route, leak.exit, leak.form), leak)
    return "\n".join(leak.line() for leak in first.values())


def result_views(exits: Exits, exit: str, result: Any) -> None:
    """``str``/``repr``, every MIME type of the result's bundle, each step's pane, the text views."""
    from planbook.views.text import format_diff, format_plan, format_result

    exits.add(f"{exit} (str)", str(result))
    exits.add(f"{exit} (repr)", repr(result))
    exits.add(f"{exit} (error)", result.error or "", result.traceback or "")
    exits.guarded(exit, lambda: result._repr_mimebundle_())
    exits.guarded(exit, lambda: format_result(result))
    exits.guarded(exit, lambda: format_plan(result.plan))
    exits.guarded(exit, lambda: str(result.timeline))
    for revision in result.revisions:
        exits.guarded(exit, lambda: format_diff(revision))
    for step in result.plan.steps:
        pane = result.pane(step.id)
        exits.guarded(exit, lambda: pane._repr_mimebundle_() if hasattr(pane, "_repr_mimebundle_") else pane)
        exits.add(f"{exit} (step error, output)", step.error or "", step.output or "")


def events_and_revisions(exits: Exits, result: Any) -> None:
    exits.add("events/revisions", json.dumps([e.model_dump(mode="json") for e in result.events], default=repr))
    exits.add("events/revisions", repr(result.events), repr(result.revisions))
    exits.add("events/revisions", json.dumps([r.model_dump(mode="json") for r in result.revisions], default=repr))


# ------------------------------------------------------------------------------ careless tools
class Echo:
    """An object whose ``repr`` quotes its secret."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def __repr__(self) -> str:
        return f"Echo(secret={self.secret!r})"


class HtmlEcho(Echo):
    """An object whose ``_repr_html_`` shows its secret (plain and HTML-escaped)."""

    def _repr_html_(self) -> str:
        return f"<p>key: <b>{html.escape(self.secret)}</b> <code>{self.secret}</code></p>"


#: every secret a tool of this process was given (the test checks each route reached its tool)
RECEIVED: set[str] = set()
FORMS_ECHOED = ("as_is", "dict", "error", "repr", "urlenc", "urlcreds", "json", "print", "print_split", "html")


def emit(secret: str, form: str) -> Any:
    """``secret`` echoed in ``form`` (what a careless tool does)."""
    RECEIVED.add(secret)
    if form == "as_is":
        return secret
    if form == "dict":
        return {"status": "ok", "detail": {"echo": secret}}
    if form == "error":
        raise PermissionError(f"login refused for {secret!r} at https://bob:{quote(secret, safe='')}@deploy.test/")
    if form == "repr":
        return Echo(secret)
    if form == "urlenc":
        return f"https://deploy.test/login?pw={quote(secret, safe='')}&form={quote_plus(secret)}"
    if form == "urlcreds":
        return f"https://bob:{secret}@deploy.test/path"
    if form == "json":
        return json.dumps({"pw": secret}) + " " + json.dumps({"pw": secret}, ensure_ascii=False)
    if form == "print":
        print(f"the secret is {secret}")
        return "printed"
    if form == "print_split":
        half = len(secret) // 2
        print(secret[:half], end="", flush=True)
        print(secret[half:], flush=True)
        return "printed in two"
    if form == "html":
        return HtmlEcho(secret)
    raise ValueError(f"unknown form {form!r}")


BOX = Toolbox()


@BOX.tool(cache=False)
def with_password(password: Any, form: str) -> Any:
    """Echoes its password."""
    return emit(str(password), form)


@BOX.tool(cache=False)
def with_headers(headers: Any, form: str) -> Any:
    """Echoes its Authorization header."""
    return emit(str(headers["Authorization"]), form)


@BOX.tool(cache=False)
def with_settings(settings: Any, form: str) -> Any:
    """Echoes its config's api_key."""
    return emit(str(settings["config"]["api_key"]), form)


@BOX.tool(cache=False)
def with_auth(auth: Any, form: str) -> Any:
    """Echoes the password of its (user, password) pair."""
    return emit(str(auth[1]), form)


@BOX.tool(cache=False)
def with_token(token: Any, form: str) -> Any:
    """Echoes its token."""
    return emit(str(token), form)


@BOX.tool(cache=False)
def with_value(value: Any, form: str) -> Any:
    """Echoes a value under no secret name (a Secret is secret by type)."""
    return emit(str(value), form)


@BOX.tool(cache=False)
def login(user: str) -> str:
    """Returns a session token: a secret no name says is one."""
    return CANARIES["by reference (two steps)"]


@BOX.tool(cache=False)
def pick(x: Any) -> Any:
    """Passes its input on."""
    return x


# ------------------------------------------------------------------------------ the plan
EDIT_PLACEHOLDER = "to-be-chosen"


def route_args(route: str, *, json_form: bool = False) -> tuple[str, dict[str, Any]]:
    """The tool and the arguments that carry ``route``'s canary."""
    c = CANARIES[route]
    table: dict[str, tuple[str, dict[str, Any]]] = {
        "secret-named argument": ("with_password", {"password": c}),
        "JSON-escaped argument": ("with_password", {"password": c}),
        "nested header": ("with_headers", {"headers": {"Authorization": c, "Accept": "application/json"}}),
        "nested config key": ("with_settings", {"settings": {"config": {"api_key": c, "region": "eu"}}}),
        "tuple": ("with_auth", {"auth": ["ada", c] if json_form else ("ada", c)}),
        "by reference (two steps)": ("with_token", {"token": "$pick"}),
        "Secret.env": ("with_value", {"value": {"$secret": f"env:{ENV_SECRET}"} if json_form
                                      else Secret.env(ENV_SECRET)}),
        "named Secret": ("with_value", {"value": {"$secret": SECRET_NAME} if json_form else NAMED_SECRET}),
        "edit": ("with_password", {"password": EDIT_PLACEHOLDER}),
    }
    return table[route]


PLAN_ROUTES = ("secret-named argument", "JSON-escaped argument", "nested header", "nested config key", "tuple",
               "by reference (two steps)", "Secret.env", "named Secret", "edit")
CODE = {route: ROUTES[route].lower() for route in ROUTES}
GOAL = f"deploy to staging with password {CANARIES['secret-named argument']} and the named key"


def plan_steps(*, json_form: bool = False, routes: Iterable[str] = PLAN_ROUTES,
               forms: Iterable[str] = FORMS_ECHOED) -> list[dict[str, Any]]:
    """login -> pick, then one step per (route, form)."""
    steps: list[dict[str, Any]] = [{"id": "login", "tool": "login", "args": {"user": "ada"}},
                                   {"id": "pick", "tool": "pick", "args": {"x": "$login"}, "needs": ["login"]}]
    forms = list(forms)
    for route in routes:
        tool, args = route_args(route, json_form=json_form)
        for form in forms:
            step: dict[str, Any] = {"id": f"{CODE[route]}_{form}", "tool": tool, "args": {**args, "form": form}}
            if route == "by reference (two steps)":
                step["needs"] = ["pick"]
            steps.append(step)
    return steps


def canary_plan(**kwargs: Any) -> Plan:
    return Plan(goal=GOAL, steps=[Step(**s) for s in plan_steps(**kwargs)])


def spec_text(**kwargs: Any) -> str:
    """The plan as a spec file (JSON is a YAML mapping): Secrets as their references."""
    return json.dumps({"goal": GOAL, "steps": plan_steps(json_form=True, **kwargs)}, ensure_ascii=False, indent=1)


def approve_edits(step: Step, context: Any) -> Decision:
    """An ``approve=`` callable that edits each edit-route step's password to its canary."""
    if step.id.startswith(CODE["edit"] + "_"):
        return Decision.edit({**step.args, "password": CANARIES["edit"]})
    return Decision.approve()


def run_options() -> dict[str, Any]:
    return {"on_failure": "continue", "max_steps": 500}


# ------------------------------------------------------------------------------ the drives
def _store_files(path: Path) -> list[bytes]:
    return [p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists()]


def drive_plan(exits: Exits, folder: Path) -> None:
    """The canary plan with a store (read while open and after close), its views, events,
    revisions and spans (with and without content), then ``load_run`` and its views."""
    from planbook.store.sqlite import SQLiteStore

    os.environ[ENV_SECRET] = CANARIES["Secret.env"]
    path = folder / "runs.sqlite"
    spans = _span_exporter(exits, capture=False)
    store = SQLiteStore(path)
    try:
        result = planbook.run(canary_plan(), tools=BOX, store=store, approve=approve_edits, **run_options())
        exits.add("store (open)", *_store_files(path))
    finally:
        store.close()
        spans()
    exits.add("store (closed)", *_store_files(path))
    result_views(exits, "views/record", result)
    events_and_revisions(exits, result)
    spans = _span_exporter(exits, capture=True)
    try:
        planbook.run(canary_plan(), tools=BOX, approve=approve_edits, **run_options())
    finally:
        spans()
    exits.guarded("load_run", lambda: result_views(exits, "load_run", planbook.load_run(store=path)))
    exits.guarded("load_run", lambda: events_and_revisions(exits, planbook.load_run(store=path)))


def drive_fork(exits: Exits, folder: Path) -> None:
    """A stored canary run forked at each edit-route step with a canary password (what-if runs:
    the fork's edit is a new way in), a fork of a fork given a Secret, then every exit of the
    forks and of their comparison: the store, the results' views, events, the lineage, the
    tree of runs, the run diff as text, HTML, rows and its notebook bundle."""
    from planbook.engine.fork import fork

    os.environ[ENV_SECRET] = CANARIES["Secret.env"]
    path = folder / "forks.sqlite"
    parent = planbook.run(canary_plan(), tools=BOX, store=path, approve=approve_edits, **run_options())
    children = []
    for form in FORMS_ECHOED:
        # the parent's steps that failed (the "error" form) run again in a fork, and the store kept
        # none of their secret-named literals: the plan the run was made from gives them back, with
        # the edit in it; the stored run has no value to compare a secret with, so at= names the step
        edited = canary_plan()
        step = edited.step(f"{CODE['edit']}_{form}")
        step.args = {**step.args, "password": CANARIES["fork edit"]}
        child = fork(parent.run_id, at=step.id, plan=edited, tools=BOX, store=path)
        children.append(child)
        result_views(exits, "fork views", child)
        events_and_revisions(exits, child)
        exits.add("fork views", child.lineage, repr(child.lineage))
    edited = canary_plan()
    step = edited.step(f"{CODE['edit']}_dict")
    step.args = {**step.args, "password": NAMED_SECRET}
    grandchild = fork(children[0].run_id, at=step.id, plan=edited, tools=BOX, store=path)
    result_views(exits, "fork views", grandchild)
    exits.add("store (forks)", *_store_files(path))
    exits.guarded("fork views", lambda: [repr(s) for s in planbook.runs(path, tree=True)])
    diff = planbook.diff_runs(parent, *children, grandchild)
    exits.add("compare", diff.text(), diff.text(changed_only=True), diff.html(), diff.rows(), str(diff), repr(diff),
              diff._repr_mimebundle_(), diff.only_changed()._repr_mimebundle_())
    exits.guarded("compare", lambda: planbook.diff_runs(planbook.load_run(parent.run_id, store=path),
                                                        planbook.load_run(children[0].run_id, store=path)).html())


def _span_exporter(exits: Exits, *, capture: bool) -> Callable[[], None]:
    """Instrument with an in-memory exporter; the returned callable collects the spans."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return lambda: None
    import planbook.otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    planbook.otel.instrument(provider, capture_content=capture)
    exit = f"spans ({'with' if capture else 'without'} content)"

    def collect() -> None:
        planbook.otel.uninstrument()
        provider.force_flush()
        exits.add(exit, *(span.to_json() for span in exporter.get_finished_spans()))

    return collect


def drive_refused_plans(exits: Exits) -> None:
    """Plans refused before a run exists: a password starting with ``$``, a misspelt tool."""
    c = CANARIES["secret-named argument"]
    refused = [
        Plan(steps=[Step(id="a", tool="with_password", args={"password": "$" + c, "form": "as_is"})]),
        Plan(steps=[Step(id="a", tool="with_pasword", args={"password": c, "form": "as_is"})]),
        Plan(steps=[Step(id="a", tool="with_settings",
                         args={"settings": {"config": {"api_kye": c}}, "form": "as_is", "extra": c})]),
    ]
    for plan in refused:
        exits.guarded("errors raised", lambda: planbook.run(plan, tools=BOX))


def drive_model(exits: Exits, folder: Path) -> None:
    """A model-planned run (key and base URL with credentials in the environment) against the
    fake server, recording a cassette: a failing step makes it replan over a by-reference token."""
    from planbook.llm import Cassette, LLMPlanner
    from planbook.testing import FakeOpenAIServer, Reply

    first = [{"id": "login", "tool": "login", "args": {"user": "ada"}},
             {"id": "pick", "tool": "pick", "args": {"x": "$login"}, "needs": ["login"]},
             {"id": "use", "tool": "with_token", "args": {"token": "$pick", "form": "as_is"}, "needs": ["pick"]},
             {"id": "boom", "tool": "with_token", "args": {"token": "$pick", "form": "error"}, "needs": ["use"]}]
    second = [{"id": "after", "tool": "with_token", "args": {"token": "$pick", "form": "dict"}}]
    cassette = folder / "cassette.json"
    with FakeOpenAIServer([Reply.plan(first), Reply.plan(second), Reply.no_change(), Reply.no_change()],
                          strict=False) as server:
        host = server.base_url.split("://", 1)[1]
        spans = _span_exporter(exits, capture=True)
        try:
            with _model_environment(f"http://canary:{quote(CANARIES['model base URL'], safe='')}@{host}"):
                planner = LLMPlanner("canary-model", cassette=Cassette(cassette, mode="record"))
                goal = f"log in, then fetch with the deploy key {CANARIES['named Secret']}"
                result = planbook.run(goal, planner=planner, tools=BOX, store=folder / "model.sqlite",
                                      on_failure="replan", max_steps=20)
        finally:
            spans()
        _model_requests(exits, server)
    # httpx sends a base URL's user:password as Basic authorization in place of the key, so the
    # key reaches a server only from a base URL without credentials: a second, one-step run
    with FakeOpenAIServer([Reply.plan([{"id": "hello", "tool": "with_value", "args": {"value": "hi", "form": "as_is"}}])],
                          strict=False) as server:
        with _model_environment(server.base_url):
            planbook.run("say hello", planner=LLMPlanner("canary-model", cassette=Cassette(folder / "key.json",
                                                                                       mode="record")),
                         tools=BOX, max_steps=5)
        _model_requests(exits, server)
    exits.add("model requests and cassettes", *_store_files(cassette), *_store_files(folder / "key.json"))
    exits.add("store (closed)", *_store_files(folder / "model.sqlite"))
    result_views(exits, "views/record", result)
    events_and_revisions(exits, result)


@contextmanager
def _model_environment(base_url: str) -> Iterator[None]:
    """The canary model key and ``base_url`` in the environment, put back as they were after."""
    saved = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    os.environ["OPENAI_API_KEY"], os.environ["OPENAI_BASE_URL"] = CANARIES["model key"], base_url
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _model_requests(exits: Exits, server: Any) -> None:
    """What the fake model server received, its authorization header apart (the credentials'
    one rightful place: it marks the key or the base URL's password as received)."""
    import base64

    for request in server.requests:
        sent = {k.lower(): v for k, v in request.headers.items()}
        authorization = sent.get("authorization", "")
        if authorization == f"Bearer {CANARIES['model key']}":
            RECEIVED.add(CANARIES["model key"])
        elif authorization.startswith("Basic "):
            if CANARIES["model base URL"] in base64.b64decode(authorization[6:]).decode("utf-8", "replace"):
                RECEIVED.add(CANARIES["model base URL"])
        headers = {k: v for k, v in sent.items() if k != "authorization"}
        exits.add("model requests and cassettes", request.path, headers, request.body)


MCP_SERVER = '''
import json, os, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("canary")


@server.tool()
def whoami(form: str) -> str:
    """Echoes the token it was started with (a careless server)."""
    token = os.environ["GITHUB_TOKEN"]
    with open(os.environ["CANARY_RECEIVED"], "w") as side_channel:  # what the server got, told only to the test
        side_channel.write(token)
    print(f"using GITHUB_TOKEN={token}", file=sys.stderr, flush=True)
    if form == "error":
        raise RuntimeError(f"token {token!r} refused")
    if form == "json":
        return json.dumps({"token": token})
    return token


@server.tool()
def crash() -> str:
    """Dies, after logging its token."""
    print(f"fatal: bad token {os.environ['GITHUB_TOKEN']}", file=sys.stderr, flush=True)
    os._exit(3)


server.run()
'''


def drive_mcp_toolbox(exits: Exits, folder: Path) -> bool:
    """A stdio MCP server started with the canary in its env; False when ``mcp`` is missing."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        return False
    from planbook.mcp import connect

    script = folder / "canary_server.py"
    script.write_text(MCP_SERVER)
    steps = [{"id": f"me_{form}", "tool": "whoami", "args": {"form": form}} for form in ("as_is", "error", "json")]
    steps.append({"id": "me_crash", "tool": "crash", "args": {}})
    received = folder / "mcp_received.txt"
    box = connect([sys.executable, str(script)],
                  env={"GITHUB_TOKEN": CANARIES["MCP toolbox env"], "CANARY_RECEIVED": str(received)})
    try:
        exits.add("views/record", repr(box))
        result = planbook.run(Plan(steps=[Step(**s) for s in steps]), tools=box,
                              store=folder / "mcp.sqlite", on_failure="continue")
    finally:
        box.close()
    if received.exists() and received.read_text() == CANARIES["MCP toolbox env"]:
        RECEIVED.add(CANARIES["MCP toolbox env"])
    exits.add("store (closed)", *_store_files(folder / "mcp.sqlite"))
    result_views(exits, "views/record", result)
    events_and_revisions(exits, result)
    return True


def drive_mcp_serve(exits: Exits, folder: Path) -> None:
    """``planbook mcp serve``'s answers (its handlers called directly)."""
    from planbook.cli.mcpserve import PlanbookServer

    server = PlanbookServer(tools=BOX, store=str(folder / "serve.sqlite"))
    routes = [r for r in PLAN_ROUTES if r != "edit"]
    answers = [server.call("run_plan", {"spec": spec_text(routes=routes), "on_failure": "continue",
                                         "max_steps": 500}),
               server.call("run_plan", {"spec": json.dumps({"steps": [{"id": "a", "tool": "with_password", "args": {
                   "password": "$" + CANARIES["secret-named argument"], "form": "as_is"}}]})}),
               server.call("list_runs", {}), server.call("show_run", {})]
    exits.add("MCP answers", *answers)


def drive_python(folder: Path) -> Exits:
    """Every in-process drive."""
    exits = Exits()
    drive_plan(exits, folder)
    drive_fork(exits, folder)
    drive_refused_plans(exits)
    drive_model(exits, folder)
    drive_mcp_serve(exits, folder)
    drive_mcp_toolbox(exits, folder)
    return exits


def cli_env(folder: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]), "PLANBOOK_HOME": str(folder),
            ENV_SECRET: CANARIES["Secret.env"], "COLUMNS": "200"}


def drive_cli(folder: Path) -> Exits:
    """``python -m planbook.cli run`` and ``show`` (and ``show --step``, ``check`` of a refused plan)."""
    exits = Exits()
    spec = folder / "plan.json"
    spec.write_text(spec_text(routes=[r for r in PLAN_ROUTES if r != "edit"]), encoding="utf-8")
    bad = folder / "bad.json"
    bad.write_text(json.dumps({"steps": [{"id": "a", "tool": "with_password", "args": {
        "password": "$" + CANARIES["secret-named argument"], "form": "as_is"}}]}), encoding="utf-8")
    store = str(folder / "cli.sqlite")
    commands = [
        ["run", str(spec), "--tools", "canary_support:BOX", "--store", store, "--plain", "--on-failure", "continue",
         "--max-steps", "500"],
        ["show", "--store", store],
        ["show", "--store", store, "--step", f"{CODE['JSON-escaped argument']}_json"],
        ["run", str(bad), "--tools", "canary_support:BOX", "--store", store, "--plain"],
    ]
    for command in commands:
        done = subprocess.run([sys.executable, "-m", "planbook.cli", *command], capture_output=True,
                              env=cli_env(folder), cwd=folder, timeout=120)
        exits.add("CLI", done.stdout, done.stderr)
    exits.add("store (closed)", *_store_files(folder / "cli.sqlite"))
    return exits


KERNEL_SETUP = """
%load_ext planbook
import planbook
import canary_support as cs
from canary_support import BOX
spec = cs.spec_text(routes=[r for r in cs.PLAN_ROUTES if r != "edit"])
edit_spec = cs.spec_text(routes=["edit"], forms=["print_split", "html"])
"""

KERNEL_CELLS = [
    """%%plan tokens --tools BOX
goal: log in, then use the token and the key from the environment
steps:
  - {id: login, tool: login, args: {user: ada}}
  - {id: pick, tool: pick, args: {x: $login}, needs: [login]}
  - {id: use, tool: with_token, args: {token: $pick, form: print_split}, needs: [pick]}
  - {id: env, tool: with_value, args: {value: {$secret: "env:PLANBOOK_CANARY_FROM_ENV"}, form: html}}
""",
    "r1 = %run_plan tokens --tools BOX --on-failure continue\nr1",
    "r2 = %run_plan spec --tools BOX --on-failure continue --max-steps 500\nr2",
    "print(r2)\nr2.pane('je_json')",
    "h = %run_plan edit_spec --tools BOX --approve ed_print_split,ed_html --background\nh",
    "for sid in ('ed_print_split', 'ed_html'):\n    h.edit(sid, password=cs.CANARIES['edit'])\n    h.approve(sid)\n"
    "r3 = h.wait(60)\nr3",
    "planbook.load_run()",
]


def drive_kernel(folder: Path) -> Exits:
    """A real kernel: ``%load_ext planbook``, ``%%plan``, ``%run_plan`` (one in the background, with
    an edit); every IOPub message, and the notebook saved from those outputs (with widget state)."""
    import nbformat

    from helpers import Kernel

    exits = Exits()
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", ENV_SECRET, "PLANBOOK_HOME")}
    os.environ.update({"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]), ENV_SECRET: CANARIES["Secret.env"],
                       "PLANBOOK_HOME": str(folder)})
    try:
        kernel = Kernel()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    everything: list[dict[str, Any]] = []
    get = kernel.kc.get_iopub_msg

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        msg = get(*args, **kwargs)
        everything.append(msg)
        return msg

    kernel.kc.get_iopub_msg = recording  # type: ignore[method-assign]
    notebook = nbformat.v4.new_notebook()
    try:
        for code in [KERNEL_SETUP, *KERNEL_CELLS]:
            reply, messages = kernel.execute(code, timeout=120)
            cell = nbformat.v4.new_code_cell(code)
            cell.outputs = [nbformat.v4.output_from_msg(m) for m in messages
                            if m["msg_type"] in ("stream", "display_data", "execute_result", "error")]
            notebook.cells.append(cell)
            exits.add("notebook IOPub", reply)
            if reply.get("status") != "ok":
                exits.add("notebook IOPub", f"cell failed: {reply.get('ename')}: {reply.get('evalue')}")
        kernel.execute("pass", timeout=60)  # collects what a background run sent after its cell
    finally:
        kernel.close()
    states: dict[str, dict[str, Any]] = {}
    for msg in everything:
        exits.add("notebook IOPub", msg["content"], msg.get("buffers") and [bytes(b) for b in msg["buffers"]] or "")
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            state = (msg["content"].get("data") or {}).get("state")
            if isinstance(state, dict):
                states.setdefault(msg["content"]["comm_id"], {}).update(state)
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "version_major": 2, "version_minor": 0, "state": {k: {"state": v} for k, v in states.items()}}}
    path = folder / "saved.ipynb"
    nbformat.write(notebook, str(path))
    exits.add("saved .ipynb", path.read_bytes())
    return exits


def merged(*parts: Exits) -> Exits:
    out = Exits()
    for part in parts:
        for exit, texts in part.texts.items():
            out.add(exit, *texts)
    return out


def main(argv: list[str]) -> int:
    """``canary_support.py REPORT [--json] [--no-cli] [--kernel]``: drive, scan, write the leak list."""
    import tempfile
    import time

    out = Path(argv[0])
    with tempfile.TemporaryDirectory(prefix="canaries-") as tmp:
        exits = drive_python(Path(tmp))
        if "--no-cli" not in argv:
            exits = merged(exits, drive_cli(Path(tmp)))
        if "--kernel" in argv:
            exits = merged(exits, drive_kernel(Path(tmp)))
        leaks = exits.leaks()
    if "--json" in argv:
        out.write_text(json.dumps([leak.__dict__ for leak in leaks]))
    else:
        pairs = sorted({(leak.route, leak.exit, leak.form) for leak in leaks})
        out.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {len(leaks)} leaks, {len(pairs)} (route, exit, form)\n"
                       + report(leaks) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
