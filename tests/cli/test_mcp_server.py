"""``planbook mcp serve`` driven by the official mcp SDK's own client over stdio: the tool list,
OpenManus's seven planning commands with their exact schema, run_plan with progress
notifications and outputs, and the run store."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import planbook
import planbook.cli.demo
from planbook.compat.openmanus import PlanningTool

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None,
                                reason='needs the mcp SDK: pip install -e ".[test-mcp]"')

SPEC = """steps:
  - {id: forecast, tool: get_forecast, args: {city: Lisbon, source: backup}}
  - {id: clothes, tool: pick_clothes, args: {forecast: $forecast}, needs: [forecast]}
"""


def serve_and(tmp_path: Path, work: Any) -> Any:
    """Start ``planbook mcp serve`` as a subprocess, open an SDK client session, run ``work(session)``."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "planbook.cli", "mcp", "serve", "--tools", "planbook.cli.demo:demo_tools",
              "--store", str(tmp_path / "runs.sqlite")],
        env={"PYTHONPATH": str(Path(planbook.__file__).parent.parent), "PLANBOOK_HOME": str(tmp_path)},
        cwd=str(tmp_path),
    )

    async def main() -> Any:
        with open(tmp_path / "server.log", "w") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await work(session)

    return anyio.run(main)


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_the_server_lists_its_tools_with_openmanus_exact_planning_schema(tmp_path: Path) -> None:
    async def work(session: Any) -> Any:
        return (await session.list_tools()).tools

    tools = serve_and(tmp_path, work)
    assert [t.name for t in tools] == ["planning", "run_plan", "list_runs", "show_run", "fork_run", "diff_runs"]
    planning = PlanningTool().to_param()["function"]
    assert tools[0].input_schema == planning["parameters"]
    assert tools[0].description == planning["description"]
    assert tools[1].input_schema["required"] == ["spec"]


def test_the_seven_planning_commands_over_mcp(tmp_path: Path) -> None:
    async def work(session: Any) -> list[Any]:
        calls = [
            {"command": "create", "plan_id": "trip", "title": "Trip", "steps": ["pack", "go"]},
            {"command": "update", "plan_id": "trip", "steps": ["pack", "go", "return"]},
            {"command": "create", "plan_id": "other", "title": "Other", "steps": ["x"]},
            {"command": "set_active", "plan_id": "trip"},
            {"command": "mark_step", "step_index": 0, "step_status": "completed", "step_notes": "done"},
            {"command": "get"},
            {"command": "list"},
            {"command": "delete", "plan_id": "other"},
            {"command": "list"},
            {"command": "mark_step", "plan_id": "trip", "step_index": 9, "step_status": "completed"},
            {"command": "fly"},
        ]
        return [await session.call_tool("planning", args) for args in calls]

    results = serve_and(tmp_path, work)
    texts = [text(r) for r in results]
    assert texts[0].startswith("Plan created successfully with ID: trip")
    assert "2. [ ] return" in texts[1]
    assert "Plan 'trip' is now the active plan" in texts[3]
    assert "0. [✓] pack" in texts[5] and "Notes: done" in texts[5]
    assert "trip (active)" in texts[6] and "other" in texts[6]
    assert "other" not in texts[8]
    assert [r.is_error for r in results[:9]] == [False] * 9
    assert results[9].is_error and "Invalid step_index: 9" in texts[9]
    assert results[10].is_error and "fly" in texts[10]


def test_run_plan_reports_progress_and_returns_outputs_then_the_store_shows_the_run(tmp_path: Path) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def work(session: Any) -> Any:
        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        ran = await session.call_tool("run_plan", {"spec": SPEC}, progress_callback=on_progress)
        bad = await session.call_tool("run_plan", {"spec": "steps:\n  - {id: a, tool: nope}"})
        listed = await session.call_tool("list_runs", {})
        shown = await session.call_tool("show_run", {})
        return ran, bad, listed, shown

    ran, bad, listed, shown = serve_and(tmp_path, work)
    assert not ran.is_error, text(ran)
    assert ran.structured_content["status"] == "completed"
    assert ran.structured_content["outputs"] == {"clothes": planbook.cli.demo.demo_tools["pick_clothes"](
        planbook.cli.demo.demo_tools["get_forecast"]("Lisbon", source="backup"))}
    assert "Run completed (goal_met)" in text(ran)
    assert progress == [(1.0, 2.0, "step forecast: finished"), (2.0, 2.0, "step clothes: finished")]
    assert bad.is_error and "unknown tool 'nope'" in text(bad) and "get_forecast" in text(bad)
    run_id = ran.structured_content["run_id"]
    assert run_id in text(listed) and "completed" in text(listed)
    assert "[✓]" in text(shown) and "forecast" in text(shown)
    assert os.path.exists(tmp_path / "runs.sqlite")


def test_run_plan_takes_whole_numbers_as_json_clients_send_them(tmp_path: Path) -> None:
    """JSON has one number type: a client may send parallel 2.0 (an integer to JSON Schema) or "2";
    the server always ran those. A fraction is still refused, naming the option."""
    from planbook.cli.mcpserve import PlanbookServer

    server = PlanbookServer(tools=planbook.cli.demo.demo_tools, store=str(tmp_path / "runs.sqlite"))
    for given in ({"parallel": 2.0}, {"parallel": "2"}, {"max_steps": 12.0}, {"max_steps": "12"}):
        said, structured, is_error = server.call("run_plan", {"spec": SPEC, **given})
        assert structured is not None and structured["status"] == "completed", (given, said)
    said, structured, is_error = server.call("run_plan", {"spec": SPEC, "parallel": 2.5})
    assert structured is None and is_error and "parallel" in said
