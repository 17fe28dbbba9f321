"""``planbook.replay``: a finished run played again in the live view (issue 37 §1).

Its real events in their real order (a failure, a retry, a replan and its diff), at a pace a
person can click along with, step by step with a Next button, ending as the run's record; the
store only read; and ``display(planbook.PlanView(result).widget)`` showing the view.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import planbook
from helpers import Kernel, lines_run_in, started_kernel
from planbook.views import replay as replay_module
from planbook.views.live import LiveView
from planbook.views.replay import MIN_GAP, MOMENTS, Replay, RunReplay, find_run, shown_gap

pytest.importorskip("anywidget")

FIRST = """
steps:
  - {id: load, tool: load_prices}
  - {id: rate, tool: fetch_rate, args: {currency: EUR}}
  - {id: convert, tool: convert, args: {prices: $load, rate: $rate}}
"""
WORKAROUND = """
steps:
  - {id: rate_backup, tool: fetch_rate, args: {currency: EUR, source: backup}}
  - {id: convert, tool: convert, args: {prices: $load, rate: $rate_backup}}
"""


def shop_tools() -> planbook.Toolbox:
    box = planbook.Toolbox()

    @box.tool
    def load_prices() -> dict[str, float]:
        return {"coffee": 4.5}

    @box.tool
    def fetch_rate(currency: str, source: str = "primary") -> float:
        if source == "primary":
            raise ConnectionError("rate service timed out")
        return 0.9

    @box.tool
    def convert(prices: dict[str, float], rate: float) -> dict[str, float]:
        return {k: v * rate for k, v in prices.items()}

    return box


def replanned(**options: Any) -> planbook.RunResult:
    """A run whose step ``rate`` fails twice (a retry), and a replan that goes round it."""
    planner = planbook.ScriptedPlanner({None: FIRST, "timed out": WORKAROUND})
    return planbook.run("Price it", planner=planner, tools=shop_tools(), on_failure=["retry", "replan"], retries=1,
                        **options)


class Frames:
    """A live view's target that keeps what each draw showed."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, str, int, str | None]] = []

    def render(self, state: Any) -> None:
        codes = "".join(s.status.value[0] for s in state.plan.steps)
        self.frames.append((state.plan.revision, " ".join(s.id for s in state.plan.steps) + ":" + codes,
                            len(state.revisions), state.status))


def test_the_events_are_the_runs_own_in_their_order_and_the_view_follows_them() -> None:
    result = replanned()
    source = RunReplay(result)
    heard: list[Any] = []
    source.subscribe(heard.append)
    target = Frames()
    bridge = LiveView(source, target, rate=1e9, burst=1000)  # every event drawn
    while not source.done:
        source.emit()
    bridge.close()
    assert heard == list(result.events)  # the same events, the same order: nothing made up, nothing run
    shown = [f[1] for f in target.frames]
    # revision 1: load runs, rate fails, is retried and fails again; then revision 2 goes round it
    assert "load rate convert:cin" in shown and shown.count("load rate convert:cfn") >= 2
    assert shown.index("load rate convert:cfn") < shown.index("load rate_backup convert:cnn")
    assert shown[-1] == "load rate_backup convert:ccc"
    revised = [f for f in target.frames if f[0] == 2]
    assert revised and all(f[2] == 1 for f in revised)  # the diff is there once revision 2 is
    assert all(f[2] == 0 for f in target.frames if f[0] == 1 and f[1].endswith("cin"))
    # the failed execution's pane is the run's: its error, from the recorded snapshot
    assert source.state.history == result.history and target.frames[-1][3] == "completed"


def test_the_pace_stretches_short_gaps_and_speed_divides_it() -> None:
    result = replanned()
    waited: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:  # a clock of its own: the test never waits
        waited.append(seconds)
        now[0] += seconds

    player = Replay(result, speed=2.0, sleep=sleep, clock=lambda: now[0])
    player.play()
    gaps = [b.time - a.time for a, b in zip(result.events, result.events[1:])]
    assert now[0] == pytest.approx(sum(shown_gap(g, 2.0) for g in gaps))
    assert now[0] >= (len(result.events) - 1) * MIN_GAP / 2.0 - 1e-9  # a 1 ms run still takes seconds
    assert player.source.done and player.done


def test_step_mode_shows_one_moment_per_next_and_ends_as_the_record(ip: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(replay_module, "choose_view", lambda: "widget")
    result = replanned()
    player = planbook.replay(result, step=True)
    widget = player.view.widget
    assert widget.replay["next"] and widget.saved["text/html"] and not player.source.at
    assert "Next" not in widget.replay["line"] and "0 of" in widget.replay["line"]
    seen = []
    while not player.done:
        before = player.source.at
        widget._handle_custom_msg({"type": "replay", "action": "next"}, [])  # a click on Next
        moment = result.events[before:player.source.at]
        assert moment and moment[-1].kind in MOMENTS and all(e.kind not in MOMENTS for e in moment[:-1])
        seen.append(widget.statuses)
    assert seen[2] == "cnn" and "cfn" in seen and seen[-1] == "ccc"
    assert len(seen) == player.total
    assert widget.ended and widget.replay == {}  # the display is the run's record now



def test_a_next_click_on_the_kernels_widget_thread_draws_the_moment(ip: Any, monkeypatch: Any) -> None:
    """JupyterLab sends a widget's messages to a subshell of the kernel: a Next click is handled on
    that thread, not the one that made the view. Each click must draw its moment there (it was left
    pending for a thread that never drew again: the rows, panes and Timeline stayed at the start
    while the line counted the moments)."""
    import threading

    monkeypatch.setattr(replay_module, "choose_view", lambda: "widget")
    result = replanned()
    player = planbook.replay(result, step=True)
    widget = player.view.widget
    seen: list[str] = []

    def click() -> None:  # as the subshell thread does
        widget._handle_custom_msg({"type": "replay", "action": "next"}, [])
        seen.append(widget.statuses)

    for _ in range(3):
        clicker = threading.Thread(target=click)
        clicker.start()
        clicker.join()
    assert seen == ["nnn", "rnn", "cnn"], seen
    assert widget.batch["bars"] and not player.bridge.pending
    player.finish()


def interrupted_then_resumed(tmp_path: Any, steps: int = 3) -> planbook.RunResult:
    """A run Ctrl-C stopped at its step s1 (a ``run.finished``, interrupted), resumed to its end."""
    stop = [True]
    box = planbook.Toolbox()

    @box.tool
    def ok(label: str) -> str:
        if label == "x1" and stop:
            stop.clear()
            raise KeyboardInterrupt
        return label

    path = str(tmp_path / "runs.sqlite")
    spec = "steps:\n" + "".join(f"  - {{id: s{i}, tool: ok, args: {{label: x{i}}}}}\n" for i in range(steps))
    assert planbook.run(spec, tools=box, store=path).status == "interrupted"
    return planbook.resume(store=path, tools=box)


def test_a_run_interrupted_and_resumed_plays_its_interruption_and_leaves_the_result_alone(tmp_path: Any) -> None:
    # the interrupt's run.finished is not the run's end: the replay showed the finished run there (all
    # done, the whole history) and then set the result's own plan's steps back to running
    result = interrupted_then_resumed(tmp_path)
    kinds = [e.kind for e in result.events]
    assert kinds.count("run.finished") == 2 and result.status == "completed"
    steps = list(result.plan.steps)
    source = RunReplay(result)
    seen = []
    while not source.done:
        event = source.emit()
        seen.append((event.kind, source.state.status, "".join(s.status.value[0] for s in source.state.plan.steps),
                     len(source.state.history)))
        assert source.state.plan is not result.plan or source.done
        assert result.plan.steps == steps and all(a is b for a, b in zip(result.plan.steps, steps))
    interrupted = seen[kinds.index("run.finished")]
    assert interrupted[1] == "interrupted" and interrupted[2].startswith("c") and interrupted[3] == 1, seen
    assert [h for *_, h in seen] == sorted(h for *_, h in seen)  # the history only grows
    assert seen[-1][1:] == ("completed", "ccc", len(result.history))


def test_a_long_run_replays_in_work_linear_in_its_events() -> None:
    """Each event finds its step's row at once: a scan of the plan per event made a 16,000-step run's
    replay take 78 s of work (0.3 s now). Counted in lines of this module run, not timed."""

    box = planbook.Toolbox()

    @box.tool
    def ok(label: str) -> str:
        return label

    def lines_run(n: int) -> int:
        spec = "steps:\n" + "".join(f"  - {{id: s{i}, tool: ok, args: {{label: x{i}}}}}\n" for i in range(n))
        result = planbook.run(spec, tools=box, max_steps=n)

        def replay_all() -> None:
            source = RunReplay(result)
            while not source.done:
                source.emit()

        return lines_run_in(replay_module, replay_all)

    small, large = lines_run(100), lines_run(800)
    assert large < 10 * small, (small, large)  # 8× the steps: 8× the work, not 64×


def test_an_ended_replay_lets_go_of_its_view_and_few_step_replays_stay_open(monkeypatch: Any) -> None:
    import gc
    import weakref

    monkeypatch.setattr(replay_module, "choose_view", lambda: "widget")
    monkeypatch.setattr(replay_module, "display", lambda *a, **k: None)
    result = replanned()
    played = planbook.replay(result, speed=100.0)
    assert played.done and played.view is None  # a replay kept as a cell's value (Out) holds no view
    players = [planbook.replay(result, step=True) for _ in range(replay_module.STEP_OPEN + 2)]
    views = [weakref.ref(p.view) if p.view is not None else None for p in players[-replay_module.STEP_OPEN:]]
    # a step replay left unfinished holds its view (its Next button); an older one ended as its record
    assert [p.done for p in players] == [True, True] + [False] * replay_module.STEP_OPEN
    assert replay_module.STEPPING == players[2:]
    for player in players[2:]:
        player.finish()
    gc.collect()
    assert replay_module.STEPPING == [] and all(v is not None and v() is None for v in views)


def test_a_replay_reads_the_store_and_never_writes_it(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(replay_module, "choose_view", lambda: "widget")
    monkeypatch.setattr(replay_module, "display", lambda *a, **k: None)
    path = tmp_path / "runs.sqlite"
    stored = replanned(store=str(path))
    runs_before = [s.run_id for s in planbook.runs(store=str(path))]
    # the store and its write-ahead log (not SQLite's -shm index, which every reader updates)
    files = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir() if p.suffix != ".sqlite-shm"}
    for name in (stored.run_id, "price-it"):  # a run id, a plan name (its latest run)
        now = [0.0]  # the replay's own clock, moved on by its sleeps: no wait, and no spin on the real clock
        player = Replay(find_run(name, store=str(path)), speed=100.0, sleep=lambda s: now.__setitem__(0, now[0] + s),
                        clock=lambda: now[0]).show("widget").play()
        assert player.done and player.result.run_id == stored.run_id
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()
            if p.suffix != ".sqlite-shm"} == files and "runs.sqlite" in files
    assert [s.run_id for s in planbook.runs(store=str(path))] == runs_before


def test_a_bad_run_or_speed_is_a_clear_error(tmp_path: Any) -> None:
    path = tmp_path / "runs.sqlite"
    replanned(store=str(path))
    with pytest.raises(planbook.RunNotFound, match=r"no run or plan 'price-iit'.*price-it"):
        planbook.replay("price-iit", store=str(path))
    missing = tmp_path / "none.sqlite"
    with pytest.raises(planbook.RunNotFound, match="there is no run store at"):
        planbook.replay("x", store=str(missing))
    assert not missing.exists()
    with pytest.raises(ValueError, match="speed=0"):
        planbook.replay(replanned(), speed=0)
    with pytest.raises(TypeError, match="RunResult, a run id or a plan name"):
        planbook.replay(42)  # type: ignore[arg-type]


def test_replay_where_no_live_view_can_show_says_so(monkeypatch: Any) -> None:
    monkeypatch.setattr(replay_module, "choose_view", lambda: "plain")
    with pytest.raises(RuntimeError, match="no notebook kernel"):
        planbook.replay(replanned())


# ------------------------------------------------------------------ the README's one-liner, in a kernel
SETUP = """
import planbook
box = planbook.Toolbox()

@box.tool
def ok() -> str:
    return "ok"

result = planbook.run("steps:\\n  - {id: a, tool: ok}\\n", tools=box)
"""


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel(SETUP, needs=("jupyter_client", "anywidget"))


def test_the_readme_one_liner_shows_the_view_and_keeps_its_record(kernel: Kernel) -> None:
    reply, messages = kernel.execute("display(planbook.PlanView(result).widget)")
    assert reply["status"] == "ok"
    shown = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]
    assert len(shown) == 1
    widget = shown[0].get("application/vnd.jupyter.widget-view+json")
    assert widget, f"the one-liner showed no widget: {shown[0]['text/plain']}"
    # the cell has ended: the widget is still open (its display shows it), with the record to save
    reply, messages = kernel.execute(
        "import gc; gc.collect()\n"
        "from ipywidgets.widgets import widget as registry\n"
        # ipywidgets 8.1 keeps live widgets in a module dict; 8.0 (the lowest pin) on the class
        "instances = getattr(registry, '_instances', None) or registry.Widget._active_widgets\n"
        f"w = instances.get({widget['model_id']!r})\n"
        "print(w is not None and w.comm is not None, 'planbook-record' in (w.saved.get('text/html') or ''))")
    assert reply["status"] == "ok", reply
    text = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    assert text.split() == ["True", "True"], text
    assert os.environ.get("PLANBOOK_UNSAFE_UNMASKED") is None
