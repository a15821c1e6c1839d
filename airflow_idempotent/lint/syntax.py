"""Small readings of Python's syntax tree every part of the linter shares: dotted names, keywords."""

from __future__ import annotations

import ast

__all__ = ["dotted", "keywords", "last_name"]


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
