"""What the UI's routes accept and answer: pydantic models for query strings, bodies and responses
(as Airflow's `core_api/datamodels`, one module per resource).

Query strings and bodies are validated by these models only (422 on anything else, nothing is
done); their refusals are part of the API (tests and the pages show them). Response models
describe every JSON answer (OpenAPI); records whose shape another module owns (the history
store's rows, the guard's declaration) pass any further field they carry through. The routes
answer with `response_model_exclude_unset`, so a key an answer lacks is not added as null.
"""

from pydantic import BaseModel

from airflow_idempotent.plugins.ui.datamodels.backfills import (
    BODY_MODELS as BACKFILL_BODIES,
)
from airflow_idempotent.plugins.ui.datamodels.backfills import (
    BackfillForm,
    BackfillIdPath,
    BackfillStatus,
    ClearedResponse,
    ClearForm,
    CreatedResponse,
    GuardResponse,
    PreviewResponse,
    StopForm,
    ThresholdsForm,
    airflow_backfill_body,
    backfill_conf,
)
from airflow_idempotent.plugins.ui.datamodels.common import (
    DAG_ID_RE,
    MAX_BODY,
    MEASURE_RE,
    NOT_A_DAG_ID,
    RUN_ID_RE,
    TABLE_RE,
    TASK_ID_RE,
    DagIdPath,
    ErrorResponse,
    InputError,
    error_responses,
    json_schema_patterns,
)
from airflow_idempotent.plugins.ui.datamodels.history import (
    HISTORY_PARAMS,
    MAX_LIMIT,
    AttemptPageQuery,
    AttemptQuery,
    AttemptsResponse,
    HistoryQuery,
    HistoryResponse,
)
from airflow_idempotent.plugins.ui.datamodels.rerun import (
    RerunForm,
    RerunPreviewResponse,
    RerunQuery,
)

#: The bodies the API documents (their schemas are added to the OpenAPI components).
BODY_MODELS: tuple[type[BaseModel], ...] = (*BACKFILL_BODIES, RerunForm)

__all__ = [
    "BODY_MODELS",
    "DAG_ID_RE",
    "HISTORY_PARAMS",
    "MAX_BODY",
    "MAX_LIMIT",
    "MEASURE_RE",
    "NOT_A_DAG_ID",
    "RUN_ID_RE",
    "TABLE_RE",
    "TASK_ID_RE",
    "AttemptPageQuery",
    "AttemptQuery",
    "AttemptsResponse",
    "BackfillForm",
    "BackfillIdPath",
    "BackfillStatus",
    "ClearForm",
    "ClearedResponse",
    "CreatedResponse",
    "DagIdPath",
    "ErrorResponse",
    "GuardResponse",
    "HistoryQuery",
    "HistoryResponse",
    "InputError",
    "PreviewResponse",
    "RerunForm",
    "RerunPreviewResponse",
    "RerunQuery",
    "StopForm",
    "ThresholdsForm",
    "airflow_backfill_body",
    "backfill_conf",
    "error_responses",
    "json_schema_patterns",
]
