"""One backfill intent: every place that reads a backfill's conf accepts or refuses it alike.

A table of confs, each accepted or refused (with the guard's sentence) identically by every
checker: the API server's middleware decision, the check a guarded task runs, and
`BackfillIntent.from_conf`. A checker is a callable conf -> None (accepted) or the refusal's
message; the UI's form and the effects join as further columns of `CHECKERS`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG, Param
from pydantic import ValidationError

from airflow_idempotent.examples.payouts import PAYOUT_SQL
from airflow_idempotent.guard import GUARD_PARAM, BackfillIntent, GuardConfig, GuardRefusal
from airflow_idempotent.guard.backfills import evaluate_backfill_request, serialized_dag
from airflow_idempotent.operators import PartitionOverwriteOperator

GUARD = GuardConfig(cap=5, measures=["amount_eur"])
START = pendulum.datetime(2026, 8, 1, tz="UTC")
LATER = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)  # every window of the range has closed
CORRECTIVE = {"semantics": "corrective", "reason": "contract fix: v2 rates", "policy_version": "v2"}
REPLAY = {"semantics": "replay", "reason": "reproduce the audit"}
MISSING = "a backfill must declare its rerun semantics in the DAG run conf"

with DAG(
    "guarded",
    schedule="@daily",
    start_date=START,
    params={**GUARD.param(), "region": Param("eu", type="string")},
) as AUTHORING:
    TASK = PartitionOverwriteOperator(
        task_id="write",
        table="payouts",
        partition_column="sale_date",
        key_columns=["sale_id"],
        sql=PAYOUT_SQL,
        granularity="day",
    )
SERVED = serialized_dag(AUTHORING)


class Run:
    """The bits of a backfill's DagRun a task reads."""

    run_type = "backfill"

    def __init__(self, conf: Any) -> None:
        self.conf = conf


Checker = Callable[[Any], "str | None"]


def middleware(conf: Any) -> str | None:
    """The API server's decision on `POST /api/v2/backfills` carrying `conf`."""
    body = {
        "dag_id": "guarded",
        "from_date": START.isoformat(),
        "to_date": START.add(days=1).isoformat(),
        "dag_run_conf": conf,
    }
    refusal = evaluate_backfill_request(body, SERVED, now=LATER)
    return None if refusal is None else str(refusal)


def task(conf: Any) -> str | None:
    """The check a guarded task runs on its backfill run's conf before it writes."""
    try:
        TASK.backfill_intent({"dag_run": Run(conf)})
    except GuardRefusal as refusal:
        return str(refusal)
    return None


def from_conf(conf: Any) -> str | None:
    try:
        BackfillIntent.from_conf(conf, declared_params=set(AUTHORING.params))
    except GuardRefusal as refusal:
        return str(refusal)
    return None


def effects(conf: Any) -> str | None:
    """What an effect task decides on its backfill run's conf (`RerunPolicy`), before it sends.

    A conf without `semantics` is an ordinary run to effects (never a backfill's declaration), so
    for the confs of this table without one, effects answer with the guard's missing-semantics
    refusal only when they refuse it as a declaration too: they are compared where both apply.
    """
    from airflow_idempotent.effects.errors import EffectError
    from airflow_idempotent.effects.policy import RerunPolicy

    if not isinstance(conf, dict) or "semantics" not in conf:
        return from_conf(conf)
    try:
        RerunPolicy.from_context({"dag_run": Run(conf), "params": AUTHORING.params}, "backfill__x", TASK)
    except (GuardRefusal, EffectError) as refusal:
        return str(refusal)
    return None


#: Every reader of a backfill's conf (the UI form's check is in tests/test_ui.py, which has the app).
CHECKERS: list[tuple[str, Checker]] = [
    ("middleware", middleware),
    ("task", task),
    ("from_conf", from_conf),
    ("effects", effects),
]

#: (conf, None if accepted else a part of the refusal every checker gives)
CONFS: list[tuple[Any, str | None]] = [
    (CORRECTIVE, None),
    (REPLAY, None),
    (
        {
            "semantics": "reconcile",
            "reason": "repair",
            "thresholds": {"max_changed_rows": 10, "max_shrink": 0.2},
        },
        None,
    ),
    ({**CORRECTIVE, "resend_effects": True, "approve_windows": 2}, None),
    ({**REPLAY, "region": "eu"}, None),  # a declared param of the DAG
    ({**REPLAY, GUARD_PARAM: GUARD.to_json(), "region": "eu"}, None),  # the UI dialog pre-fills them
    ({**REPLAY, "reason": "  padded  "}, None),
    ({**CORRECTIVE, "thresholds": {"max_measure_abs_change": {"amount_eur": 5}}}, None),  # int as number
    (None, MISSING),
    ({}, MISSING),
    ({"reason": "forgot the semantics"}, MISSING),
    (
        {**CORRECTIVE, "semantics": "redo"},
        "conf semantics 'redo' is not one of replay, corrective, reconcile",
    ),
    (
        {**CORRECTIVE, "semantics": "corrective_backfill"},
        "conf semantics 'corrective_backfill' is not one of",
    ),
    ({**CORRECTIVE, "semantics": "Corrective"}, "conf semantics 'Corrective' is not one of"),
    ({**CORRECTIVE, "semantics": None}, "conf semantics None is not one of"),
    ({"semantics": "replay"}, "conf reason is missing: say why this replay backfill runs"),
    ({**REPLAY, "reason": ""}, "conf reason is missing"),
    ({**REPLAY, "reason": "   "}, "conf reason is missing"),
    ({**REPLAY, "reason": 42}, "conf reason is missing"),
    ({**REPLAY, "reason": "fix\x00rates"}, "conf reason must be one line of plain text"),
    ({**REPLAY, "reason": "two\nlines"}, "conf reason must be one line of plain text"),
    ({**REPLAY, "reason": "x" * 501}, "conf reason is longer than 500 characters"),
    (
        {**CORRECTIVE, "policy_version": "v" * 65},
        "conf policy_version must be a non-empty string of at most 64",
    ),
    ({**CORRECTIVE, "policy_version": ""}, "conf policy_version must be a non-empty string"),
    ({**CORRECTIVE, "policy_version": "v2; DROP TABLE payouts"}, "conf policy_version must be"),
    ({"semantics": "corrective", "reason": "x"}, 'add "policy_version" to the conf'),
    ({**CORRECTIVE, "approve_windows": 0}, "conf approve_windows must be the exact number"),
    ({**CORRECTIVE, "approve_windows": True}, "conf approve_windows must be the exact number"),
    ({**CORRECTIVE, "approve_windows": 10**6}, "conf approve_windows must be the exact number"),
    ({**REPLAY, "resend_effects": "yes"}, "conf resend_effects must be true or false"),
    ({**REPLAY, "resend_effects": True}, "only a corrective backfill re-sends effects"),
    ({**REPLAY, "colour": "red"}, "unknown conf key(s) ['colour'] for a guarded backfill"),
    ({**REPLAY, "zeta": 1, "alpha": 2}, "unknown conf key(s) ['alpha', 'zeta']"),
    (
        {**CORRECTIVE, "thresholds": {"max_changed_rows": -1}},
        "conf: max_changed_rows must be a whole number >= 0",
    ),
    (
        {**CORRECTIVE, "thresholds": {"max_removed_rows": True}},
        "conf: max_removed_rows must be a whole number",
    ),
    ({**CORRECTIVE, "thresholds": {"max_added_rows": 1.5}}, "conf: max_added_rows must be a whole number"),
    ({**CORRECTIVE, "thresholds": {"max_shrink": 2}}, "conf: max_shrink must be a fraction between 0 and 1"),
    ({**CORRECTIVE, "thresholds": {"max_shrink": float("nan")}}, "conf: max_shrink must be a fraction"),
    (
        {**CORRECTIVE, "thresholds": {"max_measure_abs_change": {"amount_eur": -5}}},
        "conf: max_measure_abs_change must map measure columns to numbers >= 0",
    ),
    (
        {**CORRECTIVE, "thresholds": {"max_measure_rel_change": {"x; DROP": 0.1}}},
        "conf: max_measure_rel_change must map measure columns to numbers >= 0",
    ),
    ({**CORRECTIVE, "thresholds": {"max_rows": 5}}, "conf: unknown threshold(s) ['max_rows']"),
    # invisible format characters (Unicode Cf) that could disguise what an approver reads
    ({**REPLAY, "reason": "pay \u202eout"}, "conf reason holds the invisible format character U+202E"),
    ({**REPLAY, "reason": "ab\u200fc"}, "U+200F RIGHT-TO-LEFT MARK at position 3 (counting from 1)"),
    ({**REPLAY, "reason": "\u2066isolate"}, "U+2066 LEFT-TO-RIGHT ISOLATE at position 1"),
    ({**REPLAY, "reason": "zero\u200bwidth"}, "U+200B ZERO WIDTH SPACE at position 5"),
    ({**CORRECTIVE, "thresholds": [1]}, "conf: thresholds must be an object"),
    # several problems: the first a person should fix, in the guard's order
    ({"semantics": "corrective", "reason": "", "colour": "red"}, "conf reason is missing"),
    ({**REPLAY, "colour": "red", "thresholds": {"max_shrink": 2}}, "unknown conf key(s) ['colour']"),
    ({"semantics": "corrective", "reason": "x", "approve_windows": 0}, 'add "policy_version" to the conf'),
]


@pytest.mark.parametrize(("conf", "expected"), CONFS, ids=[f"conf{i}" for i in range(len(CONFS))])
def test_every_reader_accepts_or_refuses_a_conf_alike(conf: Any, expected: str | None) -> None:
    answers = {name: check(conf) for name, check in CHECKERS}
    if expected is None:
        assert answers == dict.fromkeys(answers), answers
    else:
        assert len(set(answers.values())) == 1, answers  # the same sentence everywhere
        message = next(iter(answers.values()))
        assert message is not None and expected in message, answers


def test_the_table_covers_what_the_issue_names() -> None:
    assert len(CONFS) >= 20
    assert sum(expected is None for _, expected in CONFS) >= 5


@pytest.mark.parametrize("conf", [conf for conf, expected in CONFS if expected is None and conf is not None])
def test_an_accepted_intent_round_trips_through_its_conf(conf: dict[str, Any]) -> None:
    intent = BackfillIntent.from_conf(conf, declared_params=set(AUTHORING.params))
    assert BackfillIntent.from_conf(intent.to_conf()) == intent
    assert set(intent.to_conf()) <= set(conf)


def test_a_form_validated_with_the_model_gets_the_guards_sentences() -> None:
    """What the UI's form will show: model_validate raises a ValidationError carrying the same text."""
    with pytest.raises(ValidationError) as err:
        BackfillIntent.model_validate({"semantics": "corrective", "reason": "x", "approve_windows": 0})
    messages = [e["msg"] for e in err.value.errors()]
    assert any("conf approve_windows must be the exact number" in m for m in messages), messages
    assert any('add "policy_version" to the conf' in m for m in messages), messages
    schema = BackfillIntent.model_json_schema()
    assert schema["required"] == ["semantics", "reason"]
    assert schema["properties"]["semantics"]["enum"] == ["replay", "corrective", "reconcile"]


def test_the_dags_thresholds_follow_the_same_rules() -> None:
    with pytest.raises(
        GuardRefusal, match="the DAG's idempotent_guard: max_changed_rows must be a whole number"
    ):
        GuardConfig.from_json({"thresholds": {"max_changed_rows": -1}})
    with pytest.raises(GuardRefusal, match="must map measure columns to numbers >= 0"):
        GuardConfig.from_json({"thresholds": {"max_measure_abs_change": {"amount_eur": -0.5}}})


@pytest.mark.parametrize(
    ("limit", "measure"),
    [("max_measure_abs_change", "no_such_col"), ("max_measure_rel_change", "amount")],
)
def test_a_threshold_on_a_measure_the_guard_does_not_declare_is_refused(limit: str, measure: str) -> None:
    """The guard declares measures=["amount_eur"]: a limit on any other sum would never be checked."""
    refusal = middleware({**CORRECTIVE, "thresholds": {limit: {measure: 1}}})
    assert refusal == (
        f"conf thresholds: {limit} names unknown measure(s) [{measure!r}]; the valid ones are "
        "['amount_eur']. Name a measure the guard declares (GuardConfig(measures=[...]) in the DAG "
        "file), or drop the limit."
    )
    assert middleware({**CORRECTIVE, "thresholds": {limit: {"amount_eur": 1}}}) is None
