"""A record of a size people commit to git: every step's row, panes only for the steps worth
opening, a line that says how to see the rest (``result.pane("ID")``, ``planbook show RUN_ID
--step ID``), which both work and go through the run's gate; decisions listed as decisions.

Sizes are bytes of deterministic HTML (asserted); build times are the benchmark's
(``benchmarks/record_size.py``), never asserted here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import planbook
from planbook import Decision
from planbook.views.html import result_html
from planbook.views.record import ALL_PANES, FEW, RECORD_PANES

ROOT = Path(__file__).resolve().parents[2]


def _tools() -> planbook.Toolbox:
    tools = planbook.Toolbox()
    tried: set[int] = set()

    @tools.tool
    def inc(x: int) -> int:
        "Add one (and say so now and then)."
        if x % 7 == 0:
            print(f"at {x}")
        return x + 1

    @tools.tool(cache=False)
    def flaky(x: int) -> int:
        "Fails on its first call."
        if x not in tried:
            tried.add(x)
            raise ConnectionError("try again")
        return x + 1

    @tools.tool
    def login(user: str, password: str) -> str:
        "The token it returns is a secret: it feeds a token argument."
        return "tok-SECRET-4242"

    @tools.tool
    def fetch(token: str) -> str:
        "Uses the token."
        return "fetched"

    return tools


def serial(n: int) -> planbook.RunResult:
    steps = ["  - {id: s1, task: Step 1, tool: inc, args: {x: 1}}"]
    steps += [f"  - {{id: s{i}, task: Step {i}, tool: inc, args: {{x: $s{i - 1}}}}}" for i in range(2, n + 1)]
    result = planbook.run("goal: a serial run\nsteps:\n" + "\n".join(steps), tools=_tools(), max_steps=2 * n,
                          on_failure="retry", retries=1)
    assert result.status == "completed", result.error
    return result


def panes(page: str) -> list[str]:
    return re.findall(r'<div class="planbook-pane-body" data-pane="([^"]+)"', page)


def test_a_ten_step_record_is_under_30_kb_and_keeps_every_pane() -> None:
    page = result_html(serial(10))
    assert len(page.encode()) <= 30_000
    assert panes(page) == [f"s{i}" for i in range(1, 11)] and 10 <= ALL_PANES
    assert "planbook-rows-left-out" not in page


def test_a_thousand_step_record_is_under_120_kb_with_every_row() -> None:
    page = result_html(serial(1000))
    assert len(page.encode()) <= 120_000
    assert page.count("<tr><td>[✓]</td><th>s") == 1000  # lean rows: no style, no class, no data-step
    assert len(panes(page)) == 2 * FEW
    assert "result.pane(&#x27;ID&#x27;)" in page and "planbook show RUN_ID --step ID" in page


def test_panes_only_for_the_steps_worth_opening() -> None:
    assert len(panes(result_html(serial(30)))) == 2 * FEW  # nothing worth opening: the first and last few
    spec_tools = _tools()  # s10 fails once and is retried; everything else completes at once
    steps = [f"  - {{id: s{i}, task: Step {i}, tool: {'flaky' if i == 10 else 'inc'}, args: {{x: {i}}}}}"
             for i in range(1, 31)]
    retried = planbook.run("steps:\n" + "\n".join(steps), tools=spec_tools, max_steps=40, on_failure="retry", retries=1)
    assert retried.status == "completed"
    page = result_html(retried)
    assert panes(page) == ["s1", "s2", "s3", "s10", "s28", "s29", "s30"]
    assert len(panes(page)) <= RECORD_PANES
    line = re.search(r'<div class="planbook-rows-left-out"[^>]*>(.*?)</div>', page).group(1)
    assert "not of 23 others" in line and "planbook show RUN_ID --step ID" in line and "result.pane(" in line


SECRET_SPEC = "\n".join(
    ["steps:"] + [f"  - {{id: a{i}, tool: inc, args: {{x: {i}}}}}" for i in range(8)]
    + ["  - {id: login, tool: login, args: {user: ann, password: hunter22-pass}}",
       "  - {id: use, tool: fetch, args: {token: $login}, needs: [login]}"]
    + [f"  - {{id: b{i}, tool: inc, args: {{x: {i}}}}}" for i in range(8)])


def test_result_pane_shows_any_step_through_the_gate() -> None:
    result = planbook.run(SECRET_SPEC, tools=_tools(), max_steps=30)
    assert result.status == "completed"
    page = result_html(result)
    assert "login" not in panes(page) and "a4" not in panes(page)  # the record keeps no pane for them
    shown = result.pane("a4")
    bundle = shown._repr_mimebundle_()
    assert "inc(x=4)" in bundle["text/html"] and "inc(x=4)" in bundle["text/plain"] and "returned: 5" in str(shown)
    secret = result.pane("login")._repr_mimebundle_()
    for text in secret.values():
        assert "tok-SECRET-4242" not in text and "hunter22-pass" not in text and "***" in text, text
    assert "password=***" in secret["text/plain"]
    try:
        result.pane("nope")
    except planbook.PlanbookError as exc:
        assert "no step 'nope'" in str(exc) and "a0, a1" in str(exc)
    else:
        raise AssertionError("an unknown step is an error that names the steps")


def test_planbook_show_step_prints_one_steps_pane(tmp_path: Path) -> None:
    (tmp_path / "tools_mod.py").write_text(
        "import planbook\nbox = planbook.Toolbox()\n\n@box.tool\ndef login(user: str, password: str) -> str:\n"
        "    'A secret token.'\n    print('logging in')\n    return 'tok-SECRET-4242'\n\n"
        "@box.tool\ndef fetch(token: str) -> str:\n    'Uses it.'\n    return 'fetched'\n")
    (tmp_path / "plan.yaml").write_text("steps:\n  - {id: login, tool: login, args: {user: ann, password: hunter22-pass}}\n"
                                        "  - {id: use, tool: fetch, args: {token: $login}}\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}", "PLANBOOK_HOME": str(tmp_path / "home")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "planbook.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    assert cli("run", "plan.yaml", "--tools", "tools_mod:box", "--plain").returncode == 0
    shown = cli("show", "--step", "login")
    assert shown.returncode == 0, shown.stderr
    assert "Step login" in shown.stdout and "call: login(user='ann', password=***)" in shown.stdout
    assert "logging in" in shown.stdout
    (returned,) = [line for line in shown.stdout.splitlines() if line.startswith("  returned: ")]
    assert "***" in returned  # the store kept the token as *** (a stored run shows what the store kept)
    assert "tok-SECRET-4242" not in shown.stdout and "hunter22-pass" not in shown.stdout
    missing = cli("show", "--step", "nope")
    assert missing.returncode == 2 and "no step 'nope'" in missing.stderr and len(missing.stderr.splitlines()) == 1


MAIL = """
steps:
  - {id: draft, tool: inc, args: {x: 1}}
  - {id: send, tool: inc, args: {x: $draft}}
  - {id: after, tool: inc, args: {x: $send}}
"""


def test_decisions_are_listed_as_decisions_not_among_the_revisions() -> None:
    stopped = planbook.run(MAIL, tools=_tools(), approve=lambda s, c: Decision.stop("not now") if s.id == "send"
                           else Decision.approve())
    assert (stopped.status, stopped.reason) == ("failed", "aborted")
    page = result_html(stopped)
    section = re.search(r'<div class="planbook-decisions".*?</ul></div>', page).group(0)
    items = re.findall(r'<li class="planbook-decision planbook-decision-(\w+)">([^<]*)</li>', section)
    assert items == [("approve", "draft: approved by you (api)"), ("stop", "send: stopped by you (api) — not now")]
    assert "Revision history" not in page  # no replan: a decision is not a revision
    edited = planbook.run(MAIL, tools=_tools(), approve=lambda s, c: Decision.edit({"x": 41}) if s.id == "send"
                          else Decision.approve())
    page = result_html(edited)
    assert "send: edited by you (api)" in page and "Revision history" in page  # the edit made a revision too
    assert page.index("planbook-decisions") < page.index("planbook-revisions")


def test_a_refused_run_decision_says_why() -> None:
    from planbook.data.models import Event
    from planbook.outbound import RunSecrets
    from planbook.views.record import decisions_html

    events = [Event(kind="run.steered", time=1.0, data={"action": "refused", "who": "view",
                                                        "reason": "the stop came too late: the run was already ending"})]
    assert "run: refused by you (view) — the stop came too late: the run was already ending" in decisions_html(
        events, RunSecrets())
