"""Every run option has one owner (planbook.engine.config.OPTIONS): one default, one check,
one line of help. The Python API (run, Runner, start, resume), the command line's flags, the
MCP server's run_plan schema and the %run_plan magic agree with it on the name, the default
and what is accepted; a surface that wrote a default of its own, or took an option without
going through OPTIONS, fails here."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

import planbook
from planbook.cli.app import build_parser
from planbook.cli.mcpserve import RUN_OPTIONS, RUN_PLAN_SCHEMA, PlanbookServer
from planbook.cli.options import RUN_FLAGS, run_options
from planbook.engine.config import COLLABORATORS, DEFAULTS, OPTION, OPTIONS, RunConfig, json_properties
from planbook.notebook.magicargs import RUN_PLAN_OPTIONS, resolved_options
from planbook.notebook.magics import magics_of

SPEC = "steps:\n  - {id: a, tool: echo, args: {value: 1}}\n"

#: the options a surface leaves out, and why (each is still a keyword of run/Runner/start)
CLI_LEAVES_OUT = {"executor": "an object no flag can name",
                  "store": "the command line's own --store/--no-store: its runs are kept in the store file"}
MAGIC_LEAVES_OUT = {"store": "%plan_store: the notebook keeps runs in the store file",
                    "cache": "%run_plan's own --cache/--no-cache over %plan_store's choice"}
MCP_LEAVES_OUT = {"max_replans": "the server has no planner", "executor": "an object", "store": "the server's own",
                  "cache": "the server's store is its own", "strategy": "not offered to clients",
                  "faithful": "not offered to clients", "approve": "a client cannot answer a prompt",
                  "approve_timeout": "a client cannot answer a prompt"}
#: what resume() takes as options (the rest come from the stored run)
RESUME_TAKES = ("executor", "approve")

#: text for a flag → whether the run accepts it; the same value is given to the Python API
VALUES: list[tuple[str, str, Any, bool]] = [
    ("max_steps", "0", 0, True), ("max_steps", "-1", -1, False),
    ("max_replans", "0", 0, True), ("max_replans", "-1", -1, False),
    ("retries", "0", 0, True), ("retries", "-1", -1, False),
    ("parallel", "1", 1, True), ("parallel", "0", 0, False),
    ("step_timeout", "1.5", 1.5, True), ("step_timeout", "0", 0, False), ("step_timeout", "-2", -2, False),
    ("approve_timeout", "2", 2, True), ("approve_timeout", "0", 0, False),
    ("on_failure", "skip", "skip", True), ("on_failure", "explode", "explode", False),
]


def echo(value: Any) -> Any:
    return value


def _tools() -> planbook.Toolbox:
    box = planbook.Toolbox()
    box.add(echo, name="echo")
    return box


def _accepted_by_python(name: str, value: Any) -> bool:
    try:
        planbook.Runner(SPEC, tools=_tools(), **{name: value})
    except (ValueError, TypeError):
        return False
    return True


def test_every_keyword_of_a_run_is_an_option_or_a_collaborator() -> None:
    options = {o.name for o in OPTIONS}
    for fn in (planbook.run, planbook.Runner.__init__, planbook.start):
        params = set(inspect.signature(fn).parameters) - {"self", "view"}
        assert params == options | set(COLLABORATORS), fn
    assert not options & set(COLLABORATORS)


@pytest.mark.parametrize("fn", [planbook.run, planbook.Runner.__init__, planbook.start])
def test_the_signatures_take_their_defaults_from_the_options(fn: Any) -> None:
    params = inspect.signature(fn).parameters
    for option in OPTIONS:
        assert params[option.name].default is option.default or params[option.name].default == option.default, \
            (fn, option.name)
        assert getattr(DEFAULTS, option.name) == option.default


def test_a_config_built_from_nothing_is_built_from_the_defaults() -> None:
    assert RunConfig.build() == RunConfig.build(**{o.name: o.default for o in OPTIONS})
    with pytest.raises(TypeError, match="not a run option: max_step"):
        RunConfig.build(max_step=3)


def test_resume_takes_its_options_defaults_from_the_options() -> None:
    params = inspect.signature(planbook.resume).parameters
    for name in RESUME_TAKES:
        assert params[name].default == OPTION[name].default
    assert not (set(params) & set(OPTION)) - set(RESUME_TAKES) - {"store"}  # store: required, where the run is


def _cli_run_parser() -> Any:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["run"]


def test_the_command_line_flags_are_generated_from_the_options() -> None:
    run = _cli_run_parser()
    taken = {a.dest for a in run._actions if a.dest in OPTION}
    assert taken == set(RUN_FLAGS) | {"store"}  # --store is the command line's own, below
    assert set(RUN_FLAGS) | set(CLI_LEAVES_OUT) == set(OPTION)
    for action in run._actions:
        if action.dest in RUN_FLAGS and action.option_strings != ["--no-cache"]:
            option = OPTION[action.dest]
            assert action.default == option.default, action.dest
            assert action.help.replace("%%", "%").startswith(option.describe()), action.dest
            assert option.flag in action.option_strings
    defaults = run.parse_args(["plan.yaml"])
    assert run_options(defaults, RUN_FLAGS) == {name: OPTION[name].default for name in RUN_FLAGS}


@pytest.mark.parametrize(("name", "text", "value", "ok"), VALUES)
def test_the_command_line_accepts_what_the_python_api_accepts(name: str, text: str, value: Any, ok: bool) -> None:
    assert _accepted_by_python(name, value) is ok
    run = _cli_run_parser()
    try:
        args = run.parse_args(["plan.yaml", OPTION[name].flag, text])
        planbook.Runner(SPEC, tools=_tools(), **run_options(args, RUN_FLAGS))
    except (SystemExit, ValueError, TypeError):
        assert not ok
    else:
        assert ok


def test_the_mcp_schema_is_generated_from_the_options() -> None:
    properties = RUN_PLAN_SCHEMA["properties"]
    assert {k: v for k, v in properties.items() if k != "spec"} == json_properties(RUN_OPTIONS)
    assert set(RUN_OPTIONS) | set(MCP_LEAVES_OUT) == set(OPTION)
    for name in RUN_OPTIONS:
        option = OPTION[name]
        prop = properties[option.key]
        if option.kind == "whole":
            assert prop["minimum"] == option.minimum  # max_steps: 0, as the engine takes it
        assert prop["description"] == option.describe()


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the server's calls need no SDK, its module does")
@pytest.mark.parametrize(("name", "text", "value", "ok"), [v for v in VALUES if v[0] in RUN_OPTIONS])
def test_the_mcp_server_accepts_what_the_python_api_accepts(tmp_path: Path, name: str, text: str, value: Any,
                                                             ok: bool) -> None:
    server = PlanbookServer(tools=_tools(), store=str(tmp_path / "runs.sqlite"))
    text_out, structured, is_error = server.call("run_plan", {"spec": SPEC, OPTION[name].key: value})
    assert (structured is not None) is ok, text_out
    if not ok:
        assert is_error and OPTION[name].key in text_out  # the error names the option as the client gave it


def test_the_magic_flags_are_generated_from_the_options(ip: Any) -> None:
    magics = magics_of(ip)
    assert magics is not None
    parser = magics.run_plan.parser
    taken = {a.dest for a in parser._actions if a.dest in OPTION}
    assert taken == set(RUN_PLAN_OPTIONS) | {"cache"}
    assert set(RUN_PLAN_OPTIONS) | set(MAGIC_LEAVES_OUT) == set(OPTION)
    for action in parser._actions:
        if action.dest in RUN_PLAN_OPTIONS:
            option = OPTION[action.dest]
            # left out is None (not a copy of the default): a kept run tells "no options" from "the same"
            assert action.default is (False if option.kind == "flag" else None), action.dest
            assert action.help.replace("%%", "%").startswith(option.describe()), action.dest
            assert option.flag in action.option_strings
    assert resolved_options({}) == {name: OPTION[name].default for name in RUN_PLAN_OPTIONS}


@pytest.mark.parametrize(("name", "text", "value", "ok"), [v for v in VALUES if v[0] in RUN_PLAN_OPTIONS])
def test_the_magic_accepts_what_the_python_api_accepts(ip: Any, name: str, text: str, value: Any, ok: bool) -> None:
    ip.user_ns["option_tools"] = _tools()
    ip.user_ns["option_spec"] = SPEC
    background = " --background" if name.startswith("approve") else ""
    line = f"option_spec --tools option_tools --no-view --restart{background} {OPTION[name].flag} {text}"
    try:
        got = ip.run_line_magic("run_plan", line)
    except UsageError as exc:
        assert not ok, exc
        assert OPTION[name].flag in str(exc)  # said with the flag the user typed
    else:
        assert ok
        if background:
            got.wait(30)


NUMBERS = {o.name for o in OPTIONS if o.kind in ("whole", "seconds")}
#: where a run's options are taken, passed on or shown: no number written for them here
SURFACES_AND_ENGINE = ("engine", "cli", "notebook", "__init__.py")


def _copied_defaults(path: Path) -> list[str]:
    """Numbers written for a numeric option in ``path``: ``max_steps: int = 12``, ``max_steps=12``
    in a call or a signature, ``config.get("max_steps", 12)``."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs: list[tuple[str, Any]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs += list(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
            pairs += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        elif isinstance(node, ast.Call):
            pairs += [(k.arg, k.value) for k in node.keywords if k.arg]
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and len(node.args) == 2 \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                pairs.append((node.args[0].value, node.args[1]))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            pairs.append((node.target.id, node.value))
        for name, value in pairs:
            if name in NUMBERS and isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) \
                    and not isinstance(value.value, bool):
                found.append(f"{path.name}:{value.lineno}: {name} = {value.value!r}")
    return found


def test_no_surface_or_engine_module_writes_a_default_of_its_own() -> None:
    root = Path(planbook.__file__).parent
    paths = [p for part in SURFACES_AND_ENGINE for p in ((root / part).rglob("*.py") if (root / part).is_dir()
                                                         else [root / part])]
    assert len(paths) > 20
    found = [hit for path in paths if path.name != "config.py" for hit in _copied_defaults(path)]
    assert found == [], "write DEFAULTS.<option> (planbook.engine.config), not a number:\n" + "\n".join(found)


def test_the_scan_sees_a_copied_default(tmp_path: Path) -> None:
    copy = tmp_path / "surface.py"
    copy.write_text("def run(max_steps: int = 12): ...\nRunner(p, parallel=1)\nconfig.get('max_replans', 5)\n")
    assert len(_copied_defaults(copy)) == 3
