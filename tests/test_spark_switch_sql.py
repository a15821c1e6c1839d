"""The partition switch's moves in one SQL script, and the per-day fallback, without a cluster."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from airflow_idempotent.errors import InvalidIdentifierError
from airflow_idempotent.spark.adapter import NULL_DIRECTORY, SparkAdapter, SparkEngine
from airflow_idempotent.spark.catalog_sql import MOVES_PER_SCRIPT, SCRIPTING_REFUSED
from airflow_idempotent.spark.switch import staged_values

DAYS = [date(2026, 8, 1) + timedelta(days=n) for n in range(31)]


class Recorder:
    """A connection that records each statement; `refuse` makes a statement containing it fail."""

    def __init__(self, refuse: str | None = None, error: str = SCRIPTING_REFUSED) -> None:
        self.statements: list[str] = []
        self.refuse = refuse
        self.error = error

    def sql(self, query: str, params: Any = None) -> None:
        if self.refuse is not None and self.refuse in query:
            raise RuntimeError(f"[{self.error}] refused")
        self.statements.append(query)


def adapter() -> SparkAdapter:
    return SparkAdapter(SparkEngine("sc://127.0.0.1:15002"))


def where(days: list[date]) -> list[tuple[date, str]]:
    return [(d, f"file:/w/t/_idem_attempts/a'b/sale_date={d.isoformat()}") for d in days]


def test_a_months_moves_are_scripts_of_at_most_eight_set_locations_in_order() -> None:
    conn = Recorder()
    adapter().move_partitions(conn, "sales.payouts", "sale_date", where(DAYS))
    assert len(conn.statements) == 4  # 31 days: 8 + 8 + 8 + 7
    parts = []
    for script in conn.statements:
        assert script.startswith("BEGIN ") and script.endswith(" END")
        inside = script[len("BEGIN ") : -len(" END")].split("; ")
        assert len(inside) <= MOVES_PER_SCRIPT == 8 and inside[-1].endswith(";")
        parts += inside
    assert len(parts) == 31
    for day, part in zip(DAYS, parts, strict=True):
        assert part.rstrip(";") == (
            f"ALTER TABLE `sales`.`payouts` PARTITION(`sale_date` = '{day.isoformat()}') "
            f"SET LOCATION 'file:/w/t/_idem_attempts/a\\'b/sale_date={day.isoformat()}'"
        )


def test_one_move_is_a_plain_statement_and_none_is_nothing() -> None:
    conn = Recorder()
    adapter().move_partitions(conn, "payouts", "sale_date", where(DAYS[:1]))
    adapter().move_partitions(conn, "payouts", "sale_date", [])
    assert conn.statements == [adapter().set_location("payouts", "sale_date", *where(DAYS[:1])[0])]


def test_a_server_without_scripting_gets_one_statement_a_day() -> None:
    conn = Recorder(refuse="BEGIN")
    adapter().move_partitions(conn, "payouts", "sale_date", where(DAYS[:3]))
    assert conn.statements == [
        adapter().set_location("payouts", "sale_date", d, w) for d, w in where(DAYS[:3])
    ]


def test_any_other_failure_of_the_script_is_raised() -> None:
    conn = Recorder(refuse="BEGIN", error="PARTITIONS_NOT_FOUND")
    with pytest.raises(RuntimeError, match="PARTITIONS_NOT_FOUND"):
        adapter().move_partitions(conn, "payouts", "sale_date", where(DAYS[:3]))
    assert conn.statements == []


def test_identifiers_are_validated() -> None:
    with pytest.raises(InvalidIdentifierError):
        adapter().move_partitions(Recorder(), "payouts; DROP TABLE x", "sale_date", where(DAYS[:2]))


def test_the_sweeps_trash_statements_are_one_round_trip() -> None:
    conn = Recorder()
    statements = adapter().trash_statements(
        "_idem_trash_a", "payouts", "sale_date", ["file:/w/a", "file:/w/b"]
    )
    adapter().run_statements(conn, statements)
    assert conn.statements == ["BEGIN " + " ".join(f"{s};" for s in statements) + " END"]
    assert len(statements) == 4 and statements[-1].endswith("PURGE")


def test_a_months_adds_and_drops_are_one_statement_each_with_locations_escaped() -> None:
    added = adapter().add_partitions("sales.payouts", "sale_date", where(DAYS[:3]))
    assert added == "ALTER TABLE `sales`.`payouts` ADD IF NOT EXISTS " + " ".join(
        f"PARTITION(`sale_date` = '{d.isoformat()}') "
        f"LOCATION 'file:/w/t/_idem_attempts/a\\'b/sale_date={d.isoformat()}'"
        for d in DAYS[:3]
    )
    dropped = adapter().drop_partitions("payouts", "sale_date", DAYS[:2])
    assert dropped == (
        "ALTER TABLE `payouts` DROP IF EXISTS "
        "PARTITION(`sale_date` = '2026-08-01'), PARTITION(`sale_date` = '2026-08-02')"
    )


def test_a_location_that_reads_like_sql_stays_one_literal() -> None:
    hostile = "file:/w/x' PARTITION (`sale_date` = '1999-01-01') LOCATION '/etc"
    added = adapter().add_partitions("payouts", "sale_date", [(DAYS[0], hostile)])
    assert added.count("PARTITION(") == 1 and "x\\' PARTITION (`sale_date` = \\'1999-01-01\\')" in added
    with pytest.raises(InvalidIdentifierError):
        adapter().drop_partitions("payouts", "sale_date`) , PARTITION (`x", DAYS[:1])


def test_the_window_scans_are_bound_and_quoted() -> None:
    a = adapter()
    window = "WHERE `sale_date` >= :window_start AND `sale_date` < :window_end"
    counted = a.render(a.count_window("sales.payouts", "sale_date"))
    assert counted == f"SELECT COUNT(*) FROM `sales`.`payouts` {window}"
    summed = a.render(a.window_checksum("_idem_stg_a", "sale_date", []))
    assert summed.endswith(f"FROM `_idem_stg_a` {window}")


def test_the_staged_days_are_the_directories_of_the_staged_files() -> None:
    base = "file:/w/payouts/_idem_attempts/a1"
    files = [
        f"{base}/sale_date=2026-08-01/part-00000-x.c000.snappy.parquet",
        f"{base}/sale_date=2026-08-01/part-00001-x.c000.snappy.parquet",
        f"{base}/sale_date=2026-07-31/part-00000-y.c000.snappy.parquet",
        f"{base}/sale_date={NULL_DIRECTORY}/part-00000-z.c000.snappy.parquet",
    ]
    assert staged_values(files) == {date(2026, 8, 1), date(2026, 7, 31), None}
    assert staged_values([]) == set()


def test_a_kept_stage_of_iceberg_is_dropped_with_purge() -> None:
    assert adapter().drop_table("ice.db.stage", purge=True) == "DROP TABLE IF EXISTS `ice`.`db`.`stage` PURGE"
    assert adapter().drop_table("stage") == "DROP TABLE IF EXISTS `stage`"
