"""End to end: a guarded month of payouts, backfilled through Airflow's REST API by a real scheduler.

The payouts scenario (docs/contributing.md, The payouts scenario: 30 days of 2,000 sales from 2026-08-01) in a
fresh PostgreSQL warehouse, written by the project's guarded payouts DAG (tests/e2e/dags/
guarded_month.py, a copy of dags/payouts.py `payouts_overwrite` with the same guard), on the
cluster of tests/e2e/conftest.py (API server with the guard middleware, scheduler with the
listener, DAG processor, LocalExecutor). Every backfill is created with POST /api/v2/backfills.

Every expected figure is computed here from the scenario's formula in pure Python (`truth`),
never by the code under test; production is read back with plain SQL.

The tests run in order and build on each other, as an operator's month would:

1. the initial v1 load of the month, then the same corrective v1 -> v2 backfill twice;
2. a replay of 2026-08-25 reproducing what was paid first (v1) without touching production;
3. a corrective backfill whose threshold one mid-month window breaches: that window and all
   later ones keep their figures, the backfill is paused through Airflow, the reason is recorded;
4. a kill switch set with the CLI while a backfill runs: nothing is written after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.examples.payouts import create_payouts, create_sales
from airflow_idempotent.guard import killswitch
from airflow_idempotent.history import HistoryStore
from airflow_idempotent.plugins.listener import HARD_LIMIT
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import AirflowCluster, warehouse_database

pytestmark = pytest.mark.e2e

DAG_ID = "idem_e2e_payouts_overwrite"
DAG_FILE = Path(__file__).with_name("dags") / "guarded_month.py"
CONN_ID = "idem_e2e_month_warehouse"
TARGET = f"{CONN_ID}:payouts"
BACKFILLS = "/api/v2/backfills"
CLI = str(Path(sys.executable).with_name("airflow-idempotent"))

FIRST = date(2026, 8, 1)
DAYS = 30
PER_DAY = 2000
MONTH = [FIRST + timedelta(days=n) for n in range(DAYS)]
CENT = Decimal("0.01")

V1_LOAD = {"semantics": "corrective", "reason": "initial load", "policy_version": "v1"}
V2_FIX = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
#: Wait for a 30-window backfill at most this long (they take well under a minute here).
MONTH_TIMEOUT = 300.0

Totals = dict[date, tuple[int, Decimal]]
TIMINGS: dict[str, float] = {}


# --------------------------------------------------------------------------------------------
# The truth, from the scenario's formula (pure Python, exact decimals)
# --------------------------------------------------------------------------------------------


def price(i: int) -> Decimal:
    """price_eur = round(25 + ((i * 37) % 900) * 0.5, 2)"""
    return (Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")).quantize(CENT, ROUND_HALF_UP)


def rate(policy: str, price_eur: Decimal) -> Decimal:
    """v1: flat 0.60; v2: 0.55 at or above 400.00, else 0.60."""
    return Decimal("0.55") if policy == "v2" and price_eur >= 400 else Decimal("0.60")


@cache
def truth(policy: str) -> Totals:
    """Per day: payout rows and sum(amount_eur), amount_eur = round(price_eur * rate, 2)."""
    rows: dict[date, int] = dict.fromkeys(MONTH, 0)
    sums: dict[date, Decimal] = dict.fromkeys(MONTH, Decimal("0.00"))
    for i in range(1, DAYS * PER_DAY + 1):
        day = FIRST + timedelta(days=(i - 1) // PER_DAY)
        p = price(i)
        rows[day] += 1
        sums[day] += (p * rate(policy, p)).quantize(CENT, ROUND_HALF_UP)
    return {day: (rows[day], sums[day]) for day in MONTH}


@cache
def repriced(day: date) -> int:
    """How many of the day's payouts v2 changes (items priced at or above 400.00)."""
    start = (day - FIRST).days * PER_DAY + 1
    return sum(1 for i in range(start, start + PER_DAY) if price(i) >= 400)


def month_total(totals: Totals) -> Decimal:
    return sum((total for _, total in totals.values()), Decimal("0.00"))


def test_truth_matches_the_scenarios_known_figure() -> None:
    assert truth("v1")[date(2026, 8, 25)] == (2000, Decimal("299730.00"))


# --------------------------------------------------------------------------------------------
# Fixtures: the cluster, a fresh warehouse, the history store
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(e2e_dags: Path, request: pytest.FixtureRequest) -> AirflowCluster:
    (e2e_dags / DAG_FILE.name).write_text(DAG_FILE.read_text())
    cluster: AirflowCluster = request.getfixturevalue("airflow_cluster")
    return cluster


def fill(engine: sa.Engine) -> None:
    """The month's sales and an empty payouts table."""
    assert create_sales(engine, days=DAYS, per_day=PER_DAY, start=FIRST) == DAYS * PER_DAY
    create_payouts(engine)


@pytest.fixture(scope="module")
def warehouse(cluster: AirflowCluster) -> Iterator[sa.Engine]:
    """A fresh PostgreSQL warehouse with the month's sales and an empty payouts table; dropped after."""
    with warehouse_database(cluster, "wh", CONN_ID, (DAG_ID,), fill) as engine:
        yield engine


@pytest.fixture(scope="module")
def store(cluster: AirflowCluster) -> Iterator[HistoryStore]:
    engine = sa.create_engine(cluster.history_url)
    try:
        yield HistoryStore(engine)
    finally:
        engine.dispose()


def clear_switches(store: HistoryStore) -> None:
    killswitch.clear_switch(store, "backfill", DAG_ID, by="e2e")
    killswitch.clear_switch(store, "dag", DAG_ID, by="e2e")
    killswitch.clear_switch(store, "global", None, by="e2e")


@pytest.fixture
def month(warehouse: sa.Engine, store: HistoryStore) -> Iterator[sa.Engine]:
    """The warehouse, with no kill switch on before and after the test."""
    clear_switches(store)
    started = time.monotonic()
    try:
        yield warehouse
    finally:
        clear_switches(store)
        print(f"\n[timing] test total: {time.monotonic() - started:.1f} s")


# --------------------------------------------------------------------------------------------
# Helpers: backfills through the REST API, production and history read back
# --------------------------------------------------------------------------------------------


def midnight(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def create_backfill(
    cluster: AirflowCluster,
    conf: dict[str, Any],
    first: date,
    last: date,
    max_active_runs: int,
    dag_id: str = DAG_ID,
) -> dict[str, Any]:
    body = {
        "dag_id": dag_id,
        "from_date": midnight(first),
        "to_date": midnight(last),
        "dag_run_conf": conf,
        "reprocess_behavior": "completed",  # rerun windows that already ran: the point of a backfill
        "max_active_runs": max_active_runs,
    }
    created: dict[str, Any] = cluster.request("POST", BACKFILLS, body)
    assert created["dag_run_conf"] == conf and created["max_active_runs"] == max_active_runs, created
    return created


def get_backfill(cluster: AirflowCluster, backfill_id: int) -> dict[str, Any]:
    answer: dict[str, Any] = cluster.request("GET", f"{BACKFILLS}/{backfill_id}")
    return answer


def run_to_completion(
    cluster: AirflowCluster,
    label: str,
    conf: dict[str, Any],
    first: date,
    last: date,
    max_active_runs: int,
    dag_id: str = DAG_ID,
) -> dict[str, Any]:
    """Create a backfill, wait until Airflow marks it completed; every run of it must succeed."""
    started = time.monotonic()
    created = create_backfill(cluster, conf, first, last, max_active_runs, dag_id)
    done = cluster.wait_for(
        f"backfill {label} ({created['id']}) to complete",
        lambda: (b := get_backfill(cluster, created["id"]))["completed_at"] and b,
        timeout=MONTH_TIMEOUT,
        every=1.0,
    )
    TIMINGS[label] = time.monotonic() - started
    print(f"\n[timing] backfill {label}: {TIMINGS[label]:.1f} s")
    states = {day: run["state"] for day, run in runs(cluster, dag_id).items() if first <= day <= last}
    assert len(states) == (last - first).days + 1, states
    assert set(states.values()) == {"success"}, states
    assert done["is_paused"] is False, done
    return dict(done)


def runs(cluster: AirflowCluster, dag_id: str = DAG_ID) -> dict[date, dict[str, Any]]:
    """The DAG's runs by logical day (one run per day: a backfill clears and reuses it)."""
    answer = cluster.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=logical_date")
    return {parse_time(r["logical_date"]).date(): r for r in answer["dag_runs"]}


def production(engine: sa.Engine) -> Totals:
    sql = sa.text("SELECT sale_date, COUNT(*), SUM(amount_eur) FROM payouts GROUP BY sale_date")
    with engine.connect() as conn:
        return {day: (int(n), Decimal(total)) for day, n, total in conn.execute(sql)}


def expected(days_in: dict[date, str]) -> Totals:
    """The truth of each day under the policy given for it."""
    return {day: truth(policy)[day] for day, policy in days_in.items()}


def writes_during(store: HistoryStore, backfill: dict[str, Any]) -> list[dict[str, Any]]:
    """The DAG's window writes between a backfill's creation and its completion (backfills of this
    module run one after the other, and a cleared run keeps its run_id, so time tells them apart)."""
    start = parse_time(backfill["created_at"])
    end = parse_time(backfill["completed_at"]) if backfill.get("completed_at") else None
    return [
        w
        for w in store.writes(dag_id=DAG_ID, target=TARGET)
        if w["written_at"] >= start and (end is None or w["written_at"] <= end)
    ]


def by_day(writes: list[dict[str, Any]]) -> dict[date, dict[str, Any]]:
    out: dict[date, dict[str, Any]] = {}
    for w in writes:
        day = w["window_start"].date()
        assert day not in out, f"two writes of {day} in one backfill: {out[day]} and {w}"
        out[day] = w
    return out


def assert_diff(write: dict[str, Any], day: date, before: str | None, after: str, changed: int) -> None:
    """The diff recorded for a window: rows matched by sale_id and amount_eur summed before/after."""
    diff = json.loads(write["diff"])
    rows_before = 0 if before is None else PER_DAY
    assert (diff["rows_before"], diff["rows_after"]) == (rows_before, PER_DAY), (day, diff)
    assert diff["added"] == (PER_DAY if before is None else 0), (day, diff)
    assert (diff["removed"], diff["changed"]) == (0, changed), (day, diff)
    assert diff["unchanged"] == (0 if before is None else PER_DAY - changed), (day, diff)
    amount = diff["measures"]["amount_eur"]
    before_sum = Decimal("0") if before is None else truth(before)[day][1]
    assert Decimal(str(amount["before"])) == before_sum, (day, amount)
    assert Decimal(str(amount["after"])) == truth(after)[day][1], (day, amount)


def dag_run_events(store: HistoryStore, event: str) -> list[dict[str, Any]]:
    return store.dag_runs(dag_id=DAG_ID, event=event)


def pause_delay(store: HistoryStore, pause: dict[str, Any]) -> timedelta:
    """From the run's end (the scheduler's `failed` or `success` event) to the listener's
    `backfill_paused`: the pause happens inside the hook's bounded wait, before the scheduler
    moves on."""
    ended = [
        e
        for event in ("failed", "success")
        for e in dag_run_events(store, event)
        if e["run_id"] == pause["run_id"] and e["at"] <= pause["at"]
    ]
    delay: timedelta = pause["at"] - max(e["at"] for e in ended)
    assert timedelta(0) <= delay < timedelta(seconds=HARD_LIMIT), delay
    return delay


# --------------------------------------------------------------------------------------------
# 1. The initial load, then the same corrective v1 -> v2 twice
# --------------------------------------------------------------------------------------------


def test_the_corrective_month_twice_gives_the_v2_truth_once(
    cluster: AirflowCluster, month: sa.Engine, store: HistoryStore
) -> None:
    guard_line = next(
        line
        for line in (REPO_ROOT / "dags" / "payouts.py").read_text().splitlines()
        if line.startswith("GUARD =")
    )
    assert guard_line in DAG_FILE.read_text(), "the e2e copy must declare the project DAG's guard"
    v1, v2 = truth("v1"), truth("v2")
    assert month_total(v1) != month_total(v2)

    load = run_to_completion(cluster, "v1 initial load", V1_LOAD, MONTH[0], MONTH[-1], max_active_runs=8)
    assert production(month) == v1
    loaded = by_day(writes_during(store, load))
    assert sorted(loaded) == MONTH
    for day, w in loaded.items():
        assert (w["status"], w["semantics"], w["policy_version"]) == ("written", "corrective", "v1")
        assert (w["run_type"], w["dataset_version"], w["ordinal"]) == ("backfill", 1, 1)
        assert_diff(w, day, before=None, after="v1", changed=0)

    # Twice: the first pass changes every window (v1 -> v2), the second finds each already v2 and
    # must change nothing (same checksum as the first, dataset_version kept, ordinal counted on). A
    # third pass ran that second case again (30 more task runs, 62 s of the module's 400): a rerun
    # compared with any record but the latest already differs from the second's expectations.
    passes: list[dict[date, dict[str, Any]]] = []
    for n in (1, 2):
        fix = run_to_completion(
            cluster, f"v2 corrective #{n}", V2_FIX, MONTH[0], MONTH[-1], max_active_runs=8
        )
        assert production(month) == v2, f"after corrective #{n}"
        assert month_total(production(month)) == month_total(v2)
        written = by_day(writes_during(store, fix))
        assert sorted(written) == MONTH, f"corrective #{n}: {len(written)} window diffs recorded"
        for day, w in written.items():
            assert (w["status"], w["semantics"], w["policy_version"]) == ("written", "corrective", "v2")
            assert w["dataset_version"] == 2, (n, day, w["dataset_version"])
            assert w["ordinal"] == n + 1
            if n == 1:
                assert w["checksum"] != loaded[day]["checksum"]
                assert_diff(w, day, before="v1", after="v2", changed=repriced(day))
            else:
                assert w["checksum"] == passes[0][day]["checksum"]
                assert_diff(w, day, before="v2", after="v2", changed=0)
        passes.append(written)

    print(
        f"\n[figures] month v1 {month_total(v1)}, v2 {month_total(v2)}; production after each corrective: "
        f"{month_total(v2)}; window diffs recorded per corrective: {[len(p) for p in passes]}"
    )


# --------------------------------------------------------------------------------------------
# 2. A replay reproduces what was paid first, and changes nothing
# --------------------------------------------------------------------------------------------


def test_a_replay_reproduces_the_v1_checksum_and_keeps_v2_in_production(
    cluster: AirflowCluster, month: sa.Engine, store: HistoryStore
) -> None:
    day = date(2026, 8, 25)
    first, *later = [
        w for w in store.writes(target=TARGET, status="written") if w["window_start"].date() == day
    ]
    assert (first["policy_version"], first["ordinal"]) == ("v1", 1), "test 1 ran first"
    assert later and {w["policy_version"] for w in later} == {"v2"}
    conf = {"semantics": "replay", "reason": "audit: reproduce what 2026-08-25 paid first"}
    replay = run_to_completion(cluster, "replay 2026-08-25", conf, day, day, max_active_runs=1)

    [record] = writes_during(store, replay)
    assert record["window_start"].date() == day
    assert (record["status"], record["semantics"], record["policy_version"]) == ("replayed", "replay", "v1")
    assert record["checksum"] == first["checksum"] != later[-1]["checksum"]
    assert record["message"] == f"replay reproduced the recorded checksum {first['checksum']}"
    assert production(month)[day] == truth("v2")[day]
    assert production(month) == truth("v2")


# --------------------------------------------------------------------------------------------
# 3. A threshold breached mid-month: the window and every later one keep their figures
# --------------------------------------------------------------------------------------------


def breach_plan(first: date) -> tuple[date, Decimal]:
    """For a corrective v1 -> v2 from `first` to month end, windows in order: the day whose change
    of amount_eur first exceeds all earlier ones' and is the range's largest, and a limit between."""
    v1, v2 = truth("v1"), truth("v2")
    delta = {day: abs(v2[day][1] - v1[day][1]) for day in MONTH if day >= first}
    largest = max(delta.values())
    breach = min(day for day, d in delta.items() if d == largest)
    below = max(d for day, d in delta.items() if day < breach)
    return breach, ((below + largest) / 2).quantize(CENT)


def test_a_mid_month_breach_stops_that_window_and_every_later_one_and_pauses_the_backfill(
    cluster: AirflowCluster, month: sa.Engine, store: HistoryStore
) -> None:
    first, last = date(2026, 8, 10), MONTH[-1]
    breach, limit = breach_plan(first)
    assert date(2026, 8, 12) <= breach <= date(2026, 8, 20), f"breach on {breach} is not mid-month"

    # Production back to v1 for the range, through the product (the initial-load semantics).
    run_to_completion(cluster, "v1 reset 08-10..08-30", V1_LOAD, first, last, max_active_runs=8)
    before = production(month)
    assert before == expected({d: "v1" if d >= first else "v2" for d in MONTH})

    conf = {**V2_FIX, "thresholds": {"max_measure_abs_change": {"amount_eur": float(limit)}}}
    started = time.monotonic()
    capped = create_backfill(cluster, conf, first, last, max_active_runs=1)  # windows in order
    try:

        def stopped() -> dict[str, Any] | None:
            b = get_backfill(cluster, capped["id"])
            return b if b["is_paused"] and runs(cluster)[breach]["state"] == "failed" else None

        paused = cluster.wait_for(
            "the breach to pause the backfill", stopped, timeout=MONTH_TIMEOUT, every=1.0
        )
        TIMINGS["breach"] = time.monotonic() - started
        print(f"\n[timing] capped corrective until paused: {TIMINGS['breach']:.1f} s")
        assert paused["completed_at"] is None  # paused, not finished: the rest waits for a decision
        time.sleep(3)  # the scheduler would have started the next window by now, were it not paused

        states = {day: runs(cluster)[day]["state"] for day in MONTH if day >= first}
        assert {d: s for d, s in states.items() if d < breach} == {d: "success" for d in states if d < breach}
        assert states[breach] == "failed"
        assert {d: s for d, s in states.items() if d > breach} == {d: "queued" for d in states if d > breach}

        # Production: earlier windows swapped to v2, the breaching one and every later one unchanged.
        assert production(month) == expected({d: "v2" if d < breach else "v1" for d in MONTH})

        # History: written windows before the breach, one refusal naming the threshold, nothing after.
        recorded = by_day(writes_during(store, {"created_at": capped["created_at"]}))
        assert sorted(recorded) == [d for d in MONTH if first <= d <= breach]
        assert {recorded[d]["status"] for d in recorded if d < breach} == {"written"}
        refusal = recorded[breach]
        assert refusal["status"] == "refused"
        assert f"max_measure_abs_change {float(limit):g}" in refusal["message"], refusal["message"]
        assert refusal["message"].startswith(
            f"stop condition: {breach.isoformat()}: amount_eur sum changed by"
        )
        assert_diff(refusal, breach, before="v1", after="v2", changed=repriced(breach))

        # The kill switch the breach tripped, and the pause the scheduler's listener recorded.
        [switch] = killswitch.active_switches(store, DAG_ID, backfill=True)
        assert (switch.scope, switch.scope_key) == ("backfill", DAG_ID)
        assert switch.reason is not None and switch.reason.startswith(f"guard breach on {breach.isoformat()}")
        [pause] = [
            e for e in dag_run_events(store, "backfill_paused") if e["at"] >= parse_time(capped["created_at"])
        ]
        assert pause["run_id"] == runs(cluster)[breach]["dag_run_id"]
        assert pause["source"] == "scheduler" and pause["run_type"] == "backfill"
        assert f"backfill {capped['id']} of {DAG_ID} paused" in pause["message"]
        assert f"max_measure_abs_change {float(limit):g}" in pause["message"]
        print(f"\n[timing] run ended -> backfill paused: {pause_delay(store, pause).total_seconds():.3f} s")
        print(
            f"\n[figures] threshold max_measure_abs_change amount_eur {limit}: breached on {breach} "
            f"(change {abs(truth('v2')[breach][1] - truth('v1')[breach][1])}); "
            f"{len(recorded) - 1} windows swapped, {len(states) - len(recorded) + 1} kept"
        )
    finally:
        cluster.call("PUT", f"{BACKFILLS}/{capped['id']}/cancel")


# --------------------------------------------------------------------------------------------
# 4. A kill switch set while a backfill runs: nothing is written after it
# --------------------------------------------------------------------------------------------


def test_a_kill_switch_set_during_a_backfill_stops_the_following_windows(
    cluster: AirflowCluster, month: sa.Engine, store: HistoryStore
) -> None:
    # The stop comes after the first window is written: the CLI's start-up (importing Airflow) is
    # seconds on a quiet machine but took longer than the eleven windows left on a loaded one.
    first, last, done_before_stop = date(2026, 8, 20), MONTH[-1], 1
    before = production(month)
    assert all(before[d] == truth("v1")[d] for d in MONTH if d >= first), "test 3 left these at v1"

    started = time.monotonic()
    running = create_backfill(cluster, V2_FIX, first, last, max_active_runs=1)
    try:
        since = {"created_at": running["created_at"]}
        cluster.wait_for(
            f"{done_before_stop} windows written",
            lambda: (
                len([w for w in writes_during(store, since) if w["status"] == "written"]) >= done_before_stop
            ),
            timeout=MONTH_TIMEOUT,
            every=0.5,
        )
        reason = "e2e: payouts team asked to stop the v2 backfill"
        stop = subprocess.run(
            [CLI, "stop", "--dag", DAG_ID, "--backfill", "--reason", reason],
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stop.returncode == 0, f"{stop.stdout}\n{stop.stderr}"
        [switch] = killswitch.active_switches(store, DAG_ID, backfill=True)
        assert (switch.scope, switch.reason) == ("backfill", reason)
        set_at = switch.set_at
        assert isinstance(set_at, datetime) and set_at.tzinfo is not None

        def paused_and_idle() -> dict[str, Any] | None:
            b = get_backfill(cluster, running["id"])
            if b["completed_at"] is not None and not b["is_paused"]:
                pytest.fail(f"the backfill completed before the kill switch set at {set_at} stopped it: {b}")
            states = [runs(cluster)[d]["state"] for d in MONTH if d >= first]
            return b if b["is_paused"] and "running" not in states else None

        paused = cluster.wait_for(
            "the kill switch to pause the backfill", paused_and_idle, MONTH_TIMEOUT, every=1.0
        )
        TIMINGS["kill switch"] = time.monotonic() - started
        print(f"\n[timing] backfill until stopped and paused: {TIMINGS['kill switch']:.1f} s")
        assert paused["completed_at"] is None

        recorded = writes_during(store, since)
        written = sorted(w["window_start"].date() for w in recorded if w["status"] == "written")
        assert {w["status"] for w in recorded} == {"written"}, "a kill switch refusal writes no record"
        # The writes are the first windows, in order; a window whose commit the switch came too late
        # for (it passed the check just before commit) is the one attempt already running at set_at.
        assert written == [first + timedelta(days=n) for n in range(len(written))]
        assert done_before_stop <= len(written) < (last - first).days + 1, "it finished before the stop"
        late = [w for w in recorded if w["written_at"] > set_at]
        attempts = store.attempts(dag_id=DAG_ID, task_id="write_payouts", event="running")
        started_after = {(a["run_id"], a["try_number"]) for a in attempts if a["at"] > set_at}
        assert not [w for w in late if (w["run_id"], w["try_number"]) in started_after]
        assert len(late) <= 1, f"writes after the kill switch was set at {set_at}: {late}"

        # The listener paused the backfill when the first run ended after the switch: either the
        # window in flight, which had passed its checks (success), or the next one, whose own check
        # refused to write (failed). Every later window never started.
        after = [d for d in MONTH if d >= first and d not in written]
        states = {d: runs(cluster)[d]["state"] for d in after}
        refused = [d for d in after if states[d] == "failed"]
        assert refused in ([], after[:1]), states
        assert {d: states[d] for d in after if d not in refused} == {
            d: "queued" for d in after if d not in refused
        }
        [pause] = [e for e in dag_run_events(store, "backfill_paused") if e["at"] >= set_at]
        assert (
            reason in pause["message"] and f"backfill {running['id']} of {DAG_ID} paused" in pause["message"]
        )
        if refused:
            refused_run = runs(cluster)[refused[0]]["dag_run_id"]
            failures = store.attempts(dag_id=DAG_ID, run_id=refused_run, event="failed")
            assert failures and failures[-1]["at"] > set_at
            assert "KillSwitchTripped" in failures[-1]["error"], failures[-1]
            assert reason in failures[-1]["error"], failures[-1]
            assert pause["run_id"] == refused_run and "ended failed" in pause["message"]
        else:
            assert pause["run_id"] == runs(cluster)[written[-1]]["dag_run_id"]
            assert "ended success" in pause["message"]
        print(f"\n[timing] run ended -> backfill paused: {pause_delay(store, pause).total_seconds():.3f} s")

        # Production: the windows written before the switch hold v2, every later one is unchanged.
        want = {d: before[d] for d in MONTH if d < first}
        want |= expected({d: "v2" if d in written else "v1" for d in MONTH if d >= first})
        assert production(month) == want
        print(
            f"\n[figures] kill switch set at {set_at.isoformat()} after {done_before_stop} windows: "
            f"{len(written)} written ({written[0]}..{written[-1]}), "
            f"refused {', '.join(d.isoformat() for d in refused) or 'none'}, "
            f"{len(after) - len(refused)} never started; paused after {pause['run_id']}; "
            f"late writes: {len(late)}"
        )
    finally:
        cluster.call("PUT", f"{BACKFILLS}/{running['id']}/cancel")
