"""Read the YAML or JSON text of a plan spec into plain data, with the line of every part.

One parse per spec, whatever its size: JSON goes through the standard library's C scanner
(the top levels are walked here so each step, field and arg keeps its line), YAML through
libyaml's C parser when PyYAML has it. What comes back is plain data plus

* ``lines``: the 1-based line of each key or list item down to a step's args and needs
  (paths such as ``("steps", 2, "args", "city")``), for errors that quote the right line;
* ``written``: the text as written of every number, boolean or null down to that depth,
  so ``id: 1.10`` stays ``"1.10"`` (not ``"1.1"``), ``010`` stays ``"010"``, ``yes`` stays
  ``"yes"``.

Input a person did not mean is an error with its line, never a crash or a silent choice:
duplicate keys, nesting deeper than :data:`MAX_DEPTH` (Python's recursion limit is near
1,000 levels), YAML aliases that refer to themselves or expand to more than
:data:`MAX_VALUES` values, numbers with more digits than Python reads, and syntax errors
said in words.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..data.errors import PlanError, Problem
from ..outbound import plan_secret_values, remember, suspicious
from ..outbound.redact import named_secrets

#: nesting levels a spec may use (a step's args start four levels down)
MAX_DEPTH = 100
#: values a YAML spec may expand to once its aliases are followed
MAX_VALUES = 1_000_000
#: YAML containers at paths shorter than this are walked for lines: down to each arg and need
_TRACKED = 4
#: JSON is walked down to each step's fields (a Python loop per arg would cost more than the
#: parse itself); a list of numbers there (``"needs": [1.10]``) is read again for its text
_TRACKED_JSON = 3

Path = tuple[Any, ...]


@dataclass
class LoadedSpec:
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    written: dict[Path, str] = field(default_factory=dict)
    #: duplicate keys: reported with the other problems of the spec
    problems: list[Problem] = field(default_factory=list)


def load_spec(text: str) -> LoadedSpec:
    """Parse ``text`` (JSON if it parses as JSON, else YAML). Raises :class:`PlanError` with the line."""
    loaded = _parse(text)
    if suspicious(text):  # a secret-named key somewhere (False proves there is none: no walk)
        _learn_secrets(loaded.data)
    return loaded


def _parse(text: str) -> LoadedSpec:
    if text.lstrip().startswith(("{", "[")):
        try:  # JSON first: valid JSON that YAML rejects (tab indentation) must still read
            return _JsonReader(text).read()
        except json.JSONDecodeError as exc:
            if _looks_like_json(text):  # JSON with a mistake, not YAML: YAML would read `"tool": }` as null
                raise PlanError([_json_words(exc)]) from None
    return _load_yaml(text)  # YAML, flow style included ({steps: [...]})


def _learn_secrets(data: Any) -> None:
    """The values under the spec's secret-named keys are secrets of the process from now on:
    a plan refused later (a field of the wrong type, a password starting with ``$`` read as an
    unknown reference, a check by a tool's types) is an error raised before any run, or its
    gate, exists, and its message must not quote them."""
    steps = data.get("steps") if isinstance(data, dict) else data
    values = named_secrets(data)[0]
    if isinstance(steps, list):
        values += plan_secret_values([st for st in steps if isinstance(st, dict)])
    if values:
        remember(values)


# ---------------------------------------------------------------------------- JSON
_WS = re.compile(r"[ \t\n\r]*")


def _looks_like_json(text: str) -> bool:
    """``{"`` or ``[{"`` / ``["``: the author wrote JSON (flow-style YAML writes bare keys)."""
    return re.match(r'\s*[\[{]\s*(?:["\]}]|[\[{]\s*")', text) is not None


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for the values below the walked levels: a repeated key is an error."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return data


#: a key and its colon, with the spaces around them (most keys hold no escapes)
_KEY = re.compile(r'[ \t\n\r]*"([^"\\]*(?:\\.[^"\\]*)*)"[ \t\n\r]*:[ \t\n\r]*')
#: the first characters of a string or a number
_PLAIN_START = frozenset('"-0123456789')
#: what may follow a value in a container
_AFTER = re.compile(r"[ \t\n\r]*([,}\]]?)")


class _JsonReader:
    """Walks the top levels of a JSON document (the root, the steps, each step's keys) and hands
    every value below them to the C scanner whole: one parse, with the lines of the walked parts."""

    def __init__(self, text: str) -> None:
        self.text = text
        # the C scanner a decoder makes in its __init__ (typeshed's stub does not declare it)
        self.scan = json.JSONDecoder(object_pairs_hook=_pairs).scan_once  # type: ignore[attr-defined]
        self.result = LoadedSpec(None)
        self._line, self._line_pos = 1, 0

    def read(self) -> LoadedSpec:
        data, end = self.value(_WS.match(self.text, 0).end(), ())  # type: ignore[union-attr]
        end = _WS.match(self.text, end).end()  # type: ignore[union-attr]
        if end != len(self.text):
            raise json.JSONDecodeError("Extra data", self.text, end)
        self.result.data = data
        return self.result

    def line(self, pos: int) -> int:
        """The line of ``pos``; positions only grow while reading, so lines are counted once."""
        self._line += self.text.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line

    def value(self, pos: int, path: Path) -> tuple[Any, int]:
        """The value starting at ``pos`` (no spaces before it) and where it ends."""
        text = self.text
        first = text[pos : pos + 1]
        if len(path) < _TRACKED_JSON:
            if first == "{":
                return self.mapping(pos, path)
            if first == "[":
                return self.sequence(pos, path)
        try:
            data, end = self.scan(text, pos)
        except StopIteration:
            raise json.JSONDecodeError("Expecting value", text, pos) from None
        except json.JSONDecodeError:
            raise
        except RecursionError:
            raise _too_deep(self.line(pos)) from None
        except _Duplicate as dup:
            raise PlanError([_duplicate_problem(dup.key, self.line(pos), None)]) from None
        except ValueError as exc:  # int(): more digits than Python reads
            raise PlanError([_number_problem(str(exc), self.line(pos))]) from None
        if first == "[" or first == "{":
            # each level takes two characters: a short value cannot be too deep (no walk needed)
            if end - pos > 2 * (MAX_DEPTH - len(path)) and depth(data) + len(path) > MAX_DEPTH:
                raise _too_deep(self.line(pos))
            if first == "[" and len(path) == _TRACKED_JSON and any(type(x) in (float, bool) for x in data):
                return self.sequence(pos, path)  # ids such as 1.10: keep the text as written
        elif first != '"' and data is not None:
            self.result.written[path] = text[pos:end]
        return data, end

    def mapping(self, pos: int, path: Path) -> tuple[dict[str, Any], int]:
        text, lines, key_match, after, scan = self.text, self.result.lines, _KEY.match, _AFTER.match, self.scan
        data: dict[str, Any] = {}
        close = after(text, pos + 1)
        if close.group(1) == "}":  # type: ignore[union-attr]
            return data, close.end()  # type: ignore[union-attr]
        while True:
            found = key_match(text, pos + 1)
            if found is None:
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text,
                                           _WS.match(text, pos + 1).end())  # type: ignore[union-attr]
            key = found.group(1)
            if "\\" in key:
                key = json.decoder.scanstring(text, found.start(1))[0]  # type: ignore[attr-defined]
            key_path = (*path, key)
            start = found.start(1)
            self._line += text.count("\n", self._line_pos, start)  # self.line(start), inlined: this loop is hot
            self._line_pos = start
            if key in data:
                self.result.problems.append(_duplicate_problem(key, self._line, lines.get(key_path)))
            else:
                lines[key_path] = self._line
            pos = found.end()
            if text[pos] in _PLAIN_START and len(key_path) >= _TRACKED_JSON:
                try:  # a string or number: the common case, without the checks of value()
                    value, pos = scan(text, pos)
                except StopIteration:
                    raise json.JSONDecodeError("Expecting value", text, pos) from None
                except json.JSONDecodeError:
                    raise
                except ValueError as exc:  # int(): more digits than Python reads
                    raise PlanError([_number_problem(str(exc), self.line(pos))]) from None
                if not isinstance(value, str):
                    self.result.written[key_path] = text[found.end() : pos]
                data[key] = value
            else:
                data[key], pos = self.value(found.end(), key_path)
            nxt = after(text, pos)
            pos = nxt.end()  # type: ignore[union-attr]
            sep = nxt.group(1)  # type: ignore[union-attr]
            if sep == "}":
                return data, pos
            if sep != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
            pos -= 1  # key_match starts after the comma

    def sequence(self, pos: int, path: Path) -> tuple[list[Any], int]:
        text, lines, after = self.text, self.result.lines, _AFTER.match
        data: list[Any] = []
        close = after(text, pos + 1)
        if close.group(1) == "]":  # type: ignore[union-attr]
            return data, close.end()  # type: ignore[union-attr]
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        while True:
            item_path = (*path, len(data))
            lines[item_path] = self.line(pos)
            item, pos = self.value(pos, item_path)
            data.append(item)
            nxt = after(text, pos)
            pos = nxt.end()  # type: ignore[union-attr]
            sep = nxt.group(1)  # type: ignore[union-attr]
            if sep == "]":
                return data, pos
            if sep != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]


def depth(value: Any) -> int:
    """Nesting levels of plain JSON data (no cycles possible), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)) and child)
    return deepest


_JSON_WORDS = {
    "Expecting value": "a value is missing (or a comma, bracket or quote is out of place)",
    "Expecting ',' delimiter": "a ',' is missing between two items (or a bracket is not closed)",
    "Expecting ':' delimiter": "a ':' is missing after a key",
    "Expecting property name enclosed in double quotes": 'a key must be in double quotes (and no "," may come before a closing brace)',
    "Unterminated string starting at": "a text in quotes is not closed",
    "Invalid control character at": "a text in quotes holds a raw control character (a tab or a newline): write \\t or \\n",
    "Invalid \\escape": "a text in quotes holds an unknown escape (write \\\\ for a backslash)",
    "Extra data": "there is more after the end of the JSON value (one spec per file)",
}


def _json_words(exc: json.JSONDecodeError) -> Problem:
    words = next((w for k, w in _JSON_WORDS.items() if exc.msg.startswith(k)), exc.msg)
    return Problem(f"not valid JSON: {words} (column {exc.colno})", code="syntax", line=exc.lineno)


# ---------------------------------------------------------------------------- YAML
@functools.lru_cache(maxsize=1)
def _loader_class() -> Any:
    """A safe loader (libyaml's C parser when PyYAML was built with it) that refuses numbers
    Python cannot read with a line, instead of a bare ValueError."""
    import yaml

    base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class SpecLoader(base):  # type: ignore[misc, valid-type]
        def construct_yaml_int(self, node: Any) -> Any:
            try:
                return super().construct_yaml_int(node)
            except ValueError as exc:
                raise yaml.constructor.ConstructorError(None, None, _number_problem(str(exc), None).message,
                                                        node.start_mark) from None

    SpecLoader.add_constructor("tag:yaml.org,2002:int", SpecLoader.construct_yaml_int)
    return SpecLoader


def _load_yaml(text: str) -> LoadedSpec:
    import yaml

    loader = _loader_class()(text)
    try:
        try:
            root = loader.get_single_node()
        except RecursionError:  # the pure-Python composer recurses once per level
            raise _too_deep(_deep_line(text)) from None
        if root is None:
            return LoadedSpec(None)
        result = LoadedSpec(None)
        _check_tree(root, result.problems)
        result.data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        raise PlanError([_yaml_words(exc, text)]) from None
    except yaml.YAMLError as exc:
        raise PlanError([Problem(f"not valid YAML: {exc}", code="syntax")]) from None
    finally:
        loader.dispose()
    _walk_nodes(root, (), result)
    return result


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_tree(root: Any, problems: list[Problem]) -> None:
    """Depth, size and self-reference of the node tree (aliases share nodes), and duplicate
    keys; without recursion, each shared node measured once."""
    import yaml

    height: dict[int, int] = {}
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, list[Any], int]] = []

    def enter(node: Any) -> None:
        kids = _children(node)
        if isinstance(node, yaml.MappingNode):
            _duplicate_keys(node, problems)
        stack.append((node, kids, 0))
        on_path.add(id(node))
        if len(stack) > MAX_DEPTH:
            raise _too_deep(node.start_mark.line + 1)

    enter(root)
    while stack:
        node, kids, i = stack[-1]
        if i == len(kids):
            stack.pop()
            on_path.discard(id(node))
            height[id(node)] = 1 + max((height[id(k)] for k in kids), default=0)
            size[id(node)] = total = 1 + sum(size[id(k)] for k in kids)
            if total > MAX_VALUES:
                raise PlanError([Problem(
                    f"the spec expands to more than {MAX_VALUES:,} values (YAML aliases repeat data): "
                    "write the data out, or load it in a tool", code="too_big", line=node.start_mark.line + 1)])
            continue
        stack[-1] = (node, kids, i + 1)
        child = kids[i]
        key = id(child)
        if key in on_path:
            raise PlanError([Problem("a YAML alias refers to the value that holds it (a value cannot contain itself)",
                                     code="syntax", line=child.start_mark.line + 1)])
        if key in height:  # an alias of a node measured already
            if len(stack) + height[key] > MAX_DEPTH:
                raise _too_deep(child.start_mark.line + 1)
        elif isinstance(child, yaml.ScalarNode):
            height[key], size[key] = 1, 1
        else:
            enter(child)


def _duplicate_keys(node: Any, problems: list[Problem]) -> None:
    import yaml

    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        ident, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
        if ident in seen:
            problems.append(_duplicate_problem(key_node.value, line, seen[ident]))
        else:
            seen[ident] = line


_WRITTEN_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool")


def _walk_nodes(node: Any, path: Path, result: LoadedSpec) -> None:
    """Lines and written text of the top levels (iterating a few levels deep is bounded)."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        # merged keys (<<: *defaults) come first: a key written in the mapping itself wins
        entries = [(k.value, k.start_mark.line + 1, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
    elif isinstance(node, yaml.SequenceNode):
        entries = [(i, item.start_mark.line + 1, item) for i, item in enumerate(node.value)]
    else:
        return
    for key, line, child in entries:
        child_path = (*path, key)
        result.lines[child_path] = line
        if isinstance(child, yaml.ScalarNode):
            if child.tag in _WRITTEN_TAGS:
                result.written[child_path] = child.value
            else:
                result.written.pop(child_path, None)
        elif len(child_path) < _TRACKED:
            _walk_nodes(child, child_path, result)


def _deep_line(text: str) -> int | None:
    """Where nesting first passes :data:`MAX_DEPTH`, from the parser's events (no recursion)."""
    import yaml

    depth = 0
    try:
        for event in yaml.parse(text, Loader=_loader_class()):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return int(event.start_mark.line) + 1
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        pass
    return None


#: libyaml's and PyYAML's problems, in words (either parser may have found it)
_YAML_WORDS: tuple[tuple[str, str], ...] = (
    ("cannot start any token", "{char} cannot start a value: put the text in quotes"),
    ("mapping values are not allowed",
     "a ':' where YAML does not expect one: put text that holds ': ' in quotes, or check the indentation"),
    ("could not find expected ':'", "a line that is not 'key: value' (a ':' is missing, or the line above it is not closed)"),
    ("expected ',' or '}'", "a '{{' mapping (opened on line {context}) is not closed with '}}', or a ',' is missing"),
    ("expected ',' or ']'", "a '[' list (opened on line {context}) is not closed with ']', or a ',' is missing"),
    ("unknown escape character", "an unknown escape in a double-quoted text: write \\\\ for a backslash, or use single quotes"),
    ("quoted scalar", "a text in quotes (opened on line {context}) is not closed"),
    ("undefined alias", "an alias (*name) without an anchor (&name) before it"),
    ("duplicate anchor", "the same anchor (&name) is defined twice"),
    ("alias", "a '*' that starts no alias: put the text in quotes"),
    ("anchor", "a '&' that starts no anchor: put the text in quotes"),
    ("single document", "more than one YAML document ('---'): a spec is one document"),
    ("block end", "this line is not indented like the lines above it: line up the steps' '-' and their fields"),
    ("expected '-' indicator", "this line is not indented like the lines above it: line up the steps' '-' and their fields"),
    ("expected key", "this line is not indented like the lines above it: line up the fields of a mapping"),
    ("node content", "a value is missing or starts with a character YAML reserves: put the text in quotes"),
    ("exceeded maximum nesting depth", "nested too deep"),
)


def _yaml_words(exc: Any, text: str) -> Problem:
    problem = str(getattr(exc, "problem", None) or "")
    context = str(getattr(exc, "context", None) or "")
    mark = exc.problem_mark
    line = mark.line + 1 if mark is not None else None
    context_line = exc.context_mark.line + 1 if exc.context_mark is not None else line
    if "nesting depth" in problem:
        return _too_deep(line).problems[0]
    if "whole number" in problem:  # our own message (a number Python cannot read)
        return Problem(problem, code="too_big", line=line)
    char = text[mark.index] if mark is not None and mark.index < len(text) else ""
    for needle, words in _YAML_WORDS:
        if needle in f"{problem} {context}":
            if needle == "cannot start any token" and char == "\t":
                words = "a tab character: YAML indents with spaces only"
            message = words.format(char=repr(char) if char else "this character", context=context_line)
            return Problem(f"not valid YAML: {message}", code="syntax", line=line)
    return Problem(f"not valid YAML: {context + ': ' if context else ''}{problem}", code="syntax", line=line)


# ---------------------------------------------------------------------------- shared problems
def _too_deep(line: int | None) -> PlanError:
    return PlanError([Problem(
        f"values are nested more than {MAX_DEPTH} levels deep: flatten the data, or load it in a tool",
        code="too_deep", line=line)])


def _duplicate_problem(key: str, line: int | None, first: int | None) -> Problem:
    where = f" (first on line {first})" if first is not None else ""
    return Problem(f"the key {key!r} appears twice in one mapping{where}: keep one (YAML and JSON keep only the last)",
                   code="duplicate_key", line=line)


def _number_problem(error: str, line: int | None) -> Problem:
    digits = re.search(r"value has (\d+) digits", error)
    count = f"{digits.group(1)} digits" if digits else "too many digits"
    return Problem(f"a whole number with {count} is longer than Python reads (4300 digits): put it in quotes "
                   "to keep it as text", code="too_big", line=line)
