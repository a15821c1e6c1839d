"""The fingerprint: a stable hash of what makes two writes of a window "the same write".

A cache keyed only on code and table names is a primary key with no secondary key. The
fingerprint covers the rendered SQL (normalised through sqlglot), the operator's parameters,
the strategy, the package version, the declared policy version and, when the user gives one,
a snapshot of the source over the window (e.g. count and max(updated_at)).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value.normalize()) if value == value.to_integral_value() else str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def fingerprint(parts: Mapping[str, Any]) -> tuple[str, str]:
    """(sha256 hex, canonical JSON) of the parts; equal parts give equal hashes in any process."""
    canonical = json.dumps(_canonical(parts), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest(), canonical
