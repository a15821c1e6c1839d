"""What a backfill declares in its DAG run conf: the one model every place that reads it uses.

A guarded DAG's backfill declares its rerun semantics (replay, corrective, reconcile), a reason
and, when corrective, the new policy version; it may approve a count of windows over the cap, set
its own thresholds and ask to re-send effects. The API server's middleware, every guarded task,
the UI's backfill form and the effects read that conf through `BackfillIntent`, so a conf one of
them accepts, every other accepts, and a refusal says the same thing everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from airflow_idempotent.guard.config import Thresholds, integral
from airflow_idempotent.guard.errors import GuardRefusal, explained, first_message, refusal
from airflow_idempotent.text import invisible_problem

SEMANTICS = ("replay", "corrective", "reconcile")
Semantics = Literal["replay", "corrective", "reconcile"]
#: The conf keys a backfill may declare (in the order the guard checks them).
CONF_KEYS = ("semantics", "reason", "policy_version", "approve_windows", "thresholds", "resend_effects")
#: The longest reason kept (it is recorded with every write and shown in the UI).
MAX_REASON = 500
#: A policy version: a short token, as recorded in history and bound into SQL.
POLICY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$"
#: The most windows one approval may name.
MAX_APPROVE = 100_000
#: Characters a one-line reason may not hold (shown escaped wherever it is shown).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: Characters a metadata database refuses in a JSON conf anywhere (PostgreSQL's jsonb: NUL; every
#: UTF-8 driver: an unpaired surrogate): a conf holding one would leave a backfill without runs.
UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")

EXAMPLE = '{"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}'
MISSING_SEMANTICS = (
    "this DAG is guarded: a backfill must declare its rerun semantics in the DAG run conf, "
    f"e.g. {EXAMPLE}. semantics is one of replay (reproduce what ran, with the recorded "
    "policy), corrective (recompute under a declared new policy), reconcile (repair only "
    "the difference)."
)
#: Which of several problems a refusal names first: the order a person fixes them in.
_RANK = {
    "semantics": 0,
    "reason": 1,
    "policy_version": 2,
    "approve_windows": 3,
    "resend_effects": 4,
    "thresholds": 6,
}
_UNKNOWN_RANK = 5

PolicyVersion = Annotated[str, StringConstraints(pattern=POLICY_PATTERN)]
Approval = Annotated[int, Field(strict=True, ge=1, le=MAX_APPROVE), BeforeValidator(integral)]


class BackfillIntent(BaseModel):
    """What a backfill declares in its DAG run conf before it runs.

    Parse a conf with `BackfillIntent.from_conf(conf, declared_params)` (a GuardRefusal saying
    what to fix), or validate a form with `BackfillIntent.model_validate(values)` (a pydantic
    ValidationError carrying the same sentences); `to_conf()` is the conf to send to Airflow.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    semantics: Semantics
    reason: Annotated[str, Field(max_length=MAX_REASON)]
    policy_version: Annotated[
        PolicyVersion | None,
        explained(
            lambda _, v: (
                "conf policy_version must be a non-empty string of at most 64 characters "
                '(letters, digits and . _ : + -, starting with a letter or digit), e.g. "v2".'
            )
        ),
    ] = Field(None, validate_default=True)
    approve_windows: Annotated[
        Approval | None,
        explained(
            lambda _, v: "conf approve_windows must be the exact number of windows you approve, e.g. 45."
        ),
    ] = None
    resend_effects: Annotated[
        StrictBool,
        explained(lambda _, v: "conf resend_effects must be true or false (default false: never re-send)."),
    ] = False
    thresholds: Thresholds | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_conf_declaring_semantics(cls, data: Any, info: ValidationInfo) -> Any:
        """A conf that declares no semantics gets the whole explanation; the DAG's own params, which
        Airflow's backfill dialog pre-fills the conf with, are not part of what a backfill declares."""
        if isinstance(data, BackfillIntent):
            return data
        if not isinstance(data, Mapping) or "semantics" not in data:
            raise refusal(MISSING_SEMANTICS)
        context = info.context if isinstance(info.context, dict) else {}
        declared = set(context.get("declared_params", ())) - set(CONF_KEYS)
        values = {k: v for k, v in data.items() if k not in declared}
        values.setdefault("reason", None)  # so its absence is explained like an empty one
        return values

    @field_validator("semantics", mode="before")
    @classmethod
    def _known_semantics(cls, value: Any) -> Any:
        if not isinstance(value, str) or value not in SEMANTICS:
            raise refusal(
                f"conf semantics {value!r} is not one of {', '.join(SEMANTICS)}: set it, e.g. {EXAMPLE}."
            )
        return value

    @field_validator("reason", mode="before")
    @classmethod
    def _a_reason(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str) or not value.strip():
            semantics = info.data.get("semantics", "guarded")
            raise refusal(f"conf reason is missing: say why this {semantics} backfill runs, e.g. {EXAMPLE}.")
        if len(value) > MAX_REASON:
            raise refusal(f"conf reason is longer than {MAX_REASON} characters: shorten it.")
        invisible = invisible_problem(value, "conf reason")
        if invisible is not None:
            raise refusal(invisible)
        reason = value.strip()
        if CONTROL_CHARACTERS.search(reason):
            raise refusal(
                "conf reason must be one line of plain text: it holds a control character (a NUL byte, "
                "a line break, a tab, ...); remove it."
            )
        return reason

    @field_validator("policy_version")
    @classmethod
    def _corrective_declares_its_policy(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("semantics") == "corrective":
            raise refusal(
                "a corrective backfill recomputes history under a declared new rule: add "
                f'"policy_version" to the conf, e.g. {EXAMPLE}.'
            )
        return value

    @field_validator("resend_effects")
    @classmethod
    def _only_corrective_resends(cls, value: bool, info: ValidationInfo) -> bool:
        semantics = info.data.get("semantics")
        if value and semantics is not None and semantics != "corrective":
            raise refusal(
                f"conf resend_effects=true with semantics {semantics!r}: only a corrective backfill "
                're-sends effects; declare {"semantics": "corrective", "resend_effects": true}.'
            )
        return value

    @classmethod
    def from_conf(
        cls, conf: Mapping[str, Any] | None, declared_params: Collection[str] = ()
    ) -> BackfillIntent:
        """Parse a backfill's conf, or refuse it saying exactly what to add.

        `declared_params` are the DAG's own params: the UI's Backfill dialog pre-fills the conf
        with them, so they are not "unknown keys".
        """
        try:
            intent = cls.model_validate(
                conf, context={"where": "conf", "declared_params": frozenset(declared_params)}
            )
        except ValidationError as err:
            raise GuardRefusal(_first_problem(err)) from None
        check_storable(conf)  # the DAG's own params too, which the intent does not read
        return intent

    def to_conf(self) -> dict[str, Any]:
        """The DAG run conf declaring this intent (what the UI sends to Airflow): only what was given,
        so `BackfillIntent.from_conf(intent.to_conf()) == intent`."""
        conf: dict[str, Any] = {"semantics": self.semantics, "reason": self.reason}
        if self.policy_version is not None:
            conf["policy_version"] = self.policy_version
        if self.approve_windows is not None:
            conf["approve_windows"] = self.approve_windows
        if self.thresholds is not None:
            conf["thresholds"] = self.thresholds.model_dump(exclude_unset=True)
        if self.resend_effects:
            conf["resend_effects"] = True
        return conf


def check_storable(conf: Any) -> None:
    """Refuse a conf holding, in any key or string value at any depth, a character the metadata
    database refuses (UNSTORABLE): Airflow would store the backfill and then fail on its runs."""
    top = conf.items() if isinstance(conf, Mapping) else [("", conf)]
    for name, item in top:
        where = f"conf key {str(name)[:64]!r}" if name else "conf"
        pending: list[Any] = [name, item]
        while pending:
            value = pending.pop()
            if isinstance(value, Mapping):
                pending.extend(value.keys())
                pending.extend(value.values())
            elif isinstance(value, list | tuple):
                pending.extend(value)
            elif isinstance(value, str) and UNSTORABLE.search(value):
                raise GuardRefusal(unstorable(where))


def unstorable(where: str) -> str:
    return (
        f"{where} holds a character the metadata database cannot store (a NUL byte or an unpaired "
        "surrogate): remove it."
    )


def _first_problem(err: ValidationError) -> str:
    """The guard's one sentence for a refused conf: unknown keys are named together."""
    errors = err.errors(include_url=False)
    unknown = [e["loc"][0] for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]

    def rank(error: Any) -> int:
        if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
            return _UNKNOWN_RANK
        return _RANK.get(str(error["loc"][0]) if error["loc"] else "", 0)

    first = min(errors, key=rank)
    if rank(first) == _UNKNOWN_RANK:
        names = sorted(unknown, key=str)
        return f"unknown conf key(s) {names} for a guarded backfill; known are {list(CONF_KEYS)}."
    return first_message(err, rank)
