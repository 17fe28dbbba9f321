"""The gate is the one way out of a run (:mod:`planbook.outbound`): an architectural test.

It finds, by reading the package's source with :mod:`ast`, every module that *writes,
prints, displays or exports* — it prints or writes to a stream, shows or publishes display
data, defines a ``_repr_*_`` for Jupyter, puts attributes on OpenTelemetry spans, writes
SQL rows, talks through a widget (anywidget, ipywidgets) or a terminal library (rich), or
answers as an MCP server. Each of them must take its rules from the gate (import
``planbook.outbound`` or one of its parts); a new surface that forgets fails here, with its
name and what it outputs. And no module but the gate does the gate's work itself: HTML
escaping or sanitising, its own redaction patterns, its own tables of control characters.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "planbook"
GATE = PACKAGE / "outbound"

#: modules that output, yet nothing of a run's text but through a gated module, with the reason
OWN_TEXT_ONLY = {
    "planbook/store/schema.py": "creates and migrates tables: no text from a run",
    "planbook/cli/demo.py": "the demo's tool prints its own line (it is a tool, not a surface)",
    "planbook/views/live.py": "displays the bundles views.text and views.html make (they take the gate)",
    "planbook/views/show.py": "displays a view object, whose data views.text, views.html or the widget make",
}

_STREAM_CALLS = {"print", "display", "update_display", "publish_display_data", "clear_output"}
_SPAN_METHODS = {"set_attribute", "set_attributes", "set_status", "add_event", "record_exception"}
_REPRS = {"_repr_mimebundle_", "_repr_html_", "_repr_markdown_", "_repr_pretty_", "_render_traceback_"}
_OUTPUT_PACKAGES = ("anywidget", "ipywidgets", "rich", "mcp.server")
#: a mapping with one of these keys is display data (a mimebundle)
_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "application/vnd.")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if GATE not in p.parents)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def outputs_of(tree: ast.AST) -> set[str]:
    """What a module's source does that sends text out of the process."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name in _STREAM_CALLS:
                found.add(f"calls {name}()")
            elif name in _SPAN_METHODS:
                found.add(f"span.{name}()")
            elif name == "write" and isinstance(fn, ast.Attribute) and "std" in ast.unparse(fn.value):
                found.add(f"{ast.unparse(fn.value)}.write()")
            elif name in ("execute", "executemany") and node.args:
                sql = ast.unparse(node.args[0]).upper()
                if "INSERT " in sql or "UPDATE " in sql:  # the statement, not a column named "updated"
                    found.add("writes SQL rows")
        elif isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.startswith(_MIME_TYPES)
                for k in node.keys):
            found.add("builds display data")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _REPRS:
            found.add(f"defines {node.name}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.startswith(_OUTPUT_PACKAGES):
                    found.add(f"uses {n}")
    return found


def takes_the_gate(tree: ast.AST, path: Path) -> bool:
    """True when the module imports planbook.outbound (or a part of it), or shows a run through
    the run's own gate object (``state.gate``, ``result.secrets``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (node.attr == "gate" or (
                node.attr == "secrets" and isinstance(node.value, (ast.Name, ast.Attribute))
                and ast.unparse(node.value) != "secrets")):
            return True
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module.startswith("planbook.outbound"):
                return True
            if node.level > 0:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                target = (base / module.replace(".", "/")) if module else base
                if target == GATE or GATE in target.parents:
                    return True
                if not module and any(a.name == "outbound" for a in node.names) and base == PACKAGE:
                    return True
        elif isinstance(node, ast.Import) and any(a.name.startswith("planbook.outbound") for a in node.names):
            return True
    return False


def test_every_module_that_outputs_goes_through_the_gate() -> None:
    outputting: dict[str, set[str]] = {}
    bypass: list[str] = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out = outputs_of(tree)
        if not out:
            continue
        outputting[_rel(path)] = out
        if _rel(path) in OWN_TEXT_ONLY:
            continue
        if not takes_the_gate(tree, path):
            bypass.append(f"{_rel(path)} ({', '.join(sorted(out))})")
    # the finder must find the surfaces we know, or this test proves nothing
    for known in ("planbook/cli/app.py", "planbook/otel.py", "planbook/views/widget.py", "planbook/views/terminal.py",
                  "planbook/store/sqlwrite.py", "planbook/views/text.py", "planbook/cli/mcpserve.py", "planbook/notebook/magics.py",
                  "planbook/cli/prompt.py", "planbook/data/models.py"):
        assert known in outputting, f"{known} outputs, yet the finder did not see it"
    assert not bypass, "these modules output text without going through planbook.outbound:\n" + "\n".join(bypass)
    stale = set(OWN_TEXT_ONLY) - set(outputting)
    assert not stale, f"listed as outputting their own text, but they output nothing now: {sorted(stale)}"


def test_the_finder_sees_a_new_surface_that_bypasses_the_gate(tmp_path: Path) -> None:
    sneaky = ast.parse("import sys\ndef show(run):\n    sys.stdout.write(run.goal)\n")
    assert outputs_of(sneaky) == {"sys.stdout.write()"}
    assert not takes_the_gate(sneaky, PACKAGE / "sneaky.py")
    honest = ast.parse("from .outbound import one_line\nprint(one_line('x'))\n")
    assert takes_the_gate(ast.parse("def f(state):\n    return state.gate.text(state.plan.goal)\n"), PACKAGE / "v.py")
    assert takes_the_gate(honest, PACKAGE / "honest.py")
    nested = ast.parse("from ..outbound.text import neutralise\n")
    assert takes_the_gate(nested, PACKAGE / "views" / "x.py")


#: what only the gate may do: (what, a test on a call or import)
def _gate_work(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if text in ("html.escape", "escape") and text == "html.escape":
                found.append("html.escape()")
            if text in ("re.compile", "re.sub", "re.search", "re.match") and node.args:
                pattern = ast.unparse(node.args[0]).lower()
                if any(w in pattern for w in ("script", "onerror", "javascript:", "on\\\\w", "bearer", "password")):
                    found.append(f"its own pattern {pattern[:60]}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.split(".")[0] in ("nh3", "bleach", "markupsafe", "html5lib"):
                    found.append(f"imports {n}")
    return found


def test_only_the_gate_escapes_sanitises_or_redacts() -> None:
    offenders = []
    for path in _modules():
        work = _gate_work(ast.parse(path.read_text(encoding="utf-8")))
        if work:
            offenders.append(f"{_rel(path)}: {', '.join(work)}")
    assert not offenders, "the gate's work done outside planbook.outbound:\n" + "\n".join(offenders)


# ------------------------------------------------------------------ the doors are the only exits
#: each real exit of the process, and the one module (or few) allowed to use it: a surface that
#: wants out goes through them, and they mask (planbook.outbound.checkpoint) whatever it forgot
DOORS: dict[str, frozenset[str]] = {
    # the notebook: everything a kernel publishes passes views/publish.py's display functions
    # and the checkpoint it puts on the session's send
    "uses IPython.display": frozenset({"planbook/views/publish.py"}),
    # spans: made and written only through otel.py's masking tracer
    "span.": frozenset({"planbook/otel.py", "planbook/store/sqlwrite.py"}),  # sqlwrite: a cache's set_status
    # the store: rows are written by its write path (and its schema and cache)
    "writes SQL rows": frozenset({"planbook/store/sqlwrite.py", "planbook/store/sqlcache.py",
                                  "planbook/store/schema.py"}),
    # MCP answers: one server, whose one call masks
    "uses mcp.server": frozenset({"planbook/cli/mcpserve.py"}),
}


def exits_of(tree: ast.AST) -> set[str]:
    """:func:`outputs_of`, and the imports of IPython's display machinery (a second way to
    publish beside the one door)."""
    found = outputs_of(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n.startswith("IPython.display") or n.startswith("IPython.core.display") for n in names):
                found.add("uses IPython.display")
        elif isinstance(node, ast.Attribute) and node.attr == "publish_display_data":
            found.add("uses IPython.display")
    return found


def _door_breaches(modules: dict[str, ast.AST]) -> list[str]:
    breaches = []
    for rel, tree in modules.items():
        for exit in exits_of(tree):
            for door, owners in DOORS.items():
                if exit.startswith(door) and rel not in owners:
                    breaches.append(f"{rel}: {exit} (only {', '.join(sorted(owners))} may)")
        # a call of display()/update_display() must be the door's own (imported from views.publish)
        calls = {c for c in exits_of(tree) if c in ("calls display()", "calls update_display()")}
        if calls and rel != "planbook/views/publish.py":
            imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                        and (node.module or "").endswith("publish") for a in node.names}
            for call in sorted(calls):
                name = call[len("calls "):-2]
                if name not in imported:
                    breaches.append(f"{rel}: {call} not imported from planbook.views.publish")
    return breaches


def test_the_doors_are_the_only_places_that_publish_export_or_write() -> None:
    modules = {_rel(p): ast.parse(p.read_text(encoding="utf-8")) for p in _modules()}
    assert not _door_breaches(modules), "\n".join(_door_breaches(modules))
    # the CLI's one writer: the command runs inside the masking streams
    app = (PACKAGE / "cli" / "app.py").read_text(encoding="utf-8")
    assert "masked_streams()" in app and "from .streams import masked_streams" in app


def test_the_door_check_sees_a_second_way_out() -> None:
    planted = {
        "planbook/views/sneaky.py": ast.parse("from IPython.display import display\ndef show(x):\n    display(x)\n"),
        "planbook/engine/trace.py": ast.parse("def mark(span, run):\n    span.set_attribute('goal', run.goal)\n"),
        "planbook/views/fine.py": ast.parse("from .publish import display\ndef show(x):\n    display(x)\n"),
    }
    breaches = _door_breaches(planted)
    assert any(b.startswith("planbook/views/sneaky.py: uses IPython.display") for b in breaches), breaches
    assert any(b.startswith("planbook/views/sneaky.py: calls display() not imported") for b in breaches), breaches
    assert any(b.startswith("planbook/engine/trace.py: span.set_attribute()") for b in breaches), breaches
    assert not [b for b in breaches if b.startswith("planbook/views/fine.py")], breaches
