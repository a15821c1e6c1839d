"""String values of Python expressions, with where each piece is written (`Located`).

`text_of` evaluates what the linter can know without running anything: literals (one place per
implicitly concatenated piece), f-strings (each literal piece and field placed where written, read
from the source text by `pystrings`, since the syntax tree does not place them), ``+``, ``join``,
``.format``, ``strip``, a Jinja template's text, paths (``os.path.join``, ``Path(..) / ..``,
``__file__``), names through `ValueScope.value`. A part only known at run time becomes a name
standing for it (`UNRESOLVED`).
"""

from __future__ import annotations

import ast
import posixpath
import re
import string
from typing import Any, Protocol

from airflow_idempotent.lint.pystrings import Field, Literal, scan_strings
from airflow_idempotent.lint.source import UNRESOLVED, Located, Source, deployed_path
from airflow_idempotent.lint.syntax import dotted, keywords

__all__ = ["ValueScope", "opened_by_with", "standing_name", "text_of"]


class ValueScope(Protocol):
    """What evaluating a string needs of a scope (`scope.Scope`): names' values, literals, lists."""

    source: Source

    def value(self, node: ast.expr | None, _depth: int = 0) -> tuple[ast.expr | None, ValueScope]: ...

    def literal(self, node: ast.expr | None) -> Any: ...

    def strings(self, node: ast.expr | None) -> list[Located]: ...


_PATH_CALLS = frozenset({"Path", "PurePath", "PosixPath", "pathlib.Path", "os.path.join", "path.join"})
_IDENTITY_CALLS = frozenset(
    {"str", "os.fspath", "os.path.abspath", "os.path.realpath", "os.path.normpath", "os.path.expanduser"}
)
_IDENTITY_METHODS = frozenset({"resolve", "absolute", "expanduser", "as_posix"})


def text_of(scope: ValueScope, node: ast.expr, depth: int = 0) -> Located | None:
    """The text of `node` read in `scope`, with the place of every piece; None if not static."""
    return _text(scope, node, depth)


def _text(here: ValueScope, node: ast.expr, depth: int) -> Located | None:
    if depth > 12:
        return None
    value, scope = here.value(node, depth)
    if value is None:
        return None
    if value is not node or scope is not here:
        return _text(scope, value, depth + 1)
    if isinstance(node, ast.Constant):
        return _constant_text(scope, node) if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return _fstring_text(scope, node, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Div):
        left = _text(scope, node.left, depth + 1)
        right = _text(scope, node.right, depth + 1)
        if left is None and right is None:
            return None
        pieces: list[Located | str] = [left or _unknown(scope, node.left)]
        if isinstance(node.op, ast.Div):
            pieces.append("/")
        pieces.append(right or _unknown(scope, node.right))
        return Located.join(pieces)
    if isinstance(node, ast.Name) and node.id == "__file__":
        return _synthetic(scope, str(scope.source.path), node)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _text(scope, node.value, depth + 1)
        return _synthetic(scope, posixpath.dirname(inner.text), node) if inner is not None else None
    if isinstance(node, ast.Call):
        return _call_text(scope, node, depth)
    return None


def _call_text(scope: ValueScope, node: ast.Call, depth: int) -> Located | None:
    name = dotted(node.func)
    method = node.func.attr if isinstance(node.func, ast.Attribute) else None
    if name in ("textwrap.dedent", "dedent", *_IDENTITY_CALLS) and node.args:
        return _text(scope, node.args[0], depth + 1)
    if method in _IDENTITY_METHODS and isinstance(node.func, ast.Attribute):
        return _text(scope, node.func.value, depth + 1)
    if method in ("strip", "lstrip", "rstrip") and not node.args and isinstance(node.func, ast.Attribute):
        inner = _text(scope, node.func.value, depth + 1)
        if inner is None:
            return None
        stripped = getattr(inner.text, method)()
        begin = inner.text.find(stripped) if stripped else 0
        return inner.slice(begin, begin + len(stripped))
    if method == "join" and isinstance(node.func, ast.Attribute) and len(node.args) == 1:
        separator = scope.literal(node.func.value)
        if isinstance(separator, str):
            items = scope.strings(node.args[0])
            if not items:
                return None
            pieces: list[Located | str] = []
            for i, item in enumerate(items):
                pieces.extend([separator, item] if i else [item])
            return Located.join(pieces)
    if name in _PATH_CALLS or (method == "joinpath" and isinstance(node.func, ast.Attribute)):
        parts = [node.func.value] if method == "joinpath" and isinstance(node.func, ast.Attribute) else []
        texts = [_text(scope, a, depth + 1) for a in [*parts, *node.args]]
        if not texts or any(t is None for t in texts):
            return None
        joined = posixpath.join(*[t.text for t in texts if t is not None])
        return _synthetic(scope, joined, node)
    if name in ("os.path.dirname", "path.dirname") and node.args:
        inner = _text(scope, node.args[0], depth + 1)
        return _synthetic(scope, posixpath.dirname(inner.text), node) if inner is not None else None
    if method == "format" and isinstance(node.func, ast.Attribute):
        return _format_text(scope, node, depth)
    if method in ("read", "read_text") and isinstance(node.func, ast.Attribute) and not node.args:
        return _file_text(scope, node.func.value, depth)
    if method == "render" and isinstance(node.func, ast.Attribute):
        return _template_text(scope, node, depth)
    return None


def _template_text(scope: ValueScope, render: ast.Call, depth: int) -> Located | None:
    """``Template(sql).render(table=T)`` (also ``env.from_string(sql)``): the template's text, a
    ``{{ name }}`` field the call gives a known text filled with it (``#temp_counts``), any other field
    left as written (``{{ ds }}`` reads as the run's window, as Airflow's own rendering does)."""
    assert isinstance(render.func, ast.Attribute)
    value, where = scope.value(render.func.value, depth)
    if not (isinstance(value, ast.Call) and len(value.args) == 1):
        return None
    if dotted(value.func).split(".")[-1] not in ("Template", "from_string"):
        return None
    template = _text(where, value.args[0], depth + 1)
    if template is None:
        return None
    named = keywords(render)
    pieces: list[Located | str] = []
    position = 0
    for field in re.finditer(r"\{\{\s*(\w+)\s*\}\}", template.text):
        given = named.get(field.group(1))
        filled = _text(scope, given, depth + 1) if given is not None else None
        if filled is None:
            continue
        pieces.extend([template.slice(position, field.start()), filled])
        position = field.end()
    if not pieces:
        return template
    pieces.append(template.slice(position))
    return Located.join(pieces)


def _file_text(scope: ValueScope, owner: ast.expr, depth: int) -> Located | None:
    """The text of a project's ``.sql`` file the code reads: ``Path(..).read_text()``,
    ``open(..).read()``, ``f.read()`` in ``with open(..) as f``. A relative path is the process's
    working directory's, unknown here: it is looked for below the DAG's folder and the three above
    it, as a deployed path is. Only ``.sql`` files: another file's text is not the task's SQL."""
    path = owner
    if isinstance(owner, ast.Name):
        path = opened_by_with(getattr(scope, "tree", None), owner) or owner
    if isinstance(path, ast.Call) and dotted(path.func) in ("open", "io.open") and path.args:
        path = path.args[0]
    named = _text(scope, path, depth + 1)
    workspace = getattr(scope, "workspace", None)
    if named is None or named.unresolved or not named.text.endswith(".sql") or workspace is None:
        return None
    found = deployed_path(named.text if posixpath.isabs(named.text) else "/" + named.text, scope.source.path)
    src = workspace.source(found) if found is not None and found.is_file() else None
    return Located.of_file(src) if src is not None else None


def opened_by_with(tree: ast.AST | None, name: ast.Name) -> ast.expr | None:
    """What the ``with`` around `name` (the innermost that binds it) opened: ``with open(..) as f``."""
    found = [
        item.context_expr
        for node in (ast.walk(tree) if tree is not None else ())
        if isinstance(node, ast.With | ast.AsyncWith)
        and any(n is name for stmt in node.body for n in ast.walk(stmt))
        for item in node.items
        if isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == name.id
    ]
    return found[-1] if found else None


def _format_text(scope: ValueScope, node: ast.Call, depth: int) -> Located | None:
    """``"INSERT INTO {table} ...".format(table=T)``: fields filled with what the linter knows."""
    assert isinstance(node.func, ast.Attribute)
    template = _text(scope, node.func.value, depth + 1)
    if template is None:
        return None
    named = keywords(node)
    out: list[str] = []
    position = 0
    try:
        for literal, field_name, _spec, _conv in string.Formatter().parse(template.text):
            out.append(literal)
            if field_name is None:
                continue
            key = field_name.split(".")[0].split("[")[0]
            arg: ast.expr | None
            if key == "" or key.isdigit():
                index = position if key == "" else int(key)
                position += 1
                arg = node.args[index] if index < len(node.args) else None
            else:
                arg = named.get(key)
            text = _text(scope, arg, depth + 1) if arg is not None else None
            out.append(text.text if text is not None else UNRESOLVED + _ident(key or "value"))
    except ValueError:
        return None
    return Located("".join(out), template.marks[:1])


def _constant_text(scope: ValueScope, node: ast.Constant) -> Located:
    """A str constant, one mark per literal piece (implicit concatenation spreads it over lines)."""
    src = scope.source
    fallback = Located(str(node.value), [(0, src, *_lines(node))])
    if getattr(node, "lineno", None) is None:
        return fallback
    start = src.offset(node.lineno, node.col_offset)
    end = src.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
    pieces: list[Located | str] = []
    for token in scan_strings(src.text, start, end):
        if token.is_f:
            return fallback
        try:
            text = ast.literal_eval(src.text[token.start : token.end])
        except (ValueError, SyntaxError):
            return fallback
        if not isinstance(text, str):
            return fallback
        pieces.append(Located(text, [(0, src, src.line_of(token.start), src.line_of(token.end))]))
    joined = Located.join(pieces)
    return joined if joined is not None and joined.text == node.value else fallback


def _fstring_text(scope: ValueScope, node: ast.JoinedStr, depth: int) -> Located | None:
    """An f-string: literal pieces placed where written, fields by what they stand for."""
    fields = [v for v in node.values if isinstance(v, ast.FormattedValue)]
    located = _scanned_fstring(scope, node, fields, depth)
    if located is not None:
        return located
    pieces: list[Located | str] = []  # from the syntax tree alone: all on the f-string's line
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            pieces.append(value.value)
        elif isinstance(value, ast.FormattedValue):
            pieces.append(_field_text(scope, value, node, depth).text)
    return Located("".join(str(p) for p in pieces), [(0, scope.source, *_lines(node))])


def _scanned_fstring(
    scope: ValueScope, node: ast.JoinedStr, fields: list[ast.FormattedValue], depth: int
) -> Located | None:
    src = scope.source
    if getattr(node, "lineno", None) is None:
        return None
    start = src.offset(node.lineno, node.col_offset)
    end = src.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
    pieces: list[Located | str] = []
    literal_text: list[str] = []
    queue = list(fields)
    for token in scan_strings(src.text, start, end):
        parts = token.parts if token.is_f else [Literal(token.start, token.end)]
        for part in parts:
            if isinstance(part, Field):
                if not queue:
                    return None
                pieces.append(_field_text(scope, queue.pop(0), node, depth))
                continue
            raw = src.text[part.start : part.end]
            try:
                if token.is_f:
                    quoted = token.prefix.replace("f", "").replace("F", "") + token.quote
                    raw = raw.replace("{{", "{").replace("}}", "}")
                    text = ast.literal_eval(quoted + raw + token.quote)
                else:
                    text = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                return None
            if not isinstance(text, str):
                return None
            literal_text.append(text)
            pieces.append(Located(text, [(0, src, src.line_of(part.start), src.line_of(part.end))]))
    expected = "".join(
        v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
    )
    if queue or "".join(literal_text) != expected:
        return None
    return Located.join(pieces) or Located("", [(0, src, *_lines(node))])


def _field_text(scope: ValueScope, value: ast.FormattedValue, owner: ast.expr, depth: int) -> Located:
    """What an f-string field renders to, or the name standing for it."""
    inner = _text(scope, value.value, depth + 1)
    if inner is None:
        literal = scope.literal(value.value)
        if isinstance(literal, int | float) and not isinstance(literal, bool):
            inner = Located(str(literal), [(0, scope.source, *_lines(value.value))])
    if inner is None:
        return _unknown(scope, value.value)
    if value.conversion in (ord("r"), ord("a")):
        return Located(repr(inner.text), inner.marks[:1])
    if value.format_spec is not None:
        spec = scope.literal(value.format_spec)
        try:
            return Located(format(inner.text, spec if isinstance(spec, str) else ""), inner.marks[:1])
        except (ValueError, TypeError):
            return _unknown(scope, value.value)
    return inner


def standing_name(node: ast.expr, schema: object = None) -> str:
    """The name that stands for `node`'s value in a string the linter reads (``{names[i]}`` in an
    f-string renders to it), after `schema` when it is one: a table named at run time by the same
    expression elsewhere (``TRUNCATE ecommdata.{names[i]}``) gets the same, lowercased, name."""
    prefix = f"{schema}." if isinstance(schema, str) else ""
    return (prefix + UNRESOLVED + _ident(ast.unparse(node))).lower()


def _unknown(scope: ValueScope, node: ast.expr) -> Located:
    """The name standing for a value the linter cannot know, placed where it is written."""
    return Located(UNRESOLVED + _ident(ast.unparse(node)), [(0, scope.source, *_lines(node))])


def _synthetic(scope: ValueScope, text: str, node: ast.AST) -> Located:
    return Located(text, [(0, scope.source, *_lines(node))])


def _lines(node: ast.AST) -> tuple[int, int]:
    first = getattr(node, "lineno", None) or 1
    return first, getattr(node, "end_lineno", None) or first


def _ident(text: str) -> str:
    """An identifier made of an expression's text: ``cfg["schema"]`` -> ``cfg_schema``."""
    return re.sub(r"\W+", "_", text).strip("_")[:40] or "value"
