"""`airflow-idempotent history` on real history stores: a fresh SQLite file and a fresh
PostgreSQL database (``idem_cli_<hex>``, dropped afterwards).

Records go in through ``HistoryStore.record`` exactly as the operators and listener store them;
the command runs through ``main([...])`` with the connection in AIRFLOW_CONN_IDEMPOTENT_HISTORY,
and once as the installed console script.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from airflow_idempotent.cli import main
from airflow_idempotent.history.report import HistoryFilter, attempts_query, writes_query
from airflow_idempotent.history.store import AttemptRecord, HistoryStore, StoredWrite, WriteRecord
from tests.conftest import HOW_TO_START, PG_HOST, PG_PORT, PG_USER

CONN_ENV = "AIRFLOW_CONN_IDEMPOTENT_HISTORY"
KINDS = ("sqlite", "postgres")

# --------------------------------------------------------------------------------- the data
TARGET = "warehouse:payouts"
DAG, TASK = "payouts_merge", "merge_payouts"
RUN_24 = "scheduled__2026-08-24T00:00:00+00:00"
RUN_25 = "scheduled__2026-08-25T00:00:00+00:00"
RUN_MANUAL = "manual__2026-08-27T09:00:00+00:00"
RUN_BACKFILL = "backfill__2026-08-28T08:00:00+00:00"
FP, FP_24, FP_ARCHIVE, FP_EUR = "f1" * 32, "f0" * 32, "a0" * 32, "e0" * 32
C_24, C1, C2 = "c0" * 32, "c1" * 32, "c2" * 32
ERROR = (
    "OSError: [Errno 28] No space left on device\n"
    "Traceback (most recent call last):\n"
    '  File "strategies.py", line 88, in overwrite\n'
)
REFUSAL = "RowsOutsideWindowError: 3 produced rows fall outside [2026-08-25, 2026-08-26)"


def at(day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(2026, 8, day, hour, minute, tzinfo=timezone.utc)


def seed(store: HistoryStore) -> dict[str, StoredWrite]:
    """The history the tests read back; returns what the store derived for each write."""
    stored: dict[str, StoredWrite] = {}

    def attempt(
        dag: str, run: str, task: str, try_number: int, event: str, when: datetime, **kw: Any
    ) -> None:
        store.record(
            AttemptRecord(
                dag_id=dag,
                run_id=run,
                task_id=task,
                map_index=-1,
                try_number=try_number,
                event=event,
                at=when,
                state=kw.pop("state", event),
                source="listener",
                **kw,
            )
        )

    def write(
        name: str, dag: str, run: str, task: str, try_number: int, target: str, day: int, **kw: Any
    ) -> None:
        result = store.record(
            WriteRecord(
                dag_id=dag,
                run_id=run,
                task_id=task,
                map_index=-1,
                try_number=try_number,
                target=target,
                window_start=at(day),
                window_end=at(day + 1),
                window_label=f"2026-08-{day}",
                run_type=run.split("__")[0],
                **kw,
            )
        )
        assert isinstance(result, StoredWrite)
        stored[name] = result

    # warehouse:payouts, window 2026-08-24: one clean write.
    attempt(DAG, RUN_24, TASK, 1, "running", at(25, 2))
    write(
        "24", DAG, RUN_24, TASK, 1, TARGET, 24,
        strategy="merge", status="written", fingerprint=FP_24, checksum=C_24, written_at=at(25, 2, 5),
        rows_deleted=0, rows_inserted=1990, rows_updated=0, row_count=1990,
        semantics="replay", policy_version="v1",
    )  # fmt: skip
    attempt(DAG, RUN_24, TASK, 1, "success", at(25, 2, 6))

    # warehouse:payouts, window 2026-08-25: try 1 dies on a full disk before it writes; try 2
    # writes; a manual rerun with the same fingerprint gives another checksum (non-deterministic);
    # a backfill finds nothing changed and skips.
    attempt(DAG, RUN_25, TASK, 1, "running", at(26, 2))
    attempt(DAG, RUN_25, TASK, 1, "failed", at(26, 2, 1), error=ERROR)
    attempt(DAG, RUN_25, TASK, 2, "running", at(26, 2, 4))
    write(
        "25a", DAG, RUN_25, TASK, 2, TARGET, 25,
        strategy="merge", status="written", fingerprint=FP, checksum=C1, written_at=at(26, 2, 5),
        rows_deleted=0, rows_inserted=2000, rows_updated=0, row_count=2000,
        semantics="replay", policy_version="v1",
    )  # fmt: skip
    attempt(DAG, RUN_25, TASK, 2, "success", at(26, 2, 6))
    attempt(DAG, RUN_MANUAL, TASK, 1, "running", at(27, 9))
    write(
        "25b", DAG, RUN_MANUAL, TASK, 1, TARGET, 25,
        strategy="merge", status="written", fingerprint=FP, checksum=C2, written_at=at(27, 9, 1),
        rows_deleted=3, rows_inserted=0, rows_updated=2000, row_count=1997,
        semantics="corrective", policy_version="v2",
    )  # fmt: skip
    attempt(DAG, RUN_MANUAL, TASK, 1, "success", at(27, 9, 2))
    attempt(DAG, RUN_BACKFILL, TASK, 1, "running", at(28, 8))
    write(
        "25c", DAG, RUN_BACKFILL, TASK, 1, TARGET, 25,
        strategy="merge", status="skipped", fingerprint=FP, checksum=C2, written_at=at(28, 8, 1),
        row_count=1997, semantics="replay", policy_version="v2",
    )  # fmt: skip
    attempt(DAG, RUN_BACKFILL, TASK, 1, "success", at(28, 8, 2))

    # archive:payouts (same table name, another connection), written by another DAG.
    write(
        "archive", "payouts_archive", RUN_25, "copy_payouts", 1, "archive:payouts", 25,
        strategy="overwrite", status="written", fingerprint=FP_ARCHIVE, checksum=C1, written_at=at(26, 3),
        rows_deleted=0, rows_inserted=2000, rows_updated=0, row_count=2000,
    )  # fmt: skip

    # warehouse:payouts_eur: the write is refused and the attempt fails.
    attempt("payouts_overwrite", RUN_25, "write_payouts_eur", 1, "running", at(26, 4))
    write(
        "eur", "payouts_overwrite", RUN_25, "write_payouts_eur", 1, "warehouse:payouts_eur", 25,
        strategy="overwrite", status="refused", fingerprint=FP_EUR, written_at=at(26, 4, 1), message=REFUSAL,
    )  # fmt: skip
    attempt("payouts_overwrite", RUN_25, "write_payouts_eur", 1, "failed", at(26, 4, 2), error=REFUSAL)
    return stored


# --------------------------------------------------------------------------------- databases
@contextlib.contextmanager
def fresh_database(kind: str, directory: Path) -> Iterator[tuple[str, str]]:
    """A new, empty history database: (SQLAlchemy URL, Airflow connection JSON). Dropped after."""
    if kind == "sqlite":
        path = directory / f"history_{secrets.token_hex(4)}.db"
        yield f"sqlite:///{path}", json.dumps({"conn_type": "sqlite", "host": str(path)})
        return
    name = f"idem_cli_{secrets.token_hex(6)}"
    admin = sa.create_engine(
        f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres?connect_timeout=5",
        isolation_level="AUTOCOMMIT",
        poolclass=NullPool,
    )
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as err:
        admin.dispose()
        pytest.fail(f"{HOW_TO_START['postgres']}\nDriver said: {str(err.orig).strip()}", pytrace=False)
    conn_json = json.dumps(
        {"conn_type": "postgres", "host": PG_HOST, "port": PG_PORT, "login": PG_USER, "schema": name}
    )
    try:
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}", conn_json
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@dataclass
class History:
    kind: str
    url: str
    conn_json: str
    stored: dict[str, StoredWrite]


@pytest.fixture(scope="module", params=KINDS)
def history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    """One seeded history store per kind, shared by the module's tests (they only read it)."""
    with fresh_database(request.param, tmp_path_factory.mktemp("history")) as (url, conn_json):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(CONN_ENV, conn_json)
            store = HistoryStore.from_airflow("idempotent_history")
            try:
                stored = seed(store)
            finally:
                store.engine.dispose()
        yield History(request.param, url, conn_json, stored)


@pytest.fixture
def cli(history: History, monkeypatch: pytest.MonkeyPatch) -> History:
    monkeypatch.setenv(CONN_ENV, history.conn_json)
    return history


def run_json_all(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["history", "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    assert set(document) == {"runs", "windows"}
    return document


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    return run_json_all(capsys, *args)["windows"]


def keys(windows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(w["target"], w["window"]["label"]) for w in windows]


# --------------------------------------------------------------------------------- JSON
def test_store_derives_ordinals_and_flags(history: History) -> None:
    s = history.stored
    assert (s["24"].ordinal, s["24"].dataset_version, s["24"].nondeterministic) == (1, 1, False)
    assert (s["25a"].ordinal, s["25a"].dataset_version, s["25a"].nondeterministic) == (1, 1, False)
    assert (s["25b"].ordinal, s["25b"].dataset_version, s["25b"].nondeterministic) == (2, 2, True)
    assert (s["25c"].ordinal, s["25c"].dataset_version, s["25c"].nondeterministic) == (2, 2, False)


def test_json_document(cli: History, capsys: pytest.CaptureFixture[str]) -> None:
    windows = run_json(capsys)
    assert keys(windows) == [
        ("archive:payouts", "2026-08-25"),
        ("warehouse:payouts", "2026-08-24"),
        ("warehouse:payouts", "2026-08-25"),
        ("warehouse:payouts_eur", "2026-08-25"),
    ]
    window = windows[2]
    assert window["conn_id"] == "warehouse" and window["table"] == "payouts"
    assert window["window"] == {
        "start": "2026-08-25T00:00:00+00:00",
        "end": "2026-08-26T00:00:00+00:00",
        "label": "2026-08-25",
    }
    assert window["flags"] == ["nondeterministic", "skipped", "failed"]

    writes = window["writes"]
    assert [w["ordinal"] for w in writes] == [1, 2, 2]
    assert [w["status"] for w in writes] == ["written", "written", "skipped"]
    assert [w["flags"] for w in writes] == [[], ["nondeterministic"], ["skipped"]]
    assert [w["nondeterministic"] for w in writes] == [False, True, False]
    assert [w["dataset_version"] for w in writes] == [1, 2, 2]
    assert [w["checksum"] for w in writes] == [C1, C2, C2]  # whole, not shortened
    assert [w["fingerprint"] for w in writes] == [FP, FP, FP]
    assert [(w["run_id"], w["try_number"], w["run_type"]) for w in writes] == [
        (RUN_25, 2, "scheduled"),
        (RUN_MANUAL, 1, "manual"),
        (RUN_BACKFILL, 1, "backfill"),
    ]
    assert [w["written_at"] for w in writes] == [
        at(26, 2, 5).isoformat(),
        at(27, 9, 1).isoformat(),
        at(28, 8, 1).isoformat(),
    ]
    first, second, skipped = writes
    assert (first["rows_deleted"], first["rows_inserted"], first["rows_updated"], first["row_count"]) == (
        0,
        2000,
        0,
        2000,
    )
    assert (second["rows_deleted"], second["rows_updated"], second["row_count"]) == (3, 2000, 1997)
    assert skipped["rows_inserted"] is None and skipped["row_count"] == 1997
    assert [(w["dag_id"], w["task_id"], w["strategy"]) for w in writes] == [(DAG, TASK, "merge")] * 3
    assert [(w["semantics"], w["policy_version"]) for w in writes] == [
        ("replay", "v1"),
        ("corrective", "v2"),
        ("replay", "v2"),
    ]

    attempts = window["attempts"]
    assert [(a["run_id"], a["try_number"], a["event"]) for a in attempts] == [
        (RUN_25, 1, "running"),
        (RUN_25, 1, "failed"),
        (RUN_25, 2, "running"),
        (RUN_25, 2, "success"),
        (RUN_MANUAL, 1, "running"),
        (RUN_MANUAL, 1, "success"),
        (RUN_BACKFILL, 1, "running"),
        (RUN_BACKFILL, 1, "success"),
    ]
    failed = attempts[1]
    assert failed["failed"] is True and failed["state"] == "failed" and failed["source"] == "listener"
    assert failed["error"] == ERROR  # the whole error in JSON; the table shows its first line
    assert failed["at"] == at(26, 2, 1).isoformat()
    assert [a["failed"] for a in attempts].count(True) == 1

    clean = windows[1]
    assert clean["flags"] == [] and [w["ordinal"] for w in clean["writes"]] == [1]
    assert [a["event"] for a in clean["attempts"]] == ["running", "success"]

    eur = windows[3]
    assert eur["flags"] == ["failed", "refused"]
    (refused,) = eur["writes"]
    assert refused["status"] == "refused" and refused["flags"] == ["refused", "failed"]
    assert refused["checksum"] is None and refused["message"] == REFUSAL
    assert (refused["ordinal"], refused["dataset_version"]) == (0, 0)  # nothing written yet

    assert windows[0]["attempts"] == []  # the archive copy has no attempts recorded


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dag", DAG], [(TARGET, "2026-08-24"), (TARGET, "2026-08-25")]),
        (["--dag", DAG, "--task", TASK, "--window", "2026-08-25"], [(TARGET, "2026-08-25")]),
        (["--task", "copy_payouts"], [("archive:payouts", "2026-08-25")]),
        (["--dag", "payouts_archive", "--task", TASK], []),
        (
            ["--table", "payouts"],
            [("archive:payouts", "2026-08-25"), (TARGET, "2026-08-24"), (TARGET, "2026-08-25")],
        ),
        (["--table", TARGET], [(TARGET, "2026-08-24"), (TARGET, "2026-08-25")]),
        (["--table", "payouts_eur"], [("warehouse:payouts_eur", "2026-08-25")]),
        (["--table", "payouts%eur"], []),  # LIKE wildcards in a name are literal
        (["--table", "payouts_eu_"], []),
        (["--table", "x' OR '1'='1"], []),  # bound, never spliced
        (["--window", "2026-08-24"], [(TARGET, "2026-08-24")]),
        (["--window", "2026-08-26"], []),
        (["--from", "2026-08-24", "--to", "2026-08-24"], [(TARGET, "2026-08-24")]),
        (
            ["--from", "2026-08-25"],
            [
                ("archive:payouts", "2026-08-25"),
                (TARGET, "2026-08-25"),
                ("warehouse:payouts_eur", "2026-08-25"),
            ],
        ),
        (["--to", "2026-08-24"], [(TARGET, "2026-08-24")]),
        (["--from", "2026-08-01", "--to", "2026-08-23"], []),
        (["--flag", "nondeterministic"], [(TARGET, "2026-08-25")]),
        (["--flag", "skipped"], [(TARGET, "2026-08-25")]),
        (["--flag", "failed"], [(TARGET, "2026-08-25"), ("warehouse:payouts_eur", "2026-08-25")]),
        (["--flag", "failed", "--dag", DAG], [(TARGET, "2026-08-25")]),
        (["--flag", "nondeterministic", "--window", "2026-08-24"], []),
        (["--limit", "1"], [("archive:payouts", "2026-08-25")]),  # the latest window first
        (["--limit", "2", "--dag", DAG], [(TARGET, "2026-08-24"), (TARGET, "2026-08-25")]),
        (["--limit", "1", "--dag", DAG], [(TARGET, "2026-08-25")]),
    ],
)
def test_filters(
    cli: History, capsys: pytest.CaptureFixture[str], args: list[str], expected: list[tuple[str, str]]
) -> None:
    assert keys(run_json(capsys, *args)) == expected


def test_filter_chooses_windows_shown_whole(cli: History, capsys: pytest.CaptureFixture[str]) -> None:
    """--flag skipped finds the window; the window still shows all three of its writes."""
    (window,) = run_json(capsys, "--flag", "skipped", "--dag", DAG)
    assert [w["ordinal"] for w in window["writes"]] == [1, 2, 2]
    assert len(window["attempts"]) == 8


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        # RUN_25: try 1 of the merge failed (try 2 wrote); the EUR run's write was refused
        ("failed", {(DAG, RUN_25), ("payouts_overwrite", RUN_25)}),
        ("nondeterministic", {(DAG, RUN_MANUAL)}),
        ("skipped", {(DAG, RUN_BACKFILL)}),
    ],
)
def test_flag_lists_only_the_runs_carrying_it(
    cli: History, capsys: pytest.CaptureFixture[str], flag: str, expected: set[tuple[str, str]]
) -> None:
    """`history --flag failed` lists the failed runs, not every run of the store (the successful
    manual and backfill runs of the same window, the clean runs of other days)."""
    runs = run_json_all(capsys, "--flag", flag)["runs"]
    assert {(r["dag_id"], r["run_id"]) for r in runs} == expected


def test_flag_failed_text_names_no_successful_run(cli: History, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--flag", "failed", "--dag", DAG]) == 0
    out, _ = capsys.readouterr()
    runs_part = out.split("DAG run(s)")[0]
    assert RUN_25 in runs_part and RUN_MANUAL not in runs_part and RUN_BACKFILL not in runs_part


# --------------------------------------------------------------------------------- text
def test_plain_table(cli: History, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--dag", DAG]) == 0
    out, _ = capsys.readouterr()
    assert "\x1b[" not in out  # stdout is not a terminal: no colour
    assert all(line == line.rstrip() for line in out.splitlines())
    assert (
        "warehouse:payouts  window 2026-08-25  [2026-08-25T00:00:00+00:00, 2026-08-26T00:00:00+00:00)" in out
    )
    assert "window 2026-08-24" in out
    rows = [line for line in out.splitlines() if re.match(r"\s*\d+ \|", line)]
    assert [row.split("|")[0].strip() for row in rows] == ["1", "1", "2", "2"]  # 08-24, then 08-25
    assert [row.split("|")[8].strip() for row in rows] == ["written", "written", "written", "skipped"]
    assert C1[:12] in out and C1 not in out  # checksums shortened to 12 characters
    assert FP[:12] in out and FP not in out
    assert "nondeterministic" in out and "skipped" in out
    assert RUN_MANUAL in out
    assert "OSError: [Errno 28] No space left on device" in out  # the error's first line ...
    assert "Traceback" not in out  # ... only
    assert "2 window(s), 4 write(s)" in out


def test_rich_on_a_terminal(
    cli: History, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stdout as a terminal
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main(["history", "--dag", DAG, "--window", "2026-08-25"]) == 0
    out, _ = capsys.readouterr()
    assert "\x1b[" in out
    assert "warehouse:payouts" in out and "nondeterministic" in out and C2[:12] in out


# --------------------------------------------------------------------------------- errors
def test_no_match_says_so(cli: History, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--dag", "no_such_dag"]) == 0
    out, _ = capsys.readouterr()
    assert "No window writes match --dag no_such_dag in connection 'idempotent_history'" in out

    assert main(["history", "--dag", "no_such_dag", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"runs": [], "windows": []}
    assert "no window writes match --dag no_such_dag" in err
    assert "no DAG runs match --dag no_such_dag" in err

    assert main(["history", "--dag", "[bold]x[/oops]"]) == 0  # names are text, never rich markup
    assert "No window writes match --dag [bold]x[/oops] in" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "2026-13-01"], "invalid date '2026-13-01': expected YYYY-MM-DD"),
        (["--window", "25.08.2026"], "expected YYYY-MM-DD"),
        (["--from", "2026-8-1"], "expected YYYY-MM-DD"),
        (["--to", "2026-08-25T10:00"], "expected YYYY-MM-DD"),
        (["--from", "2026-08-26", "--to", "2026-08-25"], "--from 2026-08-26 is after --to 2026-08-25"),
        (["--window", "2026-08-25", "--from", "2026-08-24"], "not both"),
        (["--limit", "0"], "expected a whole number >= 1"),
        (["--flag", "sometimes"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv(CONN_ENV, json.dumps({"conn_type": "sqlite", "host": "/nonexistent/never-opened.db"}))
    assert main(["history", *args]) == 2
    out, err = capsys.readouterr()
    assert message in err and out == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["stop", "--dag", "d", "--reason", "pay\u202eout"],
        ["effects", "resolve", "--key", "k", "--as", "failed", "--reason", "pay\u202eout"],
    ],
)
def test_a_reason_with_an_invisible_format_character_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """The rule the API and the plugin apply (`airflow_idempotent.text`); nothing is opened."""
    monkeypatch.setenv(CONN_ENV, json.dumps({"conn_type": "sqlite", "host": "/nonexistent/never-opened.db"}))
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "U+202E RIGHT-TO-LEFT OVERRIDE at position 4" in err and out == ""


def test_no_command_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "history" in capsys.readouterr().err
    assert main(["--version"]) == 0
    assert "airflow-idempotent" in capsys.readouterr().out


def test_unreachable_store_names_the_connection(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = {"conn_type": "postgres", "host": "127.0.0.1", "port": 1, "login": "postgres", "schema": "history"}
    monkeypatch.setenv(CONN_ENV, json.dumps(dead))
    assert main(["history", "--json"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "the history store is unreachable: connection 'idempotent_history'" in err
    assert "127.0.0.1:1" in err and "OperationalError" in err
    assert f"export {CONN_ENV}=" in err and "airflow connections add idempotent_history" in err

    monkeypatch.setenv("AIRFLOW_CONN_OTHER_HISTORY", json.dumps({"conn_type": "ftp", "host": "x"}))
    assert main(["history", "--conn-id", "other_history"]) == 1
    err = capsys.readouterr().err
    assert "cannot open the history store of connection 'other_history'" in err
    assert "has type 'ftp'" in err and "export AIRFLOW_CONN_OTHER_HISTORY=" in err


def test_embedded_store_when_no_connection(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(CONN_ENV, raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    assert main(["history"]) == 0
    out, _ = capsys.readouterr()
    assert f"in the embedded SQLite file {tmp_path / 'idempotent_history.db'}" in out
    assert "connection 'idempotent_history' is not defined" in out
    assert not (tmp_path / "idempotent_history.db").exists()  # reading creates nothing


# --------------------------------------------------------------------------------- SQL
def test_window_values_are_bound() -> None:
    flt = HistoryFilter(
        dag_id="payouts_merge",
        table="payouts",
        start=at(25),
        end=at(26),
        flag="failed",
    )
    for query in (writes_query(flt), attempts_query(flt)):
        compiled = query.compile(dialect=postgresql.dialect())
        assert "2026" not in str(compiled) and "payouts" not in str(compiled)
        assert at(25) in compiled.params.values() and at(26) in compiled.params.values()


NOISE = {
    # 100,000 writes and attempts over 200 DAGs, written in the database itself.
    "postgres": (
        """INSERT INTO idem_window_write (dag_id, run_id, task_id, map_index, try_number, target,
            window_start, window_end, window_label, strategy, status, fingerprint, ordinal,
            dataset_version, nondeterministic, written_at, package_version)
        SELECT 'dag_' || (i % 200), 'run_' || i, 'task', -1, 1, 'wh:table_' || (i % 200),
            TIMESTAMP '2020-01-01' + (i / 200) * INTERVAL '1 day',
            TIMESTAMP '2020-01-01' + (i / 200 + 1) * INTERVAL '1 day',
            'x', 'merge', 'written', 'fp', 1, 1, false, TIMESTAMP '2020-01-01', '0'
        FROM generate_series(1, 100000) AS i""",
        """INSERT INTO idem_task_attempt (dag_id, run_id, task_id, map_index, try_number, event, at)
        SELECT 'dag_' || (i % 200), 'run_' || i, 'task', -1, 1, 'success', TIMESTAMP '2020-01-01'
        FROM generate_series(1, 100000) AS i""",
    ),
    "sqlite": (
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
        INSERT INTO idem_window_write (dag_id, run_id, task_id, map_index, try_number, target,
            window_start, window_end, window_label, strategy, status, fingerprint, ordinal,
            dataset_version, nondeterministic, written_at, package_version)
        SELECT 'dag_' || (i % 200), 'run_' || i, 'task', -1, 1, 'wh:table_' || (i % 200),
            datetime('2020-01-01', '+' || (i / 200) || ' days'),
            datetime('2020-01-01', '+' || (i / 200 + 1) || ' days'),
            'x', 'merge', 'written', 'fp', 1, 1, 0, '2020-01-01 00:00:00.000000', '0' FROM n""",
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
        INSERT INTO idem_task_attempt (dag_id, run_id, task_id, map_index, try_number, event, at)
        SELECT 'dag_' || (i % 200), 'run_' || i, 'task', -1, 1, 'success', '2020-01-01 00:00:00.000000'
        FROM n""",
    ),
}


def explain(conn: sa.Connection, query: sa.Select[Any]) -> str:
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    if conn.dialect.name == "postgresql":
        rows = conn.exec_driver_sql("EXPLAIN " + compiled.string, compiled.params)
        return "\n".join(row[0] for row in rows)
    params = tuple(compiled.params[name] for name in compiled.positiontup or ())
    params = tuple(p.isoformat(" ") if isinstance(p, datetime) else p for p in params)
    rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + compiled.string, params)
    return "\n".join(str(row[3]) for row in rows)


@pytest.mark.parametrize("kind", KINDS)
def test_one_dags_history_reads_through_the_indexes(kind: str, tmp_path: Path) -> None:
    with fresh_database(kind, tmp_path) as (url, _):
        engine: Engine = sa.create_engine(url, poolclass=NullPool)
        try:
            HistoryStore(engine=engine).migrate()
            with engine.begin() as conn:
                for statement in NOISE[kind]:
                    conn.execute(sa.text(statement))
                conn.execute(sa.text("ANALYZE"))
            with engine.connect() as conn:
                for flt in (
                    HistoryFilter(dag_id="dag_7"),
                    HistoryFilter(dag_id="dag_7", task_id="task", start=at(1), end=at(30)),
                    HistoryFilter(dag_id="dag_7", table="table_7", flag="failed"),
                ):
                    plan = explain(conn, writes_query(flt))
                    assert "ix_idem_window_write_dag" in plan, plan
                    assert "ix_idem_window_write_target" in plan, plan
                    attempts_plan = explain(conn, attempts_query(flt))
                    assert "idem_task_attempt" in attempts_plan, attempts_plan
                    for text in (plan, attempts_plan):
                        assert "Seq Scan" not in text, text
                        assert (
                            "SCAN idem_window_write" not in text and "SCAN idem_task_attempt" not in text
                        ), text
        finally:
            engine.dispose()


# --------------------------------------------------------------------------------- console script
@pytest.mark.parametrize("history", ["sqlite"], indirect=True)
def test_console_script(history: History) -> None:
    script = shutil.which("airflow-idempotent", path=str(Path(sys.executable).parent)) or shutil.which(
        "airflow-idempotent"
    )
    if script is None:
        pytest.fail(
            "the airflow-idempotent console script is not installed: run `pip install -e .`", pytrace=False
        )
    env = {**os.environ, CONN_ENV: history.conn_json}
    proc = subprocess.run(
        [script, "history", "--json", "--dag", DAG],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    windows = json.loads(proc.stdout)["windows"]  # nothing but the document on stdout: logs go to stderr
    assert keys(windows) == [(TARGET, "2026-08-24"), (TARGET, "2026-08-25")]
    assert [w["ordinal"] for w in windows[1]["writes"]] == [1, 2, 2]
    assert windows[1]["writes"][1]["flags"] == ["nondeterministic"]


def test_runs_of_the_days_by_the_windows_they_wrote(cli: History, capsys: pytest.CaptureFixture[str]) -> None:
    """Runs matching a day: the seeded attempts carry no logical date, so the windows they wrote decide."""
    assert main(["history", "--json", "--dag", DAG, "--window", "2026-08-25"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["run_id"] for r in runs] == [RUN_BACKFILL, RUN_MANUAL, RUN_25]  # newest first
    scheduled = runs[2]
    assert scheduled["run_type"] == "scheduled" and scheduled["state"] == "success"
    assert [(t["try_number"], t["state"], t["duration_seconds"]) for t in scheduled["tries"]] == [
        (1, "failed", 60.0),
        (2, "success", 120.0),
    ]
    assert scheduled["tries"][0]["error"] == ERROR and scheduled["tries"][0]["failed"] is True
    assert [(w["try_number"], w["status"]) for w in scheduled["writes"]] == [(2, "written")]
    assert main(["history", "--json", "--run", RUN_MANUAL]) == 0
    (manual,) = json.loads(capsys.readouterr().out)["runs"]
    assert [a["event"] for a in manual["attempts"]] == ["running", "success"]
