"""No step state is read from ``notes``: a step's notes are prose for people; what a step *is*
(cached, kept, pinned, waiting, interrupted) is its typed mark (:mod:`planbook.data.stepmark`).

Every module of the package is parsed with ``ast`` (nothing is imported). A *note* is an
attribute ``<expr>.notes``, a stored record's (``record["notes"]``, ``record.get("notes")``), or a
name the module binds to one (``notes = step.notes``). A module must not:

- compare a note (``==``, ``!=``, ``in``, ``not in``, ``is``) with anything but another field of
  the same object: ``step.notes == WAITING_NOTE``, ``step.notes in (A, B)``, ``"cached" in step.notes``
  are reads of state; ``step.error in step.notes`` (a view not saying an error twice) is not;
- call a method of a note, or take a piece of it: ``step.notes.startswith(...)``,
  ``notes.split(":")``, ``step.notes[:7]``.

Whether a note is there (``if step.notes:``) and passing it on to be shown (``shown(step.notes)``)
are fine. The one module that reads marks from notes is the store's migration of rows an older
planbook wrote, when a mark was the words its note began with: it is named in ``MIGRATION``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "planbook"
#: reads old stored notes as the marks they meant, by the rules that planbook read them (one place)
MIGRATION = {"store/oldmarks.py"}
_COMPARE = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


def _is_notes_attribute(node: ast.AST) -> bool:
    """``step.notes``, or a record's notes: ``record["notes"]``, ``record.get("notes")``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "notes"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "notes"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "notes")


def _aliases(tree: ast.AST) -> set[str]:
    """Names a module binds to a note: ``notes = step.notes``, ``(n := step.notes)``,
    ``status, notes = step.status, step.notes``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += zip(target.elts, node.value.elts)
                else:
                    pairs.append((target, node.value))
        elif isinstance(node, ast.NamedExpr):
            pairs.append((node.target, node.value))
        names.update(t.id for t, v in pairs if isinstance(t, ast.Name) and _is_notes_attribute(v))
    return names


def _same_object_field(note: ast.AST, other: ast.AST) -> bool:
    """``other`` is another field of the object ``note`` is the notes of (``step.error`` for ``step.notes``)."""
    return (isinstance(note, ast.Attribute) and isinstance(other, ast.Attribute) and other.attr != "notes"
            and ast.dump(note.value) == ast.dump(other.value))


def note_reads(source: str, where: str = "<planted>") -> list[str]:
    """Each place in ``source`` that reads a state from a note, as ``where:line: what: code``."""
    found: list[str] = []
    tree = ast.parse(source)
    aliases = _aliases(tree)

    def _is_note(node: ast.AST) -> bool:
        return _is_notes_attribute(node) or (isinstance(node, ast.Name) and node.id in aliases)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(op, _COMPARE) for op in node.ops):
                for note in filter(_is_note, operands):
                    others = [o for o in operands if o is not note]
                    if not all(_same_object_field(note, o) for o in others):
                        found.append(f"{where}:{node.lineno}: compares a note: {ast.unparse(node)}")
                        break
        elif isinstance(node, ast.Attribute) and _is_note(node.value):
            found.append(f"{where}:{node.lineno}: reads into a note (.{node.attr}): {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and _is_note(node.value):
            found.append(f"{where}:{node.lineno}: takes a piece of a note: {ast.unparse(node)}")
    return found


def test_no_module_reads_a_step_s_state_from_its_notes() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where not in MIGRATION:
            found += note_reads(path.read_text(encoding="utf-8"), f"planbook/{where}")
    assert not found, ("a step's notes are prose for people; read its typed mark (step.mark, "
                       "planbook.data.stepmark) instead:\n" + "\n".join(found))


def test_the_migration_still_needs_its_exemption() -> None:
    for where in MIGRATION:
        assert note_reads((PACKAGE / where).read_text(encoding="utf-8")), f"{where} reads no note: drop it from MIGRATION"


PLANTED = [
    "def f(step):\n    return step.notes.startswith('cached: ')\n",
    "def f(step):\n    return step.notes == WAITING_NOTE\n",
    "def f(step):\n    return step.notes in (INTERRUPTED_NOTE, STILL_RUNNING_NOTE)\n",
    "def f(step):\n    return step.notes not in _CUT\n",
    "def f(step):\n    return 'cached' in step.notes\n",
    "def f(step, other):\n    return step.notes == other.notes\n",
    "def f(step):\n    if (notes := step.notes) and notes.startswith(PREFIXES):\n        return 1\n",
    "def f(step):\n    return step.notes[:7] == 'cached:'\n",
    "def f(step):\n    return step.notes.split(':', 1)[0]\n",
    "def f(step):\n    status, notes = step.status, step.notes\n    return notes == 'waiting for approval'\n",
    "def f(step):\n    return step.notes == self.WAITING\n",
    "def f(runner):\n    return runner.plan.step('a').notes.endswith('again')\n",
    "def f(record):\n    return record.get('notes', '').startswith('kept from run ')\n",
    "def f(record):\n    notes = record['notes']\n    return notes == 'waiting for approval'\n",
]
FINE = [
    "def f(step):\n    if step.notes:\n        print(shown(step.notes))\n",
    "def f(step):\n    return not (step.error and step.error in step.notes)\n",
    "def f(step):\n    step.notes = 'skipped by you'\n",
    "def f(step):\n    return step.mark in REUSED and step.notes\n",
    "def f(data):\n    return {'notes': data.get('notes')}\n",
    "def f(rows):\n    notes = []\n    notes.append('a line of a summary')\n    return notes\n",
]


def test_the_check_names_each_planted_read_of_a_note() -> None:
    for source in PLANTED:
        assert note_reads(source), f"not caught:\n{source}"


def test_the_check_leaves_showing_a_note_alone() -> None:
    for source in FINE:
        assert note_reads(source) == [], source
