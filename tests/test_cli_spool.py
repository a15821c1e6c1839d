"""`airflow-idempotent spool list|requeue|drop` with a real PostgreSQL store that refuses a NUL byte.

The records reach the rejected folder the way tasks park them (`SafeHistory.record`); the command
runs through ``main([...])`` with the store in AIRFLOW_CONN_IDEMPOTENT_HISTORY.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.cli import main
from airflow_idempotent.history.spool import SafeHistory, Spool
from airflow_idempotent.history.store import AttemptRecord, HistoryStore
from tests.test_cli_history import CONN_ENV, fresh_database

AT = datetime(2026, 8, 26, 2, tzinfo=timezone.utc)


def attempt(run_id: str, error: str) -> AttemptRecord:
    return AttemptRecord(
        dag_id="payouts_merge",
        run_id=run_id,
        task_id="merge_payouts",
        map_index=-1,
        try_number=1,
        event="failed",
        at=AT,
        state="failed",
        source="listener",
        error=error,
    )


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, Spool]]:
    with fresh_database("postgres", tmp_path) as (url, conn_json):
        monkeypatch.setenv(CONN_ENV, conn_json)
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
        HistoryStore._MIGRATED_URLS.clear()
        yield url, Spool()
        HistoryStore._MIGRATED_URLS.clear()


def stored_runs(url: str) -> list[str]:
    engine = sa.create_engine(url, poolclass=NullPool)
    with engine.connect() as conn:
        runs = conn.execute(sa.text("SELECT run_id FROM idem_task_attempt ORDER BY run_id")).scalars().all()
    engine.dispose()
    return list(runs)


def listed(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["spool", "list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_list_requeue_drop(store: tuple[str, Spool], capsys: pytest.CaptureFixture[str]) -> None:
    url, spool = store
    history = SafeHistory(timeout=5)
    assert history.record(attempt("run_ok", "fine")) is None  # stored (attempts return None)
    assert history.record(attempt("run_nul", "bad\x00byte")) is None  # PostgreSQL refuses: parked
    history.store.engine.dispose()
    assert stored_runs(url) == ["run_ok"]
    assert spool.rejected() == 1 and spool.count() == 0

    (nul,) = listed(capsys)
    assert "NUL" in nul["reason"] and nul["kind"] == "attempt"
    assert (nul["dag_id"], nul["run_id"], nul["task_id"], nul["try_number"]) == (
        "payouts_merge",
        "run_nul",
        "merge_payouts",
        1,
    )
    assert json.loads(nul["record"])["error"] == "bad\x00byte"
    assert main(["spool", "list"]) == 0
    text = capsys.readouterr().out
    assert nul["id"] in text and "refused: " in text and "NUL" in text and "run_nul" in text

    # a record parked for a cause since fixed (here: refused by hand) is delivered once requeued
    spool.reject(attempt("run_fixed", "ok now").to_json(), ValueError("column too short, since widened"))
    fixed = next(r for r in listed(capsys) if r["run_id"] == "run_fixed")
    assert fixed["reason"] == "ValueError: column too short, since widened"

    assert main(["spool", "requeue", nul["id"]]) == 0
    assert f"requeued {nul['id']}" in capsys.readouterr().out
    assert spool.count() == 1 and [r["id"] for r in listed(capsys)] == [fixed["id"]]

    # delivering now: the fixed one is stored, the NUL one is refused again and parked again
    assert main(["spool", "requeue", fixed["id"], "--deliver"]) == 0
    out = capsys.readouterr().out
    assert "delivered 1 record(s)" in out and "1 refused again" in out
    assert stored_runs(url) == ["run_fixed", "run_ok"]
    assert spool.count() == 0
    (again,) = listed(capsys)
    assert again["run_id"] == "run_nul" and "NUL" in again["reason"]

    # drop: refused without --yes (no terminal to ask), then done with it
    assert main(["spool", "drop", again["id"]]) == 3
    out, err = capsys.readouterr()
    assert f"would drop {again['id']}" in out and "confirm with --yes" in err
    assert spool.rejected() == 1
    assert main(["spool", "drop", again["id"], "--yes"]) == 0
    assert f"dropped {again['id']}" in capsys.readouterr().out
    assert spool.rejected() == 0 and listed(capsys) == []
    assert stored_runs(url) == ["run_fixed", "run_ok"]


def test_usage_errors(store: tuple[str, Spool], capsys: pytest.CaptureFixture[str]) -> None:
    _, spool = store
    spool.reject(attempt("run_x", "x").to_json(), ValueError("refused"))
    assert main(["spool", "requeue", "0123456789ab"]) == 2
    assert "no rejected record has the id 0123456789ab" in capsys.readouterr().err
    assert main(["spool", "drop", "--yes"]) == 2
    assert "give --all" in capsys.readouterr().err
    assert main(["spool", "requeue", "--all"]) == 0
    assert spool.rejected() == 0 and spool.count() == 1
    assert main(["spool", "list"]) == 0
    assert "No rejected records" in capsys.readouterr().out
