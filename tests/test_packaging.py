"""What the package carries besides its modules, checked on the source tree (fast), and the demo's
refusal of a DAG folder it cannot run (one real demo run: the DAG-run group).

The built sdist and wheel, installed into a fresh virtualenv beside plain Airflow, are
tests/test_release.py's (e2e group).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
import tomllib

from airflow_idempotent import demo

REPO = Path(__file__).resolve().parent.parent


def test_the_demos_dags_are_the_repositorys() -> None:
    """`airflow-idempotent demo` runs the package's dags/payouts.py: the repository's is a link to it
    (one file, so the two cannot drift)."""
    link = REPO / "dags" / "payouts.py"
    assert link.is_symlink() and link.resolve() == (demo.DEMO_DAGS / "payouts.py").resolve()


def test_the_license_is_apache_2_in_the_repository_and_the_metadata() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_the_demo_needs_nothing_more_in_the_dev_install() -> None:
    """The dev install has the duckdb extra; without it (the release test's venv) the demo's error
    names `pip install 'airflow-idempotent[duckdb]'` (tests/test_release.py)."""
    assert demo.missing_duckdb() is None


def test_the_metadata_declares_what_is_supported() -> None:
    """Airflow >= 3.3.2 (the release test installs exactly that, the lowest), Python >= 3.11 (this
    machine's, the lowest tested), classifiers PyPI knows (an unknown one is refused on upload)."""
    from trove_classifiers import classifiers as known

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "apache-airflow>=3.3.2,<4" in project["dependencies"]
    assert project["requires-python"] == ">=3.11"
    unknown = [c for c in project["classifiers"] if c not in known]
    assert not unknown, unknown
    assert "Framework :: Apache Airflow :: Provider" in project["classifiers"]
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(project["urls"])


@pytest.mark.dagrun
def test_the_demo_names_a_dag_it_cannot_load_and_runs_nothing(tmp_path: Path) -> None:
    """A --dags folder whose payouts.py lacks one of the demo's DAGs: the demo stops before any run,
    names the DAG, and exits non-zero (its log's end shown, not only its path). The caller's Airflow
    settings stay out of it: a metadata database named in the shell is neither migrated nor read."""
    dags = tmp_path / "dags"
    dags.mkdir()
    source = (demo.DEMO_DAGS / "payouts.py").read_text()
    assert source.count('"payouts_merge"') == 1
    (dags / "payouts.py").write_text(source.replace('"payouts_merge"', '"payouts_merge_renamed"'))
    root = tmp_path / "demo"
    cli = [sys.executable, "-m", "airflow_idempotent.demo", "--dir", str(root), "--dags", str(dags)]
    callers = tmp_path / "callers_airflow.db"
    env = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{callers}"}
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=300, env=env)
    assert not callers.exists()
    assert (root / "airflow_home" / "airflow.db").exists()  # the demo's own
    assert proc.returncode != 0
    assert "the demo's DAGs ['payouts_merge'] did not load" in proc.stderr, proc.stderr[-2000:]
    assert "rerun" not in proc.stdout  # no run row: nothing ran
    engine = sa.create_engine(f"duckdb:///{root / 'warehouse.duckdb'}")
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM payouts")).scalar() == 0
    finally:
        engine.dispose()
