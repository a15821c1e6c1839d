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
