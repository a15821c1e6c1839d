"""Parse a DAG file with the newest Python grammar available, not only the running interpreter's.

A file that uses Python 3.12 syntax (nested same-quote f-strings, ``type`` aliases, generic ``def
f[T]``) is valid Python; a linter running on 3.11 must not call it "not valid Python". `parse_module`
tries, in order: the running interpreter; a newer CPython on PATH (``python3.12``, ``python3.13``...),
whose syntax tree is sent back as JSON and rebuilt with this interpreter's node classes; and, for
3.12 syntax on an older interpreter, a rewrite of that syntax into its 3.11 spelling that keeps every
line and column where it was. Either way the result says which Python the file needs, so the report
can say "needs Python 3.12: run the linter under it" next to what it found.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_idempotent.lint.pystrings import Field, StringToken, scan_strings

__all__ = ["ParsedModule", "newer_pythons", "parse_module"]

_RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"

#: Run by a newer interpreter: parse stdin and print its syntax tree as JSON (or the syntax error).
_CHILD = r"""
import ast, json, sys
def enc(node):
    if isinstance(node, ast.AST):
        mro = [c for c in type(node).__mro__ if c is not ast.AST and issubclass(c, ast.AST)]
        out = {"_t": type(node).__name__, "_b": mro[-1].__name__}
        for name in node._fields:
            out[name] = enc(getattr(node, name, None))
        for name in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if hasattr(node, name):
                out[name] = getattr(node, name)
        return out
    if isinstance(node, list):
        return [enc(x) for x in node]
    if isinstance(node, bytes):
        return {"_bytes": node.decode("latin-1")}
    if isinstance(node, complex):
        return {"_complex": [node.real, node.imag]}
    if node is Ellipsis:
        return {"_ellipsis": True}
    return node
try:
    tree = ast.parse(sys.stdin.buffer.read())
except SyntaxError as err:
    print(json.dumps({"_error": err.msg, "lineno": err.lineno}))
else:
    print(json.dumps(enc(tree)))
"""


@dataclass
class ParsedModule:
    """A parsed file, and when the running interpreter could not read it: the Python it needs and how
    the linter read it anyway."""

    tree: ast.Module
    needs: str | None = None
    how: str | None = None

    @property
    def notice(self) -> str | None:
        """The sentence for the report, when the file needs a newer Python than the one running."""
        if self.needs is None:
            return None
        return (
            f"needs Python {self.needs}: run the linter under it (this is Python {_RUNNING}; the file "
            f"was read {self.how}, so its findings stand, but check it with Python {self.needs})"
        )


def parse_module(text: str, filename: str = "<unknown>") -> ParsedModule:
    """Parse `text` with the newest grammar available; SyntaxError (the running interpreter's) when
    no grammar reads it."""
    try:
        return ParsedModule(ast.parse(text, filename=filename))
    except SyntaxError as original:
        for version, python in newer_pythons():
            answer = _parse_with(python, text)
            if answer is None:
                continue  # the interpreter does not run: try the next one
            if "_error" not in answer:
                tree = _decode(answer)
                if isinstance(tree, ast.Module):
                    return ParsedModule(tree, version, f"with the grammar of {python}")
        if sys.version_info < (3, 12):
            rewritten = downgrade_312(text)
            if rewritten != text:
                try:
                    tree = ast.parse(rewritten, filename=filename)
                except SyntaxError:
                    pass
                else:
                    return ParsedModule(tree, "3.12", "by rewriting its Python 3.12 syntax for this parser")
        raise original


@functools.cache
def newer_pythons() -> tuple[tuple[str, str], ...]:
    """(version, path) of the CPython interpreters on PATH newer than the running one that run
    (a version manager's shim for a version not installed does not), oldest first; probed once."""
    found = []
    major, minor = sys.version_info[:2]
    for newer in range(minor + 1, minor + 8):
        path = shutil.which(f"python{major}.{newer}")
        if path is not None and _runs(path, f"{major}.{newer}"):
            found.append((f"{major}.{newer}", path))
    return tuple(found)


def _runs(python: str, version: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.decode(errors="replace").strip() == version


@functools.lru_cache(maxsize=64)
def _parse_with(python: str, text: str) -> dict[str, Any] | None:
    """The JSON syntax tree (or {"_error": ...}) from another interpreter; None when it does not run."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", _CHILD], input=text.encode("utf-8"), capture_output=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _decode(obj: Any) -> Any:
    """A syntax tree node from its JSON form; nodes this Python lacks become their nearest equivalent
    (``type X = ...`` an assignment; an unknown statement ``pass``, an unknown expression ``None``)."""
    if isinstance(obj, list):
        return [node for node in (_decode(x) for x in obj) if node is not _DROP]
    if not isinstance(obj, dict):
        return obj
    if "_bytes" in obj:
        return obj["_bytes"].encode("latin-1")
    if "_complex" in obj:
        return complex(*obj["_complex"])
    if "_ellipsis" in obj:
        return ...
    position = {k: obj[k] for k in ("lineno", "col_offset", "end_lineno", "end_col_offset") if k in obj}
    name, base = obj["_t"], obj.get("_b")
    if name == "TypeAlias" and not hasattr(ast, "TypeAlias"):
        target = _decode(obj["name"])
        return ast.Assign(targets=[target], value=_decode(obj["value"]), type_comment=None, **position)
    cls = getattr(ast, name, None)
    if cls is None or not isinstance(cls, type) or not issubclass(cls, ast.AST):
        if base == "stmt":
            return ast.Pass(**position)
        if base == "expr":
            return ast.Constant(value=None, **position)
        return _DROP
    fields = {k: _decode(obj[k]) for k in cls._fields if k in obj}
    node = cls(**fields)
    for key, value in position.items():
        setattr(node, key, value)
    return node


_DROP = object()


# ---------------------------------------------------------------------------------------------
# Python 3.12 syntax in its 3.11 spelling, every line and column kept
# ---------------------------------------------------------------------------------------------

_QUOTES = ("'", '"')
_TYPE_ALIAS = re.compile(r"^([ \t]*)(type[ \t]+)([A-Za-z_]\w*)([ \t]*)(?=[\[=])", re.MULTILINE)
_GENERIC_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+[A-Za-z_]\w*[ \t]*(?=\[)", re.MULTILINE)


def downgrade_312(text: str) -> str:
    """`text` with Python 3.12's f-string and type-parameter syntax rewritten for Python 3.10/3.11's
    parser, keeping every character's line and column (quotes swapped, fields and brackets blanked)."""
    edits: list[tuple[int, int, str]] = []
    for token in scan_strings(text):
        if token.is_f:
            _fstring_edits(text, token, [token.quote], edits)
    chars = list(text)
    for start, end, replacement in sorted(edits, reverse=True):
        chars[start:end] = replacement
    out = "".join(chars)
    for match in _TYPE_ALIAS.finditer(out):  # type Name[T] = ... -> Name        = ...
        indent, keyword, name, space = match.groups()
        out = out[: match.start()] + indent + name + " " * (len(keyword) + len(space)) + out[match.end() :]
        out = _blank_brackets(out, match.end())
    for match in _GENERIC_DEF.finditer(out):  # def f[T](...) -> def f   (...)
        out = _blank_brackets(out, match.end())
    return out


def _blank_brackets(text: str, i: int) -> str:
    """`text` with the bracketed type parameters starting at `i` (if any) blanked."""
    close = _matching_bracket(text, i) if text[i : i + 1] == "[" else None
    return text if close is None else text[:i] + _blank(text[i : close + 1]) + text[close + 1 :]


def _matching_bracket(text: str, i: int) -> int | None:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "[":
            depth += 1
        elif text[j] == "]":
            depth -= 1
            if depth == 0:
                return j
    return None


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _fstring_edits(
    text: str, token: StringToken, enclosing: Sequence[str], edits: list[tuple[int, int, str]]
) -> None:
    """Edits that make the strings inside `token`'s fields avoid every enclosing quote; a field that
    cannot be rewritten (a backslash, a comment, an unavoidable quote) is blanked to ``None``."""
    for part in token.parts:
        if isinstance(part, Field):
            _field_edits(text, part, enclosing, edits)


def _field_edits(text: str, fld: Field, enclosing: Sequence[str], edits: list[tuple[int, int, str]]) -> None:
    expr = text[fld.expr_start : fld.expr_end]
    singles = [q for q in enclosing if len(q) == 1]
    mine: list[tuple[int, int, str]] = []
    ok = "\\" not in expr and "#" not in _outside_strings(text, fld) and not (singles and "\n" in expr)
    for inner in fld.strings if ok else []:
        requoted = _requote(text, inner, enclosing)
        if requoted is None:
            ok = False
            break
        mine.extend(requoted)
        if inner.is_f:
            _fstring_edits(text, inner, [*enclosing, requoted[0][2] if requoted else inner.quote], mine)
    for spec in fld.spec:
        if isinstance(spec, Field):
            _field_edits(text, spec, enclosing, mine)
    if ok:
        edits.extend(mine)
        return
    width = fld.expr_end - fld.expr_start
    filler = "None" if width >= 4 else "0"
    blank = expr if not singles else expr.replace("\n", " ")
    edits.append((fld.expr_start, fld.expr_end, filler + _blank(blank)[len(filler) :]))


def _outside_strings(text: str, fld: Field) -> str:
    """A field's expression text with its string literals left out."""
    out, i = [], fld.expr_start
    for inner in fld.strings:
        out.append(text[i : inner.start])
        i = inner.end
    out.append(text[i : fld.expr_end])
    return "".join(out)


def _requote(text: str, inner: StringToken, enclosing: Sequence[str]) -> list[tuple[int, int, str]] | None:
    """Edits swapping `inner`'s quotes for ones no enclosing string ends at ([] when it needs none);
    None when no quote fits."""
    body = text[inner.start + len(inner.prefix) + len(inner.quote) : inner.end - len(inner.quote)]

    def fits(quote: str) -> bool:
        if quote in body:
            return quote == inner.quote and "\\" in body  # an escaped quote of its own: unchanged
        for q in enclosing:
            if len(q) == 1 and (q in quote or q in body):
                return False
            if len(q) == 3 and (q == quote or q in body):
                return False
        return True

    if fits(inner.quote):
        return []
    for char in _QUOTES:
        quote = char * len(inner.quote)
        if quote != inner.quote and fits(quote):
            open_at = inner.start + len(inner.prefix)
            close_at = inner.end - len(inner.quote)
            return [(open_at, open_at + len(quote), quote), (close_at, close_at + len(quote), quote)]
    return None
