"""The DAG linter's rule catalog: stable IDs (IDEM000..), names, what each finds and its fix.

Findings, acknowledgements (``# idempotent: ack IDEM002 reason``), ``--ignore`` and the CLI's help
all name rules through this table, by ID or by name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "Rule", "rule_id", "rule_list"]


@dataclass(frozen=True)
class Rule:
    """A stable rule: its ID, short name, what it finds and how to fix it."""

    id: str
    name: str
    summary: str
    fix: str


RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule(
            "IDEM000",
            "unreadable-dag",
            "the DAG file cannot be read: not valid Python (or the linter failed on it)",
            "fix the syntax error: Airflow cannot import this file, so none of its DAGs run",
        ),
        Rule(
            "IDEM001",
            "clock-sql",
            "SQL reads randomness or a sequence, or the clock where it picks or files rows",
            "compare with the run's window instead: :window_start / :window_end with "
            "PartitionOverwriteOperator or MergeOperator, or {{ data_interval_start }} / {{ ds }} in a "
            "template; if it is truly intended, acknowledge it (or list it in allow_functions=[...])",
        ),
        Rule(
            "IDEM002",
            "append-insert",
            "INSERT with no window delete and no key",
            "write with PartitionOverwriteOperator (delete the window and insert it in one transaction) "
            "or MergeOperator (upsert on a key); in plain SQL, DELETE the window before the INSERT in "
            "the same task, or INSERT .. ON CONFLICT (key) DO UPDATE",
        ),
        Rule(
            "IDEM003",
            "clock-in-task-code",
            "DAG or task code reads the clock or randomness",
            "take dates from the run's context (logical_date, data_interval_start/end, ds) instead "
            "of the clock; a fixed start_date such as pendulum.datetime(2026, 1, 1, tz='UTC')",
        ),
        Rule(
            "IDEM004",
            "relative-window",
            'a window taken as "the last N hours" before now',
            "take the window from the run: data_interval_start / data_interval_end (or the logical "
            "date plus a declared granularity), so a rerun days later reads the same hours; to take in "
            "rows that arrive late, rewrite the periods before it too (lookback=N on the operator)",
        ),
        Rule(
            "IDEM005",
            "unbounded-catchup",
            "catchup by default, or catchup=True over clock-read tasks: every window since start_date",
            "set catchup=False (Airflow 3's default) and backfill an explicit range with "
            "`airflow backfill create --from-date ... --to-date ...`, or give the DAG an end_date",
        ),
        Rule(
            "IDEM006",
            "retried-unkeyed-side-effect",
            "a retried task creates or moves something outside (orders, payments, mail per record), unkeyed",
            "send an idempotency key derived from the run and window (e.g. f'{dag_id}:{ds}') and keep "
            "a ledger of effects done, or set retries=0 on this task",
        ),
        Rule(
            "IDEM007",
            "target-written-twice",
            "one table is written by more than one task, the writes overlapping on the same rows",
            "give each table one writing task (one window write: delete+insert or merge in one "
            "transaction); split the table or combine the tasks",
        ),
        Rule(
            "IDEM008",
            "accumulating-update",
            "UPDATE adds to a column's own value: a running total",
            "recompute the value from the window's source and overwrite it (MergeOperator on the key) "
            "instead of adding to what is there",
        ),
        Rule(
            "IDEM009",
            "window-without-width",
            "a window operator declares no granularity on a schedule whose runs have no data interval",
            "declare the window's width on the operator, e.g. granularity='day' (with anchor='end' to "
            "process the day that just ended), or schedule the DAG with a timetable that has a data "
            "interval (CronDataIntervalTimetable, or [scheduler] create_cron_data_intervals = True)",
        ),
    )
}
_RULE_BY_NAME = {rule.name: rule.id for rule in RULES.values()}


def rule_id(token: str) -> str | None:
    """The rule ID a token names (an ID in any case, or a rule name); None when it names no rule."""
    token = token.strip()
    if token.upper() in RULES:
        return token.upper()
    return _RULE_BY_NAME.get(token.lower())


def rule_list() -> str:
    """One line per rule (ID, name, summary), for the CLI's help."""
    return "\n".join(f"  {r.id}  {r.name:<28} {r.summary}" for r in RULES.values())
