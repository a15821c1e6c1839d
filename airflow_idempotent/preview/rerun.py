""" "Can I rerun this window?": every task of a DAG, what a rerun would change, and a verdict.

- A window-write task (`WindowWriteOperator`): its SQL rendered through the operator's own
  templating for the window (params, with the run's conf on top, as Airflow resolves them), then
  staged and diffed with production (`preview.diff.preview_write`). Safe to rerun when nothing
  refuses it: no kill switch, the declared completeness check passes, no stop condition breached.
- An effect task (`EffectOperator`, or a task with ledger rows for the window): would a rerun
  send, by the ledger's state; nothing is sent.
- Any other task: what the DAG linter (`lint.lint_paths`) finds about it, e.g. IDEM002 for a plain
  SQL operator that appends.

The conf is judged first, by the rules a run is judged by (`rerun_conf`): the guard's
`BackfillIntent` when it declares a backfill, Airflow's param rules always. Kill switches are read
with the operator's own function (`guard.killswitch.active_switches`) at every scope; those that
would stop this rerun (a backfill switch only stops a backfill) make it unsafe, the others are noted.

Nothing is written anywhere: not the target, not the history store, not Airflow's metadata.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_idempotent.context import run_context
from airflow_idempotent.effects.entry import COMPENSATED, DONE, PENDING
from airflow_idempotent.effects.identity import EffectIdentity
from airflow_idempotent.effects.ledger import Ledger
from airflow_idempotent.effects.operator import EffectOperator
from airflow_idempotent.guard import GuardRefusal, killswitch
from airflow_idempotent.guard.intent import CONF_KEYS, BackfillIntent, check_storable
from airflow_idempotent.history.report import store_is_empty
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.hooks.warehouse import WarehouseHook
from airflow_idempotent.lint import LintReport, lint_paths
from airflow_idempotent.operators.base import WindowWriteOperator
from airflow_idempotent.preview.code import code_check
from airflow_idempotent.preview.diff import WritePreview, preview_write
from airflow_idempotent.window import Window

SAFE, NOT_SAFE, UNVERIFIED = "safe", "not safe", "unverified"


@dataclass
class TaskPreview:
    """One task's answer: what a rerun would do, and whether it is safe."""

    task_id: str
    operator: str
    kind: str  # window_write | effect | other
    verdict: str = UNVERIFIED
    reasons: list[str] = field(default_factory=list)
    write: WritePreview | None = None
    policy_version: str | None = None
    sql: str | None = None
    effects: list[dict[str, Any]] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    #: the periods a rerun rewrites (with lookback, the window and the ones before it)
    periods: list[str] = field(default_factory=list)
    #: the DAG version that last wrote each period, the latest one, which a rerun runs (`preview.code`)
    code: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "operator": self.operator,
            "kind": self.kind,
            "verdict": self.verdict,
            "safe": self.verdict == SAFE,
            "reasons": self.reasons,
            "policy_version": self.policy_version,
            "sql": self.sql,
            "preview": self.write.to_json() if self.write is not None else None,
            "effects": self.effects,
            "findings": self.findings,
            "periods": self.periods,
            "code": self.code,
        }


@dataclass
class RerunPreview:
    """Every task of one DAG for one window."""

    dag_id: str
    window: Window
    conf: dict[str, Any]
    tasks: list[TaskPreview]
    switches: list[str]
    #: the conf declares a backfill (its semantics): the rerun is a backfill run, as the guard sees it
    backfill: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "window": {
                "start": self.window.start.isoformat(),
                "end": self.window.end.isoformat(),
                "label": self.window.label(),
            },
            "conf": self.conf,
            "backfill": self.backfill,
            "kill_switches": self.switches,
            "tasks": [t.to_json() for t in self.tasks],
            "safe": all(t.verdict == SAFE for t in self.tasks),
        }


def load_dag(
    dag_id: str,
    dags_folder: str | Path | None = None,
    bundle_path: Path | None = None,
    bundle_name: str | None = None,
) -> Any:
    """The DAG `dag_id` as Airflow's DagBag parses it from the DAGs folder (or one DAG file of the
    bundle at `bundle_path`, as the API server finds it); LookupError if absent."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(
        dag_folder=str(dags_folder) if dags_folder else None,
        bundle_path=bundle_path,
        bundle_name=bundle_name,
    )
    dag = bag.dags.get(dag_id)
    if dag is None:
        errors = "; ".join(f"{path}: {str(err).splitlines()[-1]}" for path, err in bag.import_errors.items())
        raise LookupError(
            f"no DAG {dag_id!r} in {bag.dag_folder} (it has {', '.join(sorted(bag.dags)) or 'none'})"
            + (f"; import errors: {errors}" if errors else "")
        )
    return dag


class ConfRefusal(ValueError):
    """The rerun's conf is not one a run of the DAG would accept: nothing is previewed."""


def rerun_conf(dag: Any, conf: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
    """(the conf, whether it declares a backfill), judged by the rules a run is judged by: a conf
    declaring semantics (or a backfill key the DAG has no param for) is a backfill's, so the guard's
    `BackfillIntent` must accept it; and Airflow's own param rules (`process_params`, the task
    runner's) must accept it over the DAG's params. ConfRefusal says what to fix."""
    from airflow.sdk.definitions.param import ParamValidationError, process_params

    if conf is not None and not isinstance(conf, Mapping):
        raise ConfRefusal('the conf must be a JSON object, e.g. {"policy_version": "v2"}')
    conf = dict(conf or {})
    declared = set(getattr(dag, "params", None) or ())
    backfill = "semantics" in conf or bool(set(conf) & (set(CONF_KEYS) - declared))
    try:
        check_storable(conf)
        if backfill:
            BackfillIntent.from_conf(conf, declared_params=declared)
    except GuardRefusal as refusal:
        raise ConfRefusal(str(refusal)) from None
    for task in dag.tasks:
        try:
            process_params(dag, task, conf, suppress_exception=False)
        except ParamValidationError as err:
            raise ConfRefusal(f"the DAG's params refuse the conf: {err}") from None
    return conf, backfill


def _context(task: Any, window: Window, conf: Mapping[str, Any]) -> dict[str, Any]:
    """What a manual run of the window hands the task: its params as Airflow's task runner resolves
    them (`process_params`: DAG params, task params, the conf on top), the conf as the run's."""
    from airflow.sdk.definitions.param import process_params

    params = process_params(task.dag, task, dict(conf), suppress_exception=False) if task.has_dag() else {}
    return run_context(task, window, f"preview__{window.label()}", 1, {}, params, conf)


def _rendered(task: Any, window: Window, conf: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A copy of `task` with its templates rendered for the window, as a run renders them."""
    rendered = copy.deepcopy(task)
    context = _context(rendered, window, conf)
    rendered.render_template_fields(context)
    return rendered, context


def _window_task(
    task: WindowWriteOperator,
    window: Window,
    conf: Mapping[str, Any],
    measures: Sequence[str] | None,
    covering: list[str],
    notes: list[str],
    store: HistoryStore | None = None,
    backfill: bool = False,
) -> TaskPreview:
    """`covering`: the kill switches that stop this rerun (as the operator checks them); `notes`:
    the others, e.g. a backfill switch when the rerun is not a backfill; `store`: the history the
    DAG version of each period's last write is read from."""
    out = TaskPreview(task.task_id, type(task).__name__, "window_write")
    rendered, context = _rendered(task, window, conf)
    periods = rendered.covered(context)  # lookback: the rerun rewrites these, so they are compared
    out.periods = [p.label() for p in periods]
    check = code_check(store, task.dag_id, f"{rendered.conn_id}:{rendered.table}", periods, backfill)
    out.code = check.to_json()
    notes = [*notes, *check.reasons()]
    adapter = WarehouseHook(conn_id=rendered.conn_id).adapter
    out.policy_version = rendered.effective_policy_version()
    guard = rendered.guard_config()
    if rendered.partition_column is None:
        out.reasons.append("a merge without partition_column has no window to preview; nothing compared")
        return out
    spec = rendered.write_spec(context, adapter)  # the operator's own: exactly what a run writes
    out.sql = adapter.render(spec.query)
    chosen = list(guard.measures) if guard is not None and guard.measures else measures
    out.write = preview_write(
        adapter,
        spec,
        rendered.key_columns,
        chosen,
        rendered.completeness_check(guard, adapter),
        guard.thresholds if guard is not None else None,
    )
    problems = [f"kill switch on: {s}" for s in covering]
    if out.write.source_complete is False:
        problems.append("source incomplete: the declared completeness check is false for this window")
    if out.write.rows_outside_window:
        problems.append(
            f"{out.write.rows_outside_window} produced row(s) fall outside the window: the write refuses"
        )
    problems += [f"a guarded backfill would stop: {b}" for b in out.write.breaches]
    if problems:
        out.verdict = NOT_SAFE
        out.reasons += problems + notes
        return out
    out.verdict = SAFE
    out.reasons.append(
        f"idempotent operator ({rendered.strategy}): a rerun rewrites the window, never adds to it"
    )
    out.reasons.append("no kill switch covers it")
    out.reasons += notes
    out.reasons.append(
        "source complete (its completeness check is true)"
        if out.write.source_complete
        else "no completeness check declared"
    )
    kept = out.write.diff.removed if out.write.diff is not None else 0
    if rendered.strategy == "merge" and not getattr(rendered, "delete_missing", False) and kept:
        out.reasons.append(
            f"merge without delete_missing: the {kept} removed row(s) stay in an ordinary rerun "
            "(a corrective backfill of a guarded DAG swaps them out)"
        )
    if rendered.lookback:
        out.reasons.append(
            f"lookback={rendered.lookback}: a rerun rewrites {len(periods)} periods "
            f"({', '.join(out.periods)}), compared here as one range"
        )
    return out


def _effect_state(entry: Any, resend: bool) -> tuple[bool | None, str]:
    """Would a rerun send this effect, and why (from its ledger row)."""
    if entry is None:
        return True, "no ledger entry: a rerun sends it, once"
    if entry.state == DONE or entry.state == COMPENSATED:
        if resend:
            return (
                True,
                f"{entry.state}; the conf asks resend_effects: a rerun sends generation "
                f"{entry.generation + 1}",
            )
        return False, f"{entry.state} (reference {entry.reference}): a rerun sends nothing"
    if entry.state == PENDING:
        return None, (
            f"pending since {entry.claimed_at:%Y-%m-%d %H:%M:%S}: a rerun reconciles it by its "
            "idempotency key or stops; decide with `airflow-idempotent effects resolve --key "
            f"{entry.identity_key} --as ...`"
        )
    return True, f"{entry.state}: it never happened, a rerun sends it, once"


def _effects(
    task: Any, window: Window, conf: Mapping[str, Any], ledger: Ledger | None, dag_id: str
) -> list[dict[str, Any]]:
    """The task's effects for the window and whether a rerun would send each."""
    resend = bool(conf.get("resend_effects"))
    found: dict[str, dict[str, Any]] = {}
    entries = (
        ledger.entries(dag_id=dag_id, task_id=task.task_id, start=window.start, end=window.end)
        if ledger
        else []
    )
    for entry in entries:
        send, why = _effect_state(entry, resend)
        found[entry.identity_key] = {
            "effect": entry.effect_name,
            "key": entry.idempotency_key,
            "state": entry.state,
            "would_send": send,
            "why": why,
        }
    if isinstance(task, EffectOperator):
        rendered, context = _rendered(task, window, conf)
        identity = EffectIdentity.of(
            dag_id, rendered.task_id, rendered.window(context), rendered.effect_name, rendered.key
        )
        if identity.key not in found:
            known = ledger.get(identity.key) if ledger else None
            send, why = _effect_state(known, resend)
            found[identity.key] = {
                "effect": identity.effect_name,
                "key": identity.idempotency_key(),
                "state": getattr(known, "state", None),
                "would_send": send,
                "why": why,
            }
    return list(found.values())


def _findings(report: LintReport, dag_id: str, task_id: str) -> list[str]:
    """The linter's findings on the task, acknowledged ones too: an ack silences CI, not the risk."""
    return [
        f"{f.rule} {f.name}: {f.message} ({f.where()})"
        + (f" [acknowledged in the DAG file: {f.reason}]" if f.acknowledged else "")
        for site in report.findings
        for f in site.members or (site,)  # a code site's own finding for this task, with its message
        if (f.dag_id, f.task_id) == (dag_id, task_id)
    ]


def preview_rerun(
    dag: Any,
    window: Window,
    conf: Mapping[str, Any] | None = None,
    task_ids: Sequence[str] | None = None,
    store: HistoryStore | None = None,
    measures: Sequence[str] | None = None,
) -> RerunPreview:
    """What rerunning `window` of `dag` would do, task by task, ending in a verdict per task."""
    conf, backfill = rerun_conf(dag, conf)
    ledger: Ledger | None = None
    switches: list[killswitch.Switch] = []
    if store is not None and not store_is_empty(store):
        store.migrate()
        ledger = Ledger(store.engine)
        # every scope that covers the DAG (global, dag, backfill), by the operator's own function
        switches = killswitch.active_switches(store, dag.dag_id, backfill=True)
    covering = [s.describe() for s in switches if backfill or s.scope != "backfill"]
    notes = [
        f"a backfill of this window would refuse to write: {s.describe()}; a rerun that is not a "
        "backfill (clearing the task) is not stopped by it"
        for s in switches
        if not backfill and s.scope == "backfill"
    ]
    report = lint_paths([dag.fileloc])
    tasks: list[TaskPreview] = []
    for task in dag.tasks:
        if task_ids and task.task_id not in task_ids:
            continue
        if isinstance(task, WindowWriteOperator):
            try:
                readable = store if ledger is not None else None  # an empty store is never created
                tasks.append(_window_task(task, window, conf, measures, covering, notes, readable, backfill))
            except Exception as err:  # what the write itself would refuse with, before any commit
                preview = TaskPreview(task.task_id, type(task).__name__, "window_write", NOT_SAFE)
                preview.reasons.append(f"a rerun would refuse to write: {type(err).__name__}: {err}")
                tasks.append(preview)
            continue
        effects = _effects(task, window, conf, ledger, dag.dag_id)
        findings = _findings(report, dag.dag_id, task.task_id)
        kind = "effect" if effects or isinstance(task, EffectOperator) else "other"
        preview = TaskPreview(task.task_id, type(task).__name__, kind, effects=effects, findings=findings)
        if findings:
            preview.verdict = NOT_SAFE
            preview.reasons += findings
        elif kind == "effect":
            pending = [e for e in effects if e["would_send"] is None]
            preview.verdict = NOT_SAFE if pending else SAFE
            preview.reasons += [f"{e['effect']}: {e['why']}" for e in effects]
        else:
            preview.reasons.append(
                "not a window write or a ledgered effect; the linter finds nothing about it"
            )
        tasks.append(preview)
    return RerunPreview(dag.dag_id, window, conf, tasks, [s.describe() for s in switches], backfill)
