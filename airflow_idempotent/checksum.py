"""The window checksum's text format and versions: one place for how checksums are written and compared.

A checksum is ``<version>:<rows>:<sum>``: the row count of the window and an order-independent sum
of one hash per row, computed in the database by the adapter (see docs/checksum.md). Version 1 had
no prefix (``<rows>:<sum>``, a hash of each row's text form); version 2 hashes each column with the
database's typed hash function. Checksums of different versions say nothing about each other: the
history store compares only checksums of the same version, so a window written before an upgrade
is never flagged nondeterministic because its checksum was computed another way.
"""

from __future__ import annotations

#: The definition that wrote a checksum without a version prefix (the text form of each row).
LEGACY_VERSION = "v1"


def format_checksum(version: str, count: int, total: object) -> str:
    """The checksum text of a window of `count` rows whose row hashes sum to `total`."""
    if version == LEGACY_VERSION:
        return f"{int(count)}:{total}"
    return f"{version}:{int(count)}:{total}"


def checksum_rows(checksum: str) -> int:
    """The row count a checksum text records (its `<rows>` part, whatever its version)."""
    parts = checksum.split(":")
    return int(parts[0] if checksum_version(checksum) == LEGACY_VERSION else parts[1])


def checksum_version(checksum: str) -> str:
    """The definition a checksum text was computed with (``v1`` for the unprefixed legacy form)."""
    head = checksum.split(":", 1)[0]
    return head if head.startswith("v") else LEGACY_VERSION


def comparable(a: str | None, b: str | None) -> bool:
    """Both checksums exist and were computed by the same definition, so equality means something."""
    return a is not None and b is not None and checksum_version(a) == checksum_version(b)
