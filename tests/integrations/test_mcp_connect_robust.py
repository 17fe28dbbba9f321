"""connect() survives any one odd tool of a server, and start_timeout is a deadline for the whole
start that leaves no server process behind. The servers are small stdio scripts on the SDK's
low-level server (raw input schemas, as any server may send them), or plain scripts that never
answer."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import PlanError

HAVE_SDK = importlib.util.find_spec("mcp") is not None
needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason='needs the mcp extra: pip install -e ".[test-mcp]"')


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended and been reaped (not even a zombie is left)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# ---------------------------------------------------------------- schemas (no server needed)
NESTED = {"$ref": "#/$defs/Nested"}
NESTED_DEFS = {"Nested": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/Nested"}}]}}


def test_a_self_referencing_schema_is_typed_to_where_it_repeats() -> None:
    from planbook.mcp.schema import annotation, args_model, arguments

    ann = annotation(NESTED, NESTED_DEFS)  # raised RecursionError
    model, _, notes = args_model("t", arguments({"properties": {"tree": NESTED}, "required": ["tree"],
                                                 "$defs": NESTED_DEFS})[0])
    assert model.model_validate({"tree": ["a", ["b", ["c"]]]}).tree == ["a", ["b", ["c"]]]
    assert notes == [] and ann is not None
    # the old "definitions" spelling, and a schema nested past any real one's depth
    assert annotation({"$ref": "#/definitions/N"}, {"N": {"type": "array", "items": {"$ref": "#/definitions/N"}}})
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(5000):
        deep = {"type": "array", "items": deep}
    assert annotation(deep) is not None


def test_an_enum_of_lists_or_objects_is_any_and_an_enum_of_scalars_still_a_literal() -> None:
    from planbook.mcp.schema import annotation

    assert annotation({"enum": [[1, 2], [3, 4]]}) is Any  # raised TypeError (unhashable list)
    assert annotation({"const": {"a": 1}}) is Any
    assert str(annotation({"enum": ["a", 1]})) == "typing.Literal['a', 1]"


def test_any_argument_name_is_an_argument_under_its_own_name() -> None:
    from planbook.mcp.schema import args_model, arguments

    names = ("from", "_x", "model_dump", "json", "a-b")
    args, notes = arguments({"properties": {n: {"type": "integer"} for n in names}, "required": ["from", "_x"]})
    model, attrs, refused = args_model("t", args)
    assert [a.name for a in args][:2] == ["from", "_x"] and notes == refused == []
    assert attrs["_x"] != "_x" and attrs["a-b"] != "a-b"  # not pydantic fields: fields with aliases
    value = model.model_validate({"from": "1", "_x": "2", "model_dump": 3, "json": 4, "a-b": 5})
    assert {name: value.__dict__[attr] for name, attr in attrs.items()} == {
        "from": 1, "_x": 2, "model_dump": 3, "json": 4, "a-b": 5}


def test_a_schema_whose_properties_cannot_be_read_takes_any_arguments_and_says_so() -> None:
    from planbook.mcp.client import MCPTool
    from planbook.mcp.schema import arguments

    assert arguments({"properties": ["a"]}) == ([], [
        "its input schema's properties are a list, not a JSON object, so its arguments are not checked"])
    tool = MCPTool(lambda **kw: kw, name="loose", mcp_name="loose", description="", hints=None, cache=False,
                   input_schema={"type": "object", "properties": ["a"]})  # raised AttributeError
    assert tool.untyped and tool.validate({"any": [1], "at": "all"}) == []
    assert tool.coerce({"any": [1]}) == {"any": [1]}
    typed = MCPTool(lambda **kw: kw, name="typed", mcp_name="typed", description="", hints=None, cache=False,
                    input_schema={"type": "object", "properties": {"a": {"type": "integer"}}})
    assert typed.untyped == []
    assert typed.validate({"b": 1}) == ["tool 'typed' has no argument 'b' (it takes a: Optional[int])"]


# ---------------------------------------------------------------- a server with odd tools
ODD_SERVER = '''
import sys
import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

NESTED_DEFS = {"Nested": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/Nested"}}]}}
TOOLS = [
    {"name": "tree", "description": "A self-referencing argument.",
     "input_schema": {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Nested"}}, "required": ["tree"],
                      "$defs": NESTED_DEFS}},
    {"name": "choose", "description": "An enum of lists.",
     "input_schema": {"type": "object", "properties": {"pair": {"enum": [[1, 2], [3, 4]]}}, "required": ["pair"]}},
    {"name": "move", "description": "Arguments Python cannot name.",
     "input_schema": {"type": "object", "required": ["from", "to", "_x"],
                      "properties": {"from": {"type": "string"}, "to": {"type": "string"}, "class": {"type": "string"},
                                     "in": {"type": "string"}, "_x": {"type": "integer"}}}},
    {"name": "echo", "description": "An ordinary tool.",
     "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]
if "clash" in sys.argv:  # two names that are one name in plans
    TOOLS += [{"name": "get-it", "input_schema": {"type": "object"}},
              {"name": "get_it", "input_schema": {"type": "object"}}]


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(**spec) for spec in TOOLS])


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)],
                                structured_content={"tool": params.name, "got": dict(params.arguments or {})})


server = Server("odd", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
'''


@pytest.fixture(scope="module")
def odd_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAVE_SDK:
        pytest.skip("needs the mcp extra")
    path = tmp_path_factory.mktemp("odd") / "odd_server.py"
    path.write_text(ODD_SERVER)
    return path


@needs_sdk
def test_a_server_with_odd_tool_schemas_keeps_every_tool_and_each_one_works(odd_script: Path) -> None:
    from planbook.mcp import connect

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # these schemas are all readable: not even a warning
        box = connect([sys.executable, str(odd_script)], replace=False)
    with box:
        assert sorted(box) == ["choose", "echo", "move", "tree"]
        spec = textwrap.dedent("""\
            steps:
              - {id: t, tool: tree, args: {tree: [a, [b, [c]]]}}
              - {id: c, tool: choose, args: {pair: [3, 4]}}
              - {id: m, tool: move, args: {from: here, to: there, class: first, in: box, _x: "7"}}
              - {id: e, tool: echo, args: {text: hi}}
        """)
        result = planbook.run(spec, tools=box)
        assert result.ok, result
        assert result.outputs["t"]["got"] == {"tree": ["a", ["b", ["c"]]]}
        assert result.outputs["c"]["got"] == {"pair": [3, 4]}
        # the server's own names reach it; "7" was checked and coerced to the schema's integer
        assert result.outputs["m"]["got"] == {"from": "here", "to": "there", "class": "first", "in": "box", "_x": 7}
        assert result.outputs["e"]["got"] == {"text": "hi"}
        # the odd names are still checked before a plan runs, under their own names
        with pytest.raises(PlanError) as caught:
            planbook.run("steps:\n  - {id: m, tool: move, args: {from: here, _x: many, to_: x}}", tools=box)
        text = str(caught.value)
        assert "argument '_x' of tool 'move' expects int, got 'many'" in text
        assert "tool 'move' needs argument 'to' (str)" in text
        assert "tool 'move' has no argument 'to_'" in text
        # called from Python, a mapping reaches the server as it is
        assert box["move"](**{"from": "a", "to": "b", "_x": 1})["got"] == {"from": "a", "to": "b", "_x": 1}
        assert "from" not in str(box["move"].fn.__signature__)  # help() shows what Python can spell, then **_others


@needs_sdk
def test_a_tool_whose_name_clashes_in_plans_is_skipped_with_a_warning_and_the_others_work(odd_script: Path) -> None:
    from planbook.mcp import connect

    with warnings.catch_warnings(record=True) as caught_warnings:
        warnings.simplefilter("always")
        box = connect([sys.executable, str(odd_script), "clash"], replace=False)  # raised MCPError: no tool at all
    assert any(f"skipped the MCP tool 'get_it' of {box.server}: its name in plans, 'get_it', is already the name of "
               "its tool 'get-it'; the other tools work" == str(w.message) for w in caught_warnings), caught_warnings
    with box:
        assert sorted(box) == ["choose", "echo", "get_it", "move", "tree"]
        assert box["get_it"].mcp_name == "get-it"
        assert box["echo"](text="x")["got"] == {"text": "x"}


# ---------------------------------------------------------------- start_timeout is a deadline
SILENT_SERVER = '''
import os, signal, sys, time
if "stubborn" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
print("silent server up", file=sys.stderr, flush=True)
time.sleep(3600)  # never reads its stdin, never answers initialize
'''

PAGING_SERVER = '''
import os, sys
import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))


async def list_tools(ctx, params):
    page = int(params.cursor) if params is not None and params.cursor else 0
    await anyio.sleep(0.02)  # a page at a time, without taking a shared machine's CPU
    tool = types.Tool(name=f"tool_{page}", input_schema={"type": "object"})
    last = "endless" not in sys.argv and page == 2
    # endless: every page points to another
    return types.ListToolsResult(tools=[tool], next_cursor=None if last else str(page + 1))


server = Server("endless", version="1", on_list_tools=list_tools)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
'''


def _read_pid(path: Path) -> int:
    """The pid the server wrote (it wrote it at its start, before the deadline ran out)."""
    text = path.read_text() if path.exists() else ""
    assert text, "the server did not write its pid"
    return int(text)


@pytest.mark.slow
@needs_sdk
@pytest.mark.parametrize("kind", ["silent", "stubborn"])  # stubborn: ignores SIGTERM too
def test_a_server_that_never_answers_initialize_is_given_up_at_the_deadline_and_ended(kind: str,
                                                                                      tmp_path: Path) -> None:
    from planbook import MCPError
    from planbook.mcp import connect

    script, pidfile = tmp_path / "silent.py", tmp_path / "silent.pid"
    script.write_text(SILENT_SERVER)
    began = time.monotonic()
    with pytest.raises(MCPError) as caught:
        connect([sys.executable, str(script), str(pidfile), kind], start_timeout=3, replace=False)
    took = time.monotonic() - began
    message = str(caught.value)
    assert "silent.py" in message and "did not start within start_timeout=3 s" in message
    assert "waiting for its answer to initialize" in message and "start_timeout=SECONDS" in message
    assert "silent server up" in message  # its stderr, to see why
    assert gone(_read_pid(pidfile))  # the process was ended and reaped before the error was raised
    assert took < 15, f"gave up after {took:.1f} s for a 3 s start_timeout (it waited 15 s more before)"


@pytest.mark.slow
@needs_sdk
def test_a_server_that_pages_its_tool_list_for_ever_is_given_up_at_the_deadline_and_ended(tmp_path: Path) -> None:
    from planbook import MCPError
    from planbook.mcp import connect

    script, pidfile = tmp_path / "paging.py", tmp_path / "paging.pid"
    script.write_text(PAGING_SERVER)
    began = time.monotonic()
    with connect([sys.executable, str(script), str(pidfile)], replace=False) as finite:  # three pages, then the end
        assert sorted(finite) == ["tool_0", "tool_1", "tool_2"]
    # a deadline the start itself fits in several times over on this machine now (the SDK's
    # import is most of it), so the endless server is given up while it pages
    deadline = round(min(15.0, max(3.0, 5 * (time.monotonic() - began))))
    with pytest.raises(MCPError) as caught:
        connect([sys.executable, str(script), str(pidfile), "endless"], start_timeout=deadline, replace=False)
    message = str(caught.value)
    assert "paging.py" in message and f"did not start within start_timeout={deadline} s" in message
    assert "listing its tools:" in message and "each page pointing to a next one" in message
    assert gone(_read_pid(pidfile))


@needs_sdk
@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True])
def test_a_start_timeout_that_is_not_seconds_is_refused_before_anything_starts(bad: Any, tmp_path: Path) -> None:
    from planbook.mcp import connect

    script = tmp_path / "never_started.py"
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    with pytest.raises(ValueError, match=r"start_timeout=\.\.\.\): .* a number above 0"):
        connect([sys.executable, str(script)], start_timeout=bad, replace=False)
    with pytest.raises(ValueError, match=r"call_timeout=\.\.\.\): .* a number above 0, or None"):
        connect([sys.executable, str(script)], call_timeout=bad, replace=False)
    assert not (tmp_path / "ran").exists()
