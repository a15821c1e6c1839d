"""Every Python example of the documentation (docs/*.md and README.md) runs here.

Each fenced ``python`` block is preceded by a directive saying how it is run:

- ``<!-- docs-test: lint-fails IDEMxxx -->`` / ``lint-clean IDEMxxx``: the block, as a DAG file,
  is linted; it must (or must not) raise that rule;
- ``<!-- docs-test: exec -->``: the block runs in a fresh namespace, in a folder holding the
  example warehouse (SQLite, `sales` and `payouts` of the payouts scenario) and a copy of
  dags/, with the connection `warehouse` pointing at it;
- ``<!-- docs-test: dag payouts|outbox -->``: the block is a DAG file: `airflow dags test <dag>
  2026-08-25` (which calls dag.test()) runs each of its DAGs twice on that SQLite warehouse (and a
  history store of its own); then `payouts`: the 25th of `payouts` holds the scenario's figures,
  computed here from its formula; `outbox`: one file was delivered, not two (dagrun group).

A block without a directive fails the test: no example goes untested. The site itself is built
in strict mode by `make docs` (test_the_site_builds_in_strict_mode runs it).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from airflow_idempotent.lint import lint_paths
from tests.test_operators import DAY, day_truth

REPO = Path(__file__).resolve().parent.parent
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
BLOCK = re.compile(
    r"(?:<!--\s*docs-test:\s*(?P<directive>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)```", re.S
)


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    directive: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def examples() -> list[Example]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start("code"))
            found.append(
                Example(page.relative_to(REPO).as_posix(), line, (m["directive"] or "").strip(), m["code"])
            )
    return found


EXAMPLES = examples()


def of(kind: str) -> list[Any]:
    """The examples of one kind; a block repeated verbatim on another page (the README's DAG is
    Getting started's) runs once, under its first page."""
    chosen: dict[tuple[str, str], Example] = {}
    for e in EXAMPLES:
        if e.directive.split()[:1] == [kind]:
            chosen.setdefault((e.directive, e.code), e)
    return [pytest.param(e, id=e.id) for e in chosen.values()]


def test_every_example_says_how_it_is_run() -> None:
    assert len(EXAMPLES) >= 20, "the docs lost their examples"
    kinds = {"lint-fails", "lint-clean", "exec", "dag"}
    untested = [e.id for e in EXAMPLES if e.directive.split()[:1] not in ([k] for k in kinds)]
    assert not untested, f"python blocks without a <!-- docs-test: ... --> directive: {untested}"


def test_every_linter_rule_has_a_failing_and_a_fixed_example() -> None:
    from airflow_idempotent.lint.rules import RULES

    for kind in ("lint-fails", "lint-clean"):
        covered = {e.directive.split()[1] for e in EXAMPLES if e.directive.startswith(kind + " ")}
        assert covered == set(RULES), (kind, sorted(set(RULES) - covered))


@pytest.mark.parametrize("example", of("lint-fails") + of("lint-clean"))
def test_lint_example(example: Example, tmp_path: Path) -> None:
    kind, rule = example.directive.split()
    dag_file = tmp_path / "example_dag.py"
    dag_file.write_text(example.code)
    rules = {f.rule for f in lint_paths([dag_file]).findings}
    if kind == "lint-fails":
        assert rule in rules, f"{example.id} should raise {rule}, raised {sorted(rules)}"
    else:
        assert rule not in rules, f"{example.id} should not raise {rule}"
        ast.parse(example.code)  # and a fixed example is valid Python


@pytest.fixture
def example_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with warehouse.db (the payouts scenario's sales, an empty payouts) and dags/."""
    db = tmp_path / "warehouse.db"
    engine = sa.create_engine(f"sqlite:///{db}")
    create_sales(engine)
    create_payouts(engine)
    engine.dispose()
    shutil.copytree(REPO / "dags", tmp_path / "dags")
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", json.dumps({"conn_type": "sqlite", "host": str(db)}))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("example", of("exec"))
def test_exec_example(example: Example, example_warehouse: Path) -> None:
    exec(compile(example.code, example.id, "exec"), {"__name__": "docs_example"})


def dag_ids(code: str) -> list[str]:
    """The dag_id= of every DAG the block declares, read from its syntax."""
    ids = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DAG":
            for kw in node.keywords:
                if kw.arg == "dag_id" and isinstance(kw.value, ast.Constant):
                    ids.append(kw.value.value)
    return ids


@pytest.mark.dagrun
@pytest.mark.parametrize("example", of("dag"))
def test_dag_example_runs(example: Example, example_warehouse: Path, airflow_home: Path) -> None:
    dags = example_warehouse / "example_dags"
    dags.mkdir()
    (dags / "example.py").write_text(example.code)
    ids = dag_ids(example.code)
    assert ids, f"{example.id}: no DAG(dag_id=...) in the block"
    history = json.dumps({"conn_type": "sqlite", "host": str(example_warehouse / "history.db")})
    env = {
        **os.environ,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": history,
    }
    airflow = str(Path(sys.executable).with_name("airflow"))
    for dag_id in ids:
        for _ in range(2):  # run twice: the second run must change nothing
            proc = subprocess.run(
                [airflow, "dags", "test", dag_id, DAY.isoformat()],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, f"{example.id}: {proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    check = example.directive.split()[1:]
    assert check in (["payouts"], ["outbox"]), f"{example.id}: say what the run leaves: payouts or outbox"
    if check == ["outbox"]:
        delivered = list((example_warehouse / "outbox").iterdir())
        assert len(delivered) == 1, delivered  # two runs of the day, one delivery
        return
    engine = sa.create_engine(f"sqlite:///{example_warehouse / 'warehouse.db'}")
    try:
        assert window_totals(engine, "payouts", DAY) == day_truth(DAY)
    finally:
        engine.dispose()


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    """`mkdocs build --strict`: every page in the nav, every link and include resolves."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    page = (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    for result in (REPO / "bench" / "results").glob("*.md"):
        title = result.read_text().splitlines()[0].lstrip("# ").strip()
        assert title.split("`")[0].strip()[:30] in page, result.name  # read at build time
