"""What an UPDATE's or an upsert's ``SET`` assigns: the columns it sets, and whether one of them adds
to its own value (a running total, IDEM008)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

__all__ = ["accumulating", "constant_sets", "set_columns", "target_names"]

#: Wrappers that keep a column's own value: ``COALESCE(x, 0) + ..`` still adds to x.
_SELF_WRAPPERS = (exp.Coalesce,)


def target_names(node: exp.Expression, table: str) -> set[str]:
    """How a statement's SET may name its target's columns: bare, by table name or by alias."""
    names = {table, table.split(".")[-1]}
    target = node.this if isinstance(node, exp.Schema) else node
    alias = target.args.get("alias") if isinstance(target, exp.Table) else None
    if isinstance(alias, exp.TableAlias) and alias.name:
        names.add(alias.name.lower())
    return names


def set_columns(assignments: Sequence[exp.Expression]) -> tuple[str, ...]:
    """The columns ``SET a = .., b = ..`` assigns, sorted; empty when one is not a plain column."""
    names = [
        eq.this.name.lower()
        for eq in assignments
        if isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column)
    ]
    return tuple(sorted(set(names))) if names and len(names) == len(assignments) else ()


def constant_sets(assignments: Sequence[exp.Expression]) -> bool:
    """Every ``SET`` assigns a literal (``available = False``, ``status = 'done'``, ``x = NULL``): a
    rerun writes the same values again (a flag or lock, not data)."""
    return bool(assignments) and all(
        isinstance(eq, exp.EQ)
        and isinstance(eq.this, exp.Column)
        and isinstance(eq.expression, exp.Boolean | exp.Literal | exp.Null)
        for eq in assignments
    )


def accumulating(assignments: Sequence[exp.Expression], target: set[str]) -> str | None:
    """`points = points + ...` (also ``t.x = t.x + s.x``, ``x = COALESCE(x, 0) + ..``): an assignment
    adding to the column's own value (the statement is where it is reported)."""
    for eq in assignments:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            continue
        column = eq.this.name.lower()
        for node in eq.expression.find_all(exp.Add, exp.Sub):
            for operand in (node.this, node.expression):
                if isinstance(operand, _SELF_WRAPPERS) or (
                    isinstance(operand, exp.Anonymous) and operand.name.lower() in ("ifnull", "nvl", "isnull")
                ):
                    operand = operand.this if isinstance(operand, _SELF_WRAPPERS) else operand.expressions[0]
                if (
                    isinstance(operand, exp.Column)
                    and operand.name.lower() == column
                    and (not operand.table or operand.table.lower() in target)
                ):
                    sign = "+" if isinstance(node, exp.Add) else "-"
                    return f"{eq.this.name} = {eq.this.name} {sign} ..."
    return None
