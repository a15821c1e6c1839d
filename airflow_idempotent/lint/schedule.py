"""A DAG's schedule as the linter reads it: does it create time windows, and how often?

Cron expressions are read by croniter (what Airflow itself uses), so every expression Airflow
accepts has a period: the average time between its fire times. The period only sizes IDEM005's
"N windows so far"; whether a schedule creates windows at all never depends on it.
"""

from __future__ import annotations

import ast
import contextlib
import functools
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from croniter import CroniterError, croniter

from airflow_idempotent.lint.definitions import DagDef
from airflow_idempotent.lint.envchoices import choices
from airflow_idempotent.lint.pyfacts import (
    RELATIVE_CALLS,
    START_DATE_CONTEXT,
    clock_call,
    context_of,
    parents,
)
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import dotted, keywords, last_name

__all__ = [
    "CRON_PRESETS",
    "Schedule",
    "clock_start",
    "clock_start_read",
    "cron_period",
    "dag_schedule",
    "manual_only",
    "read_schedule",
    "start_date_moot",
    "static_date",
    "windowless_factory",
]

CRON_PRESETS: dict[str, str | None] = {
    "@once": None,
    "@continuous": None,
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@quarterly": "0 0 1 */3 *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
"""Airflow's schedule presets as cron expressions; None for the presets that create no time windows."""

# The period is measured over this many fire times: 2,520 is a multiple of every count of fires per
# cycle up to 10 (and of 12, 14, 15, 18, 20, 21, 24...), so most expressions are measured over whole
# cycles. Naive datetimes: croniter reads them as UTC, with no DST. At most one Gregorian cycle.
_SAMPLE_FIRES = 2520
_SAMPLE_FROM = datetime(2001, 1, 1)
_SAMPLE_UNTIL = datetime(2401, 1, 1)


@dataclass(frozen=True)
class Schedule:
    """A time-based schedule: as written (for messages), and its cron expression or fixed width."""

    shown: str
    cron: str | None = None
    width: timedelta | None = None

    @property
    def period(self) -> timedelta | None:
        """The time between windows; None when the linter cannot tell (a timetable, a cron it cannot
        read, a width it cannot read: ``timedelta(DAYS)``)."""
        period = cron_period(self.cron) if self.cron is not None else self.width
        return period if period is not None and period > timedelta(0) else None


def dag_schedule(dag: DagDef) -> Schedule | None:
    """The DAG's `schedule=` (or Airflow 2's `schedule_interval=`), read as `read_schedule` does."""
    return read_schedule(dag.scope, dag.kwargs.get("schedule", dag.kwargs.get("schedule_interval")))


def manual_only(dag: DagDef) -> bool:
    """The DAG says ``schedule=None`` (or ``schedule_interval=None``): it runs only when triggered, by
    hand or by another DAG, so no scheduled window is ever missed or created late."""
    node = dag.kwargs.get("schedule", dag.kwargs.get("schedule_interval"))
    if node is None:
        return False
    value, _ = dag.scope.value(node)
    return isinstance(value, ast.Constant) and value.value is None


def runs_on_schedule(dag: DagDef) -> bool:
    """The DAG says a schedule that creates runs by itself: a time-based one, or one the linter cannot
    see (`unknown_schedule`: ``get_airflow_schedule("0 2 * * *")``). Such runs take the defaults of its
    ``params``, so a default is the window they read; not ``schedule=None``, ``@once``, assets, nor a
    DAG that says no schedule (a UI default then: set when the run is triggered)."""
    node = dag.kwargs.get("schedule", dag.kwargs.get("schedule_interval"))
    if node is None or manual_only(dag):
        return False
    return read_schedule(dag.scope, node) is not None or unknown_schedule(dag.scope, node)


def start_date_moot(dag: DagDef, clock: str) -> str | None:
    """Why a clock-based start_date (`clock`: the call as written) creates no windows of this DAG, or
    None when it does. A start that moves only at midnight (``days_ago``, ``today()``) with
    catchup=False: the scheduler creates only the latest window whatever the start. A schedule that
    creates no time windows (None, @once, assets). Not a start read from ``now()``: its first window
    ends after "now" at every parse, so the DAG may never run; unless it lies two periods or more
    before the clock with catchup=False (``now() - 1 day`` on an hourly schedule, round 24): the latest
    finished window then always starts after it. Without `schedule=` Airflow 2 runs daily."""
    node = dag.kwargs.get("schedule", dag.kwargs.get("schedule_interval"))
    if node is not None and unknown_schedule(dag.scope, node):
        return None  # any schedule: a weekly one's first window never comes due if the start moves daily
    if node is not None and read_schedule(dag.scope, node) is None:
        return "the DAG has no time-based schedule, so the start_date creates no windows"
    schedule = read_schedule(dag.scope, node) if node is not None else None
    midnight = "days_ago" in clock or "today" in clock or "yesterday" in clock
    if midnight and dag.scope.literal(dag.kwargs.get("catchup")) is False:
        # round 36i (lint68): moot only when the latest finished window starts on or after it
        days = _midnight_lag(dag, clock)
        period = schedule.period if schedule is not None else timedelta(days=1) if node is None else None
        if days is not None and period is not None and days >= period:
            shown = schedule.shown if schedule is not None else "daily (no schedule=)"
            return (
                f"it moves only at midnight, {days.days} day(s) back, at least one {shown} period, and "
                "catchup=False: the latest finished window always starts on or after it, and it is the "
                "only one the scheduler creates"
            )
    lag, period = _start_lag(dag), schedule.period if schedule is not None else None
    if schedule is None or lag is None or period is None or lag < 2 * period:
        return None
    if dag.scope.literal(dag.kwargs.get("catchup")) is not False:
        return None
    return (
        f"it lies {lag} before each parse, two {schedule.shown} periods or more, and catchup=False: "
        "the latest window always starts after it, and it is the only one created"
    )


def _midnight_lag(dag: DagDef, clock: str) -> timedelta | None:
    """How many whole days before the parse's midnight a midnight start lies: ``days_ago(N)`` N days,
    ``today()`` none, ``yesterday()`` one, plus a span subtracted from it (``today().add(days=-1)``).
    A ``today()`` start on a daily schedule is never moot: its first window ends at the next midnight,
    when the start has moved on, so the DAG never runs on schedule. A ``days_ago`` whose N the linter
    cannot read (a Variable, a repository helper's argument) counts as one day, the least it is
    written with. None for ``datetime.today()``: the time of day, as ``now()`` is."""
    if clock.rstrip("()").split(".")[-2:] == ["datetime", "today"]:
        return None
    found = clock_start_read(dag)
    days = 0
    if "days_ago" in clock:
        given = None
        if found is not None and last_name(dotted(found[2].func)) == "days_ago":
            call = found[2]
            given = found[1].literal(call.args[0] if call.args else keywords(call).get("n"))
        days = given if isinstance(given, int) and not isinstance(given, bool) else 1
    elif "yesterday" in clock:
        days = 1
    return timedelta(days=days) + (_start_lag(dag) or timedelta(0))


def _start_lag(dag: DagDef) -> timedelta | None:
    """How far before the clock a ``now() - timedelta(..)`` / ``now().subtract(..)`` start lies (round
    24, the open item of round 23's coherent DAGs); None for any other spelling."""
    value, scope = dag.scope.value(dag.kwargs.get("start_date") or dag.default_args.get("start_date"))
    span: ast.expr | None = None
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub) and isinstance(value.left, ast.Call):
        span, sign = value.right, 1
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        sign = {"subtract": 1, "add": -1}.get(value.func.attr, 0)
        span = value if sign else None
    if not isinstance(span, ast.Call) or not (
        span is value or last_name(dotted(span.func)) in RELATIVE_CALLS
    ):
        return None
    kwargs = {k: scope.literal(v) for k, v in keywords(span).items()}
    with contextlib.suppress(TypeError):
        lag = sign * timedelta(**{k: v for k, v in kwargs.items() if isinstance(v, int | float)})
        return lag if lag > timedelta(0) and len(kwargs) > 0 else None
    return None


def unknown_schedule(scope: Scope, node: ast.expr) -> bool:
    """Principle: a schedule the DAG reads at parse time from what the linter cannot see (a factory's
    argument, ``event.get("schedule")``, ``config["schedule"]``) may be any schedule, not none: a
    factory fed from configs builds scheduled DAGs. Assets (``Asset(..)``, lists of them) and
    timetables, written as such, are known."""
    value, _ = scope.value(node)
    if isinstance(value, ast.Name | ast.Subscript):
        return True  # a parameter or a lookup left unresolved
    if isinstance(value, ast.Call):
        name = last_name(dotted(value.func))
        return name in ("get", "getenv", "pop") or (name[:1].islower() and name not in RELATIVE_CALLS)
    return False


def clock_start(dag: DagDef) -> str | None:
    """The clock call a DAG's start_date is computed from (``datetime.now()``, ``days_ago(2)``,
    ``pendulum.today().add(days=-2)``, through a name), or None for a fixed or unreadable start. Such
    a start is never more than a fixed span before the parse: catchup creates at most that span's
    windows, never a backlog that grows (the moving start itself is IDEM003's finding)."""
    found = clock_start_read(dag)
    return found[0] if found is not None else None


def clock_start_read(dag: DagDef) -> tuple[str, Scope, ast.Call] | None:
    """`clock_start`'s clock call, with the scope (file) it is written in."""
    start = dag.kwargs.get("start_date")
    todo = [
        dag.scope.value(start)
        if start is not None
        else _default_start(dag.scope, dag.kwargs.get("default_args"))
    ]
    seen: set[int] = set()
    while todo and len(seen) < 50:
        node, scope = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = clock_call(sub, scope)
                if name is not None and name.split(".")[0].rstrip("()") not in ("random", "uuid", "secrets"):
                    return name, scope, sub
            elif isinstance(sub, ast.Name) and sub is not node:
                todo.append(scope.value(sub))  # start = combine(start.date(), ..): the name's value too
    return None


def _default_start(scope: Scope, node: ast.expr | None, depth: int = 0) -> tuple[ast.expr | None, Scope]:
    """The ``start_date`` of a DAG's ``default_args`` with the scope it is written in: a dict of
    another module (``from common import default_args``), also merged (``default_args | {..}``,
    ``{**default_args}``: the last spelling wins) or copied (``.copy()``). Round 18: Amsterdam's DAGs
    take ``pendulum.yesterday()`` this way."""
    value, where = scope.value(node)
    if depth > 6 or value is None:
        return None, scope
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        right = _default_start(where, value.right, depth + 1)
        return right if right[0] is not None else _default_start(where, value.left, depth + 1)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "copy":
        return _default_start(where, value.func.value, depth + 1)  # ``args = default_args.copy()``
    if isinstance(value, ast.Dict):  # the last spelling wins: ``{**default_args, "start_date": ..}``
        for key, item in reversed(list(zip(value.keys, value.values, strict=False))):
            if isinstance(key, ast.Constant) and key.value == "start_date":
                return where.value(item)
            if key is None and (spread := _default_start(where, item, depth + 1))[0] is not None:
                return spread
        return None, where
    found = where.mapping(value).get("start_date")
    return where.value(found) if found is not None else (None, where)


def windowless_factory(call: ast.Call, scope: Scope) -> bool:
    """The call is of a repository function that builds DAGs (``DAG(..)`` in its body), each with a
    schedule written as one that creates no windows (``None``, ``"@once"``), and reads the clock only
    in a ``start_date``: that start creates no windows (`start_date_moot`'s principle, applied at a
    DAG factory's call; a schedule passed in by the caller is not read, and stays a finding). The
    clock may reach the ``start_date`` through local names (``start = utcnow()``, ``start =
    combine(start.date(), ..)``, ``'start_date': start``) when those names go nowhere else."""
    if not isinstance(call.func, ast.Name):
        return False
    found = scope.function(call.func.id)
    if found is None or isinstance(found[0], ast.Lambda):
        return False
    fn, fn_scope = found
    fn_parents = parents(fn)
    clocks = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and clock_call(n, fn_scope) is not None]
    if not all(_only_start(c, fn, fn_parents, set()) for c in clocks):
        return False  # a clock read elsewhere in the factory (a task's value, a name) is not the start
    dags = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and last_name(dotted(n.func)) == "DAG"]
    for dag in dags:
        given = keywords(dag)
        node = given.get("schedule", given.get("schedule_interval"))
        value, _ = fn_scope.value(node) if node is not None else (None, fn_scope)
        if not (isinstance(value, ast.Constant) and value.value in (None, "@once")):
            return False
    return bool(dags)


def _only_start(node: ast.AST, fn: ast.AST, fn_parents: dict[ast.AST, ast.AST], names: set[str]) -> bool:
    """`node`'s value goes only to a ``start_date``: it is one, or it is assigned to a name whose every
    use is (names already being followed count as such: ``start = f(start)``)."""
    if context_of(node, fn_parents) == START_DATE_CONTEXT:
        return True
    stmt = node
    while stmt in fn_parents and not isinstance(stmt, ast.stmt):
        stmt = fn_parents[stmt]
    if not (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    ):
        return False
    name = stmt.targets[0].id
    if name in names:
        return True
    uses = [
        n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]
    return bool(uses) and all(_only_start(use, fn, fn_parents, names | {name}) for use in uses)


def read_schedule(scope: Scope, node: ast.expr | None) -> Schedule | None:
    """The DAG's time-based schedule; None when it creates no time windows (None, @once, assets). A
    schedule chosen by a condition is time-based when either choice is: the DAGs of that branch run on
    it; so is one a repository helper chooses from its arguments (`envchoices`)."""
    if node is None:
        return None
    value, inner = scope.value(node)
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return None
    if isinstance(value, ast.IfExp):  # ``"10 0 * * *" if scheduled else None`` (round 25, hasadna)
        return read_schedule(inner, value.body) or read_schedule(inner, value.orelse)
    picked = choices(inner, value)  # ``set_env_value(production="@daily", dev="@once")`` (round 35b)
    if len(picked) > 1 or (picked and picked[0].expr is not value):
        return next((s for p in picked if (s := read_schedule(p.scope, p.expr)) is not None), None)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        text = value.value.strip()
        if text in CRON_PRESETS:
            preset = CRON_PRESETS[text]
            return Schedule(text, cron=preset) if preset is not None else None
        return Schedule(text, cron=text)
    if isinstance(value, ast.Call):
        name = last_name(dotted(value.func))
        if name in RELATIVE_CALLS:
            kwargs = {k: inner.literal(v) for k, v in keywords(value).items()}
            width = None
            with contextlib.suppress(TypeError):
                width = timedelta(**{k: v for k, v in kwargs.items() if isinstance(v, int | float)})
            return Schedule(ast.unparse(value), width=width)
        if "Timetable" in name:
            return Schedule(name)
        handed = _handed_schedule(inner, value)
        if handed is not None:
            return read_schedule(inner, handed)
    return None  # assets, lists of assets: event-driven, no windows to catch up


def _handed_schedule(scope: Scope, call: ast.Call) -> ast.expr | None:
    """The schedule a helper the repository does not contain is handed: its one argument, when that
    is a cron expression or preset (``schedule_interval=get_schedule("0 22 * * *")`` with
    ``plugins/dag_utils`` absent, round 44's Grover). Principle (round 36j): such a helper picks the
    schedule per environment, as `envchoices`' helpers do, and the expression is the one a deployed
    DAG runs on; a helper the repository holds is read by `envchoices` instead, never guessed."""
    if not isinstance(call.func, ast.Name) or scope.function(call.func.id) is not None:
        return None
    if len(call.args) + len(call.keywords) != 1:
        return None
    arg = call.args[0] if call.args else call.keywords[0].value
    text = scope.literal(arg)
    if not isinstance(text, str) or not (text.strip() in CRON_PRESETS or croniter.is_valid(text.strip())):
        return None
    return arg


@functools.lru_cache(maxsize=256)
def cron_period(expr: str) -> timedelta | None:
    """The average time between the fire times of a cron expression; None when croniter cannot read
    it (or it never fires)."""
    try:
        if not croniter.is_valid(expr):
            return None
        fires = croniter(expr, _SAMPLE_FROM)
        first = last = fires.get_next(datetime)
        count = 0
        while count < _SAMPLE_FIRES:
            following = fires.get_next(datetime)
            if following >= _SAMPLE_UNTIL:
                break
            last, count = following, count + 1
    except (CroniterError, ValueError, OverflowError):
        return None
    return (last - first) / count if count else None


def static_date(scope: Scope, node: ast.expr | None) -> date | None:
    """A start_date/end_date written as a literal (pendulum.datetime(2026, 1, 1), '2026-01-01'...)."""
    value, inner = scope.value(node)
    if isinstance(value, ast.Call):
        name = dotted(value.func)
        args = [inner.literal(a) for a in value.args]
        if (
            last_name(name) in ("datetime", "DateTime", "date")
            and len(args) >= 3
            and all(isinstance(a, int) for a in args[:3])
        ):
            with contextlib.suppress(ValueError):
                return date(args[0], args[1], args[2])
        if last_name(name) in ("parse", "fromisoformat") and args and isinstance(args[0], str):
            with contextlib.suppress(ValueError):
                return date.fromisoformat(args[0][:10])
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value.value[:10])
    return None
