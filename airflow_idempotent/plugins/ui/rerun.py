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

import datetime
import logging
import threading
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from airflow_idempotent.guard import GuardConfig
from airflow_idempotent.history.report import jsonable
from airflow_idempotent.history.store import HistoryStore
from airflow_idempotent.plugins.ui.backfills import dag_guard
from airflow_idempotent.plugins.ui.datamodels import RerunForm
from airflow_idempotent.plugins.ui.dependencies import load_dag as serialized_dag
from airflow_idempotent.preview import ConfRefusal, load_dag, preview_rerun
from airflow_idempotent.window import Window, widest

log = logging.getLogger(__name__)

#: DAG files parsed at once for previews: a file that never finishes holds its slot, and once
#: every slot is held the next preview is a 503 at once rather than one more stuck thread.
PARSE_SLOTS = threading.BoundedSemaphore(2)
#: The name of the threads that parse DAG files for previews (see `_QuietTimeout`).
PARSE_THREAD = "idempotent-dag-parse"


#: What Airflow's DagBag logs when it parses off the main thread (its signal handlers).
QUIET_MESSAGES = (
    "timeout can't be used in the current context",
    "SIGSEGV signal handler registration failed",
)


class _QuietTimeout(logging.Filter):
    """Airflow's DagBag arms a SIGALRM timeout (and a SIGSEGV handler), which only the main thread
    may; off it, it logs a traceback for every parse. Our parse threads have their own timeout
    (`parse_dag`): drop those."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            (record.threadName or "").startswith(PARSE_THREAD) and str(record.msg).startswith(QUIET_MESSAGES)
        )


logging.getLogger("airflow.dag_processing.importers.python_importer").addFilter(_QuietTimeout())


def parse_timeout() -> float:
    """How long a DAG file may take to parse: Airflow's own `core.dagbag_import_timeout`."""
    from airflow.configuration import conf

    return max(conf.getfloat("core", "dagbag_import_timeout", fallback=30.0), 1.0)


def parse_dag(dag_id: str, path: Path, bundle_path: Path | None, bundle_name: str | None) -> Any:
    """`load_dag` in a thread of its own, waited for at most `parse_timeout()` seconds (503 after
    it): the request thread never runs a DAG file's top-level code, which may block forever."""
    if not PARSE_SLOTS.acquire(blocking=False):
        raise HTTPException(503, "the API server is busy parsing DAG files for previews: retry in a minute")
    outcome: dict[str, Any] = {}

    def parse() -> None:
        try:
            outcome["dag"] = load_dag(dag_id, path, bundle_path, bundle_name)
        except BaseException as err:
            outcome["error"] = err
        finally:
            PARSE_SLOTS.release()

    thread = threading.Thread(target=parse, name=f"{PARSE_THREAD}-{dag_id}", daemon=True)
    thread.start()
    timeout = parse_timeout()
    thread.join(timeout)
    if thread.is_alive():
        log.warning("parsing the DAG file of %s (%s) took longer than %g s", dag_id, path, timeout)
        raise HTTPException(
            503,
            f"parsing the DAG file of {dag_id} took longer than {timeout:g} s (core.dagbag_import_timeout): "
            "fix what its top-level code waits for.",
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["dag"]


def check_width(served: Any, window: Window) -> None:
    """Refuse (422) a window wider than the DAG's guard allows one backfill to rewrite: its
    granularity times its cap (an unguarded DAG: the default guard's, a day times 31). The
    preview stages the whole window against production, so its cost is bounded here."""
    config = dag_guard(served)[0] or GuardConfig()
    period = widest(config.granularity) or widest("day") or datetime.timedelta(days=1)
    if window.end - window.start > period * config.cap:
        raise HTTPException(
            422,
            f"the window {window.label()} is wider than {config.cap} periods of {config.granularity} "
            f"(the DAG's guard cap times its granularity): preview at most that much at once.",
        )


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
                return parse_dag(dag_id, path, bundle_path, bundle_name)
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
    check_width(served, form.window())  # before the DAG file is parsed or anything staged
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
