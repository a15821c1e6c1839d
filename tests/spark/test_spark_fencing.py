"""Fencing on Spark: the older attempt held before its partition switch is fenced, nothing switched.

Try 1 (policy v1) and try 2 (policy v2) of one task instance write one day of a parquet table
through the session's Spark Connect cluster, in two threads. Try 1 stops at its last check
before the switch (staging written and verified, the store's switch lock held); try 2 raises the
fence and waits on the lock; released, try 1 finds try 2's fence, drops its staging and switches
nothing; try 2 then switches its v2 day in. Figures from the scenario's formula (payouts_spark).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_idempotent.errors import FencedError
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.history.fences import AttemptFence, holder
from airflow_idempotent.identity import AttemptIdentity
from tests.spark.payouts_spark import DAY, context, create_payouts, day_figures, day_truth, operator

pytestmark = pytest.mark.spark

TABLE = "payouts_fenced"
WAIT = 120.0


class TI:
    def __init__(self, try_number: int) -> None:
        self.dag_id, self.task_id, self.map_index = "payouts_spark", "write", -1
        self.run_id = "scheduled__2026-08-25T00:00:00+00:00"
        self.try_number = try_number


def attempt_context(try_number: int) -> dict[str, Any]:
    ti = TI(try_number)
    return {**context(DAY), "ti": ti, "task_instance": ti, "run_id": ti.run_id}


def test_spark_older_attempt_is_fenced_before_its_switch(
    spark: Any, spark_conn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.db"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    store = HistoryStore.from_airflow()
    create_payouts(spark, TABLE)
    holding, release = threading.Event(), threading.Event()
    real = AttemptFence.check

    def held(self: AttemptFence) -> None:
        if self.identity.try_number == 1:
            holding.set()
            release.wait(WAIT)
        real(self)

    monkeypatch.setattr(AttemptFence, "check", held)
    outcome: dict[int, BaseException | None] = {}

    def run(try_number: int, policy: str) -> None:
        try:
            op = operator(spark_conn, TABLE, task_id="write", parameters={"policy_version": policy})
            op.execute(attempt_context(try_number))  # type: ignore[arg-type]
            outcome[try_number] = None
        except BaseException as err:  # asserted below
            outcome[try_number] = err

    first = threading.Thread(target=run, args=(1, "v1"))
    second = threading.Thread(target=run, args=(2, "v2"))
    first.start()
    try:
        assert holding.wait(WAIT), "try 1 never reached its last check before the switch"
        second.start()
        identity = AttemptIdentity.from_context(
            attempt_context(2), operator(spark_conn, TABLE, task_id="write")
        )
        window = operator(spark_conn, TABLE).window(context(DAY))
        deadline = time.monotonic() + WAIT
        while holder(store, identity, f"{spark_conn}:{TABLE}", window) != 2:
            assert time.monotonic() < deadline, "try 2 never raised its fence"
            time.sleep(0.1)
    finally:
        release.set()
        first.join(WAIT)
        second.join(WAIT)
    assert outcome[2] is None
    assert isinstance(outcome[1], FencedError) and "try 2, which started writing at" in str(outcome[1])
    rows, total = day_truth(DAY, "v2")
    assert day_figures(spark, TABLE, DAY) == (rows, rows, total)
    statuses = {w["try_number"]: w["status"] for w in store.writes(target=f"{spark_conn}:{TABLE}")}
    assert statuses == {1: "fenced", 2: "written"}
