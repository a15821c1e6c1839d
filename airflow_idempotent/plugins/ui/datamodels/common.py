"""What every route's input shares: the identifiers Airflow accepts, refusals in the API's own
words, and the base of response records other modules shape."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import Path
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from airflow_idempotent.text import character_class

# What the routes accept. Airflow's own rule for DAG and task ids (KEY_REGEX), at most 250 chars.
DAG_ID_RE = re.compile(r"^[\w.-]{1,250}$")
TASK_ID_RE = DAG_ID_RE
# Run ids: Airflow's default allowed_run_id_pattern and the ids it generates (plus unicode letters).
RUN_ID_RE = re.compile(r"^[\w.~:+@-]{1,250}$")
# A history target: table, schema.table or conn_id:table.
TABLE_RE = re.compile(r"^[\w.:-]{1,500}$")
#: A measure column (diffs, charts, a backfill's thresholds).
MEASURE_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
#: A calendar day of the years 1900-2999 (YYYY-MM-DD), months' lengths and leap years included, so
#: that the document's pattern is the whole rule: what matches is a day, what does not is refused.
_YEAR = "(19[0-9]{2}|2[0-9]{3})"
_MONTH_DAY = "((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
_LEAP_DAY = "((19|2[0-9])(0[48]|[2468][048]|[13579][26])|2000|2400|2800)-02-29"
_DAY = f"({_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})"
DAY_RE = re.compile(f"^{_DAY}$")
#: A day, or an instant on it: `T` HH:MM[:SS[.ffffff]], then `Z` or +HH:MM / -HH:MM, or no
#: offset (naive: UTC).
INSTANT_RE = re.compile(
    f"^{_DAY}(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]{{1,6}})?)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?)?$"
)
NOT_A_DAG_ID = "not a DAG id (letters, digits, _ . - ; at most 250)"
#: The largest body a POST may carry (bytes).
MAX_BODY = 64_000


#: A DAG id in a path, as the document shows it: the route's access dependency checks the pattern
#: (Python's ``re``: pydantic's regex engine cannot compile a Unicode ``\w{1,250}``).
DagIdPath = Annotated[
    str, Path(description="a DAG id (Airflow's rule)", json_schema_extra={"pattern": DAG_ID_RE.pattern})
]


class InputError(RequestValidationError):
    """Bad input found outside a route's declared parameters: each problem as (where, field,
    message). Answered 422 exactly like a validation error of a declared parameter."""

    def __init__(self, problems: Sequence[tuple[str, str, str]]) -> None:
        self.problems = list(problems)
        super().__init__(
            [
                {"loc": (where, name), "msg": message, "type": "value_error"}
                for where, name, message in problems
            ]
        )

    @classmethod
    def of(cls, err: ValidationError, where: str) -> InputError:
        """A model's ValidationError, each problem named by the parameter (its alias)."""
        return cls(
            [(where, ".".join(str(p) for p in e["loc"]), e["msg"]) for e in err.errors(include_url=False)]
        )


def refuse(message: str) -> PydanticCustomError:
    """A validation error whose message is exactly `message` (no "Value error, " prefix)."""
    return PydanticCustomError("value_error", "{message}", {"message": message})


def matching(pattern: re.Pattern[str], message: str, required: bool = False) -> Callable[[object], Any]:
    """A before-validator: the value, exactly as given, must match `pattern`, else `message`.
    Nothing is stripped: an empty or padded value is refused, as the document's pattern refuses it
    (a page whose form leaves fields empty drops them before validating)."""

    def check(value: object) -> str | None:
        if value is None and not required:
            return None
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise refuse(message)
        return value

    return check


@functools.cache
def word_class() -> str:
    r"""Python's `\w` (Unicode word characters: letters, numbers, `_`) as explicit ranges of a
    character class, for a JSON Schema pattern: ECMA 262's `\w` is ASCII only, and `\p{L}` is not
    a JSON Schema regex. BMP characters as `\uXXXX`, others as themselves."""
    text = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    return character_class(ord(c) for c in re.findall(r"\w", text))


#: A pattern of the routes' identifiers: one character class, 1 to N of them.
_CLASS_PATTERN = re.compile(r"\^\[(?P<chars>[^\]]+)\]\{1,(?P<most>[0-9]+)\}\$")


def json_schema_string(schema: dict[str, Any]) -> None:
    r"""A string schema whose `pattern` is one of the routes' own (Python's `re`), rewritten in
    place so a JSON Schema validator reads it as the route does: `\w` spelled out (`word_class`),
    and the length as `minLength`/`maxLength` (a repeated class of 700 ranges is over a regex
    engine's size limit). Other patterns are left as they are."""
    found = _CLASS_PATTERN.fullmatch(str(schema.get("pattern", "")))
    if found is None or "\\w" not in found["chars"]:
        return
    schema["pattern"] = "^[" + found["chars"].replace("\\w", word_class()) + "]+$"
    schema["minLength"] = 1
    schema["maxLength"] = int(found["most"])


def json_schema_patterns(node: Any) -> None:
    """`json_schema_string` on every schema in an OpenAPI document (in place)."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            json_schema_string(node)
        for value in node.values():
            json_schema_patterns(value)
    elif isinstance(node, list):
        for value in node:
            json_schema_patterns(value)


class ErrorItem(BaseModel):
    """One problem of an invalid input: where (``["query", "limit"]``), what, and its kind."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorResponse(BaseModel):
    """Every error answer: a message (a refusal: the guard's, Airflow's), or the input's problems."""

    detail: str | list[ErrorItem]


#: What each error status means, for every route that can answer it.
ERRORS = {
    401: "Not authenticated: no Airflow token (header or the UI's cookie).",
    403: (
        "Forbidden: a token Airflow rejects, no access to the DAG for this action, or (a state "
        "change) a cross-site request or a missing, another user's or ended session's CSRF token."
    ),
    404: (
        "No such DAG (the API server has no serialized DAG of that id), or no such backfill of this "
        "DAG. Said only to a caller allowed on the DAG: anyone else gets 403, known DAG or not."
    ),
    409: (
        "Conflict: a kill switch covers the DAG's backfills, another backfill of the DAG runs, or "
        "the backfill already completed."
    ),
    413: f"The body is over {MAX_BODY:,} bytes: refused before it is read.",
    415: "The body is not application/json.",
    422: "Invalid input (each problem listed), or the guard's (or Airflow's) refusal: nothing was done.",
    503: "The history store cannot be read (details in the API server's log).",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route for these error statuses (401, 403 and 422 always)."""
    return {
        status: {"model": ErrorResponse, "description": ERRORS[status]}
        for status in sorted({401, 403, 422, *statuses})
    }


class Record(BaseModel):
    """A row another module shapes (history store, guard, Airflow): its listed fields are
    documented, any other field it carries is passed through."""

    model_config = ConfigDict(extra="allow")
