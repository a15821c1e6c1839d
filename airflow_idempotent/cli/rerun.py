"""``airflow-idempotent rerun --dry-run``: what rerunning a window would change, before it runs.

    airflow-idempotent rerun --dag DAG --window DATE [--task TASK ...] --dry-run [--json]
                             [--conf JSON] [--measure COLUMN ...] [--dags-folder DIR] [--conn-id ID]

Every window-write task's SQL is rendered as the run renders it, staged, diffed with production by
key and dropped; effect tasks say whether a rerun would send; every task ends with a verdict.
Nothing is written. Exit codes: 0 no task is unsafe, 1 the DAG or a database cannot be used,
2 bad usage, 3 at least one task is not safe to rerun (each says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from airflow_idempotent.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STORE,
    EXIT_USAGE,
    CliError,
    add_conn_arg,
    error_text,
    logs_to_stderr,
    open_store,
    parse_day,
)
from airflow_idempotent.history.report import jsonable
from airflow_idempotent.preview import (
    NOT_SAFE,
    ConfRefusal,
    RerunPreview,
    TaskPreview,
    load_dag,
    preview_rerun,
)
from airflow_idempotent.window import day_range


def register(commands: Any) -> None:
    """`rerun --dry-run`: the rerun preview."""
    p = commands.add_parser(
        "rerun",
        help="preview what rerunning a window would change (--dry-run), with a verdict per task",
        description=(
            "For every window-write task of the DAG: render its SQL for the window as a run would "
            "(params, the --conf on top), stage the rows, diff them with production by key (rows "
            "added, removed, changed, unchanged; measure sums before and after; sample keys) and "
            "drop the staging table. Effect tasks: would a rerun send (ledger state). Then a "
            "verdict per task. Nothing is written anywhere."
        ),
    )
    p.add_argument("--dag", required=True, metavar="DAG", help="the DAG, as Airflow's DagBag parses it")
    p.add_argument("--window", required=True, metavar="DATE", type=parse_day, help="the window's UTC day")
    p.add_argument("--task", action="append", metavar="TASK", help="only this task (repeatable)")
    p.add_argument(
        "--dry-run", action="store_true", help="preview only (required: this command never reruns)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--conf",
        metavar="JSON",
        default="{}",
        help='the rerun\'s conf, e.g. \'{"policy_version": "v2"}\' (over the DAG params, as in a run)',
    )
    p.add_argument(
        "--measure", action="append", metavar="COLUMN", help="sum this column (default: numeric ones)"
    )
    p.add_argument(
        "--dags-folder", metavar="DIR", help="the DAGs folder (default: Airflow's [core] dags_folder)"
    )
    add_conn_arg(p)
    p.set_defaults(handler=cmd_rerun)


def _conf(text: str) -> dict[str, Any]:
    try:
        conf = json.loads(text)
    except ValueError as err:
        raise CliError(f"--conf is not JSON: {err}", code=EXIT_USAGE) from None
    if not isinstance(conf, dict):
        raise CliError('--conf must be a JSON object, e.g. \'{"policy_version": "v2"}\'', code=EXIT_USAGE)
    return conf


def cmd_rerun(args: argparse.Namespace) -> int:
    if not args.dry_run:
        raise CliError(
            "only --dry-run is supported: this command previews; rerun through Airflow "
            "(airflow tasks clear, airflow backfill create) once the preview says it is safe",
            code=EXIT_USAGE,
        )
    conf = _conf(args.conf)
    window = day_range(args.window, args.window)
    with logs_to_stderr():
        try:
            dag = load_dag(args.dag, args.dags_folder)
        except LookupError as err:
            raise CliError(str(err), code=EXIT_STORE) from None
        if args.task:
            unknown = sorted(set(args.task) - {t.task_id for t in dag.tasks})
            if unknown:
                raise CliError(f"DAG {args.dag} has no task {', '.join(unknown)}", code=EXIT_USAGE)
        store = open_store(args.conn_id)
        try:
            preview = preview_rerun(dag, window, conf, args.task, store, args.measure)
        except ConfRefusal as err:
            raise CliError(f"--conf: {err}", code=EXIT_USAGE) from None
        except Exception as err:
            raise CliError(f"the preview could not run: {error_text(err)}") from None
        finally:
            store.engine.dispose()
    if args.json:
        json.dump(jsonable(preview.to_json()), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print_preview(preview)
    return EXIT_REFUSED if any(t.verdict == NOT_SAFE for t in preview.tasks) else EXIT_OK


def _sums(write: Any) -> list[str]:
    if write.diff is not None:
        sums = {m: v for m, v in write.diff.to_json()["measures"].items()}
        return [f"{m} {v['before']} -> {v['after']} ({v['delta']})" for m, v in sums.items()]
    return [f"{m} {before} -> {after}" for m, (before, after) in write.measure_sums.items()]


def _task_lines(task: TaskPreview) -> list[str]:
    lines = [f"{task.task_id} ({task.operator}): {task.verdict.upper()}"]
    write = task.write
    if write is not None:
        head = f"  {write.table} window {write.window}: rows {write.rows_before} -> {write.rows_after}"
        if write.diff is not None:
            d = write.diff
            head += f"; {d.added} added, {d.removed} removed, {d.changed} changed, {d.unchanged} unchanged"
        else:
            head += (
                "; " + ("unchanged" if write.unchanged else "changed") + " (no key_columns: no per-row diff)"
            )
        lines.append(head)
        lines += [f"  sum {s}" for s in _sums(write)]
        for kind, keys in write.samples.items():
            if keys:
                shown = ", ".join(str(k[0] if len(k) == 1 else k) for k in keys)
                lines.append(f"  {kind} keys (up to 10): {shown}")
        if task.policy_version is not None:
            lines.append(f"  policy version {task.policy_version}")
    lines += [f"  - {reason}" for reason in task.reasons]
    return lines


def print_preview(preview: RerunPreview) -> None:
    """The preview as plain text: per task its diff, then its verdict's reasons."""
    w = preview.window
    print(
        f"Rerun preview of {preview.dag_id}, window {w.label()} [{w.start.isoformat()}, {w.end.isoformat()})"
        f", conf {json.dumps(preview.conf)}: nothing was written."
    )
    for task in preview.tasks:
        print()
        print("\n".join(_task_lines(task)))
    unsafe = [t.task_id for t in preview.tasks if t.verdict == NOT_SAFE]
    print()
    print(f"not safe to rerun: {', '.join(unsafe)}" if unsafe else "no task is unsafe to rerun")
