"""Window writes in the history store: ordinal, checksum, dataset version, flags, skip, outage.

The operators run through their own API against real databases; the history store is a fresh
SQLite file per test (or a fresh PostgreSQL database for the outage test).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from airflow_idempotent.history import HistoryStore, Spool
from airflow_idempotent.testing.ports import free_port
from tests.conftest import PG_HOST, PG_PORT, PG_USER
from tests.test_operators import DAY, PAYOUT_SQL, context, day_truth, make


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    path = tmp_path / "history.db"
    monkeypatch.setenv(
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({"conn_type": "sqlite", "host": str(path)})
    )
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))  # the spool lives here
    return HistoryStore(sa.create_engine(f"sqlite:///{path}"))


@pytest.fixture
def loaded(warehouse: Any) -> Any:
    create_sales(warehouse.engine)
    create_payouts(warehouse.engine)
    return warehouse


def run_ctx(n: int, **conf: Any) -> dict[str, Any]:
    class DagRun:
        run_type = "manual"

    DagRun.conf = conf  # type: ignore[attr-defined]
    return context(run_id=f"run_{n}", dag_run=DagRun())


@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_reruns_get_ordinals_and_one_dataset_version(
    loaded: Any, history: HistoryStore, strategy: str
) -> None:
    outs = [make(strategy).execute(run_ctx(i)) for i in range(3)]
    assert [o["ordinal"] for o in outs] == [1, 2, 3]
    assert [o["dataset_version"] for o in outs] == [1, 1, 1]
    assert len({o["checksum"] for o in outs}) == 1
    assert len({o["fingerprint"] for o in outs}) == 1
    writes = history.writes(target="warehouse:payouts")
    assert [(w["ordinal"], w["status"], w["row_count"]) for w in writes] == [(1, "written", 2000)] * 1 + [
        (2, "written", 2000),
        (3, "written", 2000),
    ]
    assert writes[0]["window_label"] == "2026-08-25" and writes[0]["policy_version"] == "v1"
    assert not any(w["nondeterministic"] for w in writes)


@pytest.mark.parametrize("strategy", ["overwrite", "merge"])
def test_a_column_added_between_two_writes_enters_the_recorded_checksum(
    loaded: Any, history: HistoryStore, strategy: str
) -> None:
    """The checksum statement is rendered once per table and column set in a process
    (`window_checksum_sql`): a column added between two writes of one process makes a new one,
    so the second record's checksum is the window's as a statement built afresh reads it."""
    import pendulum

    from airflow_idempotent.adapters import adapter_for
    from airflow_idempotent.window import Window

    first = make(strategy).execute(run_ctx(1))
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE payouts ADD COLUMN note VARCHAR(20)"))
    second = make(strategy).execute(run_ctx(2))

    adapter = adapter_for(sa.create_engine(loaded.url))  # SQLite's row hash is set up per new engine
    start = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")
    with adapter.engine.connect() as conn:
        info = adapter.describe(conn, "payouts")
        assert "note" in info.columns
        afresh = adapter.window_checksum("payouts", "sale_date", list(info.columns.values()))
        window = Window(start, start.add(days=1), source="test")
        count, total = conn.execute(
            sa.text(adapter.render(afresh)), adapter.window_params(window, "date")
        ).one()
    assert second["checksum"] == adapter.checksum_text(int(count), total)
    assert second["checksum"] != first["checksum"]  # the new column (NULL in every row) is hashed
    assert [w["checksum"] for w in history.writes(target="warehouse:payouts")] == [
        first["checksum"],
        second["checksum"],
    ]


@pytest.mark.parametrize("url", ["sqlite://", "duckdb:///:memory:", "postgresql+psycopg2://u@h/d"])
def test_the_fingerprints_sql_is_each_texts_own_rendering(url: str) -> None:
    """`render_text` (the fingerprint's "sql") is rendered once per adapter class and text in a
    process: texts that differ only in a comment, which sqlglot renders, stay apart."""
    from airflow_idempotent.adapters import adapter_for
    from airflow_idempotent.lint import check_deterministic

    adapter = adapter_for(sa.create_engine(url))
    one, two = "SELECT 1 AS x /* one */ FROM t", "SELECT 1 AS x /* two */ FROM t"
    for sql in (one, two, one, two):
        assert adapter.render_text(sql) == adapter.render(check_deterministic(sql, adapter.dialect))
    assert adapter.render_text(one) != adapter.render_text(two)
    assert "one" in adapter.render_text(one) and "two" in adapter.render_text(two)


def test_new_policy_is_a_new_dataset_version_not_a_nondeterminism(loaded: Any, history: HistoryStore) -> None:
    v1 = make("overwrite").execute(run_ctx(1))
    v2 = make("overwrite", parameters={"policy_version": "v2"}).execute(run_ctx(2))
    assert (v2["ordinal"], v2["dataset_version"], v2["nondeterministic"]) == (2, 2, False)
    assert v1["fingerprint"] != v2["fingerprint"] and v1["checksum"] != v2["checksum"]
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")


def test_nondeterministic_sql_allowed_through_the_lint_is_flagged(loaded: Any, history: HistoryStore) -> None:
    coin = {"mariadb": "RAND() < 0.5", "sqlite": "RANDOM() < 0"}.get(loaded.kind, "RANDOM() < 0.5")
    noisy = PAYOUT_SQL.replace(" AS amount_eur", f" + CASE WHEN {coin} THEN 0.01 ELSE 0 END AS amount_eur")
    op = make("overwrite", sql=noisy, allow_functions=["random", "rand"])
    first = op.execute(run_ctx(1))
    second = op.execute(run_ctx(2))  # 2,000 coin flips: equal results have probability 2**-2000
    assert first["nondeterministic"] is False
    assert second["nondeterministic"] is True and second["fingerprint"] == first["fingerprint"]
    assert any(w["nondeterministic"] for w in history.writes(target="warehouse:payouts"))


def test_skip_if_unchanged_skips_and_records_the_skip(loaded: Any, history: HistoryStore) -> None:
    first = make("overwrite", skip_if_unchanged=True).execute(run_ctx(1))
    second = make("overwrite", skip_if_unchanged=True).execute(run_ctx(2))
    assert second.get("skipped") is True and second["checksum"] == first["checksum"]
    statuses = [(w["status"], w["ordinal"]) for w in history.writes(target="warehouse:payouts")]
    assert statuses == [("written", 1), ("skipped", 1)]


def test_skip_never_hides_a_changed_window_or_policy(loaded: Any, history: HistoryStore) -> None:
    make("overwrite", skip_if_unchanged=True).execute(run_ctx(1))
    with loaded.engine.begin() as conn:  # someone damaged the window since the last write
        conn.execute(sa.text("DELETE FROM payouts WHERE sale_id > 49000"))
    again = make("overwrite", skip_if_unchanged=True).execute(run_ctx(2))
    assert "skipped" not in again and window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)
    v2 = make("overwrite", skip_if_unchanged=True, parameters={"policy_version": "v2"}).execute(run_ctx(3))
    assert "skipped" not in v2 and window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")


def test_source_snapshot_is_part_of_the_fingerprint(loaded: Any, history: HistoryStore) -> None:
    snapshot = (
        "SELECT count(*), sum(price_eur) FROM sales "
        "WHERE sale_date >= :window_start AND sale_date < :window_end"
    )
    first = make("overwrite", skip_if_unchanged=True, source_snapshot_sql=snapshot).execute(run_ctx(1))
    with loaded.engine.begin() as conn:  # a price is corrected in the source window
        conn.execute(sa.text("UPDATE sales SET price_eur = price_eur + 1 WHERE sale_id = 48001"))
    second = make("overwrite", skip_if_unchanged=True, source_snapshot_sql=snapshot).execute(run_ctx(2))
    assert "skipped" not in second and second["fingerprint"] != first["fingerprint"]


def store_conn(database: str, port: int) -> dict[str, Any]:
    """An Airflow connection to a history store on PostgreSQL (a free port: a store that is down)."""
    return {"conn_type": "postgres", "host": "127.0.0.1", "port": port, "login": PG_USER, "schema": database}


@pytest.fixture
def pg_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"idem_hist_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(
        f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    try:
        yield name
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_history_down_never_blocks_and_loses_nothing(
    loaded: Any, pg_history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = store_conn(pg_history, free_port())
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps(down))
    for i in range(3):
        started = time.monotonic()
        out = make("overwrite").execute(run_ctx(i))
        assert time.monotonic() - started < 8, "a down history store must not hold the task"
        assert "ordinal" not in out  # not recorded yet
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)
    assert Spool().count() == 3

    up = {**down, "port": PG_PORT}
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps(up))
    out = make("overwrite").execute(run_ctx(3))
    assert out["ordinal"] == 4
    Spool().deliver(HistoryStore.from_airflow())  # a second delivery finds nothing new
    store = HistoryStore(
        sa.create_engine(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{pg_history}")
    )
    writes = store.writes(target="warehouse:payouts")
    assert sorted(w["run_id"] for w in writes) == ["run_0", "run_1", "run_2", "run_3"]
    assert sorted(w["ordinal"] for w in writes) == [1, 2, 3, 4]
    assert Spool().count() == 0
    store.engine.dispose()


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_a_refused_record_is_parked_and_never_blocks_the_rest(
    loaded: Any, pg_history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spooled while the store is down: a plain run, a conf semantics longer than its column (32) and
    one with a NUL byte (PostgreSQL refuses it). Failed deliveries keep the spool's names the same
    length; once the store is up, the NUL record is parked in rejected/ and the others are stored."""
    down = store_conn(pg_history, free_port())
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps(down))
    confs: list[dict[str, Any]] = [{}, {"semantics": "corrective " + "x" * 60}, {"semantics": "bad\x00"}]
    for i, conf in enumerate(confs):
        make("overwrite").execute(run_ctx(i, **conf))
    spool = Spool()
    assert spool.count() == 3
    lengths: set[tuple[int, ...]] = set()
    for _ in range(4):  # each failed delivery puts the records back under a fresh name
        with pytest.raises(sa.exc.OperationalError):
            spool.deliver(HistoryStore.from_airflow(timeout=1))
        lengths.add(tuple(sorted(len(p.name) for p in spool.pending())))
        assert spool.count() == 3
    assert len(lengths) == 1, lengths

    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", json.dumps({**down, "port": PG_PORT}))
    out = make("overwrite").execute(run_ctx(3))
    assert out["ordinal"] == 3  # run_0, run_1 and this one; run_2 was refused
    assert spool.count() == 0
    assert spool.rejected() == 1
    parked = [json.loads(line) for p in (spool.directory / "rejected").glob("*.jsonl") for line in p.open()]
    assert "NUL" in parked[0]["rejected"] and json.loads(parked[0]["record"])["run_id"] == "run_2"
    store = HistoryStore(
        sa.create_engine(f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{pg_history}")
    )
    writes = {w["run_id"]: w for w in store.writes(target="warehouse:payouts")}
    assert sorted(writes) == ["run_0", "run_1", "run_3"]
    assert writes["run_1"]["semantics"] == ("corrective " + "x" * 60)[:32]
    store.engine.dispose()


def test_a_duckdb_history_store_is_refused_with_the_fix(tmp_path: Path) -> None:
    from airflow_idempotent.errors import UnsupportedConnectionError

    engine = sa.create_engine(f"duckdb:///{tmp_path / 'history.duckdb'}")
    with pytest.raises(UnsupportedConnectionError, match="PostgreSQL, MySQL/MariaDB or SQLite"):
        HistoryStore(engine).migrate()
    assert sa.inspect(engine).get_table_names() == []  # refused before anything was made
    engine.dispose()


def alembic_config() -> Any:
    from alembic.config import Config

    import airflow_idempotent.history as history_package

    config = Config()
    config.set_main_option("script_location", str(Path(history_package.__file__).parent / "migrations"))
    return config


def test_head_revision_is_the_migrations_head() -> None:
    """`migrate` trusts HEAD_REVISION to skip Alembic: it must be the head Alembic itself finds."""
    from alembic.script import ScriptDirectory

    from airflow_idempotent.history.models import HEAD_REVISION

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION


def test_a_store_behind_head_is_upgraded_and_one_at_head_is_left_alone(tmp_path: Path) -> None:
    from alembic import command

    from airflow_idempotent.history.models import HEAD_REVISION

    behind = sa.create_engine(f"sqlite:///{tmp_path / 'behind.db'}")
    config = alembic_config()
    with behind.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0006")  # the store as the release before approvals left it
    assert "idem_approval" not in sa.inspect(behind).get_table_names()
    HistoryStore(behind).migrate()
    with behind.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM idem_alembic_version")).scalar() == HEAD_REVISION
    assert "idem_approval" in sa.inspect(behind).get_table_names()
    behind.dispose()

    # A version table at head is the whole answer, as it is for Alembic: nothing else is read or made.
    at_head = sa.create_engine(f"sqlite:///{tmp_path / 'at_head.db'}")
    with at_head.begin() as conn:
        conn.execute(sa.text("CREATE TABLE idem_alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(sa.text("INSERT INTO idem_alembic_version VALUES (:v)"), {"v": HEAD_REVISION})
    HistoryStore(at_head).migrate()
    assert sa.inspect(at_head).get_table_names() == ["idem_alembic_version"]
    at_head.dispose()


def test_skip_sees_an_amount_moved_between_rows(loaded: Any, history: HistoryStore) -> None:
    """The checksum is not a per-column sum: two rows trading values (totals unchanged) is a change."""
    make("overwrite", skip_if_unchanged=True).execute(run_ctx(1))
    with loaded.engine.begin() as conn:
        rows = conn.execute(
            sa.text("SELECT sale_id, amount_eur FROM payouts ORDER BY amount_eur, sale_id")
        ).all()
        (low_id, low), (high_id, high) = rows[0], rows[-1]
        assert low != high
        swap = sa.text("UPDATE payouts SET amount_eur = :amount WHERE sale_id = :sale_id")
        conn.execute(swap, {"amount": high, "sale_id": low_id})
        conn.execute(swap, {"amount": low, "sale_id": high_id})
    again = make("overwrite", skip_if_unchanged=True).execute(run_ctx(2))
    assert "skipped" not in again and window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY)


def test_a_window_checksummed_before_the_upgrade_is_not_nondeterministic(
    loaded: Any, history: HistoryStore
) -> None:
    """A checksum of another version says nothing: a new dataset version, never a nondeterminism flag."""
    first = make("overwrite").execute(run_ctx(1))
    assert first["checksum"].startswith("v2:")
    with history.engine.begin() as conn:  # as version 1 (unprefixed, the row's text hashed) stored it
        conn.execute(sa.text("UPDATE idem_window_write SET checksum = '2000:123456789'"))
    second = make("overwrite").execute(run_ctx(2))
    assert (second["ordinal"], second["dataset_version"], second["nondeterministic"]) == (2, 2, False)
    third = make("overwrite").execute(run_ctx(3))
    assert (third["dataset_version"], third["nondeterministic"]) == (2, False)
    assert third["checksum"] == second["checksum"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_existing_store_gains_the_code_columns_and_keeps_its_writes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """0009 on a store at 0007 holding a write: the write stays (its code unknown: NULL), and a
    write recorded afterwards keeps the DAG version and bundle it ran under."""
    from alembic import command

    from airflow_idempotent.history.store import WriteRecord, utcnow
    from airflow_idempotent.window import day_range

    if kind == "postgres":
        url = sa.URL.create(
            "postgresql+psycopg2",
            PG_USER,
            host=PG_HOST,
            port=PG_PORT,
            database=request.getfixturevalue("pg_history"),
        )
    else:
        url = sa.URL.create("sqlite", database=str(tmp_path / "old.db"))
    engine = sa.create_engine(url)
    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0007")
        columns = "dag_id, run_id, task_id, map_index, try_number, target, window_start, window_end, "
        columns += "window_label, strategy, status, fingerprint, written_at, ordinal, dataset_version, "
        columns += "nondeterministic, package_version"
        conn.execute(
            sa.text(
                f"INSERT INTO idem_window_write ({columns}) VALUES ('d', 'r1', 't', -1, 1, 'w:payouts', "
                "'2026-08-25 00:00:00', '2026-08-26 00:00:00', '2026-08-25', 'overwrite', 'written', "
                "'f1', '2026-12-01 00:00:00', 1, 1, false, '0.1')"
            )
        )
    store = HistoryStore(engine)
    store.migrate()
    day = day_range(DAY, DAY)
    store.record(
        WriteRecord(
            dag_id="d", run_id="r2", task_id="t", map_index=-1, try_number=1, target="w:payouts",
            window_start=day.start, window_end=day.end, window_label=day.label(), strategy="overwrite",
            status="written", fingerprint="f2", written_at=utcnow(),
            dag_version_id="0193a1b2-0000-7000-8000-000000000002", bundle_name="dags-folder",
            bundle_version="abc123",
        )
    )  # fmt: skip
    got = [
        (w["run_id"], w["dag_version_id"], w["dag_version_number"], w["bundle_name"], w["bundle_version"])
        for w in store.writes(target="w:payouts")
    ]
    engine.dispose()
    assert got == [
        ("r1", None, None, None, None),
        ("r2", "0193a1b2-0000-7000-8000-000000000002", None, "dags-folder", "abc123"),
    ]


def test_a_nondeterministic_write_is_compared_with_the_result_that_differs(history: HistoryStore) -> None:
    """Three writes of one window by the same SQL: c1, then c2 (flagged), then c2 again. The third is
    still nondeterministic (the first gave c1), and the checksum its warning names as "before" is c1,
    not the last write's c2, which equals its own (the bench printed "checksum X, before X")."""
    from airflow_idempotent.history.store import WriteRecord, utcnow
    from airflow_idempotent.window import day_range

    history.migrate()
    day = day_range(DAY, DAY)
    c1, c2 = "v2:10:111", "v2:10:222"

    def write(n: int, checksum: str) -> Any:
        return history.record(
            WriteRecord(
                dag_id="d", run_id=f"r{n}", task_id="t", map_index=-1, try_number=1, target="w:payouts",
                window_start=day.start, window_end=day.end, window_label=day.label(), strategy="overwrite",
                status="written", fingerprint="f1", checksum=checksum, written_at=utcnow(),
            )
        )  # fmt: skip

    stored = [write(n, checksum) for n, checksum in enumerate((c1, c2, c2), start=1)]
    derived = [(s.nondeterministic, s.previous_checksum) for s in stored if s is not None]
    assert derived == [(False, None), (True, c1), (True, c1)]
