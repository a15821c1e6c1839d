"""Statements rendered once per process, keyed by everything they are built from.

Building a statement's sqlglot tree and rendering it cost a write ~0.5-1 ms of CPU each, on every
call, for statements that depend only on the adapter's class, the target's reflected columns or
the task's SQL text (#33). The key must name all of it: never a tree (sqlglot's equality ignores
comments, which render), never a connection's state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

#: How many rendered statements a process keeps: one per target table, column set and SQL text it
#: writes; past this many the memo starts again.
LIMIT = 256

_texts: dict[Hashable, str] = {}
_lock = threading.Lock()


def rendered_once(key: Hashable, build: Callable[[], str]) -> str:
    """The text `build()` returns for `key`, built on the process's first call with that key."""
    text = _texts.get(key)
    if text is None:
        text = build()
        with _lock:
            if len(_texts) >= LIMIT:
                _texts.clear()
            _texts[key] = text
    return text
