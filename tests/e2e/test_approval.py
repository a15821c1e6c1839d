"""End to end: a breached guarded window waits for a person, through Airflow's own HITL.

A real scheduler, DAG processor and API server (tests/e2e/conftest.py) run the DAG of
tests/e2e/dags/guarded_approval.py (`on_breach="approve"`) on a fresh PostgreSQL warehouse with
two days of the payouts scenario. Airflow 3.3 parks a HITL task in `awaiting_input` (no triggerer).

1. production holds v1 for both days (written by plain SQL: the load is not what is tested);
2. one corrective v2 backfill of both days breaching max_changed_rows: both tasks wait; day 1's
   HITL detail (REST) shows the diff, checked against figures computed here; Airflow's Required
   actions page lists both (Chromium); day 1 approved in the task's Required Action tab (comment
   typed, Approve clicked), the window becomes v2 and history names the approver;
3. day 2 rejected: the table keeps its rows (checksum); a rejection refuses that window only, so
   no kill switch is on;
4. meanwhile a third day, breached by the same DAG with a 36-second approval timeout, is left
   unanswered: the scheduler's own timeout sweep answers it with the default (Reject), the window
   keeps v1 and that backfill's kill switch is on (nobody decided: the rest must stop).

Then `rounds()` more backfills (4; IDEM_APPROVAL_ROUNDS=10 in `make reliability`) of both days
(production put back to v1 before each): day 1 approved and day 2 rejected through the REST API
within a second, alternating which answer goes first; every round day 1 holds v2 and day 2 v1,
and history says approved and rejected.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import PAYOUT_SQL, create_payouts, create_sales, table_checksum
from airflow_idempotent.guard import killswitch
from airflow_idempotent.history import HistoryStore, approvals
from tests.e2e.conftest import AirflowCluster, shot, warehouse_database

pytestmark = pytest.mark.e2e

DAG_ID = "idem_e2e_payouts_approval"
DAG_FILE = Path(__file__).with_name("dags") / "guarded_approval.py"
CONN_ID = "idem_e2e_approval_warehouse"
TASK = "write_payouts"
DAYS = [date(2026, 8, 24), date(2026, 8, 25)]
TIMEOUT_DAG = "idem_e2e_payouts_approval_timeout"  # the same task, approval_timeout_hours=0.01
TIMEOUT_DAY = date(2026, 8, 26)
PER_DAY = 2000
CENT = Decimal("0.01")
TIMEOUT = 180.0


def price(i: int) -> Decimal:
    return (Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")).quantize(CENT, ROUND_HALF_UP)


def amount(i: int, policy: str) -> Decimal:
    p = price(i)
    rate = Decimal("0.55") if policy == "v2" and p >= 400 else Decimal("0.60")
    return (p * rate).quantize(CENT, ROUND_HALF_UP)


def ids(day: date) -> range:
    first = (day - DAYS[0]).days * PER_DAY + 1
    return range(first, first + PER_DAY)


def total(day: date, policy: str) -> Decimal:
    return sum((amount(i, policy) for i in ids(day)), Decimal("0.00"))


def repriced(day: date) -> list[int]:
    return [i for i in ids(day) if price(i) >= 400]


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    (e2e_dags / DAG_FILE.name).write_text(DAG_FILE.read_text())
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


def fill(engine: sa.Engine) -> None:
    """The days' sales, and production as the v1 runs left it (no cluster time spent on it)."""
    create_sales(engine, days=len(DAYS) + 1, per_day=PER_DAY, start=DAYS[0])
    create_payouts(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) {PAYOUT_SQL}"),
            {"policy_version": "v1", "window_start": DAYS[0], "window_end": TIMEOUT_DAY + timedelta(days=1)},
        )


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> Iterator[sa.Engine]:
    with warehouse_database(cluster, "apr", CONN_ID, (DAG_ID, TIMEOUT_DAG), fill) as engine:
        yield engine


@pytest.fixture(scope="module")
def store(cluster: AirflowCluster) -> Iterator[HistoryStore]:
    engine = sa.create_engine(cluster.history_url)
    try:
        yield HistoryStore(engine)
    finally:
        for scope in ("backfill", "dag"):
            for dag_id in (DAG_ID, TIMEOUT_DAG):
                killswitch.clear_switch(HistoryStore(engine), scope, dag_id, by="e2e")  # type: ignore[arg-type]
        engine.dispose()


def backfill(
    cluster: AirflowCluster, conf: dict[str, Any], dag_id: str = DAG_ID, days: list[date] = DAYS
) -> dict[str, Any]:
    """A backfill of `days` through the REST API (and so through the guard)."""
    body = {
        "dag_id": dag_id,
        "from_date": f"{days[0].isoformat()}T00:00:00Z",
        "to_date": f"{days[-1].isoformat()}T00:00:00Z",
        "dag_run_conf": conf,
        "reprocess_behavior": "completed",
        "max_active_runs": len(days),
    }
    created: dict[str, Any] = cluster.request("POST", "/api/v2/backfills", body)
    return created


def completed(cluster: AirflowCluster, created: dict[str, Any]) -> None:
    """Wait until Airflow marks the backfill completed (one backfill per DAG may run at a time)."""
    cluster.wait_for(
        f"backfill {created['id']} to complete",
        lambda: cluster.request("GET", f"/api/v2/backfills/{created['id']}")["completed_at"],
        TIMEOUT,
        1.0,
    )


def run_of(cluster: AirflowCluster, day: date, dag_id: str = DAG_ID) -> dict[str, Any] | None:
    answer = cluster.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100")
    for run in answer["dag_runs"]:
        if datetime.fromisoformat(run["logical_date"].replace("Z", "+00:00")).date() == day:
            return dict(run)
    return None


def task_state(cluster: AirflowCluster, run_id: str, dag_id: str = DAG_ID) -> str | None:
    ti = cluster.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}")
    return ti.get("state")


def executor_events(cluster: AirflowCluster, run_id: str) -> int:
    """How many finished-workload events of the run's task the scheduler has received."""
    text = (cluster.home / "scheduler.log").read_text(errors="replace")
    key = f"TaskInstanceKey(dag_id='{DAG_ID}', task_id='{TASK}', run_id='{run_id}'"
    return text.count(f"Received executor event with state success for task instance {key}")


def hitl_path(run_id: str, dag_id: str = DAG_ID) -> str:
    return f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK}/-1/hitlDetails"


def window(engine: sa.Engine, day: date) -> tuple[int, Decimal]:
    with engine.connect() as conn:
        n, s = conn.execute(
            sa.text("SELECT COUNT(*), COALESCE(SUM(amount_eur), 0) FROM payouts WHERE sale_date = :d"),
            {"d": day},
        ).one()
    return int(n), Decimal(s)


def wait_done(cluster: AirflowCluster, day: date, state: str, dag_id: str = DAG_ID) -> dict[str, Any]:
    try:
        run: dict[str, Any] = cluster.wait_for(
            f"run of {day} to end {state}",
            lambda: (r := run_of(cluster, day, dag_id)) and r["state"] in ("success", "failed") and r,
            TIMEOUT,
            1.0,
        )
    except AssertionError as err:  # say where the task is: a retry of a failed resume asks again
        raise AssertionError(f"{where_is_the_task(cluster, day, dag_id)}\n{err}") from None
    assert run["state"] == state, run
    return run


def where_is_the_task(cluster: AirflowCluster, day: date, dag_id: str) -> str:
    """The task's state and every try's, e.g. "awaiting_input on try 2 (try 1 failed)": a resumed
    (approved) attempt that failed is retried: on a failure Airflow retries, the retry swaps the
    approved rows when it runs the same code; otherwise it diffs again and waits for a new answer."""
    try:
        run = run_of(cluster, day, dag_id)
        if run is None:
            return f"no run of {day}"
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/{TASK}"
        ti = cluster.request("GET", path)
        tries = cluster.request("GET", f"{path}/tries").get("task_instances", [])
    except Exception as err:  # a diagnosis only: never hide the timeout it explains
        return f"{day}: the task's state could not be read ({type(err).__name__}: {err})"
    shown = ", ".join(f"try {t.get('try_number')} {t.get('state')}" for t in tries)
    return f"{day}: run {run['state']}, task {ti.get('state')} on try {ti.get('try_number')} ({shown})"


BREACHING = {
    "semantics": "corrective",
    "reason": "contract fix: v2 rates",
    "policy_version": "v2",
    "thresholds": {"max_changed_rows": 10},
}


def breach_both_and_wait(cluster: AirflowCluster) -> tuple[dict[str, Any], dict[date, str], float]:
    """One corrective v2 backfill of both days with max_changed_rows 10: both tasks park."""
    started = time.monotonic()
    # a backfill reruns the days' runs (same run ids): count only the executor events of this one
    earlier = {
        day: executor_events(cluster, run["dag_run_id"]) for day in DAYS if (run := run_of(cluster, day))
    }
    created = backfill(cluster, BREACHING)

    def parked(day: date) -> Any:
        run = run_of(cluster, day)
        if run is None:
            return None
        return task_state(cluster, run["dag_run_id"]) == "awaiting_input" and run["dag_run_id"]

    run_ids = {
        day: cluster.wait_for(f"{day}'s task to await input", lambda d=day: parked(d), TIMEOUT, 1.0)
        for day in DAYS
    }
    waited = time.monotonic() - started
    # The parked attempt's process has exited; answer only once the scheduler has taken the
    # executor's event for it. Airflow 3.3.2 + LocalExecutor: an answer that lands first gets the
    # resumed attempt failed by that stale "success" event (a race of Airflow's, not the guard's).
    for day, run_id in run_ids.items():
        cluster.wait_for(
            f"the scheduler to take {day}'s parked attempt's executor event",
            lambda r=run_id, d=day: executor_events(cluster, r) > earlier.get(d, 0),
            60,
            0.5,
        )
    return created, run_ids, waited


def required_actions_page(cluster: AirflowCluster, browser: Any, subjects: list[str]) -> None:
    """Airflow's own Required actions page, in Chromium, lists every request by its subject."""
    from playwright.sync_api import expect

    page = browser.new_page()
    try:
        page.goto(f"{cluster.base_url}/required_actions")
        for text in subjects:
            expect(page.get_by_text(text).first).to_be_visible(timeout=60_000)
        shot(page, "required-actions")
    finally:
        page.close()


def approve_in_the_ui(
    cluster: AirflowCluster, browser: Any, run_id: str, shown: list[str], comment: str
) -> None:
    """A person's path: the task instance's Required Action tab in Airflow's UI shows the request's
    diff (`shown`); the comment is typed (Airflow requires it) and Approve is clicked."""
    from playwright.sync_api import expect

    page = browser.new_page()
    try:
        page.goto(f"{cluster.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/{TASK}/required_actions")
        for text in shown:
            expect(page.get_by_text(text).first).to_be_visible(timeout=60_000)
        approve = page.get_by_test_id("hitl-option-Approve")
        expect(approve).to_be_disabled()  # no comment yet
        page.locator("#element_comment").fill(comment)
        shot(page, "approval")
        expect(approve).to_be_enabled()
        approve.click()
        cluster.wait_for(
            "the UI's answer to reach Airflow",
            lambda: cluster.request("GET", hitl_path(run_id))["response_received"],
            60,
            0.5,
        )
    finally:
        page.close()


def test_breach_waits_for_approval_then_swaps_and_a_rejection_refuses(
    cluster: AirflowCluster, warehouse: sa.Engine, store: HistoryStore, browser: Any
) -> None:
    t0 = time.monotonic()
    for day in [*DAYS, TIMEOUT_DAY]:
        assert window(warehouse, day) == (PER_DAY, total(day, "v1"))
    unanswered = backfill(cluster, BREACHING, TIMEOUT_DAG, [TIMEOUT_DAY])  # left to time out
    created, run_ids, waited = breach_both_and_wait(cluster)
    for day in DAYS:  # nothing swapped while they wait
        assert window(warehouse, day) == (PER_DAY, total(day, "v1"))
    # Airflow's required actions list both requests, unanswered
    listed = cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/~/hitlDetails?response_received=false")
    assert sorted(d["task_instance"]["dag_run_id"] for d in listed["hitl_details"]) == sorted(
        run_ids.values()
    )
    # ... and Airflow's UI shows them on its Required actions page
    required_actions_page(cluster, browser, [d["subject"] for d in listed["hitl_details"]])

    # day 1: the HITL detail shows the diff; approved through the REST API
    day = DAYS[0]
    detail = cluster.request("GET", hitl_path(run_ids[day]))
    changed = repriced(day)
    body = detail["body"]
    assert detail["options"] == ["Approve", "Reject"] and detail["response_received"] is False
    assert f"changed {len(changed)} rows > max_changed_rows 10" in body
    assert f"| {PER_DAY} | {PER_DAY} | 0 | 0 | {len(changed)} | {PER_DAY - len(changed)} |" in body
    v1, v2 = total(day, "v1"), total(day, "v2")
    assert f"| amount_eur | {v1} | {v2} | {v2 - v1} |" in body
    assert f"Sample changed keys: {', '.join(str(i) for i in changed[:10])}" in body
    # approved in Airflow's UI, as a person does: the task's Required Action tab shows the diff
    shown = [f"changed {len(changed)} rows > max_changed_rows 10", f"{v2 - v1}", "Sample changed keys:"]
    approve_in_the_ui(cluster, browser, run_ids[day], shown, "signed off")
    answered = cluster.request("GET", hitl_path(run_ids[day]))
    assert answered["chosen_options"] == ["Approve"], answered
    approver = answered["responded_by_user"]["name"]
    wait_done(cluster, day, "success")
    assert window(warehouse, day) == (PER_DAY, v2)
    (decided,) = [a for a in approvals.of_target(store, dag_id=DAG_ID) if a["run_id"] == run_ids[day]]
    assert (decided["status"], decided["decided_by"], decided["comment"]) == (
        "approved",
        approver,
        "signed off",
    )
    written = [
        w for w in store.writes(dag_id=DAG_ID) if w["run_id"] == run_ids[day] and w["status"] == "written"
    ]
    assert written[-1]["message"] == f"approved by {approver}: signed off"

    # day 2: rejected: production keeps v1 (checksum), the kill switch is on
    day = DAYS[1]
    before = table_checksum(warehouse, "payouts")
    detail = cluster.request("GET", hitl_path(run_ids[day]))
    assert f"changed {len(repriced(day))} rows > max_changed_rows 10" in detail["body"]
    cluster.request(
        "PATCH", hitl_path(run_ids[day]), {"chosen_options": ["Reject"], "params_input": {"comment": "no"}}
    )
    wait_done(cluster, day, "failed")
    completed(cluster, created)
    assert table_checksum(warehouse, "payouts") == before
    assert window(warehouse, day) == (PER_DAY, total(day, "v1"))
    assert killswitch.active_switches(store, DAG_ID, backfill=True) == []  # this window only
    (decided,) = [a for a in approvals.of_target(store, dag_id=DAG_ID) if a["run_id"] == run_ids[day]]
    assert decided["status"] == "rejected" and decided["comment"] == "no"

    # the third day, never answered: the scheduler's timeout sweep gives it the default, Reject
    run = wait_done(cluster, TIMEOUT_DAY, "failed", TIMEOUT_DAG)
    completed(cluster, unanswered)
    timed_out = cluster.request("GET", hitl_path(run["dag_run_id"], TIMEOUT_DAG))
    assert timed_out["chosen_options"] == ["Reject"] and timed_out["responded_by_user"] is None, timed_out
    assert window(warehouse, TIMEOUT_DAY) == (PER_DAY, total(TIMEOUT_DAY, "v1"))
    (decided,) = approvals.of_target(store, dag_id=TIMEOUT_DAG)
    assert decided["status"] == "timed_out" and decided["run_id"] == run["dag_run_id"], decided
    requested = datetime.fromisoformat(str(decided["requested_at"]))
    answered_at = datetime.fromisoformat(timed_out["responded_at"].replace("Z", "+00:00"))
    assert (answered_at - requested.replace(tzinfo=answered_at.tzinfo)).total_seconds() >= 36
    switches = killswitch.active_switches(store, TIMEOUT_DAG, backfill=True)
    assert [(s.scope, s.scope_key) for s in switches] == [("backfill", TIMEOUT_DAG)]
    print(
        f"\n[timing] backfill to both awaiting_input {waited:.1f} s; whole test {time.monotonic() - t0:.1f} s"
    )


#: Rounds of "approve day 1, reject day 2 within a second". Each round is one backfill of two days
#: through the scheduler: 29.8-31.0 s measured (2026-12-03, the 2-core machine shared with other
#: runs), so the issue's 10 rounds would add ~5 min to `make test`'s e2e group; 4 (two of each
#: order) add ~2 min. IDEM_APPROVAL_ROUNDS raises it: `make reliability` runs 10.
ROUNDS_VAR = "IDEM_APPROVAL_ROUNDS"


def rounds() -> int:
    text = os.environ.get(ROUNDS_VAR, "4")
    if not text.isdigit() or int(text) < 1:
        raise pytest.UsageError(
            f"{ROUNDS_VAR}={text!r} is not a number of rounds: give a whole number of at least 1 "
            f"(e.g. {ROUNDS_VAR}=10, what `make reliability` runs), or unset it for 4."
        )
    return int(text)


def put_back_v1(engine: sa.Engine) -> None:
    """Production as the v1 runs left it, for both days (plain SQL: the reset is not what is tested)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text("DELETE FROM payouts WHERE sale_date >= :start AND sale_date < :end"),
            {"start": DAYS[0], "end": DAYS[-1] + timedelta(days=1)},
        )
        conn.execute(
            sa.text(f"INSERT INTO payouts (sale_id, sale_date, amount_eur, rate) {PAYOUT_SQL}"),
            {"policy_version": "v1", "window_start": DAYS[0], "window_end": DAYS[-1] + timedelta(days=1)},
        )


def test_approve_one_day_and_reject_the_other_within_a_second_in_both_orders(
    cluster: AirflowCluster, warehouse: sa.Engine, store: HistoryStore
) -> None:
    """The reviewer's case: one decision per window, a moment apart, in either order; neither
    undoes the other (a rejection once tripped the backfill's kill switch under the approval)."""
    day_1, day_2 = DAYS
    v2_1, v1_2 = total(day_1, "v2"), total(day_2, "v1")
    took = []
    figures = []
    for n in range(rounds()):
        started = time.monotonic()
        put_back_v1(warehouse)
        assert window(warehouse, day_1) == (PER_DAY, total(day_1, "v1"))
        created, run_ids, _ = breach_both_and_wait(cluster)
        answers = [(day_1, "Approve"), (day_2, "Reject")]
        if n % 2:
            answers.reverse()
        sent = time.monotonic()
        for day, option in answers:
            cluster.request(
                "PATCH",
                hitl_path(run_ids[day]),
                {"chosen_options": [option], "params_input": {"comment": f"round {n}"}},
            )
        assert time.monotonic() - sent < 1.0, "the two answers must land within a second"
        wait_done(cluster, day_1, "success")
        wait_done(cluster, day_2, "failed")
        completed(cluster, created)
        figures.append((window(warehouse, day_1), window(warehouse, day_2)))
        assert window(warehouse, day_1) == (PER_DAY, v2_1), f"round {n}"
        assert window(warehouse, day_2) == (PER_DAY, v1_2), f"round {n}"
        assert killswitch.active_switches(store, DAG_ID, backfill=True) == [], f"round {n}"
        decided = {
            a["run_id"]: a for a in approvals.of_target(store, dag_id=DAG_ID) if a["comment"] == f"round {n}"
        }
        assert decided[run_ids[day_1]]["status"] == "approved", f"round {n}"
        assert decided[run_ids[day_2]]["status"] == "rejected", f"round {n}"
        latest = {w["run_id"]: w for w in store.writes(dag_id=DAG_ID)}
        assert latest[run_ids[day_1]]["status"] == "written", f"round {n}"
        assert latest[run_ids[day_1]]["message"].startswith("approved by "), f"round {n}"
        assert latest[run_ids[day_2]]["status"] == "refused", f"round {n}"
        assert "rejected by " in latest[run_ids[day_2]]["message"], f"round {n}"
        took.append(time.monotonic() - started)
        (n_1, s_1), (n_2, s_2) = figures[-1]
        print(
            f"\n[round {n}] {' then '.join(o for _, o in answers)}: day 1 {n_1} rows {s_1} "
            f"(v2 formula {PER_DAY} rows {v2_1}), day 2 {n_2} rows {s_2} (v1 formula {PER_DAY} "
            f"rows {v1_2}), {took[-1]:.1f} s; {where_is_the_task(cluster, day_1, DAG_ID)}"
        )
    print(f"\n[timing] {len(took)} rounds: {', '.join(f'{t:.1f}' for t in took)} s")
