"""A DAG call's arguments, dicts unpacked into it included.

``DAG(id, schedule=.., **dag_args)`` takes ``start_date``, ``catchup`` and the rest from the dict
``dag_args``, exactly as if they were written as keywords: a factory that builds its DAGs from a
shared ``dag_args`` (or ``**DEFAULTS``) passes a clock-based ``start_date`` on to every DAG it
builds. A mapping the linter cannot read (a parameter, a loaded config) adds nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Protocol, TypeVar

from airflow_idempotent.lint.scope import FunctionNode, Scope
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["factory_arguments", "is_dag_call", "taking_dag", "taking_params", "unpacked_kwargs"]


def unpacked_kwargs(call: ast.Call, scope: Scope) -> dict[str, ast.expr]:
    """`call`'s keyword arguments by name, with the entries of every ``**mapping`` whose dict the
    scope can read (the written keywords win, as Python would refuse a duplicate anyway)."""
    out: dict[str, ast.expr] = {}
    for kw in call.keywords:
        if kw.arg is None:
            for key, value in scope.mapping(kw.value).items():
                out.setdefault(key, value)
    out.update({kw.arg: kw.value for kw in call.keywords if kw.arg is not None})
    return out


def is_dag_call(node: ast.AST) -> bool:
    """``DAG(..)``, ``models.DAG(..)``, ``airflow.DAG(..)``."""
    return isinstance(node, ast.Call) and last_name(dotted(node.func)) == "DAG"


def factory_arguments(
    fn: FunctionNode, call: ast.Call, caller: Scope
) -> tuple[dict[str, ast.expr], dict[str, ast.expr]] | None:
    """`call` of `fn` when `fn` is a DAG factory (it returns ``DAG(..)``, directly or by a name):
    its parameters' defaults named like the DAG's arguments (``catchup``, ``schedule_interval``,
    ``start_date``, ``retries``...), which the call's own keywords override, and what the factory's
    own ``DAG(..)`` sets, which nothing overrides (`_made_keywords`); None for any other function."""
    returns = [s.value for s in ast.walk(fn) if isinstance(s, ast.Return) and s.value is not None]
    made = {
        n.id
        for s in ast.walk(fn)
        if isinstance(s, ast.Assign) and is_dag_call(s.value)
        for n in s.targets
        if isinstance(n, ast.Name)
    }
    made.update(  # ``with DAG(..) as dag: ..`` then ``return dag`` (Embonor's factory, round 27)
        item.optional_vars.id
        for s in ast.walk(fn)
        if isinstance(s, ast.With)
        for item in s.items
        if is_dag_call(item.context_expr) and isinstance(item.optional_vars, ast.Name)
    )
    if not any(is_dag_call(r) or (isinstance(r, ast.Name) and r.id in made) for r in returns):
        return None
    args = fn.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    defaults = dict(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    defaults.update(
        (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    )
    dag_call = next(
        (
            s.value
            for s in ast.walk(fn)
            if isinstance(s, ast.Assign | ast.Return) and s.value is not None and is_dag_call(s.value)
        ),
        None,
    )
    fixed = _made_keywords(fn, dag_call, call, caller, defaults) if isinstance(dag_call, ast.Call) else {}
    return defaults, fixed


def _made_keywords(
    fn: FunctionNode, made: ast.Call, call: ast.Call, caller: Scope, defaults: dict[str, ast.expr]
) -> dict[str, ast.expr]:
    """The keywords the factory's own ``DAG(..)`` (`made`) sets, as `call` gives them: a constant as
    written (``catchup=False``: blockchain-etl's factories, round 20); a parameter of the factory as
    the call binds it (its argument, else its default). A parameter the call may set through a
    ``**mapping`` the linter cannot read is unknown (a name that never resolves): the DAG's argument
    is then neither taken as missing nor guessed."""
    args = fn.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    params = {*positional, *(a.arg for a in args.kwonlyargs)}
    given: dict[str, ast.expr] = {}
    if not any(isinstance(a, ast.Starred) for a in call.args):
        given.update(zip(positional, call.args, strict=False))
    given.update(unpacked_kwargs(call, caller))
    opaque = any(kw.arg is None and not caller.mapping(kw.value) for kw in call.keywords)
    out: dict[str, ast.expr] = {}
    for kw in made.keywords:
        if kw.arg is None:
            continue
        if isinstance(kw.value, ast.Constant):
            out[kw.arg] = kw.value
        elif isinstance(kw.value, ast.Name) and kw.value.id in params:
            name = kw.value.id
            if name in given:
                out[kw.arg] = given[name]
            elif opaque:
                out[kw.arg] = ast.copy_location(ast.Name(id=f"<factory parameter {name}>"), kw.value)
            elif name in defaults:
                out[kw.arg] = defaults[name]
        elif kw.arg == "default_args" and isinstance(kw.value, ast.Name):
            written = _local_dict(fn, kw.value.id, params)
            if written is not None:
                out[kw.arg] = written
    return out


def _local_dict(fn: FunctionNode, name: str, params: set[str]) -> ast.Dict | None:
    """The dict literal the factory assigns to `name` once (``default_dag_args = {'start_date':
    pendulum.today(tz='UTC'), ..}``, round 41's solana-etl-airflow), with the entries written as they
    are: those that read a parameter of the factory (``{'retries': retries}``, bound by the call and
    taken from it elsewhere) and later additions (``default_dag_args['email'] = ..``) left out."""
    found = [
        s.value
        for s in ast.walk(fn)
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)
    ]
    if len(found) != 1 or not isinstance(found[0], ast.Dict):
        return None
    kept = [
        (k, v)
        for k, v in zip(found[0].keys, found[0].values, strict=True)
        if k is not None and not any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(v))
    ]
    return ast.copy_location(ast.Dict(keys=[k for k, _ in kept], values=[v for _, v in kept]), found[0])


class _Dag(Protocol):
    kwargs: dict[str, ast.expr]


D = TypeVar("D", bound=_Dag)


def taking_dag(node: ast.AST, dags: Sequence[D]) -> D | None:
    """The DAG whose ``start_date``/``end_date`` argument holds `node` (a clock read in a module-level
    ``dag_args = {"start_date": ..}`` that ``DAG(.., **dag_args)`` unpacks): that DAG's own start."""
    for dag in dags:
        for key in ("start_date", "end_date"):
            given = dag.kwargs.get(key)
            if given is not None and any(sub is node for sub in ast.walk(given)):
                return dag
    return None


def taking_params(node: ast.AST, dags: Sequence[D], scope: Scope) -> D | None:
    """The DAG whose ``params`` holds `node` (a clock read in a ``Param`` default) outside its call:
    ``dag_params = {"month": Param(today() - 1 month)}`` handed on as ``params=dag_params`` or in
    ``dag_config = {"params": dag_params}`` that ``@dag(**dag_config)`` unpacks (round 28, orca's
    scheduled DAGs): that DAG's scheduled runs take the default as their window."""
    for dag in dags:
        given = dag.kwargs.get("params")
        if given is None:
            continue
        values = [given, *scope.mapping(given).values()]  # a name's dict, a dict's ``**other`` entries
        if any(sub is node for value in values for sub in ast.walk(value)):
            return dag
    return None
