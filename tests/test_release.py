"""The release: `python -m build` makes an sdist and a wheel that install and work beside plain Airflow.

Slow (it builds in an isolated environment, installs the wheel beside `apache-airflow==3.3.2` into
a new virtualenv with uv from its warm cache, and runs Airflow's CLI a dozen times), so it runs
with the e2e group. The build reads a copy of the work tree's files (tracked and untracked, less
what .gitignore ignores), so it never writes into the work tree. Then, in a fresh venv with the
wheel (not editable) and its extras [postgres,sqlite], beside plain `apache-airflow==3.3.2`, the
lowest Airflow the package declares:

- `airflow providers list` shows airflow-idempotent at the package's version; `airflow config
  list` shows the provider's `[idempotent] unbounded_catchup`;
- `airflow plugins` lists the `idempotent` plugin (listener, guard middleware, UI app, views), and
  the UI app, its templates and static files load from the installed package;
- `airflow-idempotent --help` and `--version` work;
- the history store's Alembic migrations run from the installed wheel (embedded SQLite store);
- the README's DAG runs twice with `airflow dags test` on SQLite and gives the scenario's figures;
  `airflow-idempotent history` shows both writes and `airflow-idempotent lint` passes the DAG;
- `airflow-idempotent demo` without the duckdb extra names the pip command; with it, the demo
  runs from the installed package and prints the scenario's figures.

The wheel must hold every file of the package's source tree (so the migrations, templates, type
marker, the demo's DAG file and any UI assets, none of them .py modules alone) and the license;
the sdist is source-only: the package, README.md, LICENSE and pyproject.toml, no tests (the suite
needs real databases and servers and runs from a clone). The version is the one
`airflow_idempotent/__init__.py` declares, which pyproject.toml reads.
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
from datetime import date
from decimal import Decimal
from email.parser import Parser
from pathlib import Path

import pytest

from tests.test_operators import DAY, amount, day_truth

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "airflow_idempotent"
DIST = "airflow_idempotent"  # normalised distribution name in file names
EXTRAS = "postgres,sqlite"
#: The lowest Airflow the package declares (pyproject.toml), installed as is.
AIRFLOW = "3.3.2"


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
    uv = str(Path(sys.executable).with_name("uv"))  # the dev install's uv, with its warm cache
    run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], clean_env(), root, timeout=120)
    run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--compile-bytecode",  # as `make venv`: every airflow command below imports Airflow
            "--python",
            str(venv / "bin" / "python"),
            f"{wheels[0]}[{EXTRAS}]",
            f"apache-airflow=={AIRFLOW}",
        ],
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
    assert f"{PACKAGE}/demo_dags/payouts.py" in names  # what `airflow-idempotent demo` runs
    with zipfile.ZipFile(release.wheel) as whl:
        license_text = whl.read(f"{DIST}-{release.version}.dist-info/licenses/LICENSE").decode()
    assert license_text == (REPO / "LICENSE").read_text()
    assert metadata["License-Expression"] == "Apache-2.0" and metadata["License-File"] == "LICENSE"
    assert metadata["Requires-Python"] == ">=3.11"
    classifiers = metadata.get_all("Classifier") or []
    assert {"Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider"} <= set(classifiers)
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert {u.split(",")[0] for u in metadata.get_all("Project-URL") or []} >= {"Documentation", "Source"}

    assert metadata["Name"] == "airflow-idempotent"
    assert metadata["Version"] == release.version
    assert {"postgres", "sqlite"} <= set(metadata.get_all("Provides-Extra") or [])
    requires = metadata.get_all("Requires-Dist") or []
    assert f"apache-airflow<4,>={AIRFLOW}" in requires, requires
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
    for name in ("README.md", "LICENSE", "pyproject.toml", "PKG-INFO", f"{PACKAGE}/__init__.py"):
        assert f"{top}/{name}" in names, name
    # source-only: the suite runs from a clone (setuptools used to add stray tests/test*.py)
    assert not [n for n in names if n.startswith((f"{top}/tests", f"{top}/bench", f"{top}/dags"))]
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


def test_the_venv_holds_plain_airflow_at_the_lowest_declared_version(release: Release) -> None:
    out = run([release.bin("airflow"), "version"], release.env(), release.home, 120)
    assert out.stdout.strip() == AIRFLOW


def test_airflow_config_lists_the_providers_setting(release: Release) -> None:
    out = run(
        [release.bin("airflow"), "config", "list", "--section", "idempotent", "--include-descriptions"],
        release.env(),
        release.home,
        120,
    )
    assert "[idempotent]" in out.stdout and "unbounded_catchup" in out.stdout, out.stdout
    value = run(
        [release.bin("airflow"), "config", "get-value", "idempotent", "unbounded_catchup"],
        release.env(),
        release.home,
        120,
    )
    assert value.stdout.strip() == "warn"


UI_PROBE = """
import json
from airflow_idempotent.plugins.listener import IdempotentPlugin
from airflow_idempotent.plugins.ui.application import app
from airflow_idempotent.plugins.ui.render import STATIC, STATIC_FILES, TEMPLATES, jinja_env

env = jinja_env()
templates = sorted(p.name for p in TEMPLATES.glob("*.html"))
for name in templates:
    env.get_template(name)
[entry] = IdempotentPlugin.fastapi_apps
print(json.dumps({
    "templates": templates,
    "static": sorted(n for n in STATIC_FILES if (STATIC / n).is_file()),
    "static_declared": sorted(STATIC_FILES),
    "where": str(TEMPLATES),
    "mounted_at": entry["url_prefix"],
    "same_app": entry["app"] is app,
    "paths": sorted({getattr(r, "path", "") for r in app.routes}),
    "views": [v["name"] for v in IdempotentPlugin.external_views],
}))
"""


def test_the_plugins_ui_loads_from_the_installed_package(release: Release) -> None:
    """The UI app Airflow's API server mounts builds, and its templates and static files load."""
    out = run([release.bin("python"), "-c", UI_PROBE], release.env(), release.home, 300)
    ui = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(ui["where"]).is_relative_to(release.venv)
    assert ui["templates"] and ui["static"] == ui["static_declared"] and ui["static"]
    assert ui["mounted_at"] == "/idempotent" and ui["same_app"]
    assert "/static/{name}" in ui["paths"] and any(p.startswith("/api/") for p in ui["paths"])
    assert ui["views"]
    plugins = json.loads(
        run([release.bin("airflow"), "plugins", "-o", "json"], release.env(), release.home, 300).stdout
    )
    (plugin,) = [p for p in plugins if p["name"] == "idempotent"]
    assert "airflow-idempotent UI" in json.dumps(plugin), plugin


def readme_dag() -> str:
    """The README's one DAG, as the README shows it."""
    text = (REPO / "README.md").read_text()
    (block,) = re.findall(r"<!-- docs-test: dag payouts -->\n```python\n(.*?)```", text, re.S)
    return block


def test_the_readme_dag_runs_twice_with_airflow_dags_test(release: Release, tmp_path: Path) -> None:
    import sqlalchemy as sa

    from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "payouts_daily.py").write_text(readme_dag())
    db = tmp_path / "warehouse.db"
    engine = sa.create_engine(f"sqlite:///{db}")
    create_sales(engine)
    create_payouts(engine)
    env = release.env() | {
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_WAREHOUSE": json.dumps({"conn_type": "sqlite", "host": str(db)}),
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": json.dumps(
            {"conn_type": "sqlite", "host": str(tmp_path / "history.db")}
        ),
    }
    run([release.bin("airflow"), "db", "migrate"], env, release.home, 600)
    for _ in range(2):
        run(
            [release.bin("airflow"), "dags", "test", "payouts_daily", DAY.isoformat()], env, release.home, 600
        )
    try:
        assert window_totals(engine, "payouts", DAY) == day_truth(DAY)
    finally:
        engine.dispose()
    out = run(
        [release.bin("airflow-idempotent"), "history", "--window", DAY.isoformat(), "--json"],
        env,
        release.home,
        120,
    )
    (window,) = json.loads(out.stdout)["windows"]
    assert [w["ordinal"] for w in window["writes"]] == [1, 2]
    assert [w["row_count"] for w in window["writes"]] == [day_truth(DAY)[0]] * 2
    assert len({w["checksum"] for w in window["writes"]}) == 1
    lint = run([release.bin("airflow-idempotent"), "lint", str(dags)], env, release.home, 120)
    assert lint.returncode == 0


def test_the_demo_runs_from_the_installed_package(release: Release, tmp_path: Path) -> None:
    """Without the duckdb extra the demo names it; with it, the demo runs from the wheel's files."""
    demo = [release.bin("airflow-idempotent"), "demo", "--dir", str(tmp_path / "demo")]
    proc = subprocess.run(demo, env=release.env(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "pip install 'airflow-idempotent[duckdb]'" in proc.stderr, proc.stderr
    assert not (tmp_path / "demo").exists()  # stopped before anything was made
    uv = str(Path(sys.executable).with_name("uv"))
    run(
        [uv, "pip", "install", "--quiet", "--python", release.bin("python"), f"{release.wheel}[duckdb]"],
        clean_env(),
        tmp_path,
        600,
    )
    proc = run(demo, release.env(), tmp_path, 900)  # cwd: not a clone, no dags/ folder
    check_demo_figures(proc.stdout)


def check_demo_figures(stdout: str) -> None:
    """The demo's table, the crash then two reruns of each DAG, against the scenario's formula
    (`make demo` runs the same module from the source tree)."""
    found: dict[tuple[str, str], tuple[int, Decimal]] = {}
    for line in stdout.splitlines():
        m = re.match(r"(payouts_\w+)\s+(crash|rerun \d).*?\s([\d,]+) rows\s+([\d,.]+) EUR", line)
        if m:
            found[(m[1], m[2])] = (int(m[3].replace(",", "")), Decimal(m[4].replace(",", "")))
    first = (DAY - date(2026, 8, 1)).days * 2000 + 1
    crashed = (1247, sum((amount(i) for i in range(first, first + 1247)), Decimal("0")))
    truth = day_truth(DAY)
    for dag_id in ("payouts_overwrite", "payouts_merge"):
        assert found[(dag_id, "crash")] == crashed
        assert found[(dag_id, "rerun 1")] == truth
        assert found[(dag_id, "rerun 2")] == truth
    naive = "payouts_append_naive"
    assert found[(naive, "rerun 1")] == (crashed[0] + truth[0], crashed[1] + truth[1])
    assert found[(naive, "rerun 2")] == (crashed[0] + 2 * truth[0], crashed[1] + 2 * truth[1])
