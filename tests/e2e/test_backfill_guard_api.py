"""End to end: the backfill guard answers Airflow's real REST API before anything is created.

A real API server (with this package's plugin, so its root middleware), scheduler, DAG processor
and LocalExecutor workers on a fresh PostgreSQL metadata database (tests/e2e/conftest.py). Two
DAGs (tests/e2e/dags/guarded_payouts.py): one guarded with a cap of 5 windows, writing payouts to
a SQLite warehouse; one unguarded. Every refusal is a 422 whose `detail` is the guard's message
(what Airflow's backfill dialog shows), and leaves no backfill behind.
"""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales, window_totals
from tests.e2e.conftest import AirflowCluster

pytestmark = pytest.mark.e2e

GUARDED = "idem_e2e_guarded_payouts"
UNGUARDED = "idem_e2e_unguarded"
DAG_FILE = Path(__file__).with_name("dags") / "guarded_payouts.py"
PER_DAY = 40
DECLARED = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
BACKFILLS = "/api/v2/backfills"
DRY_RUN = "/api/v2/backfills/dry_run"


def days(first: str, count: int) -> dict[str, str]:
    """from_date/to_date covering `count` daily windows from `first` (to_date: the last logical date)."""
    start = pendulum.parse(first)
    assert isinstance(start, pendulum.DateTime)
    return {"from_date": start.isoformat(), "to_date": start.add(days=count - 1).isoformat()}


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    shutil.copy(DAG_FILE, e2e_dags / DAG_FILE.name)
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> sa.Engine:
    """The SQLite warehouse the guarded DAG writes, and its connection (stored in the metadata DB)."""
    path = cluster.home / "warehouse.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    create_sales(engine, days=31, per_day=PER_DAY)
    create_payouts(engine)
    connection = {"connection_id": "idem_e2e_warehouse", "conn_type": "sqlite", "host": str(path)}
    cluster.request("POST", "/api/v2/connections", connection)
    for dag_id in (GUARDED, UNGUARDED):
        cluster.wait_for(
            f"{dag_id} to be parsed", lambda d=dag_id: cluster.request("GET", f"/api/v2/dags/{d}"), 120
        )
    return engine


def post(cluster: AirflowCluster, path: str, dag_id: str, conf: Any = None, **fields: Any) -> tuple[int, Any]:
    body = {"dag_id": dag_id, **fields}
    if conf is not None:
        body["dag_run_conf"] = conf
    return cluster.call("POST", path, body)


def backfills(cluster: AirflowCluster, dag_id: str) -> list[dict[str, Any]]:
    return list(cluster.request("GET", f"{BACKFILLS}?dag_id={dag_id}")["backfills"])


def refused(answer: tuple[int, Any], expected: str) -> str:
    status, payload = answer
    assert status == 422, answer
    assert isinstance(payload, dict) and set(payload) == {"detail"}, payload
    detail = payload["detail"]
    assert isinstance(detail, str) and expected in detail, detail
    return detail


def test_an_undeclared_backfill_is_refused_and_nothing_is_created(
    cluster: AirflowCluster, warehouse: sa.Engine
) -> None:
    window = days("2026-08-01", 2)
    for conf in (None, {}, {"reason": "no semantics"}):
        detail = refused(post(cluster, BACKFILLS, GUARDED, conf, **window), "declare its rerun semantics")
        assert detail.startswith("this DAG is guarded: a backfill must declare its rerun semantics")
    refused(post(cluster, DRY_RUN, GUARDED, {}, **window), "declare its rerun semantics")
    assert backfills(cluster, GUARDED) == []


def test_over_the_cap_needs_the_exact_count_approved(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    six = days("2026-08-01", 6)
    message = (
        "this backfill covers 6 windows, over the DAG's cap of 5: split it, or approve exactly this "
        'count by adding "approve_windows": 6 to the conf.'
    )
    assert refused(post(cluster, BACKFILLS, GUARDED, DECLARED, **six), message) == message
    assert refused(post(cluster, DRY_RUN, GUARDED, DECLARED, **six), message) == message
    wrong = {**DECLARED, "approve_windows": 5}
    refused(post(cluster, BACKFILLS, GUARDED, wrong, **six), '"approve_windows": 6')
    assert backfills(cluster, GUARDED) == []

    # The UI's dialog dry-runs without conf to show its count: answered by Airflow (6 runs).
    status, dry = post(cluster, DRY_RUN, GUARDED, **six)
    assert status == 200 and dry["total_entries"] == 6, dry

    approved = {**DECLARED, "approve_windows": 6}
    status, created = post(cluster, BACKFILLS, GUARDED, approved, **six)
    assert status == 200, created
    assert created["dag_run_conf"] == approved
    try:
        runs = cluster.request("GET", f"/api/v2/dags/{GUARDED}/dagRuns?run_type=backfill&limit=50")
        assert runs["total_entries"] == 6  # the DAG is paused: they stay queued
    finally:
        cancelled = cluster.request("PUT", f"{BACKFILLS}/{created['id']}/cancel")
        assert cancelled["completed_at"] is not None
    assert [b["id"] for b in backfills(cluster, GUARDED)] == [created["id"]]


def test_windows_that_have_not_closed_are_refused(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    today = pendulum.now("UTC").start_of("day")
    open_range = {"from_date": today.subtract(days=2).isoformat(), "to_date": today.add(days=1).isoformat()}
    before = backfills(cluster, GUARDED)
    detail = refused(post(cluster, BACKFILLS, GUARDED, DECLARED, **open_range), "have not closed yet")
    assert f"(the first ends {today.add(days=1).isoformat()})" in detail
    # Also the UI's conf-less dry run: the dialog shows it and keeps Run disabled.
    refused(post(cluster, DRY_RUN, GUARDED, **open_range), "have not closed yet")
    assert backfills(cluster, GUARDED) == before


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"dag_run_conf": {**DECLARED, "thresholds": {"max_changed_rows": -1}}}, "max_changed_rows must be"),
        ({"dag_run_conf": {**DECLARED, "thresholds": {"max_rows": 5}}}, "unknown threshold(s) ['max_rows']"),
        ({"dag_run_conf": {**DECLARED, "thresholds": "strict"}}, "thresholds must be an object"),
        ({"dag_run_conf": {"semantics": "corrective", "reason": "x"}}, 'add "policy_version" to the conf'),
        ({"from_date": "last tuesday"}, "from_date: Input should be a valid datetime"),
    ],
    ids=[
        "negative-threshold",
        "unknown-threshold",
        "thresholds-not-object",
        "corrective-no-policy",
        "bad-date",
    ],
)
def test_malformed_declarations_are_refused(
    cluster: AirflowCluster, warehouse: sa.Engine, change: dict[str, Any], expected: str
) -> None:
    before = backfills(cluster, GUARDED)
    body = {"dag_id": GUARDED, **days("2026-08-01", 2), "dag_run_conf": DECLARED} | change
    for path in (BACKFILLS, DRY_RUN):
        refused(cluster.call("POST", path, body), expected)
    assert backfills(cluster, GUARDED) == before


def test_a_declared_corrective_backfill_is_created_and_its_runs_complete(
    cluster: AirflowCluster, warehouse: sa.Engine
) -> None:
    cluster.request("PATCH", f"/api/v2/dags/{GUARDED}", {"is_paused": False})
    status, created = post(cluster, BACKFILLS, GUARDED, DECLARED, **days("2026-08-10", 2))
    assert status == 200, created

    def finished() -> list[dict[str, Any]] | None:
        runs = cluster.request(
            "GET", f"/api/v2/dags/{GUARDED}/dagRuns?run_type=backfill&logical_date_gte=2026-08-10T00:00:00Z"
        )["dag_runs"]
        done = [r for r in runs if r["state"] in ("success", "failed")]
        return runs if len(runs) == 2 and len(done) == 2 else None

    runs = cluster.wait_for("the two backfill runs", finished, timeout=150)
    assert {r["state"] for r in runs} == {"success"}, runs
    cluster.wait_for(
        "the backfill to complete",
        lambda: cluster.request("GET", f"{BACKFILLS}/{created['id']}")["completed_at"],
        timeout=60,
    )
    assert all(r["conf"] == DECLARED for r in runs)
    # Each window holds its day's payouts under the declared v2 policy, and only those days.
    oracle = sa.text(
        "SELECT SUM(ROUND(price_eur * CASE WHEN price_eur >= 400 THEN 0.55 ELSE 0.60 END, 2)) "
        "FROM sales WHERE sale_date = :day"
    )
    with warehouse.connect() as conn:
        written = conn.execute(sa.text("SELECT DISTINCT sale_date FROM payouts ORDER BY 1")).scalars().all()
        for day in (date(2026, 8, 10), date(2026, 8, 11)):
            expected = Decimal(str(conn.execute(oracle, {"day": day.isoformat()}).scalar_one())).quantize(
                Decimal("0.01")
            )
            assert window_totals(warehouse, "payouts", day) == (PER_DAY, expected)
    assert [str(d) for d in written] == ["2026-08-10", "2026-08-11"]


def test_an_unguarded_dags_backfill_passes_untouched(cluster: AirflowCluster, warehouse: sa.Engine) -> None:
    window = days("2026-07-01", 40)  # over any cap, no conf: none of the guard's business
    status, dry = post(cluster, DRY_RUN, UNGUARDED, **window)
    assert status == 200 and dry["total_entries"] == 40, dry
    status, created = post(cluster, BACKFILLS, UNGUARDED, {"free": "form"}, max_active_runs=3, **window)
    assert status == 200, created
    try:
        assert (created["dag_id"], created["dag_run_conf"], created["max_active_runs"]) == (
            UNGUARDED,
            {"free": "form"},
            3,
        )
        assert pendulum.parse(created["from_date"]) == pendulum.parse(window["from_date"])
        assert pendulum.parse(created["to_date"]) == pendulum.parse(window["to_date"])
    finally:
        cluster.request("PUT", f"{BACKFILLS}/{created['id']}/cancel")
    # Airflow's own answers are Airflow's: a future-only range, an unknown DAG.
    future = {"from_date": (pendulum.now("UTC") + timedelta(days=5)).isoformat()}
    future["to_date"] = future["from_date"]
    status, answer = post(cluster, BACKFILLS, GUARDED, DECLARED, **future)
    assert (status, answer) == (422, {"detail": "Backfill cannot be executed for future dates."})
    status, answer = post(cluster, BACKFILLS, "no_such_dag", DECLARED, **days("2026-08-01", 2))
    assert status == 404, answer


PLUGIN_CREATE = f"/idempotent/api/dags/{GUARDED}/backfills"


def race(cluster: AirflowCluster, path: str, bodies: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    """Send every body to `path` at the same instant (one thread each, released by a barrier)."""
    import threading

    cluster.token()  # fetched once, before the race
    gate = threading.Barrier(len(bodies))
    answers: list[tuple[int, Any]] = [(0, None)] * len(bodies)

    def send(i: int) -> None:
        gate.wait()
        answers[i] = cluster.call("POST", path, bodies[i], timeout=60)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_racing_creates_never_put_more_windows_in_flight_than_the_cap(
    cluster: AirflowCluster, warehouse: sa.Engine
) -> None:
    """Rounds of 2 and of 4 simultaneous creates of 3 windows each (cap 5: any two are over it),
    through Airflow's REST route and the plugin's create route, some overlapping, some not: per
    round at most one is created, and the DAG runs created in the round's range never exceed the cap."""
    cluster.request("PATCH", f"/api/v2/dags/{GUARDED}", {"is_paused": True})  # runs stay queued
    cap, width = 5, 3
    first = pendulum.datetime(2026, 3, 1, tz="UTC")
    tally: dict[str, int] = {}
    for number, (path, racers) in enumerate(
        (path, racers) for path in (BACKFILLS, PLUGIN_CREATE) for racers in (2, 4, 2, 4)
    ):
        base = first.add(days=number * 2 * width)
        bodies = []
        for i in range(racers):  # racers 0 and 2 overlap, as do 1 and 3; 0 and 1 do not
            start = base.add(days=(i % 2) * width)
            window = {"from_date": start.isoformat(), "to_date": start.add(days=width - 1).isoformat()}
            if path == BACKFILLS:
                bodies.append({"dag_id": GUARDED, "dag_run_conf": DECLARED, **window})
            else:
                bodies.append({**DECLARED, **window})
        answers = race(cluster, path, bodies)
        created = [payload for status, payload in answers if status == 200]
        for status, payload in answers:
            detail = str(payload.get("detail", "")) if isinstance(payload, dict) else str(payload)
            kind = f"{status} guard: windows in flight" if "windows in flight" in detail else str(status)
            tally[kind] = tally.get(kind, 0) + 1
        in_range = (
            f"logical_date_gte={base.isoformat()}&logical_date_lte={base.add(days=2 * width).isoformat()}"
        )
        try:
            assert all(status in (200, 409, 422) for status, _ in answers), answers
            runs = cluster.request(
                "GET",
                f"/api/v2/dags/{GUARDED}/dagRuns?run_type=backfill&limit=100&"
                + in_range.replace("+00:00", "Z"),
            )["total_entries"]
            assert runs <= cap, (number, answers)
            assert len(created) == 1 and runs == width, (number, runs, answers)
        finally:
            for backfill in backfills(cluster, GUARDED):
                if backfill["completed_at"] is None:
                    cluster.request("PUT", f"{BACKFILLS}/{backfill['id']}/cancel")
    print(f"racing creates: {tally}")
