"""SQL text made ready for sqlglot, and the way back: Jinja expressions as identifiers, Jinja
statements and comments as spaces, PL/pgSQL dollar-quoted bodies as ``''``, every newline kept, and
each offset of the prepared text mapped to the original's. The SQL facts (`sqlfacts`) parse the
prepared text; the Jinja checks (`sqlchecks`, `codechecks`) read the Jinja it set aside.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Prepared", "prepare_sql", "restore_jinja"]

_JINJA = re.compile(r"\{\{(.*?)\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_DOLLAR_BODY = re.compile(r"\$(\w*)\$.*?\$\1\$", re.DOTALL)


@dataclass
class Prepared:
    """SQL ready for sqlglot: Jinja replaced by identifiers and PL/pgSQL bodies by empty strings, each
    newline kept, with the way back to offsets of the original text."""

    text: str
    jinja: list[str]
    #: the original offset of each Jinja expression's ``{{``
    jinja_at: list[int] = field(default_factory=list)
    _new: list[int] = field(default_factory=list)
    _edits: list[tuple[int, int, int, int]] = field(default_factory=list)

    def original(self, offset: int | None) -> int | None:
        """The original text's offset of an offset of the prepared text."""
        if offset is None:
            return None
        i = bisect.bisect_right(self._new, offset) - 1
        if i < 0:
            return offset
        new_start, new_len, old_start, old_len = self._edits[i]
        if offset < new_start + new_len:
            return old_start
        return old_start + old_len + (offset - new_start - new_len)


def prepare_sql(sql: str) -> Prepared:
    """`sql` with Jinja expressions as ``idem_jinja_N`` identifiers (which parse inside or outside
    quotes), Jinja statements and comments as spaces, dollar-quoted bodies as ``''``."""
    prepared = Prepared("", [])
    out: list[str] = []
    at = new_at = 0
    matches = sorted([*_JINJA.finditer(sql), *_DOLLAR_BODY.finditer(sql)], key=lambda m: m.start())
    for match in matches:
        if match.start() < at:
            continue  # inside an earlier replacement
        if match.re is _JINJA and match.group(0).startswith("{{"):
            prepared.jinja.append(match.group(1).strip())
            prepared.jinja_at.append(match.start())
            replacement = f"idem_jinja_{len(prepared.jinja)}"
        elif match.re is _JINJA:
            replacement = " "
        else:
            replacement = "''"
        replacement += "\n" * match.group(0).count("\n")
        out.append(sql[at : match.start()])
        new_at += match.start() - at
        prepared._new.append(new_at)
        prepared._edits.append((new_at, len(replacement), match.start(), len(match.group(0))))
        out.append(replacement)
        new_at += len(replacement)
        at = match.end()
    out.append(sql[at:])
    text = "".join(out)
    if _EXECUTE_IMMEDIATE.search(text):
        text = _PLSQL_BEGIN.sub(lambda m: " " * len(m.group(0)), _EXECUTE_IMMEDIATE.sub(_run_immediate, text))
    prepared.text = text
    return prepared


#: PL/SQL's ``EXECUTE IMMEDIATE 'TRUNCATE TABLE t'`` (a statement a ``BEGIN .. END`` block runs as a
#: string, as DDL must be there): round 41's ASTRO empties its Oracle target so before it inserts.
#: Read as the statement itself, and the block's ``BEGIN`` as nothing, so its statements parse one by
#: one (spaces of the same length keep every offset)
_EXECUTE_IMMEDIATE = re.compile(r"(?i)\bexecute\s+immediate\s+'([^']*)'")
_PLSQL_BEGIN = re.compile(r"(?im)^\s*begin\b(?!\s*(?:;|transaction|work|tran\b))")


def _run_immediate(match: re.Match[str]) -> str:
    """The string's statement in place of the EXECUTE IMMEDIATE."""
    return " " * (match.start(1) - match.start()) + match.group(1) + " "


def restore_jinja(text: str, jinja: Sequence[str]) -> str:
    """Put the Jinja expressions back where prepare_sql left identifiers."""

    def repl(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        return "{{ " + jinja[index] + " }}" if 0 <= index < len(jinja) else match.group(0)

    return re.sub(r"idem_jinja_(\d+)", repl, text)
