"""Python string literals read from source text: where each literal and f-string field is written.

Python's syntax tree merges implicitly concatenated literals into one node and (before 3.12) gives an
f-string's pieces no positions of their own, so SQL spread over several source lines would be placed
on its first line. `scan_strings` reads the literals themselves, with PEP 701 rules (3.12: an
f-string field may hold strings in the same quotes), so the linter can place every piece of a
string on the line where it is written, and `pysyntax` can rewrite 3.12 f-strings for an older parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Field", "Literal", "StringToken", "scan_strings", "string_at"]

_PREFIX_CHARS = frozenset("rRbBuUfF")
_OPENERS = {"(": ")", "[": "]", "{": "}"}


@dataclass
class Literal:
    """Literal text of a string token: source offsets of its raw characters (escapes not applied)."""

    start: int
    end: int


@dataclass
class Field:
    """An f-string replacement field ``{expr!r:spec}``: its expression's offsets, the strings inside
    the expression, and the format spec's pieces (which may hold fields themselves)."""

    start: int
    end: int
    expr_start: int
    expr_end: int
    strings: list[StringToken] = field(default_factory=list)
    spec: list[Literal | Field] = field(default_factory=list)


@dataclass
class StringToken:
    """One string literal as written: offsets, prefix (``f``, ``rb``...), quote and its pieces."""

    start: int
    end: int
    prefix: str
    quote: str
    parts: list[Literal | Field] = field(default_factory=list)

    @property
    def is_f(self) -> bool:
        return "f" in self.prefix.lower()

    @property
    def is_raw(self) -> bool:
        return "r" in self.prefix.lower()


def string_at(text: str, i: int) -> StringToken | None:
    """The string literal starting at offset `i` (at its prefix or quote), or None if none starts there."""
    j = i
    while j < len(text) and j - i < 2 and text[j] in _PREFIX_CHARS:
        j += 1
    if j >= len(text) or text[j] not in "'\"":
        return None
    if j > i and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
        return None  # `name"...`: the letters end a name, they are no prefix
    quote = text[j] * 3 if text.startswith(text[j] * 3, j) else text[j]
    token = StringToken(i, i, text[i:j], quote)
    end = _scan_body(text, j + len(quote), token, token.parts, in_spec=False)
    if end is None:
        return None
    token.end = end
    return token


def _scan_body(
    text: str, i: int, token: StringToken, parts: list[Literal | Field], in_spec: bool
) -> int | None:
    """Scan a string's body (or an f-string format spec, which ends at its field's ``}``) from `i`:
    the offset past the closing quote (for a spec: of the ``}``), or None when it does not close."""
    quote, fstring = token.quote, token.is_f
    lit_start, n = i, len(text)
    while i < n:
        c = text[i]
        if not in_spec and text.startswith(quote, i):
            if i > lit_start:
                parts.append(Literal(lit_start, i))
            return i + len(quote)
        if c == "\\":
            i += 1 if fstring and text[i + 1 : i + 2] in ("{", "}") else 2
            continue
        if c == "\n" and len(quote) == 1:
            return None
        if fstring and c == "{":
            if not in_spec and text.startswith("{{", i):
                i += 2
                continue
            if i > lit_start:
                parts.append(Literal(lit_start, i))
            fld = Field(i, i, i + 1, -1)
            after = _scan_field(text, i + 1, token, fld)
            if after is None:
                return None
            parts.append(fld)
            i = lit_start = after
            continue
        if fstring and c == "}":
            if in_spec:
                if i > lit_start:
                    parts.append(Literal(lit_start, i))
                return i
            if not text.startswith("}}", i):
                return None
            i += 2
            continue
        i += 1
    return None


def _scan_field(text: str, i: int, token: StringToken, fld: Field) -> int | None:
    """Scan a replacement field from `i` (just past its ``{``): the offset past its ``}``."""
    depth: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"" or c in _PREFIX_CHARS:
            nested = string_at(text, i)
            if nested is not None:
                fld.strings.append(nested)
                i = nested.end
                continue
        if c.isalnum() or c == "_":
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            continue
        if c == "#":  # a comment inside a multi-line field (3.12)
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in _OPENERS:
            depth.append(_OPENERS[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif not depth and c == "}":
            fld.expr_end = i if fld.expr_end < 0 else fld.expr_end
            fld.end = i + 1
            return i + 1
        elif not depth and c == "!" and text[i + 1 : i + 2] != "=":
            fld.expr_end = i if fld.expr_end < 0 else fld.expr_end
            i += 2  # the conversion letter
            continue
        elif not depth and c == ":":
            fld.expr_end = i if fld.expr_end < 0 else fld.expr_end
            end = _scan_body(text, i + 1, token, fld.spec, in_spec=True)
            if end is None or text[end : end + 1] != "}":
                return None
            fld.end = end + 1
            return end + 1
        i += 1
    return None


def scan_strings(text: str, start: int = 0, end: int | None = None) -> list[StringToken]:
    """The string literals of Python code text[start:end], in order (comments skipped)."""
    stop = len(text) if end is None else end
    out: list[StringToken] = []
    i = start
    while i < stop:
        c = text[i]
        if c == "#":
            while i < stop and text[i] != "\n":
                i += 1
            continue
        if c in "'\"" or c in _PREFIX_CHARS:
            token = string_at(text, i)
            if token is not None:
                out.append(token)
                i = token.end
                continue
        if c.isalnum() or c == "_":
            while i < stop and (text[i].isalnum() or text[i] == "_"):
                i += 1
            continue
        i += 1
    return out
