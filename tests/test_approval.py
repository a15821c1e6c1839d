"""Human approval of a breached guarded window (on_breach="approve"), without a scheduler.

The operator runs in a real DAG object declaring the guard, on real warehouses, with a backfill
run's context; the history store is a fresh SQLite file. The only stand-in is Airflow's supervisor
channel, which a task process has and a test does not: it records the HITL request the operator
sends (the end-to-end test in tests/e2e/test_approval.py goes through the real one). The task
is then resumed as Airflow resumes it, by calling `approval_complete` with the event Airflow's
HITL detail produces. Expected figures come from the scenario's formula in pure Python.
"""

# ruff: noqa: F811  (the guard tests' fixtures, imported, are parameters here)
from __future__ import annotations

import uuid
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from airflow.sdk.exceptions import TaskAwaitingInput
from airflow.sdk.execution_time import task_runner

from airflow_idempotent.examples.payouts import table_checksum, window_totals
from airflow_idempotent.guard import GuardConfig, GuardRefusal, killswitch
from airflow_idempotent.guard.approval import StaleApproval
from airflow_idempotent.history import HistoryStore, approvals
from airflow_idempotent.history.report import window_history
from airflow_idempotent.identity import AttemptIdentity
from tests.test_guard_operator import (  # noqa: F401  (fixtures)
    CORRECTIVE,
    DAY,
    backfill,
    expensive,
    guarded,
    history,
    loaded,
    scheduled,
)
from tests.test_operators import amount, day_truth

APPROVE_GUARD = GuardConfig(cap=31, measures=["amount_eur"], on_breach="approve", approval_timeout_hours=2)


class Supervisor:
    """Records what a task sends its supervisor (the HITL detail), answering nothing."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, msg: Any) -> None:
        self.sent.append(msg)


class TI:
    """The task instance fields the operator reads: its id (the HITL detail's key) and its attempt."""

    def __init__(self, run_id: str) -> None:
        self.id = uuid.uuid4()
        self.dag_id = "guarded_overwrite"
        self.run_id = run_id
        self.task_id = "write"
        self.map_index = -1
        self.try_number = 1


@pytest.fixture
def supervisor(monkeypatch: pytest.MonkeyPatch) -> Supervisor:
    channel = Supervisor()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", channel, raising=False)
    return channel


def breached_backfill(n: int) -> dict[str, Any]:
    """A corrective v2 backfill of DAY whose max_changed_rows is one below what v2 changes."""
    conf = {**CORRECTIVE, "thresholds": {"max_changed_rows": len(expensive(DAY)) - 1}}
    ctx = backfill(DAY, n, **conf)
    ctx["task_instance"] = ctx["ti"] = TI(ctx["run_id"])
    return ctx


def park(ctx: dict[str, Any]) -> TaskAwaitingInput:
    with pytest.raises(TaskAwaitingInput) as parked:
        guarded(guard=APPROVE_GUARD, policy="v2").execute(ctx)
    return parked.value


def response(option: str, user: str = "alice", comment: str = "") -> dict[str, Any]:
    """The event Airflow resumes a HITL task with (HITLDetail.as_resume_event_payload)."""
    return {
        "chosen_options": [option],
        "params_input": {"comment": comment},
        "responded_at": datetime.now(timezone.utc),
        "responded_by_user": {"id": user, "name": user},
        "timedout": False,
    }


def measure_row(body: str) -> tuple[Decimal, ...]:
    """The amount_eur row of the request's Markdown (before, after, change), to the cent (SQLite
    sums in floating point)."""
    (row,) = [line for line in body.splitlines() if line.startswith("| amount_eur |")]
    return tuple(Decimal(cell.strip()).quantize(Decimal("0.01")) for cell in row.strip("|").split("|")[1:])


def identity(ctx: dict[str, Any]) -> AttemptIdentity:
    return AttemptIdentity.from_context(ctx, guarded(guard=APPROVE_GUARD))


def tables(engine: sa.Engine) -> set[str]:
    return {t.lower() for t in sa.inspect(engine).get_table_names()}


# ------------------------------------------------------------------------------ the declaration


def test_on_breach_and_its_timeout_are_validated_with_the_fix_named() -> None:
    with pytest.raises(GuardRefusal, match=r"on_breach must be one of 'refuse', 'approve', got 'ask'"):
        GuardConfig(on_breach="ask")  # type: ignore[arg-type]
    for hours in (0, -1, 24 * 31, True, "24"):
        with pytest.raises(GuardRefusal, match="approval_timeout_hours must be a number of hours > 0"):
            GuardConfig(on_breach="approve", approval_timeout_hours=hours)  # type: ignore[arg-type]
    with pytest.raises(GuardRefusal, match='on_breach="approve" with lookback=1'):
        GuardConfig(on_breach="approve", lookback=1)
    param = APPROVE_GUARD.param()
    parsed = GuardConfig.of_params(param)  # the DAG's declaration round-trips
    assert parsed is not None and (parsed.on_breach, parsed.approval_timeout_hours) == ("approve", 2)
    assert GuardConfig().on_breach == "refuse"


# ------------------------------------------------------------------------------ the decision


@pytest.mark.parametrize("warehouse", ["postgres", "mariadb", "sqlite", "duckdb"], indirect=True)
def test_approved_breach_swaps_exactly_the_diffed_rows_and_records_who_approved(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))  # v1 in production
    before = table_checksum(loaded.engine, "payouts")
    ctx = breached_backfill(2)
    parked = park(ctx)
    assert parked.method_name == "approval_complete" and parked.timeout.total_seconds() == 7200
    assert table_checksum(loaded.engine, "payouts") == before  # nothing swapped while waiting

    # the HITL request the task made for its own task instance
    (request,) = supervisor.sent
    changed = expensive(DAY)
    v1, v2 = day_truth(DAY, "v1"), day_truth(DAY, "v2")
    assert request.ti_id == ctx["task_instance"].id
    assert request.options == ["Approve", "Reject"] and request.defaults == ["Reject"]
    assert f"| 2000 | 2000 | 0 | 0 | {len(changed)} | {2000 - len(changed)} |" in request.body
    assert measure_row(request.body) == (v1[1], v2[1], v2[1] - v1[1])
    assert f"Sample changed keys: {', '.join(str(i) for i in changed[:10])}" in request.body
    pending = approvals.of_attempt(history, identity(ctx))
    assert pending is not None and pending.status == "pending" and pending.stage_rows == 2000
    assert pending.stage_table in tables(loaded.engine)  # kept, committed, outside the transaction

    out = guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(
        ctx, response("Approve", comment="v2 rates signed off")
    )
    assert window_totals(loaded.engine, "payouts", DAY) == v2
    assert out["approved_by"] == "alice" and out["diff"]["changed"] == len(changed)
    decided = approvals.of_attempt(history, identity(ctx))
    assert decided is not None and (decided.status, decided.decided_by, decided.comment) == (
        "approved",
        "alice",
        "v2 rates signed off",
    )
    assert decided.decided_at is not None
    write = history.writes(target="warehouse:payouts")[-1]
    assert write["status"] == "written" and write["message"] == "approved by alice: v2 rates signed off"
    assert write["dataset_version"] == 2
    assert pending.stage_table not in tables(loaded.engine)  # dropped once decided
    (shown,) = window_history(history)  # what `airflow-idempotent history` and its --json show
    (approval,) = shown["approvals"]
    assert approvals.describe(approval).startswith("approved by alice at ")
    assert approvals.describe(approval).endswith(f": v2 rates signed off ({ctx['run_id']}, try 1)")
    # scoped like every history read: a reader of other DAGs sees no approval of this one
    assert approvals.for_windows(history, ["warehouse:payouts"], frozenset({"other_dag"})) == {}
    assert len(approvals.for_windows(history, ["warehouse:payouts"], frozenset({"guarded_overwrite"}))) == 1


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
@pytest.mark.parametrize("how", ["reject", "timeout"])
def test_rejected_or_timed_out_breach_changes_nothing_and_only_a_timeout_trips_the_kill_switch(
    loaded: Any, history: HistoryStore, supervisor: Supervisor, how: str
) -> None:
    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    ctx = breached_backfill(2)
    park(ctx)
    pending = approvals.of_attempt(history, identity(ctx))
    assert pending is not None
    event = (
        response("Reject", user="bob", comment="rates not signed off")
        if how == "reject"
        # the scheduler's sweep: the default (Reject) written as the response, no user
        else {**response("Reject"), "responded_by_user": None, "params_input": {}, "timedout": True}
    )
    word = "rejected by bob" if how == "reject" else "timed out"
    said = "Only this window is refused" if how == "reject" else "kill switch of guarded_overwrite is on"
    with pytest.raises(GuardRefusal, match=f"was {word}.*{said}"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(ctx, event)
    assert table_checksum(loaded.engine, "payouts") == before
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v1")
    decided = approvals.of_attempt(history, identity(ctx))
    assert decided is not None
    assert decided.status == ("rejected" if how == "reject" else "timed_out")
    assert decided.decided_by == ("bob" if how == "reject" else None)
    refused = history.writes(target="warehouse:payouts")[-1]
    assert refused["status"] == "refused" and word in refused["message"]
    assert pending.stage_table not in tables(loaded.engine)
    other = backfill(date(2026, 8, 18), 3, **CORRECTIVE)
    if how == "timeout":
        with pytest.raises(killswitch.KillSwitchTripped):  # nobody decided: the rest writes nothing
            guarded(guard=APPROVE_GUARD, policy="v2").execute(other)
    else:  # a person refused this window only: the backfill's next window is written
        assert killswitch.active_switches(history, "guarded_overwrite", backfill=True) == []
        guarded(guard=APPROVE_GUARD, policy="v2").execute(other)
        assert window_totals(loaded.engine, "payouts", date(2026, 8, 18)) == day_truth(
            date(2026, 8, 18), "v2"
        )
    # a second resume of the same attempt finds nothing pending: it cannot swap
    with pytest.raises(GuardRefusal, match="no pending approval"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(ctx, response("Approve"))
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v1")


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_approval_of_data_that_changed_since_the_diff_is_refused(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    ctx = breached_backfill(2)
    park(ctx)
    first = (DAY - date(2026, 8, 1)).days * 2000 + 1
    with loaded.engine.begin() as conn:  # someone changes production's window after the diff
        conn.execute(
            sa.text("UPDATE payouts SET amount_eur = amount_eur + 1 WHERE sale_id = :i"), {"i": first}
        )
    changed = table_checksum(loaded.engine, "payouts")
    with pytest.raises(StaleApproval, match="production's window is now 2000 rows"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(ctx, response("Approve"))
    assert table_checksum(loaded.engine, "payouts") == changed  # nothing swapped
    assert window_totals(loaded.engine, "payouts", DAY) == (2000, day_truth(DAY)[1] + Decimal(1))
    decided = approvals.of_attempt(history, identity(ctx))
    assert decided is not None and decided.status == "stale" and decided.decided_by == "alice"
    assert amount(first, "v1") > 0


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_a_breach_under_on_breach_refuse_still_refuses_at_once(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    guarded().execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    with pytest.raises(GuardRefusal, match="max_changed_rows"):
        guarded(policy="v2").execute(breached_backfill(2))
    assert supervisor.sent == [] and table_checksum(loaded.engine, "payouts") == before
    assert not [t for t in tables(loaded.engine) if t.startswith("_idem_apr_")]


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_an_approval_does_not_override_a_kill_switch_set_while_it_waited(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    ctx = breached_backfill(2)
    park(ctx)
    pending = approvals.of_attempt(history, identity(ctx))
    assert pending is not None
    killswitch.set_switch(history, "global", None, "warehouse migration")
    with pytest.raises(killswitch.KillSwitchTripped, match="warehouse migration"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(ctx, response("Approve"))
    assert table_checksum(loaded.engine, "payouts") == before
    decided = approvals.of_attempt(history, identity(ctx))
    assert decided is not None and decided.status == "not_swapped" and decided.decided_by == "alice"
    assert pending.stage_table not in tables(loaded.engine)


@pytest.mark.parametrize("warehouse", ["postgres", "sqlite"], indirect=True)
def test_a_newer_attempt_supersedes_a_pending_approval_and_drops_its_kept_rows(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    """The parked task is cleared (or marked by hand) and runs again: its retry's diff is the one
    to decide on; the first attempt's kept rows would otherwise stay in the warehouse for ever."""
    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    first = breached_backfill(2)
    park(first)
    old = approvals.of_attempt(history, identity(first))
    assert old is not None and old.stage_table in tables(loaded.engine)
    retry = {**first, "ti": TI(first["run_id"])}
    retry["ti"].try_number = 2
    retry["task_instance"] = retry["ti"]
    park(retry)
    new = approvals.of_attempt(history, identity(retry))
    gone = approvals.of_attempt(history, identity(first))
    assert new is not None and new.status == "pending" and new.stage_table != old.stage_table
    assert gone is not None and gone.status == "superseded"
    assert gone.comment == f"superseded by {first['run_id']} try 2"
    kept = {t for t in tables(loaded.engine) if t.startswith("_idem_apr_")}
    assert kept == {new.stage_table}
    # a late answer to the first request swaps nothing and says which request to answer
    with pytest.raises(GuardRefusal, match="a newer attempt wrote that window"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(first, response("Approve"))
    assert table_checksum(loaded.engine, "payouts") == before
    guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(retry, response("Approve"))
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
    assert not [t for t in tables(loaded.engine) if t.startswith("_idem_apr_")]


@pytest.mark.parametrize("warehouse", ["postgres", "sqlite"], indirect=True)
def test_a_newer_attempt_that_fails_before_deciding_leaves_the_pending_approval_answerable(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    """The retry's write fails before it has a diff of its own (here its source table is gone):
    the first request stays pending with its kept rows, and its answer still swaps them in."""
    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    first = breached_backfill(2)
    park(first)
    old = approvals.of_attempt(history, identity(first))
    assert old is not None and old.stage_table in tables(loaded.engine)
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE sales RENAME TO sales_away"))
    retry = {**first, "ti": TI(first["run_id"])}
    retry["ti"].try_number = 2
    retry["task_instance"] = retry["ti"]
    with pytest.raises(sa.exc.DBAPIError):
        guarded(guard=APPROVE_GUARD, policy="v2").execute(retry)
    with loaded.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE sales_away RENAME TO sales"))
    still = approvals.of_attempt(history, identity(first))
    assert still is not None and still.status == "pending" and old.stage_table in tables(loaded.engine)
    assert approvals.of_attempt(history, identity(retry)) is None
    guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(first, response("Approve"))
    assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
    assert not [t for t in tables(loaded.engine) if t.startswith("_idem_apr_")]


# ------------------------------------------------------------------ a person's decisions, per window
DAY_1, DAY_2 = date(2026, 8, 19), date(2026, 8, 20)


def breached_day(day: date) -> dict[str, Any]:
    """One window of a two-day corrective v2 backfill whose threshold both days break."""
    most = min(len(expensive(DAY_1)), len(expensive(DAY_2))) - 1
    ctx = backfill(day, 2, **{**CORRECTIVE, "thresholds": {"max_changed_rows": most}})
    ctx["task_instance"] = ctx["ti"] = TI(ctx["run_id"])
    return ctx


@pytest.mark.parametrize("warehouse", ["postgres", "mariadb", "sqlite"], indirect=True)
@pytest.mark.parametrize("order", ["approve_first", "reject_first"])
def test_approving_one_window_and_rejecting_another_keeps_both_decisions(
    loaded: Any, history: HistoryStore, supervisor: Supervisor, order: str
) -> None:
    """The reviewer's case of the issue: day 1 approved, day 2 rejected a moment apart, resumed in
    either order: day 1 holds v2, day 2 v1, no kill switch, and history says the same."""
    for day in (DAY_1, DAY_2):
        guarded(guard=APPROVE_GUARD).execute(scheduled(day, 1))
    first, second = breached_day(DAY_1), breached_day(DAY_2)
    park(first)
    park(second)
    approve, reject = response("Approve", comment="v2 signed off"), response("Reject", user="bob")
    resumes = [(first, approve), (second, reject)]
    for ctx, event in resumes if order == "approve_first" else resumes[::-1]:
        if event is reject:
            with pytest.raises(GuardRefusal, match="Only this window is refused"):
                guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(ctx, event)
        else:
            guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(ctx, event)
    assert window_totals(loaded.engine, "payouts", DAY_1) == day_truth(DAY_1, "v2")
    assert window_totals(loaded.engine, "payouts", DAY_2) == day_truth(DAY_2, "v1")
    assert killswitch.active_switches(history, "guarded_overwrite", backfill=True) == []
    last = {w["window_label"]: w for w in history.writes(target="warehouse:payouts")}
    assert last[str(DAY_1)]["status"] == "written"
    assert last[str(DAY_1)]["message"] == "approved by alice: v2 signed off"
    assert last[str(DAY_2)]["status"] == "refused" and "rejected by bob" in last[str(DAY_2)]["message"]
    one, two = approvals.of_attempt(history, identity(first)), approvals.of_attempt(history, identity(second))
    assert one is not None and two is not None and (one.status, two.status) == ("approved", "rejected")
    assert not [t for t in tables(loaded.engine) if t.startswith("_idem_apr_")]


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_a_timeout_after_an_approval_stops_the_rest_but_not_the_approved_window(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    """Day 1 approved; day 2 then times out and trips the backfill's switch before day 1 resumes:
    day 1 is swapped (its approval came first) and says why beside the write; a window approved
    after the switch is not swapped, and history says so."""
    day_3 = date(2026, 8, 21)
    for day in (DAY_1, DAY_2, day_3):
        guarded(guard=APPROVE_GUARD).execute(scheduled(day, 1))
    first, second, third = breached_day(DAY_1), breached_day(DAY_2), breached_day(day_3)
    for ctx in (first, second, third):
        park(ctx)
    approved = response("Approve")  # responded now, before the timeout below
    timeout = {**response("Reject"), "responded_by_user": None, "params_input": {}, "timedout": True}
    with pytest.raises(GuardRefusal, match="timed out"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(second, timeout)
    (switch,) = killswitch.active_switches(history, "guarded_overwrite", backfill=True)
    guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(first, approved)
    late = response("Approve", user="carol")  # responded after the switch was set
    assert late["responded_at"] > switch.set_at
    with pytest.raises(killswitch.KillSwitchTripped, match="before swapping an approved window"):
        guarded(guard=APPROVE_GUARD, policy="v2").approval_complete(third, late)
    assert window_totals(loaded.engine, "payouts", DAY_1) == day_truth(DAY_1, "v2")
    assert window_totals(loaded.engine, "payouts", DAY_2) == day_truth(DAY_2, "v1")
    assert window_totals(loaded.engine, "payouts", day_3) == day_truth(day_3, "v1")
    last = {w["window_label"]: w for w in history.writes(target="warehouse:payouts")}
    assert last[str(DAY_1)]["status"] == "written"
    assert last[str(DAY_1)]["message"].startswith(
        "approved by alice (swapped: approved before the kill switch"
    )
    assert last[str(day_3)]["status"] == "refused"
    assert last[str(day_3)]["message"].startswith("approved by carol but NOT swapped (not_swapped): ")
    three = approvals.of_attempt(history, identity(third))
    assert three is not None and three.status == "not_swapped" and "kill switch" in (three.comment or "")


# ------------------------------------------------------- an approved swap that fails, then its retry


def hold_the_window(op: Any) -> Any:
    """Another writer holding DAY's (payouts, window) lock: the approved swap, with lock_timeout=1,
    fails with Airflow's retryable LockTimeoutError, a real failure that passes."""
    from airflow_idempotent.hooks.warehouse import WarehouseHook
    from airflow_idempotent.window import Window

    start = pendulum.datetime(DAY.year, DAY.month, DAY.day, tz="UTC")
    adapter = WarehouseHook(conn_id=op.conn_id).adapter
    return adapter.locked_transaction("payouts", Window(start, start.add(days=1), "test"), 5)


def try_of(ctx: dict[str, Any], number: int, max_tries: int) -> dict[str, Any]:
    """The context of try `number` of the task instance of `ctx` (Airflow retries up to `max_tries`)."""
    ti = TI(ctx["run_id"])
    ti.try_number, ti.max_tries = number, max_tries  # type: ignore[attr-defined]
    return {**ctx, "ti": ti, "task_instance": ti}


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
@pytest.mark.parametrize("retry_policy", ["v2", "v1"], ids=["same-code", "other-code"])
def test_an_approved_swap_that_fails_transiently_is_swapped_by_the_retry_without_asking_again(
    loaded: Any, history: HistoryStore, supervisor: Supervisor, retry_policy: str
) -> None:
    """Issue 31: the reviewer approves, the swap then fails for a reason that passes (another writer
    holds the window past lock_timeout) and Airflow retries. The retry running the approved code
    swaps exactly the approved rows without a new request; a retry running other code (another
    policy: another fingerprint) does not carry the approval: it diffs again (v1 over v1 changes
    nothing, so it writes without a breach) and the approved rows are dropped."""
    from airflow.exceptions import AirflowException

    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    first = try_of(breached_backfill(2), 1, max_tries=1)
    park(first)
    pending = approvals.of_attempt(history, identity(first))
    assert pending is not None and len(supervisor.sent) == 1
    op = guarded(guard=APPROVE_GUARD, policy="v2", lock_timeout=1)
    with hold_the_window(op), pytest.raises(AirflowException, match="lock"):
        op.approval_complete(first, response("Approve", comment="signed off"))
    assert table_checksum(loaded.engine, "payouts") == before  # nothing swapped
    waiting = approvals.of_attempt(history, identity(first))
    assert waiting is not None and (waiting.status, waiting.decided_by, waiting.comment) == (
        "swap_retry",
        "alice",
        "signed off",
    )
    assert pending.stage_table in tables(loaded.engine)  # kept for the retry

    retry = try_of(first, 2, max_tries=1)
    out = guarded(guard=APPROVE_GUARD, policy=retry_policy).execute(retry)  # no TaskAwaitingInput
    assert len(supervisor.sent) == 1  # nobody is asked again
    assert approvals.of_attempt(history, identity(retry)) is None
    assert not [t for t in tables(loaded.engine) if t.startswith("_idem_apr_")]
    decided = approvals.of_attempt(history, identity(first))
    write = history.writes(target="warehouse:payouts", try_number=2)[-1]
    assert write["status"] == "written"
    if retry_policy == "v2":
        assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
        assert out["approved_by"] == "alice" and out["diff"]["changed"] == len(expensive(DAY))
        assert decided is not None and (decided.status, decided.comment) == ("approved", "signed off")
        assert (
            write["message"]
            == "approved by alice: signed off (try 1; swapped by try 2 after its swap failed)"
        )
    else:
        assert table_checksum(loaded.engine, "payouts") == before  # v1 again: unchanged
        assert decided is not None and decided.status == "not_swapped"


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
def test_an_approved_swap_that_fails_on_the_last_try_drops_the_approved_rows(
    loaded: Any, history: HistoryStore, supervisor: Supervisor
) -> None:
    """No retry left (max_tries 0): nothing would swap the kept rows later, so they are dropped
    and the approval is not_swapped, as before."""
    from airflow.exceptions import AirflowException

    guarded(guard=APPROVE_GUARD).execute(scheduled(DAY, 1))
    before = table_checksum(loaded.engine, "payouts")
    last = try_of(breached_backfill(2), 1, max_tries=0)
    park(last)
    pending = approvals.of_attempt(history, identity(last))
    assert pending is not None
    op = guarded(guard=APPROVE_GUARD, policy="v2", lock_timeout=1)
    with hold_the_window(op), pytest.raises(AirflowException, match="lock"):
        op.approval_complete(last, response("Approve"))
    assert table_checksum(loaded.engine, "payouts") == before
    decided = approvals.of_attempt(history, identity(last))
    assert decided is not None and decided.status == "not_swapped"
    assert pending.stage_table not in tables(loaded.engine)


@pytest.mark.parametrize("warehouse", ["postgres"], indirect=True)
@pytest.mark.parametrize(
    ("switch_set", "retry_policy"),
    [("after", "v2"), ("before", "v2"), ("after", "v1")],
    ids=["switch-after-approval", "switch-before-approval", "switch-after-approval-other-code"],
)
def test_the_retry_of_an_approved_swap_counts_only_a_kill_switch_set_before_the_approval(
    loaded: Any, history: HistoryStore, supervisor: Supervisor, switch_set: str, retry_policy: str
) -> None:
    """Issue 31: the approved swap fails for a reason that passes (the window's lock held past
    lock_timeout), then the backfill's kill switch is set (another window's timeout, the Stop
    action) before Airflow's retry runs. The retry carrying the approval swaps it: the switch came
    after the person decided, as for the approval's first swap. A switch set before the approval
    still stops it (not swapped, its kept rows dropped, history says so beside the failed task);
    and a retry whose code is not the approved one writes nothing of its own under the switch."""
    from airflow.exceptions import AirflowException

    other = date(2026, 8, 18)  # a window of the backfill nobody approved
    for day in (DAY, other):
        guarded(guard=APPROVE_GUARD).execute(scheduled(day, 1))
    before = table_checksum(loaded.engine, "payouts")
    first = try_of(breached_backfill(2), 1, max_tries=1)
    park(first)
    pending = approvals.of_attempt(history, identity(first))
    assert pending is not None
    if switch_set == "before":
        killswitch.set_switch(history, "backfill", "guarded_overwrite", "day 2 timed out")
    approve = response("Approve", comment="signed off")  # Airflow records the response now
    op = guarded(guard=APPROVE_GUARD, policy="v2", lock_timeout=1)
    with hold_the_window(op), pytest.raises(AirflowException, match="lock"):
        op.approval_complete(first, approve)  # the lock fails first: carried to the retry
    waiting = approvals.of_attempt(history, identity(first))
    assert waiting is not None and waiting.status == "swap_retry"
    assert waiting.decided_at == approve["responded_at"]  # the approval's recorded time
    if switch_set == "after":
        killswitch.set_switch(history, "backfill", "guarded_overwrite", "day 2 timed out")
    (switch,) = killswitch.active_switches(history, "guarded_overwrite", backfill=True)
    assert (switch.set_at > approve["responded_at"]) == (switch_set == "after")
    assert table_checksum(loaded.engine, "payouts") == before

    retry = try_of(first, 2, max_tries=1)  # the last try: a failure is final
    retry_op = guarded(guard=APPROVE_GUARD, policy=retry_policy)
    decided_write = history.writes(target="warehouse:payouts", try_number=2)
    if switch_set == "after" and retry_policy == "v2":
        out = retry_op.execute(retry)
        assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v2")
        assert out["approved_by"] == "alice" and out["diff"]["changed"] == len(expensive(DAY))
        decided = approvals.of_attempt(history, identity(first))
        assert decided is not None and (decided.status, decided.comment) == ("approved", "signed off")
        (write,) = history.writes(target="warehouse:payouts", try_number=2)
        assert write["status"] == "written" and write["row_count"] == 2000
        assert write["message"].startswith(
            "approved by alice: signed off (try 1; swapped by try 2 after its swap failed) "
            "(swapped: approved before the kill switch on backfill guarded_overwrite"
        )
        # the switch still stops every window nobody approved before it
        with pytest.raises(killswitch.KillSwitchTripped, match="before writing"):
            guarded(guard=APPROVE_GUARD, policy="v2").execute(backfill(other, 3, **CORRECTIVE))
        assert window_totals(loaded.engine, "payouts", other) == day_truth(other, "v1")
    elif retry_policy == "v2":  # the switch came before the approval: it covers it
        with pytest.raises(killswitch.KillSwitchTripped, match="before swapping an approved window"):
            retry_op.execute(retry)
        assert table_checksum(loaded.engine, "payouts") == before
        assert window_totals(loaded.engine, "payouts", DAY) == day_truth(DAY, "v1")
        decided = approvals.of_attempt(history, identity(first))
        assert decided is not None and decided.status == "not_swapped"
        assert "kill switch on backfill guarded_overwrite" in (decided.comment or "")
        (write,) = history.writes(target="warehouse:payouts", try_number=2)
        assert write["status"] == "refused"
        assert write["message"].startswith("approved by alice but NOT swapped (not_swapped): ")
    else:  # other code: not the approved one, so not carried, and under the switch it writes nothing
        with pytest.raises(killswitch.KillSwitchTripped, match="before writing"):
            retry_op.execute(retry)
        assert table_checksum(loaded.engine, "payouts") == before
        decided = approvals.of_attempt(history, identity(first))
        assert decided is not None and decided.status == "not_swapped"
        assert history.writes(target="warehouse:payouts", try_number=2) == []
    assert decided_write == []  # nothing of try 2 was recorded before it ran
    assert len(supervisor.sent) == 1  # nobody was asked again
    assert approvals.of_attempt(history, identity(retry)) is None
    assert not [t for t in tables(loaded.engine) if t.startswith("_idem_apr_")]
