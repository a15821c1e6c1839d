"""Named steps of Spark's writes, where the crash tests kill a writer and the benches time one.

The partition switch (`switch.STEPS`) and the table formats' commits (`COMMIT_STEPS`) call `step`
at each; `step_hook` is None in production, so a step costs one comparison.
"""

from __future__ import annotations

from collections.abc import Callable

#: A Delta commit's or Iceberg snapshot's steps: the table and SELECT read ("prepared"); its rows
#: checked, nothing committed yet ("checked"); the commit landed, its figures not yet read nor
#: recorded ("committed"); its count and checksum read at the commit's version ("counted").
COMMIT_STEPS = ("prepared", "checked", "committed", "counted")
#: Called with each step's name as it is reached (tests, tracing); None in production.
step_hook: Callable[[str], None] | None = None


def step(name: str) -> None:
    if step_hook is not None:
        step_hook(name)
