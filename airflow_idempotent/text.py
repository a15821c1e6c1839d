"""The one rule for free text a person types and others read (a backfill's reason, a kill switch's
reason, a decision's note): no invisible format characters.

Unicode category Cf (bidi controls such as U+202E RIGHT-TO-LEFT OVERRIDE, U+200F, U+2066..U+2069,
zero-width characters such as U+200B, U+FEFF) renders as nothing or reorders what is around it, so
a reason holding one can show an approver something other than what is stored, in the UI, the
audit log and history. Every entry point (the REST middleware and Airflow's ORM through
`BackfillIntent`, the plugin's forms, the CLI) calls `invisible_character`, and names the
character and where it is, so the person can find it.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable


def invisible_character(text: str) -> tuple[int, str] | None:
    """(1-based position, "U+XXXX NAME") of the first Unicode format (Cf) character in `text`, or None."""
    for position, char in enumerate(text, start=1):
        if unicodedata.category(char) == "Cf":
            name = unicodedata.name(char, "")
            return position, f"U+{ord(char):04X}{' ' + name if name else ''}"
    return None


def invisible_problem(text: str, what: str) -> str | None:
    """The sentence refusing `what` (e.g. "conf reason") when `text` holds a Cf character, else None."""
    found = invisible_character(text)
    if found is None:
        return None
    position, char = found
    return (
        f"{what} holds the invisible format character {char} at position {position} (counting from 1): "
        "bidi controls and zero-width characters can disguise what a person reads; remove it."
    )


def character_class(points: Iterable[int]) -> str:
    """Code points (ascending) as the body of a regex character class, in ranges, read alike by
    Python's `re` and JSON Schema (ECMA 262): BMP characters as `\\uXXXX`, others as themselves."""
    ranges: list[tuple[int, int]] = []
    for point in points:
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1] = (ranges[-1][0], point)
        else:
            ranges.append((point, point))

    def one(point: int) -> str:
        return f"\\u{point:04X}" if point <= 0xFFFF else chr(point)

    return "".join(one(a) if a == b else f"{one(a)}-{one(b)}" for a, b in ranges)


@functools.cache
def invisible_class() -> str:
    """Every Cf character as a character class body: how a document states the rule
    `invisible_character` applies."""
    return character_class(p for p in range(sys.maxunicode + 1) if unicodedata.category(chr(p)) == "Cf")


__all__ = ["character_class", "invisible_character", "invisible_class", "invisible_problem"]
