"""The release: `python -m build` makes an sdist and a wheel that install and register in a clean venv.

Slow (it builds in an isolated environment and installs Airflow from the package index into a new
virtualenv, about a minute and a half), so it runs with the e2e group. The build reads a copy of
the work tree's files (tracked and untracked, less what .gitignore ignores), so it never writes
into the work tree. Then, in a fresh venv with the wheel and its extras [postgres,sqlite]:

- `airflow providers list` shows airflow-idempotent at the package's version;
- `airflow plugins` lists the `idempotent` plugin (listener and backfill guard middleware);
- `airflow-idempotent --help` and `--version` work;
- the history store's Alembic migrations run from the installed wheel (embedded SQLite store).

The wheel must hold every file of the package's source tree (so the migrations, templates, type
marker and any UI assets, none of them .py modules alone), the sdist the package and README.md.
The version is the one `airflow_idempotent/__init__.py` declares, which pyproject.toml reads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "airflow_idempotent"
DIST = "airflow_idempotent"  # normalised distribution name in file names
EXTRAS = "postgres,sqlite"


def source_version() -> str:
    """`__version__` read from the source file, as setuptools' `attr:` does, without importing it."""
    match = re.search(r'^__version__ = "([^"]+)"$', (REPO / PACKAGE / "__init__.py").read_text(), re.M)
    assert match, 'airflow_idempotent/__init__.py must declare __version__ = "X.Y.Z"'
    return match[1]


def work_tree_files() -> list[str]:
    """Tracked and untracked files, less the ignored ones, that exist now."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({f for f in out.split("\0") if f and (REPO / f).is_file()})


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Airflow's or Python's settings of the test session."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "_AIRFLOW", "PYTHON", "VIRTUAL_ENV")) and k != "PYTEST_CURRENT_TEST"
    }
    env.update(extra)
    return env


@dataclass
class Release:
    version: str
    wheel: Path
    sdist: Path
    venv: Path
    home: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self) -> dict[str, str]:
        return clean_env(AIRFLOW_HOME=str(self.home), AIRFLOW__CORE__LOAD_EXAMPLES="False")


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    root = tmp_path_factory.mktemp("release")
    src, dist = root / "src", root / "dist"
    for name in work_tree_files():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    try:
        import build  # noqa: F401  (the `build` frontend must be installed where pytest runs)
    except ImportError:
        pytest.fail(f"`build` is not installed: {sys.executable} -m pip install build", pytrace=False)
    # sdist first, then the wheel from the sdist: a file the sdist lacks is missing from the wheel too.
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)], clean_env(), root, timeout=600)
    version = source_version()
    wheels = list(dist.glob("*.whl"))
    sdists = list(dist.glob("*.tar.gz"))
    assert [w.name for w in wheels] == [f"{DIST}-{version}-py3-none-any.whl"], wheels
    assert [s.name for s in sdists] == [f"{DIST}-{version}.tar.gz"], sdists

    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)], clean_env(), root, timeout=120)
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{wheels[0]}[{EXTRAS}]"],
        clean_env(),
        root,
        timeout=900,
    )
    home = root / "airflow_home"
    home.mkdir()
    yield Release(version, wheels[0], sdists[0], venv, home)


# --------------------------------------------------------------------------------------------
# What the files hold.
# --------------------------------------------------------------------------------------------


def test_the_wheel_holds_every_file_of_the_package(release: Release) -> None:
    with zipfile.ZipFile(release.wheel) as whl:
        names = set(whl.namelist())
        metadata = Parser().parsestr(whl.read(f"{DIST}-{release.version}.dist-info/METADATA").decode())
        entry_points = whl.read(f"{DIST}-{release.version}.dist-info/entry_points.txt").decode()
    source = {f for f in work_tree_files() if f.startswith(f"{PACKAGE}/")}
    missing = sorted(source - names)
    assert not missing, f"files of the package missing from the wheel (package-data?): {missing}"
    # Named explicitly: what the package reads at run time from files that are not modules.
    for name in (
        "history/migrations/env.py",
        "history/migrations/script.py.mako",
        "history/migrations/versions/0001_initial.py",
        "py.typed",
    ):
        assert f"{PACKAGE}/{name}" in names, name
    # The UI's templates, scripts and styles: files that are not Python, found wherever they live.
    assets = sorted(f for f in source if f.endswith((".html", ".js", ".css")))
    assert assets, "the package has no UI assets (templates, scripts, styles) in its source tree"
    assert set(assets) <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("tests/", "dags/", "bench/", "deploy/"))]

    assert metadata["Name"] == "airflow-idempotent"
    assert metadata["Version"] == release.version
    assert {"postgres", "sqlite"} <= set(metadata.get_all("Provides-Extra") or [])
    requires = metadata.get_all("Requires-Dist") or []
    assert any(r.startswith("apache-airflow>=") for r in requires), requires
    for line in (
        "[apache_airflow_provider]",
        "provider_info = airflow_idempotent:get_provider_info",
        "[airflow.plugins]",
        "idempotent = airflow_idempotent.plugins.listener:IdempotentPlugin",
        "airflow-idempotent = airflow_idempotent.cli:main",
    ):
        assert line in entry_points, (line, entry_points)


def test_the_sdist_holds_the_package_and_readme(release: Release) -> None:
    top = f"{DIST}-{release.version}"
    with tarfile.open(release.sdist) as sdist:
        names = {m.name for m in sdist.getmembers()}
        pkg_info, readme = (sdist.extractfile(f"{top}/{n}") for n in ("PKG-INFO", "README.md"))
        assert pkg_info is not None and readme is not None
        metadata = Parser().parsestr(pkg_info.read().decode())
        readme_text = readme.read().decode()
    for name in ("README.md", "pyproject.toml", "PKG-INFO", f"{PACKAGE}/__init__.py"):
        assert f"{top}/{name}" in names, name
    package = {f for f in work_tree_files() if f.startswith(f"{PACKAGE}/")}
    missing = sorted(f for f in package if f"{top}/{f}" not in names)
    assert not missing, missing
    assert metadata["Version"] == release.version
    # The README is the package's long description (what an index shows), as Markdown.
    assert metadata["Description-Content-Type"] == "text/markdown"
    description = metadata.get_payload()
    assert isinstance(description, str) and description.strip() == readme_text.strip()
    assert readme_text.startswith("# airflow-idempotent")


# --------------------------------------------------------------------------------------------
# What the installed wheel does.
# --------------------------------------------------------------------------------------------


def test_airflow_registers_the_provider(release: Release) -> None:
    out = run([release.bin("airflow"), "providers", "list", "-o", "json"], release.env(), release.home, 300)
    providers = {p["package_name"]: p["version"] for p in json.loads(out.stdout)}
    assert providers.get("airflow-idempotent") == release.version, providers


def test_airflow_lists_the_plugin(release: Release) -> None:
    out = run([release.bin("airflow"), "plugins", "-o", "json"], release.env(), release.home, 300)
    plugins = {p["name"]: p for p in json.loads(out.stdout)}
    assert "idempotent" in plugins, sorted(plugins)
    plugin = plugins["idempotent"]
    assert "airflow_idempotent.plugins.listener" in json.dumps(plugin), plugin
    assert f"airflow-idempotent=={release.version}" in str(plugin.get("source")), plugin


def test_the_cli_runs_from_the_installed_wheel(release: Release) -> None:
    env = release.env()
    out = run([release.bin("airflow-idempotent"), "--help"], env, release.home, 120)
    for command in ("history", "stop", "resume", "switches", "lint"):
        assert command in out.stdout, command
    out = run([release.bin("airflow-idempotent"), "--version"], env, release.home, 120)
    assert out.stdout.strip() == f"airflow-idempotent {release.version}"
    where = run(
        [release.bin("python"), "-c", "import airflow_idempotent; print(airflow_idempotent.__file__)"],
        env,
        release.home,
        120,
    )
    assert Path(where.stdout.strip()).is_relative_to(release.venv), where.stdout  # not the work tree


def test_the_history_migrations_run_from_the_wheel(release: Release) -> None:
    """No `idempotent_history` connection: the embedded SQLite store, migrated by the wheel's Alembic."""
    env = release.env()
    out = run([release.bin("airflow-idempotent"), "switches", "--json"], env, release.home, 300)
    assert json.loads(out.stdout) == [], out.stdout
    db = release.home / "idempotent_history.db"
    assert db.is_file()
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        (revision,) = conn.execute("SELECT version_num FROM idem_alembic_version").fetchone()
    assert {"idem_dag_run_event", "idem_task_attempt", "idem_window_write", "idem_kill_switch"} <= tables
    assert revision == head_revision()


def head_revision() -> str:
    """The migration no other migration names as its down_revision, read from the source tree."""
    revisions, parents = set(), set()
    for path in (REPO / PACKAGE / "history" / "migrations" / "versions").glob("*.py"):
        text = path.read_text()
        revision = re.search(r'^revision = "([^"]+)"', text, re.M)
        assert revision, path
        revisions.add(revision[1])
        parents.update(re.findall(r'^down_revision = "([^"]+)"', text, re.M))
    (head,) = revisions - parents
    return head
