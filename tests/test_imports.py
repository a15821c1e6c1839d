"""Every module imports on its own in a fresh interpreter.

Airflow loads this package's policy module (entry point `airflow.policy`) while `import airflow`
is still initialising, so a module-level import cycle through it only shows in a fresh process.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_idempotent

MODULES = [
    "airflow_idempotent.errors",
    "airflow_idempotent.cli",
    "airflow_idempotent.operators",
    "airflow_idempotent.plugins.listener",
    "airflow_idempotent.plugins.catchup",
    "airflow_idempotent.effects",
    "airflow_idempotent.testing",
]


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_in_a_fresh_interpreter(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_task_imports_no_driver_it_does_not_use() -> None:
    """Every task imports the operators and the plugin's listener; the adapters register every
    engine, but an engine's driver is imported by the engine that connects with it (DuckDB's
    alone cost each task 85 ms)."""
    probe = (
        "import sys, airflow_idempotent.operators, airflow_idempotent.plugins.listener; "
        "print(sorted(m for m in ('duckdb', 'pyspark', 'pymysql', 'psycopg2') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """{module: the package's modules it imports}, from every import statement: at module level,
    inside functions and under TYPE_CHECKING (a cycle there is a cycle of concepts, even when it
    never runs). ``from pkg import sub`` imports the module ``pkg.sub``."""
    files = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (root / package).rglob("*.py")
    }

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                parts = [*here[: len(here) - node.level + 1], node.module] if node.level else [node.module]
                base = ".".join(p for p in parts if p)
                subs = [f"{base}.{a.name}" for a in node.names]
                names += [s for s in subs if s in files] or [base]
        graph[module] = {o for n in names if (o := owner(n)) is not None and o != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_sees_a_cycle_under_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import b\n")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n"
    )
    (pkg / "c.py").write_text("def f():\n    from pkg import a\n")
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.sub.b"]]


def test_no_import_cycles_in_the_package() -> None:
    """One module per concept, and a concept's modules import one way: a cycle, even one only a type
    annotation or a function-level import closes, means a type sits in the wrong module."""
    root = Path(airflow_idempotent.__file__).resolve().parent.parent
    assert cycles(import_graph(root, "airflow_idempotent")) == []
