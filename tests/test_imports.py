"""Every module imports on its own in a fresh interpreter.

Airflow loads this package's policy module (entry point `airflow.policy`) while `import airflow`
is still initialising, so a module-level import cycle through it only shows in a fresh process.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

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
