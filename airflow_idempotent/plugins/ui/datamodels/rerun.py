"""The rerun preview's query string, body and answer.

The window is a window row's own `[window_start, window_end)` (UTC instants, as the history shows
them); the conf is a JSON object judged by the preview's own rule (`preview.rerun_conf`: the
guard's `BackfillIntent` for a backfill's keys, Airflow's param rules for the DAG's params), never
spliced into SQL: the task's parameters bind it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    WithJsonSchema,
    model_validator,
)

from airflow_idempotent.plugins.ui.datamodels.backfills import Instant
from airflow_idempotent.plugins.ui.datamodels.common import TASK_ID_RE, Record, matching, refuse
from airflow_idempotent.window import Window, window_of

#: Tasks one preview may name (a DAG's tasks, at most).
MAX_TASKS = 200


class RerunWindow(BaseModel):
    """A window `[window_start, window_end)`: a window row's own bounds (naive means UTC)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_start: Instant = Field(description="the window's start (ISO 8601; naive = UTC)")
    window_end: Instant = Field(description="the window's end, excluded")

    @model_validator(mode="after")
    def _not_empty(self) -> RerunWindow:
        if self.window_end <= self.window_start:
            raise refuse("window_end must be after window_start: a window is half-open [start, end)")
        return self

    def window(self) -> Window:
        """The window as every rule of the package reads it (`window.window_of`)."""
        return window_of((self.window_start, self.window_end), source="ui")


class RerunQuery(RerunWindow):
    """The preview page's query string: the window row it was opened from."""

    model_config = ConfigDict(frozen=True, extra="ignore")


#: A task id: Airflow's rule (`TASK_ID_RE`), checked and documented as the same pattern.
TaskId = Annotated[
    str,
    BeforeValidator(matching(TASK_ID_RE, "not a task id (letters, digits, _ . -)", True)),
    WithJsonSchema({"type": "string", "pattern": TASK_ID_RE.pattern}),
]


class RerunForm(RerunWindow):
    """What to preview: the window, optionally some tasks, and the rerun's conf."""

    task_ids: Annotated[list[TaskId], Field(max_length=MAX_TASKS)] | None = Field(
        None, description="only these tasks (default: every task of the DAG)"
    )
    conf: dict[str, JsonValue] = Field(
        default_factory=dict,
        description=(
            'the rerun\'s conf, over the DAG\'s params as in a run, e.g. {"policy_version": "v2"}; '
            "with semantics it is a backfill's declaration, judged by the guard"
        ),
    )


class TaskAnswer(Record):
    """One task's answer (`preview.TaskPreview.to_json`)."""

    task_id: str
    operator: str
    kind: str
    verdict: str
    safe: bool
    reasons: list[str]
    policy_version: str | None = None
    preview: dict[str, Any] | None = None
    effects: list[dict[str, Any]] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)
    code: dict[str, Any] | None = Field(
        None,
        description="the DAG version that last wrote each period, the latest, and which a rerun runs",
    )


class RerunPreviewResponse(Record):
    """Every task of the DAG for the window (`preview.RerunPreview.to_json`): nothing was written."""

    dag_id: str
    window: dict[str, str]
    conf: dict[str, Any]
    backfill: bool
    kill_switches: list[str]
    tasks: list[TaskAnswer]
    safe: bool
