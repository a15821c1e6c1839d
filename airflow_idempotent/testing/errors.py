"""The harness's error for a check it cannot run. (A rerun that broke the property raises
`report.NotIdempotentError`, which carries the report.)"""

from __future__ import annotations

__all__ = ["HarnessError"]


class HarnessError(Exception):
    """The harness cannot run the check (bad input, a clean run that fails): says why and how to fix it."""
