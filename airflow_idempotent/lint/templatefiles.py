"""Template files a task names: a ``.sql`` file found where Airflow's renderer looks for it.

Airflow renders a templated argument that ends with one of the task's ``template_ext`` (an
operator's ``sql="query/load.sql"``) or, for a TaskFlow task, with one of its ``templates_exts``
(``@task(templates_exts=[".sql"])`` then ``check(query="check_new.sql")``) as the text of that file,
looked up next to the DAG file and on the DAG's ``template_searchpath``. So the function of such a
task receives the file's SQL, not its name, and a client's ``.query(query)`` there runs that SQL
(round 35b): the argument is bound to the file's text, read where the file is written.
"""

from __future__ import annotations

import ast
from pathlib import Path

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.scope import Bound, Row
from airflow_idempotent.lint.source import UNRESOLVED, deployed_path, found_file, is_unresolved

__all__ = ["find_sql_file", "given_arguments", "path_arguments", "templated_arguments"]


def find_sql_file(task: TaskDef, name: str) -> Path | None:
    """A ``.sql`` file next to the DAG file or on the DAG's template_searchpath, also where a deployed
    path (``/usr/local/airflow/include/...``, ``$AIRFLOW_HOME/...``) lands in the DAG's checkout; a
    search path under a folder known only at run time (``settings.DAGS_FOLDER + "/alerting/query"``)
    is looked for by the tail it writes, as a deployed path is (round 35b)."""
    here = task.scope.source.path
    roots = [here.parent]
    if task.dag is not None:
        paths = task.dag.scope.strings(task.dag.kwargs.get("template_searchpath"))
        for entry in paths:
            text = entry.text
            if entry.unresolved:  # ``settings.DAGS_FOLDER + "/sql"``: its written tail, as deployed
                head, _, tail = text.partition("/")
                if not head.startswith(UNRESOLVED) or is_unresolved(tail):
                    continue
                text = "/" + tail
            if Path(text).is_absolute():
                found = deployed_path(text, here)
                if found is not None:
                    roots.append(found)
            else:
                roots.append(here.parent / text)
    return found_file(name, roots, here)


def templated_arguments(task: TaskDef, fn: ast.AST) -> dict[str, Row]:
    """The parameters of a TaskFlow task's function that Airflow hands a ``.sql`` file's text: the
    task declares ``templates_exts`` with ``.sql`` and its call gives the parameter (by keyword or by
    position) a literal file name found where the renderer looks. Each is bound to the file read
    whole (``open(<file>).read()``, which `texts` reads as the file's text with its own lines);
    {} for any other task or argument (a name not found stays unknown)."""
    if task.decorator is None or not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return {}
    exts = task.scope.literal(task.kwargs.get("templates_exts"))
    if not isinstance(exts, list) or ".sql" not in exts:
        return {}
    bound: dict[str, Row] = {}
    for name, expr in given_arguments(task, fn).items():
        text = task.scope.literal(expr)
        found = find_sql_file(task, text) if isinstance(text, str) and text.endswith(".sql") else None
        if found is not None:
            opened = ast.Call(ast.Name(id="open", ctx=ast.Load()), [ast.Constant(str(found))], [])
            read = ast.Call(ast.Attribute(value=opened, attr="read", ctx=ast.Load()), [], [])
            bound[name] = Bound(ast.copy_location(read, expr), task.scope)
    return bound


def given_arguments(task: TaskDef, fn: ast.AST) -> dict[str, ast.expr]:
    """What the task gives `fn`'s parameters: its ``op_args`` by position (a TaskFlow call's
    positional arguments are recorded as such) and, for a TaskFlow task, the call's keywords."""
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return {}
    given: dict[str, ast.expr] = {}
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    op_args = task.kwargs.get("op_args")
    if isinstance(op_args, ast.List):
        given.update(zip(positional, op_args.elts, strict=False))
    if task.decorator is not None:
        names = {*positional, *(a.arg for a in fn.args.kwonlyargs)}
        given.update({k: v for k, v in task.kwargs.items() if k in names})
    return given


def path_arguments(task: TaskDef, fn: ast.AST) -> dict[str, Row]:
    """Parameters given a text known before the run that is no template (``run_file("sql/x.sql")``,
    ``op_args=[SQL_DIR / "load.sql"]``): bound to it, so the helper that opens the path reads the file
    (round 36f). Others stay unknown: a task's output, a template Airflow renders at run time."""
    bound: dict[str, Row] = {}
    for name, expr in given_arguments(task, fn).items():
        text = task.scope.string(expr)
        if text is not None and not text.unresolved and "{{" not in text.text and "{%" not in text.text:
            bound[name] = Bound(expr, task.scope)
    return bound
