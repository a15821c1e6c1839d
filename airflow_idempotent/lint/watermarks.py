"""Watermarks: a window read from state that runs leave behind, not from the run (IDEM004).

A task that reads an Airflow Variable, an asset's state or another task's XCom to decide where to
start, while some task saves that mark (``Variable.set``, ``state.set``, a task returning
``MAX(updated_at)``), loads "everything since last time": a rerun or backfill of an earlier window
reads nothing, and a row that lands behind the mark is never loaded. The finding is the reading
task's, at the read; the task that only saves the mark is not a finding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from airflow_idempotent.lint.facts import StateUse, WindowRef
from airflow_idempotent.lint.findings import TaskCheck
from airflow_idempotent.lint.shared import task_label

__all__ = ["check_watermarks"]

_KIND_TEXT = {"variable": "the Variable", "asset": "the asset state key", "xcom": "the XCom of"}
#: A saved mark that counts batches or pages of a list, not time: a rotating batch cursor.
_BATCH_CURSOR = re.compile(r"(?:^|_)(?:offset|page|batch)(?:_|$|es|s)", re.IGNORECASE)
_TIME_WORDS = re.compile(r"date|time|ts\b|_at\b|day|hour|watermark|since|last_", re.IGNORECASE)
#: words of a mark that says where the previous run stopped (``max_id``, ``page_token``)
_MARK_TOKENS = frozenset(
    {"max", "min", "cursor", "offset", "position", "seq", "mark", "bookmark", "watermark", "high"}
    | {"latest", "prev", "previous", "next", "from", "start", "end", "page", "batch", "last"}
    | {"checkpoint", "processed", "synced", "loaded"}
)
#: the last word of a saved Variable that names a thing (an asset's id, a view's name, a config, a
#: token), set when the pipeline is created or updated: configuration, no window starts at it
_CONFIG_WORDS = frozenset({"id", "name", "config", "conf", "token", "url", "path", "schema", "table", "view"})
#: the last word of a saved set of keys (``known_ids``): the previous run's snapshot to diff with
_KEY_SET_WORDS = frozenset({"ids", "keys"})
#: words of a key naming a message the task hands on (round 29b: ``mensaje_final``, the last consumed
#: Kafka message passed to the producer), not where a window stops
_MESSAGE_WORDS = frozenset({"message", "messages", "msg", "mensaje", "payload", "event"})


def _kind_of_key(key: str) -> str | None:
    """``"config"``, ``"keys"`` or ``"message"`` when a saved key is named as configuration, as a set of
    keys or as a message with no mark word (``mensaje_final``; not ``last_message``) (its
    last word, the word before it not a mark's: ``city_dynamic_asset_id``, ``city_known_ids``, not
    ``orders_max_id``); None for anything else."""
    if _TIME_WORDS.search(key):
        return None
    words = [w for w in re.split(r"[_.\-]+", key.lower()) if w]
    if not words or (len(words) > 1 and words[-2] in _MARK_TOKENS):
        return None
    if words[-1] in _CONFIG_WORDS:
        return "config"
    if set(words) & _MESSAGE_WORDS and not set(words) & _MARK_TOKENS:
        return "message"
    return "keys" if words[-1] in _KEY_SET_WORDS else None


def check_watermarks(checks: Sequence[TaskCheck]) -> None:
    """IDEM004 for every task whose window starts at a mark another run (or task) saved."""
    saved: dict[tuple[str, str], list[TaskCheck]] = {}
    for check in checks:
        for save in check.facts.state_saves:
            saved.setdefault((save.kind, save.key), []).append(check)
    producers = {(check.task.dag_id, check.task.task_id): check for check in checks if check.facts.max_of}
    for check in checks:
        reads = list(check.facts.state_reads)
        reads.extend(
            StateUse("xcom", upstream, check.file, check.task.line) for upstream in check.task.inputs
        )
        for read in reads:
            if read.kind == "xcom":
                producer = producers.get((check.task.dag_id, read.key))
                if producer is None or producer is check:
                    continue
                tables = ", ".join(sorted(set(producer.facts.max_of)))
                by = f"{task_label(producer.task)}, which reads MAX(..) of {tables}"
            else:
                savers = saved.get((read.kind, read.key))
                if not savers:
                    continue
                names = ", ".join(dict.fromkeys(task_label(s.task) for s in savers))
                by = f"{names}, which saves {_KIND_TEXT[read.kind]} {read.key!r}"
            named = _kind_of_key(read.key) if read.kind != "xcom" else None
            if named == "config":
                continue  # an asset id, a view name: configuration a task (re)writes, not a mark
            if read.numbers:
                check.info(
                    "IDEM004",
                    read.file,
                    read.line,
                    f"the task adds {_describe(read)} saved by {by} to a row number: the largest key "
                    "numbers the new rows' keys, it chooses no rows (a key offset, not where a window "
                    "starts); whether a rerun adds the rows twice is the load's question",
                )
                continue
            check.facts.windows.append(
                WindowRef("target", f"A watermark: {_describe(read)} (saved by {by}).")
            )
            if named == "keys":
                check.info(
                    "IDEM004",
                    read.file,
                    read.line,
                    f"the task reads {_describe(read)} saved by {by}: the keys the previous run saw "
                    "(a snapshot to diff with, e.g. to find deleted rows), not a time window; a rerun "
                    "diffs the same source again",
                )
                continue
            if named == "message":
                check.info(
                    "IDEM004",
                    read.file,
                    read.line,
                    f"the task reads {_describe(read)} saved by {by}: a message handed on (named so, "
                    "no mark or time in its name), not where a window stops; a rerun hands it on again",
                )
                continue
            if read.kind != "xcom" and _BATCH_CURSOR.search(read.key) and not _TIME_WORDS.search(read.key):
                check.info(
                    "IDEM004",
                    read.file,
                    read.line,
                    f"the task starts at {_describe(read)} saved by {by}: a batch cursor over a list "
                    "(which batch comes next), not a time window; no run's data is lost behind it",
                )
                continue
            check.add(
                "IDEM004",
                read.file,
                read.line,
                f"the window starts at a watermark, {_describe(read)} saved by {by}, not at the run's "
                "interval: a rerun or backfill of an earlier window loads nothing, and rows that land "
                "behind the mark are never loaded",
                cause="window",
            )


def _describe(read: StateUse) -> str:
    if read.kind == "xcom":
        return f"the XCom of {read.key}"
    return f"{_KIND_TEXT[read.kind]} {read.key!r}"
