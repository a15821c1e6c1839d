"""When an overwrite's observed figures stand for its commit (`spark.observed.trusted`): only when
the commit's own metrics count as many new rows; else the window is read at the commit's version
(tests/spark/test_spark_observed.py writes real windows)."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from airflow_idempotent.spark.observed import Observed, trusted


def test_observation_trusted_only_when_the_commits_metrics_agree(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="airflow_idempotent.spark.observed")
    seen = Observed(4, Decimal("-12"))
    assert trusted(seen, 4, "commit 7") is seen
    assert not caplog.records
    # a task run twice counts its rows twice; metrics missing say nothing; no observation at all
    assert trusted(Observed(8, Decimal("-24")), 4, "commit 7") is None
    assert trusted(seen, None, "commit 7") is None
    assert trusted(None, 4, "commit 7") is None
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING", "INFO"]
    assert "8 as observed" in caplog.records[0].getMessage()
