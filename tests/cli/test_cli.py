"""The command line: exit codes, the demo, and errors that say what to do."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from planbook.cli.app import main
from planbook.cli.common import final_outputs

TOOLS_MODULE = '''
import planbook

box = planbook.Toolbox()

@box.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    print(f"adding {a} and {b}")
    return a + b

@box.tool
def boom() -> None:
    """Always fails."""
    raise RuntimeError("boom")

def give_up(goal, history, last_error):
    return []
'''


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    module = f"cli_tools_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(TOOLS_MODULE)
    (tmp_path / "ok.yaml").write_text(
        textwrap.dedent(
            """\
            goal: add numbers
            steps:
              - {id: first, tool: add, args: {a: 1, b: 2}}
              - {id: second, tool: add, args: {a: $first, b: 10}}
            """
        )
    )
    (tmp_path / "fails.yaml").write_text("steps:\n  - {id: one, tool: boom}\n  - {id: two, tool: add, args: {a: 1, b: 1}}\n")
    (tmp_path / "bad.yaml").write_text("steps:\n  - {id: one, tool: ad, args: {a: 1, b: 2}}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


def tools_ref(project: Path) -> str:
    return f"cli_tools_{project.name.replace('-', '_')}:box"


def test_run_completed_exits_0_and_prints_the_answer(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "ok.yaml", "--tools", tools_ref(project)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Run completed (goal_met): steps 2/12, replans 0/5" in out
    assert "first. [✓]" in out and "second. [✓]" in out
    assert "Result of step second:\n13" in out
    assert "Result of step first" not in out  # first is needed by second: not a final answer
    assert "Step first printed:\nadding 1 and 2" in out and "Step second printed:\nadding 3 and 10" in out


def test_run_failed_exits_1_and_says_why(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "fails.yaml", "--tools", tools_ref(project)])
    out = capsys.readouterr().out
    assert code == 1
    assert "Run failed (aborted)" in out
    assert "Error: step one failed: RuntimeError: boom" in out


def test_skip_policy_goes_on(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "fails.yaml", "--tools", tools_ref(project), "--on-failure", "skip"])
    out = capsys.readouterr().out
    assert code == 0
    assert "one. [-]" in out and "two. [✓]" in out
    assert "Run completed (steps_skipped)" in out


def test_planner_with_no_plan_fails(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tools_ref(project).split(":")[0]
    code = main(["run", "fails.yaml", "--tools", tools_ref(project), "--planner", f"{module}:give_up"])
    assert code == 1
    assert "Run failed (no_plan)" in capsys.readouterr().out


def test_budget_flag(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "ok.yaml", "--tools", tools_ref(project), "--max-steps", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "Run failed (step_budget): steps 1/1" in out


def test_bad_spec_exits_2_naming_the_step_and_the_closest_tool(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "bad.yaml", "--tools", tools_ref(project)])
    err = capsys.readouterr().err
    assert code == 2
    assert "step one (line 2): unknown tool 'ad'; did you mean 'add'?" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "missing.yaml"], "cannot read plan spec 'missing.yaml'"),
        (["run", "ok.yaml", "--tools", "nocolon"], "--tools takes module:object"),
        (["run", "ok.yaml", "--tools", "no_such_module_xyz:box"], "cannot import module 'no_such_module_xyz'"),
        (["run", "ok.yaml", "--tools", "json:nothing_here"], "module 'json' has no 'nothing_here'"),
        (["run", "ok.yaml", "--max-steps", "-1"], "max_steps must be a whole number >= 0"),
    ],
)
def test_usage_problems_exit_2(project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_argparse_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "x.yaml", "--on-failure", "explode"])
    assert exc.value.code == 2
    assert "unknown failure policy 'explode'; choose from abort, skip, retry, replan" in capsys.readouterr().err


def test_check_validates_without_running(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "ok.yaml", "--tools", tools_ref(project)]) == 0
    out = capsys.readouterr().out
    assert "valid plan with 2 steps" in out and "adding" not in out
    assert main(["check", "bad.yaml", "--tools", tools_ref(project)]) == 2


def test_demo_shows_the_diff_and_ends_completed() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "planbook.cli", "demo"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Revision 1 → 2 (after: step forecast failed: ConnectionError: forecast service unavailable" in out
    assert "  - forecast: Get the 3-day forecast → get_forecast(city='Lisbon', days=3)  (removed)" in out
    assert "  + forecast-backup:" in out and "(added)" in out
    assert "  ~ clothes:" in out and "(revised)" in out
    assert "Run completed (goal_met): steps 4/12, replans 1/5" in out
    assert out.rstrip().endswith("Packing list for Lisbon: a sweater, passport, sunglasses, t-shirts, toothbrush, umbrella, windbreaker")


def test_final_outputs_are_the_leaves() -> None:
    from planbook import Plan, Toolbox, run

    box = Toolbox()

    @box.tool
    def const(v: int) -> int:
        """Return v."""
        return v

    plan = Plan.parse("steps:\n - {id: a, tool: const, args: {v: 1}}\n - {id: b, tool: const, args: {v: $a}}\n"
                      " - {id: c, tool: const, args: {v: 3}}\n")
    assert final_outputs(run(plan, tools=box)) == {"b": 1, "c": 3}


def test_unknown_tools_without_tools_flag_hint_at_it(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "ok.yaml"]) == 2
    err = capsys.readouterr().err
    assert "unknown tool 'add'" in err and "hint: name the tools with --tools module:object" in err


def test_a_tools_module_that_does_not_import_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "broken_tools_mod.py").write_text("def oops(:\n")
    assert main(["run", "ok.yaml", "--tools", "broken_tools_mod:box"]) == 2
    assert "--tools: importing 'broken_tools_mod' failed: SyntaxError" in capsys.readouterr().err


def test_a_policy_chain_on_the_command_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "fails.yaml", "--tools", tools_ref(project), "--on-failure", "retry,skip"])
    out = capsys.readouterr().out
    assert code == 0 and "one. [-]" in out and "two. [✓]" in out


def test_the_bundled_example_replans_around_a_sold_out_train(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    code = main(["run", "examples/trip.yaml", "--tools", "examples.trip_tools:tools",
                 "--planner", "examples.trip_tools:planner"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Revision 1 → 2 (after: step book failed: RuntimeError: TGV 6602 is sold out)" in out
    assert "Step book-next printed:\nbooked a seat on TGV 6606" in out
    assert out.rstrip().endswith("Weekend in Paris: TGV 6606 at 09:04, back on Sunday evening.")


# ------------------------------------------------------------------ hardening
def test_a_misspelt_tools_object_or_module_gets_did_you_mean(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tools_ref(project).split(":")[0]
    assert main(["run", "ok.yaml", "--tools", f"{module}:bx"]) == 2
    assert f"--tools: module {module!r} has no 'bx'; did you mean 'box'?" in capsys.readouterr().err
    assert main(["run", "ok.yaml", "--tools", f"{module[:-1]}:box"]) == 2
    assert f"did you mean {module!r}?" in capsys.readouterr().err
    assert main(["run", "ok.yaml", "--tools", f"{module}:box.tol"]) == 2
    assert f"--tools: {module}:box has no 'tol'; did you mean 'tool'?" in capsys.readouterr().err


UNPRINTABLE = '''
import planbook

box = planbook.Toolbox()

class Stubborn:
    def __str__(self):
        raise RuntimeError("no text for you")

@box.tool
def make() -> object:
    """Return an object that cannot be printed."""
    return Stubborn()
'''


def test_a_result_whose_str_raises_does_not_crash_a_completed_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "unprintable_mod.py").write_text(UNPRINTABLE)
    (project / "make.yaml").write_text("steps:\n  - {id: m, tool: make}\n")
    assert main(["run", "make.yaml", "--tools", "unprintable_mod:box", "--plain"]) == 0
    out = capsys.readouterr().out
    assert "Run completed (goal_met)" in out
    assert "Result of step m:\n<unprintable_mod.Stubborn object at" in out
    assert "(printing it failed: RuntimeError: no text for you)" in out


def run_cli(*argv: str, encoding: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**__import__("os").environ, "PYTHONIOENCODING": encoding}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "planbook.cli", *argv], capture_output=True, timeout=120,
                          check=False, env=env, cwd=cwd)


@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_a_stdout_that_cannot_encode_the_marks_gets_ascii_marks(project: Path, encoding: str) -> None:
    proc = run_cli("run", "ok.yaml", "--tools", tools_ref(project), "--plain", encoding=encoding, cwd=project)
    assert proc.returncode == 0, proc.stderr.decode(encoding, "replace")
    out = proc.stdout.decode(encoding)
    assert "first. [v] " in out and "second. [v] " in out and "Result of step second:\n13" in out.replace("\r", "")
    demo = run_cli("demo", "--plain", encoding=encoding)
    assert demo.returncode == 0, demo.stderr.decode(encoding, "replace")
    text = demo.stdout.decode(encoding)
    assert "list. [v] Write the packing list" in text and "Revision 1 -> 2 (after:" in text


def test_errors_on_such_a_stream_are_ascii_too(project: Path) -> None:
    (project / "cycle.yaml").write_text("steps:\n  - {id: a, tool: add, needs: [b]}\n  - {id: b, tool: add, needs: [a]}\n")
    proc = run_cli("check", "cycle.yaml", "--tools", tools_ref(project), encoding="ascii", cwd=project)
    assert proc.returncode == 2
    assert "dependency cycle: a -> b -> a" in proc.stderr.decode("ascii")


def test_marks_stay_unicode_where_the_stream_can_encode_them(project: Path) -> None:
    proc = run_cli("run", "ok.yaml", "--tools", tools_ref(project), "--plain", encoding="utf-8", cwd=project)
    assert "first. [✓] " in proc.stdout.decode("utf-8")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "soon"])
def test_timeout_must_be_a_positive_finite_number(project: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "ok.yaml", "--tools", tools_ref(project), "--timeout", value])
    assert exc.value.code == 2
    assert "argument --timeout:" in capsys.readouterr().err


def test_pace_refuses_nan(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--pace", "nan"])
    assert exc.value.code == 2 and "--pace takes a number of seconds >= 0" in capsys.readouterr().err


def test_deep_nesting_is_a_usage_error_not_a_traceback(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "deep.yaml").write_text("steps:\n  - id: a\n    tool: add\n    args:\n      a: " + "[" * 600 + "]" * 600 + "\n")
    (project / "deep.json").write_text('{"steps": [{"id": "a", "tool": "add", "args": {"a": ' + "[" * 900 + "]" * 900 + "}}]}")
    (project / "big.yaml").write_text("steps:\n  - id: a\n    tool: add\n    args: {a: " + "9" * 5001 + ", b: 1}\n")
    for name, line in (("deep.yaml", 5), ("deep.json", 1), ("big.yaml", 4)):
        assert main(["run", name, "--tools", tools_ref(project)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"planbook: invalid plan: plan (line {line}): "), err


def test_schema_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from planbook.spec.schema import plan_schema

    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == plan_schema()


def test_the_console_script_is_where_an_earlier_install_looks_for_it() -> None:
    """A ``planbook`` script written by an earlier install imports ``main`` from ``planbook.cli``:
    the package moved into layer folders, and that import must still give the command."""
    from importlib.metadata import entry_points

    import planbook.cli

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "planbook"]
    assert script.value == "planbook.cli:main"
    assert script.load() is planbook.cli.main and callable(planbook.cli.main)
    assert planbook.cli.main(["schema"]) == 0  # the command runs (it prints the plan schema)
