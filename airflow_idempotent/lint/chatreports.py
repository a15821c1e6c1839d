"""A task that only reports to a chat channel: its window relative to the clock is information.

Tuning evidence (docs/lint-evaluation.md, round 14): status and activity reports of "the last day /
week" posted to Slack or Google Chat (kanchan-1f's daily counts, navikt's DAG-run reports), each a
relative window (IDEM004; an unshifted ``now()`` bounding it is IDEM001) on a task that loads
nothing. A rerun a day late posts the span before *that* moment, and its text says which; no table
holds the span, so nothing is loaded twice or missed. The test is on what the checks learnt of the
task (`facts`): every effect it sends is a chat notice (`notices`), and it writes no table, saves no
state, and runs nothing the linter cannot read (a bash command, an opaque operator). An e-mail
report stays IDEM006 / IDEM004 (the corpus's fx01).
"""

from __future__ import annotations

from airflow_idempotent.lint.findings import Recorder, TaskCheck
from airflow_idempotent.lint.notices import NOTICE_TEXT

__all__ = ["REPORT_TEXT", "chat_report_only", "check_chat_report"]

REPORT_TEXT = (
    "the task reads the clock for the span it reports, but it only posts the report to a chat channel "
    "and writes nothing (no table, no saved state): a rerun posts the span before its own moment, as "
    "its text says; no data is loaded twice or missed"
)
#: the clock rules a report's span can raise: shifted (IDEM004) or not (IDEM001, ``.. AND now()``)
_SPAN_RULES = ("IDEM004", "IDEM001")


def chat_report_only(check: TaskCheck) -> bool:
    """Every effect of the task is a chat notice, and it writes, saves and hides nothing."""
    facts = check.facts
    if not facts.effects or any(e.replaces != NOTICE_TEXT for e in facts.effects):
        return False
    return not (facts.writes or facts.state_saves or facts.opaque)


def check_chat_report(check: TaskCheck, recorder: Recorder) -> None:
    """The task's clock findings become information when it only reports to a chat channel."""
    if not chat_report_only(check):
        return
    task = check.task
    for found in [f for f in recorder.findings if f.rule in _SPAN_RULES]:
        if (found.dag_id, found.task_id) == (task.dag_id, task.task_id):
            recorder.findings.remove(found)
            check.info(found.rule, found.file, found.line, REPORT_TEXT)
