"""The run's start that only labels what a task writes: a snapshot's name, no window (IDEM004).

Principle (round 20, issue 35): ``{{ dag_run.start_date }}`` (or ``ti.start_date``) handed whole to
an argument of the repository's own operator is the wall clock at the run's start
(`sqlchecks.check_jinja`). It is a window taken from the clock (IDEM004) when the operator decides
by it what it reads. When the operator's code uses that argument only to label what the task
writes, nothing the task reads depends on it: each run takes a snapshot of what it fetches and
labels it with the moment it was taken, and a rerun writes another labelled snapshot beside the
first; it reads no other span. That is information.

"Only labels" is decided by where the value flows in the code, never by names: the constructor
stores the argument in an attribute, and every use of that attribute ends, directly or through text
made of it (an f-string, ``os.path.join``, ``json.dumps``, ``+``), the locals it is assigned to, the
dicts and lists it is a value of, and the methods that return those, in

- an argument of a write call (`WRITE_CALLS`: ``upload``, ``load_string``, ``put_object``..): the
  written object's name, data or metadata;
- the value ``execute`` returns (the record downstream tasks are handed);
- a log line;
- a keyword of a repository class's constructor whose attribute ends the same way.

Any other use keeps the finding: a comparison, a read call's argument (a listing's ``prefix=``, a
hook's query), a method of ``self`` it is handed to, a reassignment. So does every task whose code
the linter cannot read: an installed operator, a ``python_callable``'s ``op_kwargs``, a
``TriggerDagRunOperator``'s ``conf`` (the triggered DAG selects by it).
"""

from __future__ import annotations

import ast

from airflow_idempotent.lint.customops import operator_classes
from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.pyfacts import parents
from airflow_idempotent.lint.scope import Scope, method_of, parameters
from airflow_idempotent.lint.syntax import dotted, last_name, self_attr
from airflow_idempotent.lint.textuse import PASS, TEXT_METHODS, Sink, assignment, is_log_call, value_ends

__all__ = ["WRITE_CALLS", "labels_written"]

#: calls that write an object: every argument is its name, its data or its metadata
WRITE_CALLS = frozenset(
    {
        "upload",
        "upload_file",
        "upload_fileobj",
        "load_string",
        "load_bytes",
        "load_file",
        "load_file_obj",
        "put_object",
        "write_text",
        "write_bytes",
    }
)
#: calls whose result is text (or a path) made of their arguments
_TEXT_CALLS = frozenset({"join", "dumps", "str", "format", "basename"})
_MAX_DEPTH = 6
#: what the value flows through unchanged in kind: text, containers of it, keywords, ``+``/``%``
_FLOWS_ON = (
    ast.FormattedValue,
    ast.JoinedStr,
    ast.Dict,
    ast.List,
    ast.Tuple,
    ast.BinOp,
    ast.keyword,
    ast.Starred,
)

Chain = list[tuple[ast.ClassDef, Scope]]


def labels_written(task: TaskDef, argument: str) -> str | None:
    """The name of the task's operator class when its code uses `argument` only to label what the
    task writes (see the module's principle); None otherwise, or when its code cannot be read."""
    chain = task.classes or operator_classes(task.scope, task.operator)  # ``.partial()`` too
    if not chain:
        return None
    return chain[0][0].name if _Flow(chain).stored_labels(chain, argument, 0) else None


class _Flow:
    """Where an attribute's value goes in the classes read so far (the operator's, and the
    repository's classes it hands the value to)."""

    def __init__(self, chain: Chain) -> None:
        self.classes: Chain = list(chain)
        self._parents: dict[int, dict[ast.AST, ast.AST]] = {}
        self._returning: set[tuple[int, str]] = set()

    def parents_of(self, method: ast.AST) -> dict[ast.AST, ast.AST]:
        if id(method) not in self._parents:
            self._parents[id(method)] = parents(method)
        return self._parents[id(method)]

    def stored_labels(self, chain: Chain, param: str, depth: int) -> bool:
        """The constructor of `chain` stores `param` in attributes, and each of their uses labels."""
        init = method_of(chain, "__init__")
        if depth > _MAX_DEPTH or init is None or param not in parameters(init[0]):
            return False
        attrs: set[str] = set()
        for node in ast.walk(init[0]):
            target, value = assignment(node)
            if isinstance(value, ast.Name) and value.id == param and (attr := self_attr(target)) is not None:
                attrs.add(attr)
        if not attrs:
            return False
        self.classes.extend(c for c in chain if all(c[0] is not k for k, _ in self.classes))
        for cls, _ in chain:
            for method in (m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)):
                for node in ast.walk(method):
                    if not (isinstance(node, ast.Attribute) and self_attr(node) in attrs):
                        continue
                    if isinstance(node.ctx, ast.Store | ast.Del):
                        stored = method is init[0] and _stores_param(node, self.parents_of(method), param)
                        if not stored:
                            return False  # assigned again: it may hold anything
                        continue
                    if not self.labels(node, method, depth):
                        return False
        return True

    def labels(self, node: ast.AST, method: ast.AST, depth: int) -> bool:
        """The value of `node` (in `method`) ends only as a label of what is written."""
        ends = value_ends(
            node, method, self.parents_of(method), self._sink(method), None, depth, _MAX_DEPTH, True
        )
        return bool(ends)

    def _sink(self, method: ast.AST) -> Sink:
        """`value_ends`' sink for `labels`: text made of the value flows on; a write call, a log line,
        ``execute``'s return value end it as a label; anything else fails."""
        up = self.parents_of(method)

        def sink(parent: ast.AST, child: ast.AST, state: None, depth: int) -> tuple[object, None]:
            if isinstance(parent, ast.Attribute):  # a text method of the value: .strftime(..), .replace(..)
                text = parent.attr in TEXT_METHODS | {"replace"} and isinstance(up.get(parent), ast.Call)
                return (PASS if text else None), state
            if isinstance(parent, ast.Call) and child is parent.func:
                return (PASS if isinstance(child, ast.Attribute) else None), state  # the method just passed
            if isinstance(parent, ast.Dict) and child not in parent.values:
                return None, state  # a key: it decides which field, not what the field holds
            if isinstance(parent, ast.BinOp) and not isinstance(parent.op, ast.Add | ast.Mod):
                return None, state
            if isinstance(parent, _FLOWS_ON):
                return PASS, state
            if isinstance(parent, ast.Call):
                return (self._call(parent, child, method, depth) or None), state
            if isinstance(parent, ast.Return):
                return (self._returned(method, depth) or None), state
            return None, state

        return sink

    def _call(self, call: ast.Call, child: ast.AST, method: ast.AST, depth: int) -> bool:
        if child is call.func:
            return False
        name = last_name(dotted(call.func))
        if is_log_call(call) or name in WRITE_CALLS:
            return True
        if name in _TEXT_CALLS:
            return self.labels(call, method, depth)
        if isinstance(call.func, ast.Name) and isinstance(child, ast.keyword) and child.arg is not None:
            scope = next((s for c, s in self.classes if any(m is method for m in c.body)), None)
            helper = scope.class_chain(call.func.id) if scope is not None else []
            return bool(helper) and self.stored_labels(helper, child.arg, depth + 1)
        return False

    def _returned(self, method: ast.AST, depth: int) -> bool:
        """What `method` returns labels: it is ``execute`` (the task's XCom), or every call of it in
        the classes read ends as a label."""
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            return False
        if method.name == "execute":
            return True
        key = (id(method), method.name)
        if key in self._returning:
            return True  # already being followed: the other uses decide
        self._returning.add(key)
        calls = [
            (node, other)
            for cls, _ in self.classes
            for other in cls.body
            if isinstance(other, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(other)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == method.name
        ]
        return bool(calls) and all(self.labels(node, other, depth + 1) for node, other in calls)


def _stores_param(target: ast.Attribute, up: dict[ast.AST, ast.AST], param: str) -> bool:
    """`target` is the attribute an assignment of the constructor's parameter `param` stores into."""
    _, value = assignment(up.get(target) or target)
    return isinstance(value, ast.Name) and value.id == param
