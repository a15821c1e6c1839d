"""The history routes' query strings and answers."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import date, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from airflow_idempotent.history.report import DEFAULT_LIMIT, FLAG_CHOICES, HistoryFilter
from airflow_idempotent.plugins.ui.datamodels.common import (
    DAG_ID_RE,
    DAY_RE,
    RUN_ID_RE,
    TABLE_RE,
    TASK_ID_RE,
    InputError,
    Record,
    matching,
    refuse,
)
from airflow_idempotent.window import to_utc_datetime, window_of

DIGITS_RE = re.compile(r"^[0-9]{1,6}$")
MAP_INDEX_RE = re.compile(r"^(-1|[0-9]{1,6})$")
#: What Airflow's UI leaves in an href when the task instance is not mapped.
MAP_INDEX_PLACEHOLDER = "{MAP_INDEX}"
#: Windows the history page shows at most in one request.
MAX_LIMIT = 500
#: The history filters, as query parameters (the CLI's `history` options).
HISTORY_PARAMS = ("dag_id", "task_id", "table", "from", "to", "flag", "limit")


def _day(value: object) -> date | None:
    if value is None:
        return None
    if isinstance(value, date) and not isinstance(value, datetime) and 1900 <= value.year <= 2999:
        return value  # given in Python
    if isinstance(value, str) and DAY_RE.fullmatch(value):
        return date.fromisoformat(value)
    raise refuse("expected a date YYYY-MM-DD (years 1900-2999)")


def _flag(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in FLAG_CHOICES:
        raise refuse(f"expected one of {', '.join(FLAG_CHOICES)}")
    return value


def _limit(value: object) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, str) and DIGITS_RE.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise refuse(f"expected a whole number from 1 to {MAX_LIMIT}")
    return value


def _map_index(value: object) -> int:
    if value is None:
        return -1
    if isinstance(value, str) and MAP_INDEX_RE.fullmatch(value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -1 <= value < 10**6:
        return value  # the default, or a value given in Python
    raise refuse("expected -1 or a whole number")


def form_value(value: object) -> object:
    """A page form's field: stripped, and None when empty (a form sends every field, filled or
    not). Only pages read their forms this way; the API refuses an empty or padded value."""
    if isinstance(value, str):
        return value.strip() or None
    return value


def documented(kind: str = "string", pattern: re.Pattern[str] | None = None, **schema: Any) -> WithJsonSchema:
    """A query parameter as the OpenAPI document shows it: its type, and the pattern (or bounds)
    its validator checks, with its own message (a value left out is a value not given)."""
    return WithJsonSchema({"type": kind, **({"pattern": pattern.pattern} if pattern else {}), **schema})


#: A day query parameter's schema.
DAY_DOC = documented(pattern=DAY_RE, format="date")


def _history_id(what: str, pattern: re.Pattern[str]) -> Any:
    return BeforeValidator(matching(pattern, f"not {what} (letters, digits, _ . - :)"))


class HistoryQuery(BaseModel):
    """The history filters (the CLI's `history` options), from the query string."""

    model_config = ConfigDict(frozen=True)

    dag_id: Annotated[str | None, _history_id("a DAG id", DAG_ID_RE), documented(pattern=DAG_ID_RE)] = Field(
        None, description="a DAG id (validated on a DAG's own route too, where the path's DAG wins)"
    )
    task_id: Annotated[str | None, _history_id("a task id", TASK_ID_RE), documented(pattern=TASK_ID_RE)] = (
        None
    )
    table: Annotated[
        str | None,
        _history_id("a table, schema.table or conn_id:table", TABLE_RE),
        documented(pattern=TABLE_RE),
    ] = Field(None, description="table, schema.table or conn_id:table")
    first: Annotated[date | None, BeforeValidator(_day), DAY_DOC] = Field(
        None, alias="from", description="first day YYYY-MM-DD (UTC), included"
    )
    last: Annotated[date | None, BeforeValidator(_day), DAY_DOC] = Field(
        None, alias="to", description="last day YYYY-MM-DD (UTC), included"
    )
    flag: Annotated[str | None, BeforeValidator(_flag), documented(enum=list(FLAG_CHOICES))] = Field(
        None, description=f"one of {', '.join(FLAG_CHOICES)}"
    )
    limit: Annotated[int, BeforeValidator(_limit), documented("integer", minimum=1, maximum=MAX_LIMIT)] = (
        Field(DEFAULT_LIMIT, description=f"windows, 1-{MAX_LIMIT}: the newest")
    )

    @field_validator("last")
    @classmethod
    def last_not_before_first(cls, last: date | None, info: ValidationInfo) -> date | None:
        first = info.data.get("first")
        if first is not None and last is not None and first > last:
            raise refuse("the last day is before the first")
        return last

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> HistoryQuery:
        """From the history page's form (a page that answers bad input itself): a field left
        empty is not given, and a value is taken without the blanks around it (`form_value`);
        the API takes its query as given. InputError lists every bad one."""
        given = {name: form_value(raw.get(name)) for name in HISTORY_PARAMS}
        given = {name: value for name, value in given.items() if value is not None}
        try:
            return cls.model_validate(given)
        except ValidationError as err:
            raise InputError.of(err, "query") from None

    def for_dag(self, dag_id: str) -> HistoryQuery:
        """The same filters for the DAG of the path (it wins over ?dag_id=)."""
        return self.model_copy(update={"dag_id": dag_id})

    def filter(self, dag_ids: Collection[str] | None = None) -> HistoryFilter:
        """As the history query's filter: the days as [first midnight, midnight after last) UTC,
        of the DAGs `dag_ids` only (every DAG when None)."""
        return HistoryFilter(
            dag_ids=frozenset(dag_ids) if dag_ids is not None else None,
            dag_id=self.dag_id,
            task_id=self.task_id,
            table=self.table,
            start=to_utc_datetime(window_of(self.first).start) if self.first else None,
            end=to_utc_datetime(window_of(self.last).end) if self.last else None,
            flag=self.flag,
            limit=self.limit,
        )

    def params(self) -> dict[str, str]:
        """As query parameters (for the form and the links): only what differs from the default."""
        out = {
            "dag_id": self.dag_id,
            "task_id": self.task_id,
            "table": self.table,
            "from": self.first.isoformat() if self.first else None,
            "to": self.last.isoformat() if self.last else None,
            "flag": self.flag,
            "limit": str(self.limit) if self.limit != DEFAULT_LIMIT else None,
        }
        return {k: v for k, v in out.items() if v is not None}


class AttemptQuery(BaseModel):
    """One task instance, from the query string (Airflow's task instance tab fills it in)."""

    model_config = ConfigDict(frozen=True)

    # Both required, as the document says (a default would document them as optional).
    run_id: Annotated[
        str,
        BeforeValidator(matching(RUN_ID_RE, "not a run id (letters, digits, _ . ~ : + @ -)", True)),
        documented(pattern=RUN_ID_RE),
    ]
    task_id: Annotated[
        str,
        BeforeValidator(matching(TASK_ID_RE, "not a task id (letters, digits, _ . -)", True)),
        documented(pattern=TASK_ID_RE),
    ]
    map_index: Annotated[
        int, BeforeValidator(_map_index), documented("integer", minimum=-1, maximum=999_999)
    ] = Field(-1, description="-1 (default: not mapped) or the mapped index")


class AttemptPageQuery(AttemptQuery):
    """The attempt page's query: Airflow's task instance tab links to it with the literal
    `{MAP_INDEX}` left in place when the task is not mapped (read as -1); fields as a form's."""

    @model_validator(mode="before")
    @classmethod
    def _from_link(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = {name: form_value(value) for name, value in data.items()}
        if out.get("map_index") == MAP_INDEX_PLACEHOLDER:
            out["map_index"] = None
        return {name: value for name, value in out.items() if value is not None}


# Answers. Instants are ISO 8601 strings (as `history.report.jsonable` writes them).


class Span(BaseModel):
    start: str
    end: str
    label: str


class HistoryWrite(Record):
    """One window write, as `airflow-idempotent history --json` shows it, plus its diff."""

    ordinal: int | None
    written_at: str | None
    run_type: str | None
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    strategy: str | None
    status: str
    row_count: int | None
    checksum: str | None
    fingerprint: str | None
    dataset_version: int | None
    semantics: str | None
    policy_version: str | None
    message: str | None
    dag_version_id: str | None = Field(None, description="Airflow's DAG version the write ran under")
    dag_version_number: int | None = Field(None, description="its number (None when Airflow's is unknown)")
    bundle_name: str | None = None
    bundle_version: str | None = Field(None, description="the DAG bundle's version (git commit), if any")
    flags: list[str] = Field(default_factory=list)
    diff: dict[str, Any] | None = None


class AttemptEvent(Record):
    """One task attempt event the listener recorded."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    event: str | None
    at: str | None
    state: str | None
    error: str | None
    failed: bool


class HistoryWindow(Record):
    """One window of one target: every write in order, with the task attempts behind them."""

    target: str
    conn_id: str | None
    table: str
    window: Span
    flags: list[str]
    writes: list[HistoryWrite]
    attempts: list[AttemptEvent]


class ChartRow(BaseModel):
    label: str
    cells: list[str]
    change: str


class ChartSeries(BaseModel):
    """A measure's (or "rows") total per window and dataset version, as the page charts it."""

    measure: str
    versions: list[str]
    windows: list[ChartRow]


class RunTry(Record):
    """One try of one task in a DAG run: its final state, when, how long, where, and its error."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    state: str | None
    started_at: str | None
    ended_at: str | None
    duration_seconds: float | None
    hostname: str | None
    error: str | None
    failed: bool


class HistoryRun(Record):
    """One DAG run, of any DAG (window writes or not): its events, every attempt event and try."""

    dag_id: str
    run_id: str
    run_type: str | None
    state: str | None
    started_at: str | None
    ended_at: str | None
    duration_seconds: float | None
    attempts: list[AttemptEvent]
    tries: list[RunTry]


class HistoryResponse(BaseModel):
    filters: dict[str, str]
    runs: list[HistoryRun] = Field(default_factory=list)
    windows: list[HistoryWindow]
    charts: list[ChartSeries]


class AttemptWrite(HistoryWrite):
    """A try's window write with every recorded field, its diff and fingerprint parts parsed."""

    target: str
    conn_id: str | None
    table: str
    window_label: str | None
    fingerprint_parts: Any = None


class AttemptEventDetail(AttemptEvent):
    error_line: str | None


class AttemptTry(BaseModel):
    try_number: int
    writes: list[AttemptWrite]
    events: list[AttemptEventDetail]


class AttemptsResponse(BaseModel):
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    tries: list[AttemptTry]
