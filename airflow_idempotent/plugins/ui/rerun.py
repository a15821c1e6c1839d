"""The rerun preview from the UI: "what will rerunning this window change?", for a window row.

The DAG is found as the backfill routes find it (`dependencies.DagDep`: its serialized DAG in
Airflow's metadata, 404 when unknown), then its own code is parsed from the file Airflow recorded
for it (`DagModel.fileloc`, or the bundle's path plus `relative_fileloc`): the preview renders
each task's SQL exactly as a run would, which a serialized DAG cannot. Then the CLI's
`preview_rerun` runs: the conf judged first (`preview.rerun_conf`, a 422 naming the fix, nothing
staged), every window-write task staged, diffed and dropped in a rolled-back transaction. Nothing
is written.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from airflow_idempotent.history.report import jsonable
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.datamodels import RerunForm
from airflow_idempotent.plugins.ui.dependencies import load_dag as serialized_dag
from airflow_idempotent.preview import ConfRefusal, load_dag, preview_rerun

log = logging.getLogger(__name__)


def dag_files(session: Session, dag_id: str) -> list[tuple[Path, Path | None, str | None]]:
    """(file, bundle path, bundle name) where the DAG's code may be read, best first."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.models.dag import DagModel

    model = session.get(DagModel, dag_id)
    if model is None:
        return []
    found: list[tuple[Path, Path | None, str | None]] = []
    if model.fileloc:
        found.append((Path(model.fileloc), None, model.bundle_name))
    if model.bundle_name and model.relative_fileloc:
        try:
            bundle = DagBundlesManager().get_bundle(model.bundle_name)
            found.append((Path(bundle.path) / model.relative_fileloc, Path(bundle.path), model.bundle_name))
        except Exception as err:  # a bundle this server cannot open: the file location may still do
            log.warning("DAG bundle %s of %s cannot be opened: %s", model.bundle_name, dag_id, err)
    return found


def dag_code(session: Session, served: Any) -> Any:
    """The own code of `served` (the path's serialized DAG, `DagDep`), parsed from its file (503
    when this server cannot read or parse the file)."""
    dag_id = served.dag_id
    for path, bundle_path, bundle_name in dag_files(session, dag_id):
        if path.is_file():
            try:
                return load_dag(dag_id, path, bundle_path, bundle_name)
            except LookupError as err:
                raise HTTPException(503, f"the DAG file of {dag_id} does not define it here: {err}") from None
    raise HTTPException(
        503,
        f"the API server cannot read the DAG file of {dag_id}: the preview renders each task's SQL "
        "from the DAG's own code. Run `airflow-idempotent rerun --dag "
        f"{dag_id} --window DATE --dry-run` where the DAG files are.",
    )


def rerun_preview(session: Session, store: HistoryStore, served: Any, form: RerunForm) -> dict[str, Any]:
    """The CLI's rerun preview of the form's window for `served` (the path's serialized DAG): 422
    for a conf a run would refuse or an unknown task, 503 when it cannot run; per task its
    verdict, reasons and diff otherwise."""
    dag_id = served.dag_id
    dag = dag_code(session, served)
    if form.task_ids:
        unknown = sorted(set(form.task_ids) - {t.task_id for t in dag.tasks})
        if unknown:
            raise HTTPException(422, f"DAG {dag_id} has no task {', '.join(unknown)}")
    try:
        preview = preview_rerun(dag, form.window(), form.conf, form.task_ids, store)
    except ConfRefusal as err:
        raise HTTPException(422, f"conf: {err}") from None
    except Exception as err:
        log.exception("the rerun preview of %s could not run", dag_id)
        raise HTTPException(
            503, f"the preview could not run ({type(err).__name__}): see the API server's log"
        ) from None
    return jsonable(preview.to_json())  # type: ignore[no-any-return]


def page_data(session: Session, dag_id: str) -> dict[str, Any]:
    """What the page shows before a preview: the DAG's params (defaults) and tasks (404 if unknown)."""
    dag = serialized_dag(session, dag_id)
    try:
        params = dict(dag.params.dump())
    except Exception:  # a param that cannot be resolved without a run's conf: show none
        params = {}
    return {"params": jsonable(params), "tasks": [t.task_id for t in dag.tasks]}
