"""Checks of the code a task runs: its Python (TaskFlow, python_callable), bash command and arguments,
and the DAG file's own code (module level, ``@dag`` bodies, task factories).

Python is read from its syntax tree (`pyfacts`), never run. A clock read counts when its value is
used (written, returned, stored, deciding what is read): not when it is only logged, never read,
a UI ``Param`` default or a sensor's ``target_time``. SQL strings the code passes to
``execute``/``run`` and what ``@task.sql`` returns go through `sqlchecks.check_sql`.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.collect import Collector
from airflow_idempotent.lint.contextparams import callable_params, run_parameters
from airflow_idempotent.lint.dagargs import taking_dag, taking_params
from airflow_idempotent.lint.decorators import builds_task
from airflow_idempotent.lint.dispatch import constructor_values, dead_nodes, self_binding
from airflow_idempotent.lint.docstamps import document_stamp, query_marks
from airflow_idempotent.lint.facts import (
    CONTEXT_FETCH,
    RUN_NAMES,
    SUBSCRIPT_TEXT,
    Effect,
    Stamp,
    StateUse,
    WindowRef,
    Write,
)
from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.gates import GATE_TEXT, PRINTED_TEXT, flag_only, gates_only, returned_for_output
from airflow_idempotent.lint.instances import callable_bindings, object_method, own_method
from airflow_idempotent.lint.instances import instances as own_instances
from airflow_idempotent.lint.lastsuccess import check_last_success
from airflow_idempotent.lint.localvalues import value_at, with_locals
from airflow_idempotent.lint.lookups import (
    Lookup,
    absent_after_lookup,
    inserted_when_absent,
    key_filtered,
    skipped_keys,
)
from airflow_idempotent.lint.macros import in_macros
from airflow_idempotent.lint.notices import repeat_is_safe
from airflow_idempotent.lint.ormwrites import orm_write
from airflow_idempotent.lint.pyfacts import (
    PARAM_CONTEXT,
    SIDE_EFFECT_CALLS,
    SQL_METHODS,
    START_DATE_CONTEXT,
    clock_call,
    clock_owner_purpose,
    clock_use,
    context_of,
    keyed,
    looks_like_sql,
    param_fallback,
    parents,
)
from airflow_idempotent.lint.reads import changes_nothing
from airflow_idempotent.lint.records import archived, own_record
from airflow_idempotent.lint.resubmit import triggers_keyed_run
from airflow_idempotent.lint.rowuse import rows_shown_only
from airflow_idempotent.lint.rowwrites import (
    append_mode,
    client_append,
    python_write,
    refused_by_key,
    spark_write,
)
from airflow_idempotent.lint.schedule import runs_on_schedule, windowless_factory
from airflow_idempotent.lint.scope import Scope, bind_arguments, method_of, self_method
from airflow_idempotent.lint.sendtargets import target_text, to_the_data
from airflow_idempotent.lint.source import Located
from airflow_idempotent.lint.sqlchecks import check_jinja, check_sql
from airflow_idempotent.lint.sqltext import prepare_sql
from airflow_idempotent.lint.startdates import start_date_taker
from airflow_idempotent.lint.syntax import (
    dotted,
    in_loop,
    last_name,
    main_guard,
    walk_no_defs,
)
from airflow_idempotent.lint.transfers import ROW_WRITES
from airflow_idempotent.lint.uidefaults import only_manual_params

__all__ = [
    "check_bash",
    "check_call_args_clock",
    "check_code",
    "check_dag_code_clock",
    "clock_helper",
]

#: Sensor arguments that name the moment to wait for: a clock there is the point, not a window.
_SENSOR_TARGETS = frozenset({"target_time", "target_datetime", "moment", "delta"})


def check_code(check: TaskCheck) -> None:
    """The task's Python functions (and the functions they call in the same file, arguments bound):
    clock reads, SQL passed to hooks and cursors, DataFrame/hook writes, side effects and their keys,
    state kept across runs (Variables, asset state)."""
    task, facts = check.task, check.facts
    execute = method_of(task.classes, "execute")  # a custom operator's (customops.operator_classes)
    if not task.functions and execute is None:
        return
    facts.saw_code = True
    seen: set[int] = set()
    queue: list[tuple[ast.AST, Scope]] = [
        (fn, task.homes.get(id(fn), task.scope).child(callable_bindings(task, fn))) for fn in task.functions
    ]
    own_self = self_binding(task) if task.classes else {}  # ``self.table``: the task's ``table=``
    if execute is not None:
        queue.append(
            (execute[0], execute[1].child({**dict.fromkeys(callable_params(execute[0]), ()), **own_self}))
        )
    decorator = task.decorator or ""
    callers: dict[int, list[tuple[ast.Call, ast.AST]]] = {}  # helper -> its calls, with the caller
    guards: dict[int, list[Lookup | None]] = {}  # `lookups`: helper -> each call's
    values = constructor_values(task) if task.classes else {}  # `dispatch`: branches it never runs
    methods = {id(m) for cls, _ in task.classes for m in cls.body}
    key_tested: frozenset[str] = frozenset()  # `lookups.skipped_keys`: tables whose keys a row filter tests
    absent: list[Write] = []  # `lookups`: inserts run only when a lookup of their table found no row
    while queue:
        fn, scope = queue.pop(0)
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        file = scope.source.display  # a helper or custom operator of another module is read there
        start, guard = len(facts.writes), guards.get(id(fn), [None])
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            run = run_parameters(fn)
            if run:
                facts.windows.append(WindowRef("run", f"The run's context: {', '.join(run)} in its code."))
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            check_last_success(check, fn, file, f"{fn.name}()" if hasattr(fn, "name") else "its code")
        dead = dead_nodes(fn, values) if id(fn) in methods else set()
        scope = with_locals(fn, scope, dead)
        instances = own_instances(fn)
        parent_of = parents(fn)
        states = _state_names(fn)
        key_tested |= skipped_keys(fn, scope)
        for node in ast.walk(fn):
            if id(node) in dead:
                continue
            if isinstance(node, ast.Name) and node.id == "get_current_context":
                facts.windows.append(WindowRef("run", CONTEXT_FETCH))
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in RUN_NAMES
            ):
                key = node.slice.value
                facts.windows.append(WindowRef("run", f"{SUBSCRIPT_TEXT}{key!r}] in its code."))
            facts.marks.extend(query_marks(node))
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func)
            made = object_method(node, scope)  # `instances`: a method of an object the code makes
            followed: tuple[ast.AST, Scope] | None = None  # the repository's own function the call runs
            if isinstance(node.func, ast.Name):
                found = scope.function(node.func.id)
                if found is not None and (found[1].source is scope.source or _own_module(found[1])):
                    helper, def_scope = found
                    followed = (helper, def_scope)
                    callers.setdefault(id(helper), []).append((node, fn))
                    guards.setdefault(id(helper), []).append(absent_after_lookup(node, fn, parent_of, scope))
                    queue.append((helper, def_scope.child(bind_arguments(helper, node, scope, def_scope))))
            elif made is not None:
                queue.append(made)
                continue  # the repository's own method, not a library's of the same name
            elif (own := self_method(node.func, task.classes)) is not None:
                # ``self.upload(..)`` in a custom operator's execute: its class's (or a base's) method
                queue.append(
                    (own[0], own[1].child({**dict.fromkeys(callable_params(own[0]), ()), **own_self}))
                )
            elif (bound_method := own_method(node.func, scope, instances)) is not None:
                # a method of the repository's own class: ``STAClient(host).add_observations(..)``
                queue.append(bound_method)
            elif (module_fn := _module_function(node.func, scope)) is not None:
                followed = module_fn
                queue.append(
                    (
                        module_fn[0],
                        module_fn[1].child(bind_arguments(module_fn[0], node, scope, module_fn[1])),
                    )
                )
            clock = clock_call(node, scope)
            if clock is not None:
                use = clock_use(node, fn, parent_of)
                if use in ("used", "relative") and param_fallback(node, parent_of):
                    check.info(
                        "IDEM004" if use == "relative" else "IDEM003",
                        file,
                        node.lineno,
                        f"{clock} in its code is only the fallback when the run's params or conf name "
                        "no value: a rerun with the value given reads the same window",
                    )
                elif use in ("used", "relative") and (purpose := clock_owner_purpose(fn)) is not None:
                    check.info(
                        "IDEM004" if use == "relative" else "IDEM003",
                        file,
                        node.lineno,
                        f"{clock} in {getattr(fn, 'name', 'its code')}() "
                        + (
                            "is a retention cutoff (the function cleans up or expires what is older): a "
                            "late run removes as much, and what one run leaves the next one takes"
                            if purpose == "retention"
                            else "only dates a chat message or e-mail: a rerun sends it about another "
                            "day, and writes nothing"
                        ),
                    )
                elif use == "relative" and gates_only(node, fn, parent_of, callers.get(id(fn))):
                    check.info("IDEM004", file, node.lineno, f"{clock} in {_name(fn)}() {GATE_TEXT}")
                elif use == "used" and returned_for_output(node, parent_of, callers.get(id(fn))):
                    check.info("IDEM003", file, node.lineno, f"{clock} in {_name(fn)}() {PRINTED_TEXT}")
                elif use == "label":
                    check.info("IDEM003", file, node.lineno, f"{clock} in its code {_LABEL_TEXT}")
                elif use == "rendered":
                    check.info("IDEM004", file, node.lineno, f"{clock} in its code {_RENDERED_TEXT}")
                elif use == "stamp":
                    check.info(
                        "IDEM003",
                        file,
                        node.lineno,
                        f"{clock} in its code only stamps the record the task returns (a named field of "
                        "it): a rerun returns it with a later stamp, and no id, path, filter or state comes "
                        "from it",
                    )
                elif use == "used" and (why := own_record(node, fn, parent_of) or archived(fn)):
                    check.info("IDEM003", file, node.lineno, f"{clock} in {_name(fn)}() {why}")
                elif use == "used" and (field := document_stamp(node, fn, parent_of, callers.get(id(fn)))):
                    facts.document_stamps.append(Stamp(field, (), file, node.lineno, clock))
                elif use in ("used", "relative") and context_of(node, parent_of) != PARAM_CONTEXT:
                    check.clock_read(clock, (file, node.lineno), "its code", use == "relative")
                continue
            if _state_use(check, node, states, fn, parent_of, file):
                continue
            if orm_write(facts, node, scope, parent_of, file, check.conn):
                continue  # SQLAlchemy ``insert(Model)`` / ``session.add(Model(..))`` (`ormwrites`)
            method = last_name(name)
            if method in SQL_METHODS and (node.args or any(k.arg == "sql" for k in node.keywords)):
                arg = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "sql")
                before = len(facts.writes)
                shown = rows_shown_only(node, fn, parent_of)
                for located in value_at(fn, arg, node, scope).strings(arg):
                    if looks_like_sql(located.text):
                        check_sql(check, located, project=False, shown_only=shown)
                refused_by_key(check, facts.writes[before:], node, parent_of)
                absent += inserted_when_absent(
                    facts.writes[before:], absent_after_lookup(node, fn, parent_of, scope)
                )
                continue
            if method in ROW_WRITES:
                python_write(check, node, method, scope, file)
                continue
            if spark_write(check, node, scope, file):
                continue  # ``df.write.mode("append").jdbc(..)`` (a submitted script's: `sparkapps`)
            if (mode := append_mode(node)) is not None:
                client_append(check, node, name, mode, scope, file)
                continue
            if method in SIDE_EFFECT_CALLS and isinstance(node.func, ast.Attribute | ast.Name):
                if method in ("post", "put", "patch") and not isinstance(node.func, ast.Attribute):
                    continue
                if changes_nothing(node, method, fn, scope):
                    continue  # `reads`: a read sent by POST, a whole object PUT to its key
                if followed is not None and _sends(*followed):
                    continue  # the repository's own ``send_email(..)``: its send is where it is spelled
                again = repeat_is_safe(node, method, fn, scope)
                what = f"{SIDE_EFFECT_CALLS[method]} ({name}(...))"
                has_key = keyed(node) or (method == "post" and triggers_keyed_run(node, fn, scope))
                target = target_text(node, fn)
                looped = in_loop(node, parent_of) or (method not in _HTTP_VERBS and to_the_data(node, fn))
                facts.effects.append(Effect(what, has_key, file, node.lineno, again, False, target, looped))
        if guard[0] is not None and guard.count(guard[0]) == len(guard):  # every call is guarded
            absent += inserted_when_absent(facts.writes[start:], guard[0])
        if decorator in ("task.sql", "task.bash") and isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
                returned = scope.string(ret.value)
                if returned is None:
                    continue
                if decorator == "task.sql":
                    check_sql(check, returned, project=False)
                else:
                    check_bash(check, returned)
    for w in [*absent, *key_filtered(facts.writes, key_tested)]:
        check.info("IDEM002", w.file, w.line, f"{w.detail}: a rerun finds the row and adds none")
    if not facts.writes and not facts.effects and facts.opaque is None:
        facts.opaque = "its Python code"


_HTTP_VERBS = frozenset({"post", "put", "patch"})


def _name(fn: ast.AST) -> str:
    return getattr(fn, "name", "its code")


def _state_names(fn: ast.AST) -> set[str]:
    """Local names holding an asset's state store (``state = asset_state_store[ASSET]``)."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Subscript)
            and dotted(node.value.value) == "asset_state_store"
        ):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _state_use(
    check: TaskCheck,
    node: ast.Call,
    states: set[str],
    fn: ast.AST,
    parent_of: dict[ast.AST, ast.AST],
    file: str,
) -> bool:
    """``Variable.get/set(key)`` and an asset state's ``.get/.set(key)``: state kept across runs."""
    func = node.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("get", "set") or not node.args:
        return False
    owner = dotted(func.value)
    if last_name(owner) == "Variable":
        kind = "variable"
    elif owner in states or owner.startswith("asset_state_store"):
        kind = "asset"
    else:
        return False
    key = check.task.scope.literal(node.args[0])
    if not isinstance(key, str):
        return True
    use = StateUse(kind, key, file, node.lineno)
    if func.attr == "set":
        check.facts.state_saves.append(use)
    elif not flag_only(node, parent_of) and clock_use(node, fn, parent_of) in ("used", "relative", "stamp"):
        check.facts.state_reads.append(use)
    return True


def _module_function(
    func: ast.expr, scope: Scope
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, Scope] | None:
    """The function a call ``module.name(..)`` runs when ``module`` is one of the repository's own
    modules (``import functions as functions_2``; ``functions_2.execute_Query(sql, ..)``).

    Principle: a task's code is what it runs, wherever the repository keeps it; a function of the
    repository's own module is followed with the call's arguments bound, whether it is called by its
    imported name (``execute_query(..)``) or through its module (``functions.execute_query(..)``), so
    the ``DELETE`` a task sends through a helper counts as the task's. Installed libraries are never
    followed."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    if func.value.id in scope.locals:
        return None  # a local bound to something else (a loop item, an argument)
    found = scope.module_function(func.value.id, func.attr)
    if found is None or not _own_module(found[1]):
        return None
    return found


def _own_module(scope: Scope) -> bool:
    """A module of the linted repository (followed into), not an installed package (never)."""
    parts = scope.source.path.parts
    return "site-packages" not in parts and "dist-packages" not in parts


def check_bash(check: TaskCheck, bash: Located) -> None:
    """A bash command: its templates, and ``$(date ...)`` (IDEM003; IDEM004 when shifted)."""
    check.facts.opaque = check.facts.opaque or "its bash command"
    check_jinja(check, prepare_sql(bash.text), bash, "its bash command")
    for match in re.finditer(r"\$\(\s*date\b([^)]*)\)|`\s*date\b([^`]*)`", bash.text):
        args = match.group(1) or match.group(2) or ""
        if "{{" in args:
            continue
        relative = re.search(r"(-d|--date)\b.*(ago|yesterday|tomorrow|hour|day|week|month)", args)
        check.clock_read(f"$(date{args})", bash.place(match.start()), "its bash command", bool(relative))


def check_call_args_clock(check: TaskCheck) -> None:
    """Clock reads inside the task's own arguments (evaluated when the DAG file is parsed)."""
    task, file = check.task, check.file
    sensor = task.operator.endswith("Sensor") or task.operator.endswith("SensorAsync")
    for name, value in task.kwargs.items():
        if isinstance(value, ast.Lambda) or (sensor and name in _SENSOR_TARGETS):
            continue
        holder = ast.Expr(value=value)
        parent_of = parents(holder)
        for node in walk_no_defs(value):
            if not isinstance(node, ast.Call) or (clock := clock_call(node, task.scope)) is None:
                continue
            context = PARAM_CONTEXT if name == "params" else context_of(node, parent_of)
            if context == PARAM_CONTEXT or clock_use(node, holder, parent_of) == "output":
                continue
            if context == START_DATE_CONTEXT or name in ("start_date", "end_date"):
                check.facts.windows.append(
                    check.recorder.clock_read(
                        task,
                        clock,
                        (file, node.lineno),
                        check.anchors,
                        "its arguments",
                        False,
                        start_date=True,
                    )
                )
                continue
            relative = clock_use(node, holder, parent_of) == "relative"
            check.clock_read(clock, (file, node.lineno), "its arguments", relative)


def check_dag_code_clock(recorder: Recorder, scope: Scope, collector: Collector) -> None:
    """Clock reads in the DAG file's own code (module level, DAG arguments, ``@dag`` bodies, task
    factories), outside any task's arguments or code: IDEM003 (a clock-based ``start_date`` too),
    IDEM004 when shifted by a span; not when only logged, never read, or a ``Param`` default."""
    tasks = [*collector.loose, *(t for d in collector.dags for t in d.tasks)]
    spans = [(t.line, t.end_line) for t in tasks if t.scope.source is scope.source]
    file = scope.source.display
    bodies: list[tuple[ast.AST, list[ast.AST]]] = []
    module_roots: list[ast.AST] = []
    for stmt in scope.tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            module_roots.extend(stmt.decorator_list)
        elif not main_guard(stmt):
            module_roots.append(stmt)
    bodies.append((scope.tree, module_roots))
    for fn, fn_scope in collector.dag_code:
        if fn_scope.source is scope.source:
            bodies.append(
                (fn, [s for s in fn.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)])
            )
    seen: set[int] = set()
    for body, roots in bodies:
        parent_of = parents(body)
        for root in roots:
            for node in walk_no_defs(root):
                if not isinstance(node, ast.Call) or id(node) in seen:
                    continue
                name = clock_call(node, scope)
                shifted = False
                helper = None
                if name is None and (helper := clock_helper(node, scope)) is not None:
                    name, shifted = helper
                    if context_of(node, parent_of) == START_DATE_CONTEXT:
                        continue  # startdates.check_start_date_helpers
                if name is None:
                    continue
                seen.add(id(node))
                if any(first <= node.lineno <= last for first, last in spans) or in_macros(node, parent_of):
                    continue  # a task's own, or a macro: judged where its templates use it (`macros`)
                context = context_of(node, parent_of)
                if context == START_DATE_CONTEXT and not _dag_start(node, parent_of, collector):
                    context = None  # a module variable named start_date that is a report's window
                use = clock_use(node, body, parent_of)
                dag = next((d for d in collector.dags if d.line <= node.lineno <= d.end_line), None)
                taker = start_date_taker(node, parent_of, collector) if context is None else None
                if taker is not None and dag is None:
                    context, dag = START_DATE_CONTEXT, taker  # a variable only given as start_date
                if context == PARAM_CONTEXT and dag is None:
                    dag = taking_params(node, collector.dags, scope)  # params=dag_params, **dag_config
                # a params default is the window of every scheduled run (round 26: pass Culture's
                # `updated_since` = today - 1 on a daily DAG); on a DAG run by hand, a UI default
                if context == PARAM_CONTEXT and (dag is None or not runs_on_schedule(dag)):
                    continue
                if context is None and dag is None and only_manual_params(node, body, parent_of, collector):
                    continue  # a variable only a hand-run DAG's params default takes: the mirror of the above
                if context in (PARAM_CONTEXT, None) and use in ("output", "unused"):
                    continue
                use = "used" if use == "stamp" else use  # a stamp is judged in a task's code only
                use = "relative" if shifted and use == "used" else use
                if helper is not None and windowless_factory(node, scope):
                    recorder.info(
                        "IDEM003",
                        file,
                        node.lineno,
                        f"{name} builds DAGs whose schedule creates no windows (None or @once), and "
                        "reads the clock only for their start_date, which then creates no windows",
                    )
                    continue
                if use == "rendered" and context is None:
                    recorder.info(
                        "IDEM004", file, node.lineno, f"{name} in module-level code {_RENDERED_TEXT}"
                    )
                    continue
                if use == "label" and context is None:
                    recorder.info(
                        "IDEM003",
                        file,
                        node.lineno,
                        f"{name} in module-level code {_LABEL_TEXT}",
                        dag_id=dag.dag_id if dag is not None else None,
                    )
                    continue
                if context == START_DATE_CONTEXT and dag is None and collector.dags:
                    dag = taking_dag(node, collector.dags)  # DAG(.., **dag_args): its own start_date
                    if dag is None and all(d.kwargs.get("start_date") is not None for d in collector.dags):
                        continue  # default_args' start_date: every DAG of the file sets its own
                    if dag is None and len(collector.dags) == 1:
                        dag = collector.dags[0]  # its default_args
                where = "the DAG's arguments" if dag is not None else "module-level code"
                if context == PARAM_CONTEXT:
                    where = "a default of the DAG's params, which its scheduled runs take"
                anchors = ((file, dag.line),) if dag is not None else ()
                recorder.clock_read(
                    dag,
                    name,
                    (file, node.lineno),
                    anchors,
                    where,
                    use == "relative",
                    start_date=context == START_DATE_CONTEXT,
                    through=dotted(node.func) if helper is not None else None,
                )


_LABEL_TEXT = (
    "only becomes text that names a file or titles an e-mail or report (strftime into a file name, a "
    "backup table's name, a subject, a heading): a rerun names its output differently, no data depends on it"
)


_RENDERED_TEXT = (
    "is shifted by a span, but only rendered into a template (a generated file, such as a generated "
    "DAG's start_date): no data is read over that span; the generated file is linted on its own"
)


def _dag_start(node: ast.AST, parents_of: dict[ast.AST, ast.AST], collector: Collector) -> bool:
    """A clock read in a ``start_date``/``end_date`` context is a DAG's: an argument or default_args
    entry, or a variable (``start_date = days_ago(1)``) that some DAG of the file takes by name; not
    a module variable only passed on as the run's ``params`` (ilri: ``start_date = today() - 1 day``
    in ``params={'start_date': start_date}``, the report's window)."""
    stmt = node
    while stmt in parents_of and not isinstance(stmt, ast.stmt):
        stmt = parents_of[stmt]
        if isinstance(stmt, ast.keyword | ast.Dict):
            return True  # a keyword or dict entry (start_date=.., {'start_date': ..}): the DAG's own
    if not isinstance(stmt, ast.Assign):
        return True
    names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    for dag in collector.dags:
        for key in ("start_date", "end_date"):
            for given in (dag.kwargs.get(key), dag.default_args.get(key)):
                if isinstance(given, ast.Name) and given.id in names:
                    return True
    return not collector.dags


def clock_helper(call: ast.Call, scope: Scope) -> tuple[str, bool] | None:
    """A call of a function of the repository (this file or a module it imports from) that returns a
    value computed from the clock (``periode = get_periode()`` whose body reads ``date.today()``):
    the name to report (``get_periode() (which calls date.today())``) and whether the clock is
    shifted by a span in it (a relative window). None for other calls."""
    if not isinstance(call.func, ast.Name):
        return None
    found = scope.function(call.func.id)
    if (
        found is None
        or isinstance(found[0], ast.Lambda)
        or not _own_module(found[1])
        or builds_task(found[0])
    ):
        return None  # calling a @task function in a DAG body builds a task; nothing runs at parse time
    fn, fn_scope = found
    # not inside functions it defines: their bodies run only when called (a ``@dag`` function's
    # ``@task`` bodies run in the task, never when the module calls the ``@dag`` function)
    if not any(isinstance(n, ast.Return) and n.value is not None for n in _own_nodes(fn)):
        return None
    fn_parents = parents(fn)
    # its body and defaults (a default's value flows into the call), not its decorators: they ran
    # when the module defined it (``@dag(params={"day": Param(f"{date.today()}")})``, judged there)
    for node in (n for part in [*_own_statements(fn), fn.args] for n in walk_no_defs(part)):
        if isinstance(node, ast.Call) and (inner := clock_call(node, fn_scope)) is not None:
            use = clock_use(node, fn, fn_parents)
            if use in ("used", "relative", "stamp"):
                return f"{call.func.id}() (which calls {inner})", use == "relative"
    return None


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _own_statements(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """`fn`'s statements but the functions and classes it defines."""
    return [stmt for stmt in fn.body if not isinstance(stmt, _DEFS)]


def _own_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The nodes of `fn`'s body, not of the functions, lambdas or classes it defines."""
    return [n for stmt in _own_statements(fn) for n in walk_no_defs(stmt)]


def _sends(helper: ast.AST, scope: Scope, depth: int = 0) -> bool:
    """Principle (round 33, a partner-report e-mail): a call of the repository's own function named
    like a send (``send_email(..)``) whose body spells a send itself (``client.send_email(..)``),
    directly or through the repository's functions it calls (``send_email_ses(..)``), is that one
    send, read through: it is reported where the send is spelled, not twice."""
    for node in ast.walk(helper):
        if not isinstance(node, ast.Call):
            continue
        method = last_name(dotted(node.func))
        own = scope.function(node.func.id) if isinstance(node.func, ast.Name) else None
        if own is not None and (own[1].source is scope.source or _own_module(own[1])):
            if own[0] is not helper and depth < 3 and _sends(own[0], own[1], depth + 1):
                return True  # the repository's own function it calls sends
        elif method in SIDE_EFFECT_CALLS and (isinstance(node.func, ast.Attribute) or method not in _VERBS):
            return True
    return False


_VERBS = frozenset({"post", "put", "patch"})  # a bare ``post(..)`` is nobody's HTTP request
