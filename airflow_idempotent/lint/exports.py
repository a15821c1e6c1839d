"""Where a task's selected rows go when its SQL writes no table: a file the task exports them to.

A statement that only SELECTs hands its rows to the operator or decorator that runs it. When that
operator writes them to a file (``@task.parquet(sql=.., target=".../x.parquet")``, ``to_parquet=True``)
or the statement itself unloads them (``COPY (SELECT ..) TO 'x.parquet'``), each run writes the file
whole: a clock value stamped on those rows (``now() AS insrt_process_tmstmp``) is re-stamped by a
rerun, and the rows are the same (round 36b: rrap-gcp-dags' 31 harmless IDEM001, `stamps` decides).
Where the file's rows are later appended to a table, that append is its own finding (IDEM002).
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.definitions import TaskDef

__all__ = ["file_names", "rows_file"]

#: keywords naming where an operator writes its result
_TARGET_WORDS = frozenset(
    {"target", "output", "outfile", "destination", "dest", "filename", "file_name", "file_path",
     "output_path", "output_file", "target_path", "target_file", "local_path", "export_path"}
)  # fmt: skip
#: a path ending in a data file's name (a Jinja or f-string prefix allowed)
_DATA_FILE = re.compile(r"\.(?:parquet|csv|tsv|json|jsonl|ndjson|avro|orc|xlsx|feather)(?:\.gz)?\W*$", re.I)
#: flags that say the result is written to a file of that format
_FILE_FLAGS = re.compile(r"^to_(?:parquet|csv|json|avro|orc|excel|file)$")


def rows_file(task: TaskDef) -> str | None:
    """The file `task` writes its query's rows to, as written (a keyword naming a target whose value
    ends in a data file's name, or ``to_parquet=True``); None when it names none."""
    for name, node in task.kwargs.items():
        if name in _TARGET_WORDS and isinstance(node, ast.Constant | ast.JoinedStr):
            text = ast.unparse(node)
            if _DATA_FILE.search(text):
                return f"{name}={text}"
    for name, node in task.kwargs.items():
        if _FILE_FLAGS.match(name) and isinstance(node, ast.Constant) and node.value is True:
            return f"{name}=True"
    return None


#: a quoted path of a data file in a text (SQL or a keyword's value): its last part is the name
_QUOTED_FILE = re.compile(
    r"""['"][^'"\n]*?([\w.-]+\.(?:parquet|csv|tsv|json|jsonl|ndjson|avro|orc|xlsx|feather)(?:\.gz)?)['"]""",
    re.IGNORECASE,
)


def file_names(text: str) -> list[str]:
    """The names (last path part, lower case) of the data files quoted in `text`."""
    return list(dict.fromkeys(m.group(1).lower() for m in _QUOTED_FILE.finditer(text)))
