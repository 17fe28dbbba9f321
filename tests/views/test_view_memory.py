"""What a finished live view keeps: nothing beyond what the user holds.

A view run used to keep its PlanView, its ViewState and every Step of its plan for the kernel's
life, by two paths: ipywidgets' registry of open widgets (the widget's message callback held the
view) and anywidget's file watcher (``_esm`` given as a path connects every instance to a
class-level signal, which ``close()`` does not undo). Counted here in a real kernel, as a
notebook runs it, and for the view alone without one.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from helpers import Kernel, started_kernel

WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = '''
%load_ext planbook
%plan_store off
import gc
import planbook

box = planbook.Toolbox()


@box.tool
def ok(label: str = "ok") -> str:
    return label


spec = "steps:\\n" + "".join(f"  - {{id: s{i}, tool: ok, args: {{label: x{i}}}}}\\n" for i in range(10))
p = spec


def live_counts():
    """Live Step, PlanView and PlanWidget objects and ipywidgets' registry of open widgets, not
    counting the finished runs' widgets left open for a reloaded page (counted last)."""
    from ipywidgets.widgets import widget as registry

    from planbook.data.models import Step
    from planbook.views import widgetlife
    from planbook.views.widget import PlanView, PlanWidget

    while gc.collect():  # a finalizer that closes a widget frees more on the next pass
        pass
    # type(), not isinstance(): a lazy module's proxy imports on a look at its __class__
    kinds = [type(o) for o in gc.get_objects()]
    open_widgets = getattr(registry, "_instances", None)
    if open_widgets is None:  # ipywidgets before 8.1
        open_widgets = next(getattr(registry.Widget, name) for name in ("widgets", "_active_widgets")
                            if hasattr(registry.Widget, name))
    left = widgetlife.LEFT_WIDGETS
    held = set(left) | {w._trait_values["layout"].model_id for w in left.values() if "layout" in w._trait_values}
    return (sum(issubclass(k, Step) for k in kinds), sum(issubclass(k, PlanView) for k in kinds),
            sum(issubclass(k, PlanWidget) for k in kinds) - len(left), len(set(open_widgets) - held), len(left))
'''


@pytest.fixture(scope="module")
def kernel() -> Any:
    yield from started_kernel(SETUP, needs=("jupyter_client", "anywidget"))


def ok(kernel: Kernel, code: str, **kwargs: Any) -> list[dict]:
    reply, messages = kernel.execute(code, **kwargs)
    assert reply["status"] == "ok", (reply, [m["content"] for m in messages if m["msg_type"] == "error"])
    return messages


def counts(kernel: Kernel) -> tuple[int, ...]:
    messages = ok(kernel, "print(*live_counts())")
    text = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    return tuple(int(n) for n in text.split())


def test_twenty_view_runs_keep_nothing_beyond_what_the_user_holds(kernel: Kernel) -> None:
    # one run first: the user then holds its result (``_``) and the magic its last run of ``p``
    first = ok(kernel, "_ = %run_plan p --tools box")
    (shown,) = [m for m in first if m["msg_type"] == "display_data"]
    assert WIDGET in shown["content"]["data"]  # a view run with a display, as in a notebook
    display_id = shown["content"]["transient"]["display_id"]
    kinds = [m["msg_type"] for m in first]
    (record,) = [m for m in first if m["msg_type"] == "update_display_data"
                 and m["content"]["transient"]["display_id"] == display_id and WIDGET not in m["content"]["data"]]
    # the widget says the run ended after its display became the record, and stays open for a page
    # reloaded during the run to ask for the record (the page that ran the cell says it has it)
    ended = [m for m in first if m["msg_type"] == "comm_msg" and m["content"]["data"].get("state", {}).get("ended")]
    assert ended and first.index(ended[0]) > first.index(record) and "comm_close" not in kinds, kinds
    before = counts(kernel)
    # no view, no other widget, nothing else in ipywidgets' registry; the one widget left open
    assert before[1:] == (0, 0, 0, 1), before

    for _ in range(20):
        ok(kernel, "_ = %run_plan p --tools box")
    after = counts(kernel)
    assert after[:4] == before[:4], f"(steps, views, widgets, registry) before {before}, after 20 view runs {after}"
    from planbook.views.widgetlife import LEFT_OPEN

    assert after[4] == LEFT_OPEN  # the latest runs' widgets, left open for a reloaded page; no more


def test_background_runs_and_watch_keep_nothing_either(kernel: Kernel) -> None:
    before = counts(kernel)
    ok(kernel, """
for i in range(20):
    h = planbook.start(spec, tools=box)  # a view that is never displayed
    assert h.wait(60).status == 'completed'
    shown = planbook.start(spec, tools=box)
    display(shown)  # a displayed one: its display becomes the record
    assert shown.wait(60).status == 'completed'
    runner = planbook.Runner(spec, tools=box)
    with planbook.watch(runner):
        runner.run()
del h, shown, runner
import threading
for t in threading.enumerate():  # a run's thread lets go of its handle just after wait() returns
    if t.name.startswith("planbook-run-"):
        t.join(60)
""", timeout=240)
    after = counts(kernel)
    from planbook.views.widgetlife import LEFT_OPEN

    assert after[:4] == before[:4] and after[4] <= LEFT_OPEN, (before, after)



def test_replays_keep_nothing_but_a_few_unfinished_step_replays(kernel: Kernel) -> None:
    # each replay is a cell's value (IPython's Out keeps it): an ended one holds the result, not its
    # view; a step replay left unfinished keeps its view for its Next button, the latest STEP_OPEN only
    ok(kernel, "_ = %run_plan p --tools box\nshown = _\n_ = planbook.replay(shown, speed=100)")
    before = counts(kernel)
    for _ in range(20):
        ok(kernel, "planbook.replay(shown, speed=100)")
    after = counts(kernel)
    assert after == before, f"(steps, views, widgets, registry, left) before {before}, after 20 replays {after}"
    from planbook.views.replay import STEP_OPEN

    for _ in range(STEP_OPEN + 2):
        ok(kernel, "planbook.replay(shown, step=True)")
    stepping = counts(kernel)
    assert stepping[1:4] == (before[1] + STEP_OPEN, before[2] + STEP_OPEN, before[3] + 2 * STEP_OPEN), \
        (before, stepping)  # each: its view, its widget and the widget's layout
    ok(kernel, "from planbook.views.replay import STEPPING\nfor r in list(STEPPING):\n    r.next()\n"
               "    while not r.done:\n        r.next()")
    assert counts(kernel)[1:4] == before[1:4]


# ------------------------------------------------------------------ the view alone (no kernel)
def _open_widgets(registry: Any) -> dict[str, Any]:
    """ipywidgets' registry of open widgets (module-level from 8.1, a class attribute before)."""
    found = getattr(registry, "_instances", None)
    if found is None:
        found = next(getattr(registry.Widget, name) for name in ("widgets", "_active_widgets")
                     if hasattr(registry.Widget, name))
    return found



def test_a_view_nobody_holds_is_garbage_and_its_widget_is_closed() -> None:
    pytest.importorskip("anywidget")
    from ipywidgets.widgets import widget as registry

    from planbook import Plan
    from planbook.views.widget import PlanView

    view = PlanView(Plan.parse("steps:\n  - {id: a, task: look}\n"))
    widget, step = weakref.ref(view.widget), weakref.ref(view.state.plan.steps[0])
    model_id = view.widget.model_id
    del view
    gc.collect()
    assert step() is None, "a view nobody holds keeps its plan alive"
    assert model_id not in _open_widgets(registry)
    assert widget() is None, "the widget is kept alive (anywidget's file watcher?)"


def test_a_closed_view_is_garbage_and_displays_as_its_record() -> None:
    pytest.importorskip("anywidget")
    from planbook import Plan
    from planbook.views.widget import PlanView

    view = PlanView(Plan.parse("steps:\n  - {id: a, task: look}\n"))
    assert WIDGET in view._repr_mimebundle_()[0] and view.shown
    held = weakref.ref(view.widget)
    view.close()
    assert view.closed
    data, _ = view._repr_mimebundle_()
    assert WIDGET not in data and "a. [ ] look" in data["text/plain"] and "look" in data["text/html"]
    del view
    gc.collect()
    assert held() is None


def test_a_displayed_view_keeps_its_widget_but_not_its_plan() -> None:
    # closing a displayed widget would empty its output in the browser: the widget stays, holding
    # only the JSON it sent, while the view and its plan are freed
    pytest.importorskip("anywidget")
    from ipywidgets.widgets import widget as registry

    from planbook import Plan
    from planbook.views.widget import PlanView

    view = PlanView(Plan.parse("steps:\n  - {id: a, task: look}\n"))
    view._repr_mimebundle_()
    model_id, step = view.widget.model_id, weakref.ref(view.state.plan.steps[0])
    del view
    gc.collect()
    assert step() is None
    assert model_id in _open_widgets(registry)
    _open_widgets(registry)[model_id].close()


def test_a_shell_that_runs_no_cell_holds_no_view() -> None:
    """A view's widget read where a shell exists but runs no cell (a test process after a magic's
    test, an embedding) is not held for a cell's end that never comes: it failed in the full suite,
    where another test had made the shell."""
    pytest.importorskip("anywidget")
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from planbook import Plan
    from planbook.views import widgetlife
    from planbook.views.widget import PlanView

    shell = start_ipython() or get_ipython()  # a second start gives None: the shell another test made
    assert shell is not None and not widgetlife._in_a_cell(shell)
    view = PlanView(Plan.parse("steps:\n  - {id: a, task: look}\n"))
    step = weakref.ref(view.state.plan.steps[0])
    assert view.widget is not None
    del view
    gc.collect()
    assert step() is None and widgetlife.CELL_VIEWS == []
