"""The MCP server's ``fork_run`` and ``diff_runs``: the server's own calls (counted tool calls on
two 10-step chains and a join, errors as error answers, secrets masked at the one exit), and
one session of the official SDK client over stdio."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook import Toolbox
from planbook.cli.mcpserve import PlanbookServer

CALLS: list[tuple[Any, ...]] = []
BOX = Toolbox()


@BOX.tool
def inc(x: int) -> int:
    """One more (counted)."""
    CALLS.append(("inc", x))
    return x + 1


@BOX.tool
def join(a: int, b: int) -> int:
    """The chains' ends added (counted)."""
    CALLS.append(("join", a, b))
    return a + b


@BOX.tool
def echo_token(token: str) -> str:
    """Says what it was given (a careless tool: the gate must hide it)."""
    return f"the token is {token}"


def chains_spec(n: int = 10) -> str:
    steps: list[dict[str, Any]] = []
    for chain in "ab":
        for i in range(1, n + 1):
            steps.append({"id": f"{chain}{i}", "tool": "inc", "args": {"x": 0 if i == 1 else f"${chain}{i - 1}"}})
    steps.append({"id": "join", "tool": "join", "args": {"a": f"$a{n}", "b": f"$b{n}"}})
    return json.dumps({"id": "chains", "goal": "two chains and a join", "steps": steps})


@pytest.fixture
def app(tmp_path: Path) -> PlanbookServer:
    server = PlanbookServer(tools=BOX, store=str(tmp_path / "runs.sqlite"))
    text, structured, error = server.call("run_plan", {"spec": chains_spec(), "max_steps": 100})
    assert not error, text
    CALLS.clear()
    return server


def test_fork_run_runs_one_chain_and_the_join_and_diff_runs_compares(app: PlanbookServer) -> None:
    parent = planbook.runs(store=app.store)[0].run_id
    text, forked, error = app.call("fork_run", {"run": "chains", "at": "a1", "args": {"x": 5}})
    assert not error, text
    assert len(CALLS) == 11 and not any(c[0] == "inc" and c[1] < 5 for c in CALLS)  # chain b: 0 calls
    assert forked["outputs"] == {"join": 25} and forked["parent"] == parent and forked["status"] == "completed"
    assert text.startswith(f"fork of run {parent} at a1 — x: 0 → 5; kept 10, re-running 11")
    assert forked["lineage"]["kept"] == 10 and forked["lineage"]["edit"] == {"a1": {"x": ["0", "5"]}}
    CALLS.clear()
    text, pinned, error = app.call("fork_run", {"run": parent, "at": "a1", "result": 41})
    assert not error and len(CALLS) == 10 and pinned["outputs"] == {"join": 60}
    text, diff, error = app.call("diff_runs", {"runs": [parent, forked["run_id"]], "changed_only": True})
    assert not error and "first at a1" in text
    assert diff["first_divergence"] == "a1" and diff["changed"] and not diff["regressed"]
    assert [row["step"] for row in diff["rows"]] == [f"a{i}" for i in range(1, 11)] + ["join"]
    text, same, error = app.call("diff_runs", {"runs": [parent, parent]})
    assert not error and same["first_divergence"] is None and "identical" in text


@pytest.mark.parametrize("args, says", [
    ({"run": "nope", "at": "a1"}, "no run or plan 'nope'"),
    ({"run": "chains", "at": "a11", "args": {"x": 1}}, "did you mean"),
    ({"run": "chains", "at": "a1", "args": {"x": 1}, "result": 3}, "args= and result= cannot go together"),
    ({"run": "chains", "at": "a1", "args": {"x": "five"}}, "expects int"),
    ({"run": "chains", "at": "a1", "args": [1]}, "`args` is an object"),
    ({"at": "a1"}, "fork_run needs `run`"),
])
def test_fork_run_bad_input_is_an_error_answer_and_creates_nothing(app: PlanbookServer, args: dict[str, Any],
                                                                   says: str) -> None:
    before = [r.run_id for r in planbook.runs(store=app.store)]
    text, structured, error = app.call("fork_run", args)
    assert error and says in text and structured is None and "\n" not in text.strip(), text
    assert [r.run_id for r in planbook.runs(store=app.store)] == before and CALLS == []


def test_diff_runs_bad_input_is_an_error_answer(app: PlanbookServer) -> None:
    for args, says in (({"runs": ["chains"]}, "two or more runs"), ({"runs": "chains"}, "a list of two or more"),
                       ({"runs": ["chains", "nope"]}, "no run or plan 'nope'")):
        text, structured, error = app.call("diff_runs", args)
        assert error and says in text, text


def test_a_secret_given_to_fork_run_is_masked_in_every_answer_and_the_store(tmp_path: Path) -> None:
    canary = "CANARYfk7Qm2Zr9LxW"
    known = "CANARYkn4Vb8Tq1PsY"
    planbook.Secret(known, name="fork-known")  # a value the vault knows, given under a name that is not secret
    app = PlanbookServer(tools=BOX, store=str(tmp_path / "runs.sqlite"))
    spec = "id: sec\nsteps:\n  - {id: s1, tool: echo_token, args: {token: first-value}}\n"
    answers = [app.call("run_plan", {"spec": spec})]
    answers.append(app.call("fork_run", {"run": "sec", "at": "s1", "args": {"token": canary}}))
    answers.append(app.call("fork_run", {"run": "sec", "at": "s1", "result": f"pinned {known}"}))
    answers.append(app.call("fork_run", {"run": "sec", "at": "s1", "args": {"token": canary, "nope": known}}))
    ids = [r.run_id for r in planbook.runs(store=app.store)]
    answers.append(app.call("diff_runs", {"runs": list(reversed(ids))}))
    answers.append(app.call("show_run", {"run_id": ids[0]}))
    answers.append(app.call("list_runs", {}))
    assert not answers[1][2] and "***" in answers[1][0] and answers[3][2]
    store_bytes = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("runs.sqlite"))
    for value in (canary, known):
        for where, text in (("answers", repr(answers)), ("store", store_bytes.decode("utf-8", "replace"))):
            assert value.lower() not in text.lower(), f"{value} in {where}"
            assert value[6:14].lower() not in text.lower(), f"a fragment of {value} in {where}"


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason='needs the mcp SDK: pip install -e ".[test-mcp]"')
def test_fork_run_and_diff_runs_over_stdio_with_the_sdk_client(tmp_path: Path) -> None:
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    (tmp_path / "chain_tools.py").write_text(
        "import planbook\nbox = planbook.Toolbox()\n\n@box.tool\ndef inc(x: int) -> int:\n    \"\"\"One more.\"\"\"\n"
        "    return x + 1\n\n@box.tool\ndef join(a: int, b: int) -> int:\n    \"\"\"Added.\"\"\"\n    return a + b\n")
    root = Path(planbook.__file__).parent.parent
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "planbook.cli", "mcp", "serve", "--tools", "chain_tools:box",
                                      "--store", str(tmp_path / "runs.sqlite")],
        env={"PYTHONPATH": f"{root}:{tmp_path}", "PLANBOOK_HOME": str(tmp_path)}, cwd=str(tmp_path))

    async def main() -> Any:
        with open(tmp_path / "server.log", "w") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = (await session.list_tools()).tools
                    await session.call_tool("run_plan", {"spec": chains_spec(), "max_steps": 100})
                    forked = await session.call_tool("fork_run", {"run": "chains", "at": "b1", "args": {"x": 3}})
                    ids = [r.run_id for r in planbook.runs(store=tmp_path / "runs.sqlite")]
                    diff = await session.call_tool("diff_runs", {"runs": [ids[1], ids[0]], "changed_only": True})
                    bad = await session.call_tool("fork_run", {"run": "chains", "at": "zz"})
                    return tools, forked, diff, bad

    tools, forked, diff, bad = anyio.run(main)
    by_name = {t.name: t for t in tools}
    assert by_name["fork_run"].input_schema["required"] == ["run"]
    assert by_name["diff_runs"].input_schema["properties"]["runs"]["minItems"] == 2
    assert not forked.is_error and forked.structured_content["outputs"] == {"join": 23}
    assert forked.structured_content["lineage"]["kept"] == 10
    assert not diff.is_error and diff.structured_content["first_divergence"] == "b1"
    assert bad.is_error and "has no step 'zz'" in bad.content[0].text
