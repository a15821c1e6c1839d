"""The reliability report's sections about requests made to the package: hostile input (property
based), the OpenAPI conformance run (schemathesis over the UI API's document) and the load runs.

Part of `tools/reliability_report.py`, which runs with tools/ first on the module path.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from reliability_figures import table


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
    beside = sorted({c["details"].get("beside") or "" for c in group} - {""})
    alone = ""  # results recorded before the load test said where it ran: nothing to say
    if beside:
        alone = f" Ran beside {', '.join(beside)}: its wall times and lock waits are not the machine's alone."
    elif any("beside" in c["details"] for c in group):
        alone = " Ran alone on the machine."
    head = [
        f"Windows per run: {', '.join(str(w) for w in windows)} (asked: 365; {ran}).{alone}",
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
