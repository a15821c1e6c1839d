"""Round 22 follow-up (issue 35, lint26, docs/lint-evaluation.md): two of the false findings left in
round 22's batch, tested with small projects of hand-written files. What each test asserts is what a
reviewer reading the files would say; the guards pass on main 0729a48 too, the rest fail there.

- smu-chile's ``etl_sell_out`` appends a frame with ``to_sql(.., if_exists="append")`` into
  ``staging_sell_out``, a table the same task made by ``CREATE TEMP TABLE .. ON COMMIT DROP`` just
  before: a temporary table lives only for the session, so a rerun starts from an empty one (IDEM002).
- smu-chile's ``etl_sku_sellers_full_load`` truncates ``{table_name}`` and appends to
  ``name=table_str`` where ``table_str = table_name.split(".")[-1]``: one local read from another,
  which the task's code did not follow (IDEM002).
"""

from __future__ import annotations

from pathlib import Path

from tests.lintfiles import finding_rows, lint_files

_TEMPORARY = """\
from datetime import datetime

import pandas as pd
import sqlalchemy
from airflow import DAG
from airflow.operators.python import PythonOperator
from sqlalchemy import text


def load_sell_out():
    engine = sqlalchemy.create_engine("postgresql://x")
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMP TABLE staging_sell_out (LIKE catalogo.sell_out) ON COMMIT DROP;"))
        pd.DataFrame().to_sql(name="staging_sell_out", con=conn, if_exists="append", index=False)
        conn.execute(text("INSERT INTO catalogo.sell_out SELECT * FROM staging_sell_out"))


def load_stock():
    engine = sqlalchemy.create_engine("mysql://x")
    with engine.begin() as conn:
        conn.execute(text("CREATE TEMPORARY TABLE IF NOT EXISTS tmp_stock (sku TEXT, qty INT)"))
        pd.DataFrame().to_sql("tmp_stock", con=conn, if_exists="append")


def load_orders():
    engine = sqlalchemy.create_engine("postgresql://x")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS staging_orders (id INT)"))
        pd.DataFrame().to_sql(name="staging_orders", con=conn, if_exists="append", index=False)


def load_prices():
    engine = sqlalchemy.create_engine("postgresql://x")
    pd.DataFrame().to_sql(name="staging_sell_out", con=engine, if_exists="append", index=False)


with DAG("sell_out", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="sell_out", python_callable=load_sell_out)
    PythonOperator(task_id="stock", python_callable=load_stock)
    PythonOperator(task_id="orders", python_callable=load_orders)
    PythonOperator(task_id="prices", python_callable=load_prices)
"""


def test_an_append_into_a_temporary_table_the_task_creates_is_no_rerun_problem(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"sell_out.py": _TEMPORARY})
    found = finding_rows(report)
    assert ("IDEM002", "sell_out.py", 14, "sell_out") not in found
    assert ("IDEM002", "sell_out.py", 22, "stock") not in found
    # the permanent table the temporary one feeds is still read: its plain INSERT appends
    assert ("IDEM002", "sell_out.py", 15, "sell_out") in found
    # guards: a permanent staging table keeps its rows across runs, and a task that never made the
    # table temporary appends to the permanent table of that name
    assert ("IDEM002", "sell_out.py", 29, "orders") in found
    assert ("IDEM002", "sell_out.py", 34, "prices") in found


_TWO_LOCALS = """\
from datetime import datetime

import pandas as pd
import sqlalchemy
from airflow import DAG
from airflow.operators.python import PythonOperator


def load_sku_sellers():
    engine = sqlalchemy.create_engine("postgresql://x")
    table_name = "ecommdata.sku_sellers"
    schema_name = table_name.split(".")[0]
    table_str = table_name.split(".")[-1]
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"TRUNCATE TABLE {table_name};"))
        pd.DataFrame().to_sql(name=table_str, con=conn, schema=schema_name, if_exists="append")


def load_sellers():
    engine = sqlalchemy.create_engine("postgresql://x")
    table_name = "ecommdata.sellers"
    schema_name = table_name.split(".")[0]
    table_str = table_name.split(".")[-1]
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("TRUNCATE TABLE ecommdata.sku_sellers;"))
        pd.DataFrame().to_sql(name=table_str, con=conn, schema=schema_name, if_exists="append")


with DAG("sku_sellers", schedule="@daily", start_date=datetime(2024, 1, 1), catchup=False):
    PythonOperator(task_id="sku_sellers", python_callable=load_sku_sellers)
    PythonOperator(task_id="sellers", python_callable=load_sellers)
"""


def test_a_table_name_read_through_two_locals_is_the_one_the_task_truncates(tmp_path: Path) -> None:
    report = lint_files(tmp_path, {"sku_sellers.py": _TWO_LOCALS})
    found = finding_rows(report)
    assert ("IDEM002", "sku_sellers.py", 16, "sku_sellers") not in found
    # guard: the name read through the same two locals is another table than the one truncated
    assert ("IDEM002", "sku_sellers.py", 26, "sellers") in found
