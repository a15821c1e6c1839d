"""Module scopes: a Python file's constants, functions and imports, resolved without running anything.

A `Workspace` reads each file once and parses it once; a `Scope` follows a name to its value: a
module constant (also across ``from x import NAME`` into other files), or, in a child scope, a loop
variable or a function's argument bound at the call that made a task (`Scope.child`). Strings are
evaluated with the place of every piece (`Located`); a value only known at run time becomes a name
standing for it (`source.UNRESOLVED`), never a guess.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from airflow_idempotent.lint.configfiles import loaded_config
from airflow_idempotent.lint.filereads import file_read_return
from airflow_idempotent.lint.pysyntax import parse_module
from airflow_idempotent.lint.source import Located, Source, is_project_file, module_path, root_relative
from airflow_idempotent.lint.syntax import dotted, keywords
from airflow_idempotent.lint.texts import text_of

__all__ = [
    "Bound",
    "FunctionNode",
    "Row",
    "Scope",
    "Workspace",
    "bind_arguments",
    "method_of",
    "parameters",
    "self_method",
]

#: The most loop iterations (or list items) unrolled when a loop makes tasks.
MAX_ROWS = 64
#: re-exports followed from an imported name to the module that defines it (`Scope.defining`)
_MAX_REEXPORTS = 4
_ENV_CALLS = frozenset({"os.getenv", "getenv", "os.environ.get", "environ.get"})


class Workspace:
    """Every file one lint run has read, and the scope of every Python file among them."""

    def __init__(self) -> None:
        self.sources: dict[Path, Source] = {}
        self.scopes: dict[Path, Scope | None] = {}
        #: the folders linted (a file argument's folder), which messages name other files from
        self.roots: list[Path] = []

    def source(self, path: Path) -> Source | None:
        """The file's text (read once); None when it cannot be read. A UTF-8 byte-order mark is no
        text: Python and Airflow skip it, so a DAG file that opens with one is read, not a syntax error."""
        path = path.resolve()
        if path not in self.sources:
            try:
                self.sources[path] = Source(path, path.read_text(encoding="utf-8-sig", errors="replace"))
            except OSError:
                return None
            self.sources[path].named = root_relative(path, self.roots)
        return self.sources[path]

    def scope(self, path: Path) -> Scope | None:
        """The file's module scope (parsed once, with the newest grammar); None when it is not Python."""
        path = path.resolve()
        if path not in self.scopes:
            self.scopes[path] = None
            src = self.source(path)
            if src is not None:
                with contextlib.suppress(SyntaxError, ValueError, RecursionError):
                    self.scopes[path] = Scope(self, src, parse_module(src.text, str(path)).tree)
        return self.scopes[path]

    def module_scope(self, module: str, level: int, importer: Path) -> Scope | None:
        """The scope of an imported module of the DAG's project, found on disk (never imported); None
        for an installed library's (its names are not the DAG's constants)."""
        path = module_path(module, level, importer)
        return self.scope(path) if path is not None and is_project_file(path.resolve()) else None


@dataclass(frozen=True)
class Bound:
    """An expression and the scope it is read in (a loop item, an argument at a call site)."""

    expr: ast.expr
    scope: Scope


Row: TypeAlias = "Bound | tuple[Row, ...]"
"""One item a loop yields: an expression, or a tuple of them (``for k, v in D.items()``)."""

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class Scope:
    """The module-level names of one Python file, and (in a child) the local names bound so far."""

    def __init__(self, workspace: Workspace, source: Source, tree: ast.Module) -> None:
        self.workspace = workspace
        self.source = source
        self.tree = tree
        self.root = self
        self.assigns: dict[str, ast.expr] = {}
        self.functions: dict[str, FunctionNode] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.imports: dict[str, tuple[str, str | None, int]] = {}
        self.locals: dict[str, Row] = {}
        for stmt in tree.body:
            self._collect(stmt)

    def _collect(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    self.assigns[target.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            self.assigns[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self.functions[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef):
            self.classes[stmt.name] = stmt
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                self.imports[alias.asname or alias.name] = (stmt.module or "", alias.name, stmt.level)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                self.imports[local] = (alias.name if alias.asname else local, None, 0)
        elif isinstance(stmt, ast.If | ast.Try | ast.With):
            for sub in [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]:
                self._collect(sub)

    def child(
        self, bindings: dict[str, Row] | None = None, functions: dict[str, FunctionNode] | None = None
    ) -> Scope:
        """A scope that also knows local names: loop variables, a factory's arguments, local defs."""
        inner = copy.copy(self)
        inner.locals = {**self.locals, **(bindings or {})}
        inner.functions = {**self.functions, **(functions or {})}
        return inner

    def function(self, name: str) -> tuple[FunctionNode, Scope] | None:
        """A function by the name it is called with: local, module-level or imported from a module."""
        if name in self.functions:
            return self.functions[name], self
        found = self.imported_module(name)
        if found is not None and found[1] in found[0].functions:
            return found[0].functions[found[1]], found[0]
        return None

    def imported_module(self, name: str) -> tuple[Scope, str] | None:
        """The project module `name` is imported from here (``from m import name``), and its name there."""
        imported = self.imports.get(name)
        if imported is None or imported[1] is None:
            return None
        other = self.workspace.module_scope(imported[0], imported[2], self.source.path)
        return None if other is None else (other, imported[1])

    def defining(self, name: str) -> tuple[Scope, str] | None:
        """The project module that defines `name` as imported here, and its name there: an import is
        followed through re-exports (a package ``__init__``'s ``from .apps import AppsOperator``, the
        usual way a repository names its operators) to the module that writes the def or class."""
        found = self.imported_module(name)
        for _ in range(_MAX_REEXPORTS):
            if found is None or found[1] in found[0].functions or found[1] in found[0].classes:
                return found
            onward = found[0].imported_module(found[1])
            if onward is None:
                return found
            found = onward
        return found

    def module_function(self, module: str, name: str) -> tuple[FunctionNode, Scope] | None:
        """Function `name` of the project module imported here as `module` (``import functions as
        f`` then ``f.execute_query(..)``); None for an installed library's, or a name that is no
        module."""
        other = self.module_named(module)
        if other is None or name not in other.functions:
            return None
        return other.functions[name], other

    def class_def(self, class_name: str) -> tuple[ast.ClassDef, Scope] | None:
        """The class called `class_name` here: defined in this module or imported from another (through
        a package's re-exports)."""
        if class_name in self.root.classes:
            return self.root.classes[class_name], self.root
        found = self.defining(class_name)
        if found is not None and found[1] in found[0].classes:
            return found[0].classes[found[1]], found[0]
        return None

    def method(self, class_name: str, name: str) -> tuple[FunctionNode, Scope] | None:
        """Method `name` of the class called `class_name` here (defined in this module or imported
        from another), as written in the class's body (inherited methods are not looked up)."""
        owner = self.class_def(class_name)
        return None if owner is None else method_of([owner], name)

    def class_chain(self, class_name: str, _depth: int = 0) -> list[tuple[ast.ClassDef, Scope]]:
        """The class `class_name` and the classes it derives from that this workspace can read (its
        own first, then its bases', depth first, a base named by its module too): empty when
        `class_name` is not one of them."""
        found = self.class_def(class_name)
        if found is None or _depth > 8:
            return []
        chain = [found]
        for base in found[0].bases:
            if isinstance(base, ast.Name):
                chain.extend(found[1].class_chain(base.id, _depth + 1))
            elif isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
                module = found[1].module_named(base.value.id)  # ``class Op(base.BaseUploadOperator)``
                if module is not None:
                    chain.extend(module.class_chain(base.attr, _depth + 1))
        return chain

    # -- values -------------------------------------------------------------------------------
    def value(self, node: ast.expr | None, _depth: int = 0) -> tuple[ast.expr | None, Scope]:
        """Follow a name (local, module-level, imported), a subscript of a literal dict or list, or
        ``os.getenv(name, default)`` to the expression it stands for."""
        if node is None or _depth > 12:
            return node, self
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                row = self.locals[node.id]
                return row.scope.value(row.expr, _depth + 1) if isinstance(row, Bound) else (node, self)
            if node.id in self.root.assigns:
                return self.root.value(self.root.assigns[node.id], _depth + 1)
            imported = self.imports.get(node.id)
            if imported is not None and imported[1] is not None:
                module, name, level = imported
                other = self.workspace.module_scope(module, level, self.source.path)
                if other is not None and name in other.assigns:
                    return other.value(ast.Name(id=name, ctx=ast.Load()), _depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            # ``self.table`` bound to the task's argument (`dispatch.self_binding`)
            stored = self.locals.get(f"{node.value.id}.{node.attr}")
            if isinstance(stored, Bound):
                return stored.scope.value(stored.expr, _depth + 1)
            module_scope = self.module_named(node.value.id)
            if module_scope is not None and node.attr in module_scope.assigns:
                return module_scope.value(ast.Name(id=node.attr, ctx=ast.Load()), _depth + 1)
            owner = self.class_def(node.value.id)  # a class attribute read through the class: Cls.SQL
            for stmt in owner[0].body if owner is not None else []:
                names = [getattr(t, "id", None) for t in getattr(stmt, "targets", [])]
                if isinstance(stmt, ast.Assign) and node.attr in names and owner is not None:
                    return owner[1].value(stmt.value, _depth + 1)
        if isinstance(node, ast.Attribute):
            # a field of a record the repository's class makes: ``meta.table`` of ``for meta in metas``
            # over ``metas = [Meta(table="visa_110"), ..]`` (round 34c: a task group's loop)
            made, where = self.value(node.value, _depth + 1)
            if (
                isinstance(made, ast.Call)
                and isinstance(made.func, ast.Name)
                and where.class_def(made.func.id)
            ):
                field = keywords(made).get(node.attr)
                if field is not None:
                    return where.value(field, _depth + 1)
        if isinstance(node, ast.Subscript):
            item = self._item(node.value, node.slice, _depth)
            if item is not None:
                return item.scope.value(item.expr, _depth + 1)
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in _ENV_CALLS and len(node.args) >= 2:
                return self.value(node.args[1], _depth + 1)  # the default: what the DAG reads unset
            default = keywords(node).get("default")
            if name in _ENV_CALLS and default is not None:
                return self.value(default, _depth + 1)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
                item = self._item(node.func.value, node.args[0], _depth)
                if item is not None:
                    return item.scope.value(item.expr, _depth + 1)
            loaded = loaded_config(self, node, _depth)  # a project's JSON/YAML file as a literal (round 36f)
            if loaded is not None:
                return loaded, self
            returned = self._returned_text(node)
            if returned is not None:
                return returned.scope.value(returned.expr, _depth + 1)
        return node, self

    def _returned_text(self, call: ast.Call) -> Bound | None:
        """``sql=delete_sql(db)``: what a repository function returns when its one ``return`` gives a
        string built from literals and its parameters (an f-string, ``+``, ``.format``), or a file's
        text (``return f.read()``, `filereads`), read with the call's arguments bound; None for
        anything else (a factory returning an operator, a value computed in the body)."""
        if not isinstance(call.func, ast.Name):
            return None
        found = self.function(call.func.id)
        if found is None or isinstance(found[0], ast.AsyncFunctionDef):
            return None
        fn, def_scope = found
        read = file_read_return(fn)  # ``read_sql("load.sql")``: the file's text (round 36f)
        if read is not None:
            inner = def_scope.child(bind_arguments(fn, call, self, def_scope))
            for name, value in read[1]:
                inner = inner.child({name: Bound(value, inner)})
            return Bound(read[0], inner)
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            return None
        expr = body[0].value
        stringish = isinstance(expr, ast.JoinedStr | ast.BinOp) or (
            isinstance(expr, ast.Constant) and isinstance(expr.value, str)
        )
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            stringish = expr.func.attr in ("format", "strip") and isinstance(
                expr.func.value, ast.Constant | ast.JoinedStr
            )
        if not stringish:
            return None
        return Bound(expr, def_scope.child(bind_arguments(fn, call, self, def_scope)))

    def _item(self, container: ast.expr, key: ast.expr, depth: int) -> Bound | None:
        """`container[key]` of a literal dict, list or tuple."""
        value, scope = self.value(container, depth + 1)
        wanted = self.literal(key)
        if isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=False):
                if k is not None and scope.literal(k) == wanted and wanted is not None:
                    return Bound(v, scope)
        if (
            isinstance(value, ast.List | ast.Tuple)
            and isinstance(wanted, int)
            and not isinstance(wanted, bool)
        ):
            with contextlib.suppress(IndexError):
                return Bound(value.elts[wanted], scope)
        return None

    def module_named(self, local: str) -> Scope | None:
        """The scope of a module imported under `local` (import a.b as local / from a import local)."""
        imported = self.imports.get(local)
        if imported is None:
            return None
        module, name, level = imported
        full = module if name is None else (f"{module}.{name}" if module else name)
        return self.workspace.module_scope(full, level, self.source.path)

    def resolve_name(self, dotted: str) -> str:
        """`dt.now` -> `datetime.now` when dt was imported as `from datetime import datetime as dt`."""
        head, _, rest = dotted.partition(".")
        imported = self.imports.get(head)
        if imported is None:
            return dotted
        module, name, _level = imported
        real = name if name is not None else module
        return f"{real}.{rest}" if rest else real

    def literal(self, node: ast.expr | None) -> Any:
        """A Python literal (str, int, bool, None, list, dict) or None when it is not one."""
        value, scope = self.value(node)
        if value is None:
            return None
        if isinstance(value, ast.Constant):
            return value.value
        if isinstance(value, ast.List | ast.Tuple):
            return [scope.literal(e) for e in value.elts]
        if isinstance(value, ast.Dict):
            return {
                scope.literal(k): scope.literal(v)
                for k, v in zip(value.keys, value.values, strict=False)
                if k is not None
            }
        if isinstance(value, ast.Call) and dotted(value.func) == "dict":
            return {k: scope.literal(v) for k, v in keywords(value).items()}
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            inner = scope.literal(value.operand)
            return -inner if isinstance(inner, int | float) and not isinstance(inner, bool) else None
        if isinstance(value, ast.JoinedStr | ast.BinOp | ast.Call):
            text = scope.string(value)
            return text.text if text is not None and not text.unresolved else None
        if isinstance(value, ast.Subscript):
            return scope._split_part(value)
        return None

    def _split_part(self, node: ast.Subscript) -> str | None:
        """``name.split(".")[-1]`` of a known string: one part of it (a table's schema and name cut
        from one ``"schema.table"`` constant, smu-chile's to_sql targets, round 22)."""
        call = node.value
        if not (
            isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "split"
        ):
            return None
        whole = self.literal(call.func.value)
        sep = self.literal(call.args[0]) if call.args else None
        index = self.literal(node.slice)
        if not isinstance(whole, str) or not (sep is None or isinstance(sep, str)) or call.keywords:
            return None
        if not isinstance(index, int) or isinstance(index, bool) or len(call.args) > 1 or sep == "":
            return None
        parts = whole.split(sep)
        return parts[index] if -len(parts) <= index < len(parts) else None

    def mapping(self, node: ast.expr | None) -> dict[str, ast.expr]:
        """A dict literal or dict(...) call as {key: expression}; {} when it is not one."""
        value, scope = self.value(node)
        if isinstance(value, ast.Dict):
            out: dict[str, ast.expr] = {}
            for k, v in zip(value.keys, value.values, strict=False):
                if k is None:  # **other
                    out.update(scope.mapping(v))
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out[k.value] = v
            return out
        if isinstance(value, ast.Call) and dotted(value.func) == "dict":
            return keywords(value)
        return {}

    # -- iteration ----------------------------------------------------------------------------
    def rows(self, node: ast.expr | None, _depth: int = 0) -> list[Row] | None:
        """What iterating `node` yields, when the linter can tell: a literal list, tuple or dict (its
        keys), ``.items()``/``.keys()``/``.values()``, ``enumerate``, ``zip``, ``range``, ``sorted``,
        a comprehension. None when it cannot (a value known only at run time)."""
        value, scope = self.value(node)
        if value is None or _depth > 6:
            return None
        out: list[Row] | None = None
        if isinstance(value, ast.List | ast.Tuple | ast.Set):
            if any(isinstance(e, ast.Starred) for e in value.elts):
                return None
            out = [Bound(e, scope) for e in value.elts]
        elif isinstance(value, ast.Dict):
            out = [Bound(k, scope) for k in value.keys if k is not None]
        elif isinstance(value, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            out = scope._comprehension(value, _depth)
        elif isinstance(value, ast.Call):
            out = scope._call_rows(value, _depth)
        return out[:MAX_ROWS] if out is not None else None

    def _comprehension(
        self, comp: ast.ListComp | ast.GeneratorExp | ast.SetComp, depth: int
    ) -> list[Row] | None:
        if len(comp.generators) != 1 or comp.generators[0].ifs:
            return None
        gen = comp.generators[0]
        items = self.rows(gen.iter, depth + 1)
        if items is None:
            return None
        out: list[Row] = []
        for row in items:
            bindings = self.bind(gen.target, row)
            if bindings is None:
                return None
            out.append(Bound(comp.elt, self.child(bindings)))
        return out

    def _call_rows(self, call: ast.Call, depth: int) -> list[Row] | None:
        name = dotted(call.func)
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("items", "keys", "values"):
            base, scope = self.value(call.func.value)
            if not isinstance(base, ast.Dict) or None in base.keys:
                return None
            pairs = [
                (Bound(k, scope), Bound(v, scope)) for k, v in zip(base.keys, base.values, strict=False) if k
            ]
            if call.func.attr == "items":
                return list(pairs)
            return [k if call.func.attr == "keys" else v for k, v in pairs]
        if name in ("sorted", "list", "tuple", "reversed", "set") and call.args:
            return self.rows(call.args[0], depth + 1)
        if name == "enumerate" and call.args:
            items = self.rows(call.args[0], depth + 1)
            first = self.literal(call.args[1]) if len(call.args) > 1 else 0
            if items is None or not isinstance(first, int):
                return None
            return [(Bound(_constant(first + i, call), self), row) for i, row in enumerate(items)]
        if name == "zip" and call.args:
            columns = [self.rows(a, depth + 1) for a in call.args]
            if any(c is None for c in columns):
                return None
            return [tuple(row) for row in zip(*[c for c in columns if c is not None], strict=False)]
        if name == "range" and call.args:
            bounds = [self.literal(a) for a in call.args]
            if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
                return [Bound(_constant(i, call), self) for i in range(*bounds)[:MAX_ROWS]]
        return None

    def bind(self, target: ast.expr, row: Row) -> dict[str, Row] | None:
        """The names a loop target binds to one row (``for name in``, ``for a, b in``)."""
        if isinstance(target, ast.Name):
            return {target.id: row}
        if isinstance(target, ast.Tuple | ast.List):
            parts: list[Row] | None = None
            if isinstance(row, tuple):
                parts = list(row)
            else:
                value, scope = row.scope.value(row.expr)
                if isinstance(value, ast.Tuple | ast.List):
                    parts = [Bound(e, scope) for e in value.elts]
            if parts is None or len(parts) != len(target.elts):
                return None
            out: dict[str, Row] = {}
            for sub, part in zip(target.elts, parts, strict=True):
                inner = self.bind(sub, part)
                if inner is None:
                    return None
                out.update(inner)
            return out
        return None

    # -- strings ------------------------------------------------------------------------------
    def string(self, node: ast.expr | None) -> Located | None:
        """The text of a string expression with where each piece is written; None if not static.
        Parts only known at run time (an f-string field of an argument) stand as `UNRESOLVED` names."""
        if node is None:
            return None
        try:
            return text_of(self, node)
        except RecursionError:
            return None

    def strings(self, node: ast.expr | None) -> list[Located]:
        """A string, or each string of a list/tuple (or comprehension) of strings."""
        value, scope = self.value(node)
        if isinstance(value, ast.List | ast.Tuple | ast.ListComp | ast.GeneratorExp):
            rows = scope.rows(value)
            if rows is not None:
                return [s for row in rows if isinstance(row, Bound) and (s := row.scope.string(row.expr))]
        one = self.string(node)
        return [one] if one is not None else []


def bind_arguments(fn: FunctionNode, call: ast.Call, caller: Scope, def_scope: Scope) -> dict[str, Row]:
    """The parameters of `fn` bound to a call's arguments (read in the caller's scope) or to their
    defaults (read where `fn` is defined): what a task factory's or helper's body sees."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    bound: dict[str, Row] = dict.fromkeys(parameters(fn), ())  # unknown unless given: never a module name
    named = [a.arg for a in positional]
    defaults = dict(zip(named[len(named) - len(args.defaults) :], args.defaults, strict=True))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if default is not None:
            defaults[arg.arg] = default
    for name, default in defaults.items():
        bound[name] = Bound(default, def_scope)
    for param, value in zip(positional, call.args, strict=False):
        if isinstance(value, ast.Starred):
            break
        bound[param.arg] = Bound(value, caller)
    names = {a.arg for a in [*positional, *args.kwonlyargs]}
    for kw in call.keywords:
        if kw.arg in names:
            bound[kw.arg] = Bound(kw.value, caller)
    return bound


def parameters(fn: FunctionNode | ast.Lambda) -> list[str]:
    """Every parameter name of a function."""
    args = fn.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    names.extend(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return names


def _constant(value: int, origin: ast.AST) -> ast.Constant:
    node = ast.Constant(value=value)
    return ast.copy_location(node, origin)


def method_of(chain: list[tuple[ast.ClassDef, Scope]], name: str) -> tuple[FunctionNode, Scope] | None:
    """Method `name` as the first class of `chain` (a class and its bases, in order) that writes it."""
    for cls, where in chain:
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                return stmt, where
    return None


def self_method(func: ast.expr, chain: list[tuple[ast.ClassDef, Scope]]) -> tuple[FunctionNode, Scope] | None:
    """The method a call ``self.name(..)`` runs in the code of a class of `chain` (its own or a base's)."""
    if not chain or not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    return method_of(chain, func.attr) if func.value.id == "self" else None
