"""The terminal view (the CLI's live table): rows, marks, budgets, the diff on a replan,
a window of rows for long plans, throttled redraws, and the heartbeat during a slow step."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from typing import Any

import pytest

from helpers import fake_clock
from planbook import Runner, Toolbox
from planbook.cli.demo import demo_plan, demo_planner, demo_tools
from planbook.spec.formats import plan_from_dict

rich = pytest.importorskip("rich")
from rich.console import Console  # noqa: E402

from planbook.views import ViewState  # noqa: E402
from planbook.views.terminal import MAX_ROWS, ROWS_BEFORE, TerminalView  # noqa: E402


def console() -> Console:
    return Console(file=io.StringIO(), width=100, force_terminal=False)


def output(view: TerminalView) -> str:
    return view.console.file.getvalue()


def text_of(renderable: Any) -> str:
    """What a renderable looks like on a plain 100-column console."""
    c = console()
    c.print(renderable)
    return c.file.getvalue()


def counting_tools() -> Toolbox:
    tb = Toolbox()

    @tb.tool
    def inc(x: int) -> int:
        """Add one."""
        return x + 1

    @tb.tool
    def boom() -> None:
        """Always fails."""
        raise RuntimeError("boom [bracketed]")

    return tb


def long_plan(n: int) -> Any:
    return plan_from_dict({"goal": "count", "steps": [{"id": f"s{i}", "tool": "inc", "args": {"x": i}} for i in range(1, n + 1)]})


def row(text: str, step_id: str) -> str:
    """The table line of step ``step_id``."""
    return next(line for line in text.splitlines() if f"│ {step_id} " in line)


# ------------------------------------------------------------------ what it shows
def test_rows_marks_and_budgets_of_a_run_with_a_skipped_step() -> None:
    plan = plan_from_dict({"goal": "count with a gap", "title": "Counting", "steps": [
        {"id": "one", "tool": "inc", "args": {"x": 1}, "task": "Add one to one"},
        {"id": "bad", "tool": "boom", "task": "Break"},
        {"id": "two", "tool": "inc", "args": {"x": "$one"}},
    ]})
    runner = Runner(plan, tools=counting_tools(), on_failure="skip")
    with TerminalView(runner, console=console()) as view:
        result = runner.run()
    text = output(view)
    assert result.status == "completed" and result.reason == "steps_skipped"
    assert "Counting (revision 1)" in text
    assert row(text, "one").startswith("│ [✓] │ one ") and "inc" in row(text, "one") and "Add one to one" in row(text, "one")
    assert row(text, "bad").startswith("│ [-] │ bad ") and "boom" in row(text, "bad")
    assert row(text, "two").startswith("│ [✓] │ two ") and "inc(x='$one')" in row(text, "two")
    assert "2/3 completed · steps 3/12 · replans 0/5" in text
    assert "more above" not in text and "more below" not in text  # a short plan shows every row
    assert runner.handlers == [] and not runner._heartbeats  # detached on exit


def test_a_replan_prints_the_diff_above_the_final_table() -> None:
    runner = Runner(demo_plan(), planner=demo_planner, tools=demo_tools)
    with TerminalView(runner, console=console()) as view:
        result = runner.run()
    text = output(view)
    assert result.ok
    diff = text.index("Replanned Revision 1 → 2 (after: step forecast failed: ConnectionError")
    assert "  - forecast: Get the 3-day forecast → get_forecast(city='Lisbon', days=3)  (removed)" in text
    assert "  + forecast-backup:" in text and "(added)" in text and "  ~ clothes:" in text
    table = text.index("Packing for Lisbon (revision 2)")
    assert diff < table
    assert row(text, "forecast-backup").startswith("│ [✓] ")
    assert "│ forecast " not in text  # the removed step is gone from the table
    assert "3/3 completed · steps 4/12 · replans 1/5" in text


def test_model_usage_is_shown_with_the_budgets() -> None:
    runner = Runner(long_plan(2), tools=counting_tools())
    view = TerminalView(runner, console=console())
    runner.emit("llm.call", model="m", prompt_tokens=10, completion_tokens=5)
    assert "model calls 1, tokens 15" in text_of(view.renderable(ViewState.of(runner)))


def test_brackets_in_a_diff_are_text_not_markup() -> None:
    planner = lambda goal, history, last_error: [{"id": "fix", "tool": "inc", "args": {"x": 1}, "task": "[RESEARCHER] retry"}]  # noqa: E731
    plan = plan_from_dict({"goal": "g", "steps": [{"id": "bad", "tool": "boom", "task": "[CODER] break"}]})
    runner = Runner(plan, planner=planner, tools=counting_tools())
    with TerminalView(runner, console=console()) as view:
        runner.run()
    text = output(view)
    assert "  - bad: [CODER] break" in text and "  + fix: [RESEARCHER] retry" in text
    assert "boom [bracketed]" in text


def test_text_from_steps_is_never_rich_markup() -> None:
    """A task with ``[/bold]`` crashed the table (a closing tag with nothing open); ``[data]`` vanished."""
    plan = plan_from_dict({"goal": "markup [/bold] in a goal", "steps": [
        {"id": "a", "tool": "inc", "args": {"x": 1}, "task": "close [/bold] a tag"},
        {"id": "b", "tool": "inc", "args": {"x": 2}, "task": 'keep "[data]" and [red]colour[/red]'},
        {"id": "c", "tool": "boom", "task": "[bold]fails"},
    ]})
    runner = Runner(plan, tools=counting_tools(), on_failure="skip")
    with TerminalView(runner, console=Console(file=io.StringIO(), width=120)) as view:
        result = runner.run()
    text = output(view)
    assert result.status == "completed"
    assert "close [/bold] a tag" in text and 'keep "[data]" and [red]colour[/red]' in text
    assert "[bold]fails" in text and "markup [/bold] in a goal" in text


def test_a_stdout_that_cannot_encode_the_marks_gets_ascii_marks() -> None:
    """Windows' redirected stdout is cp1252: no ✓ → ✗ (and rich draws ASCII boxes there)."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="cp1252", errors="strict", newline="\n")
    plan = plan_from_dict({"goal": "g", "steps": [
        {"id": "a", "tool": "inc", "args": {"x": 1}, "task": "one → two ✓"},
        {"id": "b", "tool": "boom"},
    ]})
    runner = Runner(plan, tools=counting_tools(), on_failure="skip")
    with TerminalView(runner, console=Console(file=stream, width=100, force_terminal=False)) as view:
        result = runner.run()
    stream.flush()
    text = raw.getvalue().decode("cp1252")
    assert result.status == "completed" and view.ellipsis == "..."
    assert "[v]" in text and "[-]" in text and "✓" not in text
    assert "one -> two ?" in text  # the arrow spelled out, the tick replaced


# ------------------------------------------------------------------ long plans
def test_a_long_plan_shows_a_window_around_the_running_step() -> None:
    runner = Runner(long_plan(1000), tools=counting_tools(), max_steps=1000)
    view = TerminalView(runner, console=console())
    above, shown, below = view.visible_rows(runner.plan.steps)
    assert (above, [s.id for s in shown], below) == (0, [f"s{i}" for i in range(1, MAX_ROWS + 1)], 1000 - MAX_ROWS)
    runner.run(until="s500")
    above, shown, below = view.visible_rows(runner.plan.steps)
    assert [s.id for s in shown][ROWS_BEFORE] == "s500" and len(shown) == MAX_ROWS
    text = text_of(view.renderable(ViewState.of(runner)))
    more = [line for line in text.splitlines() if line.startswith("│ …")]
    assert len(more) == 2 and f"{above} more above" in more[0] and f"{below} more below" in more[1]
    assert above + len(shown) + below == 1000
    assert row(text, "s500").startswith("│ [✓] ") and row(text, "s501").startswith("│ [ ] ")
    assert "500/1000 completed · steps 500/1000" in text
    assert text.count("\n│ ") == len(shown) + 2  # the window and two "more" lines, not 1,000 rows


def test_a_1000_step_run_makes_a_bounded_number_of_redraws() -> None:
    runner = Runner(long_plan(1000), tools=counting_tools(), max_steps=1000)
    clock = fake_clock(tick=0.001)  # each reading 1 ms after the last: about 2 s of run for 2,000 events
    started = time.perf_counter()
    with TerminalView(runner, console=console(), clock=clock) as view:
        result = runner.run()
    seconds = time.perf_counter() - started
    elapsed = clock.now
    bound = view.throttle.burst + view.throttle.rate * elapsed + 3  # + the first and the final draws
    print(f"1,000 steps in the terminal view: {view.events} events, {view.redraws} redraws, {seconds:.2f} s")
    assert result.ok and view.events >= 2000
    assert view.redraws <= bound <= 40
    text = output(view)
    assert "1000/1000 completed · steps 1000/1000" in text and row(text, "s1000").startswith("│ [✓] ")
    assert f"{1000 - MAX_ROWS} more above" in text and "│ s1 " not in text


# ------------------------------------------------------------------ slow steps
def test_a_slow_step_after_a_burst_is_drawn_as_running() -> None:
    """The throttle holds back the burst's last updates; the runner's heartbeat draws them
    while the slow step works, so the table does not show an earlier state meanwhile."""
    seen: dict[str, Any] = {}
    flowing: list[float] = []
    tb = counting_tools()

    @tb.tool
    def slow() -> str:
        """Take a while, looking at the table as a person watching would."""
        started = time.monotonic()
        flowing.append(started)  # the view's clock runs from now on
        before = view.redraws
        deadline = started + 10.0  # only reached when the table never catches up
        while time.monotonic() < deadline:
            text = text_of(view.live.renderable)
            if row(text, "slow").startswith("│ [→] ") and "6/7 completed" in text:
                seen["caught_up"] = time.monotonic() - started
                break
            time.sleep(0.01)
        time.sleep(0.3)
        seen["redraws"], seen["seconds"] = view.redraws - before, time.monotonic() - started
        return "done"

    steps = [{"id": f"f{i}", "tool": "inc", "args": {"x": i}} for i in range(1, 7)] + [{"id": "slow", "tool": "slow"}]
    runner = Runner(plan_from_dict({"goal": "burst then slow", "steps": steps}), tools=tb)
    # the fast steps take no time on the view's clock, so the throttle holds back all but a burst
    with TerminalView(runner, console=console(), clock=lambda: time.monotonic() if flowing else 0.0) as view:
        result = runner.run()
    print(f"terminal view: caught up {seen.get('caught_up')} s into the slow step; "
          f"{seen['redraws']} redraws in {seen['seconds']:.2f} s")
    assert result.ok
    assert "caught_up" in seen, "the table still showed an earlier state while the slow step ran"
    assert 1 <= seen["redraws"] <= view.throttle.burst + view.throttle.rate * seen["seconds"] + 1


# ------------------------------------------------------------------ the CLI
class FakeTerminal(io.StringIO):
    """Standard output that says it is a terminal, so the CLI shows the live table."""

    def isatty(self) -> bool:
        return True


def test_cli_demo_with_pace_runs_the_live_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from planbook.cli import main

    out = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["demo", "--pace", "0.01"]) == 0
    text = out.getvalue()
    assert "Replanned" in text and "Revision 1 → 2" in text
    assert "Packing for Lisbon (revision 2)" in text and "3/3 completed · steps 4/12 · replans 1/5" in text
    assert "Run completed (goal_met): steps 4/12, replans 1/5" in text
    assert text.rstrip().endswith("toothbrush, umbrella, windbreaker")


def test_paced_tools_keep_their_signatures_and_take_longer() -> None:
    from planbook.cli.app import paced

    slow = paced(demo_tools, 0.05)
    assert slow.schemas() == demo_tools.schemas()
    started = time.perf_counter()
    assert slow["write_list"].fn(items=["a"], city="X") == "Packing list for X: a"
    assert time.perf_counter() - started >= 0.05  # sleep() never returns early


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads a pseudo-terminal the Linux way")
def test_planbook_demo_with_pace_in_a_terminal_draws_the_live_table() -> None:
    """The real command in a pseudo-terminal: it shows the live table and ends with the answer."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "planbook.cli", "demo", "--pace", "0.01"],
                            stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=10) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "\x1b[" in text  # drawn for a terminal (colours, cursor moves)
    assert "Replanned" in text and "Packing for Lisbon (revision 2)" in text
    assert "3/3 completed · steps 4/12 · replans 1/5" in text
    assert "Run completed (goal_met): steps 4/12, replans 1/5" in text
    assert text.rstrip().endswith("toothbrush, umbrella, windbreaker")


def test_planbook_demo_with_pace_completes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "planbook.cli", "demo", "--pace", "0.01"], capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Run completed (goal_met): steps 4/12, replans 1/5" in proc.stdout
