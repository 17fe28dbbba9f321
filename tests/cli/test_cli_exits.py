"""The command's stdout and stderr are one masking writer: a tool that prints a secret straight to
``sys.stderr`` (whole, in parts, as a repr), an error that quotes one, a traceback of a fault,
all leave the process as ``***``; no fragment of a secret is written before the rest is seen."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

import planbook
from planbook.cli.app import main
from planbook.cli.streams import MaskingStream, masked_streams

TOKEN = "canary-cli-Zq81Xv93LmPp"
ENV_TOKEN = "canary-env-Wk27Rt55NnQq"

TOOLS = '''
import sys
import planbook

box = planbook.Toolbox()

@box.tool
def leak(token: str) -> str:
    """Prints its token straight to stderr, whole, as a repr, and in two flushed parts."""
    sys.stderr.write("whole: " + token + "\\n")
    print("repr:", repr({"t": token}), file=sys.stderr)
    sys.stderr.write("parts: " + token[:11])
    sys.stderr.flush()
    sys.stderr.write(token[11:] + "\\n")
    return "done"
'''


def fragments(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def assert_clean(text: str, secret: str) -> None:
    leaked = [f for f in fragments(secret) if f in text]
    assert not leaked, f"fragments of the secret left the process: {leaked}\n{text}"


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    module = f"exit_tools_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(TOOLS)
    (tmp_path / "leak.yaml").write_text(f"steps:\n  - {{id: one, tool: leak, args: {{token: {TOKEN}}}}}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


def test_a_tool_that_prints_a_known_secret_to_stderr_prints_stars(project: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    module = f"exit_tools_{project.name.replace('-', '_')}"
    code = main(["run", "leak.yaml", "--tools", f"{module}:box", "--no-store", "--plain"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "whole: ***" in err and "parts: ***" in err and "repr: {'t': '***'}" in err
    assert_clean(out + err, TOKEN)


def test_an_error_that_quotes_a_secret_is_printed_masked(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLI_CANARY_TOKEN", ENV_TOKEN)
    planbook.Secret.env("CLI_CANARY_TOKEN")  # known to the process from now on
    (project / "broken_tools.py").write_text(
        "import os\nraise RuntimeError('cannot log in with ' + os.environ['CLI_CANARY_TOKEN'])\n")
    code = main(["run", "leak.yaml", "--tools", "broken_tools:box", "--no-store", "--plain"])
    out, err = capsys.readouterr()
    assert code == 2 and "cannot log in with ***" in err
    assert_clean(out + err, ENV_TOKEN)


def test_a_fault_no_command_expected_prints_its_traceback_masked(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import planbook.cli.app as app

    planbook.Secret(ENV_TOKEN, name="cli-fault")

    def broken(path: str) -> None:
        raise RuntimeError(f"the spec reader broke on {ENV_TOKEN}")

    monkeypatch.setattr(app, "read_spec", broken)
    code = main(["run", "leak.yaml", "--no-store", "--plain"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" in err and "RuntimeError: the spec reader broke on ***" in err
    assert_clean(out + err, ENV_TOKEN)


def test_a_secret_written_in_flushed_parts_leaves_no_fragment_before_it_is_whole() -> None:
    planbook.Secret(TOKEN, name="cli-parts")
    inner = io.StringIO()
    stream = MaskingStream(inner)  # type: ignore[arg-type]
    stream.write("a prompt? ")
    stream.flush()
    assert inner.getvalue() == "a prompt? "  # a flushed question is shown at once
    for cut in (3, 9, 17):
        stream.write(TOKEN[:cut])
        stream.flush()
        assert_clean(inner.getvalue(), TOKEN)
        stream.write(TOKEN[cut:] + " and more")
        stream.flush()
    stream.write(" tail" + TOKEN[:12])
    stream.close_out()  # the command ends: a secret's start never followed by its rest is ***
    assert inner.getvalue() == "a prompt? *** and more*** and more*** and more tail***"


def test_a_secret_with_a_line_break_is_masked_whole() -> None:
    secret = "first-line-Rk44\nsecond-line-Mv19"
    planbook.Secret(secret, name="cli-two-lines")
    inner = io.StringIO()
    stream = MaskingStream(inner)  # type: ignore[arg-type]
    print("key:", secret, "end", file=stream)
    stream.flush()
    assert "first-line" not in inner.getvalue()
    stream.close_out()
    assert inner.getvalue() == "key: *** end\n"


def test_the_streams_are_put_back_and_flushed_when_the_command_ends(capsys: pytest.CaptureFixture[str]) -> None:
    before = sys.stdout, sys.stderr
    with masked_streams():
        assert isinstance(sys.stdout, MaskingStream) and isinstance(sys.stderr, MaskingStream)
        sys.stdout.write("no line end")
    assert (sys.stdout, sys.stderr) == before
    assert capsys.readouterr().out == "no line end"


def test_the_demo_still_prints_through_the_writer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--plain"]) == 0
    out = capsys.readouterr().out
    assert "Run completed" in out


# ------------------------------------------------------------------ planbook mcp serve's answers
def test_every_mcp_server_answer_passes_the_checkpoint_errors_included(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from planbook.cli.mcpserve import TOOLS, PlanbookServer

    secret = "canary-mcp-Hq72Ls08XyTt"
    planbook.Secret(secret, name="mcp-answer")
    box = planbook.Toolbox()

    @box.tool
    def echo(text: str) -> dict:
        """Answers what it was given, in a mapping and as text."""
        return {"said": text, "note": f"you said {text}"}

    app = PlanbookServer(tools=box, store=str(tmp_path / "runs.sqlite"))
    answers = [
        # a planning command answers the title it was given
        app.call("planning", {"command": "create", "plan_id": "p", "title": f"deploy with {secret}", "steps": ["a"]}),
        # an argument that is not a number: the error quotes it
        app.call("list_runs", {"limit": secret}),
        app.call("run_plan", {"spec": f"steps:\n  - {{id: e, tool: echo, args: {{text: '{secret}'}}}}\n"}),
    ]
    def broken(server: PlanbookServer, args: dict, progress: object) -> tuple[str, None, bool]:
        raise RuntimeError(f"the store broke on {secret}")

    monkeypatch.setitem(TOOLS, "list_runs", dataclasses.replace(TOOLS["list_runs"], handler=broken))
    answers.append(app.call("list_runs", {}))  # a fault of a handler: an error answer, not an exception
    text = repr(answers)
    assert_clean(text, secret)
    assert "***" in answers[0][0] and answers[1][2] and answers[3][2]
    assert answers[3][0] == "RuntimeError: the store broke on ***"
    assert answers[2][1] is not None and answers[2][1]["outputs"]["e"]["said"] == "***"
