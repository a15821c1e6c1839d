"""airflow-idempotent: make "just run it again" safe in Apache Airflow 3."""

from __future__ import annotations

from typing import Any

__version__ = "1.0.0"


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
        "config": {
            "idempotent": {
                "description": "airflow-idempotent: how DAGs using this provider are checked when parsed.",
                "options": {
                    "unbounded_catchup": {
                        "description": "What the DAG policy does with a DAG of this provider whose "
                        "catchup=True would schedule more windows than the backfill guard's cap (the "
                        "DAG's own, else 31) from its start_date to now. warn: log a warning, the DAG "
                        "loads; refuse: the DAG does not load and the message is its import error; "
                        "off: no check. DAGs without this provider's operators or guard are never "
                        "checked.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "refuse",
                        "default": "warn",
                    }
                },
            }
        },
        "connection-types": [
            {
                "hook-class-name": "airflow_idempotent.hooks.warehouse.DuckDBWarehouseHook",
                "connection-type": "duckdb",
            }
        ],
    }
