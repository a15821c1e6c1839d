"""The clock's value written as a stamp field of a record or document a task writes (issue 35, round 16).

Principle (IDEM003), the stamp-column policy of `stamps` carried from SQL columns to Python records:
a clock value whose every use is the value of a field named for when something was done to the
record (`benign.stamp_column`: ``updated_at``, ``created_at``, ``ck_data_insert_at``) in a dict
literal (``{"search_key": {"updated_at": now()}}``), a keyword of ``dict(..)`` or of a class built
with keywords (an ORM model's ``Model(created=now())``, round 21 follow-up), or an item assignment
(``doc["_source"]["updated_at"] = now()``) or an attribute assignment (an ORM row's
``vendor_file.updated = now()``, round 21), or of a local named as one and handed to calls
(``ck_data_insert_at = now(); row_of(doc, ck_data_insert_at)``), directly, converted
(``int(now().timestamp() * 1000)``, ``.isoformat()``), through the one name it is assigned to, or
returned by a helper every call of which the task makes is such a field
(``row["ck_data_insert_at"] = now_timestamp()``), stamps the record: a rerun writes it again with a
later stamp, and its data comes from other values. That is **information**, unless some code of the
repository reads that field back as a mark (SQL comparing it by order or taking its MAX,
`stamps.marks_of`; a search query's ``range`` on it, a Mongo ``$gt``/``$lt`` on it): then a rerun
re-stamps the records and moves them into another increment, a defect. A record kept as state for
the next attempt (``state.set("result", record)``) is no written document: its clock stays a
finding. How the record is written (an append, an upsert) is its write's own finding. Decided by
where the value flows and what the field is named, once every task is known (`Linter.finish`).
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.benign import stamp_column
from airflow_idempotent.lint.facts import Stamp
from airflow_idempotent.lint.findings import TaskCheck
from airflow_idempotent.lint.pyfacts import keeps, parents
from airflow_idempotent.lint.syntax import dotted
from airflow_idempotent.lint.textuse import name_loads

__all__ = ["check_document_stamps", "document_stamp", "query_marks"]

#: calls and methods that only convert the clock's value (a number, text) for the field
_CONVERT_CALLS = frozenset({"int", "float", "str", "round"})
_CONVERT_METHODS = frozenset({"timestamp", "isoformat", "strftime", "replace", "astimezone", "date"})
#: a Mongo comparison: the field it is under is read by order
_MONGO_ORDER = frozenset({"$gt", "$gte", "$lt", "$lte"})
_MAX_DEPTH = 3


def _stamp_name(key: object) -> str | None:
    """`key` when it is a name of a stamp field, else None."""
    return key if isinstance(key, str) and stamp_column(key) else None


def _converted(node: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> tuple[ast.AST, ast.AST | None]:
    """`node` carried up through conversions of its value: ``.timestamp()``, ``* 1000``, ``int(..)``."""
    child, parent = node, parent_of.get(node)
    while parent is not None:
        if isinstance(parent, ast.Attribute) and parent.value is child and parent.attr in _CONVERT_METHODS:
            call = parent_of.get(parent)
            if not (isinstance(call, ast.Call) and call.func is parent):
                break
            child, parent = call, parent_of.get(call)
        elif isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mult | ast.Div | ast.FloorDiv):
            other = parent.right if parent.left is child else parent.left
            if not isinstance(other, ast.Constant):
                break
            child, parent = parent, parent_of.get(parent)
        elif (
            isinstance(parent, ast.Call)
            and dotted(parent.func) in _CONVERT_CALLS
            and parent.args == [child]
            and not parent.keywords
        ):
            child, parent = parent, parent_of.get(parent)
        else:
            break
    return child, parent


def stamp_field(
    node: ast.AST, body: ast.AST, parent_of: dict[ast.AST, ast.AST], depth: int = 0
) -> str | None:
    """The stamp field every use of the value `node` is written to, or None (module doc)."""
    if depth > _MAX_DEPTH:
        return None
    child, parent = _converted(node, parent_of)
    if isinstance(parent, ast.Dict) and child in parent.values:
        key = parent.keys[parent.values.index(child)]  # type: ignore[arg-type]
        return _stamp_name(key.value) if isinstance(key, ast.Constant) else None
    if isinstance(parent, ast.keyword) and parent.arg is not None and _stamp_name(parent.arg):
        call = parent_of.get(parent)
        return parent.arg if isinstance(call, ast.Call) and _record_call(call) else None
    if isinstance(parent, ast.Assign) and parent.value is child and len(parent.targets) == 1:
        target = parent.targets[0]
        if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            return _stamp_name(target.slice.value)
        if isinstance(target, ast.Attribute):  # an ORM row's field: ``vendor_file.updated = now()``
            return _stamp_name(target.attr)
        if isinstance(target, ast.Name):
            uses = name_loads(body, target.id)
            named = _stamp_name(target.id)
            fields = [
                stamp_field(use, body, parent_of, depth + 1) or _handed(use, named, parent_of) for use in uses
            ]
            return fields[0] if fields and all(fields) else None
    return None


def _record_call(call: ast.Call) -> bool:
    """``dict(..)`` or a class built with keywords (an ORM model's ``DigitalBookplate(created=..)``,
    round 21 follow-up): its keywords are the record's fields."""
    name = dotted(call.func).rsplit(".", 1)[-1]
    return name == "dict" or name[:1].isupper()


def _handed(use: ast.AST, named: str | None, parent_of: dict[ast.AST, ast.AST]) -> str | None:
    """`named` (a local named as a stamp field: ``ck_data_insert_at = now()``) when `use` of it is a
    positional argument of a call, or an item of the tuple or list a row builder returns (``return
    (level_id, name, update_time)``, round 21): the value goes on under its stamp name."""
    call = parent_of.get(use)
    if isinstance(call, ast.Tuple | ast.List) and use in call.elts:
        return named if isinstance(parent_of.get(call), ast.Return) else None
    return named if isinstance(call, ast.Call) and use in call.args else None


def document_stamp(
    clock: ast.AST,
    fn: ast.AST,
    parent_of: dict[ast.AST, ast.AST],
    calls: list[tuple[ast.Call, ast.AST]] | None,
) -> str | None:
    """The stamp field the clock read `clock` in `fn` only ever fills: directly, or as what its helper
    `fn` returns when each of the helper's `calls` fills one (module doc)."""
    field = stamp_field(clock, fn, parent_of)
    if field is not None:
        return None if _kept(clock, fn, parent_of) else field
    _, parent = _converted(clock, parent_of)
    if not isinstance(parent, ast.Return) or not calls:
        return None
    fields = [
        None if _kept(call, caller, parents(caller)) else stamp_field(call, caller, parents(caller))
        for call, caller in calls
    ]
    return fields[0] if all(fields) else None


def _kept(node: ast.AST, body: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """The record holding `node` is kept as state for the next run or retry (``state.set("result",
    record)``, ``xcom_push``): a value the next attempt reads, not a stamp of what is written."""
    above = parent_of.get(node)
    while above is not None and not isinstance(above, ast.stmt):
        if isinstance(above, ast.Call) and keeps(above):
            return True
        above = parent_of.get(above)
    targets = above.targets if isinstance(above, ast.Assign) else []
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    return any(
        isinstance(call := parent_of.get(use), ast.Call) and keeps(call)
        for name in names
        for use in name_loads(body, name)
    )


def query_marks(node: ast.AST) -> list[str]:
    """``?.field`` for each field a search or document query literal reads by order: the keys of a
    ``{"range": {..}}`` (OpenSearch, Elasticsearch) and a field holding a Mongo ``$gt``/``$lt``."""
    if not isinstance(node, ast.Dict):
        return []
    marks = []
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if key.value == "range" and isinstance(value, ast.Dict):
            marks += [
                f"?.{k.value.rsplit('.', 1)[-1]}"
                for k in value.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        if isinstance(value, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value in _MONGO_ORDER for k in value.keys
        ):
            marks.append(f"?.{key.value.rsplit('.', 1)[-1]}")
    return marks


def _field_mark(stamp: Stamp, marks: set[str]) -> str | None:
    """The mark (``table.column``) some code of the repository reads by the stamp's field name: any
    table (a document's index, or a table loaded from it: ``search_key__updated_at``)."""
    field = stamp.column.lower()
    for mark in sorted(marks):
        name = mark.rpartition(".")[2].lower()
        if name == field or name.endswith("__" + field):
            return mark
    return None


def check_document_stamps(check: TaskCheck, marks: set[str]) -> None:
    """Each clock value the task writes only as a record's stamp field: information, or IDEM003 when
    the repository reads that field as a mark (module doc)."""
    for stamp in check.facts.document_stamps:
        mark = _field_mark(stamp, marks)
        if mark is None:
            check.info(
                "IDEM003",
                stamp.file,
                stamp.line,
                f"{stamp.text} in its code is only written to {stamp.column}, a stamp field of the record "
                "or document the task writes (when it was written): a rerun re-stamps it, its data comes "
                f"from other values, and no code here selects by {stamp.column}",
            )
            continue
        check.facts.unstable.append(f"{stamp.text} (the clock)")
        check.recorder.picks_no_data.add((stamp.file, stamp.line))
        check.add(
            "IDEM003",
            stamp.file,
            stamp.line,
            f"{stamp.text} in its code is written to {stamp.column}, a stamp field of the record the task "
            f"writes, and {mark} is read as a mark (compared by order, a range or a MAX): a rerun "
            "re-stamps the records, so an increment that selects by it takes them again or misses them",
            cause="the clock",
        )
