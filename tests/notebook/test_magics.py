"""``%%plan`` and ``%run_plan`` through a real IPython shell: every option and error path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

import planbook
from helpers import Kernel, started_kernel
from planbook import CellPlanError, Plan, PlanError, RunFailed, RunResult, ScriptedPlanner, Status, Toolbox
from planbook.notebook.magics import magics_of
from planbook.notebook.words import RunInterrupted
from planbook.spec.write import plan_spec
from planbook.views.text import format_plan

SPEC = """\
goal: add up {numbers} for $5
steps:
  - id: 1
    task: start at {one}
    tool: add
    args: {a: 1, b: 2}
  - id: 2
    tool: add
    args: {a: $1, b: 10}
  - id: 3
    tool: add
    args: {a: $2, b: 100}
"""


class World:
    """Tools whose behaviour a test sets; ``calls`` records them in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, int] = {}  # tool -> failures left
        self.interrupt: dict[str, int] = {}  # tool -> interrupts left
        self.tools = Toolbox()
        world = self

        @self.tools.tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            world.calls.append(f"add({a},{b})")
            print(f"adding {a} and {b}")
            return a + b

        @self.tools.tool
        def flaky(label: str = "x") -> str:
            """Fails while the test says so, and may be interrupted."""
            world.calls.append(f"flaky({label})")
            if world.interrupt.get(label, 0) > 0:
                world.interrupt[label] -= 1
                raise KeyboardInterrupt
            if world.fail.get(label, 0) > 0:
                world.fail[label] -= 1
                raise RuntimeError(f"{label} is down")
            return label

        @self.tools.tool
        def slow(seconds: float) -> str:
            """Sleep (for --timeout)."""
            import time

            time.sleep(seconds)
            return "slept"


@pytest.fixture
def world(ip: Any) -> World:
    w = World()
    ip.user_ns["tb"] = w.tools
    return w


@pytest.fixture
def published(ip: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every display the shell publishes (data, display id, update?), instead of printing it."""
    seen: list[dict[str, Any]] = []

    def publish(data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None, update: bool = False, **kw: Any) -> None:
        seen.append({"data": data, "id": (transient or {}).get("display_id"), "update": update})

    monkeypatch.setattr(ip.display_pub, "publish", publish)
    # the view a kernel without anywidget shows (the widget's own tests are in test_widget.py)
    monkeypatch.setattr("planbook.views.show.choose_view", lambda *a, **k: "html")
    return seen


def cell(ip: Any, text: str) -> Any:
    """Run a cell; re-raise what it raised (the shell would only print it)."""
    result = ip.run_cell(text)
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return result.result


# ------------------------------------------------------------------ loading
def test_load_ext_is_light_and_registers_magics() -> None:
    code = textwrap.dedent(
        """
        import sys, time
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        t = time.perf_counter()
        import planbook
        t1 = time.perf_counter()
        ip.run_line_magic("load_ext", "planbook")
        took = time.perf_counter() - t1
        print(f"{t1 - t:.4f}")
        assert "plan" in ip.magics_manager.magics["cell"], "no %%plan"
        assert "run_plan" in ip.magics_manager.magics["line"], "no %run_plan"
        heavy = [m for m in ("openai", "ipywidgets") if m in sys.modules]
        print(f"{took:.4f}", ",".join(heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    print(f"import planbook {float(out[0]) * 1000:.1f} ms, then %load_ext planbook {float(out[1]) * 1000:.1f} ms")
    assert out[2:] == [], f"%load_ext planbook imported {out[2:]}: import them where they are used"


def test_import_planbook_loads_no_store_until_one_is_opened() -> None:
    """The store package (and sqlite3) load when a run is stored or listed, not with ``import
    planbook``: the engine and the run list named its types at import (about 12 ms of 300)."""
    code = ("import sys, planbook\n"
            "print(','.join(m for m in ('planbook.store', 'planbook.store.base', 'sqlite3') if m in sys.modules))\n"
            "box = planbook.Toolbox()\n"
            "box.tool(lambda: 1, name='one')\n"
            "assert planbook.run('goal: g\\nsteps:\\n  - {id: a, tool: one}\\n', tools=box, store=':memory:').ok\n"
            "print('planbook.store' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.splitlines()
    assert out == ["", "True"], out


def test_unload_and_reload(ip: Any) -> None:
    ip.run_line_magic("unload_ext", "planbook")
    assert "run_plan" not in ip.magics_manager.magics["line"]
    assert "plan" not in ip.magics_manager.magics["cell"]
    ip.run_line_magic("load_ext", "planbook")
    assert magics_of(ip) is not None and "run_plan" in ip.magics_manager.magics["line"]


def test_help_lists_the_options(ip: Any) -> None:
    doc = ip.find_line_magic("run_plan").__doc__
    for option in ("--on-failure", "--retries", "--max-steps", "--max-replans", "--planner", "--tools", "--agents",
                   "--step", "--until", "--timeout", "--check", "--restart", "--no-view"):
        assert option in doc
    doc = ip.find_cell_magic("plan").__doc__
    for option in ("--planner", "--model", "--review", "--tools", "--agents", "--title"):
        assert option in doc
    assert "%%plan" in doc and "%%%%" not in doc


def test_question_mark_shows_the_help(ip: Any, capsys: Any) -> None:
    assert ip.run_cell("%run_plan?").success
    shown = capsys.readouterr().out
    assert "%run_plan [--on-failure POLICY]" in shown and "--until ID" in shown
    assert "Run plan NAME with a live view" in shown


# ------------------------------------------------------------------ %%plan
def test_plan_cell_stores_validates_and_shows_the_plan(ip: Any, world: World, published: list) -> None:
    ip.user_ns.update(x="EXPANDED", y="EXPANDED", numbers="EXPANDED")
    cell(ip, f'%%plan sums --tools tb --title "Sums of {{x}} and $y"\n{SPEC}')
    plan = ip.user_ns["sums"]
    assert isinstance(plan, Plan)
    assert plan.id == "sums"
    assert plan.title == "Sums of {x} and $y"  # the line is not expanded
    assert plan.goal == "add up {numbers} for $5"  # nor is the body
    assert plan.steps[0].task == "start at {one}"
    assert plan.step("2").args == {"a": "$1", "b": 10} and plan.step("2").needs == ["1"]
    assert [p["data"]["text/plain"] for p in published] == [format_plan(plan)]
    assert "Sums of {x} and $y" in published[0]["data"]["text/html"]


def test_plan_cell_markdown_with_agents(ip: Any, published: list) -> None:
    ip.user_ns["crew"] = {"writer": lambda task: f"wrote {task}"}
    cell(ip, "%%plan essay --agents crew\n# Write an essay\n1. [WRITER] outline\n2. [WRITER] draft it\n")
    plan = ip.user_ns["essay"]
    assert [(s.id, s.agent, s.task) for s in plan.steps] == [("1", "writer", "outline"), ("2", "writer", "draft it")]
    assert plan.goal == "Write an essay"


def test_invalid_plan_names_its_lines_in_the_cell(ip: Any, world: World) -> None:
    body = SPEC.replace("tool: add\n    args: {a: $1", "tool: ad\n    args: {a: $9")
    with pytest.raises(PlanError) as info:
        cell(ip, f"%%plan broken --tools tb\n{body}")
    err = info.value
    assert isinstance(err, CellPlanError)
    # the offending lines: 'tool: ad' is line 8 of the body, line 9 of the cell (line 1 is the %%plan line)
    assert {(p.step, p.code, p.line) for p in err.problems} == {("2", "unknown_tool", 9), ("2", "unknown_ref", 10)}
    shown = "\n".join(err._render_traceback_())
    assert "did you mean 'add'?" in shown
    assert "   9 |     tool: ad" in shown and "  10 |     args: {a: $9, b: 10}" in shown
    assert "broken" not in ip.user_ns


def test_yaml_syntax_error_points_at_the_cell_line(ip: Any, world: World) -> None:
    with pytest.raises(PlanError) as info:
        cell(ip, "%%plan broken --tools tb\nsteps:\n  - id: 1\n    tool: add\n   args: [\n")
    (problem,) = info.value.problems
    assert problem.code == "syntax" and problem.line is not None and problem.line >= 4
    assert f"{problem.line} |" in "\n".join(info.value._render_traceback_())


def test_empty_plan_cell(ip: Any) -> None:
    with pytest.raises(PlanError, match="empty"):
        ip.run_cell_magic("plan", "nothing", "\n")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("p --tools nowhere", "--tools nowhere: there is no variable 'nowhere'"),
        ("p --agents nobody", "--agents nobody: there is no variable 'nobody'"),
        ("p --planner nobody", "--planner nobody: there is no variable 'nobody'"),
        ("p --bogus", "unrecognized arguments: --bogus"),
        ("1p", "cannot be a variable name"),
        ("{p}", "cannot be a variable name"),
        ("p --review", "--review shows a planner's plan"),
        ("p --model m", "--model chooses the model of --planner llm"),
        ('p --title "unclosed', "cannot read the options"),
    ],
)
def test_plan_usage_errors(ip: Any, world: World, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("[", r"\[")):
        ip.run_cell_magic("plan", line, SPEC)


def test_unknown_var_suggests_a_close_name(ip: Any, world: World) -> None:
    with pytest.raises(UsageError, match="did you mean 'tb'"):
        ip.run_cell_magic("plan", "p --tools tbb", SPEC)


def test_planner_var_turns_a_goal_into_a_plan(ip: Any, world: World) -> None:
    planner = ScriptedPlanner({None: [{"id": "a", "tool": "add", "args": {"a": 2, "b": 2}, "task": "two and {two}"}]})
    ip.user_ns["maker"] = planner
    cell(ip, "%%plan made --planner maker --tools tb --title Made\nAdd two and two, $ and {} are literal\n")
    plan = ip.user_ns["made"]
    assert (plan.id, plan.title, plan.goal) == ("made", "Made", "Add two and two, $ and {} are literal")
    assert [s.id for s in plan.steps] == ["a"]
    assert planner.calls == [("Add two and two, $ and {} are literal", [], None)]


def test_planner_output_that_fails_validation_is_a_plan_error(ip: Any, world: World) -> None:
    ip.user_ns["sloppy"] = ScriptedPlanner({None: [{"id": "a", "tool": "nope"}]})
    with pytest.raises(PlanError) as info:
        ip.run_cell_magic("plan", "made --planner sloppy --tools tb", "some goal")
    assert [(p.code, p.line) for p in info.value.problems] == [("unknown_tool", None)]
    assert info.value._render_traceback_() == [f"PlanError: {info.value}"]  # no cell lines to quote


def test_planner_needs_a_goal(ip: Any, world: World) -> None:
    ip.user_ns["maker"] = ScriptedPlanner({None: "1. [writer] x"})
    with pytest.raises(UsageError, match="write the goal"):
        ip.run_cell_magic("plan", "made --planner maker", "  \n")


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch, world: World) -> list[Any]:
    """planbook.llm.LLMPlanner replaced by a scripted planner that records its model."""
    made: list[Any] = []

    class FakeLLMPlanner(ScriptedPlanner):
        def __init__(self, model: str | None = None, **kwargs: Any) -> None:
            super().__init__({None: [{"id": "1", "tool": "add", "args": {"a": 1, "b": 1}, "task": "one plus one"}],
                              "down": [{"id": "2", "tool": "add", "args": {"a": 5, "b": 5}, "task": "instead"}]})
            self.model = model
            self.contexts: list[Any] = []
            made.append(self)

        def set_context(self, context: Any) -> None:
            self.contexts.append(context)

    module = types.ModuleType("planbook.llm")
    module.LLMPlanner = FakeLLMPlanner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "planbook.llm", module)
    return made


def test_planner_llm_uses_llmplanner_with_the_model(ip: Any, fake_llm: list) -> None:
    cell(ip, "%%plan bymodel --planner llm --model tiny-1 --tools tb\nAdd one and one")
    (planner,) = fake_llm
    assert planner.model == "tiny-1"
    assert "add" in planner.contexts[0].tools  # the planner was told the tools
    assert [s.task for s in ip.user_ns["bymodel"].steps] == ["one plus one"]


def test_run_plan_reuses_the_llm_planner_of_the_plan_cell_unless_the_model_changes(
    ip: Any, fake_llm: list, published: list, world: World
) -> None:
    cell(ip, "%%plan llmmade --planner llm --model first --tools tb\nAdd one and one")
    assert ip.run_line_magic("run_plan", "llmmade").ok
    assert [p.model for p in fake_llm] == ["first"]
    assert ip.run_line_magic("run_plan", "llmmade --model second").ok
    assert [p.model for p in fake_llm] == ["first", "second"]


def test_review_inserts_an_editable_plan_cell(
    ip: Any, fake_llm: list, published: list, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(ip, "%%plan reviewed --planner llm --model small --tools tb --review\nAdd one and one")
    text = ip.rl_next_input  # what set_next_input(text, replace=False) leaves for the next cell
    assert text.startswith("%%plan reviewed --planner llm --model small --tools tb\ngoal: Add one and one\n")
    assert "--review" not in text
    first = ip.user_ns["reviewed"]  # stored right away, so %run_plan works without approving
    out = capsys.readouterr().out
    assert "stored as reviewed" in out and "cell below holds it" in out
    del ip.user_ns["reviewed"]
    cell(ip, text)  # the person approves the plan by running the inserted cell
    again = ip.user_ns["reviewed"]
    assert again is not first and len(fake_llm) == 2  # the cell made a planner for replans ...
    assert fake_llm[-1].contexts == []  # ... and did not ask it for a plan: the body is the plan
    assert [s.model_dump() for s in again.steps] == [s.model_dump() for s in first.steps]
    assert again.goal == first.goal == "Add one and one"


def test_the_approved_review_cell_keeps_the_planner_for_replans(
    ip: Any, world: World, published: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    inserted: list[str] = []
    monkeypatch.setattr(ip, "set_next_input", lambda text, replace=False: inserted.append(text))
    ip.user_ns["fixer"] = ScriptedPlanner({
        None: [{"id": "1", "tool": "flaky", "args": {"label": "a"}}, {"id": "2", "tool": "flaky", "args": {"label": "b"}}],
        "b is down": [{"id": "2", "tool": "add", "args": {"a": 1, "b": 1}, "task": "add instead"}],
    })
    ip.run_cell_magic("plan", "approved --planner fixer --tools tb --review", "Two flaky calls")
    (text,) = inserted
    assert text.splitlines()[0] == "%%plan approved --planner fixer --tools tb"
    cell(ip, text)  # approve the plan
    world.fail["b"] = 1
    result = ip.run_line_magic("run_plan", "approved")  # no --planner here: the cell's is used
    assert result.ok and result.replans == 1 and result.plan.step("2").tool == "add"


def test_review_uses_set_next_input_without_replacing(ip: Any, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool]] = []
    monkeypatch.setattr(ip, "set_next_input", lambda text, replace=False: calls.append((text, replace)))
    ip.user_ns["maker"] = ScriptedPlanner({None: [{"id": "1", "tool": "add", "args": {"a": 1, "b": 2}}]})
    ip.run_cell_magic("plan", "rv --planner maker --tools tb --review", "goal")
    assert len(calls) == 1 and calls[0][1] is False and calls[0][0].startswith("%%plan rv --planner maker --tools tb\n")


# ------------------------------------------------------------------ spec writer
def test_spec_writer_round_trips_a_parsed_plan() -> None:
    plan = Plan.parse(SPEC + "  - id: w\n    agent: writer\n    task: 'say: \"hi\" # not a comment'\n    needs: [3]\n"
                      "    expect: a greeting\n    on_failure: skip\n", id="p")
    plan.title = "Title: with {braces} and $dollars"
    again = Plan.parse(plan_spec(plan), id="p")
    assert (again.goal, again.title) == (plan.goal, plan.title)
    assert [s.model_dump() for s in again.steps] == [s.model_dump() for s in plan.steps]


def test_spec_writer_refuses_args_yaml_cannot_hold() -> None:
    plan = Plan(id="p", steps=[planbook.Step(id="1", tool="t", args={"x": object()})])
    with pytest.raises(ValueError, match="argument 'x' holds object"):
        plan_spec(plan)


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\x85\u2028\u2029"), max_size=30)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False), _text)
_args = st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
                        st.one_of(_scalar, st.lists(_scalar, max_size=3)), max_size=3)


@settings(max_examples=60, deadline=None)
@given(tasks=st.lists(st.tuples(_text.map(str.strip), _args, _text), min_size=1, max_size=4), goal=_text)
def test_spec_writer_round_trips_any_plain_plan(tasks: list, goal: str) -> None:
    steps = [planbook.Step(id=str(i), task=task, tool="t", args=args, expect=expect.strip())
             for i, (task, args, expect) in enumerate(tasks, start=1)]
    plan = Plan(id="p", goal=goal.strip(), steps=steps)
    again = Plan.parse(plan_spec(plan), id="p")
    assert again.goal == plan.goal
    assert [s.model_dump() for s in again.steps] == [s.model_dump() for s in plan.steps]


# ------------------------------------------------------------------ %run_plan
def define(ip: Any, name: str, spec: str = SPEC, options: str = "--tools tb") -> Plan:
    ip.run_cell_magic("plan", f"{name} {options}", spec)
    return ip.user_ns[name]


def test_run_plan_returns_the_result_and_assigns(ip: Any, world: World, published: list) -> None:
    define(ip, "sums")
    cell(ip, "r = %run_plan sums")
    result = ip.user_ns["r"]
    assert isinstance(result, RunResult)
    assert (result.status, result.reason, result.executions) == ("completed", "goal_met", 3)
    assert result.outputs == {"1": 3, "2": 13, "3": 113}
    assert result.plan.step("1").output == "adding 1 and 2\n"
    assert ip.user_ns["sums"].steps[0].status is Status.not_started  # the defined plan is not changed


def test_run_plan_result_is_the_cell_value(ip: Any, world: World, published: list) -> None:
    define(ip, "sums")
    value = cell(ip, "%run_plan sums --no-view")
    assert isinstance(value, RunResult) and value.ok


def test_run_plan_runs_a_spec_string(ip: Any, world: World, published: list) -> None:
    ip.user_ns["text_plan"] = "steps:\n  - {id: 1, tool: add, args: {a: 2, b: 3}}\n"
    result = ip.run_line_magic("run_plan", "text_plan --tools tb --no-view")
    assert result.outputs == {"1": 5}


def test_run_plan_turns_a_goal_string_into_a_plan_with_a_planner(ip: Any, world: World, published: list) -> None:
    ip.user_ns["goal_text"] = "Add two and three"
    ip.user_ns["maker"] = ScriptedPlanner({None: [{"id": "1", "tool": "add", "args": {"a": 2, "b": 3}}]})
    result = ip.run_line_magic("run_plan", "goal_text --planner maker --tools tb")
    assert result.ok and result.outputs == {"1": 5} and result.plan.goal == "Add two and three"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("nowhere", "no plan named 'nowhere'"),
        ("number", "'number' is a int, not a plan"),
        ("sums --bogus", "unrecognized arguments: --bogus"),
        ("sums --max-steps many", "invalid int value"),
        ("sums --max-steps -1", "--max-steps must be a whole number >= 0"),
        ("sums --timeout 0", "--timeout must be a positive number"),
        ("sums --on-failure explode", "unknown failure policy 'explode'"),
        ("sums --on-failure replan", "--on-failure replan needs a planner: add --planner VAR"),
        ("sums --tools nowhere", "--tools nowhere: there is no variable"),
        ("sums --agents nowhere", "--agents nowhere: there is no variable"),
        ("sums --planner nowhere", "--planner nowhere: there is no variable"),
        ("sums --planner number", "'number' is a int; a planner is a callable"),
        ("sums --until 9", "has no step '9'"),
        ("sums --model m", "--model chooses the model"),
        ("{sums}", "cannot be a variable name"),
        ("$sums", "cannot be a variable name"),
    ],
)
def test_run_plan_usage_errors(ip: Any, world: World, line: str, message: str) -> None:
    define(ip, "sums")
    ip.user_ns["number"] = 7
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        ip.run_line_magic("run_plan", line)
    assert world.calls == []


def test_replan_without_a_planner_is_explained_in_the_magics_options(ip: Any, world: World) -> None:
    """The engine says ``pass planner=...``; in a magic the fix is the option ``--planner VAR``."""
    with pytest.raises(PlanError) as info:
        ip.run_cell_magic("plan", "replanning --tools tb", "steps:\n  - {id: 1, tool: add, args: {a: 1, b: 2}, on_failure: replan}\n")
        ip.run_line_magic("run_plan", "replanning")
    message = str(info.value)
    assert "add --planner VAR (a planner in the namespace) or --planner llm" in message and "planner=" not in message
    with pytest.raises(PlanError) as info:
        ip.run_cell_magic("plan", "wordy --tools tb", "Add up the numbers one and two")
    message = str(info.value)
    assert "needs a planner: add --planner VAR" in message and "planner=" not in message
    assert world.calls == []


def test_run_plan_with_an_invalid_plan_raises_plan_error(ip: Any, world: World) -> None:
    ip.user_ns["bad_text"] = "steps:\n  - {id: 1, tool: missing}\n"
    with pytest.raises(PlanError, match="unknown tool 'missing'"):
        ip.run_line_magic("run_plan", "bad_text --tools tb")


def test_step_then_continue(ip: Any, world: World, published: list) -> None:
    define(ip, "walk")
    first = ip.run_line_magic("run_plan", "walk --step")
    assert (first.status, first.executions) == ("paused", 1)
    assert [s.status for s in first.plan.steps] == [Status.completed, Status.not_started, Status.not_started]
    second = ip.run_line_magic("run_plan", "walk --step")
    assert second.executions == 2 and second.plan.step("2").status is Status.completed
    rest = ip.run_line_magic("run_plan", "walk")
    assert (rest.status, rest.executions) == ("completed", 3)
    assert world.calls == ["add(1,2)", "add(3,10)", "add(13,100)"]  # nothing ran twice


def test_until_pauses_after_the_step(ip: Any, world: World, published: list) -> None:
    define(ip, "upto")
    result = ip.run_line_magic("run_plan", "upto --until 2")
    assert result.status == "paused" and result.executions == 2
    assert result.plan.step("3").status is Status.not_started
    with pytest.raises(UsageError, match="step 2 already ran in this run"):
        ip.run_line_magic("run_plan", "upto --until 2")
    assert ip.run_line_magic("run_plan", "upto --until 2 --restart").executions == 2
    assert ip.run_line_magic("run_plan", "upto").executions == 3


def test_a_finished_run_starts_again(ip: Any, world: World, published: list) -> None:
    define(ip, "again")
    ip.run_line_magic("run_plan", "again")
    result = ip.run_line_magic("run_plan", "again")
    assert result.executions == 3 and len(world.calls) == 6


def test_a_redefined_plan_starts_fresh(ip: Any, world: World, published: list) -> None:
    define(ip, "redo")
    ip.run_line_magic("run_plan", "redo --step")
    define(ip, "redo")  # a new %%plan cell run: a new plan object
    result = ip.run_line_magic("run_plan", "redo --step")
    assert result.executions == 1 and world.calls == ["add(1,2)", "add(1,2)"]


def test_changed_options_need_restart_and_no_options_continue(ip: Any, world: World, published: list) -> None:
    define(ip, "opts")
    ip.run_line_magic("run_plan", "opts --step --max-steps 20")
    with pytest.raises(UsageError, match="has a paused run that was started with other options: run %run_plan opts "
                                         "without options to continue it, or add --restart"):
        ip.run_line_magic("run_plan", "opts --step --max-steps 30")
    assert ip.run_line_magic("run_plan", "opts --step").executions == 2  # no options: continues as started
    assert ip.run_line_magic("run_plan", "opts --step --max-steps 20 --restart").executions == 1
    assert world.calls == ["add(1,2)", "add(3,10)", "add(1,2)"]


FLAKY = """\
steps:
  - {id: 1, tool: flaky, args: {label: a}}
  - {id: 2, tool: flaky, args: {label: b}}
  - {id: 3, tool: flaky, args: {label: c}}
"""


def test_failed_run_is_returned_and_check_raises(ip: Any, world: World, published: list) -> None:
    define(ip, "shaky", FLAKY)
    world.fail["b"] = 5
    result = ip.run_line_magic("run_plan", "shaky")
    assert (result.status, result.reason) == ("failed", "aborted")
    assert "b is down" in result.error
    html = result._repr_mimebundle_()["text/html"]
    assert "planbook-run-failed" in html and "#b71c1c" in html  # shown as failed, in red
    with pytest.raises(RunFailed) as info:
        ip.run_line_magic("run_plan", "shaky --check")
    assert info.value.result.status == "failed"
    assert not isinstance(info.value, UsageError)  # a normal exception: nbval and papermill see it


def test_check_passes_a_completed_run(ip: Any, world: World, published: list) -> None:
    define(ip, "steady", FLAKY)
    assert ip.run_line_magic("run_plan", "steady --check").ok


def test_skip_retry_and_budget_options(ip: Any, world: World, published: list) -> None:
    define(ip, "pol", FLAKY)
    world.fail["b"] = 1
    skipped = ip.run_line_magic("run_plan", "pol --on-failure skip")
    assert (skipped.status, skipped.reason) == ("completed", "steps_skipped")
    assert skipped.plan.step("2").status is Status.skipped
    world.fail["b"] = 2
    retried = ip.run_line_magic("run_plan", "pol --on-failure retry --retries 2")
    assert retried.ok and retried.executions == 5
    world.fail["b"] = 2
    chained = ip.run_line_magic("run_plan", "pol --on-failure retry,skip")  # one retry by default, then skip
    assert chained.plan.step("2").status is Status.skipped and chained.plan.step("2").attempts == 2
    with pytest.raises(UsageError, match="--retries 0, so nothing would be retried: pass --retries N"):
        ip.run_line_magic("run_plan", "pol --on-failure retry --retries 0")
    budget = ip.run_line_magic("run_plan", "pol --max-steps 2")
    assert (budget.status, budget.reason, budget.executions) == ("failed", "step_budget", 2)


def test_replan_with_the_planner_of_the_plan_cell(ip: Any, world: World, published: list) -> None:
    planner = ScriptedPlanner({None: FLAKY, "b is down": [{"id": "2b", "tool": "add", "args": {"a": 1, "b": 1}}]})
    ip.user_ns["fixer"] = planner
    cell(ip, "%%plan healing --planner fixer --tools tb\nFetch a, b and c")
    world.fail["b"] = 1
    result = ip.run_line_magic("run_plan", "healing --max-replans 1")  # replan is the default with a planner
    assert (result.status, result.replans) == ("completed", 1)
    assert [s.id for s in result.plan.steps] == ["1", "2b"]
    (diff,) = result.revisions
    assert (diff.removed, diff.added) == (["2", "3"], ["2b"])
    world.fail["b"] = 1
    ip.user_ns["nofix"] = ScriptedPlanner({None: FLAKY})
    budget = ip.run_line_magic("run_plan", "healing --planner nofix --max-replans 0")
    assert (budget.status, budget.reason) == ("failed", "replan_budget")


def test_planner_llm_for_replans(ip: Any, fake_llm: list, published: list, world: World) -> None:
    define(ip, "viallm", FLAKY)
    world.fail["b"] = 1
    result = ip.run_line_magic("run_plan", "viallm --planner llm --model m2 --on-failure replan")
    assert result.ok and [s.id for s in result.plan.steps] == ["1", "2"]
    assert result.plan.step("2").tool == "add" and fake_llm[-1].model == "m2"


def test_timeout_fails_a_slow_step(ip: Any, world: World, published: list) -> None:
    define(ip, "sleepy", "steps:\n  - {id: 1, tool: slow, args: {seconds: 0.5}}\n")
    result = ip.run_line_magic("run_plan", "sleepy --timeout 0.05")
    assert result.status == "failed" and "TimeoutError" in result.error


def test_interrupt_stops_cleanly_and_continues(ip: Any, world: World, published: list) -> None:
    define(ip, "stoppable", FLAKY)
    world.interrupt["b"] = 1  # the kernel's interrupt arrives while step 2 runs
    with pytest.raises(KeyboardInterrupt) as info:
        ip.run_line_magic("run_plan", "stoppable")
    err = info.value
    assert isinstance(err, RunInterrupted)
    assert err.result.status == "interrupted"
    assert [s.status for s in err.result.plan.steps] == [Status.completed, Status.not_started, Status.not_started]
    assert "%run_plan stoppable to continue" in err._render_traceback_()[0]
    final = published[-1]["data"]["text/html"]  # the live view says so
    assert "Run interrupted" in final
    result = ip.run_line_magic("run_plan", "stoppable")
    assert result.ok and result.executions == 3
    assert world.calls == ["flaky(a)", "flaky(b)", "flaky(b)", "flaky(c)"]


def test_interrupted_run_through_run_cell_shows_a_short_message(ip: Any, world: World, published: list, capsys: Any) -> None:
    define(ip, "stop2", FLAKY)
    world.interrupt["a"] = 1
    result = ip.run_cell("%run_plan stop2")
    assert isinstance(result.error_in_exec, RunInterrupted)
    out = capsys.readouterr()
    assert "RunInterrupted: plan 'stop2' was interrupted (0/3 steps completed)" in out.out + out.err


# ------------------------------------------------------------------ live view through the magic
def test_live_view_falls_back_to_display_updates(ip: Any, world: World, published: list) -> None:
    plan = define(ip, "shown")
    published.clear()
    result = ip.run_line_magic("run_plan", "shown")
    first, *updates = published
    assert first["update"] is False and first["id"]
    assert first["data"]["text/plain"] == format_plan(plan)
    assert updates and all(u["update"] and u["id"] == first["id"] for u in updates)
    # the display ends with the final state (what the saved notebook keeps)
    assert updates[-1]["data"]["text/plain"] == str(result)
    assert "Run completed (goal_met): steps 3/12, replans 0/5" in updates[-1]["data"]["text/html"]
    assert "text/markdown" not in updates[-1]["data"]  # the record: text and HTML (every front end shows the HTML)


def test_no_view_displays_nothing(ip: Any, world: World, published: list) -> None:
    define(ip, "quiet")
    published.clear()
    ip.run_line_magic("run_plan", "quiet --no-view")
    assert published == []


def test_widget_view_when_a_kernel_has_comms(ip: Any, world: World, published: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("planbook.views.show.choose_view", lambda *a, **k: "widget")
    plan = define(ip, "widgety")
    published.clear()
    result = ip.run_line_magic("run_plan", "widgety")
    # the widget updates itself through comms: one display, then one update with the final state
    shown, final = published
    assert "application/vnd.jupyter.widget-view+json" in shown["data"]
    assert shown["data"]["text/plain"] == format_plan(plan)
    assert (final["update"], final["id"]) == (True, shown["id"])
    data = final["data"]
    # the widget is replaced by its static record (a saved widget has no model without its kernel)
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert data["text/plain"] == str(result)  # what a saved notebook shows: how the run ended
    assert "text/markdown" not in data  # the record is its text and its HTML
    assert "planbook-record" in data["text/html"] and "<details" in data["text/html"]
    assert "Run completed (goal_met)" in data["text/html"]
    assert result.ok


def test_live_view_is_unsubscribed_after_the_run(ip: Any, world: World, published: list) -> None:
    define(ip, "subs")
    ip.run_line_magic("run_plan", "subs --step")
    runner = magics_of(ip).runs["subs"].runner
    assert runner.handlers == []
    ip.run_line_magic("run_plan", "subs")
    assert runner.handlers == []


# ------------------------------------------------------------------ in a real kernel
KERNEL_SETUP = """\
%load_ext planbook
%plan_store --no-cache
import time, planbook
@planbook.tool
def inc(x: int) -> int:
    "Add one."
    return x + 1
@planbook.tool
def nap(seconds: float) -> str:
    "Sleep: the kernel's interrupt arrives here."
    import sys
    print("napping", file=sys.stderr, flush=True)  # stdout is captured into the step; stderr streams
    time.sleep(seconds)
    return "rested"
many = planbook.Plan(id="many", steps=[planbook.Step(id=str(i), tool="inc", args={"x": i}) for i in range(1, 1001)])
"""


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel(KERNEL_SETUP, needs=())


def test_kernel_shows_the_widget_and_sends_a_bounded_number_of_updates(kernel: Kernel) -> None:
    reply, messages = kernel.execute("r = %run_plan many --max-steps 1000\nr.status, r.executions")
    assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    displays = [m for m in messages if m["msg_type"] == "display_data"]
    (view,) = displays  # one display: the widget updates itself through comms
    assert "application/vnd.jupyter.widget-view+json" in view["content"]["data"]
    # a long plan's live display: one line of text (its record has every step's)
    assert view["content"]["data"]["text/plain"].startswith("Plan many: 0/1000 steps completed")
    updates = [m for m in messages if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"]
    opened = [m for m in messages if m["msg_type"] == "comm_open"]
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "('completed', 1000)"
    print(f"kernel, 1,000 steps: {len(opened)} widget models opened, {len(updates)} widget update messages")
    assert len(opened) <= 40  # a fixed set of models, not one per step
    assert len(updates) <= 300  # throttled: a few dozen renders of a few changed traits each


@pytest.mark.slow
def test_kernel_interrupt_stops_the_run_and_it_continues(kernel: Kernel) -> None:
    reply, _ = kernel.execute(
        '%%plan naps\nsteps:\n  - {id: 1, tool: inc, args: {x: 1}}\n  - {id: 2, tool: nap, args: {seconds: 3}}\n'
        "  - {id: 3, tool: inc, args: {x: 3}}\n"
    )
    assert reply["status"] == "ok", reply
    reply, messages = kernel.execute("%run_plan naps", interrupt_when="napping")
    assert (reply["status"], reply.get("ename")) == ("error", "RunInterrupted"), reply  # "run all" stops here
    (error,) = [m for m in messages if m["msg_type"] == "error"]
    assert error["content"]["traceback"] == [
        "RunInterrupted: plan 'naps' was interrupted (1/3 steps completed); run %run_plan naps to continue it "
        "(after a kernel restart: %run_plan naps --resume), or %run_plan naps --restart to start again"
    ]
    # the interrupted nap was still running in its worker thread: continuing waits for it and keeps
    # its result, so step 2 is not run again (a replaced tool is not called)
    reply, _ = kernel.execute("planbook.default_toolbox.add(lambda seconds: 'quick', name='nap')")
    assert reply["status"] == "ok", reply
    reply, messages = kernel.execute("r = %run_plan naps\nr.status, r.executions, r.outputs['2'], len(r.history)")
    assert reply["status"] == "ok", reply
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "('completed', 3, 'rested', 3)"


def test_kernel_replies_are_matched_to_their_requests(kernel: Kernel) -> None:
    kernel.kc.kernel_info()  # its reply is left on the shell channel, as after a slow kernel start
    reply, messages = kernel.execute("40 + 2")
    assert reply["status"] == "ok" and "execution_count" in reply, reply  # the execute_reply, not kernel_info's
    (result,) = [m for m in messages if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "42"


def test_kernel_review_sends_a_set_next_input_payload(kernel: Kernel) -> None:
    reply, _ = kernel.execute(
        "drafter = planbook.ScriptedPlanner({None: [{'id': '1', 'tool': 'inc', 'args': {'x': 1}, 'task': 'one more'}]})"
    )
    assert reply["status"] == "ok", reply
    reply, _ = kernel.execute("%%plan drafted --planner drafter --review\nCount up by one")
    assert reply["status"] == "ok", reply
    (payload,) = reply["payload"]
    assert payload["source"] == "set_next_input" and payload["replace"] is False
    assert payload["text"] == "%%plan drafted --planner drafter\ngoal: Count up by one\nsteps:\n- id: 1\n  task: one more\n  tool: inc\n  args: {x: 1}"


def test_unknown_names_without_the_option_hint_at_it(ip: Any) -> None:
    with pytest.raises(PlanError, match=r"unknown agent 'scribe' \(known agents: none registered\): "
                                        r"pass your agents with --agents VAR"):
        ip.run_cell_magic("plan", "hinted", "1. [scribe] draft\n")


# ------------------------------------------------------------------ what a run cell shows
def test_a_step_cell_shows_the_plan_once(ip: Any, world: World, published: list) -> None:
    """``%run_plan x --step`` showed the plan in the live view and again as the cell's value."""
    define(ip, "once")
    published.clear()
    value = ip.run_line_magic("run_plan", "once --step")
    (live, *updates) = published  # the live view: the plan with its marks
    assert "Steps:" in updates[-1]["data"]["text/plain"]
    data, _ = ip.display_formatter.format(value)  # the cell's value: the verdict only
    assert data["text/plain"] == ("Run paused: steps 1/12, replans 0/5 (the live view above shows the plan; "
                                  "print() the result for its text)")
    assert "Steps:" not in data["text/html"] and "planbook-step" not in data["text/html"]
    assert isinstance(value, planbook.RunResult) and value.status == "paused" and "Steps:" in str(value)
    assert ip.run_line_magic("run_plan", "once --no-view")._repr_mimebundle_()["text/plain"].startswith("Plan:")


def test_a_review_cell_run_again_does_not_insert_another_cell(ip: Any, world: World, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Run All ran the --review cell again and inserted one more review cell every time."""
    calls: list[str] = []
    monkeypatch.setattr(ip, "set_next_input", lambda text, replace=False: calls.append(text))
    ip.user_ns["maker2"] = ScriptedPlanner({None: [{"id": "1", "tool": "add", "args": {"a": 1, "b": 2}}]})
    for _ in range(3):
        ip.run_cell_magic("plan", "rv2 --planner maker2 --tools tb --review", "goal")
    assert len(calls) == 1
    assert "not inserted again" in capsys.readouterr().out
    ip.user_ns["maker2"] = ScriptedPlanner({None: [{"id": "1", "tool": "add", "args": {"a": 5, "b": 5}}]})
    ip.run_cell_magic("plan", "rv2 --planner maker2 --tools tb --review", "goal")
    assert len(calls) == 2  # a different plan: a new cell to review


def test_the_magics_object_still_shows_everything_it_keeps(ip: Any) -> None:
    """What the magics remember moved to their session; the attributes the magics object had
    (``magics_of(ip).runs``, ``.tool_servers``, ``.reviewed``...) still read and write it."""
    magics = magics_of(ip)
    assert magics is not None
    for name in ("runs", "origins", "store_choice", "cache", "background", "reviewed", "tool_servers"):
        assert getattr(magics, name) is getattr(magics.session, name), name
