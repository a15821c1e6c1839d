"""airflow-idempotent: make "just run it again" safe in Apache Airflow 3."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's ProvidersManager (`airflow providers list`)."""
    return {
        "package-name": "airflow-idempotent",
        "name": "Idempotent",
        "description": "Window-true, rerun-safe writes, guarded backfills and run history for Airflow 3.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Idempotent",
                "external-doc-url": "https://pypi.org/project/airflow-idempotent/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Idempotent",
                "python-modules": [
                    "airflow_idempotent.operators.overwrite",
                    "airflow_idempotent.operators.merge",
                    "airflow_idempotent.effects.builtin",
                ],
            }
        ],
        "hooks": [
            {"integration-name": "Idempotent", "python-modules": ["airflow_idempotent.hooks.warehouse"]}
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_idempotent.hooks.warehouse.DuckDBWarehouseHook",
                "connection-type": "duckdb",
            }
        ],
    }
