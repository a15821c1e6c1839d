"""A DAG gated by a ``LatestOnlyOperator``: every task runs downstream of it, so only the latest run works.

Round 34 (issue 35): six of willyuyasan's Airflow 1.10 DAGs leave ``catchup=`` to the deployment's
default (on) but start with a ``LatestOnlyOperator`` that every other task follows. When the scheduler
creates the backlog, the operator skips its downstream tasks in every run but the latest, and a
skipped task skips the tasks after it (their default trigger rule, ``all_success``): the caught-up runs
do no work, and the latest one does what a run with ``catchup=False`` would. So catch-up is harmless
there (IDEM005 information), and a rolling window of such a DAG is read as one with catchup off
(`rolling`).

The dependencies are read from the DAG file's syntax: ``a >> b``, ``a << b`` (chains, lists of
tasks), ``a.set_downstream(b)``, ``b.set_upstream(a)``, ``chain(..)``, ``cross_downstream(..)``, and a
TaskFlow task's inputs. A task is named by the variable it is assigned to (``x = Operator(..)``,
several tasks when the assignment is in a loop) or spelled inline. The gate counts only when it has no
upstream task, every other task of the DAG is reachable from it, and none of those tasks has a trigger
rule that runs after a skip (anything but ``all_success``, in its arguments or ``default_args``).

Round 36l (issue 35): a gate in the middle is the opposite case. Ruggable's Shopify DAGs (catchup on,
and a backfill DAG ending in the past) extract each run's files, then pass a ``LatestOnlyOperator``
before the Glue job that flattens those files: every caught-up run extracts its window and skips its
transform (`skipped_after_gate`, decided in `catchups`).
"""

from __future__ import annotations

import ast
import itertools

from airflow_idempotent.lint.definitions import DagDef, TaskDef
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["latest_only_gate", "skipped_after_gate"]

_EDGE_METHODS = {"set_downstream": False, "set_upstream": True}


def _is_gate(task: TaskDef) -> bool:
    return last_name(task.operator).startswith("LatestOnly")


def _named(dag: DagDef) -> dict[str, set[str]]:
    """Variable names of the DAG file bound to its tasks (``x = Operator(..)``, ``x = fn()``)."""
    by_line: dict[int, set[str]] = {}
    for task in dag.tasks:
        by_line.setdefault(task.line, set()).add(task.task_id)
    names: dict[str, set[str]] = {}
    for node in ast.walk(dag.scope.tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            ids = by_line.get(node.value.lineno, set())
            for target in targets:
                if isinstance(target, ast.Name) and ids:
                    names.setdefault(target.id, set()).update(ids)
    return names


def _tasks_of(node: ast.AST, names: dict[str, set[str]], by_line: dict[int, set[str]]) -> set[str] | None:
    """The task ids an operand of ``>>`` stands for; None when the linter cannot tell."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        found: set[str] = set()
        for item in node.elts:
            ids = _tasks_of(item, names, by_line)
            if ids is None:
                return None
            found |= ids
        return found
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call):
        return by_line.get(node.lineno)
    return None


def _edges(dag: DagDef, gates: set[str]) -> list[tuple[str, str]] | None:
    """(upstream, downstream) task ids of the DAG. An operand the linter cannot read (a task group, a
    task of another DAG of the file) adds no edge, which only leaves tasks unreached; None when such
    an operand is upstream of a gate (the gate would not be the root)."""
    names = _named(dag)
    by_line: dict[int, set[str]] = {}
    for task in dag.tasks:
        by_line.setdefault(task.line, set()).add(task.task_id)
    found: list[tuple[str, str]] = []

    def pair(ups: set[str] | None, downs: set[str] | None) -> None:
        if ups is None and downs is not None and downs & gates:
            raise LookupError
        if ups is not None and downs is not None:
            found.extend((u, d) for u in ups for d in downs if u != d)

    def operand(node: ast.AST) -> set[str] | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift | ast.LShift):
            left, right = operand(node.left), operand(node.right)
            if isinstance(node.op, ast.RShift):
                pair(left, right)
            else:
                pair(right, left)
            return right
        return _tasks_of(node, names, by_line)

    inner: set[int] = set()
    try:
        for node in ast.walk(dag.scope.tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift | ast.LShift):
                if id(node) not in inner:
                    inner.update(id(n) for n in ast.walk(node))
                    operand(node)
            elif isinstance(node, ast.Call):
                name = last_name(dotted(node.func))
                if name in _EDGE_METHODS and isinstance(node.func, ast.Attribute) and node.args:
                    this = _tasks_of(node.func.value, names, by_line)
                    other = _tasks_of(node.args[0], names, by_line)
                    if _EDGE_METHODS[name]:  # b.set_upstream(a)
                        pair(other, this)
                    else:
                        pair(this, other)
                elif name in ("chain", "cross_downstream"):
                    parts = [_tasks_of(a, names, by_line) for a in node.args]
                    for ups, downs in itertools.pairwise(parts):
                        pair(ups, downs)
    except LookupError:
        return None
    ids = {t.task_id for t in dag.tasks}
    found.extend((up, t.task_id) for t in dag.tasks for up in t.inputs if up in ids)
    return found


def _runs_after_skip(task: TaskDef, dag: DagDef) -> bool:
    node = task.kwargs.get("trigger_rule") or dag.default_args.get("trigger_rule")
    if node is None:
        return False
    value = task.scope.literal(node)
    text = value if isinstance(value, str) else ast.unparse(node)
    return text.rsplit(".", 1)[-1].lower() != "all_success"


def latest_only_gate(dag: DagDef) -> str | None:
    """The task id of the ``LatestOnlyOperator`` every other task of `dag` runs downstream of (it has
    no upstream task itself, and no task after it runs when it skips), or None."""
    gates = [t for t in dag.tasks if _is_gate(t)]
    if not gates or len(dag.tasks) < 2:
        return None
    gate_ids = {g.task_id for g in gates}
    edges = _edges(dag, gate_ids)
    if edges is None:
        return None
    downstream: dict[str, set[str]] = {}
    upstream: set[str] = set()
    for up, down in edges:
        downstream.setdefault(up, set()).add(down)
        upstream.add(down)
    if gate_ids & upstream:
        return None
    reached: set[str] = set()
    todo = list(gate_ids)
    while todo:
        for nxt in downstream.get(todo.pop(), set()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    others = [t for t in dag.tasks if t.task_id not in gate_ids]
    if any(t.task_id not in reached or _runs_after_skip(t, dag) for t in others):
        return None
    return sorted(gate_ids)[0]


def skipped_after_gate(dag: DagDef) -> tuple[str, frozenset[str]] | None:
    """A ``LatestOnlyOperator`` of `dag` with upstream tasks (a gate in the middle): its task id and
    the tasks a skip of it skips (those after it, up to a task whose trigger rule runs after a skip),
    or None (no such gate, or dependencies the linter cannot read). The tasks before it run in every
    run; the skipped ones only in the run whose window is the latest."""
    gates = [t for t in dag.tasks if _is_gate(t)]
    if len(gates) != 1 or len(dag.tasks) < 3:
        return None
    gate = gates[0].task_id
    edges = _edges(dag, {gate})
    if edges is None or not any(down == gate for _up, down in edges):
        return None
    downstream: dict[str, set[str]] = {}
    for up, down in edges:
        downstream.setdefault(up, set()).add(down)
    by_id = {t.task_id: t for t in dag.tasks}
    skipped: set[str] = set()
    todo = [gate]
    while todo:
        for nxt in downstream.get(todo.pop(), set()):
            task = by_id.get(nxt)
            if nxt not in skipped and nxt != gate and task is not None and not _runs_after_skip(task, dag):
                skipped.add(nxt)
                todo.append(nxt)
    return (gate, frozenset(skipped)) if skipped else None
