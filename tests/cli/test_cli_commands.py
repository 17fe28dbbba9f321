"""The command line is written as the ecosystem's CLIs are: one function per command and per MCP
tool, each found in one table, and what a command starts stopped in one place.

The shape is read with :mod:`ast` (no dispatch over command or tool names written as string
comparisons, no cleanup written twice); the tables are held against the parser and the tool
listing both ways; and the cleanup is watched working: each ``--mcp`` server stopped once,
a run's store closed when the command ends.
"""

from __future__ import annotations

import ast
import inspect
import os
from pathlib import Path
from typing import Any

import pytest

import planbook.cli.app as app
import planbook.cli.mcpserve as mcpserve
import planbook.mcp.client
from planbook.cli.app import COMMANDS, build_parser, main
from planbook.cli.mcpserve import TOOLS, PlanbookServer
from planbook.workers.tools import Toolbox

CLI = Path(app.__file__).parent


def _function(path: Path, name: str) -> ast.FunctionDef:
    """The function (or method) ``name`` defined in the module at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"{path.name} defines {name} {len(found)} times"
    return found[0]


def _name_dispatch(node: ast.AST) -> list[str]:
    """Comparisons of a value to a string literal (``x == "run"``, ``x in ("runs", "show")``)."""
    def literal(n: ast.AST) -> bool:
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            return bool(n.elts) and all(literal(e) for e in n.elts)
        return isinstance(n, ast.Constant) and isinstance(n.value, str)

    return [ast.unparse(n) for n in ast.walk(node)
            if isinstance(n, ast.Compare) and any(literal(side) for side in [n.left, *n.comparators])]


@pytest.mark.parametrize(("module", "function"), [(app, "_main"), (mcpserve, "call"), (mcpserve, "tool_specs")])
def test_no_dispatch_compares_a_name_to_string_literals(module: Any, function: str) -> None:
    found = _name_dispatch(_function(Path(module.__file__), function))
    assert found == [], f"{function} dispatches with if-chains: {found}; register a function in the table instead"


def test_the_check_finds_an_if_chain() -> None:
    planted = ast.parse('def _main(args):\n    if args.command == "run":\n        return 1\n'
                        '    elif args.command in ("runs", "show"):\n        return 2\n')
    assert _name_dispatch(planted) == ["args.command == 'run'", "args.command in ('runs', 'show')"]


@pytest.mark.parametrize("module", [app, mcpserve])
def test_nothing_in_the_module_compares_the_command_or_tool_name_to_a_literal(module: Any) -> None:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    found = [text for text in _name_dispatch(tree)
             if any(name in text for name in ("args.command", "args.mcp_command", "name =", "name !", "name in"))]
    assert found == [], f"dispatch by comparing names: {found}; look the name up in the table"


def _calls_of(path: Path, attribute: str) -> int:
    """How many times the module at ``path`` reads ``<something>.<attribute>`` (a call or a callback)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == attribute)


def test_the_cleanup_is_written_once() -> None:
    """The command line stops the ``--mcp`` servers and releases a run's store in one place each,
    registered with the one ExitStack ``_main`` holds (which is built once)."""
    assert _calls_of(CLI / "app.py", "close") == 1  # resources.callback(server.close)
    assert _calls_of(CLI / "app.py", "release_store") == 1  # resources.callback(runner.release_store)
    assert _built(CLI / "app.py", "ExitStack") == 1  # in _main
    for name in ("forking.py", "runs.py", "common.py", "options.py"):
        assert _calls_of(CLI / name, "release_store") == 0, f"{name} releases a store: leave it to the command"


def _built(path: Path, name: str) -> int:
    """How many times the module at ``path`` calls ``name(...)`` or ``<module>.name(...)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call)
               and (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)) == name)


# ------------------------------------------------------------------ the tables, both ways
def _subcommands() -> dict[str, Any]:
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


def test_every_command_of_the_parser_has_a_function_and_every_function_a_command() -> None:
    assert list(_subcommands()) == list(COMMANDS)
    for name, command in COMMANDS.items():
        assert callable(command), name
        assert list(inspect.signature(command).parameters) == ["args", "resources"], name


def test_every_listed_mcp_tool_has_a_function_and_every_tool_function_is_listed() -> None:
    listed = [spec["name"] for spec in PlanbookServer().tool_specs()]
    assert listed == list(TOOLS) == ["planning", "run_plan", "list_runs", "show_run", "fork_run", "diff_runs"]
    for name, tool in TOOLS.items():
        assert getattr(PlanbookServer, tool.handler.__name__) is tool.handler, name
    handlers = {tool.handler for tool in TOOLS.values()}
    shaped = [name for name, member in vars(PlanbookServer).items() if inspect.isfunction(member)
              and list(inspect.signature(member).parameters) == ["self", "args", "progress"]]
    unlisted = [name for name in shaped if vars(PlanbookServer)[name] not in handlers]
    assert unlisted == [], f"tool functions no tool lists: {unlisted}"


def test_the_listing_hands_out_copies_of_the_schemas() -> None:
    server = PlanbookServer()
    server.tool_specs()[1]["input_schema"]["properties"].clear()
    assert "spec" in server.tool_specs()[1]["input_schema"]["properties"]


# ------------------------------------------------------------------ unknown names stay clear errors
def test_an_unknown_command_names_itself_and_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["frobnicate"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "invalid choice: 'frobnicate'" in err and all(f"'{name}'" in err for name in COMMANDS)


def test_an_unknown_mcp_tool_names_itself_and_the_known_ones() -> None:
    text, structured, is_error = PlanbookServer().call("frobnicate", {})
    assert is_error and structured is None
    assert text == ("unknown tool 'frobnicate'; this server has planning, run_plan, list_runs, show_run, "
                    "fork_run, diff_runs")


# ------------------------------------------------------------------ the cleanup, working
class FakeServer:
    """What ``with_servers`` hands back for ``--mcp``: counts its closes."""

    def __init__(self) -> None:
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


SPEC = "steps:\n  - {id: a, tool: echo, args: {text: hi}}\n"


@pytest.mark.parametrize(("command", "spec", "code"), [
    ("run", SPEC, 0), ("run", "steps:\n  - {id: a, tool: nope}\n", 2),
    ("check", SPEC, 0), ("check", "steps:\n  - {id: a, tool: nope}\n", 2),
    ("run", None, 2), ("check", None, 2),
])
def test_each_mcp_server_a_command_started_is_stopped_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], command: str,
                                                           spec: str | None, code: int) -> None:
    servers = [FakeServer(), FakeServer()]
    box = Toolbox()

    @box.tool
    def echo(text: str) -> str:
        return text

    def with_servers(tools: Any, commands: Any, **_: Any) -> tuple[Toolbox, list[FakeServer]]:
        return box, servers

    monkeypatch.setattr(planbook.mcp.client, "with_servers", with_servers)
    plan = tmp_path / "plan.yaml"
    if spec is not None:  # None: the spec cannot be read, after the servers started
        plan.write_text(spec)
    argv = [command, str(plan), "--mcp", "one", "--mcp", "two"] + (["--no-store", "--plain"] if command == "run" else [])
    assert main(argv) == code, capsys.readouterr()
    assert [s.closes for s in servers] == [1, 1]


def test_a_run_closes_its_store_when_the_command_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """An open connection keeps the write-ahead log beside the store file: a command run in a
    process that goes on (a test, a script calling ``main``) must not leave it open."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cli36_tools.py").write_text("def echo(text: str) -> str:\n    return text\n\nbox = {'echo': echo}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plan.yaml").write_text(SPEC)
    store = tmp_path / "runs.sqlite"
    assert main(["run", "plan.yaml", "--tools", "cli36_tools:box", "--store", str(store), "--plain"]) == 0
    assert store.exists() and not os.path.exists(f"{store}-wal"), sorted(os.listdir(tmp_path))
    assert main(["fork", "plan", "--at", "a", "--set", "text=ho", "--tools", "cli36_tools:box",
                 "--store", str(store), "--plain"]) == 0
    assert not os.path.exists(f"{store}-wal"), sorted(os.listdir(tmp_path))
