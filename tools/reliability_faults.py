"""The reliability report's sections about damage done on purpose: the crash matrix (SIGKILL at
each step), the side effects (crash around a claim, a call, a ledger commit) and the faults
injected (connections dropped, stores refused or hung, zombies, restarts) with what was measured.

Part of `tools/reliability_report.py`, which runs with tools/ first on the module path.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from reliability_figures import DATABASES, ok_count, outcomes, table, total


def crash_matrix(cases: list[dict[str, Any]]) -> list[str]:
    crash = [c for c in cases if c["suite"] == "crash"]
    if not crash:
        return ["No crash-matrix case in the results."]
    strategies = list(dict.fromkeys(c["strategy"] for c in crash))
    out = []
    rows = []
    for db in DATABASES:
        for strategy in strategies:
            group = [c for c in crash if c["database"] == db and c["strategy"] == strategy]
            if not group:
                continue
            kills = sum(len(c["details"].get("crashes") or []) for c in group)
            attempts = sum(len(c["details"].get("attempts") or []) for c in group)
            history = sum(1 for c in group if c["details"].get("history_complete"))
            rows.append(
                [
                    db,
                    strategy,
                    len(group),
                    kills,
                    attempts,
                    total(group, "rows_lost"),
                    total(group, "duplicates"),
                    sum(int(c["details"].get("extra_rows") or 0) for c in group),
                    f"{history} of {len(group)}",
                    outcomes(group),
                ]
            )
    out += table(
        [
            "database",
            "strategy",
            "scenarios",
            "SIGKILLs",
            "attempts",
            "rows lost",
            "duplicates",
            "extra rows",
            "history complete",
            "outcomes",
        ],
        rows,
        "llrrrrrrrl",
    )
    out += ["", "Crash points, each on every database (scenarios per point, outcomes):", ""]
    points: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in crash:
        point = "random (seeded)" if str(c["crash_point"]).startswith("random") else c["crash_point"]
        points[(c["strategy"], point)].append(c)
    out += table(
        ["strategy", "crash point", "scenarios", "rows lost", "duplicates", "outcomes"],
        [
            [s, p, len(g), total(g, "rows_lost"), total(g, "duplicates"), outcomes(g)]
            for (s, p), g in sorted(points.items(), key=lambda kv: (strategies.index(kv[0][0]), kv[0][1]))
        ],
        "llrrrl",
    )
    rows_kill = sorted({c["details"].get("kill_row") for c in crash if c["details"].get("kill_row")})
    if rows_kill:
        out += ["", f"Mid-INSERT kills struck at sale_id {', '.join(str(r) for r in rows_kill)}."]
    return out


def effects(cases: list[dict[str, Any]]) -> list[str]:
    group = [c for c in cases if c["suite"] == "effects"]
    if not group:
        return ["No effect case in the results."]
    rows = []
    for db in DATABASES:
        for kind in sorted({c["strategy"] for c in group}):
            sub = [c for c in group if c["database"] == db and c["strategy"] == kind]
            if not sub:
                continue
            seen = sum(int(c["details"].get("effects_seen") or 0) for c in sub)
            rows.append([db, kind, len(sub), len(sub), seen, total(sub, "duplicates"), outcomes(sub)])
    return table(
        [
            "ledger database",
            "effect",
            "crash points",
            "identities",
            "effects seen by the peer",
            "duplicates",
            "outcomes",
        ],
        rows,
        "llrrrrl",
    )


def faults(cases: list[dict[str, Any]]) -> list[str]:
    group = [c for c in cases if c["suite"] == "fault"]
    if not group:
        return ["No fault case in the results."]
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in group:
        kinds[c["details"].get("fault") or c["case"]].append(c)
    out = table(
        ["fault", "cases", "survived", "databases", "rows lost", "duplicates", "measured"],
        [
            [
                kind,
                len(sub),
                ok_count(sub),
                ", ".join(d for d in DATABASES if any(c["database"] == d for c in sub)),
                total(sub, "rows_lost"),
                total(sub, "duplicates"),
                measured(kind, sub),
            ]
            for kind, sub in kinds.items()
        ],
        "lrrlrrl",
    )
    return out


def status_of_try(record: dict, try_number: int) -> str | None:
    """The status of one try in a record's `attempts` (keyed by try number; JSON makes it a string)."""
    attempts = record.get("attempts") or {}
    entry = attempts.get(str(try_number)) or attempts.get(try_number) or {}
    return entry.get("status")


def seconds_range(values: list[float], unit: str = "s") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.2f} {unit}" if lo == hi else f"{lo:.2f}-{hi:.2f} {unit}"


def measured(kind: str, sub: list[dict[str, Any]]) -> str:
    d = [c["details"] for c in sub]
    if kind == "connection_dropped":
        errors = sorted({str(x.get("error", "")).split(":")[0] for x in d})
        return (
            f"error after {seconds_range([x.get('seconds_to_error') for x in d])} ({', '.join(errors)}); "
            "committed by the failed attempt: "
            f"{sum(0 if x.get('nothing_committed') else 1 for x in d)} cases; "
            f"rerun {seconds_range([x.get('rerun_seconds') for x in d])}"
        )
    if kind.startswith("history_store"):
        return (
            f"write with the store down {seconds_range([x.get('write_seconds_store_down') for x in d])}, "
            f"store up {seconds_range([x.get('write_seconds_store_up') for x in d])}; records spooled "
            f"{sum(int(x.get('records_spooled') or 0) for x in d)}, delivered later "
            f"{sum(int(x.get('records_delivered_later') or 0) for x in d)}; guarded backfill refused "
            f"{sum(1 for x in d if x.get('guarded_backfill_refused'))} of {len(d)}"
        )
    if kind == "zombie_beside_retry":
        return (
            f"retry's lock wait {seconds_range([x.get('retry_lock_wait_seconds') for x in d])} "
            f"(zombie held the lock 2 s inside its INSERT, then was fenced: "
            f"{sum(1 for x in d if status_of_try(x, 1) == 'failed')} of {len(d)}); "
            f"history writes per window {sorted({x.get('history_writes') for x in d})}"
        )
    if kind == "database_restart":
        return (
            f"restart (immediate) {seconds_range([x.get('restart_seconds') for x in d])}; "
            f"{sum(x.get('windows') or 0 for x in d)} windows, failed attempts "
            f"{sum(int(x.get('failed_attempts') or 0) for x in d)}, retried; backfill "
            f"{seconds_range([x.get('backfill_seconds') for x in d])}"
        )
    if kind == "scheduler_restart":
        x = d[0]
        return (
            f"{x.get('windows')} windows, {x.get('windows_done_before_kill')} done and "
            f"{x.get('task_instances_in_flight_at_kill')} in flight at the kill; backfill complete "
            f"{x.get('seconds_from_kill_to_backfill_complete')} s after it (the restarted scheduler's "
            f"orphaned_tasks_check_interval {x.get('orphaned_tasks_check_interval_seconds')} s, Airflow's "
            f"default 300 s; scheduler_health_check_threshold "
            f"{x.get('scheduler_health_check_threshold_seconds')} s, the default); try numbers "
            f"{x.get('try_numbers')}; history: {x.get('history_windows')} of {x.get('windows')} "
            f"windows recorded, {x.get('history_writes')} write records"
        )
    if kind == "history_record_refused":
        x = d[0]
        return (
            f"a record whose semantics is longer than its column, then "
            f"{int(x.get('records_written') or 1) - 1} writes: "
            f"{x.get('records_stored')} of {x.get('records_written')} records stored, "
            f"{x.get('records_left_in_spool')} left in the spool"
            + (
                f"; longest spool file name {x['longest_spool_file_name']} characters"
                if x.get("longest_spool_file_name")
                else ""
            )
        )
    return "; ".join(str(x["summary"]) for x in d if x.get("summary")) or "-"
