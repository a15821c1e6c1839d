"""The UI API's input rules and the OpenAPI document's statement of them are one rule (issue 32).

Each pattern the document shows is checked against the route's own check by the engine that
reads the document (jsonschema_rs, schemathesis' validator: ECMA 262 dialect, where `\\w` is ASCII
only), character by character over all of Unicode, or day by day over the years allowed; the
expected answers come from Python's `re` and `datetime`, not from the code under test.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from datetime import date, datetime, timezone
from typing import Any

import jsonschema_rs
import pytest
from pydantic import ValidationError

from airflow_idempotent.guard import Thresholds
from airflow_idempotent.guard.intent import BackfillIntent
from airflow_idempotent.plugins.ui.datamodels import (
    DAG_ID_RE,
    RUN_ID_RE,
    TABLE_RE,
    AttemptPageQuery,
    AttemptQuery,
    BackfillForm,
    HistoryQuery,
    StopForm,
)
from airflow_idempotent.plugins.ui.datamodels.common import DAY_RE, INSTANT_RE, json_schema_string

EVERY_CHARACTER = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


def accepts(model: type[Any], **values: Any) -> bool:
    try:
        model(**values)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("rule", [DAG_ID_RE, RUN_ID_RE, TABLE_RE], ids=["dag_id", "run_id", "table"])
def test_an_identifier_pattern_reads_the_same_in_the_document(rule: re.Pattern[str]) -> None:
    schema: dict[str, Any] = {"type": "string", "pattern": rule.pattern}
    json_schema_string(schema)
    assert r"\w" not in schema["pattern"]
    validator = jsonschema_rs.validator_for(schema)
    python_word = re.compile(r"\w")
    for char in EVERY_CHARACTER:
        assert validator.is_valid(char) == bool(rule.fullmatch(char)), hex(ord(char))
        if python_word.fullmatch(char):  # a word character is one, in any identifier
            assert validator.is_valid(char)
    most = int(schema["maxLength"])
    assert validator.is_valid("a" * most) and rule.fullmatch("a" * most)
    assert not validator.is_valid("a" * (most + 1)) and not rule.fullmatch("a" * (most + 1))
    assert not validator.is_valid("") and not rule.fullmatch("")


def test_free_text_the_document_allows_is_what_the_api_accepts() -> None:
    """A reason: no control or invisible format (Cf) character, not blank, at most 500."""
    schema = StopForm.model_json_schema()["properties"]["reason"]
    validator = jsonschema_rs.validator_for(schema)
    control = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
    for char in EVERY_CHARACTER:
        bad = bool(control.fullmatch(char)) or unicodedata.category(char) == "Cf"
        assert validator.is_valid(f"a{char}") == (not bad), hex(ord(char))
        assert validator.is_valid(char) == (not bad and not char.isspace()), hex(ord(char))
        if bad or char.isspace() or ord(char) < 0x800:  # the API: every special case, and a sample
            assert accepts(StopForm, reason=f"a{char}") == (not bad), hex(ord(char))
            assert accepts(StopForm, reason=char) == (not bad and not char.isspace()), hex(ord(char))
    for text, ok in (("x" * 500, True), (" " + "x" * 500, False), (" ok ", True), ("   ", False)):
        assert validator.is_valid(text) == ok == accepts(StopForm, reason=text), text[:5]


def test_days_and_instants_the_document_allows_are_what_the_api_accepts() -> None:
    validator = jsonschema_rs.validator_for({"type": "string", "pattern": DAY_RE.pattern})
    form = {"semantics": "replay", "reason": "r"}
    for year in (1899, 1900, 1904, 2000, 2024, 2100, 2400, 2999, 3000):
        for month in range(0, 14):
            for day in range(0, 33):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    real = 1900 <= date.fromisoformat(text).year <= 2999
                except ValueError:
                    real = False
                assert validator.is_valid(text) == real, text
                assert accepts(HistoryQuery, **{"from": text}) == real, text
                assert accepts(BackfillForm, from_date=text, to_date=text, **form) == real, text
    instants = {
        "2026-08-10T00:00": True,
        "2026-08-10T23:59:59.123456Z": True,
        "2026-08-10T05:00:00+05:30": True,
        "2028-02-29T01:00": True,
        "2026-02-29T01:00": False,
        "2026-08-10 00:00": False,
        "2026-08-10T24:00": False,
        "1700000000": False,
        "2026-08-10T00:00:00+24:00": False,
    }
    documented = jsonschema_rs.validator_for({"type": "string", "pattern": INSTANT_RE.pattern})
    for text, ok in instants.items():
        assert documented.is_valid(text) == ok, text
        assert accepts(BackfillForm, from_date=text, to_date=text, **form) == ok, text
        if ok:  # naive means UTC
            parsed = datetime.fromisoformat(text)
            expected = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).astimezone(
                timezone.utc
            )
            assert BackfillForm(from_date=text, to_date=text, **form).from_date == expected, text


def test_query_values_are_taken_as_given_by_the_api_and_as_a_form_by_the_pages() -> None:
    """The document refuses an empty or padded value; so does the API. The history page's form
    sends its empty fields, and Airflow's link to the attempt page leaves `{MAP_INDEX}`."""
    for values in ({"dag_id": ""}, {"dag_id": " scope_a"}, {"from": ""}, {"limit": " 5"}, {"flag": ""}):
        assert not accepts(HistoryQuery, **values), values
    assert HistoryQuery.parse({"dag_id": " scope_a ", "from": "", "limit": ""}).params() == {
        "dag_id": "scope_a"
    }
    given = {"run_id": "r1", "task_id": "t1"}
    assert not accepts(AttemptQuery, **given, map_index="{MAP_INDEX}")
    assert not accepts(AttemptQuery, **given, map_index="")
    assert AttemptPageQuery(**given, map_index="{MAP_INDEX}").map_index == -1


def test_a_json_number_without_fraction_is_the_whole_number_the_document_calls_integer() -> None:
    assert Thresholds(max_changed_rows=1.0).max_changed_rows == 1
    assert (
        BackfillIntent.model_validate(
            {"semantics": "replay", "reason": "r", "approve_windows": 3.0}
        ).approve_windows
        == 3
    )
    for value in (1.5, True, "1", -1.0, float("inf")):
        assert not accepts(Thresholds, max_changed_rows=value), value
    schema = Thresholds.model_json_schema()["properties"]["max_measure_abs_change"]
    assert schema["additionalProperties"] is False  # a key that is not a measure: refused by both
    assert not accepts(Thresholds, max_measure_abs_change={"not a measure": 1})
