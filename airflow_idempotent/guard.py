"""The backfill guard's rules: what a guarded DAG declares and what a backfill must declare.

A backfill is a release with a blast radius. A guarded DAG declares, in its params under
`idempotent_guard`, a cap on windows per backfill and the thresholds that stop a window before
commit. Every backfill of it declares, in its DAG run conf, its rerun semantics (replay,
corrective, reconcile), a reason and, when corrective, the new policy version. The same checks
run where the backfill is created (the API server middleware) and again inside every task.

The guard config is read from the DAG's declared default, never from a run's conf, and the
param is a JSON-schema `const`, so a conf cannot loosen it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from airflow_idempotent.errors import IdempotentError

GUARD_PARAM = "idempotent_guard"
SEMANTICS = ("replay", "corrective", "reconcile")
DEFAULT_CAP = 31
CONF_KEYS = ("semantics", "reason", "policy_version", "approve_windows", "thresholds", "resend_effects")


class GuardRefusal(IdempotentError):
    """A backfill request or a guarded write that the guard refuses; the message says what to fix."""


@dataclass(frozen=True)
class Thresholds:
    """Stop conditions checked on a window's diff before anything is swapped into production.

    `None` means "no limit". Relative limits are fractions (0.05 = 5 %).
    """

    max_changed_rows: int | None = None
    max_removed_rows: int | None = None
    max_added_rows: int | None = None
    #: per measure column: the largest allowed |new sum - old sum|
    max_measure_abs_change: Mapping[str, float] = field(default_factory=dict)
    #: per measure column: the largest allowed |new sum - old sum| / |old sum|
    max_measure_rel_change: Mapping[str, float] = field(default_factory=dict)
    #: refuse a new result with fewer rows than the existing one by more than this fraction
    max_shrink: float | None = 0.10

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str) -> Thresholds:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise GuardRefusal(f'{where}: thresholds must be an object, e.g. {{"max_changed_rows": 500}}.')
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise GuardRefusal(f"{where}: unknown threshold(s) {unknown}; known are {sorted(known)}.")
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key.startswith("max_measure_"):
                if not isinstance(value, Mapping) or not all(
                    isinstance(k, str) and _number(v) for k, v in value.items()
                ):
                    raise GuardRefusal(
                        f'{where}: {key} must map measure columns to numbers, e.g. {{"amount_eur": 0.05}}.'
                    )
                values[key] = {k: float(v) for k, v in value.items()}
            elif value is None:
                values[key] = None
            elif key == "max_shrink":
                if not _number(value) or not 0 <= float(value) <= 1:
                    raise GuardRefusal(f"{where}: max_shrink must be a fraction between 0 and 1, e.g. 0.1.")
                values[key] = float(value)
            else:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise GuardRefusal(f"{where}: {key} must be a whole number >= 0, got {value!r}.")
                values[key] = value
        return cls(**values)

    def merged(self, override: Thresholds | None) -> Thresholds:
        """The DAG's thresholds with a backfill's own on top (a backfill may set its own limits)."""
        if override is None:
            return self
        base = asdict(self)
        for key, value in asdict(override).items():
            if value not in (None, {}) and value != getattr(Thresholds(), key):
                base[key] = value
        return Thresholds(**base)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(float(value))


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

    def __post_init__(self) -> None:
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise GuardRefusal(f"guard cap must be a whole number >= 1, got {self.cap!r}.")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["measures"] = list(self.measures)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GuardConfig:
        data = dict(data)
        thresholds = Thresholds.from_mapping(data.pop("thresholds", None), "the DAG's idempotent_guard")
        return cls(thresholds=thresholds, measures=tuple(data.pop("measures", ()) or ()), **data)

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


@dataclass(frozen=True)
class BackfillIntent:
    """What a backfill declares in its DAG run conf before it runs."""

    semantics: str
    reason: str
    policy_version: str | None = None
    approve_windows: int | None = None
    thresholds: Thresholds | None = None
    resend_effects: bool = False

    @classmethod
    def from_conf(
        cls, conf: Mapping[str, Any] | None, declared_params: Collection[str] = ()
    ) -> BackfillIntent:
        """Parse a backfill's conf, or refuse it saying exactly what to add.

        `declared_params` are the DAG's own params: the UI's Backfill dialog pre-fills the conf
        with them, so they are not "unknown keys".
        """
        example = '{"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}'
        if not isinstance(conf, Mapping) or "semantics" not in conf:
            raise GuardRefusal(
                "this DAG is guarded: a backfill must declare its rerun semantics in the DAG run conf, "
                f"e.g. {example}. semantics is one of replay (reproduce what ran, with the recorded "
                "policy), corrective (recompute under a declared new policy), reconcile (repair only "
                "the difference)."
            )
        semantics = conf.get("semantics")
        if semantics not in SEMANTICS:
            raise GuardRefusal(
                f"conf semantics {semantics!r} is not one of {', '.join(SEMANTICS)}: set it, e.g. {example}."
            )
        reason = conf.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise GuardRefusal(
                f"conf reason is missing: say why this {semantics} backfill runs, e.g. {example}."
            )
        if len(reason) > 500:
            raise GuardRefusal("conf reason is longer than 500 characters: shorten it.")
        policy = conf.get("policy_version")
        if policy is not None and (not isinstance(policy, str) or not policy.strip() or len(policy) > 64):
            raise GuardRefusal("conf policy_version must be a non-empty string of at most 64 characters.")
        if semantics == "corrective" and policy is None:
            raise GuardRefusal(
                "a corrective backfill recomputes history under a declared new rule: add "
                f'"policy_version" to the conf, e.g. {example}.'
            )
        approve = conf.get("approve_windows")
        if approve is not None and (isinstance(approve, bool) or not isinstance(approve, int) or approve < 1):
            raise GuardRefusal(
                "conf approve_windows must be the exact number of windows you approve, e.g. 45."
            )
        resend = conf.get("resend_effects", False)
        if not isinstance(resend, bool):
            raise GuardRefusal("conf resend_effects must be true or false (default false: never re-send).")
        unknown = sorted(set(conf) - set(CONF_KEYS) - set(declared_params))
        if unknown:
            raise GuardRefusal(
                f"unknown conf key(s) {unknown} for a guarded backfill; known are {list(CONF_KEYS)}."
            )
        thresholds = Thresholds.from_mapping(conf.get("thresholds"), "conf") if "thresholds" in conf else None
        return cls(
            semantics=semantics,
            reason=reason.strip(),
            policy_version=policy,
            approve_windows=approve,
            thresholds=thresholds,
            resend_effects=resend,
        )


def check_scope(
    config: GuardConfig, intent: BackfillIntent, window_ends: Sequence[datetime], now: datetime
) -> None:
    """Bounded scope: at most `cap` windows unless approved by count, and only closed windows.

    `now` is the wall clock of the request: deciding whether a window has closed is the one
    place the guard looks at the clock; which window a run writes never does.
    """
    count = len(window_ends)
    if count == 0:
        raise GuardRefusal("the backfill's range holds no window: check from_date and to_date.")
    if count > config.cap and intent.approve_windows != count:
        raise GuardRefusal(
            f"this backfill covers {count} windows, over the DAG's cap of {config.cap}: split it, or approve "
            f'exactly this count by adding "approve_windows": {count} to the conf.'
        )
    open_windows = [end for end in window_ends if end > now]
    if open_windows:
        first = min(open_windows)
        raise GuardRefusal(
            f"{len(open_windows)} window(s) of this backfill have not closed yet (the first ends "
            f"{first.isoformat()}): end the range at a window that is complete."
        )
