"""Another task's XCom pulled in a template: which pulls can carry a mark (IDEM004's watermarks).

A task whose template pulls the XCom of a task that reads ``MAX(..)`` of a table starts where that
mark says (`watermarks`). Round 36b (rrap-gcp-dags, 8 false IDEM004) found two pulls that carry no
mark, whatever the producer reads:

- a pull by a ``key=`` naming a file (``key='parquet'``, ``'csv'``, ``'path'``): the producer pushed
  the path of a file it wrote for this run (its return value, where a MAX would be, is another XCom),
  and ``FROM '{{ ..xcom_pull(.., key='parquet') }}'`` reads that file;
- a pull added to a row number (``{{ xcom_pull('get_max_id') }} + ROW_NUMBER() OVER (..) AS id``): the
  dimension's largest key numbers the new rows' surrogate keys. It chooses no rows (which rows are
  new is decided by the query's joins), so it is a key offset, not where a window starts: listed as
  information. A rerun after the rows were loaded numbers them again from the new MAX; whether they
  are added twice is the load's own question (IDEM002).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Pull", "file_pulls", "xcom_pulls"]

#: ``xcom_pull('t')``, ``xcom_pull(task_ids='t', key='k')``: the task id and the rest of the call
_XCOM_PULL = re.compile(r"xcom_pull\(\s*(?:task_ids\s*=\s*)?['\"]([\w.-]+)['\"]([^)]*)")
_KEY = re.compile(r"\bkey\s*=\s*['\"]([\w.-]+)['\"]")
#: keys that name a file the producer wrote: its format or its place
_FILE_KEYS = frozenset(
    {"parquet", "csv", "tsv", "json", "jsonl", "avro", "orc", "xlsx", "file", "filename", "filepath",
     "file_path", "file_name", "path", "local_path", "output_path", "parquet_path", "csv_path"}
)  # fmt: skip
#: a row number the value is added to, after the template (``}} + ROW_NUMBER() OVER``) or before it
_NUMBERS_AFTER = re.compile(r"\s*\+\s*(?:ROW_NUMBER|DENSE_RANK|RANK)\s*\(", re.IGNORECASE)
_NUMBERS_BEFORE = re.compile(
    r"(?:ROW_NUMBER|DENSE_RANK|RANK)\s*\(\s*\)\s*OVER\s*\([^()]*\)\s*\+\s*(?:\(\s*)?$", re.IGNORECASE
)


@dataclass(frozen=True)
class Pull:
    """One XCom pull that may carry a mark: the producing task's id, and whether the value is only
    added to a row number (a key offset, `numbers`)."""

    task_id: str
    numbers: bool


def xcom_pulls(expression: str, text: str = "", at: int | None = None) -> list[Pull]:
    """The XCom pulls of the Jinja `expression` that may carry a mark (module doc). `text` and `at`:
    the template it stands in and the offset of its ``{{``, to see what the value is added to."""
    out: list[Pull] = []
    numbers = False
    if text and at is not None:
        end = text.find("}}", at)
        after = text[end + 2 :] if end >= 0 else ""
        numbers = bool(_NUMBERS_AFTER.match(after) or _NUMBERS_BEFORE.search(text[max(0, at - 200) : at]))
    for match in _XCOM_PULL.finditer(expression):
        if not _by_file_key(match):
            out.append(Pull(match.group(1), numbers))
    return out


def file_pulls(expression: str) -> list[str]:
    """The task ids whose XCom the Jinja `expression` pulls by a key naming a file: the path of a file
    that task wrote (read as the file, `stamps.exported_tables`)."""
    return [match.group(1) for match in _XCOM_PULL.finditer(expression) if _by_file_key(match)]


def _by_file_key(match: re.Match[str]) -> bool:
    """Whether the pull `match` names a key that says its value is a file's path (`_FILE_KEYS`)."""
    key = _KEY.search(match.group(2))
    return key is not None and key.group(1).lower() in _FILE_KEYS
