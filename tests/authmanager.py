"""A per-DAG auth manager for the tests: Airflow's SimpleAuthManager, plus users limited to some DAGs.

Every real auth manager (FAB, Keycloak, AWS) grants access per DAG; Airflow's simple one only by
role. This subclass adds that one thing, so the tests' cross-DAG cases go through Airflow's own
authorisation (`requires_access_dag`, `get_authorized_dag_ids`) rather than a stub of it.

Configure it as Airflow's auth manager, in-process or for real servers (the repository root on
``PYTHONPATH``)::

    AIRFLOW__CORE__AUTH_MANAGER=tests.authmanager.PerDagAuthManager
    IDEM_TEST_DAG_SCOPES="alice=dag_a;bob=dag_b,dag_c"
    IDEM_TEST_DAG_ONLY="bob"

A user named in ``IDEM_TEST_DAG_SCOPES`` may reach only the DAGs listed for them (their role still
decides what they may do there), one named in ``IDEM_TEST_DAG_ONLY`` those DAGs but nothing in
them (no runs, no task instances); a question about no DAG in particular (Airflow's DAG list, which
it then filters through `filter_authorized_dag_ids`) is left to the role. Other users are exactly
as the simple auth manager has them.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

#: The environment variable naming each limited user's DAGs: ``user=dag,dag;user=dag``.
SCOPES_ENV = "IDEM_TEST_DAG_SCOPES"
#: The environment variable naming users who may reach their DAGs but nothing in them (runs, task
#: instances, ...): ``user,user`` (FAB: ``can_read`` on ``DAG:<id>`` without ``DAG Runs``).
DAG_ONLY_ENV = "IDEM_TEST_DAG_ONLY"


def dag_only_users() -> frozenset[str]:
    """The users of `DAG_ONLY_ENV` (read per call)."""
    return frozenset(u.strip() for u in os.environ.get(DAG_ONLY_ENV, "").split(",") if u.strip())


def dag_scopes(text: str | None = None) -> dict[str, frozenset[str]]:
    """The limited users and their DAGs, from `text` (default: the environment, read per call so a
    test may change it)."""
    text = os.environ.get(SCOPES_ENV, "") if text is None else text
    scopes: dict[str, frozenset[str]] = {}
    for entry in text.split(";"):
        user, sep, dags = entry.partition("=")
        if sep and user.strip():
            scopes[user.strip()] = frozenset(d.strip() for d in dags.split(",") if d.strip())
    return scopes


class PerDagAuthManager(SimpleAuthManager):
    """SimpleAuthManager where the users of `SCOPES_ENV` may reach only their own DAGs."""

    def is_authorized_dag(
        self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        scope = dag_scopes().get(user.get_name())
        dag_id = getattr(details, "id", None)
        if scope is not None and dag_id is not None and dag_id not in scope:
            return False
        if access_entity is not None and user.get_name() in dag_only_users():
            return False
        return bool(
            super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
        )

    def filter_authorized_dag_ids(
        self, *, dag_ids: set[str], user: Any, method: Any = "GET", team_name: str | None = None
    ) -> set[str]:
        """What Airflow's DAG lists (and `get_authorized_dag_ids`) use: the role's answer, cut to
        the user's scope."""
        allowed = set(
            super().filter_authorized_dag_ids(dag_ids=dag_ids, user=user, method=method, team_name=team_name)
        )
        scope = dag_scopes().get(user.get_name())
        return allowed if scope is None else allowed & scope
