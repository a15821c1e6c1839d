"""The asset a target table is known by, and the event a window write adds to it: which window of
the target changed, and to which version (for downstream DAGs, partitioned runs and lineage).

A window whose content did not change (same checksum as its previous recorded version) gets no
event by default: a backfill of N unchanged windows would otherwise run every downstream DAG N
times (apache/airflow#52665). Airflow 3.3 registers an event for every asset in the task's
`outlets` when the attempt succeeds (the worker sends `ti.task.outlets` with its success), so
the operator keeps its target in the DAG's declared outlets (the scheduler and the asset graph
know the dependency) and, while it runs, holds the asset back from the task's outlets until it
decides to emit (`hold_event`, `release_event`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from airflow.sdk import Asset

from airflow_idempotent.window import Window, covered_partition_keys

EmitAsset = Literal["changed", "always"]
#: `emit_asset` values besides True (the default, "changed") and False (no outlet at all)
EMIT_MODES: tuple[str, ...] = ("changed", "always")


def target_asset(conn_id: str, table: str) -> Asset:
    """The asset a target table is known by: one per (connection, table)."""
    return Asset(name=f"{conn_id}.{table}", uri=f"idempotent://{conn_id}/{table}")


def emit_mode(value: bool | str) -> EmitAsset | None:
    """The emit mode of an operator's `emit_asset` argument (None: no outlet), or ValueError."""
    if value is True:
        return "changed"
    if value is False:
        return None
    if value not in EMIT_MODES:
        raise ValueError(
            f"emit_asset={value!r}: use 'changed' (the default: an event only when the window's content "
            "changed), 'always' (an event for every successful write), or False (no outlet at all)"
        )
    return value  # type: ignore[return-value]


def hold_event(outlets: list[Any], asset: Asset) -> list[Any]:
    """The task's outlets without `asset`: Airflow then registers no event of it for this attempt."""
    return [o for o in outlets if o != asset]


def release_event(outlets: list[Any], asset: Asset) -> list[Any]:
    """The task's outlets with `asset` back: Airflow registers this attempt's event of it."""
    return outlets if asset in outlets else [*outlets, asset]


def changed_periods(out: Mapping[str, Any]) -> list[int]:
    """Indexes of the periods a write changed (its own window: [0]), from what history derived.

    Changed: a first write of the window, or a checksum other than the window's previous recorded
    version's (the store's `changed`). Without a record (no history, a store that spooled) or a
    checksum, nothing says it is unchanged: it counts as changed.
    """
    periods = out.get("periods")
    if periods:
        return [i for i, p in enumerate(periods) if p.get("changed", True) is not False]
    return [0] if out.get("changed", True) is not False else []


def window_event(
    context: Mapping[str, Any],
    asset: Asset,
    strategy: str,
    window: Window,
    out: Mapping[str, Any],
    covered: Sequence[Window] | None = None,
    lookback: int = 0,
    changed: Sequence[int] | None = None,
) -> None:
    """Put the window, ordinal, dataset version, checksum, fingerprint and policy of a write in the
    run's event of `asset`; a partitioned run's event also names its partition, and with lookback
    (`covered`: the periods rewritten) every earlier partition the write rewrote. `changed`: the
    indexes of the covered periods to name (default all of them; with emit_asset="changed", those
    whose content changed)."""
    extra = {
        "window_start": window.start.isoformat(),
        "window_end": window.end.isoformat(),
        "window": window.label(),
        "strategy": strategy,
        "ordinal": out.get("ordinal"),
        "dataset_version": out.get("dataset_version"),
        "checksum": out.get("checksum"),
        "fingerprint": out.get("fingerprint"),
        "policy_version": out.get("policy_version"),
        "partition_key": context.get("partition_key"),
    }
    if out.get("periods"):  # lookback: the covered periods the event is about
        chosen = range(len(out["periods"])) if changed is None else changed
        extra["periods"] = [out["periods"][i]["window"] for i in chosen]
        extra["lookback"] = lookback
    event = context["outlet_events"][asset]
    event.extra.update(extra)
    if isinstance(extra["partition_key"], str):  # a partitioned run: downstream runs per partition
        keys = [extra["partition_key"]]
        if lookback and covered:  # and for each earlier partition the write rewrote
            keys = covered_partition_keys(keys[0], covered)
            if changed is not None and len(keys) == len(covered) == len(out.get("periods") or ()):
                keys = [keys[i] for i in changed]
        event.add_partitions(keys)
