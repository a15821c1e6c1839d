"""Checks of the code a task runs: its Python (TaskFlow, python_callable), bash command and arguments,
and the DAG file's module-level code.

Python is read from its syntax tree (`pyfacts`), never run; SQL strings the code passes to
``execute``/``run`` and what ``@task.sql`` returns go through `sqlchecks.check_sql`.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.collect import Collector, walk_no_defs
from airflow_idempotent.lint.facts import RUN_NAMES, Effect, WindowRef, Write
from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.pyfacts import (
    SIDE_EFFECT_CALLS,
    SQL_METHODS,
    clock_call,
    is_relative,
    keyed,
    looks_like_sql,
    parents,
)
from airflow_idempotent.lint.scope import Scope, dotted, keywords, last_name
from airflow_idempotent.lint.source import Located
from airflow_idempotent.lint.sqlchecks import check_jinja, check_sql
from airflow_idempotent.lint.sqlfacts import strip_jinja

__all__ = ["check_bash", "check_call_args_clock", "check_code", "check_module_clock"]


def check_code(check: TaskCheck) -> None:
    """The task's Python functions (and the functions they call in the same file): clock reads, SQL
    passed to hooks and cursors, DataFrame/hook writes, side effects and their keys."""
    task, facts = check.task, check.facts
    if not task.functions:
        return
    facts.saw_code = True
    scope = task.scope
    file = scope.source.display
    seen: set[int] = set()
    queue: list[ast.AST] = list(task.functions)
    decorator = task.decorator or ""
    while queue:
        fn = queue.pop(0)
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            args = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]}
            run = sorted(args & RUN_NAMES)
            if run:
                facts.windows.append(WindowRef("run", f"The run's context: {', '.join(run)} in its code."))
        locals_: dict[str, ast.expr] = {}
        parent_of = parents(fn)
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                locals_[node.targets[0].id] = node.value
            if isinstance(node, ast.Name) and node.id == "get_current_context":
                facts.windows.append(
                    WindowRef("run", "The run's context: get_current_context() in its code.")
                )
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in RUN_NAMES
            ):
                key = node.slice.value
                facts.windows.append(WindowRef("run", f"The run's context: [{key!r}] in its code."))
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func)
            if isinstance(node.func, ast.Name) and node.func.id in scope.functions:
                queue.append(scope.functions[node.func.id])
            clock = clock_call(node, scope)
            if clock is not None:
                relative = is_relative(node, parent_of)
                check.clock_read(clock, (file, node.lineno), "its code", relative)
                continue
            method = last_name(name)
            if method in SQL_METHODS and (node.args or any(k.arg == "sql" for k in node.keywords)):
                arg = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "sql")
                if isinstance(arg, ast.Name) and arg.id in locals_:
                    arg = locals_[arg.id]
                for located in scope.strings(arg):
                    if looks_like_sql(located.text):
                        check_sql(check, located, project=False)
                continue
            if method in ("insert_rows", "to_sql"):
                _python_write(check, node, method)
                continue
            if method in SIDE_EFFECT_CALLS and isinstance(node.func, ast.Attribute | ast.Name):
                if method in ("post", "put", "patch") and not isinstance(node.func, ast.Attribute):
                    continue
                facts.effects.append(
                    Effect(f"{SIDE_EFFECT_CALLS[method]} ({name}(...))", keyed(node), file, node.lineno)
                )
        if decorator in ("task.sql", "task.bash") and isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
                returned = scope.string(ret.value)
                if returned is None:
                    continue
                if decorator == "task.sql":
                    check_sql(check, returned, project=False)
                else:
                    check_bash(check, returned)
    if not facts.writes and not facts.effects and facts.opaque is None:
        facts.opaque = "its Python code"


def _python_write(check: TaskCheck, node: ast.Call, method: str) -> None:
    """hook.insert_rows(table, rows[, replace=True]) and DataFrame.to_sql(name, con, if_exists=...)."""
    kwargs = keywords(node)
    name_arg = "table" if method == "insert_rows" else "name"
    table = check.task.scope.literal(node.args[0] if node.args else kwargs.get(name_arg))
    shown = table if isinstance(table, str) else "<table>"
    if method == "insert_rows":
        replace = check.task.scope.literal(kwargs.get("replace")) is True
        how, detail = ("upsert", f"insert_rows({shown}, replace=True)") if replace else ("append", "")
        detail = detail or f"insert_rows({shown})"
    else:
        mode = check.task.scope.literal(kwargs.get("if_exists"))
        how = {"append": "append", "replace": "replace"}.get(mode if isinstance(mode, str) else "", "create")
        detail = f"to_sql({shown}, if_exists={mode!r})" if how != "create" else f"to_sql({shown})"
    check.facts.writes.append(Write(shown.lower(), how, detail, check.file, node.lineno, check.conn))


def check_bash(check: TaskCheck, bash: Located) -> None:
    """A bash command: its templates, and ``$(date ...)`` (IDEM003; IDEM004 when shifted)."""
    check.facts.opaque = check.facts.opaque or "its bash command"
    check_jinja(check, strip_jinja(bash.text)[1], bash, "its bash command")
    for match in re.finditer(r"\$\(\s*date\b([^)]*)\)|`\s*date\b([^`]*)`", bash.text):
        args = match.group(1) or match.group(2) or ""
        if "{{" in args:
            continue
        file, line = bash.locate(re.escape(match.group(0)), r"\bdate\b")
        relative = re.search(r"(-d|--date)\b.*(ago|yesterday|tomorrow|hour|day|week|month)", args)
        shown = f"$(date{args})"
        check.clock_read(shown, (file, line), "its bash command", bool(relative))


def check_call_args_clock(check: TaskCheck) -> None:
    """Clock reads inside the task's own arguments (evaluated when the DAG file is parsed)."""
    task, file = check.task, check.file
    for value in task.kwargs.values():
        if isinstance(value, ast.Lambda):
            continue
        parent_of = parents(value)
        for node in walk_no_defs(value):
            if isinstance(node, ast.Call) and (name := clock_call(node, task.scope)) is not None:
                relative = is_relative(node, parent_of)
                check.clock_read(name, (file, node.lineno), "its arguments", relative)


def check_module_clock(recorder: Recorder, scope: Scope, collector: Collector) -> None:
    """Clock reads at module level or in DAG arguments, outside any task's arguments."""
    task_spans = [
        (t.line, t.end_line) for t in [*collector.loose, *(t for d in collector.dags for t in d.tasks)]
    ]
    file = scope.source.display
    parent_of = parents(scope.tree)
    for stmt in scope.tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in walk_no_defs(stmt):
            if not isinstance(node, ast.Call) or (name := clock_call(node, scope)) is None:
                continue
            if any(first <= node.lineno <= last for first, last in task_spans):
                continue
            dag = next((d for d in collector.dags if d.line <= node.lineno <= d.end_line), None)
            where = "the DAG's arguments" if dag is not None else "module-level code"
            anchors = ((file, dag.line),) if dag is not None else ()
            relative = is_relative(node, parent_of)
            recorder.clock_read(dag, name, (file, node.lineno), anchors, where, relative)
