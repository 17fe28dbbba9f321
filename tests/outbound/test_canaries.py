"""Nothing secret leaves a run, proven with canaries (issue 34 §3).

Distinct canary secrets are planted through every route a run learns a secret by (a
secret-named argument, a nested key, a tuple, a reference through two steps, ``Secret.env`` and
a named ``Secret``, an MCP toolbox's env, an edit, the model's key and base URL); careless tools
echo them in every form; every exit's bytes are collected (the store file and its WAL, views,
events, revisions, spans, the CLI, a real kernel's IOPub and the saved notebook, ``load_run``,
``planbook mcp serve``'s answers, model requests and the cassette, errors raised) and scanned
for every form of every canary and any 8-character fragment of one. The machinery is in
``tests/canary_support.py``. The last test shows the scan can fail: with masking switched off
(``PLANBOOK_UNSAFE_UNMASKED=1``, read at import, so in a new process) it finds leaks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import canary_support as cs

MASKING_OFF = os.environ.get("PLANBOOK_UNSAFE_UNMASKED", "") == "1"


def _strict(exits: cs.Exits) -> None:
    leaks = exits.leaks()
    if leaks:
        pytest.fail(f"{len(leaks)} leaks (route | exit | form | context):\n{cs.report(leaks)}", pytrace=False)


# ------------------------------------------------------------------ the scan itself (fast)
def test_the_scan_finds_every_form_of_every_canary_and_any_fragment() -> None:
    for route, canary in cs.CANARIES.items():
        assert len(canary) >= 16 and canary.count(cs.ROUTES[route]) >= 1
        for name, form in cs.forms_of(canary).items():
            found = cs.scan(f"<p>before {form.upper()} after</p>", "test")
            assert (route, name) in {(leak.route, leak.form) for leak in found}, (route, name, form)
        for start in (0, 5, len(canary) - 8):  # a text cut inside the secret keeps a part of it
            found = cs.scan(f"cut: {canary[start:start + 8]}…", "test")
            assert [(leak.route, leak.form) for leak in found] == [(route, "8-character fragment")]
    assert len(set(cs.CANARIES.values())) == len(cs.CANARIES)  # each leak names its route
    clean = f"{cs.ENV_SECRET} {cs.SECRET_NAME} CANARY_ and *** x9Qz " * 2000
    assert cs.scan(clean, "test") == []


def test_the_scan_reports_route_exit_form_and_context() -> None:
    canary = cs.CANARIES["tuple"]
    (leak,) = cs.scan("x" * 100 + f"auth=('ada', {canary!r})" + "y" * 100, "CLI")
    assert (leak.route, leak.exit, leak.form) == ("tuple", "CLI", "as is")
    assert canary in leak.context and len(eval(leak.context)) == 60  # noqa: S307 - our own repr


# ------------------------------------------------------------------ every exit, no leak
@pytest.mark.slow
@pytest.mark.skipif(MASKING_OFF, reason="masking is switched off in this process")
def test_no_canary_leaves_by_any_exit_of_the_python_process(tmp_path: Path) -> None:
    cs.RECEIVED.clear()
    exits = cs.drive_python(tmp_path)
    have_mcp = importlib.util.find_spec("mcp") is not None
    wanted = {"store (open)", "store (closed)", "views/record", "events/revisions", "load_run", "errors raised",
              "model requests and cassettes", "MCP answers", "fork views", "store (forks)", "compare"}
    if importlib.util.find_spec("opentelemetry.sdk"):
        wanted |= {"spans (with content)", "spans (without content)"}
    assert wanted <= {exit for exit, texts in exits.texts.items() if any(texts)}
    # every route reached a tool (or the model's client): a leak-free scan of nothing proves nothing
    routes = set(cs.ROUTES) - (set() if have_mcp else {"MCP toolbox env"})
    assert {route for route in routes if cs.CANARIES[route] in cs.RECEIVED} == routes
    _strict(exits)


@pytest.mark.slow
@pytest.mark.skipif(MASKING_OFF, reason="masking is switched off in this process")
def test_no_canary_leaves_by_the_command_line(tmp_path: Path) -> None:
    exits = cs.drive_cli(tmp_path)
    assert any("Run " in text for text in exits.texts["CLI"]), exits.texts["CLI"][:2]
    _strict(exits)


@pytest.mark.slow
@pytest.mark.skipif(MASKING_OFF, reason="masking is switched off in this process")
def test_no_canary_leaves_a_real_kernel_or_the_notebook_saved_from_it(tmp_path: Path) -> None:
    for module in ("jupyter_client", "ipykernel", "nbformat", "anywidget"):
        pytest.importorskip(module)
    exits = cs.drive_kernel(tmp_path)
    iopub = "\n".join(exits.texts["notebook IOPub"])
    assert "cell failed" not in iopub, [t for t in exits.texts["notebook IOPub"] if "cell failed" in t]
    assert "printed in two" in iopub and "Run " in iopub  # the runs ran and were shown
    _strict(exits)


# ------------------------------------------------------------------ and it can fail
@pytest.mark.slow
def test_with_masking_switched_off_the_canaries_are_found_at_several_exits(tmp_path: Path) -> None:
    out = tmp_path / "leaks.json"
    env = {**os.environ, "PLANBOOK_UNSAFE_UNMASKED": "1", "PLANBOOK_HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(cs.HERE), str(cs.ROOT)])}
    done = subprocess.run([sys.executable, str(Path(cs.__file__)), str(out), "--json", "--no-cli"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    leaks = json.loads(out.read_text())
    exits = {leak["exit"].split(" (")[0] for leak in leaks}
    routes = {leak["route"] for leak in leaks}
    assert len(leaks) > 0
    assert {"store", "views/record", "events/revisions", "model requests and cassettes", "MCP answers",
            "fork views", "compare"} <= exits, exits
    assert {"secret-named argument", "nested header", "tuple", "by reference (two steps)", "Secret.env",
            "named Secret", "edit", "fork edit"} <= routes, routes
