"""Module scopes: a Python file's constants, functions and imports, resolved without running anything.

A `Workspace` reads each file once and parses it once; a `Scope` follows a name to its module-level
value, across ``from x import NAME`` into other files of the workspace.
"""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from typing import Any

from airflow_idempotent.lint.source import Located, Source, module_path

__all__ = ["Scope", "Workspace", "dotted", "keywords", "last_name"]


class Workspace:
    """Every file one lint run has read, and the scope of every Python file among them."""

    def __init__(self) -> None:
        self.sources: dict[Path, Source] = {}
        self.scopes: dict[Path, Scope | None] = {}

    def source(self, path: Path) -> Source | None:
        """The file's text (read once); None when it cannot be read."""
        path = path.resolve()
        if path not in self.sources:
            try:
                self.sources[path] = Source(path, path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                return None
        return self.sources[path]

    def scope(self, path: Path) -> Scope | None:
        """The file's module scope (parsed once); None when it is not readable Python."""
        path = path.resolve()
        if path not in self.scopes:
            self.scopes[path] = None
            src = self.source(path)
            if src is not None:
                with contextlib.suppress(SyntaxError, ValueError):
                    self.scopes[path] = Scope(self, src, ast.parse(src.text, filename=str(path)))
        return self.scopes[path]

    def module_scope(self, module: str, level: int, importer: Path) -> Scope | None:
        """The scope of an imported module, found on disk (never imported)."""
        path = module_path(module, level, importer)
        return self.scope(path) if path is not None else None


def dotted(node: ast.AST) -> str:
    """`a.b.c` for Name/Attribute chains; calls and subscripts are looked through."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func)
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    return ""


def last_name(name: str) -> str:
    """The last part of a dotted name: `task` of `airflow.sdk.task`."""
    return name.rsplit(".", 1)[-1]


def keywords(call: ast.Call) -> dict[str, ast.expr]:
    """A call's keyword arguments by name (``**kwargs`` left out)."""
    return {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}


class Scope:
    """The module-level names of one Python file."""

    def __init__(self, workspace: Workspace, source: Source, tree: ast.Module) -> None:
        self.workspace = workspace
        self.source = source
        self.tree = tree
        self.assigns: dict[str, ast.expr] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.imports: dict[str, tuple[str, str | None, int]] = {}
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
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                self.imports[alias.asname or alias.name] = (stmt.module or "", alias.name, stmt.level)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                self.imports[local] = (alias.name if alias.asname else local, None, 0)
        elif isinstance(stmt, ast.If | ast.Try):
            for sub in [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]:
                self._collect(sub)

    # -- values -------------------------------------------------------------------------------
    def value(self, node: ast.expr | None, _depth: int = 0) -> tuple[ast.expr | None, Scope]:
        """Follow a Name to its module-level value (also across `from x import NAME`)."""
        if node is None or _depth > 8:
            return node, self
        if isinstance(node, ast.Name):
            if node.id in self.assigns:
                return self.value(self.assigns[node.id], _depth + 1)
            imported = self.imports.get(node.id)
            if imported is not None and imported[1] is not None:
                module, name, level = imported
                other = self.workspace.module_scope(module, level, self.source.path)
                if other is not None and name in other.assigns:
                    return other.value(ast.Name(id=name, ctx=ast.Load()), _depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module_scope = self._module_named(node.value.id)
            if module_scope is not None and node.attr in module_scope.assigns:
                return module_scope.value(ast.Name(id=node.attr, ctx=ast.Load()), _depth + 1)
        return node, self

    def _module_named(self, local: str) -> Scope | None:
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
        return None

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

    def string(self, node: ast.expr | None) -> Located | None:
        """The text of a string expression, with the file lines it stands on; None if not static."""
        value, scope = self.value(node)
        if value is None:
            return None
        spans: list[tuple[Source, int, int]] = []
        text = scope._text(value, spans)
        if text is None or not spans:
            return None
        return Located(text, spans)

    def strings(self, node: ast.expr | None) -> list[Located]:
        """A string, or each string of a list/tuple of strings."""
        value, scope = self.value(node)
        if isinstance(value, ast.List | ast.Tuple):
            return [s for e in value.elts if (s := scope.string(e)) is not None]
        one = self.string(node)
        return [one] if one is not None else []

    def _text(self, node: ast.expr, spans: list[tuple[Source, int, int]], _depth: int = 0) -> str | None:
        """The string value of `node`, recording the source span of each piece in `spans`."""
        if _depth > 8:
            return None
        if isinstance(node, ast.Constant | ast.JoinedStr):
            spans.append((self.source, node.lineno, node.end_lineno or node.lineno))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            value, scope = self.value(node)
            if value is node or value is None:
                return None
            return scope._text(value, spans, _depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._text(node.left, spans, _depth + 1)
            right = self._text(node.right, spans, _depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.JoinedStr):
            parts: list[str] = []
            for piece in node.values:
                if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                    parts.append(piece.value)
                elif isinstance(piece, ast.FormattedValue):
                    inner = self._text(piece.value, [], _depth + 1)
                    parts.append(inner if inner is not None else "idem_py_value")
            return "".join(parts)
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in ("textwrap.dedent", "dedent") and node.args:
                return self._text(node.args[0], spans, _depth + 1)
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("strip", "lstrip", "rstrip"):
                return self._text(node.func.value, spans, _depth + 1)
        return None
