"""The live plan view, read through its traits; the throttled bridge; the fallback without ipywidgets."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from typing import Any

import pytest

import planbook
from helpers import fake_clock
from planbook import Plan, Runner, ScriptedPlanner, Status, Toolbox
from planbook.spec.formats import plan_from_dict
from planbook.views.live import HtmlView, LiveView, Throttle
from planbook.views.show import show_live, watch, widgets_available
from planbook.views.state import LIVE_ROWS, ViewState
from planbook.views.text import format_markdown, format_plan

widgets = pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")
from ipywidgets.widgets import widget as widget_module  # noqa: E402

from planbook.views.widget import EAGER_ROWS, PlanView  # noqa: E402


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
    assert [r[0] for r in view.rows] == ["load", "a", "b2"] and view.statuses == "ccc"
    head = view.head
    assert (head["title"], head["revision"], head["done"], head["total"]) == ("Summarise two sources", 2, 3, 3)
    assert head["verdict"] == "Run completed (goal_met): steps 4/12, replans 1/5" and head["tone"] == "ok"
    assert head["elapsed"] is not None
    (diff,) = view.revisions
    assert diff["removed"] == ["b"] and diff["added"] == ["b2"] and "beta is down" in diff["reason"]
    assert diff["steps"]["b"] == "Fetch beta → fetch(source='beta')"
    assert bridge.updates >= 1 and view.renders >= bridge.updates
    # every execution is a bar of the timeline, the failed one included
    bars = sorted(view._bars.values(), key=lambda b: b[4])
    assert [(b[0], b[6]) for b in bars] == [("load", True), ("a", True), ("b", False), ("b2", True)]
    assert head["critical"], "a finished run names its critical path"


def test_view_shows_failure_and_the_error() -> None:
    runner = Runner(PLAN, tools=make_tools({"alpha": 9}))
    view = PlanView(runner)
    bridge = LiveView(runner, view)
    runner.run()
    bridge.close()
    assert view.head["tone"] == "bad" and view.head["verdict"] == "Run failed (aborted): steps 2/12, replans 0/5"
    assert view.statuses == "cfn"
    assert view.pane("a")["error"] == "ConnectionError: alpha is down"


def test_panes_are_sent_as_steps_run_so_the_browser_can_open_them_during_the_run() -> None:
    sent: list[dict[str, Any]] = []
    runner = Runner(PLAN, tools=make_tools(), clock=fake_clock())
    view = PlanView(runner)
    view.widget.observe(lambda change: sent.append(change["new"]), names="batch")
    bridge = LiveView(runner, view, clock=fake_clock(), rate=1000, burst=1000)

    def look(event: Any) -> None:
        if event.kind == "step.started" and event.step == "b":  # b runs: load and a must be in the browser already
            seen = {sid for batch in sent for sid in batch["panes"]}
            assert {"load", "a"} <= seen
            assert all(b["seq"] == i + 1 for i, b in enumerate(sent))  # numbered, so a gap is noticed

    runner.subscribe(look)
    runner.run()
    bridge.close()
    load = view.pane("load")
    assert load["status"] == "completed" and load["call"] == "load(name='sales')"
    assert load["result"].startswith("<table><tbody><tr><td>sales</td>")  # displayed richly (as the sanitiser parses it)
    assert load["output"] == "loading sales\n" and load["duration"] is not None
    assert view.open("load") is load and view.selected == "load"


def test_pane_of_a_failed_step_has_the_error_notes_and_a_traceback_from_the_users_code() -> None:
    runner = Runner(PLAN, tools=make_tools({"beta": 9}), on_failure="skip")
    runner.run()
    view = PlanView(runner)
    pane = view.pane("b")
    assert pane["status"] == "skipped" and pane["error"] == "ConnectionError: beta is down"
    assert pane["notes"].startswith("skipped after: ConnectionError")
    assert pane["output"] == "trying beta\n"
    tb = pane["traceback"]
    assert tb.startswith("Traceback (most recent call last):\n")
    frames = [line for line in tb.splitlines() if line.startswith('  File "')]
    assert frames and "test_widget.py" in frames[0]  # the first frame is the user's tool, not planbook's
    assert not any("/planbook/" in f for f in frames)
    assert "/planbook/" in runner.plan.step("b").traceback  # the engine's traceback has them


def test_call_shows_the_values_passed_not_the_references() -> None:
    tb = make_tools()
    runner = Runner("steps:\n  - {id: one, tool: inc, args: {x: 1}}\n  - {id: two, tool: inc, args: {x: $one}}\n",
                    tools=tb)
    view = PlanView(runner)
    runner.run(until="one")
    view.render(runner)
    assert "two" not in view.panes  # not started: its call waits for one's value
    runner.run()
    view.render(runner)
    assert view.pane("two")["call"] == "inc(x=2)"


def test_a_multi_line_string_result_is_shown_as_text() -> None:
    tb = Toolbox()

    @tb.tool
    def poem() -> str:
        """Two lines."""
        return "The fog comes\non <little> cat feet."

    runner = Runner("steps: [{id: p, tool: poem}]", tools=tb)
    runner.run()
    pane = PlanView(runner).pane("p")
    assert pane["result"] == '<pre class="pb-text">The fog comes\non &lt;little&gt; cat feet.</pre>'


def test_panes_are_capped_per_step_and_say_where_the_full_value_is() -> None:
    tb = Toolbox()

    @tb.tool
    def big(n: int) -> str:
        """A long text."""
        print("x" * n)
        return "line\n" * n

    runner = Runner("steps: [{id: huge, tool: big, args: {n: 100000}}, {id: small, tool: big, args: {n: 3}}]", tools=tb)
    runner.run()
    view = PlanView(runner)
    huge, small = view.pane("huge"), view.pane("small")
    assert len(json.dumps(huge)) <= 52_000
    assert huge["truncated"] == "truncated; the full value is in result.outputs['huge']"
    assert "truncated" not in small and small["result"].count("line") == 3


def test_the_panes_of_a_view_are_capped_in_total(monkeypatch: pytest.MonkeyPatch) -> None:
    import planbook.views.panes as panes

    monkeypatch.setattr(panes, "TOTAL_CAP", 30_000)
    tb = Toolbox()

    @tb.tool
    def text(i: int) -> str:
        """Ten thousand characters."""
        return f"{i}:" + "y" * 10_000

    steps = [{"id": f"t{i}", "tool": "text", "args": {"i": i}} for i in range(6)]
    runner = Runner(plan_from_dict({"goal": "g", "steps": steps}), tools=tb)
    runner.run()
    view = PlanView(runner)
    sizes = [len(json.dumps(view.pane(f"t{i}"))) for i in range(6)]
    assert sum(sizes) <= 34_000
    assert "truncated" not in view.pane("t0") and "truncated" in view.pane("t5")
    assert view.pane("t5")["status"] == "completed"  # the pane still says how the step went


def test_a_view_of_a_result_and_of_a_plan() -> None:
    result = planbook.run(PLAN, tools=make_tools())
    view = PlanView(result)
    assert view.statuses == "ccc" and view.head["verdict"].startswith("Run completed")
    plain = PlanView(Plan.parse(PLAN))
    assert plain.head["verdict"] == "" and plain.head["budgets"] == "" and plain.statuses == "nnn"
    assert plain.panes == {}
    with pytest.raises(TypeError, match="a view shows a Plan"):
        PlanView(42)


def test_unknown_step_cannot_be_opened() -> None:
    view = PlanView(Plan.parse(PLAN))
    with pytest.raises(KeyError, match="no step 'zz'"):
        view.open("zz")


def test_a_browser_that_missed_a_batch_gets_everything_again() -> None:
    runner = Runner(PLAN, tools=make_tools())
    runner.run()
    view = PlanView(runner)
    before = view.batch["seq"]
    view._on_front_end(view, {"type": "resend"}, [])
    assert view.batch["full"] and view.batch["seq"] == before + 1
    assert set(view.batch["panes"]) == {"load", "a", "b"} and len(view.batch["bars"]) == 3


# ------------------------------------------------------------------ mimebundle
def test_mimebundle_has_the_widget_and_the_state_as_text_and_html() -> None:
    plan = Plan.parse(PLAN, id="p")
    view = PlanView(plan)
    data, _ = view._repr_mimebundle_()
    assert data["text/plain"] == format_plan(plan) and data["text/markdown"].startswith(format_markdown(plan))
    assert "mathjax_ignore tex2jax_ignore" in data["text/html"]
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == view.widget.model_id


def test_a_long_plans_live_display_is_one_line_of_text_not_the_whole_plan() -> None:
    # the first display of a live view costs what the run's record will replace: a window of rows
    # in HTML and one line of text for a long plan (its whole text and Markdown are the record's)
    from planbook.views.live import LIVE_NOTE

    box = Toolbox()
    box.tool(lambda x: x, name="same")
    long = Runner("steps:\n" + "".join(f"  - {{id: s{i}, tool: same, args: {{x: {i}}}}}\n" for i in range(LIVE_ROWS + 1)),
                  tools=box, max_steps=LIVE_ROWS + 1)
    data, _ = PlanView(long, note=LIVE_NOTE)._repr_mimebundle_()
    assert data["text/plain"].startswith(f"Plan {long.plan.display_title}: 0/{LIVE_ROWS + 1} steps completed")
    assert "\n" not in data["text/plain"] and "text/markdown" not in data
    assert f"{LIVE_ROWS + 1 - LIVE_ROWS} steps below" in data["text/html"]
    short = Plan.parse(PLAN, id="p")
    data, _ = PlanView(short, note=LIVE_NOTE)._repr_mimebundle_()
    assert data["text/plain"] == format_plan(short) and data["text/markdown"].startswith(format_markdown(short))


def test_a_view_of_a_run_that_ended_displays_its_static_record_with_the_open_pane_open() -> None:
    runner, view, _ = replanned_run()
    view.open("load")
    data, metadata = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in data and metadata == {}
    assert data["text/plain"] == str(runner.result())
    assert "text/markdown" not in data  # the record is its text and its HTML (every front end shows the HTML)
    assert "Run completed (goal_met)" in data["text/html"] and "planbook-record" in data["text/html"]
    opened = re.findall(r'<tr data-step="([^"]+)"[^>]*>(?:(?!</tr>).)*?<details '
                        r'class="planbook-pane" open>', data["text/html"], re.S)
    assert opened == ["load"]


def test_mimebundle_is_deterministic() -> None:
    plan = Plan.parse(PLAN, id="p")
    one, two = PlanView(plan)._repr_mimebundle_()[0], PlanView(plan)._repr_mimebundle_()[0]
    for key in ("text/plain", "text/html", "text/markdown"):
        assert one[key] == two[key]
    assert one["text/plain"] == format_plan(plan)
    assert one["application/vnd.jupyter.widget-view+json"] != two["application/vnd.jupyter.widget-view+json"]


def test_the_es_module_ships_with_the_package() -> None:
    from planbook.views.widget import STATIC

    code = (STATIC / "planview.js").read_text(encoding="utf-8")
    assert "export default { initialize, render }" in code
    assert "http://" not in code.replace("http://www.w3.org/2000/svg", "") and "https://" not in code  # no CDN
    assert PlanView(Plan.parse(PLAN)).widget._esm == code


# ------------------------------------------------------------------ many steps
def long_plan(n: int) -> Plan:
    return plan_from_dict({"goal": "count", "steps": [{"id": str(i), "tool": "inc", "args": {"x": i}} for i in range(1, n + 1)]})


def test_a_long_plan_is_one_widget() -> None:
    before = active_widgets()
    view = PlanView(long_plan(1000))
    assert active_widgets() - before <= 2  # the view (and at most its layout), never one per step
    assert len(view.rows) == 1000 and len(view.statuses) == 1000 and view.panes == {}


def test_a_1000_step_run_sends_a_bounded_number_of_updates_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    messages: list[int] = []
    original = widgets.Widget._send

    def count(self: Any, msg: Any, buffers: Any = None) -> None:
        messages.append(len(json.dumps(msg)))
        original(self, msg, buffers)

    runner = Runner(long_plan(1000), tools=make_tools(), max_steps=1000)
    view = PlanView(runner)
    monkeypatch.setattr(widgets.Widget, "_send", count)  # what the run sends (the widget's creation apart)
    clock = fake_clock(tick=0.001)  # each event 1 ms after the last: ~2 s of run for 2,000 events
    before = active_widgets()
    bridge = LiveView(runner, view, clock=clock)
    runner.run()
    bridge.close()
    elapsed = clock.now
    assert runner.state.status == "completed" and bridge.events >= 2000
    bound = bridge.throttle.burst + bridge.throttle.rate * elapsed + 2  # + the final flush
    print(f"1,000 steps: {bridge.events} events, {bridge.updates} view updates, {len(messages)} widget messages, "
          f"{sum(messages)} bytes, {elapsed:.1f} s of fake time")
    assert bridge.updates <= bound <= 40
    assert len(messages) <= bridge.updates  # one message per update (hold_sync)
    assert sum(messages) < 1_000_000
    assert active_widgets() == before  # running built no widgets
    assert view.statuses == "c" * 1000 and len(view._bars) == 1000
    # panes only for the steps near the running ones at each update: the others are built when asked for
    assert len(view.panes) <= bridge.updates * EAGER_ROWS < 1000


def test_a_pane_nobody_opened_is_built_when_asked_for() -> None:
    """Panes are sent for the steps near the running ones, failed steps and the open one; a
    click on any other step asks the kernel, which builds it from the plan (nothing is lost)."""
    runner = Runner(long_plan(200), tools=make_tools(), max_steps=200)
    view = PlanView(runner)
    batches: list[dict] = []
    view.widget.observe(lambda c: batches.append(c["new"]), names=["batch"])
    bridge = LiveView(runner, view, clock=fake_clock(tick=0.001))
    runner.run()
    bridge.close()
    assert "50" not in view.panes and "200" in view.panes  # far from the last running step: not built
    view._on_front_end(view.widget, {"type": "pane", "step": "50"}, [])
    assert batches[-1]["panes"]["50"]["call"] == "inc(x=50)" and batches[-1]["panes"]["50"]["status"] == "completed"
    sent = len(batches)
    view._on_front_end(view.widget, {"type": "pane", "step": "50"}, [])  # asked twice: sent once
    assert len(batches) == sent
    assert view.open("60")["call"] == "inc(x=60)" and batches[-1]["panes"].keys() == {"60"}


def test_a_failed_steps_pane_is_sent_even_far_from_the_running_steps() -> None:
    """Errors are what people click: a failed step's pane goes with the run, wherever the step is."""
    tools = make_tools(fail={"down": 1})
    plan = long_plan(120)
    plan.steps[9] = plan.steps[9].model_copy(update={"tool": "fetch", "args": {"source": "down"}})
    runner = Runner(plan, tools=tools, max_steps=200, on_failure="skip")
    view = PlanView(runner)
    sent: dict[str, Any] = {}
    view.widget.observe(lambda c: sent.update(c["new"].get("panes", {})), names=["batch"])
    bridge = LiveView(runner, view, clock=fake_clock(tick=0.001))
    runner.run()
    bridge.close()
    assert runner.plan.step("10").status is Status.skipped  # its policy skipped it; its error stays
    assert sent["10"]["status"] == "skipped" and "down is down" in sent["10"]["error"]
    assert "60" not in sent  # a completed step far from the end: built only when asked for


def test_rows_are_sent_again_only_when_the_plan_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    runner, view, _ = replanned_run()
    changes: list[str] = []
    view.widget.observe(lambda c: changes.append(c["name"]), names=["rows", "statuses", "head", "batch"])
    view.render(runner)
    assert "rows" not in changes and "batch" not in changes  # nothing new happened


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
    assert view.head["done"] == 7 and view.head["why"] == "paused after step 7"
    runner.run()
    assert bridge.updates == 2 and "step budget" in view.head["error"]
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
            # what the view last sent (the browser draws the same)
            if view.statuses == "c" * 6 + "r" and view.head["done"] == 6:
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
    assert view.head["done"] == 7 and view.state.status == "completed"


def test_events_from_another_thread_wait_for_the_view_thread() -> None:
    runner = Runner(long_plan(3), tools=make_tools())
    view = PlanView(runner)
    bridge = LiveView(runner, view)
    worker = threading.Thread(target=runner.run)
    worker.start()
    worker.join()
    assert bridge.updates == 0 and bridge.pending  # no widget was touched off the thread that made the view
    bridge.close()
    assert bridge.updates == 1 and view.head["done"] == 3


# ------------------------------------------------------------------ choosing the view
def test_widgets_need_a_kernel_with_comms_and_anywidget(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal:
        pass

    class Kernel:
        kernel = object()

    assert widgets_available(Terminal()) is False
    assert widgets_available(Kernel()) is True
    monkeypatch.setitem(sys.modules, "anywidget", None)  # `import anywidget` now raises ImportError
    assert widgets_available(Kernel()) is False


class Tty:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_one_function_chooses_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    from planbook.views import choose_view

    class Kernel:
        kernel = object()

    class Terminal:
        kernel = None

    assert choose_view(Kernel()) == "widget"
    assert choose_view(Terminal(), stdout=Tty(True)) == "terminal"  # terminal IPython: the rich table, drawn once
    assert choose_view(Terminal(), stdout=Tty(False)) == "plain"  # piped: the result prints the final state
    monkeypatch.setattr("planbook.views.show._shell", lambda: None)
    assert choose_view(stdout=Tty(True)) == "plain"  # outside IPython
    monkeypatch.setitem(sys.modules, "anywidget", None)
    assert choose_view(Kernel()) == "html"


def test_terminal_ipython_draws_the_rich_table_not_display_updates(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """In terminal IPython every display update printed another progress line; the rich table redraws in place."""
    import io

    from rich.console import Console

    import planbook.views.terminal as terminal

    published: list[Any] = []
    monkeypatch.setattr(ip.display_pub, "publish", lambda *a, **k: published.append(a))
    screen = io.StringIO()
    monkeypatch.setattr(terminal, "safe_console", lambda file=None: Console(file=screen, width=100))
    runner = Runner(long_plan(5), tools=make_tools())
    with watch(runner, kind="terminal") as bridge:
        runner.run()
    assert published == [] and isinstance(bridge.target, terminal.TerminalView)
    assert screen.getvalue().count("5/5 completed") == 1 and runner.handlers == []


def test_a_kernel_without_anywidget_gets_the_html_view_updated_in_place(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    published: list[dict[str, Any]] = []

    def publish(data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None, update: bool = False, **kw: Any) -> None:
        published.append({"data": data, "id": (transient or {}).get("display_id"), "update": update})

    monkeypatch.setattr(ip.display_pub, "publish", publish)
    runner = Runner(long_plan(200), tools=make_tools(), max_steps=200)
    bridge = show_live(runner, kind="html", clock=fake_clock())
    assert isinstance(bridge.target, HtmlView)
    runner.run()
    bridge.close()
    first, *updates = published
    assert not first["update"] and first["data"]["text/plain"] == format_plan(long_plan(200))
    assert len(updates) == bridge.updates and 2 <= bridge.updates <= 10
    assert all(u["update"] and u["id"] == first["id"] for u in updates)
    assert updates[-1]["data"]["text/plain"] == str(runner.result())  # the final state stays in the notebook
    assert "Run completed (goal_met): steps 200/200" in updates[-1]["data"]["text/html"]
    assert updates[-1]["data"]["text/html"].count('<tr data-step=') == 200  # the final state (the record): every row
    running = [u["data"] for u in updates if "Run running" in u["data"]["text/html"]]
    assert running, "no update while the run was going"
    for data in running:  # while running: a window of rows around the running step, and a progress line
        assert data["text/html"].count('<tr data-step=') == LIVE_ROWS
        assert "steps below" in data["text/html"] or "steps above" in data["text/html"]
        assert data["text/plain"].startswith("Plan count: ") and "\n" not in data["text/plain"]


def test_the_widget_display_ends_with_the_final_state(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    published: list[dict[str, Any]] = []

    def publish(data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None, update: bool = False, **kw: Any) -> None:
        published.append({"data": data, "id": (transient or {}).get("display_id"), "update": update})

    monkeypatch.setattr(ip.display_pub, "publish", publish)
    runner = Runner(long_plan(5), tools=make_tools())
    with watch(runner, kind="widget") as bridge:
        assert isinstance(bridge.target, PlanView) and runner.handlers == [bridge]
        result = runner.run()
    first, last = published
    assert first["data"]["text/plain"] == format_plan(long_plan(5))  # the plan as the run starts
    assert last["update"] and last["id"] == first["id"]
    assert last["data"]["text/plain"] == str(result) and "Run completed (goal_met)" in last["data"]["text/html"]
    # the record replaces the drawing (the finished run is not drawn in the widget first); the view
    # holds the final state (a later display of it is the record)
    assert runner.handlers == [] and bridge.target.state.done == 5
    # the widget is gone from the display: a saved notebook never says "Error displaying widget"
    assert "application/vnd.jupyter.widget-view+json" in first["data"]
    assert "application/vnd.jupyter.widget-view+json" not in last["data"]
    assert last["data"]["text/html"].count('<details class="planbook-pane">') == 5


@pytest.mark.parametrize("ending", ["completed", "failed", "interrupted", "paused"])
def test_every_way_a_run_ends_leaves_a_static_record(ip: Any, monkeypatch: pytest.MonkeyPatch, ending: str) -> None:
    published: list[dict[str, Any]] = []

    def publish(data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None, update: bool = False, **kw: Any) -> None:
        published.append({"data": data, "update": update})

    monkeypatch.setattr(ip.display_pub, "publish", publish)
    tools = make_tools()

    @tools.tool
    def stop(x: int) -> int:
        "Ends the run the way the test asks."
        if ending == "failed":
            raise ValueError("no")
        if ending == "interrupted":
            raise KeyboardInterrupt
        return x

    plan = Plan.parse("steps: [{id: a, tool: stop, args: {x: 1}}, {id: b, tool: stop, args: {x: 2}}]")
    runner = Runner(plan, tools=tools)
    with watch(runner, kind="widget"):
        result = runner.run(until="a") if ending == "paused" else runner.run()
    assert result.status == ending
    last = published[-1]
    assert last["update"] and "application/vnd.jupyter.widget-view+json" not in last["data"]
    assert "planbook-record" in last["data"]["text/html"] and f"planbook-run-{ending}" in last["data"]["text/html"]


def test_outside_ipython_there_is_no_live_view(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("planbook.views.show._shell", lambda: None)
    runner = Runner(long_plan(2), tools=make_tools())
    assert show_live(runner) is None and runner.handlers == []
    with watch(runner) as bridge:
        assert bridge is None
        assert runner.run().ok


def test_view_state_of_a_runner_counts_model_calls() -> None:
    runner = Runner(long_plan(2), tools=make_tools())
    runner.emit("llm.call", model="m", prompt_tokens=10, completion_tokens=5)
    state = ViewState.of(runner)
    assert (state.usage.calls, state.usage.total_tokens) == (1, 15)
    view = PlanView(state)
    assert view.head["budgets"] == "steps 0/12, replans 0/5, model calls 1, tokens 15"
    assert view.state.plan.steps[0].status is Status.not_started


def test_a_view_that_fails_to_draw_says_so_once_and_the_run_goes_on() -> None:
    from planbook.views.live import LiveView

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
