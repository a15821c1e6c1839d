"""Side effects at most once: the effect ledger against real peers on loopback.

The peers (tests/peers.py) are a payments API honouring Idempotency-Key and an SMTP server
counting messages; file deliveries land in a directory the test inspects. Crashes are real: a
child process SIGKILLs itself before the claim, between the claim and the call, between the call
and the ledger's commit, or after the commit; then nine more attempts run. The peers must see
exactly one effect per identity. The ledger runs on SQLite and on a fresh PostgreSQL database.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from airflow_idempotent.cli.effects import register, run
from airflow_idempotent.effects import (
    Effect,
    EffectError,
    EffectIdentity,
    EffectNotPerformed,
    EffectPendingError,
    EmailEffect,
    EmailEffectOperator,
    FileDeliveryEffect,
    FileDeliveryEffectOperator,
    HttpPostEffect,
    Ledger,
    effects_for_windows,
    once,
    perform,
)
from airflow_idempotent.effects.builtin import HttpOutcomeUnknown
from airflow_idempotent.effects.identity import Claimant
from airflow_idempotent.errors import WindowError
from airflow_idempotent.examples.bank_file import (
    bank_file_name,
    check_complete,
    parse_header,
    render_bank_file,
)
from airflow_idempotent.examples.payouts import create_payouts, create_sales, simulate_crash
from airflow_idempotent.guard import GuardRefusal
from airflow_idempotent.window import window_from_context
from tests.conftest import (
    MARIADB_HOST,
    MARIADB_PORT,
    MARIADB_USER,
    PG_HOST,
    PG_PORT,
    PG_USER,
    _admin_engine,
    _conn_json,
    _fresh_name,
)
from tests.peers import HttpPeer, SmtpPeer, header

DAY = date(2026, 8, 25)
AT = pendulum.datetime(2026, 8, 25, tz="UTC")
DAG_ID = "payouts_bank_file"
TASK_ID = "deliver"
SMTP_CONN = "smtp_test"
KILL_POINTS = ("before_claim", "after_claim", "after_call", "after_commit")
#: Declared reruns as the backfill guard accepts them (a reason; a policy version when corrective).
CORRECTIVE = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
REPLAY = {"semantics": "replay", "reason": "incident: reproduce what was sent"}
RECONCILE = {"semantics": "reconcile", "reason": "repair what is missing"}


# --------------------------------------------------------------------------------------- fixtures
def ctx(
    try_number: int = 1,
    run_id: str = "scheduled__2026-08-25T00:00:00+00:00",
    conf: dict[str, Any] | None = None,
    day: Any = AT,
    task_id: str = TASK_ID,
) -> dict[str, Any]:
    """A task's context as Airflow hands it in: task instance, DAG run (with conf), logical date."""
    ti = SimpleNamespace(dag_id=DAG_ID, run_id=run_id, task_id=task_id, map_index=-1, try_number=try_number)
    dag_run = SimpleNamespace(run_type="scheduled", conf=conf or {}, run_id=run_id)
    return {
        "ti": ti,
        "dag_run": dag_run,
        "logical_date": day,
        "data_interval_start": day,
        "data_interval_end": day,
    }


@dataclass
class Store:
    kind: str
    url: str
    ledger: Ledger

    def fresh(self) -> Ledger:
        return Ledger(sa.create_engine(self.url, poolclass=NullPool))


@pytest.fixture(scope="module")
def ledger_pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the ledger of this module (the warehouse fixtures drop theirs)."""
    db = _fresh_name()
    admin = _admin_engine(
        "postgres", f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres?connect_timeout=5"
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
    try:
        yield f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{db}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="module")
def ledger_mariadb_url() -> Iterator[str]:
    """A fresh MariaDB database for the ledger of this module."""
    db = _fresh_name()
    admin = _admin_engine(
        "mariadb", f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/?connect_timeout=5"
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4"))
    try:
        yield f"mysql+pymysql://{MARIADB_USER}@{MARIADB_HOST}:{MARIADB_PORT}/{db}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{db}`"))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The history store holding the ledger: a fresh SQLite file, or this module's fresh PostgreSQL
    or MariaDB database (emptied before each test)."""
    kind: str = request.param
    if kind == "sqlite":
        path = tmp_path / "history.db"
        url = f"sqlite:///{path}"
        conn = json.dumps({"conn_type": "sqlite", "host": str(path)})
    else:
        url = request.getfixturevalue(f"ledger_{'pg' if kind == 'postgres' else kind}_url")
        conn = _conn_json(kind, url)
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", conn)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    ledger = Ledger(sa.create_engine(url, poolclass=NullPool))
    ledger.migrate()
    with ledger.engine.begin() as c:
        c.execute(sa.text("DELETE FROM idem_effect_event"))
        c.execute(sa.text("DELETE FROM idem_effect"))
    try:
        yield Store(kind, url, ledger)
    finally:
        ledger.engine.dispose()


@pytest.fixture
def smtp(monkeypatch: pytest.MonkeyPatch) -> Iterator[SmtpPeer]:
    with SmtpPeer() as peer:
        monkeypatch.setenv(f"AIRFLOW_CONN_{SMTP_CONN.upper()}", peer.conn_json())
        yield peer


def http_effect(peer: HttpPeer, **kwargs: Any) -> HttpPostEffect:
    options: dict[str, Any] = {"lookup_url": f"{peer.url}/payments/by-key/{{key}}"}
    options.update(kwargs)
    return HttpPostEffect(
        name="payment", url=f"{peer.url}/payments", json={"amount_eur": "299730.00"}, **options
    )


def email_effect(**kwargs: Any) -> EmailEffect:
    return EmailEffect(
        name="notify",
        to="payouts-ops@example.com",
        subject="Payouts 2026-08-25: 2,000 rows, 299,730.00 EUR",
        html_content="<p>2,000 payouts, 299,730.00 EUR</p>",
        smtp_conn_id=SMTP_CONN,
        **kwargs,
    )


BANK_BYTES = b"# payouts bank file;window_start=2026-08-25\nsale_id\n48001\n"


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="airflow-idempotent")
    register(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(argv))


# --------------------------------------------------------------------------------------- identity
def test_identity_key_is_a_stable_hash_of_dag_task_window_name_and_business_key() -> None:
    window = window_from_context(ctx(), "day")
    identity = EffectIdentity.of(DAG_ID, TASK_ID, window, "payout-file", "v1")
    canonical = json.dumps(
        {
            "dag_id": DAG_ID,
            "effect": "payout-file",
            "key": "v1",
            "task_id": TASK_ID,
            "window": ["2026-08-25T00:00:00+00:00", "2026-08-26T00:00:00+00:00"],
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    assert identity.key == "idem-" + hashlib.sha256(canonical.encode()).hexdigest()
    assert identity.idempotency_key(1) == identity.key
    assert identity.idempotency_key(2) == identity.key + "-g2"
    # the run, the try and the zone the window is read in are not part of the identity
    paris = window_from_context(ctx(7, run_id="manual__x"), "day", timezone="Europe/Paris")
    assert (
        EffectIdentity.of(DAG_ID, TASK_ID, paris, "payout-file", "v1").key != identity.key
    )  # other instants
    assert (
        EffectIdentity.of(DAG_ID, TASK_ID, window_from_context(ctx(7), "day"), "payout-file", "v1")
        == identity
    )
    others = {
        EffectIdentity.of("other_dag", TASK_ID, window, "payout-file", "v1").key,
        EffectIdentity.of(DAG_ID, "other_task", window, "payout-file", "v1").key,
        EffectIdentity.of(
            DAG_ID, TASK_ID, window_from_context(ctx(day=AT.add(days=1)), "day"), "payout-file", "v1"
        ).key,
        EffectIdentity.of(DAG_ID, TASK_ID, window, "notify", "v1").key,
        EffectIdentity.of(DAG_ID, TASK_ID, window, "payout-file", "v2").key,
        EffectIdentity.of(DAG_ID, TASK_ID, window, "payout-file", None).key,
    }
    assert identity.key not in others and len(others) == 6
    # a structured business key is canonical JSON: the order of a dict does not matter
    a = EffectIdentity.of(DAG_ID, TASK_ID, window, "x", {"b": 1, "a": 2}).key
    assert a == EffectIdentity.of(DAG_ID, TASK_ID, window, "x", {"a": 2, "b": 1}).key


def test_the_window_never_comes_from_the_clock(store: Store) -> None:
    no_date = {"ti": ctx()["ti"], "dag_run": ctx()["dag_run"]}
    with pytest.raises(WindowError, match="no logical date"), once("x", context=no_date, ledger=store.ledger):
        pass
    assert store.ledger.entries() == []


# --------------------------------------------------------------------------------------- crashes
def _crash(point: str, effect: Effect, url: str) -> None:
    """Attempt 1 in a child process that SIGKILLs itself at `point`."""

    def kill() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def child() -> None:
        ledger = Ledger(sa.create_engine(url, poolclass=NullPool))
        real_claim, real_finish, real_perform = Ledger.claim_new, Ledger.finish, type(effect).perform
        if point == "before_claim":

            def claim(self: Ledger, *a: Any, **k: Any) -> bool:
                kill()
                return False

            Ledger.claim_new = claim  # type: ignore[method-assign]
        elif point == "after_claim":

            def claim(self: Ledger, *a: Any, **k: Any) -> bool:
                result = real_claim(self, *a, **k)
                kill()
                return result

            Ledger.claim_new = claim  # type: ignore[method-assign]
        elif point == "after_call":

            def call(self: Any, c: Any) -> Any:
                result = real_perform(self, c)
                kill()
                return result

            type(effect).perform = call  # type: ignore[method-assign,assignment]
        else:

            def finish(self: Ledger, entry: Any, state: Any, **k: Any) -> bool:
                result = real_finish(self, entry, state, **k)
                if state == "done":
                    kill()
                return result

            Ledger.finish = finish  # type: ignore[method-assign]
        perform(effect, context=ctx(1), granularity="day", ledger=ledger, wait=5)
        os._exit(0)  # not killed: the exit code makes the test fail

    proc = multiprocessing.get_context("fork").Process(target=child)
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL, f"the child was not killed at {point}: exit {proc.exitcode}"


def _retries(
    effect: Effect, store: Store, decide: Callable[[EffectPendingError], None] | None = None
) -> list[str]:
    """Attempts 2..10; a pending effect the target cannot be asked about is decided once by `decide`."""
    statuses: list[str] = []
    for n in range(2, 11):
        try:
            statuses.append(
                perform(effect, context=ctx(n), granularity="day", ledger=store.ledger, wait=5).status
            )
        except EffectPendingError as err:
            statuses.append("pending")
            assert "airflow-idempotent effects resolve --key idem-" in str(err)
            assert "Nothing was sent by this attempt" in str(err)
            assert decide is not None
            decide(err)
    return statuses


EXPECTED = {
    "before_claim": ["performed"] + ["skipped"] * 8,
    "after_claim": ["performed"] + ["skipped"] * 8,  # reconciled: the target never saw the key
    "after_call": ["reconciled"] + ["skipped"] * 8,  # reconciled: the target has the key
    "after_commit": ["skipped"] * 9,
}


@pytest.mark.parametrize("point", KILL_POINTS)
def test_http_post_ten_attempts_with_a_crash_one_payment(store: Store, point: str) -> None:
    with HttpPeer() as peer:
        effect = http_effect(peer)
        _crash(point, effect, store.url)
        assert peer.effects == (0 if point in ("before_claim", "after_claim") else 1)
        assert _retries(effect, store) == EXPECTED[point]
        assert peer.effects == 1 and len(peer.posts) == 1  # exactly one request ever reached the API
        (entry,) = store.ledger.entries()
        assert entry.state == "done" and peer.posts == [entry.idempotency_key]
        assert entry.reference == peer.payments[entry.idempotency_key]["id"] == "pay_0001"


@pytest.mark.parametrize("point", KILL_POINTS)
def test_email_ten_attempts_with_a_crash_one_message(store: Store, smtp: SmtpPeer, point: str) -> None:
    effect = email_effect()
    _crash(point, effect, store.url)

    def human_checks_the_mailbox(err: EffectPendingError) -> None:
        key = str(err).split("--key ", 1)[1].split()[0]
        received = [mid for mid in smtp.message_ids() if key in mid]
        if received:
            assert cli("effects", "resolve", "--key", key, "--as", "done", "--reference", received[0]) == 0
        else:
            assert (
                cli("effects", "resolve", "--key", key, "--as", "failed", "--reason", "not in the mailbox")
                == 0
            )

    statuses = _retries(effect, store, human_checks_the_mailbox)
    expected = {
        "before_claim": ["performed"] + ["skipped"] * 8,
        "after_claim": ["pending", "performed"] + ["skipped"] * 7,
        "after_call": ["pending"] + ["skipped"] * 8,
        "after_commit": ["skipped"] * 9,
    }
    assert statuses == expected[point]
    (entry,) = store.ledger.entries()
    message_id = f"<{entry.idempotency_key}@example.com>"
    assert smtp.effects == 1 and smtp.message_ids() == {message_id: 1}
    assert entry.state == "done" and entry.reference == message_id


@pytest.mark.parametrize("point", KILL_POINTS)
def test_file_delivery_ten_attempts_with_a_crash_one_delivery(
    store: Store, tmp_path: Path, point: str
) -> None:
    outbox = tmp_path / "outbox"
    effect = FileDeliveryEffect("bank-file", outbox, "payouts-2026-08-25.csv", BANK_BYTES)
    _crash(point, effect, store.url)
    seen: set[tuple[int, int]] = set()
    dest = outbox / "payouts-2026-08-25.csv"
    if dest.exists():
        seen.add((dest.stat().st_ino, dest.stat().st_mtime_ns))
    statuses: list[str] = []
    for _ in range(9):
        statuses += _retries_once(effect, store, len(statuses) + 2)
        if dest.exists():
            seen.add((dest.stat().st_ino, dest.stat().st_mtime_ns))
    assert statuses == EXPECTED[point]
    assert len(seen) == 1, "the file was written more than once"
    assert sorted(p.name for p in outbox.iterdir()) == ["payouts-2026-08-25.csv"]  # no temporary left
    assert dest.read_bytes() == BANK_BYTES
    (entry,) = store.ledger.entries()
    assert entry.state == "done"
    assert entry.reference == f"{dest}#sha256={hashlib.sha256(BANK_BYTES).hexdigest()}"


def _retries_once(effect: Effect, store: Store, n: int) -> list[str]:
    return [perform(effect, context=ctx(n), granularity="day", ledger=store.ledger, wait=5).status]


# --------------------------------------------------------------------------------------- concurrency
@pytest.mark.parametrize(
    "wait, expected", [(10.0, ["performed", "skipped"]), (0.3, ["EffectBusyError", "performed"])]
)
def test_two_concurrent_attempts_one_payment(store: Store, wait: float, expected: list[str]) -> None:
    """A zombie and its retry at once: one claims and calls; the other waits, then skips, or gives up."""
    with HttpPeer(delay=1.0) as peer:
        effect = http_effect(peer)
        barrier = threading.Barrier(2)
        results: dict[int, str] = {}

        def attempt(i: int) -> None:
            ledger = store.fresh()
            barrier.wait()
            try:
                context = ctx(1, run_id=f"run_{i}")
                results[i] = perform(
                    effect, context=context, granularity="day", ledger=ledger, wait=wait
                ).status
            except Exception as err:
                results[i] = type(err).__name__
                assert "another live attempt" in str(err)

        threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(results.values()) == expected
        assert peer.effects == 1 and len(peer.posts) == 1
    (entry,) = store.ledger.entries()
    assert entry.state == "done" and entry.attempt == 1


def test_the_unique_identity_lets_exactly_one_claim_win(store: Store) -> None:
    """Without any lock: eight simultaneous inserts of one identity, one row, one winner."""
    identity = EffectIdentity.of(DAG_ID, TASK_ID, window_from_context(ctx(), "day"), "payment", "k")
    barrier = threading.Barrier(8)
    won: list[bool] = []

    def claim(i: int) -> None:
        ledger = store.fresh()
        barrier.wait()
        won.append(ledger.claim_new(identity, Claimant.here(run_id=f"run_{i}", try_number=1)))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(won) == [False] * 7 + [True]
    assert len(store.ledger.entries()) == 1


# --------------------------------------------------------------------------------------- reruns, backfills
def test_a_rerun_with_another_business_key_is_a_new_effect(store: Store) -> None:
    with HttpPeer() as peer:
        effect = http_effect(peer)
        first = perform(effect, "batch-1", context=ctx(1), granularity="day", ledger=store.ledger)
        rerun = perform(
            effect, "batch-1", context=ctx(1, run_id="manual__rerun"), granularity="day", ledger=store.ledger
        )
        other = perform(
            effect, "batch-2", context=ctx(1, run_id="manual__rerun"), granularity="day", ledger=store.ledger
        )
        assert (first.status, rerun.status, other.status) == ("performed", "skipped", "performed")
        assert rerun.reference == first.reference and rerun.idempotency_key == first.idempotency_key
        assert other.idempotency_key != first.idempotency_key
        assert peer.effects == 2 and peer.posts == [first.idempotency_key, other.idempotency_key]


def test_a_corrective_backfill_never_resends_by_default_and_records_it(store: Store) -> None:
    with HttpPeer() as peer:
        effect = http_effect(peer)
        first = perform(effect, "v1", context=ctx(1), granularity="day", ledger=store.ledger)

        corrective = ctx(1, run_id="backfill__v2", conf=CORRECTIVE)
        again = perform(effect, "v1", context=corrective, granularity="day", ledger=store.ledger)
        new_key = perform(effect, "v2", context=corrective, granularity="day", ledger=store.ledger)
        assert (again.status, new_key.status) == ("skipped", "suppressed")
        assert peer.effects == 1
        done = store.ledger.get(first.identity_key)
        assert done is not None and done.state == "done"
        assert (
            done.decision == "corrective backfill run backfill__v2 (resend_effects=false): done, not re-sent"
        )
        suppressed = store.ledger.get(new_key.identity_key)
        assert suppressed is not None and suppressed.state == "suppressed"
        assert "resend_effects=false): a new effect, not sent" in (suppressed.decision or "")
        assert [e["event"] for e in store.ledger.events(first.identity_key)][-1] == "decision"

        # a replay never sends either
        replay = ctx(1, run_id="replay__incident", conf=REPLAY)
        assert (
            perform(effect, "v1", context=replay, granularity="day", ledger=store.ledger).status == "skipped"
        )
        assert peer.effects == 1

        # declared re-send: a new generation with a new key, once per run, the old reference kept
        resend = ctx(1, run_id="backfill__v2_resend", conf={**CORRECTIVE, "resend_effects": True})
        sent = perform(effect, "v1", context=resend, granularity="day", ledger=store.ledger)
        assert (sent.status, sent.generation) == ("performed", 2)
        assert sent.idempotency_key == first.idempotency_key + "-g2"
        retry = perform(effect, "v1", context=ctx(2, **_run(resend)), granularity="day", ledger=store.ledger)
        assert (retry.status, retry.generation) == ("skipped", 2)
        assert peer.effects == 2 and peer.posts == [first.idempotency_key, sent.idempotency_key]
        entry = store.ledger.get(first.identity_key)
        assert entry is not None
        assert "re-sent as generation 2" in (entry.decision or "")
        assert entry.previous_generations[0]["reference"] == first.reference == "pay_0001"

        # resend_effects without declaring a corrective backfill is refused before anything happens
        bad = ctx(1, run_id="manual__oops", conf={"resend_effects": True})
        with pytest.raises(EffectError, match="only a corrective backfill re-sends"):
            perform(effect, "v1", context=bad, granularity="day", ledger=store.ledger)
        assert peer.effects == 2


def test_a_replay_sends_nothing_not_even_what_never_went_out(store: Store) -> None:
    """replay reproduces what ran and changes nothing outside: no effect is sent, whatever its state."""
    with HttpPeer() as peer:
        effect = http_effect(peer)
        perform(effect, "done", context=ctx(1), granularity="day", ledger=store.ledger)
        peer.fail_next.append(400)
        with pytest.raises(EffectNotPerformed):
            perform(effect, "failed", context=ctx(1), granularity="day", ledger=store.ledger)
        posts = list(peer.posts)
        replay = ctx(1, run_id="replay__incident", conf=REPLAY)
        outs = [
            perform(effect, k, context=replay, granularity="day", ledger=store.ledger)
            for k in ("done", "failed", "new")
        ]
        assert [o.status for o in outs] == ["skipped", "suppressed", "suppressed"]
        assert peer.effects == 1 and peer.posts == posts  # not one request went out
        decisions = [store.ledger.get(o.identity_key).decision for o in outs]  # type: ignore[union-attr]
        assert all(
            d and d.startswith("replay run replay__incident (resend_effects=false)") for d in decisions
        )
        with pytest.raises(GuardRefusal, match="only a corrective backfill re-sends"):
            perform(
                effect,
                "done",
                context=ctx(1, conf={**REPLAY, "resend_effects": True}),
                granularity="day",
                ledger=store.ledger,
            )
        assert peer.effects == 1


def test_a_reconcile_sends_only_what_never_took_effect(store: Store) -> None:
    """reconcile repairs the difference: what never took effect is sent, what went out is not re-sent."""
    with HttpPeer() as peer:
        effect = http_effect(peer)
        done = perform(effect, "done", context=ctx(1), granularity="day", ledger=store.ledger)
        peer.fail_next.append(400)
        with pytest.raises(EffectNotPerformed):
            perform(effect, "failed", context=ctx(1), granularity="day", ledger=store.ledger)
        peer.lose_next.append(500)  # it went out, the answer was lost: pending
        with pytest.raises(HttpOutcomeUnknown):
            perform(effect, "pending", context=ctx(1), granularity="day", ledger=store.ledger)
        assert peer.effects == 2
        reconcile = ctx(1, run_id="reconcile__repair", conf=RECONCILE)
        keys = ("done", "failed", "pending", "new")
        outs = [perform(effect, k, context=reconcile, granularity="day", ledger=store.ledger) for k in keys]
        assert [o.status for o in outs] == ["skipped", "performed", "reconciled", "performed"]
        assert peer.effects == 4  # failed and new sent once each; done and pending not sent again
        assert peer.posts.count(done.idempotency_key) == 1
        entry = store.ledger.get(outs[0].identity_key)
        assert entry is not None and entry.decision == (
            "reconcile run reconcile__repair (resend_effects=false): done, not re-sent"
        )
        new = store.ledger.get(outs[3].identity_key)
        assert (
            new is not None
            and new.decision == "reconcile run reconcile__repair (resend_effects=false): a new effect, sent"
        )
        with pytest.raises(GuardRefusal, match="only a corrective backfill re-sends"):
            perform(
                effect,
                "done",
                context=ctx(1, conf={**RECONCILE, "resend_effects": True}),
                granularity="day",
                ledger=store.ledger,
            )
        assert peer.effects == 4


@pytest.mark.parametrize(
    "conf",
    [
        {
            "semantics": "corrective_backfill",
            "reason": "x",
            "policy_version": "v2",
        },  # effects used to accept it
        {"semantics": "Corrective", "reason": "x", "policy_version": "v2"},
        {"semantics": "replay"},  # no reason
        {"semantics": "corrective", "reason": "x"},  # no policy_version
        {"semantics": "reconcile", "reason": "x", "resend_effects": "yes"},
        {"semantics": "replay", "reason": "x", "surprise": 1},
        CORRECTIVE,
        REPLAY,
        RECONCILE,
        {**CORRECTIVE, "resend_effects": True},
    ],
)
def test_effects_accept_or_refuse_a_declared_rerun_exactly_as_the_guard(conf: dict[str, Any]) -> None:
    """One rule: the conf the backfill guard refuses is refused for effects, with the guard's message."""
    from airflow_idempotent.effects import RerunPolicy
    from airflow_idempotent.guard import BackfillIntent, GuardRefusal

    try:
        intent = BackfillIntent.from_conf(conf)
    except GuardRefusal as refusal:
        with pytest.raises(GuardRefusal) as raised:
            RerunPolicy.from_context(ctx(conf=conf), "manual__x")
        assert str(raised.value) == str(refusal)
        return
    policy = RerunPolicy.from_context(ctx(conf=conf), "manual__x")
    assert (policy.semantics, policy.resend) == (intent.semantics, intent.resend_effects)
    assert policy.suppress == (
        intent.semantics == "replay" or (not intent.resend_effects and intent.semantics == "corrective")
    )


def test_a_conf_the_guard_refuses_sends_nothing(store: Store) -> None:
    from airflow_idempotent.guard import GuardRefusal

    with HttpPeer() as peer:
        bad = ctx(1, run_id="backfill__typo", conf={"semantics": "corrective_backfill", "reason": "x"})
        with pytest.raises(GuardRefusal, match="is not one of replay, corrective, reconcile"):
            perform(http_effect(peer), "v1", context=bad, granularity="day", ledger=store.ledger)
        assert peer.effects == 0 and store.ledger.entries() == []


def _run(context: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": context["ti"].run_id, "conf": context["dag_run"].conf}


# --------------------------------------------------------------------------------------- failure verdicts
def test_http_refusal_fails_the_effect_and_a_lost_answer_is_reconciled(store: Store) -> None:
    with HttpPeer() as peer:
        effect = http_effect(peer)
        peer.fail_next.append(400)  # refused: it did not take effect
        with pytest.raises(EffectNotPerformed, match="HTTP 400"):
            perform(effect, "refused", context=ctx(1), granularity="day", ledger=store.ledger)
        (entry,) = store.ledger.entries()
        assert entry.state == "failed"
        assert perform(effect, "refused", context=ctx(2), granularity="day", ledger=store.ledger).performed
        assert peer.effects == 1

        peer.lose_next.append(500)  # created, but the answer says 500: unknown, stays pending
        with pytest.raises(HttpOutcomeUnknown):
            perform(effect, "lost", context=ctx(1), granularity="day", ledger=store.ledger)
        pending = [e for e in store.ledger.entries() if e.business_key == "lost"]
        assert pending[0].state == "pending" and "HTTP 500" in (pending[0].error or "")
        assert (
            perform(effect, "lost", context=ctx(2), granularity="day", ledger=store.ledger).status
            == "reconciled"
        )
        assert peer.effects == 2 and len(peer.posts) == 3

        # a target that deduplicates on the key is reconciled by sending again with the same key
        dedup = http_effect(peer, lookup_url=None, target_deduplicates=True)
        peer.lose_next.append(502)
        with pytest.raises(HttpOutcomeUnknown):
            perform(dedup, "dedup", context=ctx(1), granularity="day", ledger=store.ledger)
        replayed = perform(dedup, "dedup", context=ctx(2), granularity="day", ledger=store.ledger)
        assert replayed.performed and replayed.details["replayed"] is True
        assert peer.effects == 3  # the repeated POST created nothing


def test_email_through_smtplib_and_a_refused_recipient(store: Store, smtp: SmtpPeer) -> None:
    effect = email_effect(client="smtplib")
    out = perform(effect, context=ctx(1), granularity="day", ledger=store.ledger)
    assert out.performed and out.details["client"] == "smtplib"
    assert smtp.message_ids() == {f"<{out.idempotency_key}@example.com>": 1}
    assert header(smtp.messages[0], "X-Idempotency-Key") == out.idempotency_key

    smtp.refuse.add("nobody@example.com")
    refused = EmailEffect(
        name="notify", to="nobody@example.com", subject="s", html_content="<p>x</p>", smtp_conn_id=SMTP_CONN
    )
    with pytest.raises(EffectNotPerformed, match="refused"):
        perform(refused, "nobody", context=ctx(1), granularity="day", ledger=store.ledger)
    assert [e.state for e in store.ledger.entries(state="failed")] == ["failed"]
    smtp.refuse.clear()
    assert perform(refused, "nobody", context=ctx(2), granularity="day", ledger=store.ledger).performed
    assert smtp.effects == 2


# --------------------------------------------------------------------------------------- API shapes
def test_once_as_context_manager_and_decorator(store: Store) -> None:
    calls: list[str] = []

    for n in (1, 2, 3):
        with once("ticket", key="T-1", context=ctx(n), granularity="day", ledger=store.ledger) as e:
            if e.needed:
                calls.append(e.idempotency_key)
                e.record("TICKET-42", queue="payouts")
        assert e.outcome is not None or e.needed

    @once("page", key="on-call", context=ctx(1), granularity="day", ledger=store.ledger)
    def page(message: str, effect: Any = None) -> dict[str, Any]:
        calls.append(effect.idempotency_key)
        return {"id": "PAGE-7", "message": message}

    first, second = page("payouts late"), page("payouts late")
    assert (first["status"], second["status"]) == ("performed", "skipped")
    assert second["reference"] == "PAGE-7" and second["details"]["message"] == "payouts late"
    assert len(calls) == 2
    (ticket,) = store.ledger.entries(effect_name="ticket")
    assert (ticket.reference, ticket.details) == ("TICKET-42", {"queue": "payouts"})

    # an exception in the body: the outcome is unknown, it stays pending, the next attempt asks
    with (
        pytest.raises(ConnectionResetError),
        once("crm", context=ctx(1), granularity="day", ledger=store.ledger),
    ):
        raise ConnectionResetError("peer reset")
    with (
        pytest.raises(EffectPendingError, match="PENDING"),
        once("crm", context=ctx(2), granularity="day", ledger=store.ledger),
    ):
        pass


def test_operators_perform_once(store: Store, smtp: SmtpPeer, tmp_path: Path) -> None:
    produced: list[str] = []

    def content(context: Any, window: Any) -> bytes:
        produced.append(window.label())
        return f"window={window.label()}\n".encode()

    deliver = FileDeliveryEffectOperator(
        task_id=TASK_ID,
        effect_name="bank-file",
        directory=str(tmp_path / "out"),
        filename="f.csv",
        content=content,
        granularity="day",
    )
    notify = EmailEffectOperator(
        task_id="notify",
        to="ops@example.com",
        subject="s",
        html_content="<p>b</p>",
        smtp_conn_id=SMTP_CONN,
        granularity="day",
    )
    outs = [deliver.execute(ctx(n)) for n in (1, 2)]  # type: ignore[arg-type]
    assert [o["status"] for o in outs] == ["performed", "skipped"]
    assert produced == ["2026-08-25"]  # content is only computed when the effect is needed
    notes = [notify.execute(ctx(n, task_id="notify")) for n in (1, 2)]  # type: ignore[arg-type]
    assert [o["status"] for o in notes] == ["performed", "skipped"] and smtp.effects == 1


# --------------------------------------------------------------------------------------- CLI
def test_cli_lists_effects_per_window_and_resolves_pending_ones(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    with once("ticket", key="T-1", context=ctx(1), granularity="day", ledger=store.ledger) as e:
        e.record("TICKET-42")
    with pytest.raises(TimeoutError), once("crm", context=ctx(1), granularity="day", ledger=store.ledger):
        raise TimeoutError("read timed out")
    (pending,) = store.ledger.entries(state="pending")
    capsys.readouterr()

    assert cli("effects", "list", "--window", "2026-08-25") == 0
    out = capsys.readouterr().out
    assert "window 2026-08-25" in out and "1 pending" in out
    assert pending.idempotency_key in out and "TICKET-42" in out
    assert cli("effects", "list", "--json", "--state", "pending") == 0
    (window,) = json.loads(capsys.readouterr().out)
    assert window["window"]["label"] == "2026-08-25"
    assert [x["idempotency_key"] for x in window["effects"]] == [pending.idempotency_key]
    assert cli("effects", "list", "--window", "2026-08-24") == 0
    assert "No effects match" in capsys.readouterr().out

    # a live attempt holds it: no decision while it may be sending
    with store.ledger.owner_lock(pending.identity_key, 5):
        assert cli("effects", "resolve", "--key", pending.idempotency_key, "--as", "resend") == 3
    assert "live attempt" in capsys.readouterr().err
    assert cli("effects", "resolve", "--key", "idem-nope", "--as", "done") == 3
    assert (
        cli("effects", "resolve", "--identity", pending.identity_key, "--as", "compensated") == 3
    )  # pending
    assert (
        cli("effects", "resolve", "--key", pending.idempotency_key, "--as", "failed", "--reference", "x") == 2
    )

    assert (
        cli("effects", "resolve", "--key", pending.idempotency_key, "--as", "resend", "--reason", "crm down")
        == 0
    )
    assert "the next attempt sends it again" in capsys.readouterr().out
    with once("crm", context=ctx(2), granularity="day", ledger=store.ledger) as e:
        assert e.needed and e.idempotency_key == pending.idempotency_key  # same key: the target may dedupe
        e.record("CRM-9")
    resolved = store.ledger.get(pending.identity_key)
    assert resolved is not None and resolved.state == "done" and "crm down" in (resolved.resolution or "")
    events = [(x["event"], x["actor"] is not None) for x in store.ledger.events(pending.identity_key)]
    assert events == [
        ("claimed", False),
        ("error", False),
        ("resolved", True),
        ("reclaimed", False),
        ("done", False),
    ]

    (ticket,) = store.ledger.entries(effect_name="ticket")
    assert (
        cli(
            "effects",
            "resolve",
            "--key",
            ticket.idempotency_key,
            "--as",
            "compensated",
            "--reference",
            "REFUND-1",
        )
        == 0
    )
    with once("ticket", key="T-1", context=ctx(9), granularity="day", ledger=store.ledger) as e:
        assert not e.needed  # compensated is never re-sent by a rerun

    by_window = effects_for_windows(store.ledger.engine, [(AT, AT.add(days=1))], dag_ids=[DAG_ID])
    assert sorted(e["effect_name"] for e in by_window[(AT, AT.add(days=1))]) == ["crm", "ticket"]


# --------------------------------------------------------------------------------------- bank file
def _expected_bank_file(day: date) -> bytes:
    """The scenario's v1 payouts of one day, computed here in pure Python, as the bank file."""
    first = (day - date(2026, 8, 1)).days * 2000 + 1
    lines = []
    total = Decimal("0")
    for i in range(first, first + 2000):
        price = Decimal(25) + Decimal((i * 37) % 900) * Decimal("0.5")
        amount = (price * Decimal("0.60")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        total += amount
        lines.append(f"{i},{day.isoformat()},{amount},0.60")
    header = (
        f"# payouts bank file;window_start={day.isoformat()};"
        f"window_end={(day + timedelta(days=1)).isoformat()};rows=2000;total_eur={total:.2f}"
    )
    return ("\n".join([header, "sale_id,sale_date,amount_eur,rate", *lines]) + "\n").encode()


def test_bank_file_is_byte_identical_on_every_database(warehouse: Any) -> None:
    create_sales(warehouse.engine, days=26)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=2000)
    simulate_crash(warehouse.engine, DAY + timedelta(days=1), rows=7)  # the next day stays out
    data = render_bank_file(warehouse.engine, DAY, DAY + timedelta(days=1))
    assert data == render_bank_file(warehouse.engine, DAY, DAY + timedelta(days=1))
    assert data == _expected_bank_file(DAY)
    header = parse_header(data.splitlines()[0])  # the scenario's known truth
    assert header == {
        "window_start": "2026-08-25",
        "window_end": "2026-08-26",
        "rows": "2000",
        "total_eur": "299730.00",
    }
    assert bank_file_name(DAY, DAY + timedelta(days=1)) == "payouts-2026-08-25.csv"
    with pytest.raises(ValueError, match="nothing to pay"):
        render_bank_file(warehouse.engine, DAY - timedelta(days=1), DAY)


@pytest.mark.parametrize("warehouse", ["sqlite"], indirect=True)
def test_bank_file_delivered_once_per_window_and_resent_only_when_declared(
    warehouse: Any, store: Store, tmp_path: Path
) -> None:
    create_sales(warehouse.engine, days=26)
    create_payouts(warehouse.engine)
    simulate_crash(warehouse.engine, DAY, rows=1247)  # the crashed payouts run left a partial window
    outbox = tmp_path / "bank"

    def deliver(context: dict[str, Any]) -> Any:
        window = window_from_context(context, "day")
        start, end = window.start_date(), window.end_date()

        def content() -> bytes:
            check_complete(warehouse.engine, start, end)
            return render_bank_file(warehouse.engine, start, end)

        effect = FileDeliveryEffect("bank-file", outbox, bank_file_name(start, end), content)
        return perform(effect, context=context, granularity="day", ledger=store.ledger)

    with pytest.raises(EffectNotPerformed, match="holds 1247 row"):  # never a partial bank file
        deliver(ctx(1))
    assert [e.state for e in store.ledger.entries()] == ["failed"] and not outbox.exists()
    with warehouse.engine.begin() as c:
        c.execute(sa.text("DELETE FROM payouts"))
    simulate_crash(warehouse.engine, DAY, rows=2000)  # the rerun of the payouts wrote the whole day
    assert deliver(ctx(2)).performed
    v1 = (outbox / "payouts-2026-08-25.csv").read_bytes()
    assert v1 == _expected_bank_file(DAY)
    with warehouse.engine.begin() as c:  # the v2 contract fix changes the day's payouts
        c.execute(sa.text("UPDATE payouts SET rate = 0.55, amount_eur = ROUND(amount_eur / 0.60 * 0.55, 2)"))
    assert deliver(ctx(1, run_id="manual__rerun")).status == "skipped"  # a rerun never re-sends
    corrective = CORRECTIVE
    assert deliver(ctx(1, run_id="backfill__v2", conf=corrective)).status == "skipped"
    resend = ctx(1, run_id="backfill__v2_send", conf={**corrective, "resend_effects": True})
    out = deliver(resend)
    assert (out.status, out.generation) == ("performed", 2)
    assert sorted(p.name for p in outbox.iterdir()) == ["payouts-2026-08-25.csv", "payouts-2026-08-25.g2.csv"]
    assert (outbox / "payouts-2026-08-25.csv").read_bytes() == v1  # the delivered file is never rewritten
    assert (outbox / "payouts-2026-08-25.g2.csv").read_bytes() != v1


# --------------------------------------------------------------------------------------- schema
def test_migration_0002_creates_exactly_the_models(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    import airflow_idempotent.history as history
    from airflow_idempotent.history.models import Base

    config = Config()
    config.set_main_option("script_location", str(Path(history.__file__).parent / "migrations"))
    script = ScriptDirectory.from_config(config)
    revision = script.get_revision("0002")
    assert revision is not None and revision.down_revision == "0001"
    with store.ledger.engine.connect() as conn:
        version = conn.execute(sa.text("SELECT version_num FROM idem_alembic_version")).scalar()
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert version == script.get_current_head()
    assert [d for d in diffs if "idem_effect" in repr(d)] == []
