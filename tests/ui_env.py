"""Two DAGs, one reader of only one of them: the environment of the UI's cross-DAG security tests.

Airflow's own API app (`create_app("core")`, the plugin mounted by Airflow's plugin manager) on the
session's throw-away metadata database, with the per-DAG auth manager of tests/authmanager.py:
`admin` may do anything, `alice` (role op) may reach DAG A only, `dana` (role viewer) DAG A
itself but none of its runs. Both DAGs are guarded and write
the same table for the same days (and B a table of its own), both have a running backfill (same
run ids: Airflow names backfill runs by date only), and the history store holds writes, attempts
and effects of both. Everything B has that A does not is in `B_SECRETS`: a test asserts that none
of it reaches alice.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.effects.ledger import EffectRecord
from airflow_idempotent.history.store import AttemptRecord, HistoryStore, WriteRecord
from airflow_idempotent.plugins import ui
from tests.authmanager import DAG_ONLY_ENV, SCOPES_ENV

DAG_A = "scope_a"
DAG_B = "scope_b"
SHARED = "warehouse:shared_payouts"
B_ONLY = "warehouse:b_ledger"
B_TASK = "b_secret_task"
UTC = timezone.utc
#: Users and their roles; alice is limited to DAG A, dana to DAG A itself (none of its runs).
USERS = {"admin": "admin", "alice": "op", "dana": "viewer"}
#: The days both DAGs wrote (the shared table), and the days of their backfills.
DAYS = (3, 4)
BACKFILL_DAYS = (10, 11)
FORM = {
    "from_date": "2026-08-10",
    "to_date": "2026-08-11",
    "semantics": "corrective",
    "reason": "scope test",
    "policy_version": "v2",
    # Rerun the windows' runs when another environment of this session already made them.
    "reprocess_behavior": "completed",
}

#: Values only DAG B's records carry: none may appear in any answer to alice.
B_SECRETS = {
    "run_id": "manual__2026-08-03T05:00:00+00:00_bsecret",
    "checksum": "bchecksum" + "9" * 23,
    "fingerprint": "bfinger" + "8" * 57,
    "policy_version": "b-policy-77",
    "message": "b secret message",
    "task_id": B_TASK,
    "target": "b_ledger",
    "hostname": "b-secret-host",
    "error": "B-SECRET-ERROR",
    "measure": "987654.32",
    "recipient": "treasurer@b-secret.example",
    "idempotency_key": "idem-bsecretkey" + "7" * 20,
    "file": "/srv/b_secret/bank_file.csv",
    "file_hash": "sha256:b0b0" + "5" * 28,
}
#: What A's records carry (so a test can see that alice does get her DAG's data).
A_MARKS = {"checksum": "achecksum", "idempotency_key": "idem-akey"}

DAG_FILE = textwrap.dedent(
    f"""
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, Param

    from airflow_idempotent.guard import GuardConfig

    GUARD = GuardConfig(cap=3, measures=["amount_eur"])
    PARAMS = {{"policy_version": Param("v1", type="string", enum=["v1", "v2"]), **GUARD.param()}}

    for dag_id in ({DAG_A!r}, {DAG_B!r}):
        with DAG(
            dag_id,
            schedule="@daily",
            start_date=pendulum.datetime(2026, 8, 1, tz="UTC"),
            catchup=False,
            params=PARAMS,
        ):
            EmptyOperator(task_id="write_payouts")
            if dag_id == {DAG_B!r}:
                EmptyOperator(task_id={B_TASK!r})
    """
)


def _diff(after: str) -> str:
    return json.dumps(
        {
            "rows_before": 40,
            "rows_after": 40,
            "added": 0,
            "removed": 0,
            "changed": 3,
            "unchanged": 37,
            "measures": {"amount_eur": {"before": "100.00", "after": after, "delta": "1.00"}},
        }
    )


def august_write(dag_id: str, day: int, run_id: str, target: str, **fields: Any) -> WriteRecord:
    """A written day window (August 2026, UTC) of task write_payouts of `dag_id` (`fields` add to or
    replace these values)."""
    start = datetime(2026, 8, day, tzinfo=UTC)
    values: dict[str, Any] = {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": "write_payouts",
        "map_index": -1,
        "try_number": 1,
        "target": target,
        "window_start": start,
        "window_end": start + timedelta(days=1),
        "window_label": start.date().isoformat(),
        "strategy": "overwrite",
        "status": "written",
        **fields,
    }
    return WriteRecord(**values)


def write(dag_id: str, day: int, run_id: str, **fields: Any) -> WriteRecord:
    """A written window of `dag_id` (A's or B's distinctive values unless `fields` say otherwise)."""
    b = dag_id == DAG_B
    values: dict[str, Any] = {
        "target": SHARED,
        "fingerprint": B_SECRETS["fingerprint"] if b else "afinger" + str(day) * 57,
        "written_at": datetime(2026, 8, day, 2 if b else 1, tzinfo=UTC),
        "row_count": 40,
        "checksum": B_SECRETS["checksum"] if b else f"{A_MARKS['checksum']}{day}",
        "run_type": "scheduled",
        "policy_version": B_SECRETS["policy_version"] if b else "v1",
        "message": B_SECRETS["message"] if b else None,
        "diff": _diff(B_SECRETS["measure"] if b else "101.00"),
    }
    values.update(fields)
    return august_write(dag_id, day, run_id, **values)


def attempt(dag_id: str, day: int, run_id: str, task_id: str = "write_payouts") -> AttemptRecord:
    b = dag_id == DAG_B
    return AttemptRecord(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=-1,
        try_number=1,
        event="failed" if b else "success",
        at=datetime(2026, 8, day, 3, tzinfo=UTC),
        state="failed" if b else "success",
        hostname=B_SECRETS["hostname"] if b else "a-host",
        source="worker",
        error=B_SECRETS["error"] if b else None,
    )


def effect(dag_id: str, day: int, run_id: str) -> dict[str, Any]:
    """An effect ledger row (a bank file sent to a recipient) of `dag_id` for the window `day`."""
    b = dag_id == DAG_B
    start = datetime(2026, 8, day, tzinfo=UTC)
    key = B_SECRETS["idempotency_key"] if b else f"{A_MARKS['idempotency_key']}{day}"
    result = {
        "recipient": B_SECRETS["recipient"] if b else "ops@a.example",
        "path": B_SECRETS["file"] if b else "/srv/a/bank_file.csv",
        "digest": B_SECRETS["file_hash"] if b else "sha256:aaaa",
    }
    return {
        "identity_key": f"{key}{day}",
        "idempotency_key": f"{key}{day}",
        "dag_id": dag_id,
        "task_id": "write_payouts",
        "window_start": start,
        "window_end": start + timedelta(days=1),
        "window_label": start.date().isoformat(),
        "effect_name": "bank_file",
        "business_key": B_SECRETS["file"] if b else "a-file",
        "identity": json.dumps({"dag": dag_id, "day": day}),
        "state": "done",
        "generation": 1,
        "attempt": 1,
        "run_id": run_id,
        "map_index": -1,
        "try_number": 1,
        "hostname": B_SECRETS["hostname"] if b else "a-host",
        "claimed_at": start,
        "finished_at": start,
        "reference": f"{result['path']} {result['digest']}",
        "result": json.dumps(result),
        "resend_requested": False,
        "created_at": start,
        "updated_at": start,
    }


def seed(store: HistoryStore, backfill_run_ids: dict[str, list[str]]) -> None:
    """Both DAGs' scheduled writes of the shared days (same run ids), B's own table and task, the
    writes of both backfills (same run ids again), an attempt and an effect per write."""
    for day in DAYS:
        run_id = f"scheduled__2026-08-0{day}T00:00:00+00:00"
        for dag_id in (DAG_A, DAG_B):
            store.record(write(dag_id, day, run_id))
            store.record(attempt(dag_id, day, run_id))
        store.record(write(DAG_B, day, B_SECRETS["run_id"], task_id=B_TASK, try_number=2))
        store.record(attempt(DAG_B, day, B_SECRETS["run_id"], task_id=B_TASK))
    store.record(write(DAG_B, 5, B_SECRETS["run_id"], target=f"warehouse:{B_SECRETS['target']}"))
    now = datetime.now(UTC)
    for dag_id, run_ids in backfill_run_ids.items():
        for day, run_id in zip(BACKFILL_DAYS, run_ids, strict=True):
            store.record(
                write(dag_id, day, run_id, run_type="backfill", written_at=now, semantics="corrective")
            )
    with store.engine.begin() as conn:
        for day in DAYS:
            for dag_id in (DAG_A, DAG_B):
                conn.execute(
                    EffectRecord.__table__.insert().values(
                        **effect(dag_id, day, f"scheduled__2026-08-0{day}T00:00:00+00:00")
                    )
                )


@dataclass
class UiEnv:
    """The app, a client, the store, each user's token, and each DAG's backfill."""

    app: Any
    client: Any
    store: HistoryStore
    tokens: dict[str, str]
    backfills: dict[str, int] = field(default_factory=dict)
    backfill_run_ids: dict[str, list[str]] = field(default_factory=dict)

    def headers(self, user: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def call(
        self, method: str, path: str, body: Any = None, user: str | None = "admin", **kwargs: Any
    ) -> Any:
        headers = {**(self.headers(user) if user else {}), **kwargs.pop("headers", {})}
        if body is not None and "content" not in kwargs:
            kwargs["json"] = body
        return self.client.request(method, path, headers=headers, **kwargs)


@contextlib.contextmanager
def airflow_api_app(
    tmp_path_factory: pytest.TempPathFactory,
    dag_file: str,
    auth_manager: str,
    users: dict[str, str],
    store: HistoryStore,
    environment: dict[str, str] | None = None,
) -> Iterator[tuple[Any, dict[str, str], set[str]]]:
    """(app, a token per user, the DAG ids parsed): Airflow's own API app (`create_app("core")`,
    the plugin mounted by Airflow's plugin manager) with `auth_manager` and the simple auth
    manager's `users` (name: role), `dag_file` parsed into the session's metadata database, and
    `store` as the plugin's history store. Needs the `airflow_home` fixture first."""
    from airflow.api_fastapi import app as airflow_app
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    folder = tmp_path_factory.mktemp("dags")
    (folder / "dags.py").write_text(dag_file)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW__CORE__AUTH_MANAGER", auth_manager)
        mp.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
        mp.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", ",".join(f"{u}:{r}" for u, r in users.items()))
        mp.setenv("AIRFLOW__API__BASE_URL", "http://testserver")
        mp.setenv("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(32))
        for name, value in (environment or {}).items():
            mp.setenv(name, value)
        DagBundlesManager().sync_bundles_to_db()
        bag = DagBag(dag_folder=str(folder), bundle_path=folder, bundle_name="dags-folder")
        assert not bag.import_errors, bag.import_errors
        sync_bag_to_db(bag, "dags-folder", None)
        airflow_app.purge_cached_app()
        app = airflow_app.create_app("core")
        ui.app.state.history_store = store
        manager = airflow_app.get_auth_manager()
        tokens = {
            name: manager.generate_jwt(SimpleAuthManagerUser(username=name, role=role))
            for name, role in users.items()
        }
        try:
            yield app, tokens, set(bag.dags)
        finally:
            ui.app.state.history_store = None
            airflow_app.purge_cached_app()


@contextlib.contextmanager
def ui_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    """The environment of the module docstring (needs the `airflow_home` fixture first)."""
    from fastapi.testclient import TestClient

    store = HistoryStore(
        engine=sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('scope_history')}/h.db")
    )
    store.migrate()
    manager = "tests.authmanager.PerDagAuthManager"
    scopes = {SCOPES_ENV: f"alice={DAG_A};dana={DAG_A}", DAG_ONLY_ENV: "dana"}
    with airflow_api_app(tmp_path_factory, DAG_FILE, manager, USERS, store, scopes) as (app, tokens, dags):
        assert {DAG_A, DAG_B} <= dags
        client = TestClient(app, raise_server_exceptions=False)
        env = UiEnv(app=app, client=client, store=store, tokens=tokens)
        try:
            for dag_id in (DAG_A, DAG_B):
                created = env.call("POST", f"/idempotent/api/dags/{dag_id}/backfills", FORM)
                assert created.status_code == 200, created.text
                env.backfills[dag_id] = created.json()["backfill"]["id"]
                status = env.call("GET", f"/idempotent/api/dags/{dag_id}/backfills/{env.backfills[dag_id]}")
                env.backfill_run_ids[dag_id] = [w["run_id"] for w in status.json()["windows"]]
            assert env.backfill_run_ids[DAG_A] == env.backfill_run_ids[DAG_B]  # what F4 is about
            seed(store, env.backfill_run_ids)
            yield env
        finally:
            for backfill_id in env.backfills.values():
                env.call("PUT", f"/api/v2/backfills/{backfill_id}/cancel")


def b_leaks(text: str) -> list[str]:
    """Which of B's distinctive values `text` shows (none, for alice)."""
    return [f"{name}={value}" for name, value in B_SECRETS.items() if value in text]


def app_routes() -> list[tuple[str, str]]:
    """(method, path template) of every route of the FastAPI apps the plugin mounts (prefix included)."""
    from airflow_idempotent.plugins.listener import IdempotentPlugin

    out: list[tuple[str, str]] = []
    for entry in IdempotentPlugin.fastapi_apps:
        prefix = str(entry.get("url_prefix", "")).rstrip("/")
        for route in entry["app"].routes:
            methods = sorted(set(getattr(route, "methods", None) or ()) - {"HEAD", "OPTIONS"})
            out.extend((method, prefix + getattr(route, "path_format", route.path)) for method in methods)
    return out
