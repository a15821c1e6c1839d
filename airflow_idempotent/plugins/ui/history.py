"""The history the pages and the API serve: the CLI's query (`window_history`), with each write's
recorded diff, limited to the DAGs the caller may read; one task instance's tries; the writes a
backfill's windows already have, or have landed so far.

Reads only the history store (never Airflow's metadata database); SQL is the history module's
SQLAlchemy expressions with bound values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from airflow_idempotent.history.dag_versions import fill_versions
from airflow_idempotent.history.report import (
    HistoryFilter,
    attempt_failed,
    first_line,
    split_target,
    window_history,
    writes_query,
)
from airflow_idempotent.history.runs import run_history
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.datamodels import HistoryQuery

Span = tuple[datetime, datetime]


def parse_json(text: Any) -> Any:
    """A recorded JSON column (diff, fingerprint parts) parsed; None when it is not JSON."""
    if not isinstance(text, str) or not text:
        return text if isinstance(text, dict) else None
    try:
        return json.loads(text)
    except ValueError:
        return None


def pretty_json(text: Any) -> str | None:
    """A recorded JSON column indented for reading (the text itself when it is not JSON)."""
    parsed = parse_json(text)
    if parsed is None:
        return text if isinstance(text, str) else None
    return json.dumps(parsed, indent=2, sort_keys=True, default=str)


def attach_diffs(store: HistoryStore, flt: HistoryFilter, windows: list[dict[str, Any]]) -> None:
    """Each write's recorded diff (parsed), read through the same writes_query as the history."""
    if not windows or all("diff" in w for win in windows for w in win["writes"]):
        for win in windows:
            for w in win["writes"]:
                w["diff"] = parse_json(w.get("diff"))
        return
    sub = writes_query(flt).subquery("w")
    stmt = sa.select(
        sub.c.dag_id, sub.c.run_id, sub.c.task_id, sub.c.map_index, sub.c.try_number, sub.c.diff
    ).where(sub.c.diff.is_not(None))
    with store.engine.connect() as conn:
        diffs = {tuple(row[:5]): parse_json(row[5]) for row in conn.execute(stmt)}
    for win in windows:
        for w in win["writes"]:
            key = (w["dag_id"], w["run_id"], w["task_id"], w["map_index"], w["try_number"])
            w["diff"] = diffs.get(key)


def read_history(store: HistoryStore, query: HistoryQuery, allowed: set[str]) -> list[dict[str, Any]]:
    """The CLI's history (window_history) plus each write's diff, of the `allowed` DAGs only: they
    choose the windows, and no other DAG's write, attempt or effect is read."""
    flt = query.filter(dag_ids=allowed)
    windows = window_history(store, flt)
    attach_diffs(store, flt, windows)
    for win in windows:
        for write in win["writes"]:
            write["table"] = win["table"]
    return windows


def read_runs(store: HistoryStore, query: HistoryQuery, allowed: set[str]) -> list[dict[str, Any]]:
    """The CLI's DAG runs (`run_history`: every try of every task, window writes or not) of the
    `allowed` DAGs only, as the query's DAG, task and days choose them."""
    return run_history(store, query.filter(dag_ids=allowed))


def _spans_filter(dag_id: str, spans: Sequence[Span]) -> HistoryFilter:
    """The windows `spans` cover that `dag_id` wrote, with only its own writes."""
    return HistoryFilter(
        dag_id=dag_id,
        dag_ids=frozenset({dag_id}),
        start=min(s for s, _ in spans),
        end=max(e for _, e in spans),
        limit=min(10_000, 20 * len(spans)),
    )


def existing_writes(
    store: HistoryStore, dag_id: str, spans: Sequence[Span]
) -> dict[Span, list[dict[str, Any]]]:
    """Per window: the latest written write of each table the DAG wrote for it."""
    if not spans:
        return {}
    out: dict[Span, list[dict[str, Any]]] = {}
    for win in window_history(store, _spans_filter(dag_id, spans)):
        key = (win["window"]["start"], win["window"]["end"])
        written = [w for w in win["writes"] if w["status"] == "written"]
        if written:
            last = written[-1]
            out.setdefault(key, []).append(
                {
                    "target": win["target"],
                    "table": win["table"],
                    "policy_version": last["policy_version"],
                    "dataset_version": last["dataset_version"],
                    "ordinal": last["ordinal"],
                    "row_count": last["row_count"],
                    "semantics": last["semantics"],
                    "written_at": last["written_at"],
                }
            )
    return out


#: What a backfill's status shows of each write.
STATUS_WRITE_FIELDS = (
    "task_id",
    "map_index",
    "try_number",
    "status",
    "ordinal",
    "dataset_version",
    "policy_version",
    "semantics",
    "row_count",
    "checksum",
    "fingerprint",
    "written_at",
    "message",
)


#: A DAG run: (dag_id, run_id). A run id alone names a run of every DAG (backfill runs are named
#: by date only), so writes are always looked up by both.
RunKey = tuple[str, str]


def writes_by_run(
    store: HistoryStore, dag_id: str, spans: Sequence[Span]
) -> dict[RunKey, list[dict[str, Any]]]:
    """Every write of `dag_id` in the windows `spans` cover, by (dag_id, run_id), with its diff and
    flags."""
    if not spans:
        return {}
    flt = _spans_filter(dag_id, spans)
    found = window_history(store, flt)
    attach_diffs(store, flt, found)
    by_run: dict[RunKey, list[dict[str, Any]]] = {}
    for win in found:
        for write in win["writes"]:
            by_run.setdefault((write["dag_id"], write["run_id"]), []).append(
                {
                    "target": win["target"],
                    "table": win["table"],
                    "window": win["window"]["label"],
                    **{name: write[name] for name in STATUS_WRITE_FIELDS},
                    "diff": write.get("diff"),
                    "flags": write.get("flags", []),
                }
            )
    return by_run


def attempt_data(
    store: HistoryStore, dag_id: str, run_id: str, task_id: str, map_index: int
) -> dict[str, Any]:
    """Every try of one task instance: its window write (diff, fingerprint and its parts) and events."""
    keys = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    tries: dict[int, dict[str, Any]] = {}

    def entry(try_number: int) -> dict[str, Any]:
        return tries.setdefault(try_number, {"try_number": try_number, "writes": [], "events": []})

    writes = store.writes(**keys)
    fill_versions(writes)
    for write in writes:
        conn_id, table = split_target(write["target"])
        entry(write["try_number"])["writes"].append(
            {
                **{k: v for k, v in write.items() if k not in ("diff", "fingerprint_parts", "id")},
                "conn_id": conn_id,
                "table": table,
                "diff": parse_json(write.get("diff")),
                "fingerprint_parts": parse_json(write.get("fingerprint_parts")),
                "fingerprint_parts_text": pretty_json(write.get("fingerprint_parts")),
            }
        )
    for event in store.attempts(**keys):
        entry(event["try_number"])["events"].append(
            {k: v for k, v in event.items() if k != "id"}
            | {"failed": attempt_failed(event), "error_line": first_line(event.get("error"))}
        )
    return {**keys, "tries": [tries[n] for n in sorted(tries)]}
