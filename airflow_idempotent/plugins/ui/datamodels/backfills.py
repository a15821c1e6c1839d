"""The backfill routes' bodies and answers.

`BackfillForm` is the UI's form of a backfill: Airflow's range and options, and the declaration
typed by the guard's `BackfillIntent`; `backfill_conf` is the one place a form becomes the DAG
run conf the guard judges.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    WithJsonSchema,
)

from airflow_idempotent.guard import Thresholds
from airflow_idempotent.guard.config import integral
from airflow_idempotent.guard.intent import (
    CONTROL_CHARACTERS,
    MAX_REASON,
    Approval,
    PolicyVersion,
    Semantics,
)
from airflow_idempotent.plugins.ui.datamodels.common import INSTANT_RE, Record, refuse
from airflow_idempotent.text import invisible_class, invisible_problem
from airflow_idempotent.window import to_utc_datetime

BACKFILL_ID_RE = re.compile(r"^[0-9]{1,12}$")


def _backfill_id(value: object) -> int:
    """Digits (as text, or as the route's int convertor made them), at most 12 of them."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**12:
        return value
    if isinstance(value, str) and BACKFILL_ID_RE.fullmatch(value):
        return int(value)
    raise refuse("expected a whole number")


#: A backfill id in a path: digits only (the DAG it belongs to is checked by the route).
BackfillIdPath = Annotated[
    int,
    BeforeValidator(_backfill_id),
    Path(
        description="an Airflow backfill id (of this DAG)",
        json_schema_extra={"minimum": 0, "maximum": 10**12 - 1},
    ),
]


def _text_ok(value: Any) -> Any:
    """The text as sent: no control characters and at most MAX_REASON characters, padding
    included (the document's `maxLength` counts it too)."""
    if isinstance(value, str):
        if CONTROL_CHARACTERS.search(value):
            raise ValueError("control characters are not allowed")
        if len(value) > MAX_REASON:
            raise ValueError(f"at most {MAX_REASON} characters")
    return value


def _visible(value: Any) -> Any:
    """No invisible format characters, their position counted in the text as sent."""
    problem = invisible_problem(value, "the text") if isinstance(value, str) else None
    if problem is not None:
        raise ValueError(problem)
    return value


def _plain_text_schema(schema: dict[str, Any]) -> None:
    """PlainText's rule as the document states it: no control or invisible format character
    anywhere, at least one other than a blank, at most MAX_REASON characters."""
    bad = CONTROL_CHARACTERS.pattern[1:-1] + invisible_class()
    schema.update(pattern=f"^[^{bad}]*[^\\s{bad}][^{bad}]*$", minLength=1, maxLength=MAX_REASON)


#: One line of free text: 1-500 characters as sent, no control characters (shown escaped
#: wherever shown) and no invisible format characters (`airflow_idempotent.text`); the blanks
#: around it are dropped.
PlainText = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1),
    BeforeValidator(_text_ok),
    BeforeValidator(_visible),  # listed last: the outermost, so it sees the text as sent
    Field(json_schema_extra=_plain_text_schema),
]


def _iso_text(value: Any) -> Any:
    if not isinstance(value, str) or not INSTANT_RE.fullmatch(value):
        raise ValueError(
            "expected a date YYYY-MM-DD (years 1900-2999) or an instant on it: "
            "YYYY-MM-DDTHH:MM[:SS[.ffffff]], then Z, +HH:MM or nothing (UTC)"
        )
    return value


def _in_utc(value: datetime) -> datetime:
    return to_utc_datetime(value, "instant")


#: A date or an ISO 8601 instant on it (years 1900-2999), given as text (never a number of
#: seconds); naive means UTC. `INSTANT_RE` is the rule, and the document shows it.
Instant = Annotated[
    datetime,
    BeforeValidator(_iso_text),
    AfterValidator(_in_utc),
    WithJsonSchema({"type": "string", "pattern": INSTANT_RE.pattern}),
]


class ThresholdsForm(Thresholds):
    """Stop conditions of this backfill, on top of the DAG's own: the guard's `Thresholds` model,
    named for the API's schema."""


class BackfillForm(BaseModel):
    """A guarded backfill: Airflow's range and options, and what the backfill declares (its conf).

    The declaration's fields are typed as the guard's `BackfillIntent` types them (so the form
    shows per-field problems), and the conf it makes (`backfill_conf`) is judged by
    `BackfillIntent` itself: one rule for the UI, the middleware, the task and the effects.
    """

    model_config = ConfigDict(extra="forbid")

    from_date: Instant = Field(description="first logical date (a date or an ISO 8601 instant; naive = UTC)")
    to_date: Instant = Field(description="last logical date, included")
    semantics: Semantics
    reason: PlainText = Field(description="why this backfill runs (recorded in the runs' conf)")
    policy_version: PolicyVersion | None = Field(
        None, description="the policy the windows are recomputed under; required for corrective"
    )
    approve_windows: Approval | None = Field(
        None, description="the exact number of windows approved, needed above the DAG's cap"
    )
    thresholds: ThresholdsForm | None = None
    max_active_runs: Annotated[int, Field(ge=1, le=64, strict=True), BeforeValidator(integral)] = 10
    reprocess_behavior: Literal["none", "failed", "completed"] = "none"
    run_backwards: StrictBool = False


def backfill_conf(form: BackfillForm) -> dict[str, Any]:
    """The DAG run conf the guard reads, with only what the form gave: the one place a form
    becomes a backfill's declaration. The preview, Airflow's checks and the creation all use it,
    and the guard's `BackfillIntent` decides whether it stands (the preview shows its refusal)."""
    conf: dict[str, Any] = {"semantics": form.semantics, "reason": form.reason}
    if form.policy_version is not None:
        conf["policy_version"] = form.policy_version
    if form.approve_windows is not None:
        conf["approve_windows"] = form.approve_windows
    if form.thresholds is not None:
        thresholds = form.thresholds.model_dump(exclude_unset=True, exclude_none=True)
        thresholds = {k: v for k, v in thresholds.items() if v != {}}
        if thresholds:
            conf["thresholds"] = thresholds
    return conf


def airflow_backfill_body(form: BackfillForm, dag_id: str) -> dict[str, Any]:
    """The request body of Airflow's `POST /api/v2/backfills` (BackfillPostBody) for this form."""
    return {
        "dag_id": dag_id,
        "from_date": form.from_date.isoformat(),
        "to_date": form.to_date.isoformat(),
        "run_backwards": form.run_backwards,
        "dag_run_conf": backfill_conf(form),
        "reprocess_behavior": form.reprocess_behavior,
        "max_active_runs": form.max_active_runs,
    }


class StopForm(BaseModel):
    """Stop a running backfill: its DAG's backfill kill switch, then Airflow's pause."""

    model_config = ConfigDict(extra="forbid")

    reason: PlainText = Field(description="why (shown by `airflow-idempotent switches` and the pages)")


class ClearForm(BaseModel):
    """Clear the DAG's backfill kill switch (an empty object)."""

    model_config = ConfigDict(extra="forbid")


#: The bodies the API documents (their schemas are added to the OpenAPI components).
BODY_MODELS: tuple[type[BaseModel], ...] = (BackfillForm, StopForm, ClearForm)


# Answers. Instants are ISO 8601 strings (as `history.report.jsonable` writes them).


class GuardDeclaration(Record):
    """The guard a DAG declares (the guard's `GuardConfig.to_json()`)."""

    cap: int
    measures: list[str]
    thresholds: dict[str, Any]


class SwitchState(BaseModel):
    scope: str
    scope_key: str
    reason: str | None
    set_by: str | None
    set_at: str | None
    description: str


class BackfillSummary(BaseModel):
    """An Airflow backfill."""

    id: int
    dag_id: str
    from_date: str | None
    to_date: str | None
    dag_run_conf: dict[str, Any] | None
    is_paused: bool
    reprocess_behavior: str | None
    max_active_runs: int | None
    created_at: str | None
    completed_at: str | None
    triggering_user_name: str | None


class GuardResponse(BaseModel):
    dag_id: str
    guarded: bool
    guard: GuardDeclaration | None
    invalid: str | None
    latest_backfill: BackfillSummary | None
    switches: list[SwitchState]
    history_error: str | None


class ExistingWrite(BaseModel):
    """The latest write of a table for a window: the data a backfill would replace."""

    target: str
    table: str
    policy_version: str | None
    dataset_version: int | None
    ordinal: int | None
    row_count: int | None
    semantics: str | None
    written_at: str | None


class PreviewWindow(BaseModel):
    logical_date: str | None
    partition_key: str | None
    will_run: bool
    skip_reason: str | None
    run_state: str | None
    run_id: str | None
    existing: list[ExistingWrite]
    start: str | None = None
    end: str | None = None
    label: str | None = None


class PreviewResponse(BaseModel):
    dag_id: str
    guarded: bool
    guard: GuardDeclaration | None
    conf: dict[str, Any]
    windows: list[PreviewWindow]
    listed: int
    total_in_range: int
    count: int
    cap: int | None
    over_cap: bool
    approval_needed: int | None
    refusal: str | None
    airflow_refusal: str | None
    blocked: list[str]
    switches: list[SwitchState]
    history_error: str | None
    effective_thresholds: dict[str, Any] | None
    can_submit: bool


class CreatedResponse(BaseModel):
    backfill: dict[str, Any] = Field(description="Airflow's answer (BackfillResponse)")


class StatusWrite(BaseModel):
    target: str
    table: str
    window: str
    task_id: str
    map_index: int
    try_number: int
    status: str
    ordinal: int | None
    dataset_version: int | None
    policy_version: str | None
    semantics: str | None
    row_count: int | None
    checksum: str | None
    fingerprint: str | None
    written_at: str | None
    message: str | None
    diff: dict[str, Any] | None
    flags: list[str]


class StatusWindow(BaseModel):
    sort_ordinal: int
    logical_date: str | None
    partition_key: str | None
    exception_reason: str | None
    run_id: str | None
    state: str | None
    start_date: str | None
    end_date: str | None
    writes: list[StatusWrite]
    label: str | None


class BackfillStatus(BaseModel):
    backfill: BackfillSummary
    phase: str
    finished: bool
    states: dict[str, int]
    windows: list[StatusWindow]
    measures: list[str]
    switches: list[SwitchState]
    history_error: str | None


class ClearedResponse(BaseModel):
    cleared: bool = Field(description="true when the switch was on")
