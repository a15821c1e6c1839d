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


def _guarded(column: str, where: exp.Expression | None) -> bool:
    """The statement's WHERE skips rows whose `column` already holds the text it would add
    (``AND factype NOT LIKE '%Mental Health%'``: NYCPlanning's FacDB): a rerun changes nothing."""
    if where is None:
        return False
    for like in where.find_all(exp.Like, exp.ILike):
        negated = bool(like.args.get("negate")) or isinstance(like.parent, exp.Not)
        if negated and isinstance(like.this, exp.Column) and like.this.name.lower() == column:
            return True
    return False


def accumulating(
    assignments: Sequence[exp.Expression], target: set[str], where: exp.Expression | None = None
) -> str | None:
    """`points = points + ...` (also ``t.x = t.x + s.x``, ``x = COALESCE(x, 0) + ..``): an assignment
    adding to the column's own value (the statement is where it is reported); also text grown from
    its own value (``pdf = 'https://..' || pdf``, ``CONCAT(..)``: round 18, a rerun prefixes again),
    unless `where` skips the rows that already hold the addition (`_guarded`)."""
    for eq in assignments:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            continue
        column = eq.this.name.lower()
        if _guarded(column, where):
            continue
        for node in eq.expression.find_all(exp.Add, exp.Sub, exp.DPipe, exp.Concat):
            operands = node.expressions if isinstance(node, exp.Concat) else (node.this, node.expression)
            for operand in operands:
                if isinstance(operand, _SELF_WRAPPERS) or (
                    isinstance(operand, exp.Anonymous) and operand.name.lower() in ("ifnull", "nvl", "isnull")
                ):
                    operand = operand.this if isinstance(operand, _SELF_WRAPPERS) else operand.expressions[0]
                if (
                    isinstance(operand, exp.Column)
                    and operand.name.lower() == column
                    and (not operand.table or operand.table.lower() in target)
                ):
                    sign = {exp.Add: "+", exp.Sub: "-"}.get(type(node), "||")
                    return f"{eq.this.name} = {eq.this.name} {sign} ..."
    return None
