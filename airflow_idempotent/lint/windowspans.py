"""How wide a window relative to the clock is, and whether the clock starts it (issue 35, round 34b).

`rolling` asks this of an IDEM004 finding's line: is the clock read there the lower bound of a range
that runs up to the run's moment, and by how much is it shifted? Python: the clock shifted by a
``timedelta``/``relativedelta``/``.subtract(..)``/``days_ago(..)`` whose count is a literal or read from
an Airflow ``Variable`` (``int(Variable.get("LOOKBACK_DAYS"))``: a lookback the deployment sets, known
only by its unit), given a name that says it starts a range (a dict key, keyword, assigned name or the
text before it: ``"START_DATE=" +``, ``fromDate``, ``windowStartDate``, ``since``); an upper bound of
the same function or statement that is shifted too narrows it (``end = now() - 1 day``). SQL: the
clock token on the line shifted by ``INTERVAL n unit``, ``- n`` (days), ``DATEADD(unit, -n, ..)``,
``DATE_SUB(.., n)``, ``ADD_MONTHS(.., -n)``, after ``>=``/``>`` or as a ``BETWEEN``'s lower bound whose
upper one is the clock (less its own shift); a date clock (``CURRENT_DATE``, ``now()::date``) shifted
by whole days after ``>=``/``>`` spans the days back and the run's own day. Anything else (an
equality: one day N days back; a shift the text does not spell on the clock's line) is None: not
known to be rolling.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from airflow_idempotent.lint.pyfacts import RELATIVE_CALLS, clock_call, parents
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import dotted, keywords, last_name

__all__ = ["PERIODS", "Window", "python_window", "sql_window"]

#: how many of the DAG's periods a literal window must span to be rolling
PERIODS = 3

_UNITS = {
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
    "month": timedelta(days=28),  # the shortest month: a month's shift is never taken as longer
    "year": timedelta(days=365),
}
#: a name that says the value starts a range (its lower bound) or ends one
_LOWER = re.compile(r"(?i)start|from|since|begin|after|lookback|earliest|lower|gte")
_UPPER = re.compile(r"(?i)end|^to(?![a-z])|_to\b|until|before|upper|latest|lte")
_SHIFT_METHODS = {"subtract": 1, "minus": 1, "add": -1, "plus": -1}


@dataclass(frozen=True)
class Window:
    """A clock window's width (for a Variable's count: one unit) and what names it."""

    width: timedelta
    variable: str | None  # the Variable whose value is the count
    role: str  # the name that says it is a start ("START_DATE=", ">=")
    #: the clock is a date (``CURRENT_DATE - 2``): the window starts at a midnight, and `width` counts
    #: the day the run is in as a whole one
    midnight: bool = False

    def spans_more_than(self, period: timedelta) -> bool:
        """The window covers several periods: a literal span at least `PERIODS` of them (a run late
        by up to two periods still covers the missed span; the labelled corpus's rel03, the last hour
        synced every 30 minutes, stays a finding), a Variable's count one unit no shorter than one."""
        return self.width >= period if self.variable is not None else self.width >= PERIODS * period

    def text(self) -> str:
        if self.variable is not None:
            return f"a lookback of Variable {self.variable!r} {_unit_name(self.width)}s"
        if self.midnight:
            back = self.width - _UNITS["day"]
            return (
                f"the days since the midnight {_span_text(back)} back ({_span_text(self.width)} with today)"
            )
        return f"the last {_span_text(self.width)}"


def _unit_name(width: timedelta) -> str:
    return next((name for name, unit in _UNITS.items() if unit == width), str(width))


def _span_text(width: timedelta) -> str:
    for name, unit in reversed(_UNITS.items()):
        if width >= unit and width % unit == timedelta(0):
            count = width // unit
            return f"{count} {name}{'s' if count != 1 else ''}"
    return str(width)


# ----- Python: the clock shifted by a timedelta, and the name its value is given --------------


def _count(node: ast.expr, scope: Scope) -> tuple[float | None, str | None]:
    """A literal count, or the name of the Variable it is read from (``int(Variable.get("N"))``)."""
    value = scope.literal(node)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), None
    inner, where = scope.value(node)
    for _ in range(4):
        value = where.literal(inner) if inner is not None else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value), None  # ``int(int(2))``
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add):  # a Variable's count + 60
            found = [_count(side, where) for side in (inner.left, inner.right)]
            named = [n for c, n in found if n is not None]
            if len(named) == 1 and any(c is not None and c >= 0 for c, _ in found):
                return None, named[0]
            break
        if not isinstance(inner, ast.Call):
            break
        name = dotted(inner.func)
        if last_name(name) in ("int", "float", "abs") and inner.args:
            inner, where = where.value(inner.args[0])
            continue
        if name.endswith("Variable.get") and inner.args:
            key = where.literal(inner.args[0])
            return None, key if isinstance(key, str) else None
        break
    return None, None


def _delta(call: ast.Call, scope: Scope) -> tuple[timedelta, str | None] | None:
    """The span of ``timedelta(days=7)`` / ``relativedelta(months=3)`` / ``.subtract(days=7)``."""
    given = dict(keywords(call))
    if call.args and last_name(dotted(call.func)) in ("timedelta", "duration"):
        given["days"] = call.args[0]
    total, variable = timedelta(0), None
    for key, node in given.items():
        unit = _UNITS.get(key.rstrip("s"))
        if unit is None:
            return None
        count, name = _count(node, scope)
        if count is not None:
            total += abs(count) * unit
        elif name is not None and variable is None and len(given) == 1:
            return unit, name
        else:
            return None
    return (total, None) if total > timedelta(0) else None


def _shifted(
    call: ast.Call, parent_of: dict[ast.AST, ast.AST], scope: Scope
) -> tuple[ast.AST, timedelta, str | None] | None:
    """The expression that shifts a clock read back by a span, the span, and its Variable."""
    if last_name(dotted(call.func)) == "days_ago" and call.args:
        count, name = _count(call.args[0], scope)
        if count is not None:
            return call, abs(count) * _UNITS["day"], None
        return (call, _UNITS["day"], name) if name is not None else None
    node: ast.AST = call
    for _ in range(6):
        parent = parent_of.get(node)
        if parent is None or isinstance(parent, ast.stmt):
            return None
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Sub | ast.Add):
            other = parent.right if parent.left is node else parent.left
            if isinstance(other, ast.Call) and last_name(dotted(other.func)) in RELATIVE_CALLS:
                found = _delta(other, scope)
                return (parent, *found) if found is not None else None
            return None
        if isinstance(parent, ast.Attribute) and parent.attr in _SHIFT_METHODS:
            outer = parent_of.get(parent)
            if isinstance(outer, ast.Call) and outer.func is parent:
                found = _delta(outer, scope)
                return (outer, *found) if found is not None else None
            return None
        node = parent
    return None


def _role(node: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> str | None:
    """The name a value is given: a dict key, a keyword, an assigned name, the text before it
    (``"START_DATE=" + ..``, ``f"from={..}"``)."""
    for _ in range(8):
        parent = parent_of.get(node)
        if parent is None:
            return None
        if isinstance(parent, ast.Dict):
            index = next((i for i, v in enumerate(parent.values) if v is node), None)
            key = parent.keys[index] if index is not None else None
            return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
        if isinstance(parent, ast.keyword):
            return parent.arg
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add) and parent.right is node:
            left = parent.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                return left.value
        if isinstance(parent, ast.JoinedStr):
            text = ""
            for part in parent.values:
                if part is node:
                    return text or None
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    text = part.value
        if isinstance(parent, ast.Assign | ast.AnnAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            target = targets[0]
            if isinstance(target, ast.Name):
                return target.id
            if isinstance(target, ast.Attribute):
                return target.attr
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                return str(target.slice.value)
            return None
        if isinstance(parent, ast.stmt):
            return None
        node = parent
    return None


def _bound(role: str | None) -> str | None:
    """ "lower" or "upper" when the name says which end of a range the value is."""
    if role is None:
        return None
    lower, upper = _LOWER.search(role), _UPPER.search(role)
    if lower and not upper:
        return "lower"
    if upper and not lower:
        return "upper"
    return None


def python_window(tree: ast.Module, scope: Scope, line: int) -> Window | None:
    """The rolling window a clock read at `line` starts, or None when it is not (or not known to be)
    a lower bound shifted by a known span."""
    parent_of = parents(tree)
    clocks = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line and clock_call(n, scope)
    ]
    for clock in clocks:
        shift = _shifted(clock, parent_of, scope)
        if shift is None:
            continue
        node, width, variable = shift
        role = _role(node, parent_of)
        if _bound(role) != "lower":
            return None
        holder = _holder(node, parent_of)
        for other in _shifted_clocks(holder, parent_of, scope):
            if other[0] is node or _bound(_role(other[0], parent_of)) != "upper":
                continue
            if variable is not None or other[2] is not None:
                return None
            width -= other[1]
        if width <= timedelta(0):
            return None
        return Window(width, variable, role or "")
    return None


def _holder(node: ast.AST, parent_of: dict[ast.AST, ast.AST]) -> ast.AST:
    """Where an upper bound of the same range would be written: the enclosing function, else the
    module-level statement."""
    top = node
    while (parent := parent_of.get(top)) is not None:
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
            return parent
        if isinstance(parent, ast.Module):
            return top
        top = parent
    return top


def _shifted_clocks(
    root: ast.AST, parent_of: dict[ast.AST, ast.AST], scope: Scope
) -> Iterator[tuple[ast.AST, timedelta, str | None]]:
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and clock_call(node, scope):
            shift = _shifted(node, parent_of, scope)
            if shift is not None:
                yield shift


# ----- SQL: ``col >= NOW() - INTERVAL 90 DAY`` --------------------------------------------------

_SQL_CLOCK = re.compile(
    r"(?i)\b(now|curdate|current_date|current_timestamp|getdate|getutcdate|sysdate|systimestamp|"
    r"sysdatetime|localtimestamp|utc_timestamp|today)\b(\s*\(\s*\))?"
)
#: a clock whose value is a date, so a whole-day shift of it starts the window at a midnight: the
#: window is the days back plus the run's own day up to its moment. Counted so, ``CURRENT_DATE - 2``
#: on a daily DAG (three days, today's in part) leaves each whole day in as many runs' windows as
#: ``now() - 3 days`` does (round 36j, Grover's Kafka staging)
_DATE_CLOCK = re.compile(r"(?i)(current_date|curdate|today)\b(\s*\(\s*\))?|\w+\s*(\(\s*\))?\s*::\s*date\b")
_INTERVAL = re.compile(r"(?i)interval\s*'?\s*(-?\s*\d+)\s*'?\s*(second|minute|hour|day|week|month|year)s?\b")
_CAST_INTERVAL = re.compile(r"(?i)'\s*(\d+)\s*(second|minute|hour|day|week|month|year)s?\s*'\s*::\s*interval")
_DATEADD = re.compile(
    r"(?i)dateadd\s*\(\s*'?(second|minute|hour|day|week|month|year)s?'?\s*,\s*(-?\s*\d+)\s*,\s*$"
)
_DAYS_ARG = re.compile(r"(?i)(date_sub|date_add|adddate|subdate)\s*\(\s*$")
_MONTHS_ARG = re.compile(r"(?i)add_months\s*\(\s*$")
_ARG = re.compile(r"^[^,()]*(?:\([^()]*\))?[^,()]*,\s*(-?\s*\d+)\s*\)")
_MINUS_DAYS = re.compile(
    r"^[\s)]*(?:as\s+date\s*\)*\s*|::\s*date\s*)?-\s*(\d+)\b"
    r"(?!\s*(?:'|(?:second|minute|hour|day|week|month|year)s?\b))",
    re.IGNORECASE,
)
_COMPARISON = re.compile(r"(?i)(>=|<=|<>|!=|>|<|=|\bbetween\b)")
_JOIN = re.compile(r"(?i)\b(and|or)\b|;")


def _sql_span(before: str, after: str) -> timedelta | None:
    """The span a clock token is shifted by, from the text before and after it on its line."""
    if found := _DATEADD.search(before):
        return abs(int(found.group(2).replace(" ", ""))) * _UNITS[found.group(1).lower()]
    if _DAYS_ARG.search(before) and (found := _ARG.search(after)):
        return abs(int(found.group(1).replace(" ", ""))) * _UNITS["day"]
    if _MONTHS_ARG.search(before) and (found := _ARG.search(after)):
        return abs(int(found.group(1).replace(" ", ""))) * _UNITS["month"]
    cut = _JOIN.search(after)
    own = after[: cut.start()] if cut else after
    for pattern in (_INTERVAL, _CAST_INTERVAL):
        if found := pattern.search(own):
            return abs(int(found.group(1).replace(" ", ""))) * _UNITS[found.group(2).lower()]
    if found := _MINUS_DAYS.search(own):
        return int(found.group(1)) * _UNITS["day"]
    return None


def sql_window(lines: list[str], line: int) -> Window | None:
    """The rolling window SQL at `line` (1-based) starts: the clock shifted back by a span as a lower
    bound (``>=``, ``>``, ``BETWEEN`` it ``AND`` the clock or a smaller shift)."""
    if not 1 <= line <= len(lines):
        return None
    text = lines[line - 1]
    previous = lines[line - 2] if line >= 2 else ""
    for clock in _SQL_CLOCK.finditer(text):
        before, after = text[: clock.start()], text[clock.end() :]
        span = _sql_span(before, after)
        if span is None:
            continue
        ops = list(_COMPARISON.finditer(previous + "\n" + before))
        op = ops[-1].group(1).lower() if ops else None
        if op in (">=", ">"):
            if _DATE_CLOCK.match(clock.group(0) + after) and span % _UNITS["day"] == timedelta(0):
                return Window(span + _UNITS["day"], None, op, midnight=True)
            return Window(span, None, op)
        if op != "between":
            return None
        upper = re.search(r"(?i)\band\b(.*)$", after)
        bound = _SQL_CLOCK.search(upper.group(1)) if upper else None
        if upper is None or bound is None:
            return None
        less = _sql_span(upper.group(1)[: bound.start()], upper.group(1)[bound.end() :])
        width = span - (less or timedelta(0))
        return Window(width, None, "between") if width > timedelta(0) else None
    return None
