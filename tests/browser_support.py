"""JupyterLab + headless Chromium for the real-browser test (and Binder's settings).

Lab runs on loopback with a token and every piece of Jupyter state (config, data,
runtime, IPython profile, Lab settings) under one temporary directory, so the test
neither reads nor writes the user's setup or the committed notebooks.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the environment variable naming the Chromium (or Chrome) binary to drive
CHROMIUM_ENV = "PLANBOOK_CHROMIUM"
#: Debian's ``chromium`` package, used when the variable is unset or empty
DEFAULT_CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> Path:
    """The browser binary: ``$PLANBOOK_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    return Path(os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM)


CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def binder_overrides() -> dict[str, Any]:
    """The JupyterLab ``overrides.json`` that ``binder/postBuild`` writes (one source of truth)."""
    text = (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    match = re.search(r"overrides\.json\"?\s*<<'JSON'\n(.*?)\nJSON\n", text, re.S)
    if not match:
        raise AssertionError("binder/postBuild must write overrides.json with a <<'JSON' … JSON here-document")
    return json.loads(match.group(1))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab server; stop it with :meth:`stop` (by PID)."""

    root: Path
    port: int
    token: str
    proc: subprocess.Popen
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    #: the server's environment (its Jupyter config, data and runtime directories)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            self.url(path), method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def delete_sessions(self) -> int:
        """Shut down every kernel the pages started (a kernel outlives its closed page)."""
        sessions = self.api("GET", "/api/sessions")
        for session in sessions:
            self.api("DELETE", f"/api/sessions/{session['id']}")
        return len(sessions)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


def start_lab(root: Path, *, timeout: float = 60.0, app: str = "lab") -> Lab:
    """Start JupyterLab (``app="lab"``) or Notebook 7 (``app="notebook"``) serving ``root``,
    with all Jupyter state in ``root/.jupyter-state``."""
    state = root / f".jupyter-state-{app}"
    settings = state / "lab-settings"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps(binder_overrides(), indent=2), encoding="utf-8")
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(state / "config"),
        "JUPYTER_DATA_DIR": str(state / "data"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "IPYTHONDIR": str(state / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    token, port = secrets.token_hex(16), free_port()
    jupyter = Path(sys.executable).with_name("jupyter")
    command = [
        str(jupyter) if jupyter.exists() else "jupyter", app,
        "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", "--allow-root", f"--ServerApp.root_dir={root}",
    ]
    if app == "lab":
        command += [
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.expose_app_in_browser=True",
            # the Binder overrides, kept out of the shared environment's share/jupyter
            f"--LabApp.app_settings_dir={settings}",
        ]
    else:
        # (no Binder overrides: they name JupyterLab plugins Notebook 7 does not load)
        command += ["--JupyterNotebookApp.expose_app_in_browser=True"]
    log_path = state / "lab.log"
    log = log_path.open("w", encoding="utf-8")
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    lab = Lab(root=root, port=port, token=token, proc=proc, log_path=log_path, env=env)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"Jupyter {app} exited with code {proc.returncode}:\n{lab.log()[-3000:]}")
        try:
            lab.api("GET", "/api/status")
            return lab
        except (urllib.error.URLError, ConnectionError, OSError):
            if time.monotonic() > deadline:
                lab.stop()
                raise RuntimeError(f"Jupyter {app} did not answer within {timeout:.0f} s:\n{lab.log()[-3000:]}")
            time.sleep(0.2)


def copy_notebooks(root: Path) -> list[str]:
    """Copy ``notebooks/`` (with the files the notebooks read, such as cassettes) into ``root``.

    Returns the names of the notebooks copied.
    """
    shutil.copytree(
        ROOT / "notebooks", root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    )
    return sorted(p.name for p in root.glob("*.ipynb"))


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook of code cells (with a kernelspec, or the front end asks for a kernel)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, str(path))


def trust(server: Lab, path: Path) -> None:
    """``jupyter trust`` a notebook for ``server`` (its signature goes to the server's data directory):
    a trusted notebook is what a user's own saved notebook is, and the front end then renders
    widget outputs instead of the sanitized HTML beside them."""
    jupyter = Path(sys.executable).with_name("jupyter")
    subprocess.run([str(jupyter) if jupyter.exists() else "jupyter", "trust", str(path)], env=server.env,
                   check=True, capture_output=True, timeout=60)


def execute_notebook(path: Path, target: Path, *, store_widget_state: bool) -> Any:
    """Execute ``path`` with nbclient (in its folder) and write it to ``target``; returns the notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, resources={"metadata": {"path": str(path.parent)}}, store_widget_state=store_widget_state,
                   record_timing=False, timeout=120).execute()
    nbformat.write(nb, str(target))
    return nb


#: colour helpers the browser tests' page scripts share (WCAG contrast from computed styles):
#: ``parse`` a CSS colour, lay one ``over`` another, the colour ``behind`` an element, ``ratio`` of two
COLOUR_JS = r"""
  function parse(c) {
    let m = c && c.match(/^rgba?\(([^)]+)\)/);
    if (m) { const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; }
    m = c && c.match(/^color\(srgb ([^)]+)\)/);
    if (m) { const p = m[1].split(/[\s\/]+/).filter(Boolean).map(Number); return [p[0] * 255, p[1] * 255, p[2] * 255, p.length > 3 ? p[3] : 1]; }
    return null;
  }
  const over = (top, bottom) => { const a = top[3]; return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]); };
  function behind(el) {
    const chain = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) chain.push(e);
    let color = [255, 255, 255, 1];
    for (const e of chain.reverse()) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) color = over(c, color);
    }
    return color;
  }
  const lin = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  const lum = c => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
"""

#: ``COLOUR_JS`` and ``texts(root, skip)``: every visible text under ``root`` (one per element; an
#: element ``skip`` answers true for is left out) with its WCAG contrast ``ratio`` against what is
#: behind it, opacity included, as ``{ el, text, ratio, fg, bg }``
TEXT_CONTRAST_JS = COLOUR_JS + r"""
  function opacity(el) {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
    return o;
  }
  function texts(root, skip) {
    const found = [], seen = new Set();
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode, el = node.parentElement;
      if (!node.textContent.trim() || !el || seen.has(el) || !el.getClientRects().length || (skip && skip(el))) continue;
      seen.add(el);
      const cs = getComputedStyle(el);
      if (cs.visibility === 'hidden' || cs.display === 'none') continue;
      const bg = behind(el), c = parse(cs.color);
      const fg = over([c[0], c[1], c[2], c[3] * opacity(el)], bg);
      found.push({ el, text: node.textContent.trim(), ratio: ratio(fg, bg), fg: fg.slice(0, 3).map(Math.round),
                   bg: bg.slice(0, 3).map(Math.round) });
    }
    return found;
  }
"""


# ------------------------------------------------------------------ what every browser test shares
# (the fixtures and helpers the browser tests and the first-hour test use: one copy, here)
ARTIFACTS = ROOT / "test-artifacts"
RUN_TIMEOUT_MS = 45_000
TIMINGS: dict[str, float] = {}

def _require_chromium() -> Path:
    chromium = chromium_path()
    if chromium.is_file() and os.access(chromium, os.X_OK):
        return chromium
    where = f"{chromium} (from ${CHROMIUM_ENV})" if os.environ.get(CHROMIUM_ENV) else f"{chromium} (set ${CHROMIUM_ENV} to use another browser)"
    if os.environ.get("CI"):
        pytest.fail(
            f"no Chromium at {where} and CI is set: .ci/run must install it first "
            "(apt-get update && apt-get install -y chromium)", pytrace=False,
        )
    pytest.skip(f"no Chromium at {where}: install Debian's chromium package (apt-get install -y chromium)")

@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require_chromium()  # before starting Lab: no browser, no point
    root = tmp_path_factory.mktemp("lab-root")
    copy_notebooks(root)  # the test runs copies: the committed notebooks stay as they are
    lab = start_lab(root)
    TIMINGS["lab_ready_s"] = time.monotonic() - lab.started
    try:
        yield lab
    finally:
        lab.stop()


@contextlib.contextmanager
def launched_chromium() -> Iterator[Any]:
    """Debian's Chromium under Playwright (skipped without them here, a failure under CI)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed: pip install the project's test extra", pytrace=False)
        pytest.skip("playwright is not installed (pip install playwright; never `playwright install`)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(_require_chromium()), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def set_theme(lab: Lab, theme: str) -> None:
    """The theme as a user setting (JupyterLab and Notebook 7 read it when a page loads)."""
    body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
    request = urllib.request.Request(lab.url("/lab/api/settings/@jupyterlab/apputils-extension:themes"), data=body,
                                     method="PUT", headers={"Authorization": f"token {lab.token}",
                                                            "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10):
        pass


@pytest.fixture(scope="module")
def browser(lab: Lab) -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-timings.json").write_text(json.dumps(TIMINGS, indent=2), encoding="utf-8")
    print("\nbrowser test timings (s):", json.dumps({k: round(v, 2) for k, v in TIMINGS.items()}))

def _command(page: Any, command: str) -> None:
    page.evaluate(f"() => {{ window.jupyterapp.commands.execute({json.dumps(command)}); }}")

KERNEL_IDLE_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}"""

@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require_chromium()
    root = tmp_path_factory.mktemp("nb7-root")
    server = start_lab(root, app="notebook")
    try:
        yield server
    finally:
        server.stop()

def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".planbook-live").first.screenshot(path=str(ARTIFACTS / f"browser-{name}.png"))


def open_notebook(page: Any, lab: Lab, name: str, *, kernel: bool = True) -> None:
    """Open notebook ``name`` in JupyterLab and wait for its cells (and, ``kernel``, its kernel idle)."""
    page.goto(lab.url(f"/lab/tree/{name}?token={lab.token}&reset"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30_000)
    if kernel:
        page.wait_for_function(KERNEL_IDLE_JS, timeout=30_000)


@contextlib.contextmanager
def notebook_page(browser: Any, lab: Lab, name: str, *, height: int = 1000) -> Iterator[tuple[Any, list[str]]]:
    """A new page with notebook ``name`` open in JupyterLab, its kernel idle, and the page's uncaught
    errors as they come; the page closes and every kernel shuts down after."""
    context = browser.new_context(viewport={"width": 1280, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"{exc} {exc.stack or ''}"))
    try:
        open_notebook(page, lab, name)
        yield page, errors
    finally:
        context.close()
        lab.delete_sessions()


#: the MIME type of a widget's output: a saved notebook must keep none (without its kernel it says
#: "Error displaying widget")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def save_notebook(page: Any) -> None:
    """Save the current notebook through JupyterLab and wait until the file is written."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")  # awaits the save
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=20_000)


def saved_outputs(path: Path) -> list[dict[str, Any]]:
    """Every code cell's outputs in the notebook file at ``path``, in order."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def output_text(output: dict[str, Any], mime: str) -> str:
    """An output's ``mime`` data as one string (empty when it has none)."""
    value = output.get("data", {}).get(mime, "")
    return "".join(value) if isinstance(value, list) else str(value)
