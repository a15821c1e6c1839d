"""Turn the reliability suite's results into RELIABILITY.md.

    python tools/reliability_report.py [--results FILE] [--out FILE]

(defaults: .pytest_cache/reliability/results.jsonl and RELIABILITY.md)

Reads the JSON lines written by tests/reliability (one per case, plus one per pytest session) and
writes tables of figures: per database and strategy (cases, outcomes, rows lost, duplicates),
the faults and what was measured, the hostile inputs tried, the load runs, the seeds, the
machine and the date. Figures only: what ran and what it gave. Exit status 0, or 2 when the
results file is missing or holds no case.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DEFAULT_RESULTS = Path(".pytest_cache/reliability/results.jsonl")
DEFAULT_OUT = Path("RELIABILITY.md")
DATABASES = ("postgres", "mariadb", "sqlite", "duckdb", "spark")


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(cases, sessions, session ends) from the results file."""
    cases, sessions, ends = [], [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as err:
            raise SystemExit(f"{path}:{number}: not JSON ({err})") from None
        kind = item.get("kind")
        if kind == "case":
            cases.append(item)
        elif kind == "session":
            sessions.append(item)
        elif kind == "session_end":
            ends.append(item)
    return cases, sessions, ends


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    """A Markdown table; `align` is one letter per column (l or r), numbers right by default."""
    rows = [[_cell(v) for v in row] for row in rows]
    marks = align or "".join("l" if i == 0 else "r" for i in range(len(header)))
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if m == "r" else "---" for m in marks) + "|",
    ]
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _sum(cases: Iterable[dict[str, Any]], key: str) -> int:
    return sum(int(c.get(key) or 0) for c in cases)


def _outcomes(cases: Sequence[dict[str, Any]]) -> str:
    counts = Counter(c["outcome"] for c in cases)
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (kv[0] != "ok", kv[0])))


def _ok(cases: Sequence[dict[str, Any]]) -> int:
    return sum(1 for c in cases if c["outcome"] == "ok")


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def totals(cases: list[dict[str, Any]]) -> list[str]:
    by_suite: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        by_suite[c["suite"]].append(c)
    rows = []
    for suite in ("crash", "effects", "fault", "hostile", "load"):
        group = by_suite.get(suite, [])
        if not group:
            continue
        inputs = (
            sum(int(c["details"].get("inputs_tried") or 0) for c in group) if suite == "hostile" else None
        )
        rows.append(
            [
                suite,
                len(group),
                _ok(group),
                len(group) - _ok(group),
                _sum(group, "rows_lost") if suite != "hostile" else None,
                _sum(group, "duplicates") if suite != "hostile" else None,
                inputs,
            ]
        )
    every = [c for c in cases if c["suite"] != "control"]
    rows.append(
        [
            "all (goal: 0 rows lost, 0 duplicates)",
            len(every),
            _ok(every),
            len(every) - _ok(every),
            _sum(every, "rows_lost"),
            _sum(every, "duplicates"),
            sum(int(c["details"].get("inputs_tried") or 0) for c in every if c["suite"] == "hostile"),
        ]
    )
    control = by_suite.get("control", [])
    if control:
        rows.append(
            [
                "control: naive append (damage expected)",
                len(control),
                None,
                f"detected {sum(1 for c in control if c['outcome'] == 'detected')}",
                _sum(control, "rows_lost"),
                _sum(control, "duplicates"),
                None,
            ]
        )
    return table(
        ["suite", "cases", "outcome ok", "other outcome", "rows lost", "duplicates", "inputs tried"], rows
    )


def per_database(cases: list[dict[str, Any]]) -> list[str]:
    rows = []
    databases = [d for d in DATABASES if any(c["database"] == d for c in cases)]
    for db in databases:
        group = [
            c for c in cases if c["database"] == db and c["suite"] in ("crash", "effects", "fault", "load")
        ]
        crash = [c for c in group if c["suite"] == "crash"]
        faults = [c for c in group if c["suite"] == "fault"]
        effects = [c for c in group if c["suite"] == "effects"]
        load_ = [c for c in group if c["suite"] == "load"]
        rows.append(
            [
                db,
                len(crash),
                len(effects),
                f"{_ok(faults)} of {len(faults)}",
                len(load_),
                _sum(group, "rows_lost"),
                _sum(group, "duplicates"),
                _outcomes(group),
            ]
        )
    return table(
        [
            "database",
            "crash cases",
            "effect cases",
            "faults survived",
            "load runs",
            "rows lost",
            "duplicates",
            "outcomes",
        ],
        rows,
        "lrrrrrrl",
    )


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
                    _sum(group, "rows_lost"),
                    _sum(group, "duplicates"),
                    sum(int(c["details"].get("extra_rows") or 0) for c in group),
                    f"{history} of {len(group)}",
                    _outcomes(group),
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
            [s, p, len(g), _sum(g, "rows_lost"), _sum(g, "duplicates"), _outcomes(g)]
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
            rows.append([db, kind, len(sub), len(sub), seen, _sum(sub, "duplicates"), _outcomes(sub)])
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
                _ok(sub),
                ", ".join(d for d in DATABASES if any(c["database"] == d for c in sub)),
                _sum(sub, "rows_lost"),
                _sum(sub, "duplicates"),
                _measured(kind, sub),
            ]
            for kind, sub in kinds.items()
        ],
        "lrrlrrl",
    )
    return out


def _status_of_try(record: dict, try_number: int) -> str | None:
    """The status of one try in a record's `attempts` (keyed by try number; JSON makes it a string)."""
    attempts = record.get("attempts") or {}
    entry = attempts.get(str(try_number)) or attempts.get(try_number) or {}
    return entry.get("status")


def _range(values: list[float], unit: str = "s") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.2f} {unit}" if lo == hi else f"{lo:.2f}-{hi:.2f} {unit}"


def _measured(kind: str, sub: list[dict[str, Any]]) -> str:
    d = [c["details"] for c in sub]
    if kind == "connection_dropped":
        errors = sorted({str(x.get("error", "")).split(":")[0] for x in d})
        return (
            f"error after {_range([x.get('seconds_to_error') for x in d])} ({', '.join(errors)}); "
            "committed by the failed attempt: "
            f"{sum(0 if x.get('nothing_committed') else 1 for x in d)} cases; "
            f"rerun {_range([x.get('rerun_seconds') for x in d])}"
        )
    if kind.startswith("history_store"):
        return (
            f"write with the store down {_range([x.get('write_seconds_store_down') for x in d])}, "
            f"store up {_range([x.get('write_seconds_store_up') for x in d])}; records spooled "
            f"{sum(int(x.get('records_spooled') or 0) for x in d)}, delivered later "
            f"{sum(int(x.get('records_delivered_later') or 0) for x in d)}; guarded backfill refused "
            f"{sum(1 for x in d if x.get('guarded_backfill_refused'))} of {len(d)}"
        )
    if kind == "zombie_beside_retry":
        return (
            f"retry's lock wait {_range([x.get('retry_lock_wait_seconds') for x in d])} "
            f"(zombie held the lock 2 s inside its INSERT, then was fenced: "
            f"{sum(1 for x in d if _status_of_try(x, 1) == 'failed')} of {len(d)}); "
            f"history writes per window {sorted({x.get('history_writes') for x in d})}"
        )
    if kind == "database_restart":
        return (
            f"restart (immediate) {_range([x.get('restart_seconds') for x in d])}; "
            f"{sum(x.get('windows') or 0 for x in d)} windows, failed attempts "
            f"{sum(int(x.get('failed_attempts') or 0) for x in d)}, retried; backfill "
            f"{_range([x.get('backfill_seconds') for x in d])}"
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


def hostile(cases: list[dict[str, Any]]) -> list[str]:
    group = [c for c in cases if c["suite"] == "hostile"]
    if not group:
        return ["No hostile-input case in the results."]
    rows = []
    for c in group:
        d = c["details"]
        answers = d.get("answers") or {}
        known = d.get("known_findings") or {}
        statuses = d.get("statuses") or {}
        if not answers or set(answers) == {"accepted"}:  # requests: what the servers answered
            flat: Counter[str] = Counter()
            for key, value in statuses.items():
                for status in value.values() if isinstance(value, dict) else [key] * int(value):
                    flat[f"HTTP {status}"] += 1
            answers = dict(flat) or answers
        rows.append(
            [
                c["case"].removeprefix("hostile/"),
                c["database"],
                d.get("inputs_tried"),
                ", ".join(f"{k} {v}" for k, v in sorted(answers.items())) or "-",
                d.get("unexplained", 0),
                ", ".join(f"{k} x{v}" for k, v in sorted(known.items())) or "-",
                c["outcome"],
            ]
        )
    return table(
        ["target", "database", "inputs tried", "answers", "unexplained", "findings", "outcome"],
        rows,
        "llrlrll",
    )


def conformance(cases: list[dict[str, Any]]) -> list[str]:
    """The schemathesis run over the UI API's document: checks, callers, failures by kind."""
    out = []
    for c in (c for c in cases if c["case"] == "hostile/schemathesis_ui_api"):
        d = c["details"]
        kinds: Counter[str] = Counter()
        for key, count in (d.get("failure_kinds") or {}).items():
            kinds[key.rsplit(": ", 1)[-1]] += int(count)
        failures = ", ".join(f"{k} {v}" for k, v in kinds.most_common()) or "none"
        out.append(
            f"OpenAPI conformance (schemathesis {d.get('schemathesis')}, {len(d.get('checks') or [])} "
            f"checks: {', '.join(d.get('checks') or [])}), as {', '.join(d.get('users') or ['admin'])}: "
            f"{d.get('inputs_tried')} requests to {d.get('operations')} operations "
            f"({d.get('examples_per_variant')} examples per operation, variant, mode and user) in "
            f"{d.get('seconds')} s; failures: {failures}; schema-valid requests refused by the guard "
            f"(a message, not input problems): {sum((d.get('guard_refusals') or {}).values())}."
        )
    return ["", *out] if out else []


def load_runs(cases: list[dict[str, Any]]) -> list[str]:
    group = [c for c in cases if c["suite"] == "load"]
    if not group:
        return ["No load case in the results (the e2e part did not run)."]
    windows = sorted({int(c["details"].get("windows") or 0) for c in group})
    ran = "all of them ran" if windows == [365] else "fewer than asked: IDEM_RELIABILITY_LOAD_WINDOWS"
    head = [
        f"Windows per run: {', '.join(str(w) for w in windows)} (asked: 365; {ran}).",
        "",
        "Lock wait: seconds from the operator asking for its window's transaction to holding it "
        "(connect + the window's lock), logged by every write; writes of one window by the backfill "
        "and by the scheduled runs wait for each other there.",
        "",
    ]
    rows = []
    for c in group:
        d = c["details"]
        waits = d.get("lock_waits") or {}
        hist = d.get("history") or {}
        rows.append(
            [
                c["case"].removeprefix("load/"),
                d.get("windows"),
                d.get("max_active_runs"),
                d.get("concurrent_scheduled_runs"),
                d.get("create_seconds"),
                d.get("wall_seconds"),
                d.get("windows_per_minute"),
                c["rows_lost"],
                c["duplicates"],
                f"{hist.get('write_records')} / {hist.get('successful_attempts')} "
                f"({hist.get('records_found_in_spool', 0)} from the spool)",
                f"{waits.get('p50_s')} / {waits.get('p95_s')} / {waits.get('max_s')}",
                waits.get("over_0_1_s"),
                c["outcome"],
            ]
        )
    return head + table(
        [
            "run",
            "windows",
            "max active runs",
            "scheduled runs beside",
            "backfill created in s",
            "wall s",
            "windows/min",
            "rows lost",
            "duplicates",
            "history records / successful attempts",
            "lock wait p50 / p95 / max s",
            "waits > 0.1 s",
            "outcome",
        ],
        rows,
        "lrrrrrrrrrrrl",
    )


def findings(cases: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in cases:
        if c["outcome"] == "ok" or c["suite"] == "control":
            continue
        d = c["details"]
        samples = [
            *(d.get("crash_samples") or []),
            *(d.get("finding_samples") or []),
            *(d.get("failures") or []),
            *(d.get("problems") or []),
        ]
        if c["suite"] == "fault":
            samples = [*samples, _measured(d.get("fault") or "", [c])]
        out.append(f"- `{c['case']}` ({c['database'] or 'no database'}): {c['outcome']}")
        for sample in list(dict.fromkeys(str(x) for x in samples))[:4]:
            out.append(f"  - `{str(sample)[:220]}`")
    return out or ["None: every case's outcome is ok."]


def machine(sessions: list[dict[str, Any]], ends: list[dict[str, Any]]) -> list[str]:
    if not sessions:
        return ["No session line in the results."]
    m = sessions[-1].get("machine") or {}
    versions = m.get("versions") or {}
    out = table(
        ["item", "value"],
        [
            ["CPU", f"{m.get('cpu')}, {m.get('cores')} cores"],
            ["memory", f"{m.get('memory_gib')} GiB"],
            ["OS", m.get("os")],
            ["load average at start (1, 5, 15 min)", ", ".join(str(x) for x in m.get("load_at_start") or [])],
            *[[name, value] for name, value in sorted(versions.items())],
        ],
        "ll",
    )
    out += ["", "Sessions (one per pytest invocation):", ""]
    by_id = {e["session"]: e for e in ends}
    out += table(
        ["session", "started (UTC)", "markers", "seed", "cases", "seconds"],
        [
            [
                s["session"],
                s["at"],
                s.get("markexpr") or "(all)",
                str(s.get("seed")),
                by_id.get(s["session"], {}).get("cases"),
                by_id.get(s["session"], {}).get("seconds"),
            ]
            for s in sessions
        ],
        "llllrr",
    )
    return out


def render(
    cases: list[dict[str, Any]], sessions: list[dict[str, Any]], ends: list[dict[str, Any]], source: str
) -> str:
    seeds = sorted({int(s["seed"]) for s in sessions if s.get("seed") is not None})
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    first = min((s["at"] for s in sessions), default="-")
    lines = [
        "# Reliability",
        "",
        "Generated by `tools/reliability_report.py` (run by `make reliability` and `make test`) over "
        f"`{source}` on {generated}; the suite ran from {first}. "
        f"Seed{'s' if len(seeds) != 1 else ''}: {', '.join(str(s) for s in seeds) or '-'} "
        "(repeat a run with `IDEM_RELIABILITY_SEED=<seed> make reliability`). "
        "The suite is `tests/reliability/`; every figure below is a count or a measurement from that run.",
        "",
        "## Totals",
        "",
        *totals(cases),
        "",
        "## Per database",
        "",
        *per_database(cases),
        "",
        "## Crash matrix",
        "",
        "SIGKILL of the task process at each step, then three reruns; the whole target table "
        "compared row by row with one clean run from the same damaged start (1,247 of the window's "
        "2,000 rows, 3 stale keys, both neighbouring windows written). History complete: one write "
        "record per attempt that completed, the last one holding the window's final row count (the "
        "commit of an attempt killed after commit, before its record, has no record of its own: the "
        "rerun's record carries the same checksum).",
        "",
        *crash_matrix(cases),
        "",
        "## Side effects",
        "",
        "A crash before the claim, after the claim, after the call and after the ledger's commit, "
        "then three reruns, against a loopback payments API (Idempotency-Key) and a file outbox. "
        "The ledger lives in the history store, which runs on PostgreSQL, MariaDB or SQLite; DuckDB "
        "is a warehouse only (a DuckDB store is refused, tests/test_history_writes.py), so a DAG "
        "writing to DuckDB keeps its effects in one of these three.",
        "",
        *effects(cases),
        "",
        "## Faults",
        "",
        *faults(cases),
        "",
        "## Hostile input",
        "",
        "Property-based (hypothesis, the session's seed). Answers: the result, or the package's own "
        "error; a crash is any other exception. A finding not fixed yet is named in the table and "
        "below, and has a strict xfail test in tests/reliability/ asserting the fixed behaviour; "
        "the four found on 2026-11-30 (a trailing newline accepted in identifiers, the string 'now' "
        "read as the wall clock, an OverflowError at the calendar's edge, a conf value longer than "
        "its history column) are fixed and their tests now assert it plainly.",
        "",
        *hostile(cases),
        *conformance(cases),
        "",
        "## Load",
        "",
        *load_runs(cases),
        "",
        "## Cases whose outcome is not ok",
        "",
        *findings(cases),
        "",
        "## Machine",
        "",
        *machine(sessions, ends),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write RELIABILITY.md from the reliability suite's results.")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=f"default {DEFAULT_RESULTS}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    if not args.results.exists():
        print(
            f"no results at {args.results}: run `make reliability` (or pytest tests/reliability) first",
            file=sys.stderr,
        )
        return 2
    cases, sessions, ends = load(args.results)
    if not cases:
        print(f"{args.results} holds no case: the suite recorded nothing", file=sys.stderr)
        return 2
    args.out.write_text(render(cases, sessions, ends, str(args.results)), encoding="utf-8")
    suite = [c for c in cases if c["suite"] != "control"]
    outcomes = Counter(c["outcome"] for c in suite)
    lost = sum(int(c.get("rows_lost") or 0) for c in suite)
    dups = sum(int(c.get("duplicates") or 0) for c in suite)
    print(
        f"wrote {args.out}: {len(cases)} cases from {len(sessions)} session(s); outside the control: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))}; rows lost {lost}, duplicates {dups}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
