"""`airflow-idempotent rerun --dry-run` on real warehouses (PostgreSQL and MariaDB).

The DAGs are the repository's own (dags/payouts.py), parsed by Airflow's DagBag; the window is
written for real by the DAG's own task first. Expected figures come from the scenario's formula
(docs/contributing.md, The payouts scenario), computed here:

    price_eur = round(25 + ((i * 37) % 900) * 0.5, 2)          sale i, 2,000 a day from 2026-08-01
    v1: amount = round(price * 0.60, 2); v2: price >= 400.00 pays 0.55
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.cli import main
from airflow_idempotent.context import run_context
from airflow_idempotent.examples.payouts import create_payouts, create_sales
from airflow_idempotent.guard import killswitch
from airflow_idempotent.history.store import BackfillSizeRecord, HistoryStore
from airflow_idempotent.preview import load_dag
from airflow_idempotent.window import day_range

REPO = Path(__file__).resolve().parent.parent
DAGS = REPO / "dags"
DAY = date(2026, 8, 25)
FIRST = (DAY - date(2026, 8, 1)).days * 2000 + 1
SALES = range(FIRST, FIRST + 2000)


def price(i: int) -> Decimal:
    return (Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")).quantize(Decimal("0.01"))


def payout(i: int, policy: str) -> Decimal:
    rate = Decimal("0.55") if policy == "v2" and price(i) >= Decimal("400.00") else Decimal("0.60")
    return (price(i) * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


EXPECTED_CHANGED = sorted(i for i in SALES if payout(i, "v1") != payout(i, "v2"))


def table_digest(engine: sa.Engine) -> str:
    """Every row of payouts, in key order, hashed in Python: independent of the package's checksum."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT sale_id, sale_date, amount_eur, rate FROM payouts ORDER BY sale_id")
        )
        text = "\n".join("|".join(str(v) for v in row) for row in rows)
    return hashlib.sha256(text.encode()).hexdigest()


def physical(engine: sa.Engine) -> Any:
    """PostgreSQL: each row's physical version (ctid, xmin), which any rewrite changes."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT ctid::text, xmin::text FROM payouts ORDER BY sale_id")).all()


def amounts(engine: sa.Engine) -> dict[int, Decimal]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT sale_id, amount_eur FROM payouts WHERE sale_date >= :a AND sale_date < :b"),
            {"a": DAY, "b": DAY + timedelta(days=1)},
        )
        return {int(k): Decimal(str(v)).quantize(Decimal("0.01")) for k, v in rows}


def history_rows(store: HistoryStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM idem_window_write")).scalar_one())


def run_task(dag_id: str, task_id: str, conf: dict[str, Any], run_type: str = "manual") -> dict[str, Any]:
    """The DAG's own task, executed for DAY as a run would (templates rendered from params + conf)."""
    task = load_dag(dag_id, DAGS).get_task(task_id)
    context = run_context(task, day_range(DAY, DAY), f"{run_type}__{DAY}", 1, {}, {}, conf)
    context["dag_run"].run_type = run_type
    task.render_template_fields(context)
    return task.execute(context)


def preview(capsys: pytest.CaptureFixture[str], dag_id: str, *extra: str, code: int = 0) -> dict[str, Any]:
    args = [
        "rerun",
        "--dag",
        dag_id,
        "--window",
        DAY.isoformat(),
        "--dry-run",
        "--json",
        "--dags-folder",
        str(DAGS),
    ]
    got = main([*args, *extra])
    out, err = capsys.readouterr()
    assert got == code, err
    return json.loads(out)


@pytest.fixture
def written(
    airflow_home: Path, warehouse: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, HistoryStore]:
    """The warehouse with DAY written under v1 by payouts_overwrite's own task; a fresh history store."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "h.db")})
    )
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    run_task("payouts_overwrite", "write_payouts", {})
    store = HistoryStore.from_airflow()
    assert history_rows(store) == 1
    return warehouse, store


@pytest.mark.parametrize("warehouse", ["postgres", "mariadb"], indirect=True)
def test_unchanged_window_reports_zero_changes_and_leaves_the_target_identical(
    written: tuple[Any, HistoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse, store = written
    digest, versions = table_digest(warehouse.engine), physical(warehouse.engine)
    doc = preview(capsys, "payouts_overwrite")
    assert table_digest(warehouse.engine) == digest  # byte-identical
    assert physical(warehouse.engine) == versions  # on PostgreSQL: not a single row rewritten
    assert history_rows(store) == 1  # no history record
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    write = tasks["write_payouts"]
    assert write["verdict"] == "safe" and write["policy_version"] == "v1"
    diff = write["preview"]["diff"]
    assert (diff["added"], diff["removed"], diff["changed"], diff["unchanged"]) == (0, 0, 0, 2000)
    total = sum(payout(i, "v1") for i in SALES)
    assert Decimal(diff["measures"]["amount_eur"]["before"]) == total
    assert Decimal(diff["measures"]["amount_eur"]["after"]) == total
    assert write["preview"]["unchanged"] is True
    assert write["preview"]["samples"] == {"changed": [], "added": [], "removed": []}
    with warehouse.engine.connect() as conn:  # the staging table is gone
        names = set(sa.inspect(conn).get_table_names())
    assert not [n for n in names if n.startswith("_idem_stg")]


@pytest.mark.parametrize("warehouse", ["postgres", "mariadb"], indirect=True)
def test_policy_change_preview_is_exactly_what_the_corrective_backfill_changes(
    written: tuple[Any, HistoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse, store = written
    before = amounts(warehouse.engine)
    digest = table_digest(warehouse.engine)
    conf = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
    doc = preview(capsys, "payouts_overwrite", "--conf", json.dumps(conf))
    assert table_digest(warehouse.engine) == digest and history_rows(store) == 1
    write = {t["task_id"]: t for t in doc["tasks"]}["write_payouts"]
    assert write["policy_version"] == "v2"
    diff = write["preview"]["diff"]
    assert diff["changed"] == len(EXPECTED_CHANGED) > 0
    assert (diff["added"], diff["removed"], diff["unchanged"]) == (0, 0, 2000 - len(EXPECTED_CHANGED))
    assert Decimal(diff["measures"]["amount_eur"]["after"]) == sum(payout(i, "v2") for i in SALES)
    assert write["preview"]["samples"]["changed"] == EXPECTED_CHANGED[:10]

    # the corrective backfill, through the guard, for real: a one-window backfill, its size recorded
    # as the scheduler's listener records it when the run starts (the guard refuses without it)
    store.record(
        BackfillSizeRecord(
            dag_id="payouts_overwrite",
            run_id=f"backfill__{DAY}",
            backfill_id=1,
            windows=1,
            approve_windows=None,
            recorded_at=pendulum.now("UTC"),
        )
    )
    out = run_task("payouts_overwrite", "write_payouts", conf, run_type="backfill")
    assert out["semantics"] == "corrective" and out["diff"]["changed"] == diff["changed"]
    after = amounts(warehouse.engine)
    changed = sorted(k for k in before if before[k] != after[k])
    assert changed == EXPECTED_CHANGED  # exactly the rows the preview reported
    assert all(after[i] == payout(i, "v2") for i in SALES)


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_verdicts_name_the_append_finding_and_the_kill_switch(
    written: tuple[Any, HistoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    _, store = written
    doc = preview(capsys, "payouts_append_naive", code=3)
    naive = {t["task_id"]: t for t in doc["tasks"]}["append_payouts"]
    assert naive["verdict"] == "not safe" and naive["operator"] == "SQLExecuteQueryOperator"
    assert any(r.startswith("IDEM002 append-insert") for r in naive["reasons"]), naive["reasons"]

    killswitch.set_switch(store, "dag", "payouts_overwrite", "investigating 2026-08-25")
    doc = preview(capsys, "payouts_overwrite", code=3)
    write = {t["task_id"]: t for t in doc["tasks"]}["write_payouts"]
    assert write["verdict"] == "not safe"
    assert any("kill switch on" in r and "investigating 2026-08-25" in r for r in write["reasons"])

    assert (
        main(["rerun", "--dag", "payouts_overwrite", "--window", DAY.isoformat(), "--dags-folder", str(DAGS)])
        == 2
    )
    assert "only --dry-run" in capsys.readouterr().err
    killswitch.clear_switch(store, "dag", "payouts_overwrite")

    # a backfill switch stops a backfill rerun only; a conf a run would refuse previews nothing
    killswitch.set_switch(store, "backfill", "payouts_overwrite", "breach on 2026-08-24")
    write = {t["task_id"]: t for t in preview(capsys, "payouts_overwrite")["tasks"]}["write_payouts"]
    assert write["verdict"] == "safe"
    assert any("a backfill of this window would refuse" in r for r in write["reasons"]), write["reasons"]
    conf = json.dumps({"semantics": "corrective", "reason": "contract fix", "policy_version": "v2"})
    doc = preview(capsys, "payouts_overwrite", "--conf", conf, code=3)
    write = {t["task_id"]: t for t in doc["tasks"]}["write_payouts"]
    assert doc["backfill"] is True and write["verdict"] == "not safe"
    assert any("kill switch on backfill payouts_overwrite" in r for r in write["reasons"]), write["reasons"]
    killswitch.clear_switch(store, "backfill", "payouts_overwrite")
    base = ["rerun", "--dag", "payouts_overwrite", "--window", DAY.isoformat(), "--dry-run"]
    for bad, says in (('{"policy_version": "v9"}', "params refuse"), ('{"semantics": "x"}', "semantics")):
        assert main([*base, "--dags-folder", str(DAGS), "--conf", bad]) == 2
        assert says in capsys.readouterr().err
    assert (
        main(
            [
                "rerun",
                "--dag",
                "payouts_overwrite",
                "--window",
                DAY.isoformat(),
                "--dry-run",
                "--dags-folder",
                str(DAGS),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "write_payouts (PartitionOverwriteOperator): SAFE" in text
    assert "0 added, 0 removed, 0 changed, 2000 unchanged" in text and "nothing was written" in text


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_completeness_and_effects(
    airflow_home: Path,
    warehouse: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A guarded write whose source check passes, then fails; a file effect before and after it was sent."""
    outdir = tmp_path / "out"
    outdir.mkdir()
    monkeypatch.setenv("GUARDED_PREVIEW_DIR", str(outdir))
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "h.db")})
    )
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    dags = REPO / "tests" / "dags"
    args = ["rerun", "--dag", "guarded_preview", "--window", DAY.isoformat(), "--dry-run", "--json"]

    def tasks() -> dict[str, Any]:
        code = main([*args, "--dags-folder", str(dags)])
        out, err = capsys.readouterr()
        assert code in (0, 3), err
        return {t["task_id"]: t for t in json.loads(out)["tasks"]}

    found = tasks()
    write, effect = found["write_payouts"], found["deliver_file"]
    assert write["verdict"] == "safe" and write["preview"]["source_complete"] is True
    assert "source complete (its completeness check is true)" in write["reasons"]
    assert write["preview"]["diff"]["added"] == 2000  # an empty window: everything would be added
    assert effect["kind"] == "effect" and effect["verdict"] == "safe"
    assert [e["would_send"] for e in effect["effects"]] == [True]
    assert list(outdir.iterdir()) == []  # nothing was sent

    task = load_dag("guarded_preview", dags).get_task("deliver_file")
    context = run_context(task, day_range(DAY, DAY), f"manual__{DAY}", 1, {}, {}, {})
    task.render_template_fields(context)
    task.execute(context)
    capsys.readouterr()  # the delivery's own log lines
    sent = sorted(p.name for p in outdir.iterdir())
    assert sent == ["payouts-2026-08-25.txt"]
    (entry,) = tasks()["deliver_file"]["effects"]
    assert (
        entry["state"] == "done" and entry["would_send"] is False and "a rerun sends nothing" in entry["why"]
    )
    assert sorted(p.name for p in outdir.iterdir()) == sent

    with warehouse.engine.begin() as conn:  # the source loses a row: the day is incomplete
        conn.execute(sa.text("DELETE FROM sales WHERE sale_id = :i"), {"i": FIRST})
    write = tasks()["write_payouts"]
    assert write["verdict"] == "not safe" and write["preview"]["source_complete"] is False
    assert any(r.startswith("source incomplete") for r in write["reasons"])
