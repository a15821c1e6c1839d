"""The harness's errors: it cannot run the check, or a rerun broke the property."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_idempotent.testing.report import HarnessReport

__all__ = ["HarnessError", "NotIdempotentError"]


class HarnessError(Exception):
    """The harness cannot run the check (bad input, a clean run that fails): says why and how to fix it."""


class NotIdempotentError(AssertionError):
    """A rerun left the targets different from one clean run; the message is the report."""

    def __init__(self, report: HarnessReport) -> None:
        super().__init__(report.text())
        self.report = report
