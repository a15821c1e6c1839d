"""ClickHouse's ``INSERT INTO [TABLE] FUNCTION f(..)``: what the insert writes (issue 35, round 36j).

ClickHouse inserts through a table function: ``postgresql('host:port', 'db', 'table', 'user',
'password')`` (also ``mysql``, ``remote``, ``remoteSecure``) writes the rows into a table of another
database, and ``s3('https://..', 'Parquet')`` (also ``file``, ``url``, ``hdfs``, ``gcs``,
``azureBlobStorage``) writes them to a file: an export, which ClickHouse refuses to write twice to
one path unless told to replace it (``s3_truncate_on_insert``). sqlglot reads the first spelling as
an insert into a table called ``table`` (or not at all), so an upstream ``TRUNCATE`` of the remote
table went unseen (round 44's Octan dashboard exports, 31 findings) and an S3 export was an append
(round 41's trackdechets). Principle: the table function names the real target, so a write into a
remote table is an insert into that table, and a write into a file is an export of the rows.
"""

from __future__ import annotations

import re

__all__ = ["inserted_through"]

#: the start of an insert through a table function: its function's name (the arguments follow)
TABLE_FUNCTION = re.compile(r"(?i)insert\s+into\s+(?:table\s+)?function\s+(\w+)\s*\(")
#: table functions that write into a table of another database: the position of the table argument
_REMOTE_TABLE = {"postgresql": 2, "mysql": 2, "remote": 2, "remotesecure": 2}
#: table functions that write a file (an object store's, a web server's or a local one)
_FILES = frozenset(
    {"s3", "s3cluster", "file", "url", "hdfs", "gcs", "azureblobstorage", "cosn", "oss", "deltalake"}
)
_STRING = re.compile(r"'((?:[^'\\]|\\.)*)'")


def inserted_through(text: str, at: int) -> tuple[str | None, str | None] | None:
    """What an insert starting at `at` of `text` writes through a table function (`_target`), or
    None when it is no insert through a table function."""
    found = TABLE_FUNCTION.match(text, at)
    if found is None:
        return None
    depth, end = 1, found.end()
    while end < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    return _target(found.group(1), text[found.end() : end - 1])


def _target(name: str, arguments: str) -> tuple[str | None, str | None]:
    """(the table written, the file written) by an insert through table function `name` whose
    argument text is `arguments`; (None, None) for a function this does not read."""
    strings = _STRING.findall(arguments)
    function = name.lower()
    if function in _FILES:
        return None, strings[0] if strings else name
    at = _REMOTE_TABLE.get(function)
    if at is None:
        return None, None
    if function.startswith("remote") and len(strings) == 2 and "." in strings[1]:
        return strings[1].lower(), None  # remote('host', 'db.table')
    if len(strings) > at and re.fullmatch(r"[\w.]+", strings[at]):
        return strings[at].lower(), None
    return None, None
