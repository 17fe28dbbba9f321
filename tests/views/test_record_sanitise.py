"""A result's HTML passes the gate's sanitiser (nh3) and stays inside its pane; the record's rows
show no secret; the record of a long run is bounded.

The record is read back with a real HTML parser (the standard library's), built into a tree
where every end tag must close the element on top: a result that leaks out of its pane (an
unclosed comment, ``<plaintext>``, stray closing tags) breaks that, and so does anything the
sanitiser would let through unbalanced.
"""

from __future__ import annotations

import base64
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import planbook
from planbook.outbound.html import AS_TEXT_NOTE, STYLES_LEFT_OUT_NOTE, sanitize_html
from planbook.views.html import result_html
from planbook.views.panes import result_html as pane_result_html

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
#: attributes that make a browser fetch something
URL_ATTRIBUTES = frozenset({"src", "srcset", "href", "xlink:href", "poster", "background", "action", "formaction",
                            "data", "cite", "longdesc", "lowsrc", "dynsrc", "ping"})


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    parent: "Node | None" = None
    children: list["Node | str"] = field(default_factory=list)

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def walk(self) -> Any:
        for child in self.children:
            if isinstance(child, Node):
                yield child
                yield from child.walk()

    def find_all(self, tag: str, cls: str | None = None) -> list["Node"]:
        return [n for n in self.walk() if n.tag == tag and (cls is None or cls in n.classes)]

    def ancestors(self) -> list["Node"]:
        out, node = [], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class Tree(HTMLParser):
    """A strict tree: an end tag must close the element on top; comments and declarations are errors
    (the record writes none: one in a pane came from a result)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.errors: list[str] = []
        self.feed(markup)
        self.close()
        if len(self.stack) > 1:
            self.errors.append(f"unclosed: {[n.tag for n in self.stack[1:]]}")

    def _add(self, tag: str, attrs: list[tuple[str, str | None]]) -> Node:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.stack[-1])
        self.stack[-1].children.append(node)
        return node

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = self._add(tag, attrs)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if len(self.stack) > 1 and self.stack[-1].tag == tag:
            self.stack.pop()
        else:
            self.errors.append(f"</{tag}> closes <{self.stack[-1].tag}>")

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)

    def handle_comment(self, data: str) -> None:
        self.errors.append(f"comment {data[:40]!r}")

    def handle_decl(self, decl: str) -> None:
        self.errors.append(f"declaration {decl[:40]!r}")

    def unknown_decl(self, data: str) -> None:
        self.errors.append(f"declaration {data[:40]!r}")

    def handle_pi(self, data: str) -> None:
        self.errors.append(f"processing instruction {data[:40]!r}")


def tree(markup: str) -> Node:
    parsed = Tree(markup)
    assert not parsed.errors, parsed.errors
    return parsed.root


def returning(markup: str, *, png: Any = None, svg: str | None = None) -> Any:
    """A value whose rich display is ``markup`` (and a PNG or an SVG)."""

    class Rich:
        def _repr_html_(self) -> str | None:
            return markup or None

        def _repr_png_(self) -> Any:
            return png

        def _repr_svg_(self) -> str | None:
            return svg

        def __repr__(self) -> str:
            return "Rich()"

    return Rich()


def record_of(value: Any) -> str:
    """The record of a finished three-step run whose first step returns ``value``."""
    tools = planbook.Toolbox()

    @tools.tool
    def make() -> Any:
        "The value."
        return value

    @tools.tool
    def after(x: Any) -> str:
        "A later step."
        return "later"

    spec = """
steps:
  - {id: first, task: Make the value, tool: make}
  - {id: second, task: Then this, tool: after, args: {x: $first}, needs: [first]}
  - {id: third, task: And this, tool: after, args: {x: $second}, needs: [second]}
"""
    result = planbook.run(spec, tools=tools)
    assert result.status == "completed"
    return result_html(result)


def pane_of(root: Node, step: str) -> Node:
    (pane,) = [n for n in root.find_all("div", "planbook-pane-body") if n.attrs.get("data-pane") == step]
    return pane


def assert_inert(root: Node) -> None:
    """No event handler and nothing fetched from anywhere: the only URLs are inline pictures."""
    for node in root.walk():
        for name, value in node.attrs.items():
            assert not name.startswith("on"), (node.tag, name, value)
            if name in URL_ATTRIBUTES:
                assert node.tag == "img" and name == "src" and value.startswith("data:image/"), (node.tag, name, value)
            if name == "style":
                assert "url(" not in value.lower() and "image-set" not in value.lower(), value
                # nothing leaves its box or covers the page (a pane's own box is relative: it holds what is in it)
                assert value.lower().replace("position:relative", "").find("position") < 0, value


# ------------------------------------------------------------------ script and other hosts
#: each ran script in Chromium from a record saved with every pane closed (the old regex let them through)
SCRIPT_PAYLOADS = [
    '<img src="x"/onerror=alert(1)>',
    '<img src="x"onerror=alert(1)>',
    '<img alt=">" src="x" onerror=alert(1)>',
    "<svg/onload=alert(1)>",
]
#: each loaded a resource from another host
OTHER_HOSTS = [
    '<img src="&#47;&#47;example.com/x.png">',
    '<img src="/\\example.com/x.png">',
    '<div style="background:url(\\68ttps://example.com/x.png)">x</div>',
    "<div style=\"background-image:image-set('//example.com/x.png' 1x)\">x</div>",
]


@pytest.mark.parametrize("payload", SCRIPT_PAYLOADS + OTHER_HOSTS)
def test_a_result_whose_html_runs_script_or_loads_from_elsewhere_does_not_do_it_in_the_record(payload: str) -> None:
    page = record_of(returning(f"<b>table</b>{payload}"))
    root = tree(page)
    assert_inert(root)
    pane = pane_of(root, "first")
    # said in the pane: shown as text, or without its styles (what the sanitiser left out is all CSS)
    assert AS_TEXT_NOTE in pane.text() or STYLES_LEFT_OUT_NOTE in pane.text(), pane.text()


@pytest.mark.parametrize("payload", SCRIPT_PAYLOADS + OTHER_HOSTS)
def test_the_live_views_pane_shows_the_same_sanitised_html(payload: str) -> None:
    body, cut = pane_result_html(returning(f"<b>table</b>{payload}"), 50_000)
    assert not cut
    assert_inert(tree(body))


@pytest.mark.parametrize("payload", SCRIPT_PAYLOADS + ['<img src="&#47;&#47;example.com/x.png">',
                                                     '<img src="/\\example.com/x.png">',
                                                     '<a href="https://example.com">docs</a>',
                                                     '<img src="data/x.png">',  # relative: the notebook's server
                                                     '<form action="/api"><button>go</button></form>'])
def test_html_the_sanitiser_must_cut_is_shown_as_text_and_the_pane_says_so(payload: str) -> None:
    assert sanitize_html(payload) is None
    pane = pane_of(tree(record_of(returning(payload))), "first")
    assert AS_TEXT_NOTE in pane.text() and "Rich()" in pane.text()


def test_a_table_keeps_its_rows_and_loses_only_its_styles() -> None:
    frame = ('<div><style scoped>.dataframe tbody tr th {vertical-align: top;}</style>'
             '<table border="1" class="dataframe"><thead><tr style="text-align: right;"><th></th><th>a</th></tr>'
             '</thead><tbody><tr><th>0</th><td style="color:red;position:fixed;top:0">1</td></tr></tbody></table></div>')
    kept = sanitize_html(frame)
    assert kept is not None and kept.left_out == STYLES_LEFT_OUT_NOTE
    assert "<style" not in kept.html and "class=" not in kept.html and "position" not in kept.html
    pane = pane_of(tree(record_of(returning(frame))), "first")
    (table,) = pane.find_all("table", None)
    assert [c.text() for c in table.find_all("td")] == ["1"] and table.attrs.get("border") == "1"
    assert STYLES_LEFT_OUT_NOTE in pane.text()
    plain = sanitize_html("<table><tr><td>1</td></tr></table>")
    assert plain is not None and plain.left_out == "" and plain.html == "<table><tbody><tr><td>1</td></tr></tbody></table>"


def test_pictures_are_drawn_from_their_bytes_and_nothing_else() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    ok, _ = pane_result_html(returning("", png=png), 50_000)
    (img,) = tree(ok).find_all("img")
    assert img.attrs["src"] == "data:image/png;base64," + base64.b64encode(png).decode()
    # a formatter's "base64" string that is not base64 is not written into an attribute
    forged, _ = pane_result_html(returning("", png='AAAA" onerror="alert(1)'), 50_000)
    assert_inert(tree(forged))
    # an SVG is drawn by an <img> (no script, no external resource), never inlined
    svg, _ = pane_result_html(returning("", svg='<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)">'
                                                '<image href="https://example.com/x.png"/></svg>'), 50_000)
    root = tree(svg)
    assert_inert(root)
    assert not root.find_all("svg") and root.find_all("img")[0].attrs["src"].startswith("data:image/svg+xml;base64,")


# ------------------------------------------------------------------ kept inside its pane
HOSTILE = [
    "<b>open</b><!-- swallow the rest",
    "<plaintext>everything after this is text",
    "</td></tr></tbody></table></details></div></div>"
    '<div class="planbook-verdict planbook-run-completed">Run completed (goal_met): steps 3/12, replans 0/5</div>'
    "<table><tbody><tr><td>",
    '<div style="position:fixed;top:0;left:0;width:100vw;height:100vh;background-color:white">covered</div>',
    "<table><tr><td>cell<div><li><div><object><li>mutates</li></object></div></li>",
    "<textarea></div></td></tr></table>",
]


@pytest.mark.parametrize("markup", HOSTILE)
def test_a_hostile_result_stays_in_its_pane(markup: str) -> None:
    page = record_of(returning(markup))
    root = tree(page)  # balanced: every element the record (and the result) opens is closed in its place
    assert_inert(root)
    (table,) = root.find_all("table", "planbook-steps")
    rows = [r for r in table.find_all("tr") if "data-step" in r.attrs]
    assert [r.attrs["data-step"] for r in rows] == ["first", "second", "third"]
    assert all(r.parent is rows[0].parent and r.parent.tag == "tbody" for r in rows)
    # exactly one verdict, in the header (not in a pane)
    (verdict,) = [n for n in root.walk() if "planbook-verdict" in n.classes]
    assert verdict.text().startswith("Run completed") and not any(a.tag == "details" for a in verdict.ancestors())
    (graph,) = root.find_all("div", "planbook-graph")
    assert not any(a.tag in ("details",) and "planbook-pane" in a.classes for a in graph.ancestors())
    # the result's own markup is inside its pane's box, whatever it tried
    pane = pane_of(root, "first")
    (box,) = pane.find_all("div", "planbook-returned")
    later = [pane_of(root, "second"), pane_of(root, "third")]
    assert all(box not in p.ancestors() for p in later)
    assert "later" in later[0].text() and "later" in later[1].text()


@pytest.mark.parametrize("markup", HOSTILE + SCRIPT_PAYLOADS + OTHER_HOSTS)
def test_the_sanitisers_output_is_balanced_and_a_fixed_point(markup: str) -> None:
    kept = sanitize_html(markup)
    if kept is not None:
        assert not Tree(kept.html).errors
        assert sanitize_html(kept.html) == (kept.html, "")  # cleaning it again changes nothing


# ------------------------------------------------------------------ a real browser
@pytest.mark.browser
def test_chromium_runs_no_script_from_a_saved_record(tmp_path: Path) -> None:
    from browser_support import CHROMIUM_ARGS, chromium_path

    chromium = chromium_path()
    if not chromium.exists():
        pytest.skip(f"no Chromium at {chromium}")
    mark = "document.documentElement.setAttribute('data-ran','yes')"
    payloads = [p.replace("alert(1)", mark) for p in SCRIPT_PAYLOADS]
    page = "".join(record_of(returning(f"<b>x</b>{p}")) for p in payloads)
    path = tmp_path / "record.html"
    path.write_text(f"<!doctype html><html><body>{page}</body></html>", encoding="utf-8")
    out = subprocess.run([str(chromium), *CHROMIUM_ARGS, "--virtual-time-budget=3000", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert "planbook-record" in out.stdout, out.stderr[-2000:]
    assert "data-ran" not in out.stdout


# ------------------------------------------------------------------ a bounded record
@pytest.mark.slow
def test_the_record_of_a_long_run_is_bounded_and_says_what_it_left_out() -> None:
    from planbook.views.record import FEW, RECORD_PANES, RECORD_ROWS

    tools = planbook.Toolbox()

    @tools.tool
    def inc(x: int) -> int:
        "Add one."
        return x + 1

    n = 20_000
    steps = "\n".join(f"  - {{id: s{i}, task: Step {i}, tool: inc, args: {{x: {i}}}}}" for i in range(n))
    result = planbook.run(f"steps:\n{steps}", tools=tools, max_steps=n)
    assert result.status == "completed"
    page = result_html(result)
    # 1,000 rows (the widget's cap), lean (no style, no data-step: the id is the row's header cell),
    # 6 panes, the timeline and the graph summarised: a size people commit (it was 50 MB, then 1.5 MB)
    assert len(page.encode("utf-8")) < 120_000
    root = tree(page)
    (table,) = root.find_all("table", "planbook-steps")
    rows = table.find_all("tbody")[0].find_all("tr")
    assert len(rows) == RECORD_ROWS and rows[-1].find_all("th")[0].text() == f"s{n - 1}"
    assert not any("style" in r.attrs or "class" in r.attrs for r in rows if not r.find_all("details"))
    # panes only for the first and last few (nothing failed): every step's pane is a call away
    panes = [d.find_all("div", "planbook-pane-body")[0].attrs["data-pane"] for d in root.find_all("details", "planbook-pane")]
    assert panes == [f"s{i}" for i in (n - 1000, n - 999, n - 998, n - 3, n - 2, n - 1)]
    assert FEW == 3 and RECORD_PANES >= len(panes)
    (line,) = [node for node in root.walk() if "planbook-rows-left-out" in node.classes]
    assert "keeps 1,000 of 20,000 steps" in line.text() and "not of 994 others" in line.text()
    assert "result.pane('ID')" in line.text() and "planbook show RUN_ID --step ID" in line.text()
    assert "print(result)" in line.text()
    assert "too many to draw one by one" in page and "planbook-graph-summary" in page


def test_the_record_keeps_as_many_rows_as_the_widget_does() -> None:
    pytest.importorskip("anywidget")
    from planbook.views.record import RECORD_ROWS
    from planbook.views.widget import STATIC_ROWS

    assert RECORD_ROWS == STATIC_ROWS


def test_a_short_record_keeps_every_row_and_pane_and_says_nothing_left_out() -> None:
    root = tree(record_of(returning("<b>x</b>")))
    assert len(root.find_all("details", "planbook-pane")) == 3
    assert not [node for node in root.walk() if "planbook-rows-left-out" in node.classes]


# ------------------------------------------------------------------ no secret in the rows
SECRET_SPEC = """
goal: Log in as ann with hunter22-pass
steps:
  - {id: login, tool: login, args: {user: ann, password: hunter22-pass}}
  - {id: fetch, task: Fetch with hunter22-pass, tool: fetch, args: {token: $login}, needs: [login]}
  - {id: echo, tool: echo, args: {text: $login}, needs: [login]}
  - {id: page, tool: page, args: {text: $login}, needs: [login]}
"""
SECRETS = ("hunter22-pass", "tok-SECRET-9876")


def _secret_tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()

    @tools.tool
    def login(user: str, password: str) -> str:
        "Log in: the result is a token, a secret (it feeds fetch's token)."
        return "tok-SECRET-9876"

    @tools.tool
    def fetch(token: str) -> str:
        "Fetch."
        return "data"

    @tools.tool
    def echo(text: str) -> str:
        "Echo."
        return text

    @tools.tool
    def page(text: str) -> Any:
        "A page that repeats it."
        return returning(f"<table><tr><td>token</td><td>{text}</td></tr></table>")

    return tools


def test_the_records_rows_panes_and_graph_show_no_secret() -> None:
    result = planbook.run(SECRET_SPEC, tools=_secret_tools())
    assert result.status == "completed"
    page = result_html(result)
    for secret in SECRETS:
        assert secret not in page, page[max(0, page.find(secret) - 300):page.find(secret) + 50]
    root = tree(page)
    calls = {n.attrs["data-pane"]: n.find_all("code")[0].text() for n in root.find_all("div", "planbook-pane-body")}
    assert calls == {"login": "login(user='ann', password=***)", "fetch": "fetch(token=***)",
                     "echo": "echo(text='***')", "page": "page(text='***')"}
    titles = [n.attrs["title"] for n in root.walk() if "pb-node" in n.classes]
    assert "login (completed): login(user='ann', password=***)" in titles
    assert "fetch (completed): Fetch with ***" in titles
    assert "Plan: Log in as ann with ***" in root.text()
    # the step whose result is the token shows ***; a result whose HTML repeats it is shown as text, hidden
    assert pane_of(root, "login").find_all("pre")[0].text() == "***"
    from planbook.outbound.html import SECRET_NOTE

    assert SECRET_NOTE in pane_of(root, "page").text()


def test_a_plans_html_and_a_diff_show_no_secret() -> None:
    from planbook.data.models import PlanDiff
    from planbook.views.html import plan_html, revisions_html
    from planbook.views.record import record_html
    from planbook.views.state import ViewState

    plan = planbook.Plan.parse(SECRET_SPEC)
    assert not any(secret in plan_html(plan) for secret in SECRETS)
    diff = PlanDiff(from_revision=1, to_revision=2, added=["retry"], reason="login failed for hunter22-pass",
                    steps={"retry": "Retry with hunter22-pass"})
    state = ViewState(plan=plan, status="failed", reason="aborted", error="bad password hunter22-pass",
                      revisions=[diff])
    page = record_html(state)
    assert "hunter22-pass" not in page and "Retry with ***" in page and "bad password ***" in page
    assert "hunter22-pass" not in revisions_html([diff], state.gate)


# ------------------------------------------------------------------ any markup
def test_whatever_the_markup_what_is_kept_is_balanced_inert_and_a_fixed_point() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tokens = st.sampled_from([
        "<b>", "</b>", "<i>", "<table>", "</table>", "<tr>", "<td>", "</td>", "<th>", "<caption>", "<p>", "</p>",
        "<div>", "</div>", "<li>", "</li>", "<ul>", "<object>", "</object>", "<svg>", "</svg>", "<math>",
        "<mi>", "<style>", "</style>", "<textarea>", "<title>", "<noscript>", "<xmp>", "<plaintext>", "<template>",
        "<select>", "<option>", "<form>", "<!--", "-->", "<![CDATA[", "]]>", "<img src=x onerror=y>",
        '<img src="data:image/png;base64,AAAA">', '<span style="color:red;position:fixed">', "</span>",
        "<a href=//h>", "</a>", "text", "&lt;", "&", "<", ">", '"', "'", "=", "/", " ", "</details>", "</pre>",
    ])

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(tokens, max_size=25))
    def check(parts: list[str]) -> None:
        kept = sanitize_html("".join(parts))
        if kept is not None:
            parsed = Tree(kept.html)
            assert not parsed.errors, (kept.html, parsed.errors)
            assert_inert(parsed.root)
            assert sanitize_html(kept.html) == (kept.html, "")

    check()


@pytest.mark.parametrize("markup", SCRIPT_PAYLOADS + HOSTILE[:3])
def test_a_hostile_error_and_print_stay_in_the_panes_of_earlier_and_removed_executions(markup: str) -> None:
    """A step that prints and raises markup, is retried (its first execution's pane goes under the
    timeline) and then replaced by a replan (its last one's under its revision): escaped, in its pane."""
    tb = planbook.Toolbox()

    @tb.tool
    def bad() -> str:
        print(markup)
        raise RuntimeError(markup)

    @tb.tool
    def good() -> str:
        return "fine"

    planner = planbook.ScriptedPlanner({None: "steps:\n  - {id: bad, tool: bad}\n",
                                        "RuntimeError": [{"id": "other", "tool": "good"}]})
    result = planbook.run("Go", planner=planner, tools=tb, on_failure=["retry", "replan"], retries=1)
    assert result.status == "completed" and [s.id for s in result.plan.steps] == ["other"]
    from planbook.views.record import record_html
    from planbook.views.state import ViewState

    root = tree(record_html(ViewState.of_result(result)))  # balanced: the markup opened and closed nothing of the record's
    assert_inert(root)
    executions = [n for n in root.find_all("div", "planbook-pane-body") if "planbook-execution-pane" in n.classes]
    assert len(executions) == 2  # the retried attempt (earlier) and the last one (removed in revision 2)
    for node in executions:
        assert markup in node.text()  # shown as text
        assert not [n for n in node.walk() if n.tag in ("img", "svg", "script", "textarea", "object")]
