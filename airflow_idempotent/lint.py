"""Determinism lint: refuse SQL that reads the clock, randomness or a sequence before it runs.

A windowed job is safe to rerun only if running it again over the same window gives the same
rows (f(f(x)) == f(x)). SQL that calls ``now()``, ``random()`` or ``nextval()`` gives different
rows on every run, so a rerun silently rewrites history. The check walks sqlglot's AST (not the
SQL text), so a column named ``now`` or a literal ``'nowhere'`` is never mistaken for a call.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from airflow_idempotent.errors import NonDeterministicSQLError, SqlParseError

__all__ = [
    "DIALECTS",
    "Finding",
    "check_deterministic",
    "find_nondeterminism",
    "parse_one_statement",
]

log = logging.getLogger(__name__)

#: sqlglot dialect names we support. MariaDB uses "mysql".
DIALECTS: tuple[str, ...] = ("postgres", "mysql", "sqlite", "duckdb", "spark")

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

_SEMICOLON: tuple[type[exp.Expression], ...] = tuple(
    cls for cls in (getattr(exp, "Semicolon", None),) if cls is not None
)

_NAME_KEY = "airflow_idempotent.function"
_START_KEY = "airflow_idempotent.start"

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
# Parsing
# --------------------------------------------------------------------------------------------


def _dialect_name(dialect: str) -> str:
    """Validate the dialect early: a wrong dialect parses SQL wrongly, so checks would mislead."""
    name = dialect.strip().lower() if isinstance(dialect, str) else dialect
    if name not in DIALECTS:
        raise SqlParseError(
            f"unknown SQL dialect {dialect!r}: use one of {', '.join(DIALECTS)} (MariaDB uses 'mysql')"
        )
    return name


def _remember_written_name(node: Any, token: Token | None) -> None:
    """Record the function name as written, since sqlglot maps e.g. NOW() to CurrentTimestamp."""
    if token is None or not isinstance(node, exp.Expression):
        return
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Expression):
        node = node.this
    if _NAME_KEY not in node.meta:  # the innermost call wins when a builder returns an argument
        node.meta[_NAME_KEY] = token.text.lower()
        node.meta[_START_KEY] = token.start


@functools.cache
def _lint_parser_class(dialect: str) -> Any:
    """The dialect's parser, extended to record written function names and parse placeholders."""
    base: Any = Dialect.get_or_raise(dialect).parser_class
    fallback = base.PLACEHOLDER_PARSERS.get(TokenType.PLACEHOLDER)

    def parse_placeholder(self: Any) -> exp.Expression | None:
        text: str = self._prev.text
        if text.startswith(":"):
            return exp.Placeholder(this=text[1:])
        if text.startswith("%("):
            return exp.Placeholder(this=text[2:-2])
        if text == "%s":
            return exp.Placeholder()
        return fallback(self) if fallback is not None else exp.Placeholder()

    class _LintParser(base):  # type: ignore[misc, valid-type]
        PLACEHOLDER_PARSERS: ClassVar[dict[Any, Any]] = {
            **base.PLACEHOLDER_PARSERS,
            TokenType.PLACEHOLDER: parse_placeholder,
        }

        def _parse_function_call(self, *args: Any, **kwargs: Any) -> Any:
            token = self._curr
            node = super()._parse_function_call(*args, **kwargs)
            _remember_written_name(node, token)
            return node

    _LintParser.__name__ = _LintParser.__qualname__ = f"_Lint{base.__name__}"
    return _LintParser


def _adjacent(left: Token, right: Token) -> bool:
    return left.end + 1 == right.start


def _is_name(token: Token) -> bool:
    text = token.text
    return (
        token.token_type != TokenType.STRING
        and (text[:1].isalpha() or text[:1] == "_")
        and (text.replace("_", "").isalnum())
    )


_OPERAND_END = frozenset(
    {
        TokenType.VAR,
        TokenType.IDENTIFIER,
        TokenType.NUMBER,
        TokenType.STRING,
        TokenType.R_PAREN,
        TokenType.R_BRACKET,
    }
)


def _merge(tokens: list[Token], text: str) -> Token:
    """One PLACEHOLDER token standing for a bind parameter written as several tokens."""
    first, last = tokens[0], tokens[-1]
    comments = [c for tok in tokens for c in tok.comments]
    return Token(TokenType.PLACEHOLDER, text, first.line, first.col, first.start, last.end, comments)


def _normalise_placeholders(tokens: list[Token], sql: str) -> list[Token]:
    """Turn :name, %(name)s and %s into single placeholder tokens, in every dialect.

    sqlglot reads these differently per dialect (DuckDB takes ``SELECT :x`` for a prefix alias,
    MySQL/SQLite/DuckDB reject ``%(x)s``), yet they are the bind styles our SQL is written in.
    The ``:name`` rule mirrors SQLAlchemy's text(): not after a word character, a colon or a
    backslash, and the name touches the colon.
    """
    out: list[Token] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < n else None
        if (
            tok.token_type == TokenType.COLON
            and nxt is not None
            and _adjacent(tok, nxt)
            and _is_name(nxt)
            and (tok.start == 0 or not (sql[tok.start - 1].isalnum() or sql[tok.start - 1] in "_:\\"))
        ):
            out.append(_merge([tok, nxt], f":{nxt.text}"))
            i += 2
            continue
        if tok.token_type == TokenType.MOD and nxt is not None and _adjacent(tok, nxt):
            group = tokens[i : i + 5]
            if (
                len(group) == 5
                and [g.token_type for g in group[1:4:2]] == [TokenType.L_PAREN, TokenType.R_PAREN]
                and _is_name(group[2])
                and group[4].text == "s"
                and all(_adjacent(a, b) for a, b in itertools.pairwise(group))
            ):
                out.append(_merge(group, f"%({group[2].text})s"))
                i += 5
                continue
            if nxt.text == "s" and (not out or out[-1].token_type not in _OPERAND_END):
                out.append(_merge([tok, nxt], "%s"))
                i += 2
                continue
        out.append(tok)
        i += 1
    return out


def _describe_parse_error(error: ParseError) -> str:
    """The first parse error, without the terminal colour codes sqlglot puts in its message."""
    if not error.errors:
        return str(error).replace("\x1b[4m", "").replace("\x1b[0m", "")
    first = error.errors[0]
    near = f"{first.get('start_context') or ''}{first.get('highlight') or ''}".strip()[-60:]
    return (
        f"{first.get('description')} at line {first.get('line')}, column {first.get('col')} (near {near!r})"
    )


def _parse(sql: str, dialect: str) -> list[exp.Expression]:
    """Parse every statement with the lint parser; raise SqlParseError on anything unreadable."""
    name = _dialect_name(dialect)
    if not isinstance(sql, str):
        raise SqlParseError(f"expected the SQL as a string, got {type(sql).__name__}")
    try:
        dialect_obj = Dialect.get_or_raise(name)
        tokens = _normalise_placeholders(dialect_obj.tokenize(sql), sql)
        parsed = _lint_parser_class(name)(dialect=dialect_obj).parse(tokens, sql)
    except ParseError as err:
        raise SqlParseError(
            f"could not parse the SQL as {name}: {_describe_parse_error(err)}; fix the syntax, or "
            f"check that the connection's dialect is {name}"
        ) from err
    except Exception as err:  # TokenError, or a plain Python error from inside sqlglot
        raise SqlParseError(
            f"could not parse the SQL as {name} ({type(err).__name__}: {err}); fix the syntax, or "
            f"check that the connection's dialect is {name}"
        ) from err
    # sqlglot keeps a comment after the last semicolon as a Semicolon node: not a statement.
    statements = [
        stmt for stmt in parsed if isinstance(stmt, exp.Expression) and not isinstance(stmt, _SEMICOLON)
    ]
    for stmt in statements:
        if isinstance(stmt, exp.Command):
            raise SqlParseError(
                f"could not parse the SQL as {name}: sqlglot understood only {stmt.name!r} and kept "
                "the rest as opaque text, so it cannot be checked; give one SELECT statement and run "
                "other statements in their own task"
            )
    return statements


def parse_one_statement(sql: str, dialect: str) -> exp.Expression:
    """Parse exactly one statement, so that everything the lint checks is everything that runs."""
    statements = _parse(sql, dialect)
    if not statements:
        raise SqlParseError(
            "the SQL is empty (nothing but whitespace, comments or semicolons): give one SELECT statement"
        )
    if len(statements) > 1:
        raise SqlParseError(
            f"the SQL holds {len(statements)} statements, but one is expected: give one SELECT "
            "statement; move other statements to their own task"
        )
    return statements[0]


# --------------------------------------------------------------------------------------------
# Finding non-determinism
# --------------------------------------------------------------------------------------------


def _written_name(node: exp.Expression) -> str | None:
    """The name the user typed, when known: recorded at parse time, or an Anonymous call's name."""
    name = node.meta.get(_NAME_KEY)
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
        sub is not node and _NAME_KEY not in sub.meta and (_typed(sub) or ("", ""))[1] == CLOCK
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
    start = node.meta.get(_START_KEY, node.meta.get("start"))
    return start if isinstance(start, int) else None


def _walk(root: exp.Expression, dialect: str) -> Iterator[tuple[int, Finding]]:
    """Pre-order walk yielding (approximate source offset, finding)."""
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
            )
            if prune:
                continue
        stack.extend(node.iter_expressions(reverse=True))


def find_nondeterminism(sql: str | exp.Expression, dialect: str) -> list[Finding]:
    """Every clock, randomness or sequence read in the statement(s), in source order, deduplicated.

    A string may hold several statements (each is checked); an expression is checked as given.
    """
    name = _dialect_name(dialect)
    roots = _parse(sql, name) if isinstance(sql, str) else [sql]
    hits: list[tuple[int, int, Finding]] = []
    for root in roots:
        for position, finding in _walk(root, name):
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
    non-determinism is intended. Returns the parsed statement.
    """
    expression = parse_one_statement(sql, dialect)
    allowed = {allow.strip().lower()} if isinstance(allow, str) else {a.strip().lower() for a in allow}
    refused: list[Finding] = []
    for finding in find_nondeterminism(expression, dialect):
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
    return expression
