"""The checksum text (airflow_idempotent.checksum): one format, read back the same way by every caller."""

from __future__ import annotations

from decimal import Decimal

import pytest

from airflow_idempotent.checksum import checksum_rows, checksum_version, comparable, format_checksum


@pytest.mark.parametrize(
    ("version", "count", "total", "text"),
    [
        ("v1", 2000, Decimal("-12345678901234567890"), "2000:-12345678901234567890"),
        ("v2", 2000, 4711, "v2:2000:4711"),
        ("v2", 0, 0, "v2:0:0"),
    ],
)
def test_format_then_read_back(version: str, count: int, total: object, text: str) -> None:
    assert format_checksum(version, count, total) == text
    assert checksum_version(text) == version
    assert checksum_rows(text) == count


def test_only_checksums_of_one_version_compare() -> None:
    assert comparable("v2:1:5", "v2:1:6") and comparable("1:5", "3:7")
    assert not comparable("1:5", "v2:1:5") and not comparable(None, "v2:1:5")
