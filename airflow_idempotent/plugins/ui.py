"""The provider's pages inside Airflow's UI, and the JSON API they (and scripts) use.

A FastAPI app mounted by `IdempotentPlugin` in Airflow's API server under ``/idempotent``, and
registered as external views (iframes) of Airflow's UI:

========================  ==============================================  ==========================
UI entry                  page                                            Airflow UI destination
========================  ==============================================  ==========================
Browse > Run history      ``/idempotent/history``                         ``nav``
DAG tab "Run history"     ``/idempotent/dags/{dag_id}/history``           ``dag``
DAG tab "Guarded backfill" ``/idempotent/dags/{dag_id}/backfill``         ``dag``
Task instance tab         ``/idempotent/dags/{dag_id}/attempt?run_id=..``  ``task_instance``
========================  ==============================================  ==========================

The JSON API (OpenAPI document at ``/idempotent/api/openapi.json``):

* ``GET  /idempotent/api/history`` and ``GET /idempotent/api/dags/{dag_id}/history``: windows
  (``window_history`` + ``jsonable``, the CLI's query and shape) with every write (its diff too)
  and attempt, and the chart series (each window's measure totals per dataset version).
* ``GET  /idempotent/api/dags/{dag_id}/guard``: the DAG's guard, kill switches, latest backfill.
* ``POST /idempotent/api/dags/{dag_id}/backfills/preview``: the windows a backfill would run, the
  count against the cap, each window's existing data and policy version, and what the guard (or
  Airflow) refuses. Nothing is created.
* ``POST /idempotent/api/dags/{dag_id}/backfills``: create the backfill (Airflow's own creation
  route, as the caller, after the guard's own evaluation: the same answer
  ``POST /api/v2/backfills`` gives). A refusal is a 422 whose ``detail`` is the guard's message.
* ``GET  /idempotent/api/dags/{dag_id}/backfills/{backfill_id}``: per-window status and diffs.
* ``POST /idempotent/api/dags/{dag_id}/backfills/{backfill_id}/stop``: the DAG's backfill kill
  switch, then Airflow's pause of the backfill.
* ``POST /idempotent/api/dags/{dag_id}/killswitch/clear``: clear the DAG's backfill switch.
* ``GET  /idempotent/api/dags/{dag_id}/attempts?run_id=&task_id=&map_index=``: one task
  instance's tries: each try's write, diff, fingerprint (and its parts) and attempt events.

Security:

* **Authentication and authorisation** are Airflow's: every route depends on Airflow's own
  ``get_user`` (Bearer header, else the UI's JWT cookie: 401 without, 403 for a bad token) and,
  for a DAG, ``requires_access_dag`` (403 without access): reading history and backfill status
  needs GET on the DAG's runs, an attempt GET on its task instances, preview and create POST on
  its runs (as Airflow's dry run and create), stop and clear PUT (as Airflow's pause). The history
  page without a DAG shows only the DAGs the user may read (403 if none). A backfill id in a path
  must belong to the path's DAG (else 404), so access to one DAG never reaches another's backfill.
* **CSRF**: every state-changing route is a POST with a JSON body (415 otherwise), refused when
  the browser says it is cross-site (``Sec-Fetch-Site``, ``Origin``), and, when the caller is
  authenticated by the UI's cookie (not by an ``Authorization: Bearer`` header, which a browser
  never attaches by itself), it must carry the ``X-Idempotent-CSRF`` header: a token the page
  embeds, signed with Airflow's ``[api] secret_key``, bound to the user and valid 12 hours.
* **Escaping**: pages are Jinja2 templates with autoescape on; data for scripts is embedded with
  ``tojson`` in a ``<script type="application/json">`` block and the script builds the DOM with
  ``textContent`` only. Every query parameter and form field is validated (422 on anything else,
  nothing written); SQL is only ever SQLAlchemy expressions with bound values. Responses carry a
  Content-Security-Policy (scripts and styles from this app only, framing by Airflow's origin).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlparse

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationError,
)
from starlette.exceptions import HTTPException

from airflow_idempotent import __version__
from airflow_idempotent.guard import GuardConfig, GuardRefusal
from airflow_idempotent.history.report import (
    DEFAULT_LIMIT,
    FLAG_CHOICES,
    FLAG_FAILED,
    FLAG_REFUSED,
    HistoryFilter,
    attempt_failed,
    day_range,
    first_line,
    jsonable,
    short,
    split_target,
    window_history,
    writes_query,
)
from airflow_idempotent.history.store import HistoryStore

URL_PREFIX = "/idempotent"
ASSETS = Path(__file__).with_name("ui_assets")
TEMPLATES = ASSETS / "templates"
STATIC = ASSETS / "static"
#: The files `/static/{name}` serves (nothing else is ever read from disk by name).
STATIC_FILES = {
    "idempotent.css": "text/css; charset=utf-8",
    "backfill.js": "text/javascript; charset=utf-8",
}

CSRF_HEADER = "X-Idempotent-CSRF"
CSRF_SALT = "airflow-idempotent-ui-csrf"
CSRF_MAX_AGE = 12 * 3600

#: Seconds the pages wait for the history store (and for one statement on PostgreSQL).
STORE_TIMEOUT = 10.0
#: Windows the history page shows at most in one request.
MAX_LIMIT = 500
#: Windows a preview lists (a longer range is counted and refused over the cap, not listed).
PREVIEW_LIST = 400
#: Windows in a chart (the newest of the result).
CHART_WINDOWS = 31
#: Charts on a page: the measures first, then the row counts.
MAX_CHARTS = 4
#: Colours of the chart's dataset versions (CSS classes v0..v5).
PALETTE = 6
ROWS_SERIES = "rows"

# What the routes accept. Airflow's own rule for DAG and task ids (KEY_REGEX), at most 250 chars.
DAG_ID_RE = re.compile(r"^[\w.-]{1,250}$")
TASK_ID_RE = DAG_ID_RE
# Run ids: Airflow's default allowed_run_id_pattern and the ids it generates (plus unicode letters).
RUN_ID_RE = re.compile(r"^[\w.~:+@-]{1,250}$")
# A history target: table, schema.table or conn_id:table.
TABLE_RE = re.compile(r"^[\w.:-]{1,500}$")
MEASURE_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
POLICY_RE = r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$"
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
DIGITS_RE = re.compile(r"^[0-9]{1,6}$")
#: What Airflow's UI leaves in an href when the task instance is not mapped.
MAP_INDEX_PLACEHOLDER = "{MAP_INDEX}"

HISTORY_PARAMS = ("dag_id", "task_id", "table", "from", "to", "flag", "limit")

#: The external views of Airflow's UI (hrefs relative to Airflow's base URL, as Airflow requires).
EXTERNAL_VIEWS: list[dict[str, Any]] = [
    {
        "name": "Run history",
        "href": "idempotent/history",
        "destination": "nav",
        "category": "browse",
        "url_route": "idempotent-history",
    },
    {
        "name": "Run history",
        "href": "idempotent/dags/{DAG_ID}/history",
        "destination": "dag",
        "url_route": "idempotent-dag-history",
    },
    {
        "name": "Guarded backfill",
        "href": "idempotent/dags/{DAG_ID}/backfill",
        "destination": "dag",
        "url_route": "idempotent-backfill",
    },
    {
        "name": "Window write",
        "href": "idempotent/dags/{DAG_ID}/attempt?run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}",
        "destination": "task_instance",
        "url_route": "idempotent-attempt",
    },
]


# ============================================================================================
# Input
# ============================================================================================


class InputError(Exception):
    """Bad input: each problem as (where, field, message). Answered 422, nothing is done."""

    def __init__(self, problems: Sequence[tuple[str, str, str]]) -> None:
        super().__init__("; ".join(f"{f}: {m}" for _, f, m in problems))
        self.problems = list(problems)

    def detail(self) -> list[dict[str, Any]]:
        return [
            {"loc": [where, name], "msg": message, "type": "value_error"}
            for where, name, message in self.problems
        ]


def _text_ok(value: str) -> str:
    if CONTROL_RE.search(value):
        raise ValueError("control characters are not allowed")
    return value


#: One line of free text: 1-500 characters, no control characters (shown escaped wherever shown).
PlainText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500), AfterValidator(_text_ok)
]
Count = Annotated[int, Field(ge=0, le=10**12, strict=True)]
Amount = Annotated[float, Field(ge=0, le=1e18, strict=True, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False)]
Measure = Annotated[str, StringConstraints(pattern=MEASURE_RE)]


def _iso_text(value: Any) -> Any:
    if not isinstance(value, str) or len(value) > 40:
        raise ValueError("expected a date YYYY-MM-DD or an ISO 8601 instant")
    return value


def _utc_instant(value: datetime) -> datetime:
    if not 1900 <= value.year <= 2999:
        raise ValueError("expected a date between the years 1900 and 2999")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


#: A date or an ISO 8601 instant, given as text (never a number of seconds); naive means UTC.
Instant = Annotated[datetime, BeforeValidator(_iso_text), AfterValidator(_utc_instant)]


class ThresholdsForm(BaseModel):
    """Stop conditions of this backfill, on top of the DAG's own (see the guard)."""

    model_config = ConfigDict(extra="forbid")

    max_changed_rows: Count | None = None
    max_removed_rows: Count | None = None
    max_added_rows: Count | None = None
    max_shrink: Fraction | None = Field(None, description="fraction, e.g. 0.1 refuses a result 10 % smaller")
    max_measure_abs_change: dict[Measure, Amount] = Field(default_factory=dict, max_length=32)
    max_measure_rel_change: dict[Measure, Amount] = Field(default_factory=dict, max_length=32)

    def conf(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v not in (None, {})}


class BackfillForm(BaseModel):
    """A guarded backfill: Airflow's range and options, and what the backfill declares (its conf)."""

    model_config = ConfigDict(extra="forbid")

    from_date: Instant = Field(description="first logical date (a date or an ISO 8601 instant; naive = UTC)")
    to_date: Instant = Field(description="last logical date, included")
    semantics: Literal["replay", "corrective", "reconcile"]
    reason: PlainText = Field(description="why this backfill runs (recorded in the runs' conf)")
    policy_version: Annotated[str, StringConstraints(pattern=POLICY_RE)] | None = Field(
        None, description="the policy the windows are recomputed under; required for corrective"
    )
    approve_windows: Annotated[int, Field(ge=1, le=100_000, strict=True)] | None = Field(
        None, description="the exact number of windows approved, needed above the DAG's cap"
    )
    thresholds: ThresholdsForm | None = None
    max_active_runs: Annotated[int, Field(ge=1, le=64, strict=True)] = 10
    reprocess_behavior: Literal["none", "failed", "completed"] = "none"
    run_backwards: StrictBool = False

    def conf(self) -> dict[str, Any]:
        """The DAG run conf the guard reads (only what was given)."""
        conf: dict[str, Any] = {"semantics": self.semantics, "reason": self.reason}
        if self.policy_version is not None:
            conf["policy_version"] = self.policy_version
        if self.approve_windows is not None:
            conf["approve_windows"] = self.approve_windows
        if self.thresholds is not None and self.thresholds.conf():
            conf["thresholds"] = self.thresholds.conf()
        return conf

    def airflow_body(self, dag_id: str) -> dict[str, Any]:
        """The request body of Airflow's `POST /api/v2/backfills` (BackfillPostBody)."""
        return {
            "dag_id": dag_id,
            "from_date": self.from_date.isoformat(),
            "to_date": self.to_date.isoformat(),
            "run_backwards": self.run_backwards,
            "dag_run_conf": self.conf(),
            "reprocess_behavior": self.reprocess_behavior,
            "max_active_runs": self.max_active_runs,
        }


class StopForm(BaseModel):
    """Stop a running backfill: its DAG's backfill kill switch, then Airflow's pause."""

    model_config = ConfigDict(extra="forbid")

    reason: PlainText = Field(description="why (shown by `airflow-idempotent switches` and the pages)")


class ClearForm(BaseModel):
    """Clear the DAG's backfill kill switch (an empty object)."""

    model_config = ConfigDict(extra="forbid")


BODY_MODELS: tuple[type[BaseModel], ...] = (BackfillForm, StopForm, ClearForm)


def json_body(model: type[BaseModel]) -> Callable[..., Any]:
    """A dependency parsing the JSON body into `model` *after* the auth and CSRF dependencies
    (FastAPI would otherwise parse a declared body before any dependency runs)."""

    async def parse(request: Request) -> Any:
        raw = await request.body()
        if len(raw) > 64_000:
            raise HTTPException(413, "request body too large")
        try:
            return model.model_validate_json(raw or b"{}")
        except ValidationError as err:
            raise RequestValidationError(
                [
                    {"loc": ("body", *e["loc"]), "msg": e["msg"], "type": e["type"]}
                    for e in err.errors(include_input=False, include_url=False)
                ]
            ) from None

    return parse


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}},
        }
    }


def check_dag_id(dag_id: str) -> str:
    if not DAG_ID_RE.fullmatch(dag_id):
        raise InputError([("path", "dag_id", "not a DAG id (letters, digits, _ . - ; at most 250)")])
    return dag_id


def _blank(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def _day(value: str | None, name: str, problems: list[tuple[str, str, str]]) -> date | None:
    value = _blank(value)
    if value is None:
        return None
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValueError
        day = date.fromisoformat(value)
        if not 1900 <= day.year <= 2999:
            raise ValueError
        return day
    except ValueError:
        problems.append(("query", name, "expected a date YYYY-MM-DD"))
        return None


@dataclass(frozen=True)
class HistoryQuery:
    """The history page's filters, validated (the CLI's `history` options)."""

    dag_id: str | None = None
    task_id: str | None = None
    table: str | None = None
    first: date | None = None
    last: date | None = None
    flag: str | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def parse(cls, raw: Mapping[str, str | None], dag_id: str | None = None) -> HistoryQuery:
        """From query parameters; InputError lists every bad one. `dag_id` from the path wins."""
        problems: list[tuple[str, str, str]] = []
        values: dict[str, Any] = {}
        for name, pattern, what in (
            ("dag_id", DAG_ID_RE, "a DAG id"),
            ("task_id", TASK_ID_RE, "a task id"),
            ("table", TABLE_RE, "a table, schema.table or conn_id:table"),
        ):
            value = _blank(raw.get(name))
            if value is not None and not pattern.fullmatch(value):
                problems.append(("query", name, f"not {what} (letters, digits, _ . - :)"))
            values[name] = value
        if dag_id is not None:
            values["dag_id"] = dag_id
        values["first"] = _day(raw.get("from"), "from", problems)
        values["last"] = _day(raw.get("to"), "to", problems)
        if values["first"] and values["last"] and values["first"] > values["last"]:
            problems.append(("query", "to", "the last day is before the first"))
        flag = _blank(raw.get("flag"))
        if flag is not None and flag not in FLAG_CHOICES:
            problems.append(("query", "flag", f"expected one of {', '.join(FLAG_CHOICES)}"))
        values["flag"] = flag
        limit = _blank(raw.get("limit"))
        values["limit"] = DEFAULT_LIMIT
        if limit is not None:
            if not DIGITS_RE.fullmatch(limit) or not 1 <= int(limit) <= MAX_LIMIT:
                problems.append(("query", "limit", f"expected a whole number from 1 to {MAX_LIMIT}"))
            else:
                values["limit"] = int(limit)
        if problems:
            raise InputError(problems)
        return cls(**values)

    def filter(self) -> HistoryFilter:
        start, end = day_range(self.first, self.last)
        return HistoryFilter(
            dag_id=self.dag_id,
            task_id=self.task_id,
            table=self.table,
            start=start,
            end=end,
            flag=self.flag,
            limit=self.limit,
        )

    def params(self) -> dict[str, str]:
        """As query parameters (for the form and the links)."""
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


# ============================================================================================
# The history store
# ============================================================================================

_store_lock = threading.Lock()
_stores: dict[str, HistoryStore] = {}


def history_store(request: Request) -> HistoryStore:
    """The history store (connection `idempotent_history`, as the operators use); a test may set
    `app.state.history_store`."""
    override = getattr(request.app.state, "history_store", None)
    if override is not None:
        return override  # type: ignore[no-any-return]
    with _store_lock:
        store = _stores.get("default")
        if store is None:
            store = _stores["default"] = HistoryStore.from_airflow(timeout=STORE_TIMEOUT)
    return store


def store_error(err: BaseException) -> str:
    return (
        f"the history store cannot be read ({type(err).__name__}): check the connection "
        "idempotent_history and the API server's log"
    )


# ============================================================================================
# Authentication, authorisation, CSRF: Airflow's own dependencies, imported when first used
# (the plugin module is also loaded by schedulers and workers, which never serve these routes).
# ============================================================================================

_bearer = HTTPBearer(auto_error=False)


async def current_user(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Any:
    """The caller, exactly as Airflow's API authenticates it (`security.get_user`)."""
    from airflow.api_fastapi.core_api.security import get_user

    return await get_user(request, _oauth_token=None, bearer_credentials=credentials)


#: The authenticated caller (401 without credentials, 403 for an invalid token).
UserDep = Annotated[Any, Depends(current_user)]


def dag_access(method: str, entity: str) -> Callable[..., Any]:
    """Airflow's `requires_access_dag(method, entity)` for the DAG in the path (or ?dag_id=)."""

    def check(request: Request, user: UserDep) -> Any:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import requires_access_dag

        # Not a DAG id at all (e.g. a NUL byte the database would choke on): 422 before asking.
        where = "path" if "dag_id" in request.path_params else "query"
        dag_id = request.path_params.get("dag_id") or request.query_params.get("dag_id")
        if dag_id is not None and not DAG_ID_RE.fullmatch(dag_id):
            raise InputError([(where, "dag_id", "not a DAG id (letters, digits, _ . - ; at most 250)")])
        requires_access_dag(method, DagAccessEntity[entity])(request, user)  # type: ignore[arg-type]
        return user

    check.__name__ = f"requires_access_dag_{method.lower()}_{entity.lower()}"
    return check


def history_access(request: Request, user: UserDep) -> Any:
    """The nav history page: a DAG filter needs access to that DAG; without one, the user sees
    the DAGs they may read (resolved by the route)."""
    if request.query_params.get("dag_id"):
        return dag_access("GET", "RUN")(request, user)
    return user


def readable_dag_ids(user: Any) -> set[str]:
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


def user_name(user: Any) -> str:
    try:
        return str(user.get_name())
    except Exception:
        return "unknown"


def _signer() -> Any:
    from airflow.api_fastapi.auth.tokens import get_signing_key
    from itsdangerous import URLSafeTimedSerializer

    return URLSafeTimedSerializer(get_signing_key("api", "secret_key"), salt=CSRF_SALT)


def csrf_token(user: Any) -> str:
    """The token a page embeds for its POSTs: signed, bound to the user, valid CSRF_MAX_AGE."""
    return str(_signer().dumps(str(user.get_id())))


def _bearer_authenticated(request: Request) -> bool:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(credentials.strip())


def _same_origin(request: Request, origin: str) -> bool:
    if origin == "null":
        return False
    host = urlparse(origin).netloc.lower()
    allowed = {request.headers.get("host", "").lower()}
    from airflow.configuration import conf

    base_url = conf.get("api", "base_url", fallback="") or ""
    if base_url:
        allowed.add(urlparse(base_url).netloc.lower())
    return bool(host) and host in allowed


async def csrf_protect(request: Request, user: UserDep) -> None:
    """Refuse a state-changing request a browser could have been tricked into sending."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HTTPException(415, "send the body as application/json")
    if request.headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none"):
        raise HTTPException(403, "cross-site request refused")
    origin = request.headers.get("origin")
    if origin is not None and not _same_origin(request, origin):
        raise HTTPException(403, "cross-origin request refused")
    if _bearer_authenticated(request):
        return  # a script's explicit credential: no browser sends it on its own
    token = request.headers.get(CSRF_HEADER)
    if not token:
        raise HTTPException(403, f"missing {CSRF_HEADER} header: reload the page and try again")
    from itsdangerous import BadSignature

    try:
        subject = _signer().loads(token, max_age=CSRF_MAX_AGE)
    except BadSignature:
        raise HTTPException(403, "invalid or expired CSRF token: reload the page and try again") from None
    if subject != str(user.get_id()):
        raise HTTPException(403, "the CSRF token belongs to another user: reload the page")


def audit(event: str) -> Callable[..., Any]:
    """Airflow's audit log entry (`action_logging`, the Event Log page) for a state change."""

    async def log(request: Request, user: UserDep) -> None:
        from airflow.api_fastapi.logging.decorators import action_logging
        from airflow.utils.session import create_session

        try:  # Airflow's logger parses the body; one that is not JSON is refused (422) right after
            json.loads(await request.body() or b"{}")
        except ValueError:
            return

        with create_session(scoped=False) as session:
            await action_logging(event)(request, session, user)

    log.__name__ = f"audit_{event}"
    return log


# ============================================================================================
# History: the CLI's query (window_history), each write's diff, visibility, the charts
# ============================================================================================


def _parse_json(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return text if isinstance(text, dict) else None
    try:
        return json.loads(text)
    except ValueError:
        return None


def attach_diffs(store: HistoryStore, flt: HistoryFilter, windows: list[dict[str, Any]]) -> None:
    """Each write's recorded diff (parsed), read through the same writes_query as the history."""
    if not windows or all("diff" in w for win in windows for w in win["writes"]):
        for win in windows:
            for w in win["writes"]:
                w["diff"] = _parse_json(w.get("diff"))
        return
    import sqlalchemy as sa

    sub = writes_query(flt).subquery("w")
    stmt = sa.select(
        sub.c.dag_id, sub.c.run_id, sub.c.task_id, sub.c.map_index, sub.c.try_number, sub.c.diff
    ).where(sub.c.diff.is_not(None))
    with store.engine.connect() as conn:
        diffs = {tuple(row[:5]): _parse_json(row[5]) for row in conn.execute(stmt)}
    for win in windows:
        for w in win["writes"]:
            key = (w["dag_id"], w["run_id"], w["task_id"], w["map_index"], w["try_number"])
            w["diff"] = diffs.get(key)


def only_dags(windows: list[dict[str, Any]], allowed: set[str]) -> list[dict[str, Any]]:
    """The windows as a user who may read only `allowed` sees them: other DAGs' writes and
    attempts removed, windows left empty dropped, flags recomputed."""
    out = []
    for win in windows:
        writes = [w for w in win["writes"] if w["dag_id"] in allowed]
        if not writes:
            continue
        attempts = [a for a in win["attempts"] if a["dag_id"] in allowed]
        seen = {flag for w in writes for flag in w.get("flags", [])}
        if any(attempt_failed(a) for a in attempts):
            seen.add(FLAG_FAILED)
        flags = [f for f in (*FLAG_CHOICES, FLAG_REFUSED) if f in seen]
        out.append({**win, "writes": writes, "attempts": attempts, "flags": flags})
    return out


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def window_series(window: Mapping[str, Any]) -> dict[str, dict[int, Decimal]]:
    """One window's totals per dataset version: measure (or "rows") -> version -> total.

    A guarded write's diff holds each measure's sum before and after it; the "after" is the
    total of the write's dataset version, the "before" that of the version it replaced (0:
    data that was there before the history began). Row counts come from every write.
    """
    out: dict[str, dict[int, Decimal]] = {}
    previous = 0
    for write in window["writes"]:
        if write.get("status") != "written":
            continue
        version = int(write.get("dataset_version") or 0)
        diff = write.get("diff") if isinstance(write.get("diff"), dict) else None
        rows_before = _decimal(diff.get("rows_before")) if diff else None
        had_data = previous > 0 or bool(rows_before)
        if diff:
            measures = diff.get("measures")
            for name, sums in measures.items() if isinstance(measures, dict) else []:
                if not isinstance(sums, dict) or not re.fullmatch(MEASURE_RE, str(name)):
                    continue
                points = out.setdefault(str(name), {})
                before, after = _decimal(sums.get("before")), _decimal(sums.get("after"))
                if before is not None and had_data and previous not in points:
                    points[previous] = before
                if after is not None:
                    points[version] = after
        rows = out.setdefault(ROWS_SERIES, {})
        if rows_before is not None and had_data and previous not in rows:
            rows[previous] = rows_before
        row_count = _decimal(write.get("row_count"))
        if row_count is not None:
            rows[version] = row_count
        previous = version
    return {name: points for name, points in out.items() if points}


def fmt_number(value: Decimal | float | int | None, places: int | None = None) -> str:
    """Thousands separated; a Decimal with `places` decimals (default: its own)."""
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return f"{value:,.{places}f}" if places is not None else f"{value:,}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def places_of(values: Iterable[Decimal | None]) -> int:
    """The decimals to show a set of figures with: the most any of them has, at most 4 (so a
    database that sums money as floats shows 6,612.00 beside 6,459.69, not 6,612.0)."""
    exponents = [v.as_tuple().exponent for v in values if v is not None]
    return min(4, max([0, *(-e for e in exponents if isinstance(e, int))]))


def signed(value: Decimal | None, places: int | None = None) -> str:
    if value is None:
        return ""
    return ("+" if value > 0 else "") + fmt_number(value, places)


def version_name(version: int) -> str:
    return "before history" if version == 0 else f"version {version}"


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    span = hi - lo
    raw = span / count
    magnitude = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = (lo // step) * step
    ticks, tick = [], first
    while tick <= hi + step * 1e-9:
        if tick >= lo - step * 1e-9:
            ticks.append(round(tick, 10))
        tick += step
    return ticks


def build_chart(name: str, groups: list[tuple[str, dict[int, Decimal]]]) -> dict[str, Any]:
    """A grouped bar chart (numbers only; the template draws it as SVG, escaped) and its table."""
    versions = sorted({v for _, points in groups for v in points})
    values = [float(v) for _, points in groups for v in points.values()]
    lo, hi = min(0.0, *values), max(0.0, *values)
    if hi == lo:
        hi = lo + 1
    ticks = _ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    places = places_of(v for _, points in groups for v in points.values())
    left, top, plot_h, bottom = 92, 12, 190, 78
    group_w = max(34, 12 * len(versions) + 14)
    bar_w = (group_w - 10) / max(1, len(versions))
    width = left + group_w * len(groups) + 24

    def y(v: float) -> float:
        return round(top + (hi - v) / (hi - lo) * plot_h, 1)

    bars, labels = [], []
    for gi, (label, points) in enumerate(groups):
        x0 = left + gi * group_w + 5
        for vi, version in enumerate(versions):
            if version not in points:
                continue
            value = float(points[version])
            y_top, y_bottom = y(max(value, 0.0)), y(min(value, 0.0))
            bars.append(
                {
                    "x": round(x0 + vi * bar_w, 1),
                    "y": y_top,
                    "w": round(max(bar_w - 2, 2), 1),
                    "h": round(max(y_bottom - y_top, 1), 1),
                    "cls": f"v{version % PALETTE}",
                    "title": f"{label} · {version_name(version)}: {fmt_number(points[version], places)}",
                }
            )
        labels.append({"x": round(x0 + (group_w - 10) / 2, 1), "y": top + plot_h + 14, "text": label})
    rows = []
    places = places_of(v for _, points in groups for v in points.values())
    for label, points in groups:
        present = [points[v] for v in versions if v in points]
        change = present[-1] - present[0] if len(present) > 1 else None
        rows.append(
            {
                "label": label,
                "cells": [fmt_number(points.get(v), places) for v in versions],
                "change": signed(change, places),
            }
        )
    return {
        "name": name,
        "title": "rows per window" if name == ROWS_SERIES else f"{name}: total per window",
        "width": width,
        "height": top + plot_h + bottom,
        "plot": {"left": left, "top": top, "right": width - 16, "bottom": top + plot_h, "zero": y(0.0)},
        "ticks": [{"y": y(t), "text": fmt_number(t)} for t in ticks],
        "bars": bars,
        "labels": labels,
        "legend": [{"cls": f"v{v % PALETTE}", "text": version_name(v)} for v in versions],
        "versions": [version_name(v) for v in versions],
        "rows": rows,
    }


def build_charts(windows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each window's measure totals per dataset version: one chart per measure, then rows."""
    ordered = sorted(windows, key=lambda w: (w["window"]["start"], w["target"]))[-CHART_WINDOWS:]
    several_tables = len({w["target"] for w in ordered}) > 1
    per_name: dict[str, list[tuple[str, dict[int, Decimal]]]] = {}
    for win in ordered:
        label = str(win["window"]["label"])
        if several_tables:
            label = f"{win['table']} {label}"
        for name, points in window_series(win).items():
            per_name.setdefault(name, []).append((label, points))
    names = sorted(n for n in per_name if n != ROWS_SERIES)
    if ROWS_SERIES in per_name:
        names.append(ROWS_SERIES)
    return [build_chart(name, per_name[name]) for name in names[:MAX_CHARTS]]


def chart_json(chart: Mapping[str, Any]) -> dict[str, Any]:
    """A chart for the API: its series, without the drawing."""
    return {"measure": chart["name"], "versions": chart["versions"], "windows": chart["rows"]}


def read_history(store: HistoryStore, query: HistoryQuery, allowed: set[str] | None) -> list[dict[str, Any]]:
    """The CLI's history (window_history) plus each write's diff, limited to `allowed` DAGs."""
    flt = query.filter()
    windows = window_history(store, flt)
    attach_diffs(store, flt, windows)
    for win in windows:
        for write in win["writes"]:
            write["table"] = win["table"]
    return only_dags(windows, allowed) if allowed is not None else windows


# ============================================================================================
# Guarded backfills
# ============================================================================================


def load_dag(session: Any, dag_id: str) -> Any:
    """The DAG as the API server has it (serialized), or 404."""
    from airflow.models.serialized_dag import SerializedDagModel

    serdag = session.scalar(SerializedDagModel.latest_item_select_object(dag_id))
    if serdag is None:
        raise HTTPException(404, f"DAG {dag_id} not found")
    return serdag.dag


def dag_guard(dag: Any) -> tuple[GuardConfig | None, str | None]:
    """(the guard the DAG declares or None, the reason it is invalid or None)."""
    from airflow_idempotent.plugins.guard_middleware import guard_of

    try:
        return guard_of(dag), None
    except GuardRefusal as refusal:
        return None, str(refusal)


def _utc(value: Any) -> datetime:
    from airflow_idempotent.window import _coerce_instant

    instant = _coerce_instant(value, "instant")
    return datetime.fromtimestamp(instant.timestamp(), tz=timezone.utc)


def window_bounds(info: Any, granularity: str | None) -> tuple[datetime, datetime]:
    """[start, end) of the window a run of `info` writes, as the operators compute it."""
    from airflow_idempotent import window as windows
    from airflow_idempotent.plugins.guard_middleware import window_end

    end = _utc(window_end(info, granularity))
    interval = info.data_interval
    if interval is not None and interval.end > interval.start:
        return _utc(interval.start), end
    unit = windows.parse_granularity(granularity)
    instant = info.logical_date if info.logical_date is not None else info.partition_date
    if instant is None:
        instant = windows._parse_partition_key(info.partition_key, "UTC")
    start = windows._coerce_instant(instant, "logical_date")
    assert unit is not None  # window_end raised otherwise
    return _utc(windows._period(start, unit, windows._zone("UTC"), "start")[0]), end


def window_label(start: datetime, end: datetime) -> str:
    import pendulum

    from airflow_idempotent.window import Window

    return Window(start=pendulum.instance(start), end=pendulum.instance(end), source="ui").label()


def _switches_json(store: HistoryStore, dag_id: str) -> list[dict[str, Any]]:
    from airflow_idempotent.killswitch import active_switches

    return [
        {
            "scope": s.scope,
            "scope_key": s.scope_key,
            "reason": s.reason,
            "set_by": s.set_by,
            "set_at": jsonable(s.set_at),
            "description": s.describe(),
        }
        for s in active_switches(store, dag_id, backfill=True)
    ]


def latest_backfill(session: Any, dag_id: str) -> Any:
    import sqlalchemy as sa
    from airflow.models.backfill import Backfill

    return session.scalar(
        sa.select(Backfill).where(Backfill.dag_id == dag_id).order_by(Backfill.id.desc()).limit(1)
    )


def guard_json(config: GuardConfig | None) -> dict[str, Any] | None:
    return None if config is None else config.to_json()


def existing_writes(
    store: HistoryStore, dag_id: str, spans: Sequence[tuple[datetime, datetime]]
) -> dict[tuple[datetime, datetime], list[dict[str, Any]]]:
    """Per window: the latest written write of each table the DAG wrote for it."""
    if not spans:
        return {}
    flt = HistoryFilter(
        dag_id=dag_id,
        start=min(s for s, _ in spans),
        end=max(e for _, e in spans),
        limit=min(10_000, 20 * len(spans)),
    )
    out: dict[tuple[datetime, datetime], list[dict[str, Any]]] = {}
    for win in window_history(store, flt):
        key = (win["window"]["start"], win["window"]["end"])
        written = [w for w in win["writes"] if w["status"] == "written" and w["dag_id"] == dag_id]
        if written:
            last = written[-1]
            out.setdefault(key, []).append(
                {
                    "target": win["target"],
                    "table": win["table"],
                    "policy_version": last["policy_version"],
                    "dataset_version": last["dataset_version"],
                    "ordinal": last["ordinal"],
                    "row_count": last["row_count"],
                    "semantics": last["semantics"],
                    "written_at": last["written_at"],
                }
            )
    return out


def _airflow_checks(dag: Any, form: BackfillForm) -> str | None:
    """What Airflow itself refuses for this request (its own checks and messages), or None."""
    from airflow.exceptions import AirflowException
    from airflow.models.backfill import ReprocessBehavior, _validate_backfill_params
    from airflow.utils.types import DagRunType

    if not dag.timetable.periodic:
        return f"{dag.dag_id} has a non-periodic schedule that does not support backfills"
    if dag.allowed_run_types is not None and DagRunType.BACKFILL_JOB not in dag.allowed_run_types:
        return f"Dag with dag_id: '{dag.dag_id}' does not allow backfill runs"
    try:
        _validate_backfill_params(
            dag,
            form.run_backwards,
            form.from_date,
            form.to_date,
            ReprocessBehavior(form.reprocess_behavior),
            form.conf(),
        )
    except AirflowException as err:
        return str(err)
    return None


def preview(session: Any, store: HistoryStore, dag_id: str, form: BackfillForm) -> dict[str, Any]:
    """What creating this backfill would do, without creating anything."""
    from airflow._shared.timezones import timezone as airflow_tz
    from airflow.models.backfill import (
        ReprocessBehavior,
        _get_dag_run_no_create_reason,
        _get_info_list,
        _get_latest_dag_run_row_query,
    )

    from airflow_idempotent.plugins.guard_middleware import MAX_WINDOWS, evaluate_backfill_request

    dag = load_dag(session, dag_id)
    config, invalid = dag_guard(dag)
    now = airflow_tz.utcnow()
    result: dict[str, Any] = {
        "dag_id": dag_id,
        "guarded": config is not None or invalid is not None,
        "guard": guard_json(config),
        "conf": form.conf(),
        "windows": [],
        "listed": 0,
        "total_in_range": 0,
        "count": 0,
        "cap": config.cap if config else None,
        "over_cap": False,
        "approval_needed": None,
        "refusal": invalid,
        "airflow_refusal": None,
        "blocked": [],
        "switches": [],
        "history_error": None,
        "effective_thresholds": None,
        "can_submit": False,
    }
    if config is None and invalid is None:
        result["refusal"] = (
            f"{dag_id} declares no idempotent_guard param: it is not a guarded DAG. Use Airflow's own "
            "Backfill dialog, or declare a guard (GuardConfig(...).param()) in the DAG file."
        )
        return result
    airflow_refusal = _airflow_checks(dag, form)
    result["airflow_refusal"] = airflow_refusal
    behavior = ReprocessBehavior(form.reprocess_behavior)
    infos: list[Any] = []
    if airflow_refusal is None:
        try:
            infos = _get_info_list(
                from_date=form.from_date, to_date=form.to_date, reverse=form.run_backwards, dag=dag
            )
        except Exception as err:
            result["refusal"] = f"the DAG's timetable failed ({type(err).__name__}: {err})"
    result["total_in_range"] = len(infos)
    will_run: dict[Any, bool] = {}  # (logical date, partition key) -> Airflow (re)runs it
    rows: list[dict[str, Any]] = []
    for info in infos[: min(len(infos), MAX_WINDOWS)]:
        key = (info.logical_date, info.partition_key)
        run = session.scalar(_get_latest_dag_run_row_query(dag_id=dag_id, info=info))
        reason = _get_dag_run_no_create_reason(run, behavior) if run is not None else None
        will_run[key] = reason is None
        if len(rows) < PREVIEW_LIST:
            row: dict[str, Any] = {
                "logical_date": info.logical_date,
                "partition_key": info.partition_key,
                "will_run": reason is None,
                "skip_reason": str(reason.value if hasattr(reason, "value") else reason) if reason else None,
                "run_state": str(getattr(run.state, "value", run.state)) if run is not None else None,
                "run_id": run.run_id if run is not None else None,
                "existing": [],
            }
            if config is not None:
                try:
                    row["start"], row["end"] = window_bounds(info, config.granularity)
                    row["label"] = window_label(row["start"], row["end"])
                except Exception as err:
                    row["label"] = f"window unknown ({type(err).__name__})"
            rows.append(row)
    result["windows"] = rows
    result["listed"] = len(rows)
    result["count"] = sum(will_run.values())
    if config is not None:
        spans = [(r["start"], r["end"]) for r in rows if "start" in r]
        try:
            existing = existing_writes(store, dag_id, spans)
            for row in rows:
                if "start" in row:
                    row["existing"] = existing.get((row["start"], row["end"]), [])
            result["switches"] = _switches_json(store, dag_id)
        except Exception as err:
            result["history_error"] = store_error(err)
        result["over_cap"] = result["count"] > config.cap
        if result["over_cap"]:
            result["approval_needed"] = result["count"]
        try:
            thresholds = config.thresholds.merged(_form_thresholds(form))
            result["effective_thresholds"] = thresholds.__dict__ | {
                "max_measure_abs_change": dict(thresholds.max_measure_abs_change),
                "max_measure_rel_change": dict(thresholds.max_measure_rel_change),
            }
        except GuardRefusal as bad:
            result["refusal"] = str(bad)
    if airflow_refusal is None and infos and result["refusal"] is None:
        refusal = evaluate_backfill_request(
            form.airflow_body(dag_id),
            dag,
            now=now,
            dry_run=False,
            will_run=lambda info, _behavior: will_run.get((info.logical_date, info.partition_key), True),
        )
        result["refusal"] = str(refusal) if refusal is not None else None
    if airflow_refusal is None and infos and result["count"] == 0:
        result["airflow_refusal"] = (
            "every window of this range already has a run Airflow will not rerun under reprocess "
            f"behavior {form.reprocess_behavior!r}: nothing would run (choose 'completed' to rerun them)"
        )
    elif airflow_refusal is None and not infos:
        result["airflow_refusal"] = (
            f"No runs to create for Dag {dag_id} in the range [{form.from_date}, {form.to_date}]: "
            "no window of the range has closed"
        )
    active = _active_backfill_id(session, dag_id)
    if active is not None:
        result["blocked"].append(
            f"backfill {active} of this DAG is still running: Airflow runs one backfill per DAG at a time"
        )
    if result["switches"]:
        result["blocked"].append(
            "a kill switch covers this DAG's backfills: every window would refuse to write. Clear it "
            "first (the button below, or `airflow-idempotent resume --dag "
            f"{dag_id} --backfill`) once its cause is fixed"
        )
    if result["history_error"]:
        result["blocked"].append("the history store cannot be read: a guarded backfill does not write blind")
    result["can_submit"] = bool(
        config is not None
        and not result["refusal"]
        and not result["airflow_refusal"]
        and not result["blocked"]
        and result["count"] > 0
    )
    return result


def _form_thresholds(form: BackfillForm) -> Any:
    from airflow_idempotent.guard import Thresholds

    if form.thresholds is None or not form.thresholds.conf():
        return None
    return Thresholds.from_mapping(form.thresholds.conf(), "form")


def _active_backfill_id(session: Any, dag_id: str) -> int | None:
    import sqlalchemy as sa
    from airflow.models.backfill import Backfill

    return session.scalar(  # type: ignore[no-any-return]
        sa.select(Backfill.id).where(Backfill.dag_id == dag_id, Backfill.completed_at.is_(None)).limit(1)
    )


def get_backfill(session: Any, dag_id: str, backfill_id: str) -> Any:
    """The backfill with this id *of this DAG* (the path's DAG is what access was checked on)."""
    import sqlalchemy as sa
    from airflow.models.backfill import Backfill

    if not re.fullmatch(r"[0-9]{1,12}", backfill_id):
        raise InputError([("path", "backfill_id", "expected a whole number")])
    backfill = session.scalar(
        sa.select(Backfill).where(Backfill.id == int(backfill_id), Backfill.dag_id == dag_id)
    )
    if backfill is None:
        raise HTTPException(404, "Backfill not found")
    return backfill


def _state(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def backfill_json(backfill: Any) -> dict[str, Any]:
    return {
        "id": backfill.id,
        "dag_id": backfill.dag_id,
        "from_date": jsonable(backfill.from_date),
        "to_date": jsonable(backfill.to_date),
        "dag_run_conf": backfill.dag_run_conf,
        "is_paused": bool(backfill.is_paused),
        "reprocess_behavior": _state(backfill.reprocess_behavior),
        "max_active_runs": backfill.max_active_runs,
        "created_at": jsonable(backfill.created_at),
        "completed_at": jsonable(backfill.completed_at),
        "triggering_user_name": backfill.triggering_user_name,
    }


def backfill_status(session: Any, store: HistoryStore, dag_id: str, backfill: Any) -> dict[str, Any]:
    """Each window of the backfill: its run's state and, as they land, its writes and diffs."""
    import sqlalchemy as sa
    from airflow.models import DagRun
    from airflow.models.backfill import BackfillDagRun

    rows = session.execute(
        sa.select(BackfillDagRun, DagRun)
        .outerjoin(DagRun, DagRun.id == BackfillDagRun.dag_run_id)
        .where(BackfillDagRun.backfill_id == backfill.id)
        .order_by(BackfillDagRun.sort_ordinal)
    ).all()
    dag = None
    with contextlib.suppress(HTTPException):
        dag = load_dag(session, dag_id)
    config, _ = dag_guard(dag) if dag is not None else (None, None)
    measures = list(config.measures) if config else []
    windows: list[dict[str, Any]] = []
    for bdr, run in rows:
        entry: dict[str, Any] = {
            "sort_ordinal": bdr.sort_ordinal,
            "logical_date": jsonable(bdr.logical_date),
            "partition_key": bdr.partition_key,
            "exception_reason": bdr.exception_reason,
            "run_id": run.run_id if run is not None else None,
            "state": _state(run.state) if run is not None else None,
            "start_date": jsonable(run.start_date) if run is not None else None,
            "end_date": jsonable(run.end_date) if run is not None else None,
            "writes": [],
            "label": None,
        }
        if run is not None and config is not None:
            info = SimpleNamespace(
                data_interval=SimpleNamespace(start=run.data_interval_start, end=run.data_interval_end)
                if run.data_interval_start is not None and run.data_interval_end is not None
                else None,
                logical_date=run.logical_date,
                partition_date=getattr(run, "partition_date", None),
                partition_key=getattr(run, "partition_key", None),
            )
            try:
                entry["start"], entry["end"] = window_bounds(info, config.granularity)
                entry["label"] = window_label(entry["start"], entry["end"])
            except Exception:
                entry["label"] = None
        windows.append(entry)
    history_error = None
    switches: list[dict[str, Any]] = []
    try:
        spans = [(w["start"], w["end"]) for w in windows if "start" in w]
        by_run: dict[str, list[dict[str, Any]]] = {}
        if spans:
            flt = HistoryFilter(
                dag_id=dag_id,
                start=min(s for s, _ in spans),
                end=max(e for _, e in spans),
                limit=min(10_000, 20 * len(spans)),
            )
            found = window_history(store, flt)
            attach_diffs(store, flt, found)
            for win in found:
                for write in win["writes"]:
                    by_run.setdefault(write["run_id"], []).append(
                        {
                            "target": win["target"],
                            "table": win["table"],
                            "window": win["window"]["label"],
                            "task_id": write["task_id"],
                            "map_index": write["map_index"],
                            "try_number": write["try_number"],
                            "status": write["status"],
                            "ordinal": write["ordinal"],
                            "dataset_version": write["dataset_version"],
                            "policy_version": write["policy_version"],
                            "semantics": write["semantics"],
                            "row_count": write["row_count"],
                            "checksum": write["checksum"],
                            "fingerprint": write["fingerprint"],
                            "written_at": write["written_at"],
                            "message": write["message"],
                            "diff": write.get("diff"),
                            "flags": write.get("flags", []),
                        }
                    )
        # A backfill that reprocesses a window reruns its existing DAG run (same run_id, next
        # try): only the writes since this backfill was created are this backfill's.
        since = _utc(backfill.created_at)
        for entry in windows:
            mine = [w for w in by_run.get(entry["run_id"] or "", []) if w["written_at"] >= since]
            entry["writes"] = sorted(mine, key=lambda w: w["written_at"])
        switches = _switches_json(store, dag_id)
    except Exception as err:
        history_error = store_error(err)
    for entry in windows:
        entry.pop("start", None)
        entry.pop("end", None)
    states: dict[str, int] = {}
    for entry in windows:
        key = entry["state"] or (
            f"not run: {entry['exception_reason']}" if entry["exception_reason"] else "none"
        )
        states[key] = states.get(key, 0) + 1
    finished = backfill.completed_at is not None
    phase = "completed" if finished else ("paused" if backfill.is_paused else "running")
    if switches and not finished:
        phase = "stopped" if backfill.is_paused else "running (kill switch on: windows refuse to write)"
    return jsonable(
        {
            "backfill": backfill_json(backfill),
            "phase": phase,
            "finished": finished,
            "states": states,
            "windows": windows,
            "measures": measures,
            "switches": switches,
            "history_error": history_error,
        }
    )


def create(session: Any, request: Request, user: Any, dag_id: str, form: BackfillForm) -> dict[str, Any]:
    """Create the backfill as Airflow's `POST /api/v2/backfills` does, as `user`, once the guard
    (the same evaluation as its middleware in front of that route) lets it through."""
    from airflow._shared.timezones import timezone as airflow_tz
    from airflow.api_fastapi.core_api.datamodels.backfills import BackfillPostBody
    from airflow.api_fastapi.core_api.routes.public.backfills import create_backfill

    from airflow_idempotent.plugins.guard_middleware import airflow_decide

    dag = load_dag(session, dag_id)
    config, invalid = dag_guard(dag)
    if invalid is not None:
        raise HTTPException(422, invalid)
    if config is None:
        raise HTTPException(
            422, f"{dag_id} declares no idempotent_guard param: use Airflow's own Backfill dialog for it"
        )
    store = history_store(request)
    try:
        switches = _switches_json(store, dag_id)
    except Exception as err:
        raise HTTPException(503, f"{store_error(err)}; a guarded backfill does not write blind") from None
    if switches:
        raise HTTPException(
            409,
            f"{switches[0]['description']}: every window would refuse to write. Clear the switch first.",
        )
    body = form.airflow_body(dag_id)
    refusal = airflow_decide(dag_id, body, False, airflow_tz.utcnow(), request.scope, user)
    if refusal is not None:
        raise HTTPException(422, str(refusal))
    try:
        created = create_backfill(BackfillPostBody.model_validate(body), user, session)
    except RequestValidationError as err:
        errors = err.errors()
        raise HTTPException(422, errors if isinstance(errors, str) else str(errors)) from None
    return {"backfill": jsonable(created.model_dump(mode="json"))}


def stop(session: Any, store: HistoryStore, user: Any, dag_id: str, backfill: Any, reason: str) -> None:
    """The kill switch on the DAG's backfill first (running windows refuse before commit), then
    Airflow's pause of the backfill (no further window starts)."""
    from airflow.api_fastapi.core_api.routes.public.backfills import pause_backfill

    from airflow_idempotent.killswitch import set_switch

    if backfill.completed_at is not None:
        raise HTTPException(409, "Backfill is already completed.")
    try:
        set_switch(store, "backfill", dag_id, reason, by=f"{user_name(user)} (UI)")
    except Exception as err:
        raise HTTPException(503, f"{store_error(err)}: the kill switch was not set") from None
    pause_backfill(backfill.id, session)
    session.commit()


# ============================================================================================
# One task instance's attempts
# ============================================================================================


def parse_attempt_query(raw: Mapping[str, str | None]) -> tuple[str, str, int]:
    problems: list[tuple[str, str, str]] = []
    run_id = _blank(raw.get("run_id")) or ""
    task_id = _blank(raw.get("task_id")) or ""
    if not RUN_ID_RE.fullmatch(run_id):
        problems.append(("query", "run_id", "not a run id (letters, digits, _ . ~ : + @ -)"))
    if not TASK_ID_RE.fullmatch(task_id):
        problems.append(("query", "task_id", "not a task id (letters, digits, _ . -)"))
    raw_index = _blank(raw.get("map_index"))
    map_index = -1
    if raw_index is not None and raw_index != MAP_INDEX_PLACEHOLDER:
        if not re.fullmatch(r"-1|[0-9]{1,6}", raw_index):
            problems.append(("query", "map_index", "expected -1 or a whole number"))
        else:
            map_index = int(raw_index)
    if problems:
        raise InputError(problems)
    return run_id, task_id, map_index


def attempt_data(
    store: HistoryStore, dag_id: str, run_id: str, task_id: str, map_index: int
) -> dict[str, Any]:
    """Every try of one task instance: its window write (diff, fingerprint and its parts) and events."""
    keys = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    writes = store.writes(**keys)
    events = store.attempts(**keys)
    tries: dict[int, dict[str, Any]] = {}
    for write in writes:
        entry = tries.setdefault(
            write["try_number"], {"try_number": write["try_number"], "writes": [], "events": []}
        )
        conn_id, table = split_target(write["target"])
        entry["writes"].append(
            {
                **{k: v for k, v in write.items() if k not in ("diff", "fingerprint_parts", "id")},
                "conn_id": conn_id,
                "table": table,
                "diff": _parse_json(write.get("diff")),
                "fingerprint_parts": _parse_json(write.get("fingerprint_parts")),
                "fingerprint_parts_text": _pretty(write.get("fingerprint_parts")),
            }
        )
    for event in events:
        entry = tries.setdefault(
            event["try_number"], {"try_number": event["try_number"], "writes": [], "events": []}
        )
        entry["events"].append(
            {k: v for k, v in event.items() if k != "id"}
            | {"failed": attempt_failed(event), "error_line": first_line(event.get("error"))}
        )
    return {**keys, "tries": [tries[n] for n in sorted(tries)]}


def _pretty(text: Any) -> str | None:
    parsed = _parse_json(text)
    if parsed is None:
        return text if isinstance(text, str) else None
    return json.dumps(parsed, indent=2, sort_keys=True, default=str)


# ============================================================================================
# Rendering
# ============================================================================================


def when(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(value, datetime):
        return "" if value is None else str(value)
    value = value.astimezone(timezone.utc) if value.tzinfo else value
    return value.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def diff_summary(diff: Any) -> dict[str, Any] | None:
    """A diff for display: counts and each measure's before -> after (delta)."""
    if not isinstance(diff, dict):
        return None
    measures = []
    raw = diff.get("measures")
    for name, sums in raw.items() if isinstance(raw, dict) else []:
        if not isinstance(sums, dict):
            continue
        before, after = _decimal(sums.get("before")), _decimal(sums.get("after"))
        delta = _decimal(sums.get("delta"))
        if delta is None and before is not None and after is not None:
            delta = after - before
        places = places_of((before, after, delta))
        measures.append(
            {
                "name": str(name),
                "before": fmt_number(before, places),
                "after": fmt_number(after, places),
                "delta": signed(delta, places),
            }
        )
    counts = {
        k: diff.get(k) for k in ("rows_before", "rows_after", "added", "removed", "changed", "unchanged")
    }
    return {"counts": counts, "measures": measures}


@cache
def jinja_env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        {
            "when": when,
            "short": lambda v, n=12: short(v, n) if isinstance(v, str) else ("" if v is None else v),
            "num": lambda v: fmt_number(_decimal(v)) if v is not None else "",
            "u": lambda v: quote(str(v), safe=""),
            "diff_summary": diff_summary,
            "first_line": lambda v: first_line(v) if isinstance(v, str) else v,
            "version_name": version_name,
        }
    )
    return env


def root_path(request: Request) -> str:
    """This app's path prefix as the browser sees it (Airflow's root path + /idempotent)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def airflow_root(request: Request) -> str:
    root = root_path(request)
    return root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("root", root_path(request))
    context.setdefault("airflow", airflow_root(request))
    context.setdefault("csrf", "")
    context.setdefault("title", "airflow-idempotent")
    context.setdefault("user", None)
    html = jinja_env().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status)


def _route_path(request: Request) -> str:
    path = str(request.scope.get("path", ""))
    root = str(request.scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def wants_html(request: Request) -> bool:
    path = _route_path(request)
    return not path.startswith(("/api/", "/static/")) and path != "/api"


SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def error_response(
    request: Request, status: int, detail: Any, headers: Mapping[str, str] | None = None
) -> Response:
    if wants_html(request):
        messages = (
            [f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail]
            if isinstance(detail, list)
            else [str(detail)]
        )
        return render(
            request, "error.html", status=status, status_code=status, messages=messages, title="Error"
        )
    return JSONResponse({"detail": detail}, status_code=status, headers=dict(headers or {}))


# ============================================================================================
# The app
# ============================================================================================

API_DESCRIPTION = """\
The JSON API of airflow-idempotent's pages in the Airflow UI, mounted in Airflow's API server
under `/idempotent`. Authenticate as for Airflow's own REST API: `Authorization: Bearer <JWT>`
(from `POST /auth/token`), or the UI's session cookie. Every route needs a logged-in user (401)
with access to the DAG it names (403): history and status GET on the DAG's runs, attempts GET
on its task instances, preview and create POST on its runs, stop and clear PUT on its runs.
POST bodies are JSON; a browser session (cookie) must also send the page's `X-Idempotent-CSRF`
token. Errors: `{"detail": "<message>"}` or, for invalid input, `{"detail": [{"loc", "msg"}]}`
(422, nothing is done).
"""


def create_app() -> FastAPI:
    app = FastAPI(
        title="airflow-idempotent UI API",
        version=__version__,
        description=API_DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return error_response(request, exc.status_code, exc.detail, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        detail = (
            [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errors]
            if isinstance(errors, Sequence) and not isinstance(errors, str)
            else str(errors)
        )
        return error_response(request, 422, detail)

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError) -> Response:
        return error_response(request, 422, exc.detail())

    register_api(app)
    register_pages(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in BODY_MODELS:
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _raw_history_params(request: Request) -> dict[str, str | None]:
    return {name: request.query_params.get(name) for name in HISTORY_PARAMS}


def register_api(app: FastAPI) -> None:
    read_runs = Depends(dag_access("GET", "RUN"))
    post_runs = Depends(dag_access("POST", "RUN"))
    put_runs = Depends(dag_access("PUT", "RUN"))
    read_tis = Depends(dag_access("GET", "TASK_INSTANCE"))
    csrf = Depends(csrf_protect)

    def history_payload(request: Request, user: Any, dag_id: str | None) -> dict[str, Any]:
        query = HistoryQuery.parse(_raw_history_params(request), dag_id)
        allowed = None
        if query.dag_id is None:
            allowed = readable_dag_ids(user)
            if not allowed:
                raise HTTPException(403, "Forbidden")
        try:
            windows = read_history(history_store(request), query, allowed)
        except Exception as err:
            raise HTTPException(503, store_error(err)) from None
        return {
            "filters": query.params(),
            "windows": jsonable(windows),
            "charts": [chart_json(c) for c in build_charts(windows)],
        }

    history_doc = (
        "Query parameters (all optional, validated; 422 otherwise): `dag_id`, `task_id`, `table` "
        "(table, schema.table or conn_id:table), `from` / `to` (days YYYY-MM-DD, UTC, both "
        "included), `flag` (nondeterministic, skipped, failed), `limit` (windows, 1-500, default "
        "50: the newest windows). Answer: `windows` (by table, then window start; each with "
        "`target`, `window`, `flags`, every `writes` entry with ordinal, written_at, run_type, "
        "rows, checksum, fingerprint, dataset_version, semantics, policy_version, `diff` and "
        "`flags`, and `attempts`) and "
        "`charts` (per measure, then `rows`: each window's total per dataset version)."
    )

    @app.get("/api/history", tags=["history"], summary="Run history", description=history_doc)
    def api_history(
        request: Request,
        user: Annotated[Any, Depends(history_access)],
        dag_id: str | None = None,
        task_id: str | None = None,
        table: str | None = None,
        date_from: Annotated[str | None, Query(alias="from")] = None,
        date_to: Annotated[str | None, Query(alias="to")] = None,
        flag: str | None = None,
        limit: str | None = None,
    ) -> JSONResponse:
        return JSONResponse(history_payload(request, user, None))

    @app.get(
        "/api/dags/{dag_id}/history",
        tags=["history"],
        summary="Run history of one DAG",
        description=history_doc,
        dependencies=[read_runs],
    )
    def api_dag_history(request: Request, dag_id: str, user: UserDep) -> JSONResponse:
        return JSONResponse(history_payload(request, user, check_dag_id(dag_id)))

    @app.get(
        "/api/dags/{dag_id}/guard", tags=["backfill"], summary="The DAG's guard", dependencies=[read_runs]
    )
    def api_guard(request: Request, dag_id: str) -> JSONResponse:
        """The guard the DAG declares (cap, thresholds, measures), the kill switches covering its
        backfills, and its latest backfill (if any)."""
        check_dag_id(dag_id)
        from airflow.utils.session import create_session

        with create_session(scoped=False) as session:
            config, invalid = dag_guard(load_dag(session, dag_id))
            latest = latest_backfill(session, dag_id)
            payload: dict[str, Any] = {
                "dag_id": dag_id,
                "guarded": config is not None or invalid is not None,
                "guard": guard_json(config),
                "invalid": invalid,
                "latest_backfill": backfill_json(latest) if latest is not None else None,
                "switches": [],
                "history_error": None,
            }
        try:
            payload["switches"] = _switches_json(history_store(request), dag_id)
        except Exception as err:
            payload["history_error"] = store_error(err)
        return JSONResponse(jsonable(payload))

    @app.post(
        "/api/dags/{dag_id}/backfills/preview",
        tags=["backfill"],
        summary="Preview a guarded backfill (nothing is created)",
        dependencies=[post_runs, csrf],
        openapi_extra=body_doc(BackfillForm),
    )
    def api_preview(
        request: Request, dag_id: str, form: Annotated[BackfillForm, Depends(json_body(BackfillForm))]
    ) -> JSONResponse:
        """The windows the backfill would run (Airflow's own list, minus what its reprocess
        behavior skips), how many against the DAG's cap, each window's existing data (table,
        policy version, dataset version, rows) and existing run, the effective thresholds, and what
        the guard (`refusal`) or Airflow (`airflow_refusal`) refuses; `blocked` lists what stops a
        submit (a running backfill, a kill switch, an unreadable history store)."""
        check_dag_id(dag_id)
        from airflow.utils.session import create_session

        with create_session(scoped=False) as session:
            return JSONResponse(jsonable(preview(session, history_store(request), dag_id, form)))

    @app.post(
        "/api/dags/{dag_id}/backfills",
        tags=["backfill"],
        summary="Create a guarded backfill",
        dependencies=[post_runs, csrf, Depends(audit("idempotent_create_backfill"))],
        openapi_extra=body_doc(BackfillForm),
    )
    def api_create(
        request: Request,
        dag_id: str,
        user: UserDep,
        form: Annotated[BackfillForm, Depends(json_body(BackfillForm))],
    ) -> JSONResponse:
        """Creates the backfill through Airflow's own creation route (as the caller), its DAG run
        conf built from the form. Refused with 422 and the guard's message (`detail`) as
        `POST /api/v2/backfills` would be; 409 when a kill switch covers the DAG's backfills or
        another backfill runs; 503 when the history store cannot be read."""
        check_dag_id(dag_id)
        from airflow.utils.session import create_session

        with create_session(scoped=False) as session:
            return JSONResponse(create(session, request, user, dag_id, form))

    @app.get(
        "/api/dags/{dag_id}/backfills/{backfill_id}",
        tags=["backfill"],
        summary="A backfill's per-window status and diffs",
        dependencies=[read_runs],
    )
    def api_status(request: Request, dag_id: str, backfill_id: str) -> JSONResponse:
        """`phase` (running, paused, stopped, completed), counts of run `states`, and per window its
        run (state, run_id), and every write recorded for it so far (status, rows, checksum,
        dataset and policy version, `diff`, message), the kill switches and `history_error`."""
        check_dag_id(dag_id)
        from airflow.utils.session import create_session

        with create_session(scoped=False) as session:
            backfill = get_backfill(session, dag_id, backfill_id)
            return JSONResponse(backfill_status(session, history_store(request), dag_id, backfill))

    @app.post(
        "/api/dags/{dag_id}/backfills/{backfill_id}/stop",
        tags=["backfill"],
        summary="Stop a backfill: kill switch, then pause",
        dependencies=[put_runs, csrf, Depends(audit("idempotent_stop_backfill"))],
        openapi_extra=body_doc(StopForm),
    )
    def api_stop(
        request: Request,
        dag_id: str,
        backfill_id: str,
        user: UserDep,
        form: Annotated[StopForm, Depends(json_body(StopForm))],
    ) -> JSONResponse:
        """Sets the DAG's backfill kill switch (a window already writing refuses before commit,
        every later one before writing), then pauses the Airflow backfill (no new window starts).
        Answers the backfill's status. 409 if it already completed."""
        check_dag_id(dag_id)
        from airflow.utils.session import create_session

        store = history_store(request)
        with create_session(scoped=False) as session:
            backfill = get_backfill(session, dag_id, backfill_id)
            stop(session, store, user, dag_id, backfill, form.reason)
        with create_session(scoped=False) as session:
            backfill = get_backfill(session, dag_id, backfill_id)
            return JSONResponse(backfill_status(session, store, dag_id, backfill))

    @app.post(
        "/api/dags/{dag_id}/killswitch/clear",
        tags=["backfill"],
        summary="Clear the DAG's backfill kill switch",
        dependencies=[put_runs, csrf, Depends(audit("idempotent_clear_kill_switch"))],
        openapi_extra=body_doc(ClearForm),
    )
    def api_clear(
        request: Request,
        dag_id: str,
        user: UserDep,
        form: Annotated[ClearForm, Depends(json_body(ClearForm))],
    ) -> JSONResponse:
        """`{"cleared": true}` when the switch was on. Global and DAG-wide switches are left alone
        (`airflow-idempotent resume`)."""
        check_dag_id(dag_id)
        from airflow_idempotent.killswitch import clear_switch

        try:
            cleared = clear_switch(history_store(request), "backfill", dag_id, by=f"{user_name(user)} (UI)")
        except Exception as err:
            raise HTTPException(503, store_error(err)) from None
        return JSONResponse({"cleared": cleared})

    @app.get(
        "/api/dags/{dag_id}/attempts",
        tags=["history"],
        summary="One task instance's tries: write, diff, fingerprint",
        dependencies=[read_tis],
    )
    def api_attempts(
        request: Request,
        dag_id: str,
        run_id: str | None = None,
        task_id: str | None = None,
        map_index: str | None = None,
    ) -> JSONResponse:
        """Query: `run_id`, `task_id`, `map_index` (default -1). Per try: its window writes (every
        recorded field, the parsed `diff` and `fingerprint_parts`) and its attempt events."""
        check_dag_id(dag_id)
        run, task, index = parse_attempt_query(request.query_params)
        try:
            data = attempt_data(history_store(request), dag_id, run, task, index)
        except Exception as err:
            raise HTTPException(503, store_error(err)) from None
        for entry in data["tries"]:
            for write in entry["writes"]:
                write.pop("fingerprint_parts_text", None)
        return JSONResponse(jsonable(data))

    @app.get("/api/openapi.json", tags=["meta"], summary="This API's OpenAPI document")
    def api_openapi(user: UserDep) -> JSONResponse:
        return JSONResponse(app.openapi())


def register_pages(app: FastAPI) -> None:
    read_runs = Depends(dag_access("GET", "RUN"))
    read_tis = Depends(dag_access("GET", "TASK_INSTANCE"))

    def history_page(request: Request, user: Any, dag_id: str | None) -> HTMLResponse:
        raw = _raw_history_params(request)
        errors: list[str] = []
        windows: list[dict[str, Any]] = []
        charts: list[dict[str, Any]] = []
        status = 200
        query = None
        allowed: set[str] | None = None
        store_problem = None
        try:
            query = HistoryQuery.parse(raw, dag_id)
        except InputError as err:
            errors = [f"{name}: {message}" for _, name, message in err.problems]
            status = 422
        if query is not None:
            if query.dag_id is None:
                allowed = readable_dag_ids(user)
                if not allowed:
                    raise HTTPException(403, "Forbidden")
            try:
                windows = read_history(history_store(request), query, allowed)
                charts = build_charts(windows)
            except Exception as err:
                store_problem = store_error(err)
                status = 503
        form = {name: (raw.get(name) or "") for name in HISTORY_PARAMS}
        if dag_id is not None:
            form["dag_id"] = dag_id
        dag_choices = sorted(allowed) if allowed is not None else []
        return render(
            request,
            "history.html",
            status=status,
            title=f"Run history · {dag_id}" if dag_id else "Run history",
            dag_id=dag_id,
            form=form if status != 422 else {k: "" for k in form} | ({"dag_id": dag_id} if dag_id else {}),
            errors=errors,
            store_problem=store_problem,
            windows=windows,
            charts=charts,
            flags=FLAG_CHOICES,
            dag_choices=dag_choices[:500],
            limit=query.limit if query else DEFAULT_LIMIT,
            max_limit=MAX_LIMIT,
            user=user_name(user),
        )

    @app.get("/", include_in_schema=False)
    def index(request: Request, user: UserDep) -> RedirectResponse:
        return RedirectResponse(f"{root_path(request)}/history", status_code=303)

    @app.get("/history", include_in_schema=False, response_class=HTMLResponse)
    def page_history(request: Request, user: Annotated[Any, Depends(history_access)]) -> HTMLResponse:
        return history_page(request, user, None)

    @app.get("/dags/{dag_id}/history", include_in_schema=False, dependencies=[read_runs])
    def page_dag_history(request: Request, dag_id: str, user: UserDep) -> HTMLResponse:
        return history_page(request, user, check_dag_id(dag_id))

    @app.get("/dags/{dag_id}/backfill", include_in_schema=False, dependencies=[read_runs])
    def page_backfill(request: Request, dag_id: str, user: UserDep) -> HTMLResponse:
        check_dag_id(dag_id)
        from airflow.utils.session import create_session

        with create_session(scoped=False) as session:
            dag = load_dag(session, dag_id)
            config, invalid = dag_guard(dag)
            latest = latest_backfill(session, dag_id)
            latest_json = backfill_json(latest) if latest is not None else None
        switches: list[dict[str, Any]] = []
        store_problem = None
        try:
            switches = _switches_json(history_store(request), dag_id)
        except Exception as err:
            store_problem = store_error(err)
        today = datetime.now(timezone.utc).date()
        data = {
            "dag_id": dag_id,
            "root": root_path(request),
            "airflow": airflow_root(request),
            "guard": guard_json(config),
            "latest_backfill": jsonable(latest_json),
            "default_from": (today - timedelta(days=3)).isoformat(),
            "default_to": (today - timedelta(days=1)).isoformat(),
            "user": user_name(user),
        }
        return render(
            request,
            "backfill.html",
            title=f"Guarded backfill · {dag_id}",
            dag_id=dag_id,
            guard=config,
            invalid=invalid,
            switches=jsonable(switches),
            store_problem=store_problem,
            data=data,
            csrf=csrf_token(user),
            user=user_name(user),
        )

    @app.get("/dags/{dag_id}/attempt", include_in_schema=False, dependencies=[read_tis])
    def page_attempt(request: Request, dag_id: str, user: UserDep) -> HTMLResponse:
        check_dag_id(dag_id)
        run_id, task_id, map_index = parse_attempt_query(request.query_params)
        store_problem = None
        data: dict[str, Any] = {"tries": []}
        try:
            data = attempt_data(history_store(request), dag_id, run_id, task_id, map_index)
        except Exception as err:
            store_problem = store_error(err)
        return render(
            request,
            "attempt.html",
            status=503 if store_problem else 200,
            title=f"Window write · {task_id}",
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=map_index,
            tries=data["tries"],
            store_problem=store_problem,
            user=user_name(user),
        )

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str, user: UserDep) -> FileResponse:
        media_type = STATIC_FILES.get(name)
        if media_type is None:
            raise HTTPException(404, "Not Found")
        return FileResponse(STATIC / name, media_type=media_type)


# ============================================================================================
# Plugin registration (IdempotentPlugin in listener.py)
# ============================================================================================

app = create_app()

#: `AirflowPlugin.fastapi_apps` entry: mounted at /idempotent by Airflow's API server.
FASTAPI_APPS: list[dict[str, Any]] = [{"app": app, "url_prefix": URL_PREFIX, "name": "airflow-idempotent UI"}]

__all__ = [
    "EXTERNAL_VIEWS",
    "FASTAPI_APPS",
    "URL_PREFIX",
    "BackfillForm",
    "HistoryQuery",
    "app",
    "create_app",
]
