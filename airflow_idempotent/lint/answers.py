"""The three review questions every job must answer, answered for each task from its facts.

1. If this runs twice, what happens?  2. What decides its window?  3. How would we backfill the
last 90 days?  The checks (`checks`) gather the facts; nothing here adds a finding.
"""

from __future__ import annotations

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.facts import Effect, TaskFacts
from airflow_idempotent.lint.notices import NOTICE_TEXT
from airflow_idempotent.lint.schedule import dag_schedule

__all__ = ["backfill_answer", "runs_twice", "window_answer"]


def runs_twice(facts: TaskFacts) -> str:
    """If this runs twice, what happens? (Right answer: nothing.)"""
    bad: list[str] = []
    good: list[str] = []
    rewritten = {w.table for w in facts.writes if w.how == "overwrite"}
    for w in facts.writes:
        if w.how in ("delete", "truncate") and w.table in rewritten:
            continue  # part of the window's delete-then-insert
        if w.how == "append":
            bad.append(f"Appends again: {w.detail} with no window delete or key.")
        elif w.how == "accumulate":
            bad.append(f"Adds again: {w.detail} is a running total.")
        elif w.how == "create":
            bad.append(f"Fails: {w.detail} (the table already exists on the rerun).")
        elif w.how == "fails-on-key":
            bad.append(
                f"Fails: {w.detail} inserts keys {w.table}'s primary key already holds, so a rerun stops "
                "with an error instead of adding the rows again."
            )
        elif w.how == "high-water":
            bad.append(
                f"Loads nothing new: {w.detail}; a row that arrives late behind the mark is never loaded."
            )
        elif w.how in ("merge", "overwrite") and facts.project:
            good.append(f"it {w.detail}" + (" in one transaction" if w.how == "overwrite" else ""))
        elif w.how == "overwrite":
            good.append(f"it {w.detail}")
        elif w.how in ("upsert", "merge", "keyed-insert"):
            good.append(f"it upserts into {w.table} on its key ({w.detail})")
        elif w.how == "dedup":
            good.append(f"it inserts only the rows {w.table} does not have yet ({w.detail})")
        elif w.how in ("replace", "truncate"):
            good.append(f"it replaces {w.table} whole ({w.detail})")
        elif w.how == "delete":
            good.append(f"it deletes the same rows of {w.table} again ({w.detail})")
        elif w.how == "update":
            good.append(f"it sets the same values in {w.table} again ({w.detail})")
    notices: list[str] = []
    for e in facts.effects:
        if e.keyed:
            good.append(f"{e.what} carries an idempotency key, so the receiver drops the repeat")
        elif e.replaces == NOTICE_TEXT:
            notices.append(e.what)
        elif e.replaces:
            good.append(f"{e.what} is sent again, and {_safe_because(e)}")
        else:
            bad.append(f"Sends again: {e.what} with no idempotency key.")
    posted = (
        f"Posts the message again: {', '.join(dict.fromkeys(notices))} puts a second copy in the channel; "
        "no data changes."
    )
    if bad:
        answer = " ".join(dict.fromkeys(bad))
    elif notices:
        answer = posted + (" Otherwise nothing: " + "; ".join(dict.fromkeys(good)) + "." if good else "")
    elif good:
        answer = "Nothing: " + "; ".join(dict.fromkeys(good)) + "."
    elif facts.opaque:
        answer = f"Unknown: the linter cannot see what {facts.opaque} writes; prove it with the harness."
    else:
        answer = "Nothing: it writes no table and sends no known side effect."
    clock = [w.text for w in facts.windows if w.kind in ("clock", "relative")]
    if clock and (good or bad or notices):
        answer += " But what it reads depends on when it runs (the clock decides its window)."
    if facts.unstable:
        answer += f" And the rows it writes differ on every run: {', '.join(dict.fromkeys(facts.unstable))}."
    if facts.shared:
        answer += f" And {facts.shared[0]}."
    return answer


def _safe_because(effect: Effect) -> str:
    """Why `effect` sent again changes nothing, as the end of a sentence (its text without "it is")."""
    return (effect.replaces or "").removeprefix("it is ").removeprefix("the ")


def _sends_phrase(facts: TaskFacts) -> str:
    """What a backfill's runs send, for a task that writes no table: keyed sends, chat notices
    (`notices`: a message per window, no data) or sends that rewrite their own interval."""
    if all(e.keyed for e in facts.effects):
        return "each window's effect carries its own key"
    if all(e.keyed or e.replaces == NOTICE_TEXT for e in facts.effects):
        return "each window posts one chat message of its own (a message to people, no data changes)"
    return "each window's send rewrites only its own interval"


def window_answer(facts: TaskFacts) -> str:
    """What decides its window? The strongest reference wins: the clock over the run's parameters."""
    for kind in ("relative", "clock", "target", "run", "param"):
        for ref in facts.windows:
            if ref.kind == kind:
                return ref.text
    if facts.writes:
        return "Nothing: it reads no window, so each run processes everything it reads."
    if facts.opaque:
        return f"Unknown: no window reference the linter can see in {facts.opaque}."
    return "Nothing: it reads no window."


def backfill_answer(task: TaskDef, facts: TaskFacts) -> str:
    """How would we backfill the last 90 days? One sentence, or why not yet."""
    dag_id = task.dag_id or "<dag_id>"
    kinds = {w.kind for w in facts.windows}
    harmful = [w for w in facts.writes if w.how in ("append", "accumulate", "create", "fails-on-key")]
    effects = [e for e in facts.effects if not e.keyed and not e.replaces]
    if "clock" in kinds or "relative" in kinds:
        return (
            "Not at all: its window comes from the clock, so all 90 backfill runs would read the same "
            "(today's) data; take the window from the run first."
        )
    if "target" in kinds:
        return (
            "Not at all: its window comes from the target's high-water mark, so a backfill of past "
            "windows reads nothing new; take the window from the run first."
        )
    if harmful:
        verb = {
            "append": "appended again",
            "accumulate": "added again",
            "create": "failing",
            "fails-on-key": "failing on its key",
        }[harmful[0].how]
        return (
            f"Not safely: every window that already ran is {verb} ({harmful[0].detail}); make the write "
            "overwrite or merge first."
        )
    if effects:
        return f"Not safely: each of the 90 runs sends {effects[0].what} again; key it first."
    if not facts.writes and not facts.effects:
        if facts.opaque:
            return (
                f"Unknown: the linter cannot see what {facts.opaque} writes; run the harness "
                "(airflow_idempotent.testing) over a few windows before a backfill."
            )
        return "Nothing to backfill: it writes no table."
    caveat = ""
    if facts.unstable:
        caveat = f", but the rewritten rows get new values from {', '.join(dict.fromkeys(facts.unstable))}"
    if facts.shared:
        caveat += f"; and {facts.shared[0]}, so backfill that writer too or the two disagree"
    if task.dag is not None and dag_schedule(task.dag) is None:
        return (
            "One window at a time: the DAG has no time schedule, so trigger each window with "
            f"`airflow dags trigger {dag_id} --logical-date YYYY-MM-DD`; each rewrites only itself"
            f"{caveat}."
        )
    if "run" not in kinds and "param" not in kinds and facts.writes:
        return (
            "No need: it rewrites what it writes from everything it reads, so one run covers all 90 "
            f"days; a backfill of every window repeats the same full rewrite{caveat}."
        )
    what = "each window rewrites only itself" if facts.writes else _sends_phrase(facts)
    return (
        f"`airflow backfill create --dag-id {dag_id} --from-date <90 days ago> --to-date <yesterday> "
        f"--reprocess-behavior completed`: {what}{caveat}."
    )
