"""What installing planbook gives a user's project: the version, the pytest plugin without a
``pytest_plugins`` line, and a CI that tests the lowest versions pyproject.toml admits."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

import planbook

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the test extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "planbook.testing.pytest_plugin"


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def installed_from_this_checkout() -> importlib.metadata.Distribution | None:
    """The ``planbook`` distribution installed from this repository, if any (pip writes
    direct_url.json for ``pip install .`` and ``pip install -e .``; an editable install also
    leaves a ``planbook.egg-info`` without one in the checkout, which is skipped here)."""
    for dist in importlib.metadata.distributions(name="planbook"):
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
        if url.rstrip("/") == ROOT.as_uri():
            return dist
    return None


NOT_INSTALLED_HERE = "planbook on the path is not installed from this checkout (pip install -e .)"


# ------------------------------------------------------------------ __version__


def _version_looked_up_again() -> str:
    """The version as a new import would read it (it is looked up once, when first read)."""
    from planbook.data.version import version

    version.cache_clear()
    try:
        return version()
    finally:
        version.cache_clear()


def test_version_comes_from_the_installed_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    assert planbook.__version__ == importlib.metadata.version("planbook")
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"planbook": "9.8.7"}[name])
    assert _version_looked_up_again() == "9.8.7"


def test_version_of_a_checkout_that_is_not_installed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert _version_looked_up_again() == "0+unknown"


@pytest.mark.skipif(installed_from_this_checkout() is None, reason=NOT_INSTALLED_HERE)
def test_installed_version_is_the_pyproject_version(project: dict) -> None:
    assert planbook.__version__ == project["version"]


# ------------------------------------------------------------------ the pytest plugin


def test_pyproject_registers_the_pytest_plugin(project: dict) -> None:
    entry_points = project.get("entry-points", {}).get("pytest11", {})
    # named after its module: a conftest's pytest_plugins = [PLUGIN] then finds it registered
    assert entry_points == {PLUGIN: PLUGIN}


@pytest.mark.skipif(installed_from_this_checkout() is None, reason=NOT_INSTALLED_HERE)
def test_installed_metadata_has_the_pytest11_entry_point() -> None:
    dist = installed_from_this_checkout()
    assert dist is not None
    found = [ep for ep in dist.entry_points if ep.group == "pytest11"]
    assert [(ep.name, ep.value) for ep in found] == [(PLUGIN, PLUGIN)]


@pytest.fixture
def user_project(tmp_path: Path, project: dict) -> tuple[Path, dict[str, str]]:
    """A project outside this repository that uses ``fake_openai``, and the environment that
    runs pytest there as if planbook were installed: a copy of the package, and the pytest11
    entry point that pyproject.toml declares, in the file pip writes for it. (Not this checkout
    itself on the path: an old ``planbook.egg-info`` left in it would answer for pyproject.toml.)"""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "planbook", site / "planbook", ignore=shutil.ignore_patterns("__pycache__"))
    dist_info = site / "planbook_entry_point_under_test-0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: planbook-entry-point-under-test\nVersion: 0\n")
    lines = [f"{name} = {value}" for name, value in project.get("entry-points", {}).get("pytest11", {}).items()]
    (dist_info / "entry_points.txt").write_text("[pytest11]\n" + "\n".join(lines) + "\n")

    user = tmp_path / "user"
    user.mkdir()
    (user / "pytest.ini").write_text("[pytest]\n")
    (user / "test_my_planner.py").write_text(textwrap.dedent("""
        from planbook.testing import Reply

        def test_my_planner_asks_the_model(fake_openai):
            fake_openai.add(Reply.text("hello"))
            answer = fake_openai.client().chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}])
            assert answer.choices[0].message.content == "hello"
            assert fake_openai.requests[0].messages[-1]["content"] == "hi"
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(site)
    return user, env


def run_pytest(user: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(user)],
        cwd=user, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.slow
def test_fake_openai_works_in_a_users_project_without_pytest_plugins(user_project: tuple[Path, dict[str, str]]) -> None:
    user, env = user_project
    proc = run_pytest(user, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


@pytest.mark.slow
def test_a_conftest_that_still_lists_the_plugin_is_not_an_error(user_project: tuple[Path, dict[str, str]]) -> None:
    user, env = user_project
    (user / "conftest.py").write_text(f"pytest_plugins = [{PLUGIN!r}]\n")
    proc = run_pytest(user, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


@pytest.mark.slow
def test_the_plugin_can_be_turned_off(user_project: tuple[Path, dict[str, str]]) -> None:
    user, env = user_project
    proc = run_pytest(user, env, "-p", f"no:{PLUGIN}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fixture 'fake_openai' not found" in proc.stdout


# ------------------------------------------------------------------ the lowest-versions CI job


@pytest.fixture(scope="module")
def lowest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lowest_constraints", ROOT / ".ci" / "lowest_constraints.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lowest_constraints_pin_every_dependency_at_its_declared_bound(lowest: ModuleType, project: dict) -> None:
    pins = {Requirement(line).name.lower(): Requirement(line) for line in lowest.lowest_constraints(["test"])}
    for text in project["dependencies"] + project["optional-dependencies"]["test"]:
        declared = Requirement(text)
        floor = [spec.version for spec in declared.specifier if spec.operator == ">="]
        pinned = pins[declared.name.lower()]
        assert [spec.version for spec in pinned.specifier] == floor, f"{text}: pinned as {pinned}"
        assert pinned.marker == declared.marker


def test_lowest_constraints_refuse_an_unbounded_dependency(lowest: ModuleType, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["rich>=13", "requests"]\n')
    with pytest.raises(ValueError, match=r"'requests' in pyproject.toml needs exactly one lower bound"):
        lowest.lowest_constraints([], pyproject)


def test_lowest_constraints_refuse_two_bounds_for_one_package(lowest: ModuleType, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["Jupyter_Lab>=4"]\n'
        '[project.optional-dependencies]\nlab = ["jupyter-lab>=4.0.2"]\n'
    )
    with pytest.raises(ValueError, match=r"jupyter-lab two different bounds"):
        lowest.lowest_constraints(["lab"], pyproject)
    with pytest.raises(ValueError, match=r"no extra 'docs'; it has lab"):
        lowest.lowest_constraints(["docs"], pyproject)


def test_lowest_constraints_keep_markers_and_extras_out(lowest: ModuleType, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[project]\ndependencies = [\"tomli>=1.1; python_version < '3.11'\", \"jsonschema[format]>=4.18,<5\"]\n"
    )
    assert lowest.lowest_constraints([], pyproject) == ["tomli==1.1; python_version < '3.11'", "jsonschema==4.18"]


# ------------------------------------------------------------------ metadata and the README


def test_python_classifiers_start_at_requires_python(project: dict) -> None:
    floor = project["requires-python"].removeprefix(">=")
    versions = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3.")]
    assert versions and min(versions, key=lambda v: tuple(map(int, v.split(".")))) == floor, versions
    for framework in ("Framework :: Jupyter", "Framework :: IPython", "Framework :: Pytest"):
        assert framework in project["classifiers"]


def test_readme_notebook_commands_install_lab_and_open_a_tutorial(project: dict) -> None:
    """The two commands of "In a notebook" name an extra that brings JupyterLab and a kernel,
    and a notebook that exists."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", section, re.S)
    assert commands, "README's 'In a notebook' has no bash block with the install commands"
    lines = commands.group(1).strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("python3 -m venv .venv && "), lines
    extra = re.search(r'pip install "\.\[(\w+)\]"', lines[0])
    assert extra, lines[0]
    brings = {Requirement(r).name for r in project["optional-dependencies"][extra.group(1)]}
    assert {"jupyterlab", "ipykernel"} <= brings, brings
    opened = re.fullmatch(r"\.venv/bin/jupyter lab (\S+\.ipynb)", lines[1])
    assert opened and (ROOT / opened.group(1)).is_file(), lines[1]
