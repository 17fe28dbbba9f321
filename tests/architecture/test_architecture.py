"""The layers of planbook, enforced (ARCHITECTURE.md says them in words).

The package is read with :mod:`ast`; nothing of it is imported for the scans (only the test of
the exported errors imports ``planbook``, to compare the classes). Every import counts: at the
top of a module, inside functions (lazy), under ``try:``/``if``, and under ``if TYPE_CHECKING:``
for the layers. Each check is a plain function over ``{path: source}`` so the self-tests at the
bottom can hand it a fake module with a violation and see it reported.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "planbook"

#: folder (or loose module) under planbook/ -> its layer, bottom (0) to top. Imports go to the same
#: layer or below. A new folder must be placed here first (the layer test names it until it is).
LAYERS: dict[str, int] = {
    "data": 0, "outbound": 0,           # what everyone shares; outbound/ is the gate
    "store": 1,                         # the run store (memory, SQLite)
    "spec": 2,                          # plan formats: read, write, check
    "workers": 3,                       # tools, agents, planners
    "engine": 4,                        # the runner and what it applies
    "llm": 5, "mcp": 5, "otel": 5,      # integrations: optional, each its own
    "compat": 6,                        # the seed designs (strategies, their plan formats)
    "views": 7,                         # text, HTML, widget, terminal, the record
    "notebook": 8, "cli": 8, "__init__": 8, "testing": 8,  # surfaces; __init__ is planbook itself
    "teaching": 8,                      # the course's self-checking exercises (a loose module)
}
LAYER_NAMES = {0: "data", 1: "store", 2: "spec", 3: "workers", 4: "engine", 5: "integrations", 6: "compat",
               7: "views", 8: "surfaces"}
#: layers whose folders stand side by side: one folder of them imports no other
SIDE_BY_SIDE = {LAYERS["llm"], LAYERS["cli"]}
#: may import anything: the API face gathers the package, the test helpers drive all of it
FREE = {"planbook", "planbook.testing"}
#: the layers the engine is made of (and everything below it): no front end, no seed design
ENGINE_FOLDERS = ("data", "outbound", "store", "spec", "workers", "engine")
FRONT_ENDS = {"IPython", "ipywidgets", "anywidget", "openai", "rich"}
#: integrations are optional extras: nothing below them imports their packages
EXTRAS = {"mcp", "opentelemetry", "anyio"}
MAX_LINES = 600
MAX_LOOSE = 12


# ------------------------------------------------------------------ reading the package
@dataclass(frozen=True)
class Import:
    """One import statement's target, as an absolute dotted name."""

    module: str       #: the importing module (planbook.engine.runner)
    target: str       #: what it imports (planbook.data.models, openai, ...)
    line: int
    lazy: bool        #: inside a function: runs when called, not when the module loads
    typing_only: bool  #: under ``if TYPE_CHECKING:``: never runs
    explained: bool   #: a comment on its line(s) or the line above


def package_sources(root: Path = PACKAGE) -> dict[str, str]:
    """``{"planbook/engine/runner.py": source, ...}`` for every module of the package."""
    return {p.relative_to(root.parent).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py"))}


def module_name(path: str) -> str:
    """planbook/engine/runner.py -> planbook.engine.runner; planbook/data/__init__.py -> planbook.data."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _explained(lines: list[str], node: ast.stmt) -> bool:
    above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
    own = lines[node.lineno - 1: (node.end_lineno or node.lineno)]
    return above.startswith("#") or any("#" in line for line in own)


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: set[str]) -> list[str]:
    """The absolute modules an import statement loads (``from . import x`` -> the module x when x is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = name if is_package else name.rpartition(".")[0]
        parts = package.split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


def _known(target: str, known: set[str]) -> str:
    """The planbook module a dotted name lives in (planbook.data.models.Plan -> planbook.data.models)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target


def imports_of(sources: dict[str, str]) -> list[Import]:
    """Every import in every module, planbook targets resolved to the module they load."""
    return list(_imports_of(tuple(sorted(sources.items()))))


@functools.lru_cache(maxsize=8)
def _imports_of(items: tuple[tuple[str, str], ...]) -> tuple[Import, ...]:
    """imports_of, read once per set of sources (each check asks for them again)."""
    known = {module_name(p) for p, _ in items}
    found: list[Import] = []
    for path, source in items:
        name, is_package = module_name(path), path.endswith("/__init__.py")
        lines = source.splitlines()

        def visit(node: ast.AST, lazy: bool, typing_only: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _targets(child, name, is_package, known):
                        if target.split(".")[0] == "planbook":
                            target = _known(target, known) or target
                        found.append(Import(name, target, child.lineno, lazy, typing_only, _explained(lines, child)))
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    visit(child, True, typing_only)
                elif isinstance(child, ast.If) and _is_type_checking(child.test):
                    for stmt in child.body:
                        visit(ast.Module(body=[stmt], type_ignores=[]), lazy, True)
                    for stmt in child.orelse:
                        visit(ast.Module(body=[stmt], type_ignores=[]), lazy, typing_only)
                else:
                    visit(child, lazy, typing_only)

        visit(ast.parse(source, path), False, False)
    return tuple(found)


def layer_of(module: str) -> int | None:
    """The layer of a planbook module (None: its folder is not in LAYERS)."""
    parts = module.split(".")
    return LAYERS.get(parts[1] if len(parts) > 1 else "__init__")


def _in(module: str, folders: tuple[str, ...] | set[str]) -> bool:
    parts = module.split(".")
    return len(parts) > 1 and parts[0] == "planbook" and parts[1] in folders


# ------------------------------------------------------------------ the checks
def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_violations(sources: dict[str, str]) -> list[str]:
    """Imports that go up a layer (type-only ones too: a lower layer names a type from above through
    a Protocol of its own instead), imports between two folders of the integrations or of the
    surfaces (each integration is an optional extra of its own; a surface does not reach into
    another, nor into ``planbook`` itself), and modules in a folder the layer table does not know."""
    found = [f"{module_name(p)}: its folder (or loose module) is in no layer: add it to LAYERS in tests/architecture/test_architecture.py "
             "(and to ARCHITECTURE.md)" for p in sources if layer_of(module_name(p)) is None]
    known = {module_name(p) for p in sources}
    for imp in imports_of(sources):
        if imp.module in FREE or imp.module.startswith("planbook.testing.") or imp.target not in known:
            continue
        source, target = layer_of(imp.module), layer_of(imp.target)
        if source is not None and target is not None and target > source:
            found.append(
                f"{imp.module}:{imp.line} imports {imp.target}{' (lazily)' if imp.lazy else ''}"
                f"{' (for typing)' if imp.typing_only else ''}: {LAYER_NAMES[source]} may not import "
                f"{LAYER_NAMES[target]}; move the shared piece down, or let the upper layer register "
                "itself with this one (a dict of names to callables)")
        elif source == target and source in SIDE_BY_SIDE and _folder(imp.module) != _folder(imp.target):
            found.append(
                f"{imp.module}:{imp.line} imports {imp.target}{' (lazily)' if imp.lazy else ''}: two "
                f"{LAYER_NAMES[source]} stand side by side and never import each other; move what both "
                "need to a layer below them")
    return found


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """planbook module -> the planbook modules it imports, lazy imports and imports under
    ``if TYPE_CHECKING:`` included: a type-only import never runs, but two modules that name
    each other's types are one room in two files (a newcomer must read both to change either),
    so a circle of them is a circle. A lower module that needs a type from above declares a
    Protocol. A package's ``__init__`` that Python runs before a submodule is not an edge: only
    what a module's own statements import."""
    known = {module_name(p) for p in sources}
    graph: dict[str, set[str]] = {m: set() for m in known}
    for imp in imports_of(sources):
        if imp.target in known and imp.target != imp.module:
            graph[imp.module].add(imp.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def cycle_report(sources: dict[str, str]) -> list[str]:
    """Each circle with the imports that make it (a lazy one is marked: it hides the circle, not ends it)."""
    graph = import_graph(sources)
    report = []
    for group in cycles(graph):
        members = set(group)
        edges = sorted({f"{i.module}:{i.line} -> {i.target}{' (lazy)' if i.lazy else ''}"
                        for i in imports_of(sources) if i.module in members and i.target in members
                        and i.target != i.module})
        report.append(f"circle {' <-> '.join(group)}: " + "; ".join(edges)
                      + " — move what both need into a module below both, so the imports go one way")
    return report


def unexplained_lazy_imports(sources: dict[str, str], only_in_cycles: bool = True) -> list[str]:
    """Function-level imports of planbook modules with no comment saying why (speed, an optional extra).

    Asking it of every one was not workable when this test was written: about 115 lazy imports of
    planbook modules, all but 3 with no comment, most there to keep ``import planbook`` light. So the test asks a
    reason only of those inside an import circle — the ones that hide one. ``only_in_cycles=False``
    lists them all."""
    known = {module_name(p) for p in sources}
    circle_of = {m: n for n, group in enumerate(cycles(import_graph(sources))) for m in group}
    return [f"{i.module}:{i.line} imports {i.target} inside a function with no comment saying why: import it at "
            "the top, or say why it must wait (speed, an optional extra) on its line or the line above"
            for i in imports_of(sources)
            if i.lazy and not i.typing_only and not i.explained and i.target in known and i.target != i.module
            and (not only_in_cycles or circle_of.get(i.module, -1) == circle_of.get(i.target, -2))]


def long_modules(sources: dict[str, str], limit: int = MAX_LINES) -> list[str]:
    return [f"{p} has {n} lines (at most {limit}): split it along a seam (one concern per module)"
            for p, source in sources.items() if (n := len(source.splitlines())) > limit]


def loose_modules(sources: dict[str, str]) -> list[str]:
    """Modules directly in planbook/ (not in a layer folder)."""
    return sorted(p for p in sources if p.count("/") == 1)


def forbidden_imports(sources: dict[str, str], folders: tuple[str, ...] | set[str], forbidden: set[str],
                      what: str) -> list[str]:
    """Imports from modules in ``folders`` whose target starts with one of ``forbidden`` (a top-level
    package name like ``openai``, or a planbook module prefix like ``planbook.compat``)."""
    found = []
    for imp in imports_of(sources):
        if not _in(imp.module, folders):
            continue
        hit = imp.target.split(".")[0] in forbidden or any(
            imp.target == f or imp.target.startswith(f + ".") for f in forbidden if f.startswith("planbook"))
        if hit:
            found.append(f"{imp.module}:{imp.line} imports {imp.target}{' (lazily)' if imp.lazy else ''}: {what}")
    return found


def error_classes(sources: dict[str, str]) -> dict[str, str]:
    """Every subclass of PlanbookError defined in the package, by the names of its bases:
    ``"Name"`` -> its module (a name defined in two modules is listed as ``"Name (module)"``)."""
    defined: list[tuple[str, str, set[str]]] = []
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source, path)):
            if isinstance(node, ast.ClassDef):
                bases = {b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else ""
                         for b in node.bases}
                defined.append((node.name, module_name(path), bases))
    names, grew = {"PlanbookError"}, True
    while grew:
        more = {name for name, _, bases in defined if bases & names} - names
        names |= more
        grew = bool(more)
    errors = sorted((name, module) for name, module, bases in defined
                    if name in names and (name == "PlanbookError" or bases & names))
    twice = {name for name, _ in errors if sum(n == name for n, _ in errors) > 1}
    return {(f"{name} ({module})" if name in twice else name): module for name, module in errors}


# ------------------------------------------------------------------ the rules, on the package
@functools.lru_cache(maxsize=1)
def _package() -> dict[str, str]:
    """The package's sources, read once per test session."""
    return package_sources()


def test_imports_go_to_the_same_layer_or_below() -> None:
    sources = _package()
    found = layer_violations(sources)
    assert found == [], "imports go down only (see ARCHITECTURE.md):\n" + "\n".join(found)


def test_no_import_circles_lazy_imports_included() -> None:
    sources = _package()
    found = cycle_report(sources)
    assert found == [], "import circles (a lazy import hides a circle, it does not end it):\n" + "\n".join(found)


def test_a_lazy_import_that_closes_a_circle_says_why() -> None:
    sources = _package()
    found = unexplained_lazy_imports(sources)
    assert found == [], "\n".join(found)


def test_no_module_over_600_lines() -> None:
    sources = _package()
    found = long_modules(sources)
    assert found == [], "\n".join(found)


def test_at_most_12_modules_loose_at_the_top() -> None:
    sources = _package()
    loose = loose_modules(sources)
    assert len(loose) <= MAX_LOOSE, (
        f"{len(loose)} modules loose in planbook/ (at most {MAX_LOOSE}): {loose}; put each in its layer's folder")


def test_the_engine_imports_no_front_end() -> None:
    """The engine is shared by the notebook, the CLI and scripts: it depends on none of their libraries."""
    sources = _package()
    found = forbidden_imports(sources, ENGINE_FOLDERS, FRONT_ENDS,
                              "the engine imports no front end; let the front end pass in what it needs")
    assert found == [], "\n".join(found)


def test_the_engine_imports_no_view_surface_or_integration() -> None:
    """No view, surface (the magics, the CLI) or model layer below them, lazily or not."""
    sources = _package()
    above = {"planbook.views", "planbook.notebook", "planbook.cli", "planbook.llm", "planbook.mcp", "planbook.otel",
             "planbook.compat", "planbook.testing"}
    found = forbidden_imports(sources, ENGINE_FOLDERS, above,
                              "the engine knows no view, surface or integration: they register with it")
    assert found == [], "\n".join(found)


def test_nothing_below_compat_imports_the_seed_designs() -> None:
    """The reader and the engine know no seed design: plan formats and ``strategy=`` register
    themselves with them (spec.formats.register_format, the runner's strategy registry)."""
    sources = _package()
    below = {f for f, layer in LAYERS.items() if layer < LAYERS["compat"]}
    found = forbidden_imports(sources, below, {"planbook.compat"},
                              "compat registers itself with the layers below; they never import it")
    assert found == [], "\n".join(found)


def test_the_views_import_no_surface() -> None:
    sources = _package()
    found = forbidden_imports(sources, ("views",), {"planbook.notebook", "planbook.cli"},
                              "views are used by the surfaces, never the reverse")
    assert found == [], "\n".join(found)


def test_nothing_below_the_integrations_imports_their_packages() -> None:
    """mcp and opentelemetry are optional extras: the layers below them never import them."""
    sources = _package()
    found = forbidden_imports(sources, ENGINE_FOLDERS, EXTRAS,
                              "an optional extra; only its integration (planbook.mcp, planbook.otel) imports it")
    assert found == [], "\n".join(found)


def test_every_error_is_defined_in_data_errors_and_exported() -> None:
    sources = _package()
    import planbook
    import planbook.data.errors as errors_module

    found = []
    for name, module in error_classes(sources).items():
        if " (" in name:
            found.append(f"{name} has a name another error has: give each error one name, in planbook/data/errors.py")
            continue
        if module != "planbook.data.errors":
            found.append(f"{name} is defined in {module}: define it in planbook/data/errors.py and export it")
            continue
        cls = getattr(errors_module, name)
        if getattr(planbook, name, None) is not cls:
            found.append(f"planbook.{name} is not planbook.data.errors.{name}: import it in planbook/__init__.py")
        if name not in planbook.__all__:
            found.append(f"{name} is not in planbook.__all__: add it")
    assert found == [], "\n".join(found)


def test_the_scan_reads_the_whole_package() -> None:
    sources = _package()
    names = {module_name(p) for p in sources}
    assert {"planbook", "planbook.engine.runner", "planbook.data.models", "planbook.views.widget",
            "planbook.notebook.magics", "planbook.compat.model"} <= names
    graph = import_graph(sources)
    assert "planbook.data.models" in graph["planbook.engine.runner"]


# ------------------------------------------------------------------ the checks find what they must
def test_relative_imports_resolve_to_the_module_they_load() -> None:
    fake = {
        "planbook/__init__.py": "", "planbook/data/__init__.py": "from . import models\nfrom .ids import new_id\n",
        "planbook/data/models.py": "", "planbook/data/ids.py": "",
        "planbook/engine/__init__.py": "", "planbook/engine/runner.py":
            "from ..data import models\nfrom ..data.models import Plan\nfrom .. import data\nimport planbook.data.ids\n"
            "def f():\n    from planbook.data.models import Step  # speed\n",
    }
    got = {(i.module, i.target, i.lazy, i.explained) for i in imports_of(fake)}
    assert ("planbook.data", "planbook.data.models", False, False) in got
    assert ("planbook.data", "planbook.data.ids", False, False) in got
    assert ("planbook.engine.runner", "planbook.data.models", False, False) in got
    assert ("planbook.engine.runner", "planbook.data", False, False) in got
    assert ("planbook.engine.runner", "planbook.data.ids", False, False) in got
    assert ("planbook.engine.runner", "planbook.data.models", True, True) in got


def test_the_layer_check_finds_an_upward_import() -> None:
    fake = {"planbook/__init__.py": "from .views import text\n", "planbook/views/__init__.py": "",
            "planbook/views/text.py": "", "planbook/store/__init__.py": "",
            "planbook/store/redact.py": "def f():\n    from ..views import text\n",
            "planbook/data/__init__.py": "", "planbook/data/models.py":
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..engine.runner import Runner\n",
            "planbook/engine/__init__.py": "", "planbook/engine/runner.py": "from ..data import models\n",
            "planbook/gadgets/__init__.py": "",
            "planbook/cli/__init__.py": "", "planbook/cli/mcpserve.py": "from .. import __version__\n",
            "planbook/notebook/__init__.py": "from ..cli import mcpserve\n",
            "planbook/mcp/__init__.py": "", "planbook/otel.py": "def f():\n    from .mcp import x\n"}
    found = layer_violations(fake)
    side = [v for v in found if "side by side" in v]
    found = [v for v in found if v not in side]
    assert [v.split(":")[:2] for v in side] == [
        ["planbook.cli.mcpserve", "1 imports planbook"],
        ["planbook.notebook", "1 imports planbook.cli.mcpserve"], ["planbook.otel", "2 imports planbook.mcp (lazily)"]], side
    assert any(v.startswith("planbook.store.redact:2 imports planbook.views.text (lazily)") for v in found), found
    assert any(v.startswith("planbook.data.models:3 imports planbook.engine.runner (for typing)") for v in found)
    assert any(v.startswith("planbook.gadgets: its folder (or loose module) is in no layer") for v in found), found
    assert len(found) == 3, found  # planbook/__init__ and the runner's downward import are fine


def test_the_cycle_check_finds_a_circle_hidden_by_a_lazy_import() -> None:
    fake = {"planbook/__init__.py": "", "planbook/compat/__init__.py": "",
            "planbook/compat/model.py": "from .openmanus import x\n",
            "planbook/compat/openmanus.py": "from .flow import y\n",
            "planbook/compat/flow.py": "def f():\n    from .model import z\n",
            "planbook/compat/other.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model import z\n"}
    found = cycle_report(fake)
    assert len(found) == 1 and "planbook.compat.flow <-> planbook.compat.model <-> planbook.compat.openmanus" in found[0]
    assert "planbook.compat.flow:2 -> planbook.compat.model (lazy)" in found[0]
    assert unexplained_lazy_imports(fake) == [
        "planbook.compat.flow:2 imports planbook.compat.model inside a function with no comment saying why: import it "
        "at the top, or say why it must wait (speed, an optional extra) on its line or the line above"]
    fake["planbook/compat/flow.py"] = "def f():\n    # speed: model loads openai\n    from .model import z\n"
    assert unexplained_lazy_imports(fake) == [] and len(cycle_report(fake)) == 1  # a reason does not end a circle
    del fake["planbook/compat/flow.py"]
    assert cycle_report(fake) == []


def test_the_cycle_check_finds_a_circle_of_type_only_imports() -> None:
    """Two modules that import each other's types only (as decisions.py and the runner's parts
    once did, under ``if TYPE_CHECKING:``) are a circle too."""
    fake = {"planbook/__init__.py": "", "planbook/engine/__init__.py": "",
            "planbook/engine/door.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .runner import Runner\n",
            "planbook/engine/runner.py": "from .door import Door\n"}
    found = cycle_report(fake)
    assert len(found) == 1 and "planbook.engine.door <-> planbook.engine.runner" in found[0], found
    fake["planbook/engine/door.py"] = "from typing import Protocol\nclass RunAccess(Protocol): ...\n"
    assert cycle_report(fake) == []


def test_the_size_and_front_end_checks_find_a_violator() -> None:
    fake = {"planbook/__init__.py": "", "planbook/a.py": "x = 1\n" * 601, "planbook/b.py": "",
            "planbook/engine/__init__.py": "", "planbook/engine/runner.py":
                "def show():\n    import IPython.display\n    from ..compat import model\n    import mcp\n",
            "planbook/views/__init__.py": "", "planbook/views/widget.py": "from ..notebook.handle import RunHandle\n",
            "planbook/notebook/__init__.py": "", "planbook/notebook/handle.py": "import ipywidgets\n",
            "planbook/compat/__init__.py": "", "planbook/compat/model.py": ""}
    assert long_modules(fake) == ["planbook/a.py has 601 lines (at most 600): split it along a seam (one concern per module)"]
    assert loose_modules(fake) == ["planbook/__init__.py", "planbook/a.py", "planbook/b.py"]
    assert [v.split(":")[:2] for v in forbidden_imports(fake, ENGINE_FOLDERS, FRONT_ENDS, "")] == [
        ["planbook.engine.runner", "2 imports IPython.display (lazily)"]]  # the notebook may import ipywidgets
    assert len(forbidden_imports(fake, ENGINE_FOLDERS, {"planbook.compat"}, "")) == 1
    assert len(forbidden_imports(fake, ENGINE_FOLDERS, EXTRAS, "")) == 1
    assert len(forbidden_imports(fake, ("views",), {"planbook.notebook", "planbook.cli"}, "")) == 1


def test_the_error_check_finds_an_error_outside_data_errors() -> None:
    fake = {"planbook/data/errors.py": "class PlanbookError(Exception): ...\nclass PlanError(PlanbookError): ...\n",
            "planbook/notebook/magics.py": "from ..data import errors\nclass CellPlanError(errors.PlanError): ...\n"
                                           "class Other(ValueError): ...\n",
            "planbook/compat/openmanus.py": "class ToolError(Exception): ...\n",
            "planbook/mcp/client.py": "from ..data.errors import PlanbookError\nclass ToolError(PlanbookError): ...\n"}
    assert error_classes(fake) == {"CellPlanError": "planbook.notebook.magics", "PlanError": "planbook.data.errors",
                                   "PlanbookError": "planbook.data.errors", "ToolError": "planbook.mcp.client"}

