"""The plugin's external views in Airflow's UI: plain data, apart from the app.

Every process that loads plugins reads them (tasks and the scheduler load this plugin for its
listener), so this module imports nothing; the app they point at is built only where Airflow's API
server asks for it (`IdempotentPlugin.fastapi_apps`).
"""

from __future__ import annotations

from typing import Any

#: The external views of Airflow's UI (hrefs relative to Airflow's base URL, as Airflow requires).
EXTERNAL_VIEWS: list[dict[str, Any]] = [
    {
        "name": "Run history",
        "href": "idempotent/history",
        "destination": "nav",
        "category": "browse",
        "url_route": "idempotent-history",
    },
    {
        "name": "Run history",
        "href": "idempotent/dags/{DAG_ID}/history",
        "destination": "dag",
        "url_route": "idempotent-dag-history",
    },
    {
        "name": "Guarded backfill",
        "href": "idempotent/dags/{DAG_ID}/backfill",
        "destination": "dag",
        "url_route": "idempotent-backfill",
    },
    {
        "name": "Window write",
        "href": "idempotent/dags/{DAG_ID}/attempt?run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}",
        "destination": "task_instance",
        "url_route": "idempotent-attempt",
    },
]
