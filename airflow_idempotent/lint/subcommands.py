"""The subcommand of a repository script a task's command runs (issue 35, round 36h, lint66).

``python scripts/etl.py load --date {{ ds }}`` runs one branch of a script that dispatches on its
first argument: argparse subparsers (``sub.add_parser("load")`` then ``if args.command == "load":``,
``.set_defaults(func=load)`` or a dict of commands), click or typer groups (``@cli.command()``), or
``if sys.argv[1] == "load":``. Reading the whole script as each task's code gave every task the
findings of every subcommand (round 40: a Kafka send and a clock read of ``process_report`` raised on
the tasks running ``extract_report`` and ``check_data_inreport``, 24 false findings). When the
command names a subcommand the script declares, the task's code is the script's module-level code
with the other subcommands' branches cut, plus a call of the chosen command's function; the
functions it calls are followed as any call is. A subcommand not known before the task runs (a
template, a shell variable) or not declared keeps the whole script.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from airflow_idempotent.lint.source import UNRESOLVED
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["dispatched_body"]

#: a decorator that makes a function a command of a group (``@cli.command()``, typer's ``@app.command()``)
_COMMAND_DECORATORS = frozenset({"command"})
_CLICK_LIBRARIES = frozenset({"click", "typer"})


def dispatched_body(module: ast.Module, words: list[str]) -> list[ast.stmt] | None:
    """The statements a run of `module` with the arguments `words` executes at module level: the other
    subcommands' branches cut and the chosen command's function called; None when the script declares
    no subcommands or `words` names none of them (the whole script is then the task's code)."""
    functions = {s.name: s for s in module.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    names, calls = _declared(module, functions)
    chosen = _chosen(words, names)
    if chosen is None:
        return None
    pruner = _Pruner(chosen, names, _dispatch_values(module), functions)
    pruned = pruner.block(module.body)
    if not pruner.resolved and chosen not in calls:
        return None  # declared, but dispatched some way not read here (``getattr(jobs, args.command)``)
    for name, line in calls.get(chosen, []):
        call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[], keywords=[])
        pruned.append(ast.fix_missing_locations(ast.copy_location(ast.Expr(value=call), _at(line))))
    return pruned or [ast.copy_location(ast.Pass(), _at(1))]


def _at(line: int) -> ast.stmt:
    return ast.Pass(lineno=line, col_offset=0, end_lineno=line, end_col_offset=0)


def _declared(
    module: ast.Module, functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
) -> tuple[set[str], dict[str, list[tuple[str, int]]]]:
    """The subcommand names the script declares, and for each the function a dispatch by value runs
    (argparse ``set_defaults(func=..)``, a dict of commands, a click command) with the line saying so."""
    names: set[str] = set()
    calls: dict[str, list[tuple[str, int]]] = {}
    parsers: dict[str, str] = {}  # the local a subparser is bound to -> its command name
    known = set(functions) | {
        (a.asname or a.name) for s in module.body if isinstance(s, ast.ImportFrom) for a in s.names
    }
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
            command = _add_parser(node.value)
            if command is not None and isinstance(node.targets[0], ast.Name):
                parsers[node.targets[0].id] = command
        if isinstance(node, ast.Call):
            command = _add_parser(node)
            if command is not None:
                names.add(command)
                names.update(_aliases(node))
    for node in ast.walk(module):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "set_defaults"
        ):
            owner = node.func.value
            command = parsers.get(owner.id) if isinstance(owner, ast.Name) else _add_parser(owner)
            for keyword in node.keywords:
                if command is not None and isinstance(keyword.value, ast.Name) and keyword.value.id in known:
                    calls.setdefault(command, []).append((keyword.value.id, node.lineno))
        elif isinstance(node, ast.Dict) and _is_command_table(node, module, known):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(key.value, str)
                    and isinstance(value, ast.Name)
                ):
                    names.add(key.value)
                    calls.setdefault(key.value, []).append((value.id, value.lineno))
    for fn in functions.values():
        for command in _click_names(fn):
            names.add(command)
            calls.setdefault(command, []).append((fn.name, fn.lineno))
    names.update(_argv_literals(module))
    return names, calls


def _add_parser(node: ast.expr) -> str | None:
    """``sub.add_parser("load", ..)``'s command name."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_parser"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _aliases(call: ast.Call) -> list[str]:
    value = next((k.value for k in call.keywords if k.arg == "aliases"), None)
    if isinstance(value, ast.List | ast.Tuple):
        return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _is_command_table(node: ast.Dict, module: ast.Module, functions: set[str]) -> bool:
    """A dict of two or more string keys to the script's functions (its own or imported), looked up
    by a value the script does not spell (``COMMANDS[args.command](args)``, ``COMMANDS.get(cmd)``)."""
    if len(node.keys) < 2 or not all(
        isinstance(k, ast.Constant)
        and isinstance(k.value, str)
        and isinstance(v, ast.Name)
        and v.id in functions
        for k, v in zip(node.keys, node.values, strict=True)
    ):
        return False
    bound = _names_bound(module, lambda value: value is node)
    for use in ast.walk(module):
        if isinstance(use, ast.Subscript) and not isinstance(use.slice, ast.Constant):
            table = use.value
            if table is node or (isinstance(table, ast.Name) and table.id in bound):
                return True
        if isinstance(use, ast.Call) and isinstance(use.func, ast.Attribute) and use.func.attr == "get":
            owner = use.func.value
            if (owner is node or (isinstance(owner, ast.Name) and owner.id in bound)) and not (
                use.args and isinstance(use.args[0], ast.Constant)
            ):
                return True
    return False


def _click_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names a group's ``@cli.command()`` gives `fn`: its ``name``, else the function's name (click
    also accepts it with dashes for underscores)."""
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if not (isinstance(target, ast.Attribute) and target.attr in _COMMAND_DECORATORS):
            continue
        if dotted(target.value) in _CLICK_LIBRARIES:
            continue  # ``@click.command()``: a program of one command, its arguments are no command
        if isinstance(decorator, ast.Call):
            named = decorator.args[0] if decorator.args else None
            named = next((k.value for k in decorator.keywords if k.arg == "name"), named)
            if isinstance(named, ast.Constant) and isinstance(named.value, str):
                return [named.value]
        return sorted({fn.name, fn.name.replace("_", "-")})
    return []


def _argv_literals(module: ast.Module) -> set[str]:
    """The strings ``sys.argv[1]`` (or a name bound to it) is compared with."""
    argv_names = _names_bound(module, _is_argv)
    out: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            sides = [node.left, node.comparators[0]]
            if any(_is_argv(s) or (isinstance(s, ast.Name) and s.id in argv_names) for s in sides):
                out.update(_literals(node))
    return out


def _is_argv(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Subscript)
        and dotted(node.value) == "sys.argv"
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == 1
    )


def _literals(test: ast.Compare) -> list[str]:
    """The strings an ``==`` or ``in`` test compares its other side with."""
    if isinstance(test.ops[0], ast.Eq):
        sides = [test.left, test.comparators[0]]
        return [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
    if isinstance(test.ops[0], ast.In) and isinstance(test.comparators[0], ast.List | ast.Tuple | ast.Set):
        return [
            e.value
            for e in test.comparators[0].elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
    return []


def _dispatch_values(module: ast.Module) -> set[str]:
    """The expressions (dumped) that hold the command's first argument: an attribute of what
    ``parse_args()`` returned (``args.command``), ``sys.argv[1]``, and names bound to either."""
    parsed: set[str] = set()
    for node in ast.walk(module):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if last_name(dotted(node.value.func)) in ("parse_args", "parse_known_args"):
            for target in node.targets:
                first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                if isinstance(first, ast.Name):
                    parsed.add(first.id)

    def holds(node: ast.expr) -> bool:
        return _is_argv(node) or (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in parsed
        )

    out = {_key(n) for n in ast.walk(module) if isinstance(n, ast.expr) and holds(n)}
    return out | {f"name {name}" for name in _names_bound(module, holds)}


def _names_bound(module: ast.Module, value: Callable[[ast.expr], bool]) -> set[str]:
    """The names the script assigns (``name = ..``) a value `value` accepts."""
    return {
        t.id
        for s in ast.walk(module)
        if isinstance(s, ast.Assign) and value(s.value)
        for t in s.targets
        if isinstance(t, ast.Name)
    }


def _key(node: ast.expr) -> str:
    """An expression's text for comparing uses of it (a name read or bound alike)."""
    return f"name {node.id}" if isinstance(node, ast.Name) else ast.dump(node)


def _chosen(words: list[str], names: set[str]) -> str | None:
    """The first of the command's arguments that is a declared subcommand; None when there is none, or
    when an argument known only at run time (not an option's value) comes before it."""
    previous = ""
    for word in words:
        word = word.strip("'\"")
        if word in names:
            return word
        if any(mark in word for mark in ("{{", "$", "%", UNRESOLVED)) and not previous.startswith("-"):
            return None
        previous = word
    return None


class _Pruner:
    """Cut the branches of other subcommands out of a block of statements (copies, never in place:
    the script's tree is shared by every task that runs it)."""

    def __init__(
        self,
        chosen: str,
        names: set[str],
        compared: set[str],
        functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    ) -> None:
        self.chosen = chosen
        self.names = names
        self.compared = compared
        self.functions = functions
        self.inlined: set[str] = set()
        #: a dispatch test or case was decided for the chosen subcommand
        self.resolved = False

    def block(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in statements:
            out.extend(self.statement(stmt))
        return out

    def statement(self, stmt: ast.stmt) -> list[ast.stmt]:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return []  # a definition runs nothing: what calls it is followed to it
        if isinstance(stmt, ast.If):
            taken = self._taken(stmt.test)
            if taken is True:
                self.resolved = True
                return self.block(stmt.body)
            if taken is False:
                return self.block(stmt.orelse)
        if isinstance(stmt, ast.Match) and self._dispatch(stmt.subject):
            for case in stmt.cases:
                if self._case_taken(case.pattern):
                    self.resolved = True
                    return self.block(case.body)
            return []
        inlined = self._inlined(stmt)
        if inlined is not None:
            return inlined
        if isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith | ast.Try):
            new = copy.copy(stmt)
            for field in ("body", "orelse", "finalbody"):
                if hasattr(stmt, field):
                    setattr(new, field, self.block(getattr(stmt, field)))
            if isinstance(stmt, ast.Try) and isinstance(new, ast.Try):
                new.handlers = [self._handler(h) for h in stmt.handlers]
            return [new]
        return [stmt]

    def _handler(self, handler: ast.ExceptHandler) -> ast.ExceptHandler:
        new = copy.copy(handler)
        new.body = self.block(handler.body)
        return new

    def _dispatch(self, node: ast.expr) -> bool:
        return _key(node) in self.compared

    def _taken(self, test: ast.expr) -> bool | None:
        """Whether a dispatch test (``args.command == "load"``, ``cmd in ("a", "b")``) holds for the
        chosen subcommand; None for any other test."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        literals = _literals(test)
        if not any(lit in self.names for lit in literals):
            return None
        if not any(self._dispatch(s) for s in (test.left, test.comparators[0])):
            return None  # a test of something else that happens to spell a command's name
        return self.chosen in literals

    def _case_taken(self, pattern: ast.pattern) -> bool:
        if isinstance(pattern, ast.MatchValue) and isinstance(pattern.value, ast.Constant):
            return bool(pattern.value.value == self.chosen)
        if isinstance(pattern, ast.MatchOr):
            return any(self._case_taken(p) for p in pattern.patterns)
        return isinstance(pattern, ast.MatchAs) and pattern.pattern is None  # ``case _:``

    def _inlined(self, stmt: ast.stmt) -> list[ast.stmt] | None:
        """A call of the script's own function that holds the dispatch (``main()``, ``sys.exit(main())``):
        its body, cut the same way, stands for the call."""
        if not isinstance(stmt, ast.Expr | ast.Assign | ast.Return):
            return None
        value = stmt.value
        for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)) if value is not None else ():
            name = call.func.id if isinstance(call.func, ast.Name) else last_name(dotted(call.func))
            fn = self.functions.get(name) if isinstance(call.func, ast.Name) else None
            if fn is None or name in self.inlined or not self._holds_dispatch(fn):
                continue
            self.inlined.add(name)
            return self.block(fn.body)
        return None

    def _holds_dispatch(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        return any(
            (isinstance(n, ast.If) and self._taken(n.test) is not None)
            or (isinstance(n, ast.Match) and self._dispatch(n.subject))
            for n in ast.walk(fn)
        )
