"""Every name has one owner, and nobody goes around it: no re-export shims, no private names across modules.

The package and its users (tests, benchmarks, examples, the notebooks' code cells) are read with
:mod:`ast`; nothing is imported. Each check is a plain function over ``{path: source}`` so the
self-tests at the bottom can plant a violation and see it named.

The words, precisely:

- A name's **owner** is the planbook module that defines it (``def``, ``class``, an assignment),
  not one that imports it.
- A **re-export** (a shim) is a name a module binds with ``from <planbook module> import name`` at
  its top level and never reads, or lists in its ``__all__`` (``__all__`` does not count as
  reading). Two kinds of module gather on purpose: ``planbook/__init__.py`` (the API face: anything)
  and a package's ``__init__`` (``planbook/llm/__init__.py``: in its ``__all__``, names of modules
  in its own folder, the folder's API). A module imported for what importing it does (a
  registration) is not a re-export.
- A **pass-through import** is ``from X import name`` where X is a planbook module that is not
  name's owner but imports it itself. Import a name from its owner, from ``planbook``, or from the
  package ``__init__`` whose ``__all__`` gathers it.
- A **private name** has one leading underscore (``_x``; not ``__x__``, nor an enum's ``_x_``). It
  belongs to the module that defines it: at the top level, in a class body, or as ``self._x = ...``
  in a method; a class's private names are its subclasses' too, wherever they are defined. Another
  module may not import one (``from X import _x``), read or call one through a module
  (``X._x``), through an object (``obj._x``, ``getattr(obj, "_x")``) when it defines no ``_x`` of
  its own, nor through ``self`` when neither its class nor a base class defines it; nor import a
  private module (``planbook.engine._algo``) from outside its package. Private attributes of other
  libraries (``os.environ._data``, a private attribute of a non-planbook base class) are not
  planbook's and are not checked; where the checker cannot tell (``getattr(executor, "_client")``
  on a user's Dask executor), the line says ``# not planbook's: ...``. A private name another
  module needs is made public, with a docstring saying what it is for. A test in ``tests/engine/``
  may import ``planbook.engine``'s private modules: it tests that package's parts.

Where each holds: re-exports and pass-through imports in planbook/ and in every user of it (a test
that imports a shim keeps the shim alive); private names in planbook/, and for the users only the
imports (a test may look at an object's private attribute to check a state nothing public shows).
"""

from __future__ import annotations

import ast
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "planbook"
USERS = ("tests", "benchmarks", "examples")
NOTEBOOKS = ROOT / "notebooks"
#: base classes that give a subclass no private attribute to use
PLAIN_BASES = {"typing", "typing_extensions", "abc", "collections.abc", "enum", "dataclasses", "builtins"}


# ------------------------------------------------------------------ reading a module
def module_name(path: str) -> str:
    """planbook/engine/runner.py -> planbook.engine.runner; planbook/data/__init__.py -> planbook.data."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and not (len(name) > 2 and name.endswith("_"))


@dataclass
class Binding:
    """A name a module's top level binds by an import: ``from <source> import <original> as <name>``."""

    source: str    #: the absolute module it comes from (planbook.data.models, typing, os, ...)
    original: str  #: the name there ("" for ``import os``)
    line: int


@dataclass
class ClassInfo:
    name: str
    bases: list[ast.expr]
    privates: set[str]  #: defined in its body or as self._x = ... in its methods


@dataclass
class Module:
    """What one module defines, imports and reads."""

    name: str
    path: str
    is_package: bool
    tree: ast.Module
    lines: list[str]
    defined: set[str] = field(default_factory=set)              #: top-level names it defines
    imported: dict[str, Binding] = field(default_factory=dict)  #: top-level names bound by an import
    classes: dict[str, ClassInfo] = field(default_factory=dict)  #: top-level classes
    privates: set[str] = field(default_factory=set)             #: private names it defines, any level
    all_names: dict[str, int] = field(default_factory=dict)     #: its ``__all__``, with the line
    read: set[str] = field(default_factory=set)                 #: names it reads (``__all__`` aside)

    def absolute(self, node: ast.ImportFrom) -> str:
        """The module a ``from ... import`` names, made absolute."""
        if not node.level:
            return node.module or ""
        parts = (self.name if self.is_package else self.name.rpartition(".")[0]).split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that run at a module's top level, through ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in ("body", "orelse", "finalbody", "handlers"):
            for item in getattr(stmt, block, None) or []:
                out.extend(_top_level(item.body if isinstance(item, ast.ExceptHandler) else [item]))
    return out


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars]
    return []


def _string_annotations(tree: ast.Module) -> set[str]:
    """Names read inside quoted annotations (``x: "Runner"``) and ``cast("T", ...)``."""
    annotations: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            annotations += [x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                            if x is not None and x.annotation is not None]
            annotations += [node.returns] if node.returns else []
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("cast") and node.args:
            annotations.append(node.args[0])
    names: set[str] = set()
    for text in (n.value for a in annotations for n in ast.walk(a)
                 if isinstance(n, ast.Constant) and isinstance(n.value, str)):
        try:
            names |= {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
        except SyntaxError:
            continue
    return names


def _runtime(body: list[ast.stmt]) -> list[ast.stmt]:
    """A class body's statements, without those under ``if TYPE_CHECKING:`` (a declaration for the
    type checker defines nothing: the runner's parts declare there what their siblings define)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
            out.extend(_runtime(stmt.orelse))
        else:
            out.append(stmt)
    return out


def _walk_runtime(node: ast.AST) -> list[ast.AST]:
    """``ast.walk`` without what is under ``if TYPE_CHECKING:`` (declarations for the checker)."""
    out, todo = [], [node]
    while todo:
        current = todo.pop()
        out.append(current)
        if isinstance(current, ast.If) and "TYPE_CHECKING" in ast.unparse(current.test):
            todo.extend(current.orelse)
        else:
            todo.extend(ast.iter_child_nodes(current))
    return out


def _class_info(node: ast.ClassDef) -> ClassInfo:
    own: set[str] = set()
    for stmt in _runtime(node.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(stmt.name)
        own.update(n.id for t in _targets(stmt) for n in ast.walk(t) if isinstance(n, ast.Name))
        for sub in ast.walk(stmt) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else ():
            own.update(n.attr for t in _targets(sub) for n in ast.walk(t) if isinstance(n, ast.Attribute)
                       and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
    return ClassInfo(node.name, node.bases, {n for n in own if is_private(n)})


def read_module(path: str, source: str) -> Module:
    tree = ast.parse(source, path)
    mod = Module(module_name(path), path, path.endswith("__init__.py"), tree, source.splitlines())
    for stmt in _top_level(tree.body):
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                mod.imported[alias.asname or alias.name] = Binding(mod.absolute(stmt), alias.name, stmt.lineno)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                bound = alias.asname or alias.name.split(".")[0]
                mod.imported[bound] = Binding(alias.name if alias.asname else bound, "", stmt.lineno)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            mod.defined.add(stmt.name)
            if isinstance(stmt, ast.ClassDef):
                mod.classes[stmt.name] = _class_info(stmt)
        for target in _targets(stmt):
            mod.defined.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            if isinstance(target, ast.Name) and target.id == "__all__" and getattr(stmt, "value", None):
                mod.all_names.update({n.value: stmt.lineno for n in ast.walk(stmt.value)  # type: ignore[attr-defined]
                                      if isinstance(n, ast.Constant) and isinstance(n.value, str)})
    mod.defined -= set(mod.imported)
    in_all = {id(n) for stmt in tree.body for t in _targets(stmt) if isinstance(t, ast.Name) and t.id == "__all__"
              for n in ast.walk(stmt)}
    mod.read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Load, ast.Del))
                and id(n) not in in_all}
    for node in _walk_runtime(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and is_private(node.name):
            mod.privates.add(node.name)
        elif isinstance(node, ast.ClassDef):
            mod.privates |= _class_info(node).privates
        for target in _targets(node):
            mod.privates.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name) and is_private(n.id))
    mod.read |= _string_annotations(tree)
    return mod


@functools.lru_cache(maxsize=8)
def _read_all(items: tuple[tuple[str, str], ...]) -> dict[str, Module]:
    return {module_name(p): read_module(p, s) for p, s in items}


def read_all(sources: dict[str, str]) -> dict[str, Module]:
    """Every module, by its dotted name (read once per set of sources)."""
    return _read_all(tuple(sorted(sources.items())))


# ------------------------------------------------------------------ owners
def owner(modules: dict[str, Module], module: str, name: str, seen: frozenset[str] = frozenset()) -> str:
    """The module that defines ``name`` as ``module`` has it, following its imports ("" when unknown)."""
    mod = modules.get(module)
    if mod is None or module in seen:
        return ""
    if name in mod.defined:
        return module
    binding = mod.imported.get(name)
    if binding is None:
        return ""
    if binding.source not in modules:
        return binding.source  # another library's name
    if f"{binding.source}.{binding.original}" in modules:
        return f"{binding.source}.{binding.original}"  # a module
    return owner(modules, binding.source, binding.original, seen | {module}) or binding.source


def _gathers(mod: Module, name: str, source: str) -> bool:
    """A package ``__init__`` that lists ``name`` in ``__all__`` and has it from a module of its own folder."""
    return mod.name == "planbook" or (mod.is_package and name in mod.all_names and source.startswith(mod.name + "."))


def re_exports(sources: dict[str, str]) -> list[str]:
    """Modules that import a planbook name to hand it on (see the module docstring)."""
    modules = read_all(sources)
    found = []
    for mod in modules.values():
        for name, binding in mod.imported.items():
            if binding.source not in modules or binding.source == mod.name or _gathers(mod, name, binding.source):
                continue
            if f"{binding.source}.{binding.original}" in modules and name not in mod.all_names:
                continue  # a module imported for what importing it does (a registration)
            if name in mod.read and name not in mod.all_names:
                continue
            home = owner(modules, binding.source, binding.original) or binding.source
            how = "lists it in __all__" if name in mod.all_names else "never reads it"
            found.append(f"{mod.path}:{binding.line} re-exports {name} (its owner is {home}): it {how}; its users "
                         f"import it from {home}")
    return sorted(found)


def _from_imports(mod: Module) -> list[tuple[ast.ImportFrom, str]]:
    return [(node, mod.absolute(node)) for node in ast.walk(mod.tree) if isinstance(node, ast.ImportFrom)]


def pass_through_imports(sources: dict[str, str], importers: dict[str, str] | None = None) -> list[str]:
    """``from X import name`` where X is not name's owner but imports it (see the module docstring).

    ``importers`` are the modules checked (default: ``sources`` themselves; the users pass theirs)."""
    modules = read_all(sources)
    found = []
    for mod in (read_all(importers) if importers is not None else modules).values():
        for node, base in _from_imports(mod):
            source = modules.get(base)
            for alias in node.names if source is not None else []:
                binding = source.imported.get(alias.name)  # type: ignore[union-attr]
                if binding is None or f"{base}.{alias.name}" in modules or _gathers(source, alias.name, binding.source):
                    continue
                home = owner(modules, base, alias.name) or binding.source
                found.append(f"{mod.path}:{node.lineno} imports {alias.name} from {base}, which only imports it: "
                             f"import it from its owner, {home}")
    return sorted(found)


def _ancestors(modules: dict[str, Module], mod: Module, info: ClassInfo, depth: int = 0) -> tuple[set[str], bool]:
    """The private names a class has from itself and its bases, and whether a base is another library's."""
    names, foreign = set(info.privates), False
    for base in info.bases if depth < 20 else []:
        expr = base.value if isinstance(base, ast.Subscript) else base
        root = expr.value if isinstance(expr, ast.Attribute) else expr
        if not isinstance(root, ast.Name):
            foreign = True
            continue
        found: tuple[Module, ClassInfo] | None = None
        if isinstance(expr, ast.Name) and expr.id in mod.classes:
            found = mod, mod.classes[expr.id]
        elif root.id in mod.imported:
            binding = mod.imported[root.id]
            if isinstance(expr, ast.Attribute):
                home, cls = (binding.source if not binding.original else f"{binding.source}.{binding.original}"), expr.attr
            else:
                home, cls = owner(modules, binding.source, binding.original) or binding.source, binding.original
            if home in modules and cls in modules[home].classes:
                found = modules[home], modules[home].classes[cls]
            elif home.split(".")[0] != "planbook" and home not in PLAIN_BASES:
                foreign = True
        if found is not None:
            more, other = _ancestors(modules, found[0], found[1], depth + 1)
            names, foreign = names | more, foreign or other
    return names, foreign


class PrivateReach(ast.NodeVisitor):
    """Reads of another module's private names through an attribute, in one module."""

    def __init__(self, modules: dict[str, Module], mod: Module, owners: dict[str, set[str]]) -> None:
        self.modules, self.mod, self.owners = modules, mod, owners
        self.classes: list[tuple[set[str], bool]] = []
        self.found: list[str] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(_ancestors(self.modules, self.mod, _class_info(node)))
        self.generic_visit(node)
        self.classes.pop()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check(node, node.value, node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            self.check(node, node.args[0], node.args[1].value)
        self.generic_visit(node)

    def check(self, node: ast.AST, base: ast.expr, attr: str) -> None:
        line = self.mod.lines[getattr(node, "lineno", 1) - 1]
        if "not planbook's" in line:  # another library's private attribute, said so on its line
            return
        if not is_private(attr) or (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                                    and isinstance(base, ast.Name) and base.id in ("self", "cls")):
            return
        own = isinstance(base, ast.Name) and base.id in ("self", "cls") or (
            isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super")
        if own and self.classes:
            names, foreign = self.classes[-1]
            if attr in names or foreign:
                return
        root = base
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        binding = self.mod.imported.get(root.id) if isinstance(root, ast.Name) else None
        if binding is not None and root is base:
            target = binding.source if not binding.original else f"{binding.source}.{binding.original}"
            if target in self.modules:  # module._x: that module's private name, whatever this one defines
                self.report(node, attr, {target})
                return
        if binding is not None and binding.source.split(".")[0] != "planbook":
            return  # another library's object (os.environ._data)
        if attr not in self.mod.privates and self.owners.get(attr):
            self.report(node, attr, self.owners[attr])

    def report(self, node: ast.AST, attr: str, owners: set[str]) -> None:
        self.found.append(f"{self.mod.path}:{getattr(node, 'lineno', 0)} reaches {ast.unparse(node)[:70]}: {attr} "
                          f"is private to {', '.join(sorted(owners))}; make it public (with a docstring) or use what "
                          "its owner makes public")


def private_reaches(sources: dict[str, str], importers: dict[str, str] | None = None,
                    imports_only: bool = False) -> list[str]:
    """Imports and attribute reads of another planbook module's private names (see the module docstring)."""
    modules = read_all(sources)
    owners: dict[str, set[str]] = {}
    for mod in modules.values():
        for name in mod.privates:
            owners.setdefault(name, set()).add(mod.name)
    found = []
    for mod in (read_all(importers) if importers is not None else modules).values():
        for node, base in _from_imports(mod):
            if base not in modules or base == mod.name:
                continue
            for alias in node.names:
                loaded = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                if is_private(alias.name) and loaded == base:
                    found.append(f"{mod.path}:{node.lineno} imports {alias.name}, private to {base}: make it public "
                                 "(with a docstring) or use what its owner makes public")
                parts = loaded.split(".")
                private = next((i for i, p in enumerate(parts) if is_private(p)), None)
                package = ".".join(parts[:private or 0])
                tests_of = "tests." + package.partition(".")[2]  # tests/engine/ tests engine/'s parts
                if private is not None and not (mod.name + ".").startswith((package + ".", tests_of + ".")):
                    found.append(f"{mod.path}:{node.lineno} imports {loaded}, a module private to {package}: use "
                                 f"what {package} makes public")
        if not imports_only:
            visitor = PrivateReach(modules, mod, owners)
            visitor.visit(mod.tree)
            found += visitor.found
    return sorted(set(found))


# ------------------------------------------------------------------ the rules, on the package and its users
def _notebook_code(path: Path) -> str:
    """A notebook's code cells as one module, magics turned into the calls IPython makes of them."""
    from IPython.core.inputtransformer2 import TransformerManager  # the notebooks' own reading of magics

    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    return "\n".join(TransformerManager().transform_cell("".join(c["source"])) for c in cells) + "\n"


@functools.lru_cache(maxsize=1)
def _package() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


@functools.lru_cache(maxsize=1)
def _users() -> dict[str, str]:
    files = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
             for folder in USERS for p in sorted((ROOT / folder).rglob("*.py"))}
    files |= {p.relative_to(ROOT).as_posix() + ".py": _notebook_code(p) for p in sorted(NOTEBOOKS.glob("*.ipynb"))}
    return files


def test_no_module_re_exports_a_name() -> None:
    found = re_exports(_package())
    assert found == [], "one owner for each name, and no shim in front of it:\n" + "\n".join(found)


def test_the_package_and_its_users_import_each_name_from_its_owner() -> None:
    found = pass_through_imports(_package()) + pass_through_imports(_package(), _users())
    assert found == [], "\n".join(found)


def test_no_module_reaches_another_modules_private_names() -> None:
    found = private_reaches(_package())
    assert found == [], "a private name is its module's own:\n" + "\n".join(found)


def test_the_users_import_no_private_name() -> None:
    found = private_reaches(_package(), _users(), imports_only=True)
    assert found == [], "\n".join(found)


def test_the_scan_reads_the_package_and_its_users() -> None:
    assert {"planbook", "planbook.engine.runner", "planbook.views.widget"} <= set(read_all(_package()))
    users = _users()
    assert "tests/architecture/test_no_shims.py" in users and "notebooks/05-three-designs.ipynb.py" in users
    assert any(p.startswith("benchmarks/") for p in users)


# ------------------------------------------------------------------ the checks find what they must
def _plant(extra: dict[str, str]) -> dict[str, str]:
    """A small package, clean as it is (the test below proves it), with ``extra`` modules added or replaced."""
    base = {
        "planbook/__init__.py": "from .data.errors import PlanError\nfrom .data.models import Plan\n"
                                "__all__ = ['Plan', 'PlanError']\n",
        "planbook/data/__init__.py": "",
        "planbook/data/errors.py": "class PlanError(Exception): ...\n",
        "planbook/data/wording.py": "def slug(text): return text\n",
        "planbook/data/models.py": "from pydantic import BaseModel, PrivateAttr\nfrom .wording import slug\n"
                                   "def _clone(v): return v\n"
                                   "class Plan(BaseModel):\n    _lines: dict = PrivateAttr()\n"
                                   "    def line_of(self, i): return self._lines.get(i)\n"
                                   "    def _copy(self): return Plan(id=slug(self.id))\n"
                                   "    def __eq__(self, other): return self._lines == other._lines\n",
        "planbook/engine/__init__.py": "",
        "planbook/engine/_algo.py": "def rule(): return 1\n",
        "planbook/engine/parts.py": "class Parts:\n    def _finish(self): ...\n    def _go(self): self._finish()\n",
        "planbook/engine/runner.py": "import os\nfrom ._algo import rule\nfrom .parts import Parts\n"
                                     "class Runner(Parts):\n    def __init__(self):\n        self._ending = None\n"
                                     "        self._finish()\n        self._x, self._y = rule(), os.environ._data\n"
                                     "    def _stop(self): self._ending = 'x'\n",
        "planbook/llm/__init__.py": "from .text import shorten\n__all__ = ['shorten']\n",
        "planbook/llm/text.py": "def shorten(t): return t\n",
        "planbook/compat/__init__.py": "from . import seed  # registers its format\n",
        "planbook/compat/seed.py": "from ..data.models import Plan\n"
                                   "def read(text): return Plan()\n",
        "planbook/views/widget.py": "from anywidget import AnyWidget\nclass View(AnyWidget):\n"
                                    "    def f(self): return self._send\n",
    }
    return {**base, **extra}


def test_the_planted_package_is_clean() -> None:
    fake = _plant({})
    users = {"tests/engine/test_algo.py": "from planbook.engine._algo import rule\nfrom planbook import PlanError\n"
                                          "from planbook.llm import shorten\nfrom planbook.data.models import Plan\n"}
    assert re_exports(fake) == pass_through_imports(fake) == pass_through_imports(fake, users) == []
    assert private_reaches(fake) == private_reaches(fake, users) == []


@pytest.mark.parametrize("path, source, found", [
    # a name imported and handed on: never read, or listed in __all__ while the owner is elsewhere
    ("planbook/spec/formats.py", "from ..data.wording import slug  # noqa: F401\n",
     "planbook/spec/formats.py:1 re-exports slug (its owner is planbook.data.wording): it never reads it"),
    ("planbook/llm/text.py", "from ..data.wording import slug\n__all__ = ['slug']\ndef shorten(t): return slug(t)\n",
     "planbook/llm/text.py:1 re-exports slug (its owner is planbook.data.wording): it lists it in __all__"),
    ("planbook/compat/upstream.py", "from ..data.errors import PlanError\n__all__ = ['PlanError']\n",
     "planbook/compat/upstream.py:1 re-exports PlanError (its owner is planbook.data.errors)"),
    # a package's __init__ gathers its own folder, not another's
    ("planbook/llm/__init__.py", "from ..data.errors import PlanError\nfrom .text import shorten\n"
     "__all__ = ['PlanError', 'shorten']\n", "planbook/llm/__init__.py:1 re-exports PlanError"),
])
def test_the_re_export_check_finds_a_shim(path: str, source: str, found: str) -> None:
    got = re_exports(_plant({path: source}))
    assert len(got) == 1 and got[0].startswith(found), got


@pytest.mark.parametrize("path, source, found", [
    ("planbook/engine/fork.py", "from .runner import os\n", "imports os from planbook.engine.runner, which only "
     "imports it: import it from its owner, os"),
    ("planbook/compat/flow.py", "def f():\n    from .seed import Plan\n", "planbook/compat/flow.py:2 imports Plan "
     "from planbook.compat.seed, which only imports it: import it from its owner, planbook.data.models"),
    ("planbook/views/state.py", "from ..data.models import slug\n", "imports slug from planbook.data.models"),
])
def test_the_pass_through_check_finds_an_import_from_a_non_owner(path: str, source: str, found: str) -> None:
    got = pass_through_imports(_plant({path: source}))
    assert len(got) == 1 and found in got[0], got
    user = pass_through_imports(_plant({}), {"tests/test_x.py": source.replace("from ..", "from planbook.")
                                             .replace("from .", f"from {module_name(path).rpartition('.')[0]}.")})
    assert len(user) == 1, user  # a test importing the same way is named too


@pytest.mark.parametrize("path, source, found", [
    ("planbook/engine/replanning.py", "from ..data.models import _clone\n", "imports _clone, private to "
     "planbook.data.models"),
    ("planbook/spec/formats.py", "def f(plan):\n    plan._lines = {}\n", "reaches plan._lines: _lines is private "
     "to planbook.data.models"),
    ("planbook/engine/fork.py", "def f(step):\n    return step._copy()\n", "reaches step._copy: _copy is private to planbook.data.models"),
    ("planbook/engine/fork.py", "from ..data import models\ndef f():\n    return models._clone\n",
     "reaches models._clone"),
    ("planbook/views/steer.py", "def f(view):\n    return getattr(view.runner, '_ending', None)\n",
     "reaches getattr(view.runner, '_ending', None)"),
    ("planbook/engine/door.py", "def f(runner):\n    runner._finish()\n", "reaches runner._finish: _finish is private to planbook.engine.parts"),
    ("planbook/engine/loop.py", "from .parts import Parts\nclass Loop(Parts):\n    def f(self): self._stop()\n",
     "reaches self._stop: _stop is private to planbook.engine.runner"),  # the Runner's, not a base class's
    ("planbook/engine/loop.py", "from typing import TYPE_CHECKING\nclass Loop:\n    if TYPE_CHECKING:\n"
     "        def _stop(self): ...\n    def f(self): self._stop()\n", "reaches self._stop"),  # declared for the checker only: defined nowhere here
    ("planbook/views/live.py", "from ..engine._algo import rule\n", "imports planbook.engine._algo, a module "
     "private to planbook.engine"),
])
def test_the_private_check_finds_a_reach_into_another_module(path: str, source: str, found: str) -> None:
    got = private_reaches(_plant({path: source}))
    assert len(got) == 1 and found in got[0], got


def test_the_private_check_holds_the_users_to_imports() -> None:
    users = {"tests/views/test_x.py": "from planbook.data.models import _clone\nfrom planbook.engine._algo import rule\n"
                                      "def f(plan):\n    return plan._lines\n"}
    got = private_reaches(_plant({}), users, imports_only=True)
    assert [g.split(" imports ")[1].split(",")[0] for g in got] == ["_clone", "planbook.engine._algo"], got
