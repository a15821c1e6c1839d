"""A window's diff: production's rows against the staged result, by key, and its stop conditions.

Computed in the database (three set-based queries, no row passes through Python) and judged in
Python against the thresholds: every limit the diff exceeds is named, with its figure.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy.engine import Connection
from sqlglot import exp

from airflow_idempotent.adapters.base import EngineAdapter
from airflow_idempotent.guard.config import Thresholds
from airflow_idempotent.write_spec import WriteSpec

Number = Decimal | float
#: Keys shown per kind (changed, added, removed) in a preview or an approval request.
KEY_SAMPLE_SIZE = 10


def _fmt(value: Number | int) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def _json_number(value: Number) -> str | float:
    """Decimals as exact strings (money), floats as they are."""
    return str(value) if isinstance(value, Decimal) else value


@dataclass(frozen=True)
class WindowDiff:
    """Production's window compared with the staged result, by key."""

    rows_before: int
    rows_after: int
    added: int
    removed: int
    changed: int
    unchanged: int
    #: per measure column: (sum before, sum after)
    measures: dict[str, tuple[Number, Number]] = field(default_factory=dict)

    @property
    def row_delta(self) -> int:
        return self.rows_after - self.rows_before

    def to_json(self) -> dict[str, Any]:
        return {
            "rows_before": self.rows_before,
            "rows_after": self.rows_after,
            "row_delta": self.row_delta,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "measures": {
                name: {
                    "before": _json_number(before),
                    "after": _json_number(after),
                    "delta": _json_number(after - before),  # type: ignore[operator]
                }
                for name, (before, after) in self.measures.items()
            },
        }

    def breaches(self, t: Thresholds) -> list[str]:
        """Every limit of `t` this diff exceeds, each as a sentence naming the limit and the figure."""
        out: list[str] = []
        for what, figure, cap in (
            ("changed", self.changed, t.max_changed_rows),
            ("removed", self.removed, t.max_removed_rows),
            ("added", self.added, t.max_added_rows),
        ):
            if cap is not None and figure > cap:
                out.append(f"{what} {figure} rows > max_{what}_rows {cap}")
        for name, limit in t.max_measure_abs_change.items():
            if name not in self.measures:
                out.append(f"max_measure_abs_change names {name!r}, whose sum the diff did not compute")
                continue
            before, after = self.measures[name]
            delta = abs(after - before)  # type: ignore[operator]
            if delta > limit:
                out.append(
                    f"{name} sum changed by {_fmt(delta)} ({_fmt(before)} -> {_fmt(after)}) "
                    f"> max_measure_abs_change {limit:g}"
                )
        for name, limit in t.max_measure_rel_change.items():
            if name not in self.measures:
                out.append(f"max_measure_rel_change names {name!r}, whose sum the diff did not compute")
                continue
            before, after = self.measures[name]
            if before == 0:
                if after != 0:
                    out.append(
                        f"{name} sum changed from 0 to {_fmt(after)} (relative change unbounded) "
                        f"> max_measure_rel_change {limit:g}"
                    )
                continue
            rel = abs(after - before) / abs(before)  # type: ignore[operator]
            if rel > limit:
                out.append(
                    f"{name} sum changed by {float(rel):.2%} ({_fmt(before)} -> {_fmt(after)}) "
                    f"> max_measure_rel_change {limit:g}"
                )
        if t.max_shrink is not None and self.rows_after < self.rows_before * (1 - t.max_shrink):
            shrink = 1 - self.rows_after / self.rows_before
            out.append(
                f"new result has {self.rows_after} rows, {shrink:.1%} fewer than the existing "
                f"{self.rows_before} > max_shrink {t.max_shrink:g}"
            )
        return out


def _number(value: Any) -> Number:
    if value is None:
        return Decimal(0)
    if isinstance(value, Decimal | float):
        return value
    if isinstance(value, int):
        return Decimal(value)
    return Decimal(str(value))


def diff_window(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    stage: str,
    columns: Sequence[str],
    keys: Sequence[str],
    measures: Sequence[str],
    params: Mapping[str, Any],
    production: Callable[[exp.Select], exp.Select] | None = None,
    sums: tuple[Sequence[Any], Sequence[Any]] | None = None,
) -> WindowDiff:
    """Production's window against the staged rows in table `stage`: three set-based queries
    (production's window, the staged rows, and the keys in both), in the write's transaction.
    `production` rewrites the queries that read the target (a table format's replay reads it as of
    the version the window's first write committed). `sums`: the rows of `window_sums` over the
    window and over the staging (count, then each measure's sum) when the caller has them already,
    which spares their two scans."""
    assert spec.partition_column is not None
    at = production or (lambda select: select)
    if sums is None:
        before = adapter.execute(
            conn, at(adapter.window_sums(spec.table, spec.partition_column, measures)), params
        ).one()
        after = adapter.execute(conn, adapter.window_sums(stage, None, measures), {}).one()
    else:
        before, after = sums
    compare = [c for c in columns if c not in keys]
    matched, changed = adapter.execute(
        conn, at(adapter.diff_matched(stage, spec.table, spec.partition_column, keys, compare)), params
    ).one()
    rows_before, rows_after, matched, changed = int(before[0]), int(after[0]), int(matched), int(changed)
    return WindowDiff(
        rows_before=rows_before,
        rows_after=rows_after,
        added=rows_after - matched,
        removed=rows_before - matched,
        changed=changed,
        unchanged=matched - changed,
        measures={m: (_number(before[i + 1]), _number(after[i + 1])) for i, m in enumerate(measures)},
    )


def plain_key(key: Any) -> Any:
    """A sampled key as JSON shows it: a scalar for one key column, else a list."""
    values = [v if isinstance(v, int | float | str) or v is None else str(v) for v in key]
    return values[0] if len(values) == 1 else values


def key_sample(
    adapter: EngineAdapter,
    conn: Connection,
    spec: WriteSpec,
    stage: str,
    keys: Sequence[str],
    compare: Sequence[str],
    params: Mapping[str, Any],
    known_empty: Collection[str] = (),
) -> dict[str, list[Any]]:
    """Up to KEY_SAMPLE_SIZE keys changed, added and removed, each one set-based query.

    `known_empty`: the kinds the caller's diff counted none of (`empty_kinds`), answered [] without
    their query, which scans both sides to find nothing."""
    assert spec.partition_column is not None
    stg, tgt = adapter.STAGING_ALIAS, adapter.TARGET_ALIAS
    match = exp.and_(*[exp.EQ(this=adapter.column(k, stg), expression=adapter.column(k, tgt)) for k in keys])
    window = adapter.in_window(spec.partition_column, tgt)
    ordered = [adapter.column(k, stg) for k in keys]

    def run(query: exp.Select) -> list[Any]:
        return [tuple(r) for r in adapter.execute(conn, query.limit(KEY_SAMPLE_SIZE), params)]

    out: dict[str, list[Any]] = {"changed": [], "added": [], "removed": []}
    differs = (
        exp.or_(
            *[adapter.null_safe_distinct(adapter.column(c, stg), adapter.column(c, tgt)) for c in compare]
        )
        if compare
        else exp.false()
    )
    if "changed" not in known_empty:
        out["changed"] = run(
            exp.select(*ordered)
            .from_(adapter.table(stage, stg))
            .join(adapter.table(spec.table, tgt), on=match)
            .where(exp.and_(window, exp.paren(differs)))
            .order_by(*[o.copy() for o in ordered])
        )
    present = exp.Exists(
        this=exp.select(exp.Literal.number(1))
        .from_(adapter.table(spec.table, tgt))
        .where(exp.and_(match, window))
    )
    if "added" not in known_empty:
        out["added"] = run(
            exp.select(*[o.copy() for o in ordered])
            .from_(adapter.table(stage, stg))
            .where(exp.not_(present))
            .order_by(*[o.copy() for o in ordered])
        )
    staged = exp.Exists(
        this=exp.select(exp.Literal.number(1)).from_(adapter.table(stage, stg)).where(match.copy())
    )
    mine = [adapter.column(k, tgt) for k in keys]
    if "removed" not in known_empty:
        out["removed"] = run(
            exp.select(*mine)
            .from_(adapter.table(spec.table, tgt))
            .where(exp.and_(window.copy(), exp.not_(staged)))
            .order_by(*[m.copy() for m in mine])
        )
    return out


def empty_kinds(diff: WindowDiff, target_keys_unique: bool) -> frozenset[str]:
    """The sample kinds `diff` proves empty, for `key_sample`'s `known_empty`; the staged keys are
    unique (checked before the diff). Changed and removed count exactly what their samples select.
    Added is staged rows minus matched pairs, which a key repeated in the target's window makes too
    small: it proves no added row only when the target's keys are unique."""
    kinds = {"changed": diff.changed, "removed": diff.removed}
    if target_keys_unique:
        kinds["added"] = diff.added
    return frozenset(kind for kind, count in kinds.items() if count == 0)
