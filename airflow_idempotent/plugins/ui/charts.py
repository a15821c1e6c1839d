"""The history's charts: each window's measure totals (and row counts) per dataset version.

Numbers only: the template draws a chart as SVG (escaped), the API answers its series.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from airflow_idempotent.plugins.ui.datamodels import MEASURE_RE

#: Windows in a chart (the newest of the result).
CHART_WINDOWS = 31
#: Charts on a page: the measures first, then the row counts.
MAX_CHARTS = 4
#: Colours of the chart's dataset versions (CSS classes v0..v5).
PALETTE = 6
ROWS_SERIES = "rows"


def to_decimal(value: Any) -> Decimal | None:
    """A recorded figure (number or numeric text) as a finite Decimal, else None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def window_series(window: Mapping[str, Any]) -> dict[str, dict[int, Decimal]]:
    """One window's totals per dataset version: measure (or "rows") -> version -> total.

    A guarded write's diff holds each measure's sum before and after it; the "after" is the
    total of the write's dataset version, the "before" that of the version it replaced (0:
    data that was there before the history began). Row counts come from every write.
    """
    out: dict[str, dict[int, Decimal]] = {}
    previous = 0
    for write in window["writes"]:
        if write.get("status") != "written":
            continue
        version = int(write.get("dataset_version") or 0)
        diff = write.get("diff") if isinstance(write.get("diff"), dict) else None
        rows_before = to_decimal(diff.get("rows_before")) if diff else None
        had_data = previous > 0 or bool(rows_before)
        if diff:
            measures = diff.get("measures")
            for name, sums in measures.items() if isinstance(measures, dict) else []:
                if not isinstance(sums, dict) or not re.fullmatch(MEASURE_RE, str(name)):
                    continue
                points = out.setdefault(str(name), {})
                before, after = to_decimal(sums.get("before")), to_decimal(sums.get("after"))
                if before is not None and had_data and previous not in points:
                    points[previous] = before
                if after is not None:
                    points[version] = after
        rows = out.setdefault(ROWS_SERIES, {})
        if rows_before is not None and had_data and previous not in rows:
            rows[previous] = rows_before
        row_count = to_decimal(write.get("row_count"))
        if row_count is not None:
            rows[version] = row_count
        previous = version
    return {name: points for name, points in out.items() if points}


def fmt_number(value: Decimal | float | int | None, places: int | None = None) -> str:
    """Thousands separated; a Decimal with `places` decimals (default: its own)."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return f"{value:,.{places}f}" if places is not None else f"{value:,}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def places_of(values: Iterable[Decimal | None]) -> int:
    """The decimals to show a set of figures with: the most any of them has, at most 4 (so a
    database that sums money as floats shows 6,612.00 beside 6,459.69, not 6,612.0)."""
    exponents = [v.as_tuple().exponent for v in values if v is not None]
    return min(4, max([0, *(-e for e in exponents if isinstance(e, int))]))


def signed(value: Decimal | None, places: int | None = None) -> str:
    """A change: "+" before a positive one."""
    if value is None:
        return ""
    return ("+" if value > 0 else "") + fmt_number(value, places)


def version_name(version: int) -> str:
    """A dataset version as the charts' legends say it (0: the data before the history began)."""
    return "before history" if version == 0 else f"version {version}"


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    span = hi - lo
    raw = span / count
    magnitude = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = (lo // step) * step
    ticks, tick = [], first
    while tick <= hi + step * 1e-9:
        if tick >= lo - step * 1e-9:
            ticks.append(round(tick, 10))
        tick += step
    return ticks


def build_chart(name: str, groups: list[tuple[str, dict[int, Decimal]]]) -> dict[str, Any]:
    """A grouped bar chart (numbers only; the template draws it as SVG, escaped) and its table."""
    versions = sorted({v for _, points in groups for v in points})
    values = [float(v) for _, points in groups for v in points.values()]
    lo, hi = min(0.0, *values), max(0.0, *values)
    if hi == lo:
        hi = lo + 1
    ticks = _ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    places = places_of(v for _, points in groups for v in points.values())
    left, top, plot_h, bottom = 92, 12, 190, 78
    group_w = max(34, 12 * len(versions) + 14)
    bar_w = (group_w - 10) / max(1, len(versions))
    width = left + group_w * len(groups) + 24

    def y(v: float) -> float:
        return round(top + (hi - v) / (hi - lo) * plot_h, 1)

    bars, labels = [], []
    for gi, (label, points) in enumerate(groups):
        x0 = left + gi * group_w + 5
        for vi, version in enumerate(versions):
            if version not in points:
                continue
            value = float(points[version])
            y_top, y_bottom = y(max(value, 0.0)), y(min(value, 0.0))
            bars.append(
                {
                    "x": round(x0 + vi * bar_w, 1),
                    "y": y_top,
                    "w": round(max(bar_w - 2, 2), 1),
                    "h": round(max(y_bottom - y_top, 1), 1),
                    "cls": f"v{version % PALETTE}",
                    "title": f"{label} · {version_name(version)}: {fmt_number(points[version], places)}",
                }
            )
        labels.append({"x": round(x0 + (group_w - 10) / 2, 1), "y": top + plot_h + 14, "text": label})
    rows = []
    for label, points in groups:
        present = [points[v] for v in versions if v in points]
        change = present[-1] - present[0] if len(present) > 1 else None
        rows.append(
            {
                "label": label,
                "cells": [fmt_number(points.get(v), places) for v in versions],
                "change": signed(change, places),
            }
        )
    return {
        "name": name,
        "title": "rows per window" if name == ROWS_SERIES else f"{name}: total per window",
        "width": width,
        "height": top + plot_h + bottom,
        "plot": {"left": left, "top": top, "right": width - 16, "bottom": top + plot_h, "zero": y(0.0)},
        "ticks": [{"y": y(t), "text": fmt_number(t)} for t in ticks],
        "bars": bars,
        "labels": labels,
        "legend": [{"cls": f"v{v % PALETTE}", "text": version_name(v)} for v in versions],
        "versions": [version_name(v) for v in versions],
        "rows": rows,
    }


def build_charts(windows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each window's measure totals per dataset version: one chart per measure, then rows."""
    ordered = sorted(windows, key=lambda w: (w["window"]["start"], w["target"]))[-CHART_WINDOWS:]
    several_tables = len({w["target"] for w in ordered}) > 1
    per_name: dict[str, list[tuple[str, dict[int, Decimal]]]] = {}
    for win in ordered:
        label = str(win["window"]["label"])
        if several_tables:
            label = f"{win['table']} {label}"
        for name, points in window_series(win).items():
            per_name.setdefault(name, []).append((label, points))
    names = sorted(n for n in per_name if n != ROWS_SERIES)
    if ROWS_SERIES in per_name:
        names.append(ROWS_SERIES)
    return [build_chart(name, per_name[name]) for name in names[:MAX_CHARTS]]


def chart_json(chart: Mapping[str, Any]) -> dict[str, Any]:
    """A chart for the API: its series, without the drawing."""
    return {"measure": chart["name"], "versions": chart["versions"], "windows": chart["rows"]}
