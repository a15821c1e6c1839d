"""The run-history listener: what it records in each process, that it never raises, never blocks.

Fast tests call the hooks in this process with the objects Airflow passes (the task SDK's
RuntimeTaskInstance shape on a worker; real ORM DagRun / TaskInstance objects as the scheduler and
the API server pass them). The `dagrun` tests run a flaky DAG with `airflow dags test`, which fires
the worker-side task hooks in-process and `on_dag_run_success/failed` (but not
`on_dag_run_running`: only the scheduler sends that).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from airflow_idempotent.history import HistoryStore, Spool
from airflow_idempotent.history.store import AttemptRecord
from airflow_idempotent.plugins import listener
from tests.conftest import PG_HOST, PG_PORT, PG_USER

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAY = "2026-08-25"
HOOKS = (
    "on_dag_run_running",
    "on_dag_run_success",
    "on_dag_run_failed",
    "on_task_instance_running",
    "on_task_instance_success",
    "on_task_instance_failed",
    "on_task_instance_skipped",
)

FLAKY_DAG = """
from datetime import datetime, timedelta

from airflow.sdk import dag, task


@dag(dag_id="{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def flaky_dag():
    @task(retries=1, retry_delay=timedelta(0))
    def flaky(**context):
        if context["ti"].try_number == 1:
            raise RuntimeError("first try fails")
        return "ok"

    flaky()


flaky_dag()
"""

# Runs the airflow CLI with every listener hook timed: one JSON line per call into argv[1].
TIMED_AIRFLOW = """
import functools, json, sys, time

from airflow_idempotent.plugins import listener

out = sys.argv.pop(1)
HOOKS = [name for name in vars(listener.HistoryListener) if name.startswith("on_")]


def timed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            with open(out, "a") as f:
                f.write(json.dumps({"hook": fn.__name__, "seconds": time.monotonic() - start}) + "\\n")

    return wrapper


for name in HOOKS:
    setattr(listener.HistoryListener, name, timed(getattr(listener.HistoryListener, name)))

from airflow.__main__ import main

sys.argv[0] = "airflow"
sys.exit(main())
"""


# --------------------------------------------------------------------------------------------
# Helpers and fixtures
# --------------------------------------------------------------------------------------------


def sqlite_conn(path: Path) -> str:
    return json.dumps({"conn_type": "sqlite", "host": str(path)})


def pg_conn(url: str, port: int | None = None) -> str:
    return json.dumps(
        {
            "conn_type": "postgres",
            "host": PG_HOST,
            "port": port or PG_PORT,
            "login": PG_USER,
            "schema": sa.engine.make_url(url).database,
        }
    )


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh per-process listener state, with this test's AIRFLOW_HOME (where the spool lives)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setattr(listener, "_state", listener._ProcessState())
    return home


@pytest.fixture
def sqlite_history(fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HistoryStore:
    path = tmp_path / "history.db"
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", sqlite_conn(path))
    return HistoryStore(sa.create_engine(f"sqlite:///{path}"))


def runtime_ti(**overrides: Any) -> SimpleNamespace:
    """What a worker's hooks get: the task SDK's RuntimeTaskInstance (no dag_run attribute)."""
    logical = datetime(2026, 8, 25, tzinfo=timezone.utc)
    dag_run = SimpleNamespace(run_type="backfill", logical_date=logical, conf={})
    values: dict[str, Any] = {
        "dag_id": "idem_unit",
        "run_id": "backfill__2026-08-25",
        "task_id": "write",
        "map_index": None,
        "try_number": 1,
        "max_tries": 1,
        "state": "running",
        "hostname": "worker-1",
        "get_template_context": lambda: {"dag_run": dag_run, "logical_date": logical},
    }
    values.update(overrides)
    return SimpleNamespace(**values)


class BlackHole:
    """A TCP port that accepts connections (the kernel completes the handshake) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def airflow(
    *args: str, env: dict[str, str], timed: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    command = [AIRFLOW, *args]
    if timed is not None:
        script = timed.with_suffix(".py")
        script.write_text(TIMED_AIRFLOW)
        command = [sys.executable, str(script), str(timed), *args]
    proc = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, (
            f"{' '.join(command)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def flaky_dags(tmp_path: Path, dag_id: str) -> Path:
    dags = tmp_path / "dags"
    dags.mkdir(exist_ok=True)
    (dags / f"{dag_id}.py").write_text(FLAKY_DAG.format(dag_id=dag_id))
    return dags


def by_try(attempts: list[dict[str, Any]]) -> dict[int, list[tuple[str, str | None]]]:
    out: dict[int, list[tuple[str, str | None]]] = {}
    for a in attempts:
        out.setdefault(a["try_number"], []).append((a["event"], a["state"]))
    return out


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def test_plugin_is_listed_once_by_airflow_plugins(airflow_home: Path) -> None:
    out = airflow("plugins", "--output", "json", env={}).stdout
    plugins = json.loads(out[out.index("[") : out.rindex("]") + 1])
    ours = [p for p in plugins if p["name"] == "idempotent"]
    assert len(ours) == 1, plugins
    assert ours[0]["listeners"] == ["airflow_idempotent.plugins.listener.HistoryListener"]
    assert "airflow.plugins" in ours[0]["source"]


@pytest.mark.parametrize("lazy_providers", ["True", "False"])
def test_plugin_loads_once_without_import_errors(lazy_providers: str, tmp_path: Path) -> None:
    """Core and task-SDK plugin managers, with lazy or eager provider discovery."""
    code = (
        "import json\n"
        "from airflow import plugins_manager as core\n"
        "from airflow.sdk import plugins_manager as sdk\n"
        "out = {}\n"
        "for side, pm in (('core', core), ('sdk', sdk)):\n"
        "    plugins, errors = pm._get_plugins()\n"
        "    out[side] = {'names': [p.name for p in plugins], 'errors': errors}\n"
        "print('RESULT=' + json.dumps(out))\n"
    )
    env = {**os.environ, "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": lazy_providers}
    # Not from the repository root: its airflow_idempotent.egg-info (left by `pip install -e`)
    # would be a second distribution with the same entry point, and Airflow does not deduplicate
    # entry points by distribution ("Plugin 'idempotent' already registered, skipping").
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT=", 1)[1])
    for side in ("core", "sdk"):
        assert result[side]["names"].count("idempotent") == 1, result
        # only our plugin's load is this test's: with the OpenLineage provider installed (an
        # optional extra) Airflow's core manager reports that provider's own plugin "already
        # registered", which says nothing about ours
        assert "idempotent" not in result[side]["errors"], result


# --------------------------------------------------------------------------------------------
# Worker side (RuntimeTaskInstance)
# --------------------------------------------------------------------------------------------


def test_worker_hooks_record_each_event(sqlite_history: HistoryStore) -> None:
    hooks = listener.HistoryListener()
    ti = runtime_ti()
    hooks.on_task_instance_running(previous_state="queued", task_instance=ti)
    ti.state = "up_for_retry"  # the task runner sets it before calling the hook
    hooks.on_task_instance_failed(previous_state="running", task_instance=ti, error=RuntimeError("x" * 5000))
    ti2 = runtime_ti(try_number=2, state="running")
    hooks.on_task_instance_running(previous_state="queued", task_instance=ti2)
    ti2.state = "success"
    hooks.on_task_instance_success(previous_state="running", task_instance=ti2)

    rows = sqlite_history.attempts(dag_id="idem_unit")
    assert [(r["try_number"], r["event"], r["state"]) for r in rows] == [
        (1, "running", "running"),
        (1, "up_for_retry", "up_for_retry"),
        (2, "running", "running"),
        (2, "success", "success"),
    ]
    first = rows[1]
    assert first["map_index"] == -1
    assert first["run_type"] == "backfill"
    assert first["source"] == "worker"
    assert first["hostname"] == "worker-1"
    assert first["previous_state"] == "running"
    assert first["error"].startswith("RuntimeError: xxx") and len(first["error"]) == listener.ERROR_CHARS
    assert first["logical_date"].replace(tzinfo=timezone.utc) == datetime(2026, 8, 25, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("fields", "event"),
    [
        ({"state": "up_for_retry"}, "up_for_retry"),
        ({"state": "failed", "try_number": 1, "max_tries": 3}, "failed"),  # a retry policy said FAIL
        ({"state": None, "_ti_context_from_server": SimpleNamespace(should_retry=True)}, "up_for_retry"),
        ({"state": None, "_ti_context_from_server": SimpleNamespace(should_retry=False)}, "failed"),
        ({"state": None, "try_number": 1, "max_tries": 1}, "up_for_retry"),
        ({"state": None, "try_number": 2, "max_tries": 1}, "failed"),
        ({"state": None, "try_number": None, "max_tries": None}, "failed"),
    ],
)
def test_failure_is_up_for_retry_only_when_airflow_retries(fields: dict[str, Any], event: str) -> None:
    assert listener._failure_event(runtime_ti(**fields)) == event


def test_dag_run_conf_is_never_trusted() -> None:
    dr = SimpleNamespace(
        dag_id="d",
        run_id="r",
        run_type="manual",
        state="running",
        start_date=None,
        conf={"semantics": 42, "policy_version": "v" * 500},
    )
    rec = listener.dag_run_record(dr, "running", "started")
    assert rec.semantics is None  # not a string: ignored
    assert rec.policy_version == "v" * 64  # cut to the column
    assert rec.at.tzinfo is not None  # no start date: now
    for conf in (None, "not a dict", ["semantics"], {"semantics": None}):
        rec = listener.dag_run_record(SimpleNamespace(dag_id="d", run_id="r", conf=conf), "success", None)
        assert (rec.semantics, rec.policy_version) == (None, None)


def test_no_exception_ever_escapes(fresh: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    class Exploding:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(f"boom on {name}")

    hooks = listener.HistoryListener()
    for hook in HOOKS:
        args: dict[str, Any] = (
            {"dag_run": Exploding(), "msg": "x"}
            if "dag_run" in hook
            else {"previous_state": None, "task_instance": Exploding()}
        )
        if hook == "on_task_instance_failed":
            args["error"] = None
        getattr(hooks, hook)(**args)

    def broken() -> Any:
        raise OSError("no history for you")

    monkeypatch.setattr(listener, "history", broken)
    hooks.on_task_instance_running(previous_state="queued", task_instance=runtime_ti())
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "run history" in r.getMessage()]
    assert len(warnings) == len(HOOKS) + 1


# --------------------------------------------------------------------------------------------
# Scheduler and API server side (ORM objects): only loaded attributes, no SQL, no flush
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metadata_engine() -> Iterator[sa.Engine]:
    """Airflow's metadata schema in an in-memory SQLite database (just to have real ORM rows)."""
    from airflow.models import import_all_models
    from airflow.models.base import Base

    import_all_models()
    engine = sa.create_engine("sqlite://", poolclass=sa.pool.StaticPool)
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


def persisted_dag_run(session: Session, run_id: str, day: int) -> Any:
    """A backfill DagRun for 2026-08-<day>, started five minutes after its interval."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.state import DagRunState

    start = datetime(2026, 8, day, tzinfo=timezone.utc)
    dr = DagRun(
        dag_id="idem_orm",
        run_id=run_id,
        run_type="backfill",
        logical_date=start,
        data_interval=(start, start + timedelta(days=1)),
        start_date=start + timedelta(days=1, minutes=5),
        conf={"semantics": "overwrite", "policy_version": "v2"},
        state=DagRunState.RUNNING,
    )
    session.add(dr)
    session.commit()
    return dr


class SqlSpy:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine, self.statements = engine, []  # type: tuple[sa.Engine, list[str]]
        sa.event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def close(self) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._seen)


def test_scheduler_dag_run_events_touch_no_session(
    metadata_engine: sa.Engine, sqlite_history: HistoryStore
) -> None:
    hooks = listener.HistoryListener()
    with Session(metadata_engine, expire_on_commit=False) as session:  # as Airflow's sessions are
        dr = persisted_dag_run(session, "run_loaded", day=25)
        spy = SqlSpy(metadata_engine)
        try:
            hooks.on_dag_run_running(dag_run=dr, msg="started")
            dr.state = "success"  # set by update_state, not flushed yet when the hook runs
            hooks.on_dag_run_success(dag_run=dr, msg="success")
            assert spy.statements == []  # no lazy load, no refresh, no autoflush
            assert dr in session.dirty  # the pending change is still Airflow's to flush
        finally:
            spy.close()
        session.rollback()

    events = sqlite_history.dag_runs(dag_id="idem_orm", run_id="run_loaded")
    assert [(e["event"], e["state"], e["source"]) for e in events] == [
        ("running", "running", "scheduler"),
        ("success", "success", "scheduler"),
    ]
    running = events[0]
    assert running["run_type"] == "backfill"
    assert (running["semantics"], running["policy_version"]) == ("overwrite", "v2")
    assert running["at"].replace(tzinfo=timezone.utc) == datetime(2026, 8, 26, 0, 5, tzinfo=timezone.utc)
    assert running["data_interval_end"].replace(tzinfo=timezone.utc) == datetime(
        2026, 8, 26, tzinfo=timezone.utc
    )


def test_expired_dag_run_is_skipped_not_refreshed(
    metadata_engine: sa.Engine, sqlite_history: HistoryStore, caplog: Any
) -> None:
    hooks = listener.HistoryListener()
    with Session(metadata_engine) as session:  # expire_on_commit: every attribute unloaded
        dr = persisted_dag_run(session, "run_expired", day=24)
        spy = SqlSpy(metadata_engine)
        try:
            hooks.on_dag_run_running(dag_run=dr, msg="started")
            assert spy.statements == []
        finally:
            spy.close()
    assert sqlite_history.dag_runs(dag_id="idem_orm", run_id="run_expired") == []
    assert any("not read from the database" in r.getMessage() for r in caplog.records)


def orm_task_instance(dag_run: Any, **fields: Any) -> Any:
    """An ORM TaskInstance as the API server holds it after a PATCH (dag_run joined-loaded)."""
    from airflow.models.taskinstance import TaskInstance

    ti = sa.orm.class_mapper(TaskInstance).class_manager.new_instance()
    values = {"dag_id": dag_run.dag_id, "run_id": dag_run.run_id, "task_id": "write", "map_index": -1}
    values.update({"try_number": 1, "hostname": "worker-9", "dag_run": dag_run, **fields})
    for key, value in values.items():
        setattr(ti, key, value)
    return ti


def test_api_server_marks_and_scheduler_failures(
    metadata_engine: sa.Engine, sqlite_history: HistoryStore
) -> None:
    hooks = listener.HistoryListener()
    with Session(metadata_engine, expire_on_commit=False) as session:
        dr = persisted_dag_run(session, "run_marked", day=23)
        assert listener.is_orm_task_instance(orm_task_instance(dr))
        assert not listener.is_orm_task_instance(runtime_ti())
        marked_ok = orm_task_instance(dr, state="success")
        marked_failed = orm_task_instance(dr, task_id="other", state="failed")
        killed = orm_task_instance(dr, task_id="killed", try_number=2, state="up_for_retry")
        spy = SqlSpy(metadata_engine)
        try:
            # A user marks task instances in the UI: previous_state is None.
            hooks.on_task_instance_success(previous_state=None, task_instance=marked_ok)
            hooks.on_task_instance_failed(
                previous_state=None,
                task_instance=marked_failed,
                error="TaskInstance's state was manually set to `failed`.",
            )
            # The executor reports a task dead: the scheduler's handle_failure, previous_state RUNNING.
            hooks.on_task_instance_failed(
                previous_state="running", task_instance=killed, error="Executor reported the task as failed"
            )
            # A user marks the DAG run itself.
            dr.state = "success"
            hooks.on_dag_run_success(dag_run=dr, msg="Dag Run's state was manually set to `success`.")
            assert spy.statements == []
        finally:
            spy.close()
        session.rollback()

    got = {
        (a["task_id"], a["event"]): a for a in sqlite_history.attempts(dag_id="idem_orm", run_id="run_marked")
    }
    assert set(got) == {("write", "marked_success"), ("other", "marked_failed"), ("killed", "up_for_retry")}
    assert got["write", "marked_success"]["source"] == "api_server"
    assert got["write", "marked_success"]["run_type"] == "backfill"
    assert got["other", "marked_failed"]["error"] == "TaskInstance's state was manually set to `failed`."
    assert got["killed", "up_for_retry"]["source"] == "scheduler"
    assert got["killed", "up_for_retry"]["try_number"] == 2
    (event,) = sqlite_history.dag_runs(dag_id="idem_orm", run_id="run_marked")
    assert (event["event"], event["source"]) == ("success", "api_server")


# --------------------------------------------------------------------------------------------
# Never blocks: a store that hangs, then comes back
# --------------------------------------------------------------------------------------------


def test_hooks_return_in_time_when_store_hangs_then_deliver_once(
    fresh: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hole = BlackHole()
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", pg_conn(pg_url, port=hole.port))
    hooks = listener.HistoryListener()
    ti = runtime_ti(dag_id="idem_hang", run_id="run_hang")
    dr = SimpleNamespace(dag_id="idem_hang", run_id="run_hang", run_type="manual", state="running", conf={})
    done = runtime_ti(dag_id="idem_hang", run_id="run_hang", state="success")
    calls = [
        lambda: hooks.on_dag_run_running(dag_run=dr, msg="started"),
        lambda: hooks.on_task_instance_running(previous_state="queued", task_instance=ti),
        lambda: hooks.on_task_instance_success(previous_state="running", task_instance=done),
    ]
    seconds = []
    try:
        for call in calls:
            start = time.monotonic()
            call()
            seconds.append(time.monotonic() - start)
    finally:
        hole.close()
    assert seconds[0] < 3.0, seconds  # connect_timeout (2 s), then spooled
    assert max(seconds[1:]) < 0.5, seconds  # the store just failed: spooled without waiting
    spool = Spool(fresh / "idempotent_spool")
    assert spool.count() == 3

    # RETRY_AFTER later the store is tried again (still down: the port now refuses), and spooled.
    listener._state.store_down_until = 0.0
    hooks.on_task_instance_failed(previous_state="running", task_instance=ti, error="boom")
    assert spool.count() == 4
    assert listener._state.store_down_until > time.monotonic()
    saved = fresh / "spool_copy"
    shutil.copytree(spool.directory, saved)

    # The store is back: the next record delivers the spool first.
    monkeypatch.setenv("AIRFLOW_CONN_IDEMPOTENT_HISTORY", pg_conn(pg_url))
    monkeypatch.setattr(listener, "_state", listener._ProcessState())
    hooks.on_task_instance_success(previous_state="running", task_instance=runtime_ti(task_id="next"))
    assert spool.count() == 0
    Spool(saved).deliver(HistoryStore(sa.create_engine(pg_url)))  # delivered twice: stored once
    store = HistoryStore(sa.create_engine(pg_url))
    attempts = store.attempts(dag_id="idem_hang")
    assert sorted((a["task_id"], a["event"]) for a in attempts) == [
        ("write", "running"),
        ("write", "success"),
        ("write", "up_for_retry"),  # try 1 of 1 retry: Airflow would retry it
    ]
    assert [e["event"] for e in store.dag_runs(dag_id="idem_hang")] == ["running"]


def test_submit_spools_itself_when_the_store_never_returns(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even a store hanging past SafeHistory's own bounds cannot hold the hook past HARD_LIMIT."""
    safe = listener.history()
    monkeypatch.setattr(safe, "record", lambda record: time.sleep(30))
    record = AttemptRecord(
        dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1, event="running",
        at=datetime.now(timezone.utc),
    )  # fmt: skip
    start = time.monotonic()
    assert listener.submit(record, limit=0.5) is False
    assert time.monotonic() - start < 1.5
    assert Spool(fresh / "idempotent_spool").count() == 1


# --------------------------------------------------------------------------------------------
# Real runs: `airflow dags test`
# --------------------------------------------------------------------------------------------


@pytest.mark.dagrun
def test_dags_test_records_retry_then_success(airflow_home: Path, tmp_path: Path) -> None:
    dag_id = "idem_listener_flaky"
    path = tmp_path / "history.db"
    env = {
        "AIRFLOW__CORE__DAGS_FOLDER": str(flaky_dags(tmp_path, dag_id)),
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": sqlite_conn(path),
    }
    conf = json.dumps({"semantics": "overwrite", "policy_version": 2})
    airflow("dags", "test", dag_id, DAY, "--conf", conf, env=env)

    store = HistoryStore(sa.create_engine(f"sqlite:///{path}"))
    attempts = store.attempts(dag_id=dag_id)
    assert by_try(attempts) == {
        1: [("running", "running"), ("up_for_retry", "up_for_retry")],
        2: [("running", "running"), ("success", "success")],
    }
    assert {(a["source"], a["run_type"], a["task_id"]) for a in attempts} == {("worker", "manual", "flaky")}
    assert attempts[1]["error"] == "RuntimeError: first try fails"
    assert all(a["logical_date"].date().isoformat() == DAY for a in attempts)
    # `dags test` sends on_dag_run_success from its scheduling loop; on_dag_run_running is scheduler-only.
    (event,) = store.dag_runs(dag_id=dag_id)
    assert (event["event"], event["state"], event["source"]) == ("success", "success", "scheduler")
    assert (event["semantics"], event["policy_version"]) == ("overwrite", None)  # 2 is not a string
    assert event["run_id"] == attempts[0]["run_id"]


@pytest.mark.dagrun
def test_dags_test_with_history_down_succeeds_spools_and_delivers_once(
    airflow_home: Path, tmp_path: Path, pg_url: str
) -> None:
    dag_id = "idem_listener_outage"
    home = tmp_path / "home"  # own AIRFLOW_HOME (own spool), same migrated metadata database
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(flaky_dags(tmp_path, dag_id)),
        "AIRFLOW_CONN_IDEMPOTENT_HISTORY": pg_conn(pg_url, port=1),  # nothing listens there
    }
    timings = tmp_path / "timings.jsonl"
    airflow("dags", "test", dag_id, DAY, env=env, timed=timings)
    calls = [json.loads(line) for line in timings.read_text().splitlines()]
    assert [c["hook"] for c in calls] == [
        "on_task_instance_running",
        "on_task_instance_failed",
        "on_task_instance_running",
        "on_task_instance_success",
        "on_dag_run_success",
    ]
    assert max(c["seconds"] for c in calls) < 3.0, calls
    spool = Spool(home / "idempotent_spool")
    spooled = [json.loads(line) for path in spool.pending() for line in path.read_text().splitlines()]
    assert sorted((r["kind"], r["event"], r.get("try_number")) for r in spooled) == [
        ("attempt", "running", 1),
        ("attempt", "running", 2),
        ("attempt", "success", 2),  # the task succeeded on its retry, store or no store
        ("attempt", "up_for_retry", 1),
        ("dag_run", "success", None),
    ]
    assert spool.count() == 5
    saved = tmp_path / "spool_copy"
    shutil.copytree(spool.directory, saved)

    # The store is back: the next run's first record delivers the spool, then its own records.
    env["AIRFLOW_CONN_IDEMPOTENT_HISTORY"] = pg_conn(pg_url)
    airflow("dags", "test", dag_id, "2026-08-26", env=env)
    assert spool.count() == 0
    store = HistoryStore(sa.create_engine(pg_url))
    Spool(saved).deliver(store)  # a second delivery of the same records stores nothing new
    runs: dict[str, list[dict[str, Any]]] = {}
    for a in store.attempts(dag_id=dag_id):
        runs.setdefault(a["logical_date"].date().isoformat(), []).append(a)
    assert sorted(runs) == [DAY, "2026-08-26"]
    for attempts in runs.values():
        assert by_try(attempts) == {
            1: [("running", "running"), ("up_for_retry", "up_for_retry")],
            2: [("running", "running"), ("success", "success")],
        }
    assert [e["event"] for e in store.dag_runs(dag_id=dag_id)] == ["success", "success"]


def test_a_starting_backfill_run_records_its_backfills_size(
    sqlite_history: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guarded tasks of the run read it before they write (guard.sizes)."""
    from airflow_idempotent.guard import sizes

    measured: list[int] = []

    def measure(backfill_id: int) -> tuple[int, int | None]:
        measured.append(backfill_id)
        return 61, 61

    monkeypatch.setattr(sizes, "measure", measure)
    start = datetime(2026, 8, 25, tzinfo=timezone.utc)
    dag_run = SimpleNamespace(
        dag_id="idem_unit",
        run_id="backfill__2026-08-25",
        run_type="backfill",
        backfill_id=5,
        start_date=start,
        state="running",
        logical_date=start,
        conf={},
    )
    listener.HistoryListener().on_dag_run_running(dag_run=dag_run, msg="started")
    assert measured == [5]
    size = sqlite_history.backfill_size("idem_unit", "backfill__2026-08-25")
    assert size is not None
    assert (size["backfill_id"], size["windows"], size["approve_windows"]) == (5, 61, 61)
    scheduled = SimpleNamespace(**{**vars(dag_run), "run_type": "scheduled", "run_id": "scheduled__x"})
    listener.HistoryListener().on_dag_run_running(dag_run=scheduled, msg="started")
    assert measured == [5]  # only backfill runs are measured
