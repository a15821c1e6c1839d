"""Determinism lint: refuse SQL that reads the clock, randomness or a sequence before it runs.

A windowed job is safe to rerun only if running it again over the same window gives the same
rows (f(f(x)) == f(x)). SQL that calls ``now()``, ``random()`` or ``nextval()`` gives different
rows on every run, so a rerun silently rewrites history. The check walks sqlglot's AST (not the
SQL text), so a column named ``now`` or a literal ``'nowhere'`` is never mistaken for a call.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from airflow_idempotent.errors import NonDeterministicSQLError
from airflow_idempotent.lint.parsing import (
    NAME_KEY,
    START_KEY,
    dialect_name,
    parse_one_statement,
    parse_statements,
)

__all__ = [
    "CLOCK",
    "RANDOM",
    "SEQUENCE",
    "Finding",
    "check_deterministic",
    "find_nondeterminism",
    "locate_nondeterminism",
]

# The package's name, as before the split: logging configuration names this logger.
log = logging.getLogger("airflow_idempotent.lint")

CLOCK = "clock"
RANDOM = "random"
SEQUENCE = "sequence"

# Typed nodes sqlglot builds for clock/random/sequence functions, with the name to report when
# the written name is unknown (an expression not parsed here). Looked up with getattr so that an
# older sqlglot without some of these classes still works.
_TYPED: tuple[tuple[str, str, str], ...] = (
    ("CurrentDate", "current_date", CLOCK),
    ("CurrentDatetime", "current_datetime", CLOCK),
    ("CurrentTime", "current_time", CLOCK),
    ("CurrentTimestamp", "current_timestamp", CLOCK),
    ("CurrentTimestampLTZ", "current_timestamp", CLOCK),
    ("Localtime", "localtime", CLOCK),
    ("Localtimestamp", "localtimestamp", CLOCK),
    ("Systimestamp", "systimestamp", CLOCK),
    ("UtcDate", "utc_date", CLOCK),
    ("UtcTime", "utc_time", CLOCK),
    ("UtcTimestamp", "utc_timestamp", CLOCK),
    ("Rand", "random", RANDOM),
    ("Randn", "randn", RANDOM),
    ("Randstr", "randstr", RANDOM),
    ("Uuid", "uuid", RANDOM),
    ("NextValueFor", "next value for", SEQUENCE),
    ("Seq1", "seq1", SEQUENCE),
    ("Seq2", "seq2", SEQUENCE),
    ("Seq4", "seq4", SEQUENCE),
    ("Seq8", "seq8", SEQUENCE),
)
_TYPED_NODES: dict[type[exp.Expression], tuple[str, str]] = {
    cls: (name, kind) for cls_name, name, kind in _TYPED if (cls := getattr(exp, cls_name, None)) is not None
}

# Functions sqlglot leaves as exp.Anonymous (or that we recognise by their written name).
_NAMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "now",
            "current_date",
            "current_time",
            "current_timestamp",
            "current_datetime",
            "current_localtime",
            "current_localtimestamp",
            "localtime",
            "localtimestamp",
            "sysdate",
            "systimestamp",
            "getdate",
            "getutcdate",
            "sysdatetime",
            "sysdatetimeoffset",
            "sysutcdatetime",
            "curdate",
            "curtime",
            "utc_date",
            "utc_time",
            "utc_timestamp",
            "clock_timestamp",
            "statement_timestamp",
            "transaction_timestamp",
            "timeofday",
            "today",
            "get_current_time",
            "get_current_timestamp",
        ),
        CLOCK,
    ),
    **dict.fromkeys(
        (
            "random",
            "rand",
            "randn",
            "random_normal",
            "random_uuid",
            "uuid",
            "uuidv4",
            "uuidv7",
            "uuid_short",
            "uuid_generate_v1",
            "uuid_generate_v1mc",
            "uuid_generate_v4",
            "gen_random_uuid",
            "newid",
            "newsequentialid",
            "sys_guid",
            "setseed",
            "random_bytes",
            "gen_random_bytes",
            "gen_salt",
            "randomblob",
        ),
        RANDOM,
    ),
    **dict.fromkeys(
        (
            "nextval",
            "currval",
            "lastval",
            "setval",
            "last_insert_id",
            "last_insert_rowid",
            "scope_identity",
        ),
        SEQUENCE,
    ),
}

# Spark's functions whose result depends on the run, not on the rows: randomness, and row ids or
# file names that depend on how the input happens to be split into partitions and files; reflect()
# and java_method() call any JVM method (java.util.UUID.randomUUID, System.currentTimeMillis).
_DIALECT_NAMES: dict[str, dict[str, str]] = {
    "spark": {
        **dict.fromkeys(("shuffle", "uniform", "reflect", "java_method", "try_reflect"), RANDOM),
        **dict.fromkeys(
            (
                "monotonically_increasing_id",
                "spark_partition_id",
                "input_file_name",
                "input_file_block_start",
                "input_file_block_length",
            ),
            SEQUENCE,
        ),
    },
}

# Deterministic with an argument, a clock read without one (MySQL's UNIX_TIMESTAMP()).
_CLOCK_WITHOUT_ARGS = frozenset({"unix_timestamp"})
# AGE(ts) measures from today's date; AGE(a, b) does not (PostgreSQL, DuckDB).
_CLOCK_WITH_ONE_ARG = {"age": frozenset({"postgres", "duckdb"})}

# Date functions that read the clock when given one of these strings ('now' in SQLite;
# 'today' etc. in PostgreSQL's date('today')), or, in SQLite, no time-value at all.
_DATE_FUNCTIONS = frozenset(
    {"date", "time", "datetime", "timestamp", "julianday", "strftime", "unixepoch", "timediff"}
)
_DATE_NODES: dict[type[exp.Expression], str] = {
    cls: name
    for cls_name, name in (
        ("Date", "date"),
        ("TsOrDsToDate", "date"),
        ("Time", "time"),
        ("Datetime", "datetime"),
        ("Timestamp", "timestamp"),
        ("TimeToStr", "strftime"),
    )
    if (cls := getattr(exp, cls_name, None)) is not None
}
_SPECIAL_STRINGS = frozenset({"now", "today", "tomorrow", "yesterday"})
_NOT_A_VALUE: tuple[type, ...] = tuple(
    cls for cls in (getattr(exp, "Query", None), exp.Select, exp.Subquery, exp.Predicate) if cls is not None
)
# MySQL reserves these words: unquoted and unqualified they are the function, not a column.
_BARE_CLOCK_WORDS = {"mysql": frozenset({"utc_date", "utc_time", "utc_timestamp"})}
_TEMPORAL_TYPES: frozenset[Any] = frozenset(
    getattr(
        exp.DataType,
        "TEMPORAL_TYPES",
        {exp.DataType.Type.DATE, exp.DataType.Type.TIME, exp.DataType.Type.TIMESTAMP},
    )
)


_FIX = (
    "compare with the window parameters :window_start / :window_end (or the {{ window_start }} "
    "template variables) instead of the clock; if this is truly intended, list the function in "
    "allow_functions=[...]"
)


@dataclass(frozen=True)
class Finding:
    """One non-deterministic call: what the user wrote, why it is refused, and where."""

    function: str
    """Lower-case name as the user would recognise it, e.g. "now" or "datetime('now')"."""
    kind: str
    """"clock", "random" or "sequence"."""
    fragment: str
    """The offending SQL fragment regenerated in the dialect, e.g. "NOW()"."""


# --------------------------------------------------------------------------------------------
# Finding non-determinism
# --------------------------------------------------------------------------------------------


def _written_name(node: exp.Expression) -> str | None:
    """The name the user typed, when known: recorded at parse time, or an Anonymous call's name."""
    name = node.meta.get(NAME_KEY)
    if isinstance(name, str):
        return name
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    return None


def _typed(node: exp.Expression) -> tuple[str, str] | None:
    """(canonical name, kind) when sqlglot built a typed clock/random/sequence node."""
    for cls in type(node).__mro__:
        if cls in _TYPED_NODES:
            return _TYPED_NODES[cls]
    return None


def _argument_count(node: exp.Expression) -> int:
    if isinstance(node, exp.Anonymous):
        return len(node.expressions)
    return sum(1 for _ in node.iter_expressions())


def _special_string(node: exp.Expression) -> str | None:
    """A string such as 'now' passed (possibly via CASE/COALESCE) as the call's time-value.

    Subqueries and conditions are not searched: in ``date(CASE WHEN s = 'today' THEN d END)`` the
    literal is compared, not used as a time.
    """
    for sub in node.walk(bfs=False, prune=lambda n: n is not node and isinstance(n, _NOT_A_VALUE)):
        if isinstance(sub, exp.Literal) and sub.is_string and sub.name.strip().lower() in _SPECIAL_STRINGS:
            return sub.name.strip().lower()
    return None


def _synthesised_clock(node: exp.Expression) -> bool:
    """A clock node sqlglot added for an omitted time-value (SQLite's strftime('%s'))."""
    return any(
        sub is not node and NAME_KEY not in sub.meta and (_typed(sub) or ("", ""))[1] == CLOCK
        for sub in node.find_all(*_TYPED_NODES)
    )


def _date_function(node: exp.Expression, dialect: str) -> str | None:
    """SQLite-style date('now') / PostgreSQL date('today'): the reported name, or None."""
    written = _written_name(node)
    name = written if written in _DATE_FUNCTIONS else None
    if name is None and written is None:
        name = _DATE_NODES.get(type(node))
    if name is None:
        return None
    special = _special_string(node)
    if special is not None:
        return f"{name}('{special}')"
    if dialect == "sqlite":
        count = _argument_count(node)
        if count == 0 or (name == "strftime" and count == 1 and isinstance(node, exp.Anonymous)):
            return f"{name}('now')"
        if _synthesised_clock(node):
            return f"{name}('now')"
    return None


def _special_cast(node: exp.Expression, dialect: str) -> str | None:
    """PostgreSQL's 'now'::timestamp, CAST('today' AS DATE), timestamp 'now': the name, or None."""
    if not isinstance(node, exp.Cast):
        return None
    value, to = node.this, node.args.get("to")
    if not (isinstance(value, exp.Literal) and value.is_string and isinstance(to, exp.DataType)):
        return None
    special = value.name.strip().lower()
    if special not in _SPECIAL_STRINGS or to.this not in _TEMPORAL_TYPES:
        return None
    try:
        type_name = to.sql(dialect=dialect).lower()
    except Exception:  # the generator can fail on odd trees; the enum name is still meaningful
        type_name = str(to.this.value).lower()
    return f"'{special}'::{type_name}"


def _classify(node: exp.Expression, dialect: str) -> tuple[str, str, bool] | None:
    """(function, kind, prune) when the node is non-deterministic; prune skips its subtree."""
    if isinstance(node, exp.Column):
        words = _BARE_CLOCK_WORDS.get(dialect, frozenset())
        ident = node.this
        if (
            words
            and not node.table
            and isinstance(ident, exp.Identifier)
            and not ident.quoted
            and ident.name.lower() in words
        ):
            return ident.name.lower(), CLOCK, True
        return None
    if not isinstance(node, (exp.Func, exp.Cast)):
        return None
    date_name = _date_function(node, dialect)
    if date_name is not None:
        return date_name, CLOCK, True
    cast_name = _special_cast(node, dialect)
    if cast_name is not None:
        return cast_name, CLOCK, True
    written = _written_name(node)
    typed = _typed(node)
    if typed is not None:
        if isinstance(node, exp.Uuid) and node.args.get("name") is not None:
            return None  # a name-based (v3/v5) UUID is a pure function of its arguments
        canonical, kind = typed
        return written or canonical, kind, False
    if written is None:
        return None
    if written in _NAMES:
        return written, _NAMES[written], False
    if written in _DIALECT_NAMES.get(dialect, {}):
        return written, _DIALECT_NAMES[dialect][written], False
    if written in _CLOCK_WITHOUT_ARGS and _argument_count(node) == 0:
        return written, CLOCK, False
    if dialect in _CLOCK_WITH_ONE_ARG.get(written, ()) and _argument_count(node) == 1:
        return written, CLOCK, False
    return None


def _fragment(node: exp.Expression, dialect: str, function: str) -> str:
    """The node regenerated in the dialect; sqlglot's generator can fail where its parser did not."""
    for target in (dialect, None):
        try:
            return node.sql(dialect=target)
        except Exception:
            continue
    return f"{function.upper()}(...)"


def _position(node: exp.Expression) -> int | None:
    start = node.meta.get(START_KEY, node.meta.get("start"))
    return start if isinstance(start, int) else None


def _walk(root: exp.Expression, dialect: str) -> Iterator[tuple[int, Finding, exp.Expression]]:
    """Pre-order walk yielding (approximate source offset, finding, the call's node)."""
    last_position = -1
    stack: list[exp.Expression] = [root]
    while stack:
        node = stack.pop()
        position = _position(node)
        if position is not None:
            last_position = position
        hit = _classify(node, dialect)
        if hit is not None:
            function, kind, prune = hit
            if position is None and (isinstance(node, exp.Cast) and isinstance(node.this, exp.Expression)):
                position = _position(node.this)
            yield (
                position if position is not None else last_position,
                Finding(function=function, kind=kind, fragment=_fragment(node, dialect, function)),
                node,
            )
            if prune:
                continue
        stack.extend(node.iter_expressions(reverse=True))


def locate_nondeterminism(
    root: exp.Expression, dialect: str
) -> list[tuple[int | None, Finding, exp.Expression]]:
    """Every clock, randomness or sequence read under `root`, in walk order: the offset of the
    function's name in the parsed text (None when the parser did not record it), the finding, and
    the call's node (so a caller can see what encloses it)."""
    name = dialect_name(dialect)
    return [(at if at >= 0 else None, finding, node) for at, finding, node in _walk(root, name)]


def find_nondeterminism(sql: str | exp.Expression, dialect: str) -> list[Finding]:
    """Every clock, randomness or sequence read in the statement(s), in source order, deduplicated.

    A string may hold several statements (each is checked); an expression is checked as given.
    """
    name = dialect_name(dialect)
    roots = parse_statements(sql, name) if isinstance(sql, str) else [sql]
    hits: list[tuple[int, int, Finding]] = []
    for root in roots:
        for position, finding, _node in _walk(root, name):
            hits.append((position, len(hits), finding))
    hits.sort(key=lambda hit: (hit[0], hit[1]))
    seen: set[tuple[str, str]] = set()
    findings: list[Finding] = []
    for _, _, finding in hits:
        key = (finding.function, finding.fragment)
        if key not in seen:
            seen.add(key)
            findings.append(finding)
    return findings


def check_deterministic(sql: str, dialect: str, allow: Iterable[str] = ()) -> exp.Expression:
    """Parse one statement and refuse it if a rerun could not reproduce the first run.

    Functions named in ``allow`` (case-insensitive) pass with a warning: the caller has said the
    non-determinism is intended. Returns the parsed statement (a copy of its own for each call).
    """
    parsed, findings = _linted(sql, dialect)
    allowed = {allow.strip().lower()} if isinstance(allow, str) else {a.strip().lower() for a in allow}
    refused: list[Finding] = []
    for finding in findings:
        if finding.function in allowed:
            log.warning(
                "allowed by allow_functions: %s (%s: %s); a rerun of this window may not reproduce "
                "the first run",
                finding.function,
                finding.kind,
                finding.fragment,
            )
        else:
            refused.append(finding)
    if refused:
        listed = ", ".join(f"{f.function} ({f.kind}: {f.fragment})" for f in refused)
        names = ", ".join(repr(f.function) for f in refused)
        raise NonDeterministicSQLError(
            f"the SQL is not deterministic: it calls {listed}, so a rerun of this window would not "
            f"reproduce the first run. Fix: {_FIX}, e.g. allow_functions=[{names}]."
        )
    return parsed.copy()


def parsed_statement(sql: str, dialect: str) -> exp.Expression:
    """`check_deterministic`'s parse of `sql` without its checks (a copy of the process's one
    parse): for what is a function of the text alone, e.g. the fingerprint's rendering of it."""
    return _linted(sql, dialect)[0].copy()


@functools.lru_cache(maxsize=256)
def _linted(sql: str, dialect: str) -> tuple[exp.Expression, tuple[Finding, ...]]:
    """The statement parsed and its findings, once per text and dialect in a process (a task's
    rendered SQL, the preview's, a retry's): pure, and the callers only read what it returns
    (`check_deterministic` copies the tree, warns and refuses on every call)."""
    expression = parse_one_statement(sql, dialect)
    return expression, tuple(find_nondeterminism(expression, dialect))
