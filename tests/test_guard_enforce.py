"""The one enforcement point: Airflow's own `_create_backfill` (what the REST route, the UI and
`airflow backfill create` call) refuses a backfill the guard refuses, and nothing is left behind.

On a real (SQLite) Airflow metadata database, DAGs synced the way the DAG processor syncs them;
the `before_flush` listener is the one the `airflow.policy` entry point installed when this
process initialised Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa

DAG_FILE = """
import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param
from airflow_idempotent.guard import GuardConfig

GUARDED = {**GuardConfig(cap=3).param(), "note": Param("", type="string")}
for dag_id, params in (("enf_guarded", GUARDED), ("enf_plain", {})):
    with DAG(dag_id, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
             end_date=pendulum.datetime(2026, 3, 1, tz="UTC"), catchup=False, params=params):
        EmptyOperator(task_id="noop")
"""
DECLARED = {"semantics": "replay", "reason": "incident reconstruction"}
START = pendulum.datetime(2026, 1, 1, tz="UTC")


@pytest.fixture(scope="module")
def synced(airflow_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    folder = tmp_path_factory.mktemp("enforce_dags")
    (folder / "enforce_dags.py").write_text(DAG_FILE)
    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(folder), bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
    yield


def counts(dag_id: str) -> tuple[int, int]:
    from airflow.models.backfill import Backfill
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        backfills = session.scalar(sa.select(sa.func.count()).where(Backfill.dag_id == dag_id))
        runs = session.scalar(sa.select(sa.func.count()).where(DagRun.dag_id == dag_id))
    return int(backfills or 0), int(runs or 0)


def create(dag_id: str, days: int, conf: Any, first: pendulum.DateTime = START) -> Any:
    from airflow.models.backfill import _create_backfill

    return _create_backfill(
        dag_id=dag_id,
        from_date=first,
        to_date=first.add(days=days - 1),
        max_active_runs=2,
        reverse=False,
        dag_run_conf=conf,
        triggering_user_name="test",
    )


def finish(dag_id: str) -> None:
    """Mark the DAG's backfills completed (Airflow allows one running backfill per DAG)."""
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    with create_session() as session:
        session.execute(
            sa.update(Backfill).where(Backfill.dag_id == dag_id).values(completed_at=pendulum.now("UTC"))
        )


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        (DECLARED, "over the DAG's cap of 3: split it, or approve exactly this count by adding"),
        (None, "a backfill must declare its rerun semantics"),
        ({**DECLARED, "approve_windows": 5}, '"approve_windows": 4'),
        ({"semantics": "replay", "reason": "nul \x00 byte"}, "conf reason must be one line of plain text"),
        ({**DECLARED, "note": "nul \x00 byte"}, "conf key 'note' holds a character the metadata database"),
        ({**DECLARED, "note": "lone \ud800 surrogate"}, "cannot store"),
    ],
)
def test_airflows_own_create_refuses_with_the_guards_message_and_leaves_nothing(
    synced: None, conf: Any, expected: str
) -> None:
    from airflow.models.backfill import InvalidBackfillConf

    from airflow_idempotent.guard import GuardRefusal

    before = counts("enf_guarded")
    with pytest.raises(InvalidBackfillConf) as raised:
        create("enf_guarded", 4, conf)
    assert isinstance(raised.value, GuardRefusal)
    assert expected in str(raised.value), str(raised.value)
    assert counts("enf_guarded") == before  # no backfill row, no DAG run


def test_an_approved_or_capped_backfill_is_created_with_its_runs(synced: None) -> None:
    from airflow_idempotent.guard.sizes import measure

    backfills, runs = counts("enf_guarded")  # other tests of this file may have run first
    created = create("enf_guarded", 4, {**DECLARED, "approve_windows": 4})
    assert created.id is not None
    assert counts("enf_guarded") == (backfills + 1, runs + 4)
    assert measure(created.id) == (4, 4)  # what the listener records for its tasks to check
    finish("enf_guarded")


def test_unguarded_dags_are_untouched(synced: None) -> None:
    from airflow_idempotent.guard.sizes import measure

    created = create("enf_plain", 10, None)
    assert counts("enf_plain") == (1, 10)
    assert measure(created.id) == (10, None)
    finish("enf_plain")


def test_the_refusal_is_airflows_422_on_its_rest_route(synced: None) -> None:
    """The route maps InvalidBackfillConf to RequestValidationError: the guard's words as `detail`."""
    import asyncio

    from fastapi.exception_handlers import request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError

    from airflow_idempotent.guard.enforce import BackfillRefused

    refusal = BackfillRefused("the guard's sentence")
    response = asyncio.run(request_validation_exception_handler(None, RequestValidationError(str(refusal))))  # type: ignore[arg-type]
    assert response.status_code == 422
    assert json.loads(bytes(response.body)) == {"detail": "the guard's sentence"}


def test_the_policy_module_installed_the_listener_once() -> None:
    import airflow.settings  # noqa: F401  (initialises Airflow: loads the policy entry point)
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    from airflow_idempotent.plugins import catchup

    assert event.contains(Session, "before_flush", catchup.enforce_backfill_guard)
    catchup.install_backfill_guard()  # idempotent
    assert event.contains(Session, "before_flush", catchup.enforce_backfill_guard)


def test_the_windows_of_a_still_active_backfill_count_toward_the_cap(synced: None) -> None:
    """Two creations that both passed Airflow's own unlocked "one active backfill" count: the second
    is judged, under the DAG's row lock, with the first's windows in flight (cap 3)."""
    from airflow.models.backfill import Backfill
    from airflow.utils.session import create_session

    from airflow_idempotent.guard.enforce import decide

    def second(days: int) -> Any:
        """The guard's verdict on a backfill of `days` windows created beside the active ones."""
        with create_session() as session:
            extra = Backfill(
                dag_id="enf_guarded",
                from_date=START.add(days=40),
                to_date=START.add(days=40 + days - 1),
                max_active_runs=1,
                dag_run_conf=DECLARED,
                reprocess_behavior="completed",
            )
            try:
                return decide(session, extra)
            finally:
                session.rollback()

    first = create("enf_guarded", 2, DECLARED, START.add(days=10))  # 2 new runs
    try:
        assert second(1) is None  # 2 + 1 = 3 = the cap
        refusal = str(second(2))
        assert f"still-active backfill(s) {first.id} of this DAG cover 2: 4 windows in flight" in refusal
    finally:
        finish("enf_guarded")
    assert second(3) is None  # nothing active: its own 3 only

    # A backfill whose runs Airflow has not created yet (it commits the row first): its range counts.
    with create_session() as session:
        bare = Backfill(
            dag_id="enf_guarded",
            from_date=START.add(days=20),
            to_date=START.add(days=21),
            max_active_runs=1,
            dag_run_conf=DECLARED,
            reprocess_behavior="completed",
        )
        session.add(bare)
    try:
        assert "cover 2: 4 windows in flight" in str(second(2))
    finally:
        finish("enf_guarded")
