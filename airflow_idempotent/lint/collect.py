"""The DAGs and tasks of a DAG file, found the way Airflow would attach them, from its syntax tree.

``with DAG(...)``, ``dag = DAG(...)`` with ``dag=dag``, ``@dag`` functions, task groups (``with
TaskGroup``, ``@task_group`` functions: their id prefixes the task's), classic operators
(``task_id=``, ``.partial().expand()``) and TaskFlow calls (``fn()``, ``fn.override(task_id=...)()``,
``fn.expand()``, ``fn.partial().expand()``, repeated calls numbered ``__1``). Task factories (a
function that makes tasks, called from a DAG) and loops over literal lists are followed with their
arguments and loop variables bound, so ``task_id=f"copy_{table}"`` becomes ``copy_invoices``.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, replace

from airflow_idempotent.lint import factorycalls as calls
from airflow_idempotent.lint.branches import static_truth
from airflow_idempotent.lint.callables import task_callable
from airflow_idempotent.lint.customops import operator_classes
from airflow_idempotent.lint.dagargs import factory_arguments, is_dag_call, unpacked_kwargs
from airflow_idempotent.lint.decorators import decorator_kwargs, decorator_name, task_decorator
from airflow_idempotent.lint.definitions import DagDef, TaskDef
from airflow_idempotent.lint.scope import Bound, FunctionNode, Scope, bind_arguments
from airflow_idempotent.lint.source import is_project_file
from airflow_idempotent.lint.syntax import (
    dotted,
    keywords,
    last_name,
    main_guard,
    post_order_calls,
    walk_no_defs,
)
from airflow_idempotent.lint.taskwrappers import wrapped_task

__all__ = ["Collector"]

#: How deep task factories calling task factories are followed.
_MAX_DEPTH = 4
#: DAG arguments a file may set as attributes after constructing the DAG
_DAG_ATTRIBUTES = frozenset({"catchup", "end_date", "max_active_runs"})
_MAPPING_METHODS = frozenset({"expand", "expand_kwargs"})


@dataclass(frozen=True)
class _Ctx:
    """Where the walk is: the DAG and task group tasks attach to, and the names bound so far."""

    dag: DagDef | None
    group: str
    scope: Scope
    depth: int = 0


class Collector:
    """Walk a module and collect its DAGs and their tasks, the way Airflow would attach them."""

    def __init__(self, scope: Scope, follow_callables: bool = False) -> None:
        self.scope, self.follow_callables = scope, follow_callables  # `callables`: off by default
        self.dags: list[DagDef] = []
        self.loose: list[TaskDef] = []  # tasks outside any DAG
        self.dag_vars: dict[str, DagDef] = {}
        self.taskflow: dict[str, tuple[FunctionNode, str, dict[str, ast.expr], Scope]] = {}
        self.used_ids: dict[tuple[str | None, str], int] = {}
        #: functions whose bodies ran as DAG code (``@dag`` bodies, task groups, task factories)
        self.dag_code: list[tuple[FunctionNode, Scope]] = []
        self._consumed: set[int] = set()
        self._expanding: list[int] = []
        self._outputs: dict[int, str] = {}  # TaskFlow call node -> its task id
        #: a DAG factory's own ``DAG(..)`` call -> the DAG its caller's call made (`_factory_tasks`)
        self._made: dict[int, DagDef] = {}
        self._chains: list[calls.Chain] = []  # the classes of the methods being followed (``self.x()``)

    def collect(self) -> None:
        self._body(self.scope.tree.body, _Ctx(None, "", self.scope))

    def _new_dag(
        self,
        call_kwargs: dict[str, ast.expr],
        line: int,
        default_id: str,
        node: ast.AST,
        args: list[ast.expr],
        scope: Scope,
    ) -> DagDef:
        given = call_kwargs.get("dag_id") or (args[0] if args else None)
        dag_id = scope.literal(given)
        if not isinstance(dag_id, str) and self._chains:  # ``DAG(self.dag_id, ..)`` in a factory class
            dag_id = calls.init_text(given, self._chains[-1])
        dag = DagDef(
            dag_id=dag_id if isinstance(dag_id, str) else default_id,
            scope=scope,
            line=line,
            end_line=getattr(node, "end_lineno", None) or line,
            kwargs=call_kwargs,
            default_args=scope.mapping(call_kwargs.get("default_args")),
        )
        self.dags.append(dag)
        return dag

    def _body(self, body: Sequence[ast.stmt], ctx: _Ctx) -> _Ctx:
        for stmt in body:
            ctx = self._stmt(stmt, ctx)
        return ctx

    def _stmt(self, stmt: ast.stmt, ctx: _Ctx) -> _Ctx:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            return self._def(stmt, ctx)
        if isinstance(stmt, ast.ClassDef):
            return ctx
        if isinstance(stmt, ast.With | ast.AsyncWith):
            inner = ctx
            for item in stmt.items:
                inner = self._with_item(item, inner)
            after = self._body(stmt.body, inner)
            return replace(ctx, scope=after.scope)
        made = self._factory_defaults(stmt.value, ctx) if isinstance(stmt, ast.Assign) else None
        factory = {**made[0], **made[1]} if made is not None else None
        if isinstance(stmt, ast.Assign) and id(stmt.value) in self._made:
            for target in stmt.targets:  # ``dag = DAG(..)`` inside a factory a DAG file called
                if isinstance(target, ast.Name):
                    self.dag_vars[target.id] = self._made[id(stmt.value)]
            return ctx
        if isinstance(stmt, ast.Assign) and (is_dag_call(stmt.value) or factory is not None):
            assert isinstance(stmt.value, ast.Call)
            value = stmt.value
            new = self._new_dag(
                {
                    **(made[0] if made else {}),
                    **unpacked_kwargs(value, ctx.scope),
                    **(made[1] if made else {}),
                },
                value.lineno,
                f"<dag at line {stmt.lineno}>",
                value,
                list(value.args),
                ctx.scope,
            )
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.dag_vars[target.id] = new
            if made is not None:  # written in the factory, not at this call: reported at the call
                spelled = {id(v) for v in keywords(value).values()}
                own = {k for k, v in new.kwargs.items() if id(v) in spelled}
                new.inherited = frozenset(factory or ()) - own
            if factory is not None and "retries" not in new.default_args:
                retries = keywords(value).get("retries") or factory.get("retries")
                if retries is not None:  # a factory's retries= reaches its tasks through default_args
                    new.default_args["retries"] = retries
            if made is not None:
                self._factory_tasks(value, new, ctx)
            return ctx
        if isinstance(stmt, ast.For | ast.AsyncFor):
            return self._for(stmt, ctx)
        if isinstance(stmt, ast.Assign) and (set_on := self._dag_attribute(stmt)) is not None:
            # ``dag.catchup = False`` after ``DAG(..)`` (airflow-maintenance-dags): the DAG's argument
            set_on[0].kwargs[set_on[1]] = stmt.value
            return ctx
        if main_guard(stmt):
            return ctx  # never runs when Airflow parses or runs the file (syntax.main_guard)
        if isinstance(stmt, ast.If) and (taken := static_truth(stmt.test, ctx.scope)) is not None:
            return self._body(stmt.body if taken else stmt.orelse, ctx)  # a row filter (branches.py)
        if isinstance(stmt, ast.If | ast.While | ast.Try):
            test = getattr(stmt, "test", None)
            if isinstance(test, ast.expr):
                self._expr(test, ctx)
            for part in ("body", "orelse", "finalbody"):
                ctx = self._body(getattr(stmt, part, []), ctx)
            for handler in getattr(stmt, "handlers", []):
                ctx = self._body(handler.body, ctx)
            return ctx
        for node in ast.iter_child_nodes(stmt):
            if isinstance(node, ast.expr):
                self._expr(node, ctx)
        return self._assigned(stmt, ctx)

    def _dag_attribute(self, stmt: ast.Assign) -> tuple[DagDef, str] | None:
        """The DAG and argument that ``<dag variable>.<argument> = value`` sets (catchup, end_date..)."""
        target = stmt.targets[0] if len(stmt.targets) == 1 else None
        if not isinstance(target, ast.Attribute) or target.attr not in _DAG_ATTRIBUTES:
            return None
        dag = self.dag_vars.get(target.value.id) if isinstance(target.value, ast.Name) else None
        return (dag, target.attr) if dag is not None else None

    def _factory_defaults(
        self, node: ast.expr, ctx: _Ctx
    ) -> tuple[dict[str, ast.expr], dict[str, ast.expr]] | None:
        """A call of a DAG factory of this repository: `factory_arguments`; None otherwise."""
        found = calls.factory_callee(node, ctx.scope) if isinstance(node, ast.Call) else None
        if found is None or not isinstance(node, ast.Call):
            return None
        return factory_arguments(found[0], node, ctx.scope)

    def _factory_tasks(self, call: ast.Call, dag: DagDef, ctx: _Ctx) -> None:
        """The tasks a DAG factory of the repository creates (``DAG = build_export_dag(..)``, round 20b:
        blockchain-etl builds every task in the factory's body): its body runs, arguments bound, with
        its own ``DAG(..)`` standing for `dag`, so an operator given ``dag=`` of it or made in its
        ``with DAG(..)`` block is `dag`'s task, as Airflow attaches it when the DAG file runs."""
        found = calls.factory_callee(call, ctx.scope)  # a function, or a factory class's method (round 27)
        if found is None or ctx.depth >= _MAX_DEPTH:
            return
        if id(found[0]) in self._expanding or not is_project_file(found[1].source.path):
            return
        self._made.update((id(node), dag) for node in ast.walk(found[0]) if is_dag_call(node))
        names = dict(self.dag_vars)
        method = calls.method_callee(call, ctx.scope, None)
        self._chains.append(method[2] if method is not None else [])
        if dag.dag_id.startswith("<dag at line"):  # the factory's own DAG(..) names it (round 27)
            dag.dag_id = calls.made_dag_id(found[0], found[1], self._chains[-1]) or dag.dag_id
        try:
            self._run(found[0], found[1], call, replace(ctx, dag=dag, group=""))
        finally:
            self.dag_vars = names  # the factory's own ``dag`` variable is not the calling file's
            self._chains.pop()

    def _run(self, fn: FunctionNode, def_scope: Scope, call: ast.Call, ctx: _Ctx) -> None:
        """Walk `fn`'s body as DAG code, `call`'s arguments bound, in `ctx` one level deeper."""
        bound = def_scope.child(bind_arguments(fn, calls.as_called(fn, call), ctx.scope, def_scope))
        self._expanding.append(id(fn))
        saved = dict(self.taskflow)
        self.dag_code.append((fn, bound))
        try:
            self._body(fn.body, _Ctx(ctx.dag, ctx.group, bound, ctx.depth + 1))
        finally:
            self.taskflow = saved
            self._expanding.pop()

    def _def(self, stmt: FunctionNode, ctx: _Ctx) -> _Ctx:
        taskflow = task_decorator(stmt) or wrapped_task(stmt, ctx.scope)  # a repository's own, round 32b
        if taskflow is not None:
            self.taskflow[stmt.name] = (stmt, taskflow[0], taskflow[1], ctx.scope)
            return ctx
        dag_kwargs = decorator_kwargs(stmt, "dag")
        if dag_kwargs is not None:
            deco = next(d for d in stmt.decorator_list if last_name(decorator_name(d)) == "dag")
            # ``@dag("daily_load", ..)``: the id given first, positionally, as ``DAG("daily_load")``
            args = list(deco.args) if isinstance(deco, ast.Call) else []
            if isinstance(deco, ast.Call):  # ``@dag(.., **DEFAULT_ARGS_DAGS)``, as ``DAG(.., **mapping)``
                dag_kwargs = unpacked_kwargs(deco, ctx.scope)
            inner = self._new_dag(dag_kwargs, stmt.lineno, stmt.name, deco, args, ctx.scope)
            saved = dict(self.taskflow)
            self.dag_code.append((stmt, ctx.scope))
            self._body(stmt.body, _Ctx(inner, "", ctx.scope.child(), ctx.depth))
            self.taskflow = saved
            return ctx
        return replace(ctx, scope=ctx.scope.child(functions={stmt.name: stmt}))

    def _with_item(self, item: ast.withitem, ctx: _Ctx) -> _Ctx:
        context = item.context_expr
        if id(context) in self._made:  # ``with DAG(..) as dag:`` inside a factory a DAG file called
            made = self._made[id(context)]
            if isinstance(item.optional_vars, ast.Name):
                self.dag_vars[item.optional_vars.id] = made
            return replace(ctx, dag=made)
        if is_dag_call(context):
            assert isinstance(context, ast.Call)
            dag = self._new_dag(
                unpacked_kwargs(context, ctx.scope),
                context.lineno,
                f"<dag at line {context.lineno}>",
                context,
                list(context.args),
                ctx.scope,
            )
            if isinstance(item.optional_vars, ast.Name):
                self.dag_vars[item.optional_vars.id] = dag
            return replace(ctx, dag=dag)
        if isinstance(context, ast.Call) and last_name(dotted(context.func)) == "TaskGroup":
            gid = _text_id(
                ctx.scope, keywords(context).get("group_id") or (context.args[0] if context.args else None)
            )
            return replace(ctx, group=f"{ctx.group}{gid}.") if gid else ctx
        if isinstance(context, ast.Name) and context.id in self.dag_vars:
            return replace(ctx, dag=self.dag_vars[context.id])  # dag = DAG(..); with dag: ..
        self._expr(context, ctx)
        return ctx

    def _for(self, stmt: ast.For | ast.AsyncFor, ctx: _Ctx) -> _Ctx:
        """A loop over a literal list (or dict, zip, range...) runs its body once per item, bound."""
        rows = ctx.scope.rows(stmt.iter)
        bindings = [ctx.scope.bind(stmt.target, row) for row in rows] if rows else []
        if rows and all(b is not None for b in bindings):
            for bound in bindings:
                self._body(stmt.body, replace(ctx, scope=ctx.scope.child(bound)))
        else:
            self._expr(stmt.iter, ctx)
            self._body(stmt.body, ctx)
        self._body(stmt.orelse, ctx)
        return ctx

    def _assigned(self, stmt: ast.stmt, ctx: _Ctx) -> _Ctx:
        """Local names bound by an assignment, for the statements after it."""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                return replace(ctx, scope=ctx.scope.child({target.id: Bound(stmt.value, ctx.scope)}))
            if isinstance(target, ast.Tuple):
                bound = ctx.scope.bind(target, Bound(stmt.value, ctx.scope))
                if bound is not None:
                    return replace(ctx, scope=ctx.scope.child(bound))
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            return replace(ctx, scope=ctx.scope.child({stmt.target.id: Bound(stmt.value, ctx.scope)}))
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            grown = ast.copy_location(
                ast.BinOp(left=ast.Name(id=stmt.target.id, ctx=ast.Load()), op=stmt.op, right=stmt.value),
                stmt,
            )
            return replace(ctx, scope=ctx.scope.child({stmt.target.id: Bound(grown, ctx.scope)}))
        return ctx

    def _expr(self, node: ast.expr, ctx: _Ctx) -> None:
        """The calls of an expression, innermost first (a TaskFlow call's arguments before it)."""
        calls = [sub for sub in walk_no_defs(node) if isinstance(sub, ast.Call)]
        for call in calls:  # X.partial(..).expand(..): the mapped call makes the task, not .partial
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _MAPPING_METHODS
                and isinstance(func.value, ast.Call)
            ):
                inner = func.value.func
                if isinstance(inner, ast.Attribute) and inner.attr in ("partial", "override"):
                    self._consumed.add(id(func.value))
        for call in post_order_calls(node):
            if id(call) not in self._consumed:
                self._call(call, ctx)

    def _call(self, call: ast.Call, ctx: _Ctx) -> None:
        kwargs = keywords(call)
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _MAPPING_METHODS
            and isinstance(func.value, ast.Call)
        ):
            inner = func.value
            if isinstance(inner.func, ast.Attribute) and inner.func.attr == "partial":
                if "task_id" in keywords(inner):  # Operator.partial(task_id=..).expand(sql=[...])
                    self._classic(inner, ctx, call, kwargs)
                else:  # fn.partial(..).expand(..)
                    self._taskflow(dotted(inner.func.value), call, ctx, {**keywords(inner), **kwargs}, {})
                return
            if (
                isinstance(inner.func, ast.Attribute) and inner.func.attr == "override"
            ):  # fn.override().expand()
                self._taskflow(dotted(inner.func.value), call, ctx, kwargs, keywords(inner))
                return
        if "task_id" in kwargs and not is_dag_call(call):
            factory = isinstance(func, ast.Name) and self._task_factory(func.id, call, ctx)
            # ``fn.override(task_id=..)(..)``: made with its call
            if last_name(dotted(func)) != "override" and not factory:
                self._classic(call, ctx, call, {})
            return
        # a factory class's method (round 27): one that returns a DAG (Embonor's ``build``), or any
        # inside such a method (its helpers, the task-group classes it calls); no other method call
        method = calls.method_callee(call, ctx.scope, self._chains[-1] if self._chains else None)
        if method is not None and (self._chains or factory_arguments(method[0], call, ctx.scope) is not None):
            self._method_call(method, call, ctx)
            return
        name, overrides = None, {}
        if isinstance(func, ast.Name):
            name = func.id
        elif (
            isinstance(func, ast.Call)
            and isinstance(func.func, ast.Attribute)
            and func.func.attr == "override"
        ):
            name, overrides = dotted(func.func.value), keywords(func)
        elif isinstance(func, ast.Attribute) and func.attr in ("partial", *_MAPPING_METHODS):
            name = dotted(func.value)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            name = dotted(func)  # ``knack.get_date_filter_arg()``: a @task of an imported module
            if name is not None and self._taskflow_entry(name, ctx) is not None:
                self._taskflow(name, call, ctx, kwargs, overrides)
            return
        if name is None:
            return
        if self._taskflow_entry(name, ctx) is not None:
            self._taskflow(name, call, ctx, kwargs, overrides)
            return
        self._function_call(name, call, ctx, overrides)

    def _classic(self, call: ast.Call, ctx: _Ctx, outer: ast.Call, mapped: dict[str, ast.expr]) -> None:
        """A classic operator (``task_id=``), with ``.expand()``'s arguments when it is mapped."""
        kwargs = {**keywords(call), **mapped}
        func = call.func
        operator = (
            dotted(func.value) if isinstance(func, ast.Attribute) and func.attr == "partial" else dotted(func)
        )
        task_id = _text_id(ctx.scope, kwargs["task_id"]) or f"<{ast.unparse(kwargs['task_id'])}>"
        task = TaskDef(
            task_id=ctx.group + task_id,
            dag=self._owner(kwargs, ctx.dag),
            scope=ctx.scope,
            line=call.lineno,
            end_line=outer.end_lineno or outer.lineno,
            operator=last_name(operator),
            kwargs=kwargs,
            mapped=frozenset(mapped),
        )
        callable_ = kwargs.get("python_callable")
        code = task_callable(ctx.scope, callable_, self.follow_callables) if callable_ is not None else None
        if code is not None:
            task.functions.append(code[0])
            task.homes[id(code[0])] = code[1]  # one another module defines is read there
        elif callable_ is None and isinstance(made := _partial_of(func), ast.Name):
            task.classes = operator_classes(ctx.scope, made.id)  # ``Op(..)`` or ``Op.partial(..)``
        self._add(task)

    def _taskflow(
        self,
        name: str,
        call: ast.Call,
        ctx: _Ctx,
        kwargs: dict[str, ast.expr],
        overrides: dict[str, ast.expr],
    ) -> None:
        entry = self._taskflow_entry(name, ctx)
        if entry is None:
            return
        fn, decorator, deco_kwargs, def_scope = entry
        merged = {**deco_kwargs, **overrides}
        explicit = _text_id(ctx.scope, merged.get("task_id")) if "task_id" in merged else None
        base = ctx.group + (explicit or fn.name)
        owner = self._owner(merged, ctx.dag)
        key = (owner.dag_id if owner else None, base)
        count = self.used_ids.get(key, 0)
        self.used_ids[key] = count + 1
        task_id = base if count == 0 else f"{base}__{count}"
        self._outputs[id(call)] = task_id
        inputs = tuple(
            self._outputs[id(arg)]
            for arg in [*call.args, *kwargs.values()]
            if isinstance(arg, ast.Call) and id(arg) in self._outputs
        )
        here = def_scope.source is ctx.scope.source
        # a @task imported from another module: its file is that module, so its line is the def's
        # there (round 18; the call's line named a line of another file)
        line, end = (call.lineno, call.end_lineno) if here else (fn.lineno, fn.end_lineno)
        self._add(
            TaskDef(
                task_id=task_id,
                dag=owner,
                scope=ctx.scope if here else def_scope,
                line=line,
                end_line=end or line,
                operator=f"@{decorator}",
                # positional arguments are the callable's op_args: templated like its keywords
                kwargs={**merged, **kwargs, **({"op_args": ast.List(list(call.args))} if call.args else {})},
                functions=[fn],
                decorator=decorator,
                inputs=inputs,
            )
        )

    def _taskflow_entry(
        self, name: str, ctx: _Ctx
    ) -> tuple[FunctionNode, str, dict[str, ast.expr], Scope] | None:
        """The ``@task`` function `name` calls in DAG code: one defined in this file's walk, or one the
        file imports from the repository (``from utils.knack import get_date_filter_arg``, or
        ``knack.get_date_filter_arg`` of ``from utils import knack``: calling it in a DAG body adds its
        task, as Airflow does); None for any other name."""
        if name in self.taskflow:
            return self.taskflow[name]
        module, _, attr = name.rpartition(".")
        found = ctx.scope.module_function(module, attr) if module else ctx.scope.function(name)
        if found is None or isinstance(found[0], ast.Lambda) or not is_project_file(found[1].source.path):
            return None
        decorated = task_decorator(found[0]) or wrapped_task(found[0], found[1])
        return None if decorated is None else (found[0], decorated[0], decorated[1], found[1])

    def _function_call(self, name: str, call: ast.Call, ctx: _Ctx, overrides: dict[str, ast.expr]) -> None:
        """A call of a ``@task_group`` function or of a task factory: its body, arguments bound."""
        found = ctx.scope.function(name)
        if found is None or ctx.depth >= _MAX_DEPTH:
            return
        fn, def_scope = found
        if id(fn) in self._expanding or not is_project_file(def_scope.source.path):
            return
        if decorator_kwargs(fn, "dag") is not None or task_decorator(fn) is not None:
            return
        group = ctx.group
        group_kwargs = decorator_kwargs(fn, "task_group")
        if group_kwargs is not None:
            merged = {**group_kwargs, **overrides}
            gid = _text_id(ctx.scope, merged.get("group_id")) if "group_id" in merged else fn.name
            group = f"{group}{gid or fn.name}."
        # a factory handed the DAG (``build_task(dag, ..)``) builds its tasks: Airflow 2 attaches an
        # operator made without ``dag=`` to the DAG of the task ``>>`` links it to
        given = (
            self.dag_vars.get(a.id)
            for a in [*call.args, *(k.value for k in call.keywords)]
            if isinstance(a, ast.Name)
        )
        dag = ctx.dag or next((d for d in given if d is not None), None)
        self._run(fn, def_scope, call, replace(ctx, dag=dag, group=group))

    def _task_factory(self, name: str, call: ast.Call, ctx: _Ctx) -> bool:
        """``make_load(task_id="load", ..)``: a repository function (not a class) handed ``task_id``
        is a task factory when its body makes an operator of that id or one built on it (``return
        LoadOperator(task_id=task_id, ..)``, round 35b). Else (no task, or others: a ``DummyOperator``
        fallback beside ``operator(**kwargs)``) what it made is dropped; the call stands as before."""
        wanted = _text_id(ctx.scope, keywords(call).get("task_id"))
        if wanted is None or ctx.scope.class_def(name) is not None or ctx.scope.function(name) is None:
            return False
        counts = [len(d.tasks) for d in self.dags]
        loose, dags, code = len(self.loose), len(self.dags), len(self.dag_code)
        self._function_call(name, call, ctx, {})
        made = [t for d, n in zip(self.dags, counts, strict=False) for t in d.tasks[n:]] + self.loose[loose:]
        if any(t.task_id.startswith(ctx.group + wanted) for t in made):  # or ``f"{task_id}_{i}"``
            return True
        for d, n in zip(self.dags, counts, strict=False):
            del d.tasks[n:]
        del self.loose[loose:], self.dags[dags:], self.dag_code[code:]
        return False

    def _method_call(
        self, method: tuple[FunctionNode, Scope, calls.Chain], call: ast.Call, ctx: _Ctx
    ) -> None:
        fn, def_scope, chain = method
        if id(fn) in self._expanding or ctx.depth >= _MAX_DEPTH or not is_project_file(def_scope.source.path):
            return
        self._chains.append(chain)
        try:
            self._run(fn, def_scope, call, ctx)
        finally:
            self._chains.pop()

    def _owner(self, kwargs: dict[str, ast.expr], dag: DagDef | None) -> DagDef | None:
        ref = kwargs.get("dag")
        if isinstance(ref, ast.Name) and ref.id in self.dag_vars:
            return self.dag_vars[ref.id]
        return dag

    def _add(self, task: TaskDef) -> None:
        if task.dag is not None:
            task.dag.tasks.append(task)
        else:
            self.loose.append(task)


def _partial_of(func: ast.expr) -> ast.expr:
    """The operator class of ``Op.partial(..)`` (mapped), else `func` itself."""
    return func.value if isinstance(func, ast.Attribute) and func.attr == "partial" else func


def _text_id(scope: Scope, node: ast.expr | None) -> str | None:
    """A task or group id as the linter can resolve it (None when part of it is known only at run time)."""
    if node is None:
        return None
    located = scope.string(node)
    if located is not None and not located.unresolved:
        return located.text
    value = scope.literal(node)
    return value if isinstance(value, str) else None
