"""The Binder files agree with pyproject.toml, so the badge launches what the tests test.

A dependency added to pyproject but not to ``binder/requirements.txt`` would make the
Binder image install an unpinned version at ``pip install .`` time (or, for a package
with a broken newest release, fail the build): these tests catch that drift.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10, the oldest planbook supports: the test extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
FIRST_NOTEBOOK = "notebooks/01-first-plan.ipynb"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from browser_support import binder_overrides  # noqa: E402


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def pinned_requirements() -> dict[str, Requirement]:
    """``binder/requirements.txt`` as {canonical name: requirement}; every line must pin."""
    pins: dict[str, Requirement] = {}
    for number, raw in enumerate((BINDER / "requirements.txt").read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", (
            f"binder/requirements.txt line {number} ({line!r}) is not pinned: use name==version"
        )
        name = canonicalize_name(req.name)
        assert name not in pins, f"binder/requirements.txt lists {req.name} twice"
        pins[name] = req
    return pins


@pytest.mark.parametrize("group", ["dependencies", "lab", "tutorials"])
def test_every_runtime_and_lab_dependency_is_pinned_compatibly(pyproject: dict, group: str) -> None:
    """Binder runs what ``pip install ".[tutorials]"`` gives a user: planbook, JupyterLab and what
    every tutorial needs."""
    project = pyproject["project"]
    declared = project["dependencies"] if group == "dependencies" else project["optional-dependencies"][group]
    where = "a runtime dependency" if group == "dependencies" else f"in the [{group}] extra"
    pins = pinned_requirements()
    for dep in declared:
        req = Requirement(dep)
        if req.marker is not None and not req.marker.evaluate({"python_version": binder_python()}):
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is {where} in pyproject.toml but missing from binder/requirements.txt"
        pinned = Version(next(iter(pins[name].specifier)).version)
        assert req.specifier.contains(pinned, prereleases=True), (
            f"binder/requirements.txt pins {req.name}=={pinned}, outside pyproject's {req.specifier}"
        )


def test_binder_installs_this_package_and_not_a_published_one(pyproject: dict) -> None:
    name = canonicalize_name(pyproject["project"]["name"])
    assert name not in pinned_requirements(), (
        f"binder/requirements.txt must not install {name} from the index: postBuild installs the repository"
    )
    commands = [line.strip() for line in (BINDER / "postBuild").read_text(encoding="utf-8").splitlines()]
    installs = [c for c in commands if re.match(r"(python -m )?pip install\b", c)]
    assert installs, "postBuild does not pip install the repository"
    assert any(c.split()[-1] in (".", "./") for c in installs), f"postBuild must `pip install .`; found {installs}"
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert any(pattern.rstrip("*") == name for pattern in include), f"pyproject does not package {name}/"


def test_postbuild_stops_on_the_first_error() -> None:
    path = BINDER / "postBuild"
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0].startswith("#!") and lines[0].endswith("bash"), "postBuild needs a bash shebang"
    commands = [line for line in lines[1:] if line and not line.startswith("#")]
    assert commands[0] == "set -e", f"postBuild's first command must be `set -e`, not {commands[0]!r}"
    assert path.stat().st_mode & stat.S_IXUSR, "postBuild must be executable (chmod +x binder/postBuild)"
    mode = subprocess.run(
        ["git", "ls-files", "-s", "binder/postBuild"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    if mode:  # committed: the executable bit must be in git too, or Binder's checkout loses it
        assert mode[0] == "100755", f"git stores binder/postBuild with mode {mode[0]}; run git update-index --chmod=+x"


def test_overrides_turn_off_news_updates_and_autosave() -> None:
    overrides = binder_overrides()
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification["fetchNews"] == "false"  # this setting is a string in JupyterLab's schema
    assert notification["checkForUpdates"] is False
    assert overrides["@jupyterlab/docmanager-extension:plugin"]["autosave"] is False


def test_postbuild_runs_and_writes_overrides_into_the_environment(tmp_path: Path) -> None:
    """Run the real script with ``pip`` and ``python`` replaced by recorders."""
    bin_dir, prefix = tmp_path / "bin", tmp_path / "env"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text(f'#!/bin/bash\necho "$@" >> {tmp_path}/pip.log\n')
    (bin_dir / "python").write_text(f"#!/bin/bash\necho {prefix}\n")
    for tool in ("pip", "python"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pip.log").read_text().split() == ["install", "--no-cache-dir", "."]
    written = json.loads((prefix / "share/jupyter/lab/settings/overrides.json").read_text(encoding="utf-8"))
    assert written == binder_overrides()


def test_postbuild_fails_when_the_install_fails(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text("#!/bin/bash\nexit 3\n")
    (bin_dir / "pip").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 3


def binder_python() -> str:
    """The Python version ``binder/runtime.txt`` asks for, like ``3.11``."""
    text = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", text)
    assert match, f"binder/runtime.txt should read like python-3.11, not {text!r}"
    return match.group(1)


def test_runtime_python_matches_requires_python(pyproject: dict) -> None:
    from packaging.specifiers import SpecifierSet

    assert SpecifierSet(pyproject["project"]["requires-python"]).contains(binder_python() + ".0")


def binder_links(text: str) -> list[str]:
    return re.findall(r"https://mybinder\.org/v2/[^\s)\]\"'>]+", text)


@pytest.mark.parametrize("readme", ["README.md", "binder/README.md"])
def test_readme_badge_opens_the_first_notebook_in_lab(readme: str) -> None:
    links = binder_links((ROOT / readme).read_text(encoding="utf-8"))
    assert links, f"{readme} has no mybinder.org link; add the Binder badge (see binder/README.md)"
    for link in links:
        parts = urlsplit(link)
        assert parts.path.startswith("/v2/gh/"), f"{link}: expected a /v2/gh/OWNER/REPO/REF link"
        urlpath = unquote(parse_qs(parts.query).get("urlpath", [""])[0])
        assert urlpath == f"lab/tree/{FIRST_NOTEBOOK}", f"{link}: urlpath should be lab/tree/{FIRST_NOTEBOOK}"
    assert (ROOT / FIRST_NOTEBOOK).exists(), f"the badge opens {FIRST_NOTEBOOK}, which does not exist"


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_committed_executed_and_render_on_github(path: Path) -> None:
    """Binder and GitHub show the stored outputs: they must be there, and renderable."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    widgets = nb.get("metadata", {}).get("widgets")
    if widgets is not None:  # GitHub refuses to render a notebook whose widget metadata has no state
        state = widgets.get("application/vnd.jupyter.widget-state+json", {})
        assert "state" in state, f"{path.name}: metadata.widgets has no 'state': strip it or store the full state"
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    unexecuted = [i for i, c in enumerate(code, 1) if c.get("execution_count") is None]
    assert not unexecuted, f"{path.name}: code cells {unexecuted} were not executed; commit the notebook executed"
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: not executed top to bottom in one kernel: {counts}"
