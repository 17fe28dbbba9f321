"""MCP servers as toolboxes, against real servers from the package index (mcp-server-time,
mcp-server-git) driven by the official SDK: typed tools, plan checks before a run, parallel
steps, server errors and a killed server as failed steps, one server per re-run cell, and no
server process left after close() or after a real kernel shuts down."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Literal, Optional

import pytest

import planbook
from planbook import PlanError, Toolbox
from planbook.mcp.schema import signature

HAVE_SERVERS = all(importlib.util.find_spec(m) for m in ("mcp", "mcp_server_time", "mcp_server_git"))
needs_servers = pytest.mark.skipif(not HAVE_SERVERS, reason='needs the test-mcp extra: pip install -e ".[test-mcp]" '
                                   "(mcp 2.3 needs pydantic>=2.12, above the lowest versions job's pins)")
TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, within: float = 60.0) -> bool:
    """Whether ``pid`` ends within ``within`` s (checked as it happens, not after a fixed sleep)."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def time_servers() -> list[int]:
    """Live mcp_server_time processes started by this process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"mcp_server_time" in cmd and int(stat[1]) == os.getpid() and stat[0] != "Z":
            found.append(int(entry))
    return found


# ---------------------------------------------------------------- schemas (no server needed)
def test_a_json_schema_becomes_a_typed_signature() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"}, "count": {"type": "integer"}, "ratio": {"type": "number"},
            "force": {"type": "boolean"}, "files": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object"}, "mode": {"enum": ["fast", "slow"]},
            "note": {"type": ["string", "null"]}, "when": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "depth": {"type": "integer", "default": 3},
        },
        "required": ["path", "count", "ratio", "force", "files", "meta", "mode", "note", "when"],
    }
    sig, ann = signature("t", schema)
    assert ann == {"path": str, "count": int, "ratio": float, "force": bool, "files": list[str],
                   "meta": dict[str, Any], "mode": Literal["fast", "slow"],
                   "note": Optional[str], "when": Optional[int], "depth": int}
    assert sig.parameters["depth"].default == 3
    assert list(sig.parameters)[-1] == "depth"  # required ones first
    with pytest.raises(ValueError, match="not a Python identifier"):
        signature("t", {"properties": {"max-count": {"type": "integer"}}})


def test_merging_toolboxes_refuses_a_name_clash_and_prefixes_resolve_it() -> None:
    a, b = Toolbox(), Toolbox()

    @a.tool
    def status() -> str:
        """A."""
        return "a"

    @b.tool(name="status")
    def other() -> str:
        """B."""
        return "b"

    with pytest.raises(ValueError, match=r"two toolboxes have a tool named 'status'.*prefixes"):
        planbook.run("steps:\n  - {id: s, tool: status}", tools=[a, b])
    merged = Toolbox.merge(a, b, prefixes=["a_", "b_"])
    assert sorted(merged) == ["a_status", "b_status"]
    assert merged["b_status"].name == "b_status" and a["status"].name == "status"  # the originals keep their names
    assert planbook.run("steps:\n  - {id: s, tool: b_status}", tools=merged).outputs["s"] == "b"


# ---------------------------------------------------------------- real servers
@pytest.fixture(scope="module")
def clock():
    if not HAVE_SERVERS:
        pytest.skip("needs the test-mcp extra")
    from planbook.mcp import connect

    box = connect(TIME)
    yield box
    box.close()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "notes.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "notes.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "first"], check=True, env=env)
    (path / "notes.txt").write_text("hello again\n")
    return path


@needs_servers
def test_a_servers_tools_are_listed_with_their_descriptions_and_typed_arguments(clock) -> None:
    assert sorted(clock) == ["convert_time", "get_current_time"]
    convert = clock["convert_time"]
    assert convert.description == "Convert time between timezones"
    assert {n: f.annotation for n, f in convert.args_model.model_fields.items()} == {
        "source_timezone": str, "time": str, "target_timezone": str}
    assert convert.parameters["required"] == ["source_timezone", "time", "target_timezone"]  # the server's schema
    # read-only and idempotent by the server's hints, yet never cached unless asked: the hints
    # do not mean "same answer" (get_current_time carries both)
    assert (convert.cache, convert.idempotent, convert.destructive) == (False, True, False)
    assert clock.pid is not None and alive(clock.pid)


@needs_servers
def test_a_wrong_argument_is_a_plan_error_before_anything_runs(clock) -> None:
    spec = textwrap.dedent("""\
        steps:
          - {id: a, tool: convert_time, args: {source_timezone: 5, time: "12:00", target_timezone: Asia/Tokyo}}
          - {id: b, tool: convert_tme, args: {timezone: UTC}}
          - {id: c, tool: get_current_time, args: {}}
    """)
    with pytest.raises(PlanError) as caught:
        planbook.run(spec, tools=clock)
    text = str(caught.value)
    assert "argument 'source_timezone' of tool 'convert_time' expects str, got 5" in text
    assert "did you mean 'convert_time'" in text
    assert "tool 'get_current_time' needs argument 'timezone' (str)" in text


@needs_servers
def test_a_three_step_plan_runs_in_parallel_over_two_servers(clock, repo: Path) -> None:
    from planbook.mcp import connect

    with connect([sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]) as git:
        assert {"git_status", "git_log", "git_diff_unstaged"} <= set(git)
        spec = textwrap.dedent(f"""\
            steps:
              - {{id: tokyo, tool: convert_time, args: {{source_timezone: UTC, time: "12:00", target_timezone: Asia/Tokyo}}}}
              - {{id: status, tool: git_status, args: {{repo_path: "{repo}"}}}}
              - {{id: diff, tool: git_diff_unstaged, args: {{repo_path: "{repo}"}}, needs: [status, tokyo]}}
        """)
        result = planbook.run(spec, tools=[clock, git], parallel=2)
        assert (result.status, result.reason) == ("completed", "goal_met"), result
        assert result.outputs["tokyo"]["time_difference"] == "+9.0h"
        assert result.outputs["tokyo"]["target"]["datetime"].endswith("T21:00:00+09:00")
        assert "notes.txt" in str(result.outputs["status"])
        assert "+hello again" in str(result.outputs["diff"])
        workers = {e.data["worker"] for e in result.events if e.kind == "step.started"}
        assert workers != {"main"}  # the calls ran on worker threads, sharing each server's session
    assert git.closed


@needs_servers
def test_a_server_side_error_is_a_failed_step_with_the_servers_message(clock) -> None:
    spec = 'steps:\n  - {id: a, tool: convert_time, args: {source_timezone: Nowhere/Land, time: "12:00", target_timezone: UTC}}'
    result = planbook.run(spec, tools=clock)
    step = result.plan.step("a")
    assert (result.status, step.status.value) == ("failed", "failed")
    assert "reported an error" in step.error and "Invalid timezone" in step.error and "Nowhere/Land" in step.error
    assert "convert_time" in clock.server_log  # the server's stderr is kept, not lost in a terminal


@needs_servers
def test_a_server_killed_mid_run_fails_the_next_step_with_a_clear_message() -> None:
    from planbook.mcp import connect

    box = connect(TIME, replace=False)
    pid = box.pid
    assert pid is not None
    local = Toolbox()

    @local.tool
    def kill_server() -> str:
        """Kills the MCP server and waits until it is gone."""
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid)
        return "killed"

    spec = textwrap.dedent("""\
        steps:
          - {id: first, tool: convert_time, args: {source_timezone: UTC, time: "08:00", target_timezone: UTC}}
          - {id: kill, tool: kill_server, needs: [first]}
          - {id: after, tool: convert_time, args: {source_timezone: UTC, time: "09:00", target_timezone: UTC}, needs: [kill]}
    """)
    try:
        result = planbook.run(spec, tools=[box, local])
    finally:
        box.close()
    assert [s.status.value for s in result.plan.steps] == ["completed", "completed", "failed"]
    error = result.plan.step("after").error
    assert f"pid {pid} has exited" in error and "MCPError" in error, error


@needs_servers
def test_connecting_again_leaves_one_server_and_close_leaves_none() -> None:
    from planbook.mcp import connect

    env = {"PLANBOOK_TEST_CASE": "rerun"}  # not the module's other connections to the same command
    first = connect(TIME, env=env)
    with pytest.warns(UserWarning, match="closed the earlier connection"):
        second = connect(TIME, env=env)  # a notebook cell run again
    assert first.closed and not alive(first.pid) and alive(second.pid)
    assert time_servers().count(second.pid) == 1 and first.pid not in time_servers()
    with pytest.raises(planbook.MCPError, match="is closed: connect again"):
        first["get_current_time"](timezone="UTC")
    second.close()
    assert wait_gone(second.pid, within=1.0) is True  # close() waited for the process itself
    second.close()  # twice is fine


@needs_servers
def test_mcp_results_are_not_cached_unless_asked(tmp_path: Path) -> None:
    from planbook.mcp import connect

    spec = 'steps:\n  - {id: a, tool: convert_time, args: {source_timezone: UTC, time: "10:00", target_timezone: UTC}}'
    store = tmp_path / "runs.sqlite"
    with connect(TIME, replace=False) as box:
        for _ in range(2):  # not even when the run asks for the cache
            result = planbook.run(spec, tools=box, store=store, cache=True)
            assert not [e for e in result.events if e.kind == "step.cached"]
    with connect(TIME, replace=False, cache=True) as box:
        planbook.run(spec, tools=box, store=store)
        again = planbook.run(spec, tools=box, store=store)
        assert [e.step for e in again.events if e.kind == "step.cached"] == ["a"]


@needs_servers
def test_a_server_that_cannot_start_is_an_error_naming_it(tmp_path: Path) -> None:
    from planbook import MCPError
    from planbook.mcp import connect

    with pytest.raises(MCPError, match="the MCP server no-such-mcp-server --x is not installed here"):
        connect(["no-such-mcp-server", "--x"])
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nprint('missing configuration: set FOO', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(MCPError, match="missing configuration: set FOO"):
        connect([sys.executable, str(crash)])
    with pytest.raises(ValueError, match="exactly one"):
        connect()
    with pytest.raises(ValueError, match="not an http"):
        connect(url="ftp://x")


@needs_servers
def test_plan_tools_magic_registers_a_server_and_a_rerun_leaves_one() -> None:
    from IPython.testing import globalipapp

    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "planbook")
    command = " ".join(TIME)
    ip.run_line_magic("plan_tools", f'clock --mcp "{command}"')
    first = ip.user_ns["clock"]
    ip.run_line_magic("plan_tools", f'clock --mcp "{command}"')  # the cell run again
    second = ip.user_ns["clock"]
    try:
        assert first.closed and not alive(first.pid) and alive(second.pid)
        ip.run_cell_magic("plan", "zones --tools clock",
                          'steps:\n  - {id: a, tool: convert_time, args: {source_timezone: UTC, time: "12:00", '
                          "target_timezone: Asia/Kolkata}}\n")
        result = ip.run_line_magic("run_plan", "zones --tools clock --no-view")
        assert result.outputs["a"]["time_difference"] == "+5.5h"
        from IPython.core.error import UsageError

        with pytest.raises(UsageError, match="--mcp"):
            ip.run_line_magic("plan_tools", "clock")
    finally:
        second.close()


@pytest.mark.slow
@needs_servers
def test_cli_run_with_mcp_servers(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text('steps:\n  - {id: tokyo, tool: convert_time, args: {source_timezone: UTC, time: "12:00", '
                    "target_timezone: Asia/Tokyo}}\n")
    env = {**os.environ, "PYTHONPATH": str(Path(planbook.__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-m", "planbook.cli", "run", str(plan), "--mcp", " ".join(TIME),
                           "--plain", "--no-store"], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "'time_difference': '+9.0h'" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "planbook.cli", "run", str(plan), "--mcp", "no-such-mcp-server",
                          "--plain", "--no-store"], capture_output=True, text=True, env=env, timeout=180)
    assert bad.returncode == 2 and "the MCP server no-such-mcp-server is not installed here" in bad.stderr
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("steps:\n  - {id: now, tool: get_current_time, args: {timezone: 5}}\n")
    checked = subprocess.run([sys.executable, "-m", "planbook.cli", "check", str(wrong), "--mcp", " ".join(TIME)],
                             capture_output=True, text=True, env=env, timeout=180)
    assert checked.returncode == 2
    assert "argument 'timezone' of tool 'get_current_time' expects str, got 5" in checked.stderr


@pytest.mark.slow
@needs_servers
def test_no_server_is_left_after_a_real_kernel_shuts_down() -> None:
    from tests.helpers import Kernel

    kernel = Kernel()
    try:
        code = (f"import planbook.mcp\nbox = planbook.mcp.connect({TIME!r})\n"
                "box2 = planbook.mcp.connect(" + repr(TIME) + ", replace=False)\nprint('PIDS', box.pid, box2.pid)")
        reply, messages = kernel.execute(code, timeout=180)
        assert reply["status"] == "ok", reply
        text = "".join(m["content"].get("text", "") for m in messages if m["msg_type"] == "stream")
        pids = [int(p) for p in text.split("PIDS", 1)[1].split()[:2]]
        assert all(alive(p) for p in pids)
    finally:
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)  # a shutdown request, as Lab's "Shut Down Kernel" sends
    assert all(wait_gone(p) for p in pids), [p for p in pids if alive(p)]


def _absolute_imports(path: Path, root: Path) -> list[str]:
    """Every module ``path`` imports (lazy ones in functions too), relative imports made absolute."""
    import ast

    package = ["planbook", *path.relative_to(root).parent.parts]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.append(module)
            found += [f"{module}.{a.name}" for a in node.names]
    return found


def test_neither_import_nor_load_ext_imports_mcp_or_opentelemetry_and_the_engine_never_does() -> None:
    code = ("import sys, planbook\nfrom IPython.testing import globalipapp\n"
            "globalipapp.get_ipython().run_line_magic('load_ext', 'planbook')\n"
            "print('imported:' + ','.join(m for m in ('mcp', 'opentelemetry', 'anyio', 'planbook.mcp', "
            "'planbook.otel') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(planbook.__file__).parent.parent)}).stdout
    # an older IPython's shell may write a terminal title before it: read the marked line only
    imported = [line.split("imported:", 1)[1] for line in out.splitlines() if "imported:" in line]
    assert imported == [""], f"imported at import time: {out!r}"
    root = Path(planbook.__file__).parent
    # the engine and every layer below it, by folder
    engine = [p for layer in ("data", "outbound", "store", "spec", "workers", "engine")
              for p in sorted((root / layer).rglob("*.py"))]
    assert len(engine) > 40, engine
    for path in engine:
        name = path.relative_to(root).as_posix()
        for mod in _absolute_imports(path, root):
            assert mod.split(".")[0] not in ("mcp", "opentelemetry"), f"planbook/{name} imports {mod}"
            assert not mod.startswith(("planbook.mcp", "planbook.otel")), f"planbook/{name} imports {mod}"


# ---------------------------------------------------------------- a server of our own (the SDK's MCPServer)
PROBE_SERVER = '''
import sys, time
from typing import Literal, Optional
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("probe")


class Picked(BaseModel):
    mode: str
    note: Optional[str]
    count: int


@server.tool()
def slow(seconds: float) -> str:
    """Sleeps."""
    print("sleeping", flush=True, file=sys.stderr)
    time.sleep(seconds)
    return "slept"


@server.tool()
def pick(mode: Literal["fast", "slow"], note: Optional[str] = None, count: int = 1) -> Picked:
    """Echoes its arguments (as structured content)."""
    return Picked(mode=mode, note=note, count=count)


if sys.argv[1:2] == ["http"]:
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
else:
    server.run()
'''


@pytest.fixture(scope="module")
def probe_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAVE_SERVERS:
        pytest.skip("needs the test-mcp extra")
    path = tmp_path_factory.mktemp("probe") / "probe_server.py"
    path.write_text(PROBE_SERVER)
    return path


@needs_servers
def test_enums_and_optional_arguments_are_checked_and_sent_as_given(probe_script: Path) -> None:
    from planbook.mcp import connect

    with connect([sys.executable, str(probe_script)]) as probe:
        with pytest.raises(PlanError, match=r"argument 'mode' of tool 'pick' expects Literal\['fast', 'slow'\]"):
            planbook.run("steps:\n  - {id: a, tool: pick, args: {mode: medium}}", tools=probe)
        result = planbook.run("steps:\n  - {id: a, tool: pick, args: {mode: fast}}\n"
                              "  - {id: b, tool: pick, args: {mode: slow, note: hi, count: 3}}\n"
                              "  - {id: c, tool: slow, args: {seconds: 0}}", tools=probe)
        assert result.outputs["a"] == {"mode": "fast", "note": None, "count": 1}  # structured content
        assert result.outputs["b"] == {"mode": "slow", "note": "hi", "count": 3}
        # the SDK's servers give a str result as structured content {"result": ...}: kept as the
        # server declares it (its output schema), not unwrapped by guessing
        assert result.outputs["c"] == {"result": "slept"}
        assert (probe["pick"].cache, probe["pick"].destructive, probe["pick"].idempotent) == (False, True, False)


@pytest.mark.slow
@needs_servers
def test_a_step_timeout_gives_up_on_a_slow_call_and_ctrl_c_stops_a_call(probe_script: Path) -> None:
    from planbook.mcp import connect

    with connect([sys.executable, str(probe_script)]) as probe:
        result = planbook.run("steps:\n  - {id: a, tool: slow, args: {seconds: 60}}", tools=probe, step_timeout=1)
        assert result.plan.step("a").status.value == "failed"
        assert "did not finish within 1 s" in result.plan.step("a").error

        def interrupt_once_sleeping() -> None:
            deadline = time.monotonic() + 60
            while probe.server_log.count("sleeping") < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt_once_sleeping, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            probe["slow"](seconds=60)
        # the session is still good after both
        assert probe["pick"](mode="fast")["mode"] == "fast"


@needs_servers
def test_a_call_past_call_timeout_is_given_up_and_the_session_keeps_working(probe_script: Path) -> None:
    from planbook import MCPError
    from planbook.mcp import connect

    with connect([sys.executable, str(probe_script)], call_timeout=0.5) as probe:
        with pytest.raises(MCPError, match=r"MCP tool 'slow' on .* did not answer within 0.5 s"):
            probe["slow"](seconds=1)
        # the given-up call was cancelled on the session's loop, and the session still answers
        # (this server runs a tool inline, so the next answer waits for its sleep: no timeout here)
        assert probe._connection.call("pick", {"mode": "fast"}, None)["mode"] == "fast"


@needs_servers
def test_a_streamable_http_server_by_url(probe_script: Path) -> None:
    import socket
    import urllib.error
    import urllib.request

    from planbook.mcp import connect

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(probe_script), "http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:  # until it answers on its port
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except urllib.error.HTTPError:
                break  # it answered (a GET without a session is refused)
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the HTTP server did not start"
                time.sleep(0.05)
        with connect(url=f"http://127.0.0.1:{port}/mcp") as remote:
            assert sorted(remote) == ["pick", "slow"] and remote.pid is None
            result = planbook.run("steps:\n  - {id: a, tool: pick, args: {mode: slow}}", tools=remote)
            assert result.outputs["a"]["mode"] == "slow"
        # with headers, planbook hands the SDK an HTTP client made with the SDK's own settings
        # (timeouts for long calls) and closes it with the session
        with connect(url=f"http://127.0.0.1:{port}/mcp", headers={"X-Planbook-Test": "1"}) as remote:
            assert planbook.run("steps:\n  - {id: a, tool: pick, args: {mode: slow}}", tools=remote).ok
            client = remote._connection.http_client
            assert client is not None and client.timeout.read is not None and client.timeout.read > 5
        assert client.is_closed
    finally:
        server.terminate()
        server.wait(30)


@needs_servers
def test_a_server_in_the_kernels_environment_is_found_without_an_activated_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A virtualenv's Jupyter started without activating the env has the env's bin off PATH."""
    import os
    import shutil

    from planbook.mcp.client import server_program

    if shutil.which("mcp-server-time", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("mcp-server-time is not installed beside this interpreter")
    monkeypatch.setenv("PATH", os.defpath)
    assert shutil.which("mcp-server-time") is None or os.path.dirname(shutil.which("mcp-server-time")) != os.path.dirname(sys.executable)
    found = server_program("mcp-server-time")
    assert os.path.dirname(found) == os.path.dirname(sys.executable)
    from planbook.mcp import connect

    with connect("mcp-server-time --local-timezone UTC") as tools:
        assert "get_current_time" in tools
    assert server_program("no-such-mcp-server-xyz") == "no-such-mcp-server-xyz"  # left for the OS to report


@needs_servers
def test_a_tool_the_server_marks_destructive_waits_for_a_decision(tmp_path: Path) -> None:
    """mcp-server-git marks git_reset destructive: a run that would call it asks first."""
    from planbook import Decision, run
    from planbook.mcp import connect

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with connect([sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]) as git:
        assert git["git_reset"].approve and not git["git_status"].approve and not git["git_log"].approve
        asked: list[str] = []

        def decide(step: Any, context: Any) -> Decision:
            asked.append(step.id)
            return Decision.skip("not today")

        plan = (f"steps:\n  - {{id: st, tool: git_status, args: {{repo_path: '{repo}'}}}}\n"
                f"  - {{id: rs, tool: git_reset, args: {{repo_path: '{repo}'}}}}\n")
        assert run(plan.split("  - {id: rs")[0], tools=git).ok  # read-only tools run unasked
        with pytest.raises(Exception, match="rs|git_reset") as refused:
            run(plan, tools=git)  # nobody can answer a foreground run: refused before anything runs
        assert "approve" in str(refused.value)
        result = run(plan, tools=git, approve=decide)
        assert "rs" in asked and result.plan.step("rs").status == "skipped"
    with connect([sys.executable, "-m", "mcp_server_git", "--repository", str(repo)], approve=False) as git:
        assert not git["git_reset"].approve
    with pytest.raises(TypeError, match="approve"):
        connect([sys.executable, "-m", "mcp_server_git", "--repository", str(repo)], approve="yes")  # type: ignore[arg-type]
