"""Parse SQL as the determinism check reads it: every statement, bind parameters in every style.

The operators' runtime check (`airflow_idempotent.lint.sql`) and the DAG linter's SQL facts both
parse through here, so a statement one accepts the other reads the same way. The parser records the
function name as the user wrote it (sqlglot maps e.g. ``NOW()`` to ``CurrentTimestamp``) under
`NAME_KEY`, and its source offset under `START_KEY`, in each node's ``meta``.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from airflow_idempotent.errors import SqlParseError

__all__ = [
    "DIALECTS",
    "FALLBACK_DIALECTS",
    "NAME_KEY",
    "START_KEY",
    "dialect_name",
    "parse_one_statement",
    "parse_statements",
    "parse_statements_at",
]

#: sqlglot dialect names we support. MariaDB uses "mysql".
DIALECTS: tuple[str, ...] = ("postgres", "mysql", "sqlite", "duckdb", "spark")
#: Dialects the DAG linter tries last, for SQL none of DIALECTS reads (SQL Server's ``CONVERT(DATE,
#: x)``, ``GETDATE() - 1``): read to find clock reads and writes, never an operator's dialect.
FALLBACK_DIALECTS: tuple[str, ...] = ("tsql",)

_SEMICOLON: tuple[type[exp.Expression], ...] = tuple(
    cls for cls in (getattr(exp, "Semicolon", None),) if cls is not None
)

NAME_KEY = "airflow_idempotent.function"
"""``node.meta`` key of the function name as written (lower case), set by the parser."""
START_KEY = "airflow_idempotent.start"
"""``node.meta`` key of the written function name's source offset, set by the parser."""


def dialect_name(dialect: str) -> str:
    """Validate the dialect early: a wrong dialect parses SQL wrongly, so checks would mislead."""
    name = dialect.strip().lower() if isinstance(dialect, str) else dialect
    if name not in DIALECTS and name not in FALLBACK_DIALECTS:
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
    if NAME_KEY not in node.meta:  # the innermost call wins when a builder returns an argument
        node.meta[NAME_KEY] = token.text.lower()
        node.meta[START_KEY] = token.start


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


def parse_statements(sql: str, dialect: str) -> list[exp.Expression]:
    """Parse every statement with the lint parser; raise SqlParseError on anything unreadable."""
    return [stmt for stmt, _ in parse_statements_at(sql, dialect)]


def parse_statements_at(sql: str, dialect: str) -> list[tuple[exp.Expression, int | None]]:
    """Every statement (as `parse_statements`) with the offset of its first token in `sql`, so a
    finding about a statement is placed where the statement is written."""
    name = dialect_name(dialect)
    if not isinstance(sql, str):
        raise SqlParseError(f"expected the SQL as a string, got {type(sql).__name__}")
    try:
        dialect_obj = Dialect.get_or_raise(name)
        tokens = _normalise_placeholders(dialect_obj.tokenize(sql), sql)
        parser = _lint_parser_class(name)(dialect=dialect_obj)
        parsed = parser.parse(tokens, sql)
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
    chunks = getattr(parser, "_chunks", None)  # sqlglot's statement chunks, one per parsed statement
    starts: list[int | None] = [None] * len(parsed)
    if isinstance(chunks, list) and len(chunks) == len(parsed):
        starts = [chunk[0].start if chunk else None for chunk in chunks]
    # sqlglot keeps a comment after the last semicolon as a Semicolon node: not a statement.
    statements = [
        (stmt, start)
        for stmt, start in zip(parsed, starts, strict=True)
        if isinstance(stmt, exp.Expression) and not isinstance(stmt, _SEMICOLON)
    ]
    for stmt, _ in statements:
        if isinstance(stmt, exp.Command):
            raise SqlParseError(
                f"could not parse the SQL as {name}: sqlglot understood only {stmt.name!r} and kept "
                "the rest as opaque text, so it cannot be checked; give one SELECT statement and run "
                "other statements in their own task"
            )
    return statements


def parse_one_statement(sql: str, dialect: str) -> exp.Expression:
    """Parse exactly one statement, so that everything the lint checks is everything that runs."""
    statements = parse_statements(sql, dialect)
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
