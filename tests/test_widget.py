"""The live plan view, read through its traits; the throttled bridge; the fallback without ipywidgets."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
from helpers import fake_clock

import planbook
from planbook import Plan, Runner, ScriptedPlanner, Status, Toolbox
from planbook.liveview import HtmlView, LiveView, Throttle, ViewState, show_live, watch, widgets_available
from planbook.spec import plan_from_dict
from planbook.textview import format_markdown, format_plan

widgets = pytest.importorskip("ipywidgets")
from ipywidgets.widgets import widget as widget_module  # noqa: E402

from planbook.widget import PlanView  # noqa: E402




class Table:
    """Stands in for a DataFrame: something with a rich HTML repr."""

    def __init__(self, rows: list[tuple[str, int]]) -> None:
        self.rows = rows

    def _repr_html_(self) -> str:
        return "<table>" + "".join(f"<tr><td>{a}</td><td>{b}</td></tr>" for a, b in self.rows) + "</table>"

    def __repr__(self) -> str:
        return f"Table({len(self.rows)} rows)"


def make_tools(fail: dict[str, int] | None = None) -> Toolbox:
    failures = dict(fail or {})
    tb = Toolbox()

    @tb.tool
    def load(name: str) -> Table:
        """Load a table."""
        print(f"loading {name}")
        return Table([(name, 1), (name, 2)])

    @tb.tool
    def fetch(source: str) -> str:
        """Fetch a source; fails while the test says it is down."""
        if failures.get(source, 0) > 0:
            failures[source] -= 1
            print(f"trying {source}")
            raise ConnectionError(f"{source} is down")
        return f"text of {source}"

    @tb.tool
    def inc(x: int) -> int:
        """Add one."""
        return x + 1

    return tb


PLAN = """\
goal: Summarise <two> sources & a table
steps:
  - {id: load, tool: load, args: {name: sales}, task: Load the sales table}
  - {id: a, tool: fetch, args: {source: alpha}, task: Fetch alpha}
  - {id: b, tool: fetch, args: {source: beta}, task: Fetch beta}
"""


def replanned_run() -> tuple[Runner, PlanView, LiveView]:
    planner = ScriptedPlanner({None: PLAN, "beta is down": [
        {"id": "b2", "tool": "fetch", "args": {"source": "gamma"}, "task": "Fetch gamma instead"},
    ]})
    runner = Runner("Summarise two sources", planner=planner, tools=make_tools({"beta": 1}), clock=fake_clock())
    view = PlanView(runner)
    bridge = LiveView(runner, view, clock=fake_clock())
    runner.run()
    bridge.close()
    return runner, view, bridge


def active_widgets() -> int:
    # ipywidgets 8.1 keeps live widgets in a module dict; 8.0 (the lowest we support) on the class
    instances = getattr(widget_module, "_instances", None)
    return len(widget_module.Widget._active_widgets if instances is None else instances)


# ------------------------------------------------------------------ after a run
def test_view_after_a_run_with_a_replan() -> None:
    runner, view, bridge = replanned_run()
    assert runner.state.status == "completed"
    rows = view.rows.value
    assert rows.count('class="planbook-step ') == 3
    for sid in ("load", "a", "b2"):
        assert f'data-step="{sid}"' in rows
    assert rows.count("[✓]") == 3 and "[ ]" not in rows
    assert (view.progress.value, view.progress.max, view.progress.bar_style) == (3, 3, "success")
    header = view.header.value
    assert "Summarise two sources" in header and "revision 2" in header
    assert "steps 4/12 · replans 1/5" in header
    assert "elapsed" in header
    assert "Run completed (goal_met)" in view.verdict.value
    history = view.revisions.value
    assert "Revision 1 → 2" in history and "beta is down" in history
    assert "<del>b: Fetch beta → fetch(source=&#x27;beta&#x27;)</del>" in history
    assert "<ins" in history and "b2: Fetch gamma instead" in history
    assert bridge.updates >= 1 and view.renders >= bridge.updates


def test_view_shows_failure_in_red_and_the_error() -> None:
    runner = Runner(PLAN, tools=make_tools({"alpha": 9}))
    view = PlanView(runner)
    bridge = LiveView(runner, view)
    runner.run()
    bridge.close()
    assert view.progress.bar_style == "danger"
    assert "Run failed (aborted)" in view.verdict.value and "#b71c1c" in view.verdict.value
    assert "ConnectionError: alpha is down" in view.rows.value
    assert 'class="planbook-step planbook-failed"' in view.rows.value


def test_result_pane_is_built_when_a_step_is_opened() -> None:
    runner, view, _ = replanned_run()
    assert view.panes == {} and view.pane_box.children == ()
    before = active_widgets()
    pane = view.open("load")
    assert active_widgets() - before <= 8  # one small pane, not one per step
    assert view.pane("load") is pane and view.pane_box.children == (pane,)
    assert view.chooser.value == "load"
    info, out = pane.children
    assert "Load the sales table" in info.value and "[✓] completed" in info.value
    label1, rich, label2, printed = out.outputs
    assert (label1["data"]["text/plain"], label2["data"]["text/plain"]) == ("returned:", "printed:")
    assert rich["output_type"] == "display_data"
    assert rich["data"]["text/html"].startswith("<table><tr><td>sales</td>")  # displayed richly
    assert rich["data"]["text/plain"] == "Table(2 rows)"
    assert printed == {"output_type": "stream", "name": "stdout", "text": "loading sales\n"}
    assert 'outline:2px solid' in view.rows.value  # the open row is marked


def test_pane_of_a_failed_step_shows_error_traceback_and_notes() -> None:
    runner = Runner(PLAN, tools=make_tools({"beta": 9}), on_failure="skip")
    runner.run()
    view = PlanView(runner)
    info, out = view.open("b").children
    assert "skipped" in info.value and "ConnectionError: beta is down" in info.value
    assert "skipped after: ConnectionError" in info.value  # the step's notes
    _, printed, label, error = out.outputs
    assert label["data"]["text/plain"] == "error:"
    assert printed["text"] == "trying beta\n"
    assert error["name"] == "stderr" and "Traceback (most recent call last)" in error["text"]
    assert "ConnectionError: beta is down" in error["text"]


def test_choosing_in_the_dropdown_opens_and_closes_a_pane() -> None:
    runner, view, _ = replanned_run()
    assert (view.chooser.index, view.chooser.label) == (0, "— choose a step —")  # not a blank box
    view.chooser.value = "a"  # what a click in the dropdown does
    assert view.open_id == "a" and view.pane("a") is not None
    assert view.pane_box.children == (view.pane("a"),) and view.chooser.label.startswith("a. ")
    view.chooser.index = 0  # what choosing the first entry does
    assert view.open_id is None and view.pane_box.children == ()
    assert view.pane("a") is not None  # kept for reopening
    assert view.chooser.label == "— choose a step —"
    view.open("b2")
    view.close_pane()
    assert (view.chooser.index, view.chooser.label) == (0, "— choose a step —")


def test_a_new_view_names_its_chooser_entry() -> None:
    view = PlanView(Plan.parse(PLAN))
    assert view.chooser.get_state()["index"] == 0 and view.chooser.label == "— choose a step —"


def test_open_pane_follows_a_retry() -> None:
    tools = make_tools({"alpha": 1})
    runner = Runner(PLAN, tools=tools, on_failure="retry", retries=1)
    view = PlanView(runner)
    bridge = LiveView(runner, view)
    runner.run(until="a")  # alpha fails once, is retried, then completes
    bridge.close()
    view.open("a")
    info, out = view.pane("a").children
    assert "attempts</th><td" in info.value and ">2</td>" in info.value
    assert out.outputs[1]["data"]["text/plain"] == "'text of alpha'"
    assert all(o.get("name") != "stderr" for o in out.outputs)


def test_unknown_step_cannot_be_opened() -> None:
    view = PlanView(Plan.parse(PLAN))
    with pytest.raises(KeyError, match="no step 'zz'"):
        view.open("zz")


# ------------------------------------------------------------------ mimebundle
def test_mimebundle_text_is_the_plan_text() -> None:
    runner, view, _ = replanned_run()
    data = view._repr_mimebundle_()
    assert data["text/plain"] == format_plan(runner.plan)
    assert data["text/markdown"] == format_markdown(runner.plan)
    assert data["text/html"] == runner.plan._repr_mimebundle_()["text/html"]
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == view.widget.model_id


def test_mimebundle_is_deterministic() -> None:
    plan = Plan.parse(PLAN, id="p")
    one, two = PlanView(plan)._repr_mimebundle_(), PlanView(plan)._repr_mimebundle_()
    for key in ("text/plain", "text/html", "text/markdown"):
        assert one[key] == two[key]
    assert one["application/vnd.jupyter.widget-view+json"] != two["application/vnd.jupyter.widget-view+json"]


# ------------------------------------------------------------------ many steps
def long_plan(n: int) -> Plan:
    return plan_from_dict({"goal": "count", "steps": [{"id": str(i), "tool": "inc", "args": {"x": i}} for i in range(1, n + 1)]})


def test_a_long_plan_creates_no_widget_per_step() -> None:
    before = active_widgets()
    PlanView(long_plan(3))
    small = active_widgets() - before
    before = active_widgets()
    view = PlanView(long_plan(1000))
    assert active_widgets() - before == small
    assert view.panes == {}
    assert view.rows.value.count('class="planbook-step ') == view.page_size
    assert len(view.chooser.options) == view.page_size + 1


def test_a_1000_step_run_sends_a_bounded_number_of_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [0]
    original = widgets.Widget._send

    def count(self: Any, msg: Any, buffers: Any = None) -> None:
        messages[0] += 1
        original(self, msg, buffers)

    monkeypatch.setattr(widgets.Widget, "_send", count)
    runner = Runner(long_plan(1000), tools=make_tools(), max_steps=1000)
    view = PlanView(runner)
    clock = fake_clock(tick=0.001)  # each event 1 ms after the last: ~2 s of run for 2,000 events
    before = active_widgets()
    bridge = LiveView(runner, view, clock=clock)
    runner.run()
    bridge.close()
    elapsed = clock.now
    assert runner.state.status == "completed" and bridge.events >= 2000
    bound = bridge.throttle.burst + bridge.throttle.rate * elapsed + 2  # + the final flush
    print(f"1,000 steps: {bridge.events} events, {bridge.updates} view updates, {messages[0]} widget messages, "
          f"{elapsed:.1f} s of fake time")
    assert bridge.updates <= bound <= 40
    assert messages[0] <= 12 * bridge.updates  # a few changed traits per update, batched
    assert active_widgets() == before  # running built no widgets
    assert view.page == view.pages - 1 and "[✓]" in view.rows.value and "[ ]" not in view.rows.value
    assert view.progress.value == 1000


def test_throttle_is_a_token_bucket() -> None:
    now = [0.0]
    throttle = Throttle(rate=10, burst=3, clock=lambda: now[0])
    assert [throttle.allow() for _ in range(5)] == [True, True, True, False, False]
    now[0] += 0.1
    assert [throttle.allow() for _ in range(2)] == [True, False]
    now[0] += 10
    assert sum(throttle.allow() for _ in range(10)) == 3  # a long pause does not save up more than a burst


def test_final_state_is_flushed_at_pause_and_finish() -> None:
    runner = Runner(long_plan(50), tools=make_tools())
    view = PlanView(runner)
    bridge = LiveView(runner, view, rate=0.0, burst=0)  # nothing but the forced flushes
    runner.run(until="7")
    assert bridge.updates == 1 and view.state.status == "paused"
    assert view.progress.value == 7 and "paused after step 7" in view.verdict.value
    runner.run()
    assert bridge.updates == 2 and "step budget" in view.verdict.value
    bridge.close()
    assert bridge.updates == 2


def test_a_slow_step_after_a_burst_shows_as_running_while_it_works() -> None:
    """The token bucket holds back updates in a burst of fast steps; the runner's heartbeat
    draws them while the next (slow) step works, so the view does not show a stale state."""
    seen: dict[str, Any] = {}
    tb = make_tools()
    fast = [f"f{i}" for i in range(1, 7)]

    @tb.tool
    def slow() -> str:
        """Take a while (polls the view from inside the step, as a person watching would)."""
        started = time.monotonic()
        flowing.append(started)  # the view's clock runs from now on
        deadline = started + 10.0  # only reached when the view never catches up
        while time.monotonic() < deadline:
            rows = view.rows.value  # what the view last drew (its state shares the runner's live steps)
            if 'class="planbook-step planbook-in_progress" data-step="s"' in rows and view.progress.value == 6:
                seen["caught_up"] = time.monotonic() - started
                break
            time.sleep(0.01)
        time.sleep(0.5)  # the rest of the slow step: redraws must stay throttled
        seen["updates_during"] = bridge.updates - seen["updates_before"]
        seen["seconds"] = time.monotonic() - started
        return "done"

    steps = [{"id": f, "tool": "inc", "args": {"x": i}} for i, f in enumerate(fast)] + [{"id": "s", "tool": "slow"}]
    runner = Runner(plan_from_dict({"goal": "burst then slow", "steps": steps}), tools=tb)
    view = PlanView(runner)
    # the fast steps take no time at all on the view's clock (however slow this machine
    # is), so the bucket holds back every update after the burst; then time flows
    flowing: list[float] = []
    bridge = LiveView(runner, view, rate=10.0, burst=3, clock=lambda: time.monotonic() if flowing else 0.0)
    runner.subscribe(lambda e: seen.setdefault("updates_before", bridge.updates) if e.step == "s" else None)
    assert bridge.beat in runner._heartbeats  # the view is a heartbeat of the runner while attached
    result = runner.run()
    bridge.close()
    assert result.ok and bridge.beat not in runner._heartbeats
    print(f"burst then a slow step: view caught up after {seen.get('caught_up')} s; "
          f"{seen['updates_during']} updates in {seen['seconds']:.2f} s of slow step")
    assert "caught_up" in seen, "the view still showed an earlier state while the slow step ran"
    assert 1 <= seen["updates_during"] <= bridge.throttle.burst + bridge.throttle.rate * seen["seconds"] + 1
    assert view.progress.value == 7 and view.state.status == "completed"


def test_events_from_another_thread_wait_for_the_view_thread() -> None:
    runner = Runner(long_plan(3), tools=make_tools())
    view = PlanView(runner)
    bridge = LiveView(runner, view)
    worker = threading.Thread(target=runner.run)
    worker.start()
    worker.join()
    assert bridge.updates == 0 and bridge.pending  # no widget was touched off the thread that made the view
    bridge.close()
    assert bridge.updates == 1 and view.progress.value == 3


def test_short_plans_have_no_pager() -> None:
    view = PlanView(long_plan(25), page_size=25)
    assert view.pages == 1 and view.pager.layout.display == "none"


def test_paging_follows_the_run_until_the_user_pages() -> None:
    runner = Runner(long_plan(60), tools=make_tools(), max_steps=100)
    view = PlanView(runner, page_size=25)
    assert view.pages == 3 and view.pager.layout.display == "flex"
    assert view.page_label.value == "rows 1–25 of 60" and view.prev_button.disabled
    runner.run(until="30")
    view.render(runner)
    assert view.page == 1 and view.page_label.value == "rows 26–50 of 60"
    view.next_button.click()
    assert view.page == 2 and not view.follow and view.next_button.disabled
    runner.run()
    view.render(runner)
    assert view.page == 2
    view.open("3")
    assert view.page == 0 and 'data-step="3"' in view.rows.value


def test_view_of_a_result_and_of_a_plan() -> None:
    result = planbook.run(PLAN, tools=make_tools())
    view = PlanView(result)
    assert view.progress.value == 3 and "Run completed" in view.verdict.value
    plain = PlanView(Plan.parse(PLAN))
    assert plain.verdict.value == "" and "steps 0/" not in plain.header.value
    with pytest.raises(TypeError, match="a view shows a Plan"):
        PlanView(42)


# ------------------------------------------------------------------ choosing the view
def test_widgets_need_a_kernel_with_comms() -> None:
    class Terminal:
        pass

    class Kernel:
        kernel = object()

    assert widgets_available(Terminal()) is False
    assert widgets_available(Kernel()) is True


def test_no_ipywidgets_means_the_html_fallback(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import planbook.liveview as liveview

    class Kernel:
        kernel = object()

    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # `import ipywidgets` now raises ImportError
    assert widgets_available(Kernel()) is False
    monkeypatch.setattr(ip, "kernel", object(), raising=False)  # a kernel (with an HTML front end), no ipywidgets
    published: list[dict[str, Any]] = []

    def publish(data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None, update: bool = False, **kw: Any) -> None:
        published.append({"data": data, "id": (transient or {}).get("display_id"), "update": update})

    monkeypatch.setattr(ip.display_pub, "publish", publish)
    runner = Runner(long_plan(200), tools=make_tools(), max_steps=200)
    bridge = show_live(runner, clock=fake_clock())
    assert isinstance(bridge.target, HtmlView)
    runner.run()
    bridge.close()
    first, *updates = published
    assert not first["update"] and first["data"]["text/plain"] == format_plan(long_plan(200))
    assert len(updates) == bridge.updates and 2 <= bridge.updates <= 10
    assert all(u["update"] and u["id"] == first["id"] for u in updates)
    assert updates[-1]["data"]["text/plain"] == format_plan(runner.plan)
    assert "Run completed (goal_met): steps 200/200" in updates[-1]["data"]["text/html"]
    assert updates[-1]["data"]["text/html"].count('<tr class="planbook-step ') == 200  # the final state: every row
    running = [u["data"]["text/html"] for u in updates if "Run running" in u["data"]["text/html"]]
    assert running, "no update while the run was going"
    for page in running:  # while running: a window of rows around the running step
        assert page.count('<tr class="planbook-step ') == liveview.LIVE_ROWS
        assert "steps below" in page or "steps above" in page


def test_outside_ipython_there_is_no_live_view(monkeypatch: pytest.MonkeyPatch) -> None:
    import planbook.liveview as liveview

    monkeypatch.setattr(liveview, "_shell", lambda: None)
    runner = Runner(long_plan(2), tools=make_tools())
    assert show_live(runner) is None and runner.handlers == []
    with watch(runner) as bridge:
        assert bridge is None
        assert runner.run().ok


def test_watch_shows_a_view_while_the_block_runs(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import planbook.liveview as liveview

    monkeypatch.setattr(liveview, "widgets_available", lambda shell=None: True)
    monkeypatch.setattr(ip.display_pub, "publish", lambda *a, **k: None)
    runner = Runner(long_plan(5), tools=make_tools())
    with watch(runner) as bridge:
        assert isinstance(bridge.target, PlanView) and runner.handlers == [bridge]
        runner.run()
    assert runner.handlers == [] and bridge.target.progress.value == 5


def test_view_state_of_a_runner_counts_model_calls() -> None:
    runner = Runner(long_plan(2), tools=make_tools())
    runner.emit("llm.call", model="m", prompt_tokens=10, completion_tokens=5)
    state = ViewState.of(runner)
    assert (state.usage.calls, state.usage.total_tokens) == (1, 15)
    view = PlanView(state)
    assert "model calls 1, tokens 15" in view.header.value
    assert view.state.plan.steps[0].status is Status.not_started


def test_a_view_that_fails_to_draw_says_so_once_and_the_run_goes_on() -> None:
    from planbook.liveview import LiveView

    class Broken:
        def render(self, state: object) -> None:
            raise RuntimeError("front end gone")

    runner = Runner("steps: [{id: a, tool: inc, args: {x: 1}}, {id: b, tool: inc, args: {x: $a}}]",
                    tools=make_tools({}))
    view = LiveView(runner, Broken())
    with pytest.warns(UserWarning, match=r"the live view of plan .* stopped updating \(RuntimeError: front end gone\); "
                                         r"the run goes on"):
        result = runner.run()
    assert result.ok and view not in runner.handlers and view.beat not in runner._heartbeats
