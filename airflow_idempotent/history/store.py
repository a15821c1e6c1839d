"""The history store: where every DAG run, task attempt and window write is remembered.

It lives behind the Airflow connection `idempotent_history` (PostgreSQL in production), or,
without one, in an SQLite file under AIRFLOW_HOME so the demo needs no server. It never uses
Airflow's own ORM session. Writes of records are insert-if-absent on each record's natural key,
so a record redelivered from the spool is stored once.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from airflow_idempotent import __version__
from airflow_idempotent.adapters import ADAPTERS, EngineAdapter, adapter_class, adapter_for
from airflow_idempotent.adapters.drivers import create_engine
from airflow_idempotent.checksum import comparable
from airflow_idempotent.errors import UnsupportedConnectionError
from airflow_idempotent.history.models import (
    HEAD_REVISION,
    VERSION_TABLE,
    BackfillSize,
    Base,
    DagRunEvent,
    TaskAttempt,
    WindowWrite,
    column_length,
)
from airflow_idempotent.window import Window, to_utc, to_utc_datetime

log = logging.getLogger(__name__)

DEFAULT_CONN_ID = "idempotent_history"
EMBEDDED_FILE = "idempotent_history.db"
#: How long a task or listener waits for the store before spooling instead.
DEFAULT_TIMEOUT = 2.0


def utcnow() -> datetime:
    """The wall clock, for *when a record happened* only: never for which window a run writes."""
    return datetime.now(timezone.utc)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _parse_dt(value: Any) -> Any:
    """A spooled ISO timestamp back as an aware UTC datetime (None stays None)."""
    return to_utc_datetime(value, "spooled timestamp") if isinstance(value, str) else value


@dataclass
class Record:
    """A history record: plain data, JSON-serialisable for the spool."""

    kind: ClassVar[str]
    model: ClassVar[type[Base]]

    def to_json(self) -> str:
        return json.dumps(
            {"kind": self.kind, **{k: _iso(v) for k, v in asdict(self).items()}}, sort_keys=True
        )

    def values(self) -> dict[str, Any]:
        """Field values, each string cut to its column's length: a long conf value (e.g. a
        'semantics' of 10,000 characters) must cost a few characters, never the record."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            length = column_length(self.model, f.name)
            out[f.name] = value[:length] if isinstance(value, str) and length else value
        return out

    @staticmethod
    def from_json(line: str) -> Record:
        data = json.loads(line)
        cls = RECORD_KINDS[data.pop("kind")]
        types = {f.name: f.type for f in fields(cls)}
        return cls(**{k: _parse_dt(v) if "datetime" in str(types.get(k)) else v for k, v in data.items()})


@dataclass
class DagRunRecord(Record):
    kind: ClassVar[str] = "dag_run"
    model: ClassVar[type[Base]] = DagRunEvent

    dag_id: str
    run_id: str
    event: str
    at: datetime
    state: str | None = None
    run_type: str | None = None
    logical_date: datetime | None = None
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    semantics: str | None = None
    policy_version: str | None = None
    source: str | None = None
    message: str | None = None


@dataclass
class AttemptRecord(Record):
    kind: ClassVar[str] = "attempt"
    model: ClassVar[type[Base]] = TaskAttempt

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    event: str
    at: datetime
    state: str | None = None
    previous_state: str | None = None
    run_type: str | None = None
    logical_date: datetime | None = None
    hostname: str | None = None
    source: str | None = None
    error: str | None = None


@dataclass
class WriteRecord(Record):
    """One window write as the operator saw it; ordinal, dataset version and flags are the store's."""

    kind: ClassVar[str] = "write"
    model: ClassVar[type[Base]] = WindowWrite

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    target: str
    window_start: datetime
    window_end: datetime
    window_label: str
    strategy: str
    status: str
    fingerprint: str
    written_at: datetime
    rows_deleted: int | None = None
    rows_inserted: int | None = None
    rows_updated: int | None = None
    source_rows: int | None = None
    row_count: int | None = None
    checksum: str | None = None
    fingerprint_parts: str | None = None
    run_type: str | None = None
    semantics: str | None = None
    policy_version: str | None = None
    diff: str | None = None
    message: str | None = None
    package_version: str = __version__
    dag_version_id: str | None = None
    dag_version_number: int | None = None
    bundle_name: str | None = None
    bundle_version: str | None = None


@dataclass
class BackfillSizeRecord(Record):
    """A backfill run's backfill: how many windows it covers and how many its conf approves."""

    kind: ClassVar[str] = "backfill_size"
    model: ClassVar[type[Base]] = BackfillSize

    dag_id: str
    run_id: str
    backfill_id: int
    windows: int
    approve_windows: int | None
    recorded_at: datetime


RECORD_KINDS: dict[str, type[Record]] = {
    c.kind: c for c in (DagRunRecord, AttemptRecord, WriteRecord, BackfillSizeRecord)
}


@dataclass(frozen=True)
class StoredWrite:
    """What the store derived when it recorded a write."""

    ordinal: int
    dataset_version: int
    nondeterministic: bool
    #: the checksum this write is compared with: the newest earlier result of the same fingerprint
    #: that differs (when nondeterministic), else the window's last written checksum
    previous_checksum: str | None = None
    #: the window's content changed: a first write, a checksum other than its previous version's,
    #: or no checksum to tell (what decides an asset event with emit_asset="changed")
    changed: bool = True

    def summary(self) -> dict[str, Any]:
        """What a write's XCom says of its record: ordinal, dataset version, nondeterministic, changed."""
        return {
            "ordinal": self.ordinal,
            "dataset_version": self.dataset_version,
            "nondeterministic": self.nondeterministic,
            "changed": self.changed,
        }


@dataclass
class HistoryStore:
    """The store on one SQLAlchemy engine. Operations raise on failure: `SafeHistory` spools."""

    engine: Engine
    timeout: float = DEFAULT_TIMEOUT
    _MIGRATED_URLS: ClassVar[set[str]] = set()
    #: One migration at a time in a process: the API server's request threads open the store at
    #: once, and two Alembic upgrades side by side fail (KeyError, duplicate CREATE TABLE).
    _MIGRATING: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def from_airflow(cls, conn_id: str = DEFAULT_CONN_ID, timeout: float = DEFAULT_TIMEOUT) -> HistoryStore:
        """The store of connection `conn_id`, or the embedded SQLite file when it is not defined."""
        return cls(engine=history_engine(conn_id, timeout), timeout=timeout)

    @cached_property
    def adapter(self) -> EngineAdapter:
        """The store database's adapter: its insert-if-absent and its locks."""
        return adapter_for(self.engine)

    # ------------------------------------------------------------------ schema
    def migrate(self) -> None:
        """Bring the schema to the latest Alembic revision (once per process and database)."""
        key = self.engine.url.render_as_string(hide_password=True)
        if key in self._MIGRATED_URLS:
            return
        with self._MIGRATING:
            self._migrate(key)

    def _migrate(self, key: str) -> None:
        """`migrate` under the process's migration lock."""
        if key in self._MIGRATED_URLS:
            return
        cls = ADAPTERS.get(self.engine.dialect.name)
        if cls is None or not cls.hosts_history_store:
            raise UnsupportedConnectionError(
                "the history store (and the effect ledger in it) cannot live in "
                f"{self.engine.dialect.name!r}: it needs row locks and many small transactions. "
                f"Point the connection {DEFAULT_CONN_ID!r} at PostgreSQL, MySQL/MariaDB or SQLite, "
                "or leave it undefined for the embedded SQLite file in $AIRFLOW_HOME "
                "(a DuckDB warehouse works with any of them)"
            )
        if self.at_head():
            self._MIGRATED_URLS.add(key)
            return
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        with self.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        self._MIGRATED_URLS.add(key)

    def at_head(self) -> bool:
        """Whether the store's schema is at `HEAD_REVISION`, read from the version table.

        One query instead of Alembic's upgrade, which loads every migration script: a task is a
        fresh process, and the upgrade to the revision it is already at took 385-650 ms of each one.
        """
        with self.engine.connect() as conn:  # a store that cannot be reached raises here, once
            try:
                rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
            except sa.exc.DBAPIError as err:
                if err.connection_invalidated:  # the server went away: not a question of schema
                    raise
                return False  # no version table yet: a new store
        return rows == [HEAD_REVISION]

    # ------------------------------------------------------------------ writing
    def record(self, record: Record, conn: sa.Connection | None = None) -> StoredWrite | None:
        """Store one record (insert if absent). Writes get their ordinal and flags here. `conn`: an
        open connection of this store to store a write's record on (the write's check before
        commit hands its own on, its PostgreSQL read transaction still open: `history.link`);
        closed when done."""
        self.migrate()
        if isinstance(record, WriteRecord):
            return self._record_write(record, conn)
        if conn is not None:
            conn.close()
        with self.engine.begin() as own:
            self.adapter.insert_if_absent(own, record.model.__table__, record.values())  # type: ignore[arg-type]
        return None

    def _record_write(self, record: WriteRecord, lent: sa.Connection | None = None) -> StoredWrite:
        window = Window(start=to_utc(record.window_start), end=to_utc(record.window_end), source="history")
        target = f"history:{record.target}"
        with self.adapter.locked_transaction(target, window, self.timeout, lent) as conn:
            table: sa.Table = WindowWrite.__table__  # type: ignore[assignment]
            # One read answers both questions: was this attempt stored already (a redelivery), and
            # which writes of the window came before it (ordinal, version, non-determinism).
            binds = {k: getattr(record, k) for k in (*NATURAL_KEY, "target", "window_end")}
            rows = conn.execute(_earlier_writes(), binds).all()
            existing = next((r for r in rows if r.same_attempt), None)
            if existing is not None:  # redelivered: stored once
                return StoredWrite(
                    existing.ordinal, existing.dataset_version, bool(existing.nondeterministic)
                )
            stored = self._derive(record, [r for r in rows if r.same_window])
            values = record.values()
            values.update(
                ordinal=stored.ordinal,
                dataset_version=stored.dataset_version,
                nondeterministic=stored.nondeterministic,
            )
            conn.execute(_insert(table, tuple(values)), values)
        return stored

    @staticmethod
    def _derive(record: WriteRecord, written: Sequence[Any]) -> StoredWrite:
        """Ordinal (how many writes of this window so far), dataset version, non-determinism, from
        the window's earlier written rows, newest first (ordinal, dataset_version, checksum,
        fingerprint)."""
        last = written[0] if written else None
        if record.status != "written":
            return StoredWrite(
                ordinal=last.ordinal if last else 0,
                dataset_version=last.dataset_version if last else 0,
                nondeterministic=False,
                previous_checksum=last.checksum if last else None,
                changed=False,
            )
        ordinal = (last.ordinal if last else 0) + 1
        if last is None:
            version = 1
        elif last.checksum == record.checksum:
            version = last.dataset_version
        else:
            version = last.dataset_version + 1
        # Only checksums of the same definition compare: a window written before the checksum's
        # version changed is a new dataset version (its result may differ), never nondeterministic.
        differing = next(
            (
                row
                for row in written
                if row.fingerprint == record.fingerprint
                and row.checksum is not None
                and row.checksum != record.checksum
                and (record.checksum is None or comparable(row.checksum, record.checksum))
            ),
            None,
        )
        changed = last is None or record.checksum is None or version != last.dataset_version
        # the checksum the warning compares with: the earlier result that differs, not the last one
        # (which may equal this write's when an older write of the same SQL gave another result)
        previous = differing.checksum if differing is not None else (last.checksum if last else None)
        return StoredWrite(ordinal, version, differing is not None, previous, changed)

    # ------------------------------------------------------------------ reading
    def last_write(self, target: str, window: Window, status: str = "written") -> dict[str, Any] | None:
        """The latest write of (target, window) with `status`, as a dict, or None."""
        self.migrate()
        table = WindowWrite.__table__
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(table)
                .where(
                    table.c.target == target,
                    table.c.window_start == window.start,
                    table.c.window_end == window.end,
                    table.c.status == status,
                )
                .order_by(table.c.ordinal.desc(), table.c.id.desc())
                .limit(1)
            ).first()
        return dict(row._mapping) if row is not None else None

    def writes(self, **filters: Any) -> list[dict[str, Any]]:
        """Window writes matching equality filters on any column, oldest first."""
        return self._matching(WindowWrite, "written_at", filters)

    def writes_since(self, dag_id: str, run_type: str, since: datetime) -> list[datetime]:
        """When each write of `dag_id` in runs of `run_type` happened since `since` (for throttling)."""
        self.migrate()
        table = WindowWrite.__table__
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(table.c.written_at)
                .where(table.c.dag_id == dag_id, table.c.run_type == run_type, table.c.written_at >= since)
                .order_by(table.c.written_at)
            ).all()
        return [r[0] for r in rows]

    def attempts(self, **filters: Any) -> list[dict[str, Any]]:
        """Task attempt events matching equality filters on any column, oldest first."""
        return self._matching(TaskAttempt, "at", filters)

    def backfill_size(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        """The latest size recorded for run `run_id` of `dag_id` (a run a later backfill reruns
        gets a newer record), or None when none was recorded."""
        self.migrate()
        table = BackfillSize.__table__
        query = (
            sa.select(table)
            .where(table.c.dag_id == dag_id, table.c.run_id == run_id)
            .order_by(table.c.recorded_at.desc(), table.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else dict(row._mapping)

    def dag_runs(self, **filters: Any) -> list[dict[str, Any]]:
        """DAG run events matching equality filters on any column, oldest first."""
        return self._matching(DagRunEvent, "at", filters)

    def _matching(self, model: type[Base], when: str, filters: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Rows of `model` equal to every filter that is not None, by column `when`, then id: the
        one reading of the listing methods, so a filter means the same on every table."""
        self.migrate()
        table: sa.Table = model.__table__  # type: ignore[assignment]
        clauses = [table.c[k] == v for k, v in filters.items() if v is not None]
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(table).where(*clauses).order_by(table.c[when], table.c.id)).all()
        return [dict(r._mapping) for r in rows]


#: The columns that name one attempt's write of a window (its natural key).
NATURAL_KEY = ("dag_id", "run_id", "task_id", "map_index", "try_number", "window_start")


# The statements every write's record runs, as texts (values bound with the columns' types, so
# the UTC timestamps apply): each runs on a fresh engine, where building and compiling a
# construct took ~1 ms a statement. None of the names needs quoting in any supported database.
@functools.cache
def _earlier_writes() -> sa.TextClause:
    """This attempt's row, if stored already, and the window's written rows, newest first."""
    table: sa.Table = WindowWrite.__table__  # type: ignore[assignment]
    same_attempt = " AND ".join(f"{c} = :{c}" for c in NATURAL_KEY)
    same_window = "target = :target AND window_start = :window_start AND window_end = :window_end"
    same_window += " AND status = 'written'"
    return sa.text(
        "SELECT ordinal, dataset_version, nondeterministic, checksum, fingerprint,"
        f" CASE WHEN {same_attempt} THEN 1 ELSE 0 END AS same_attempt,"
        f" CASE WHEN {same_window} THEN 1 ELSE 0 END AS same_window"
        f" FROM {table.name} WHERE ({same_attempt}) OR ({same_window}) ORDER BY ordinal DESC"
    ).bindparams(*(sa.bindparam(c, type_=table.c[c].type) for c in (*NATURAL_KEY, "target", "window_end")))


@functools.cache
def _insert(table: sa.Table, names: tuple[str, ...]) -> sa.TextClause:
    """INSERT of one row of `table` with these columns."""
    return sa.text(
        f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join(f':{n}' for n in names)})"
    ).bindparams(*(sa.bindparam(n, type_=table.c[n].type) for n in names))


def airflow_home() -> Path:
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")


def history_engine(conn_id: str = DEFAULT_CONN_ID, timeout: float = DEFAULT_TIMEOUT) -> Engine:
    """The engine on the history connection, with every wait bounded by `timeout` seconds.

    One engine per store URL and timeout in a process (`_ENGINES`): a task process records its
    attempt through the listener and its write through the operator, and a new engine per caller
    paid a connect and SQLAlchemy's first-connect dialect setup each time (5-9 ms on PostgreSQL).
    """
    from airflow_idempotent.hooks.warehouse import WarehouseHook

    url: sa.URL
    if connection_defined(conn_id):
        url = WarehouseHook(conn_id=conn_id).sqlalchemy_url
    else:
        url = sa.URL.create("sqlite", database=str(airflow_home() / EMBEDDED_FILE))
    return _ENGINES.get(url, timeout)


class _EngineCache:
    """The process's history engines, most recently used last, at most `size` of them.

    A forked child starts with none: the parent's engines stay referenced (never used, never
    closed) so the child cannot close the parent's connections under it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.engines: dict[tuple[str, float], Engine] = {}
        self.lock = threading.Lock()
        self.inherited: list[Engine] = []

    def get(self, url: sa.URL, timeout: float) -> Engine:
        key = (url.render_as_string(hide_password=False), timeout)
        with self.lock:
            engine = self.engines.pop(key, None)
            if engine is None:
                engine = self.create(url, timeout)
            self.engines[key] = engine
            while len(self.engines) > self.size:
                self.engines.pop(next(iter(self.engines))).dispose()
            return engine

    @staticmethod
    def create(url: sa.URL, timeout: float) -> Engine:
        connect_args = adapter_class(url.get_backend_name()).connect_args(timeout)
        # A small pool: a listener records several events per attempt from one long-lived process
        # (scheduler, worker), and a fresh connection per record cost more than the record itself.
        # pre_ping replaces a connection the server dropped; recycle bounds how long one lives.
        return create_engine(
            url, pool_size=2, max_overflow=2, pool_pre_ping=True, pool_recycle=1800, connect_args=connect_args
        )

    def forget_after_fork(self) -> None:
        self.inherited.extend(self.engines.values())
        self.engines = {}
        self.lock = threading.Lock()


_ENGINES = _EngineCache(size=4)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ENGINES.forget_after_fork)


def connection_defined(conn_id: str) -> bool:
    """True when Airflow knows the connection (env var, secrets backend or metadata DB)."""
    if os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}"):
        return True
    try:
        from airflow.sdk import BaseHook

        BaseHook.get_connection(conn_id)
    except Exception:
        return False
    return True
