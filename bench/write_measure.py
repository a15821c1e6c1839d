"""How `bench_write.py` measures the operator's path: its steps timed from the outside (Instrument),
one call checked (run_operator), and the peak memory of a call in a fresh process (child_operator;
child_insert_rows for common-sql's insert_rows), which bench_write.py runs as its `--child`.
"""

from __future__ import annotations

import gc
import resource
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from write_scenario import COLUMNS, KEYS, Pg, bind_params, engine_for, hand_sql, make_spec, reset


class Instrument:
    """Times the operator's steps without changing its code: SQLAlchemy cursor events for each
    statement, and thin wrappers (instance attributes) around DBAPI connect / commit and the adapter's
    describe() and render(). Overhead: a few microseconds per statement."""

    def __init__(self, adapter: Any) -> None:
        from sqlalchemy import event

        self.adapter = adapter
        self.steps: dict[str, float] = defaultdict(float)
        self.statements: list[tuple[str, float]] = []
        self._in_describe = False
        self._t = 0.0
        engine = adapter.engine
        dialect = engine.dialect
        dialect.connect = self._timed("connect", dialect.connect)
        dialect.do_commit = self._timed("commit", dialect.do_commit)
        adapter.render = self._timed("render (sqlglot)", adapter.render)
        describe = adapter.describe

        def timed_describe(*args: Any, **kwargs: Any) -> Any:
            self._in_describe = True
            try:
                return self._timed("describe (reflection)", describe)(*args, **kwargs)
            finally:
                self._in_describe = False

        adapter.describe = timed_describe
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.steps[name] += time.perf_counter() - t0

        return wrapper

    def _before(self, *_: Any) -> None:
        self._t = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        elapsed = time.perf_counter() - self._t
        label = self.classify(statement)
        self.statements.append((label, elapsed))
        if label != "reflection SQL":  # inside describe(), counted in its wall time
            self.steps[label] += elapsed

    def classify(self, statement: str) -> str:
        s = " ".join(statement.split()).lower()
        if self._in_describe:
            return "reflection SQL"
        if "pg_advisory_xact_lock" in s or "set_config('lock_timeout'" in s:
            return "lock (set_config x2 + advisory lock)"
        if s.endswith("where false limit 0"):
            return "probe (columns of the SELECT)"
        if s.startswith("delete"):
            return "DELETE window"
        if s.startswith("insert") and "on conflict" in s:
            return "INSERT .. ON CONFLICT"
        if s.startswith("insert"):
            return "INSERT .. SELECT"
        if " having " in s:
            return "key check (GROUP BY key HAVING ..)"
        if "'<null>'" in s:
            return "window checksum (hash of every row)"
        if s.startswith('select count(*) from "payouts"'):
            return "COUNT(*) of the window"
        if s.startswith("select count(*) from (select"):
            return "COUNT(*) of the SELECT"
        return "other SQL"

    def take(self, total: float) -> dict[str, float]:
        """This call's steps; 'Python and driver (rest)' is what no step accounts for."""
        steps = dict(self.steps)
        accounted = sum(v for k, v in steps.items() if k != "render (sqlglot)")
        steps["Python and driver (rest, incl. render)"] = total - accounted
        self.steps = defaultdict(float)
        self.statements = []
        return steps


def run_operator(adapter: Any, spec: Any, strategy: str, n: int, inst: Instrument | None) -> dict[str, Any]:
    from airflow_idempotent.strategies import merge, overwrite

    t0 = time.perf_counter()
    result = overwrite(adapter, spec) if strategy == "overwrite" else merge(adapter, spec, list(KEYS))
    total = time.perf_counter() - t0
    if strategy == "overwrite":
        assert (result.rows_deleted, result.rows_inserted) == (n, n), result
    else:
        assert (result.source_rows, result.rows_inserted, result.rows_updated) == (n, 0, n), result
    return {"total": total, "steps": inst.take(total) if inst else {}}


# --------------------------------------------------------------------------------- child processes
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS: Linux `clear_refs` value 5."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


@contextmanager
def rss_meter(out: dict[str, Any], prefix: str) -> Iterator[None]:
    """Peak RSS growth during the block: VmHWM after a reset (exact), and ru_maxrss growth (lower bound:
    0 when the block's peak stays below the process's earlier peak)."""
    gc.collect()
    hwm_ok = _reset_hwm()
    rss0 = _status_kb("VmRSS")
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    maxrss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm1 = _status_kb("VmHWM")
    out[f"{prefix}_rss_before_kb"] = rss0
    out[f"{prefix}_hwm_delta_kb"] = (hwm1 - rss0) if hwm_ok and hwm1 is not None and rss0 else None
    out[f"{prefix}_maxrss_delta_kb"] = maxrss1 - maxrss0


def child_operator(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """In a fresh process: a cold call (first call of a process, as an Airflow task makes it), then a
    warm one under tracemalloc. Both are reruns of the window."""
    from airflow_idempotent.adapters import adapter_for

    pg = Pg(cfg["host"], cfg["port"], cfg["user"], cfg["db"])
    adapter = adapter_for(engine_for(pg))
    spec = make_spec()
    out: dict[str, Any] = {}
    with rss_meter(out, "cold"):
        out["cold_s"] = run_operator(adapter, spec, cfg["strategy"], cfg["n"], None)["total"]
    gc.collect()
    tracemalloc.start()
    with rss_meter(out, "warm"):
        out["warm_s"] = run_operator(adapter, spec, cfg["strategy"], cfg["n"], None)["total"]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out["tracemalloc_peak_kb"] = peak / 1024
    return out


def child_insert_rows(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """common-sql's insert_rows(replace=True) through PostgresHook, rows fetched into Python first."""
    import logging

    from airflow.providers.postgres.hooks import postgres as pg_hooks
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    logging.getLogger("airflow").setLevel(logging.WARNING)  # one INFO line per 1000 rows otherwise
    hook = PostgresHook(postgres_conn_id="bench_pg")
    out: dict[str, Any] = {"driver": "psycopg (3)" if pg_hooks.USE_PSYCOPG3 else "psycopg2"}
    t0 = time.perf_counter()
    with rss_meter(out, "fetch"):
        rows = hook.get_records(hand_sql()["select"], parameters=bind_params())
    out["fetch_s"] = time.perf_counter() - t0
    assert len(rows) == cfg["n"], len(rows)
    times = []
    for i in range(cfg["repeat"]):
        meter: dict[str, Any] = {}
        t0 = time.perf_counter()
        with rss_meter(meter, "insert"):
            hook.insert_rows(
                "payouts", rows, target_fields=list(COLUMNS), replace=True, replace_index=list(KEYS)
            )
        times.append(time.perf_counter() - t0)
        if i == 0:
            out.update(meter)
        if i + 1 < cfg["repeat"]:
            admin = Pg(cfg["host"], cfg["port"], cfg["user"], cfg["db"]).connect(autocommit=True)
            try:
                reset(admin)
            finally:
                admin.close()
    out["insert_s"] = times
    return out
