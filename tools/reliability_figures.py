"""The reliability report's Markdown and counting: tables, cells, the figures every section sums
(cases, outcomes, rows lost, duplicates), and the two overall sections (totals, per database).

Part of `tools/reliability_report.py`, which runs with tools/ first on the module path.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

DATABASES = ("postgres", "mariadb", "sqlite", "duckdb", "spark")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    """A Markdown table; `align` is one letter per column (l or r), numbers right by default."""
    rows = [[cell(v) for v in row] for row in rows]
    marks = align or "".join("l" if i == 0 else "r" for i in range(len(header)))
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if m == "r" else "---" for m in marks) + "|",
    ]
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    return out


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def total(cases: Iterable[dict[str, Any]], key: str) -> int:
    return sum(int(c.get(key) or 0) for c in cases)


def outcomes(cases: Sequence[dict[str, Any]]) -> str:
    counts = Counter(c["outcome"] for c in cases)
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (kv[0] != "ok", kv[0])))


def ok_count(cases: Sequence[dict[str, Any]]) -> int:
    return sum(1 for c in cases if c["outcome"] == "ok")


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
                ok_count(group),
                len(group) - ok_count(group),
                total(group, "rows_lost") if suite != "hostile" else None,
                total(group, "duplicates") if suite != "hostile" else None,
                inputs,
            ]
        )
    every = [c for c in cases if c["suite"] != "control"]
    rows.append(
        [
            "all (goal: 0 rows lost, 0 duplicates)",
            len(every),
            ok_count(every),
            len(every) - ok_count(every),
            total(every, "rows_lost"),
            total(every, "duplicates"),
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
                total(control, "rows_lost"),
                total(control, "duplicates"),
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
                f"{ok_count(faults)} of {len(faults)}",
                len(load_),
                total(group, "rows_lost"),
                total(group, "duplicates"),
                outcomes(group),
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
