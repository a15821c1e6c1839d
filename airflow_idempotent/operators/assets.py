"""The asset a target table is known by, and the event a window write adds to it: which window of
the target changed, and to which version (for downstream DAGs, partitioned runs and lineage)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset

from airflow_idempotent.window import Window, covered_partition_keys


def target_asset(conn_id: str, table: str) -> Asset:
    """The asset a target table is known by: one per (connection, table)."""
    return Asset(name=f"{conn_id}.{table}", uri=f"idempotent://{conn_id}/{table}")


def window_event(
    context: Mapping[str, Any],
    asset: Asset,
    strategy: str,
    window: Window,
    out: Mapping[str, Any],
    covered: Sequence[Window] | None = None,
    lookback: int = 0,
) -> None:
    """Put the window, ordinal, dataset version, checksum, fingerprint and policy of a write in the
    run's event of `asset`; a partitioned run's event also names its partition, and with lookback
    (`covered`: the periods rewritten) every earlier partition the write rewrote."""
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
    if out.get("periods"):  # lookback: every covered period changed
        extra["periods"] = [p["window"] for p in out["periods"]]
        extra["lookback"] = lookback
    event = context["outlet_events"][asset]
    event.extra.update(extra)
    if isinstance(extra["partition_key"], str):  # a partitioned run: downstream runs per partition
        keys = [extra["partition_key"]]
        if lookback and covered:  # and for each earlier partition the write rewrote
            keys = covered_partition_keys(keys[0], covered)
        event.add_partitions(keys)
