"""The determinism lint in Spark's dialect: every clock, random or layout-dependent call refused."""

from __future__ import annotations

import pytest

from airflow_idempotent.errors import NonDeterministicSQLError
from airflow_idempotent.lint import check_deterministic, find_nondeterminism

REFUSED = {
    "current_date()": "clock",
    "current_date": "clock",
    "now()": "clock",
    "current_timestamp()": "clock",
    "localtimestamp()": "clock",
    "curdate()": "clock",
    "unix_timestamp()": "clock",
    "date_sub(current_date(), 1)": "clock",
    "rand()": "random",
    "rand(42)": "random",
    "randn()": "random",
    "random()": "random",
    "uuid()": "random",
    "randstr(5)": "random",
    "shuffle(array(1, 2))": "random",
    "uniform(0, 10)": "random",
    "reflect('java.util.UUID', 'randomUUID')": "random",
    "java_method('java.lang.System', 'currentTimeMillis')": "random",
    "monotonically_increasing_id()": "sequence",
    "spark_partition_id()": "sequence",
    "input_file_name()": "sequence",
}

ALLOWED = [
    "unix_timestamp(s.sale_date)",
    "to_date('2026-08-25')",
    "date_add(s.sale_date, 1)",
    "xxhash64(s.sale_id)",
    "s.now",  # a column called now
    "'now'",  # a string literal in Spark is not the clock
]


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_spark_call_is_refused(call: str) -> None:
    sql = f"SELECT {call} AS x, s.sale_date FROM sales s WHERE s.sale_date >= :window_start"
    findings = find_nondeterminism(sql, "spark")
    assert [f.kind for f in findings] == [REFUSED[call]], findings
    with pytest.raises(NonDeterministicSQLError, match="window_start"):
        check_deterministic(sql, "spark")


@pytest.mark.parametrize("expr", ALLOWED)
def test_spark_deterministic_expression_passes(expr: str) -> None:
    sql = f"SELECT {expr} AS x FROM sales s WHERE s.sale_date >= :window_start AND s.sale_date < :window_end"
    assert find_nondeterminism(sql, "spark") == []


def test_allow_functions_lets_a_spark_call_through() -> None:
    check_deterministic(
        "SELECT monotonically_increasing_id() AS id FROM t", "spark", ["monotonically_increasing_id"]
    )
