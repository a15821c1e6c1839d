"""What a guarded DAG declares: a cap on windows per backfill, stop conditions, and its window.

A backfill is a release with a blast radius. A guarded DAG declares, in its params under
`idempotent_guard`, a cap on windows per backfill, the thresholds that stop a window before
commit, and how its operators read a run's window (granularity, timezone, anchor), so the guard
decides "which windows does this backfill cover, and have they closed?" for exactly the windows
the tasks write.

The guard config is read from the DAG's declared default, never from a run's conf, and the
param is a JSON-schema `const`, so a conf cannot loosen it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from airflow_idempotent.errors import WindowError
from airflow_idempotent.guard.errors import GuardRefusal, declared_by, explained, first_message, refusal
from airflow_idempotent.window import (
    Anchor,
    Window,
    check_anchor,
    check_lookback,
    check_timezone,
    parse_granularity,
    run_window,
)

GUARD_PARAM = "idempotent_guard"
DEFAULT_CAP = 31
#: The largest row-count limit (a larger one is no limit: say None).
MAX_COUNT = 10**12
#: The largest measure-change limit.
MAX_AMOUNT = 1e18
#: How many measures one limit may name.
MAX_MEASURES = 32
#: A measure column: a plain identifier (it names a column the diff sums).
MEASURE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"

_DEFAULT_WHERE = "thresholds"

OnBreach = Literal["refuse", "approve"]
ON_BREACH: tuple[str, ...] = get_args(OnBreach)
#: How long a breached window waits for a person by default (hours), and the longest wait allowed.
DEFAULT_APPROVAL_HOURS = 24.0
MAX_APPROVAL_HOURS = 24.0 * 30


def _whole(key: str) -> Any:
    return explained(
        lambda w, v: f"{w}: {key} must be a whole number >= 0 (at most 10^12), got {v!r}.", _DEFAULT_WHERE
    )


def _measures(key: str) -> Any:
    return explained(
        lambda w, v: f'{w}: {key} must map measure columns to numbers >= 0, e.g. {{"amount_eur": 0.05}}.',
        _DEFAULT_WHERE,
    )


def integral(value: Any) -> Any:
    """A JSON number with no fraction as the whole number it is: JSON (and JSON Schema's
    `integer`) does not tell 1.0 from 1, and a conf or a body may come from a client that writes
    every number as a float. Anything else is left to the strict int check (1.5, "1", true are
    refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: A whole number (`integral`: an int or a JSON 1.0, never a bool or a string); the schema says
#: `integer` with these bounds.
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT), BeforeValidator(integral)]
Amount = Annotated[float, Field(strict=True, ge=0, le=MAX_AMOUNT, allow_inf_nan=False)]
Fraction = Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]
Measure = Annotated[str, StringConstraints(pattern=MEASURE_PATTERN)]
#: Measure -> limit; a key that is not a measure name is refused, as the schema says
#: (`additionalProperties: false` beside the key pattern).
MeasureLimits = Annotated[
    dict[Measure, Amount], Field(max_length=MAX_MEASURES, json_schema_extra={"additionalProperties": False})
]


class Thresholds(BaseModel):
    """Stop conditions checked on a window's diff before anything is swapped into production.

    `None` means "no limit". Relative limits are fractions (0.05 = 5 %). The same model is the
    DAG's declaration and a backfill's own limits (its conf `thresholds`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_changed_rows: Annotated[Count | None, _whole("max_changed_rows")] = None
    max_removed_rows: Annotated[Count | None, _whole("max_removed_rows")] = None
    max_added_rows: Annotated[Count | None, _whole("max_added_rows")] = None
    #: per measure column: the largest allowed |new sum - old sum|
    max_measure_abs_change: Annotated[MeasureLimits, _measures("max_measure_abs_change")] = Field(
        default_factory=dict
    )
    #: per measure column: the largest allowed |new sum - old sum| / |old sum|
    max_measure_rel_change: Annotated[MeasureLimits, _measures("max_measure_rel_change")] = Field(
        default_factory=dict
    )
    #: refuse a new result with fewer rows than the existing one by more than this fraction
    max_shrink: Annotated[
        Fraction | None,
        explained(
            lambda w, v: f"{w}: max_shrink must be a fraction between 0 and 1, e.g. 0.1.", _DEFAULT_WHERE
        ),
    ] = 0.10

    @model_validator(mode="before")
    @classmethod
    def _an_object_of_known_limits(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, Thresholds):
            return data
        at = declared_by(info, _DEFAULT_WHERE)
        if not isinstance(data, Mapping):
            raise refusal(f'{at}: thresholds must be an object, e.g. {{"max_changed_rows": 500}}.')
        known = set(cls.model_fields)
        unknown = sorted(set(data) - known, key=str)
        if unknown:
            raise refusal(f"{at}: unknown threshold(s) {unknown}; known are {sorted(known)}.")
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str) -> Thresholds:
        """Parse thresholds declared by `where` (e.g. "conf"), or refuse saying what to fix."""
        if data is None:
            return cls()
        try:
            return cls.model_validate(data, context={"where": where})
        except ValidationError as err:
            raise GuardRefusal(first_message(err)) from None

    def merged(self, override: Thresholds | None) -> Thresholds:
        """The DAG's thresholds with a backfill's own on top (a backfill may set its own limits)."""
        if override is None:
            return self
        defaults = Thresholds()
        changes = {
            key: value
            for key, value in override
            if value not in (None, {}) and value != getattr(defaults, key)
        }
        return self.model_copy(update=changes)


@dataclass(frozen=True)
class GuardConfig:
    """What a guarded DAG declares about its backfills."""

    cap: int = DEFAULT_CAP
    thresholds: Thresholds = field(default_factory=Thresholds)
    #: numeric columns whose sums are compared in the diff (e.g. ["amount_eur"])
    measures: Sequence[str] = ()
    #: max windows started per hour by one backfill (besides max_active_runs); None: no limit
    throttle_per_hour: int | None = None
    #: stage, diff and swap in every run, not only in backfills
    always_stage: bool = False
    #: width of a window when the timetable's data interval has none (as the operators declare)
    granularity: str | None = "day"
    #: a SELECT over the source window that must return a true first column (e.g. the day's
    #: loaded marker, or count(*) = expected) before a window may be rewritten
    completeness_sql: str | None = None
    #: the zone the operators read their windows' days in (as the operators declare)
    timezone: str = "UTC"
    #: "start": a run writes the period containing its logical date; "end": the one ending at it
    anchor: Anchor = "start"
    #: earlier periods each run also rewrites (the operators' lookback): the cap counts them too
    lookback: int = 0
    #: a window whose diff breaks a threshold: "refuse" it at once, or keep its staged result and
    #: "approve": wait for a person's decision in Airflow's required actions (human-in-the-loop)
    on_breach: OnBreach = "refuse"
    #: on_breach="approve": hours a breached window waits for a decision; then it is refused
    approval_timeout_hours: float = DEFAULT_APPROVAL_HOURS

    def __post_init__(self) -> None:
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise GuardRefusal(f"guard cap must be a whole number >= 1, got {self.cap!r}.")
        if self.on_breach not in ON_BREACH:
            raise GuardRefusal(
                f"guard on_breach must be one of {', '.join(map(repr, ON_BREACH))}, got {self.on_breach!r}: "
                "'refuse' stops a breached window at once, 'approve' waits for a person's decision."
            )
        hours = self.approval_timeout_hours
        if (
            isinstance(hours, bool)
            or not isinstance(hours, int | float)
            or not 0 < hours <= MAX_APPROVAL_HOURS
        ):
            raise GuardRefusal(
                f"guard approval_timeout_hours must be a number of hours > 0 and at most "
                f"{MAX_APPROVAL_HOURS:g} (30 days), got {hours!r}: e.g. approval_timeout_hours=24."
            )
        if self.on_breach == "approve" and self.lookback:
            raise GuardRefusal(
                f'guard on_breach="approve" with lookback={self.lookback!r}: an approval is for one '
                "window's staged rows, while a write with lookback rewrites and records several periods "
                'at once. Declare on_breach="refuse" with lookback, or lookback=0 with approvals.'
            )
        try:
            parse_granularity(self.granularity)
            check_timezone(self.timezone)
            check_anchor(self.anchor)
            check_lookback(self.lookback, self.granularity)
        except WindowError as err:
            raise GuardRefusal(f"guard window: {err}") from None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["thresholds"] = self.thresholds.model_dump()
        data["measures"] = list(self.measures)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GuardConfig:
        data = dict(data)
        thresholds = Thresholds.from_mapping(data.pop("thresholds", None), "the DAG's idempotent_guard")
        return cls(thresholds=thresholds, measures=tuple(data.pop("measures", ()) or ()), **data)

    def known_measures(self) -> list[str]:
        """The measures a backfill's thresholds may name: those the guard declares (`measures`) and
        those its own thresholds already limit, both summed by every guarded write's diff."""
        declared = [
            *self.measures,
            *self.thresholds.max_measure_abs_change,
            *self.thresholds.max_measure_rel_change,
        ]
        return list(dict.fromkeys(declared))

    def check_measures(self, thresholds: Thresholds | None, where: str) -> None:
        """Refuse thresholds (a backfill's own, read from `where`, e.g. "conf") naming a measure the
        guard does not declare: a limit on a sum no diff computes would never be checked."""
        if thresholds is None:
            return
        known = self.known_measures()
        for limit in ("max_measure_abs_change", "max_measure_rel_change"):
            unknown = sorted(set(getattr(thresholds, limit)) - set(known))
            if unknown:
                valid = f"the valid ones are {known}" if known else "this DAG's guard declares none"
                raise GuardRefusal(
                    f"{where}: {limit} names unknown measure(s) {unknown}; {valid}. Name a measure the "
                    "guard declares (GuardConfig(measures=[...]) in the DAG file), or drop the limit."
                )

    def param(self) -> dict[str, Any]:
        """The DAG params entry declaring this guard: `params={**mine, **guard.param()}`."""
        from airflow.sdk import Param

        value = self.to_json()
        return {
            GUARD_PARAM: Param(
                value,
                type="object",
                const=value,
                title="Backfill guard (read-only)",
                description="Declared in the DAG file by airflow-idempotent; a run's conf cannot change it.",
            )
        }

    @classmethod
    def of_params(cls, params: Mapping[str, Any] | None) -> GuardConfig | None:
        """The guard a DAG's params declare (their declared defaults), or None if unguarded."""
        if not params or GUARD_PARAM not in params:
            return None
        raw = params[GUARD_PARAM]
        value = getattr(raw, "value", raw)
        if isinstance(raw, Mapping) and "__class" in raw:  # a serialized Param
            value = raw.get("default")
        if not isinstance(value, Mapping):
            return None
        return cls.from_json(value)

    def window(self, run: Any) -> Window:
        """The window a run of `run` (a DagRunInfo, DagRun or context) writes, read as this DAG's
        operators read it: `window.run_window` with the guard's granularity, timezone and anchor."""
        try:
            return run_window(run, self.granularity, self.timezone, self.anchor)
        except WindowError as err:
            if self.granularity is not None:
                raise
            raise WindowError(
                f"{err}. The DAG's guard declares no granularity either, so a window's end is unknown: "
                "declare the operators' one, e.g. GuardConfig(granularity='day')"
            ) from None

    def check_operator(
        self,
        task_id: str,
        granularity: str | datetime.timedelta | None,
        timezone: str,
        anchor: str,
        lookback: int = 0,
    ) -> None:
        """Refuse an operator whose window would differ from the one this guard checks.

        The guard counts a backfill's windows and refuses open ones by its own granularity, timezone
        and anchor; an operator reading its window otherwise would write windows the guard never
        checked. An operator without a granularity writes only data-interval windows, which need none.
        """
        differ: list[tuple[str, Any, Any]] = []
        theirs = parse_granularity(granularity)
        if theirs is not None:
            if theirs != parse_granularity(self.granularity):
                differ.append(("granularity", granularity, self.granularity))
            if anchor != self.anchor:
                differ.append(("anchor", anchor, self.anchor))
        if timezone != self.timezone:
            differ.append(("timezone", timezone, self.timezone))
        if lookback != self.lookback:
            differ.append(("lookback", lookback, self.lookback))
        if not differ:
            return
        task = ", ".join(f"{name}={value!r}" for name, value, _ in differ)
        guard = ", ".join(f"{name}={value!r}" for name, _, value in differ)
        raise GuardRefusal(
            f"task {task_id} reads its window with {task}, but the DAG's backfill guard reads it with "
            f"{guard}: the guard would count and check other windows than the task writes. Declare the "
            f"same on both: GuardConfig(..., {task}) in the DAG's params, or {guard} on the operator."
        )
