"""Checks of the SQL a task runs and of the templates in its arguments.

SQL goes through `sqlfacts` (sqlglot, and `airflow_idempotent.lint.sql.find_nondeterminism`, the
same check the operators apply before they run); templates' Python expressions through `pyfacts`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from airflow_idempotent.lint.facts import RUN_NAMES, WindowRef, Write
from airflow_idempotent.lint.findings import TaskCheck
from airflow_idempotent.lint.pyfacts import clock_call, is_relative, parents
from airflow_idempotent.lint.scope import last_name
from airflow_idempotent.lint.source import Located
from airflow_idempotent.lint.sql import Finding
from airflow_idempotent.lint.sqlfacts import SqlWrite, analyse_sql, strip_jinja

__all__ = ["check_jinja", "check_sql", "check_templated_args"]

_KIND_TEXT = {"clock": "the clock", "random": "randomness", "sequence": "a sequence"}
_STATEMENT_KEYWORDS = {
    "insert": r"\binsert\b|\breplace\b",
    "delete": r"\bdelete\b",
    "update": r"\bupdate\b",
    "merge": r"\bmerge\b",
    "select": r"\bselect\b|\bwith\b",
    "truncatetable": r"\btruncate\b",
    "create": r"\bcreate\b",
    "drop": r"\bdrop\b",
}


def _shown(hit: Finding) -> str:
    """The read as the user wrote it: now() stays now(), though sqlglot regenerates CURRENT_TIMESTAMP."""
    if hit.fragment.upper().startswith(hit.function.upper()):
        return hit.fragment
    if re.fullmatch(r"[a-z_][a-z0-9_]*", hit.function):
        return f"{hit.function}()"
    return hit.function


def _function_pattern(hit: Finding) -> str:
    """A regex finding the read in the source text."""
    special = re.search(r"'(now|today|yesterday|tomorrow)'", hit.function)
    if special:
        return re.escape(special.group(0))
    return r"\b" + r"\s+".join(re.escape(word) for word in hit.function.split()) + r"\b"


def _write_place(located: Located, write: SqlWrite, start: int) -> tuple[str, int]:
    """(file, line) of the statement that makes `write`, searched from the statement's start."""
    table = re.escape(write.table.split(".")[-1])
    patterns = {
        "append": [rf"\binsert\b[^;]*?\binto\s+\S*?{table}\b", r"\binsert\b"],
        "keyed-insert": [r"\binsert\b"],
        "upsert": [rf"\binsert\b[^;]*?\binto\s+\S*?{table}\b", r"\binsert\b"],
        "replace": [r"\breplace\b", r"\binsert\b", r"\bcreate\b"],
        "merge": [r"\bmerge\b"],
        "delete": [rf"\bdelete\s+from\s+\S*?{table}\b", r"\bdelete\b"],
        "truncate": [r"\btruncate\b"],
        "update": [rf"\bupdate\s+\S*?{table}\b"],
        "accumulate": [rf"\bupdate\s+\S*?{table}\b", r"\bupdate\b"],
    }.get(write.how, [table])
    return located.locate(*patterns, start=start)


def check_sql(check: TaskCheck, located: Located, project: bool, allowed: set[str] | None = None) -> None:
    """The SQL a task runs: clock reads (IDEM001/IDEM004), high-water marks, its writes and window.

    `project`: the SQL of this package's operators, which bind the window themselves and whose
    write is the operator's (not the SQL's); `allowed`: their allow_functions.
    """
    facts = check.facts
    analysis = analyse_sql(located.text, check.dialect)
    facts.saw_sql = True
    if analysis.error is not None:
        where = "{}:{}".format(*located.place(None))
        check.note(f"SQL at {where} could not be parsed: {analysis.error[:160]}")
    check_jinja(check, analysis.jinja, located)
    cursor = 0
    for stmt in analysis.statements:
        keyword = _STATEMENT_KEYWORDS.get(stmt.kind)
        found = located.find(keyword, start=cursor) if keyword else None
        start = found if found is not None else cursor
        cursor = start + 1 if found is not None else cursor
        for hit, relative in [(h, False) for h in stmt.clock] + [(h, True) for h in stmt.relative]:
            shown = _shown(hit)
            file, line = located.locate(_function_pattern(hit), start=start)
            acked = allowed is not None and hit.function in allowed
            if relative:
                rule = "IDEM004"
                message = (
                    f"the window is taken relative to the clock ({shown} shifted by a fixed span): a "
                    "rerun a day late reads a different span, and the missed one is never loaded"
                )
                facts.windows.append(
                    WindowRef("relative", f'The clock: "the last N" before {shown} in its SQL.')
                )
            else:
                rule = "IDEM001"
                message = (
                    f"the SQL reads {_KIND_TEXT.get(hit.kind, 'the clock')}: {shown}, so a rerun of a "
                    "window gives different rows than its first run"
                )
                if hit in stmt.filtering:
                    facts.windows.append(WindowRef("clock", f"The clock: {shown} in its SQL."))
                else:
                    facts.unstable.append(f"{shown} ({_KIND_TEXT.get(hit.kind, hit.kind)})")
            check.add(
                rule,
                file,
                line,
                message,
                acknowledged=acked,
                reason="listed in allow_functions on the operator" if acked else None,
            )
        if stmt.high_water and not project:
            for write in stmt.writes:
                if write.how == "append":
                    file, line = _write_place(located, write, start)
                    check.add(
                        "IDEM004",
                        file,
                        line,
                        f"the window is taken from the target's current contents ({stmt.high_water}): a "
                        "rerun or backfill of an earlier window loads nothing, and rows that arrive late "
                        "behind the mark are never loaded",
                    )
                    facts.writes.append(
                        Write(
                            write.table,
                            "high-water",
                            f"{write.detail} of the rows past {stmt.high_water}",
                            file,
                            line,
                            check.conn,
                        )
                    )
            stmt.writes = [w for w in stmt.writes if w.how != "append"]
        if stmt.high_water:
            facts.windows.append(
                WindowRef("target", f"The target's current contents: {stmt.high_water} (a high-water mark).")
            )
        names = set(stmt.placeholders)
        if names and not project:  # the project operators bind :window_start / :window_end
            bound = ", ".join(f":{n}" for n in sorted(names))
            facts.windows.append(WindowRef("param", f"Bound parameters {bound} in its SQL."))
        if not project:
            for write in stmt.writes:
                file, line = _write_place(located, write, start)
                facts.writes.append(Write(write.table, write.how, write.detail, file, line, check.conn))


def check_jinja(
    check: TaskCheck, expressions: Sequence[str], located: Located, where: str = "its SQL"
) -> None:
    """Jinja expressions of a template: a clock read (IDEM001 in SQL, IDEM003 elsewhere; IDEM004 when
    shifted by a span), or the run's names that decide the window."""
    facts = check.facts
    for text in expressions:
        try:
            tree = ast.parse(text.split("|")[0].strip() or "None", mode="eval")
        except SyntaxError:
            continue
        clock = False
        parent_of = parents(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (name := clock_call(node, None)) is not None:
                clock = True
                file, line = located.locate(re.escape(last_name(name.rstrip("()"))) + r"\s*\(")
                if is_relative(node, parent_of):
                    where_read = f"a template in {where}"
                    check.clock_read(name, (file, line), where_read, True)
                else:
                    check.add(
                        "IDEM001" if where == "its SQL" else "IDEM003",
                        file,
                        line,
                        f"the template {{{{ {text} }}}} in {where} reads the clock ({name}), so a rerun "
                        "of a window renders something different than its first run",
                    )
                    facts.windows.append(WindowRef("clock", f"The clock: {{{{ {text} }}}} in {where}."))
        if clock:
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        run = sorted((names | attrs) & RUN_NAMES)
        if run:
            what = "data interval" if any(n.startswith("data_interval") for n in run) else "logical date"
            facts.windows.append(WindowRef("run", f"The run's {what}: {{{{ {text} }}}} in {where}."))


def check_templated_args(check: TaskCheck, node: ast.expr | None, where: str) -> None:
    """Templates in a templated argument (a string, or the strings of a dict or list)."""
    if node is None:
        return
    value, scope = check.task.scope.value(node)
    items: list[ast.expr | None]
    if isinstance(value, ast.Dict):
        items = list(value.values)
    elif isinstance(value, ast.List | ast.Tuple):
        items = list(value.elts)
    else:
        items = [value]
    for item in items:
        located = scope.string(item) if item is not None else None
        if located is not None:
            check_jinja(check, strip_jinja(located.text)[1], located, where)
