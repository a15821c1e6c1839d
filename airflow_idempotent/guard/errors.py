"""The guard's refusal, and how its pydantic models report one in the guard's own words.

Every rule of the guard's models (the DAG's thresholds, a backfill's intent) raises a pydantic
error whose message is the sentence a person sees: the API server's 422, the task's failure and
the UI's form show the same text, whichever of them validated the value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError, ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

from airflow_idempotent.errors import IdempotentError

#: The pydantic error type of a rule of the guard (its message is the guard's sentence).
REFUSAL = "guard_refusal"


class GuardRefusal(IdempotentError):
    """A backfill request or a guarded write that the guard refuses; the message says what to fix."""


def refusal(message: str) -> PydanticCustomError:
    """A pydantic error carrying `message` verbatim (no placeholders are filled in)."""
    return PydanticCustomError(REFUSAL, message)


def declared_by(info: ValidationInfo, default: str) -> str:
    """Who declared the value being validated ("conf", "the DAG's idempotent_guard", "form"): the
    validation context's `where`, so one model words its errors for each place it is used."""
    context = info.context if isinstance(info.context, dict) else {}
    return str(context.get("where", default))


def explained(message: Callable[[str, Any], str], default_where: str = "conf") -> WrapValidator:
    """Validate a field by its declared type and constraints, but refuse with `message(where, value)`.

    The constraints stay declarative (and in the JSON schema); only the wording is the guard's.
    """

    def validate(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise refusal(message(declared_by(info, default_where), value)) from None

    return WrapValidator(validate)


def first_message(err: ValidationError, rank: Callable[[Any], int] = lambda error: 0) -> str:
    """The sentence of the first error by `rank` (then pydantic's order): the guard refuses with one
    reason at a time, the first a person should fix."""
    errors = sorted(err.errors(include_url=False), key=rank)
    first = errors[0]
    if first["type"] == REFUSAL:
        return str(first["msg"])
    loc = ".".join(str(p) for p in first["loc"]) or "value"
    return f"{loc}: {first['msg']}"
