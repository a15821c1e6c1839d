"""Checks of the SQL a task runs and of the templates in its arguments.

SQL goes through `sqlfacts` (sqlglot, and `airflow_idempotent.lint.sql`, the same check the
operators apply before they run); templates' Python expressions through `pyfacts`. Every finding
is placed on the line the parser found it at, through the located text's marks.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint import reloads
from airflow_idempotent.lint.benign import AUDIT_COLUMN, stamp_column
from airflow_idempotent.lint.clockroles import ADDS_ROWS, not_a_defect
from airflow_idempotent.lint.exports import file_names, rows_file
from airflow_idempotent.lint.facts import RUN_NAMES, Stamp, StateUse, WindowRef, Write
from airflow_idempotent.lint.findings import TaskCheck
from airflow_idempotent.lint.lastsuccess import check_last_success
from airflow_idempotent.lint.macros import clock_macros
from airflow_idempotent.lint.pyfacts import clock_call, is_relative, parents
from airflow_idempotent.lint.runlabels import labels_written
from airflow_idempotent.lint.schedule import manual_only
from airflow_idempotent.lint.snapshots import daily_snapshots
from airflow_idempotent.lint.source import Located, shown
from airflow_idempotent.lint.sql import Finding
from airflow_idempotent.lint.sqlfacts import REMOVING, SqlStatement, SqlWrite, analyse_sql
from airflow_idempotent.lint.sqltext import Prepared, prepare_sql
from airflow_idempotent.lint.xcompulls import file_pulls, xcom_pulls

__all__ = ["check_jinja", "check_sql", "check_templated_args"]

_KIND_TEXT = {"clock": "the clock", "random": "randomness", "sequence": "a sequence"}
_VARIABLE = re.compile(r"\bvar\.(?:value|json)\.(?:get\(\s*['\"])?([\w-]+)")
#: the run's (or this try's) start as the wall clock gave it; Airflow resets it when a run is cleared
_RUN_STARTS = frozenset({("dag_run", "start_date"), ("ti", "start_date"), ("task_instance", "start_date")})
#: ``CREATE [GLOBAL|LOCAL] TEMP[ORARY] TABLE [IF NOT EXISTS] name`` (PostgreSQL, MySQL, Snowflake,
#: BigQuery, Oracle): read from the text, as sqlglot parses ``.. (LIKE t) ON COMMIT DROP`` as a command
_TEMPORARY = re.compile(
    r"(?:\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:GLOBAL|LOCAL)\s+)?TEMP(?:ORARY)?\s+TABLE\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?"
    # Postgres' SELECT .. INTO TEMP name; SQL Server's #name and ##name (sqlglot reads them as name)
    r"|\bSELECT\b[^;]*?\bINTO\s+TEMP(?:ORARY)?\s+(?:TABLE\s+)?|\b(?:INTO|TABLE)\s+\#{1,2}(?=\w))"
    r"([\w.\"`]+)",
    re.IGNORECASE,
)
_SQL_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


def _shown(hit: Finding) -> str:
    """The read as the user wrote it: now() stays now(), though sqlglot regenerates CURRENT_TIMESTAMP."""
    fragment = re.sub(r"\s*/\*.*?\*/", "", hit.fragment, flags=re.DOTALL)
    if fragment.upper().startswith(hit.function.upper()):
        return fragment
    if re.fullmatch(r"[a-z_][a-z0-9_]*", hit.function):
        return f"{hit.function}()"
    return hit.function


def check_sql(
    check: TaskCheck,
    located: Located,
    project: bool,
    allowed: set[str] | None = None,
    shown_only: str | None = None,
) -> None:
    """The SQL a task runs: clock reads (IDEM001/IDEM004), high-water marks, its writes and window.

    `project`: the SQL of this package's operators, which bind the window themselves and whose
    write is the operator's (not the SQL's); `allowed`: their allow_functions; `shown_only`: the
    SQL's rows reach no write, only a print or a log (`rowuse`: how they do).
    """
    facts = check.facts
    analysis = analyse_sql(located.text, check.dialect)
    facts.saw_sql = True
    for match in _TEMPORARY.finditer(_SQL_COMMENT.sub(" ", located.text)):
        facts.temporary.add(match.group(1).replace('"', "").replace("`", "").lower())
    if analysis.error is not None:
        where = "{}:{}".format(*located.place(None))
        check.note(f"SQL at {where} could not be parsed: {analysis.error[:160]}")
    jinja = Prepared(located.text, analysis.jinja, analysis.jinja_at)
    facts.files_read.extend(n for n in file_names(located.text) if n not in facts.files_read)
    check_jinja(check, jinja, located, "its SQL")
    replaced = reloads.replaced_before((w.table, w.how, w.detail) for w in facts.writes)
    snapshots = daily_snapshots(analysis.statements, check.task.dag) if not project else {}
    rebuilds = _rebuilds(analysis.statements, replaced, facts.temporary)
    for index, stmt in enumerate(analysis.statements):
        replaced.update(stmt.replaced)
        for read in stmt.reads:
            hit, text = read.finding, _shown(read.finding)
            file, line = located.place(read.offset if read.offset is not None else stmt.offset)
            acked = allowed is not None and hit.function in allowed
            dag = check.task.dag
            if index in snapshots and hit.kind == "clock" and not acked:
                check.info("IDEM001", file, line, f"{text} reads the clock, but {snapshots[index]}")
                continue
            if read.relative and not acked and dag is not None and manual_only(dag):
                check.info(
                    "IDEM004",
                    file,
                    line,
                    f"the window is taken relative to the clock ({text} shifted by a span), but the DAG "
                    "runs only when triggered (schedule=None): no scheduled window is missed, and each "
                    "run is started for the span it reads",
                )
                continue
            if shown_only is not None and not stmt.writes and hit.kind == "clock":
                check.info(
                    "IDEM004" if read.relative else "IDEM001",
                    file,
                    line,
                    f"{text} filters a query whose rows {shown_only}: it chooses no rows the task "
                    "writes, and the statement writes none (a rerun shows another count, nothing else)",
                )
                continue
            if read.age and not stmt.writes:
                check.info(
                    "IDEM004",
                    file,
                    line,
                    f"{text} minus a column is an age (the time since each row's date) in the query's "
                    "output, not the bound of a window: it chooses no rows, and the statement writes none",
                )
                continue
            if read.relative and read.cutoff:
                check.info(
                    "IDEM004",
                    file,
                    line,
                    f"{text} shifted by a span is only an upper bound (rows older than a cutoff, as "
                    "retention, archival or expiry select them): a late run takes as much or more, and "
                    "what one run leaves the next one takes",
                )
                continue
            rebuilt = _rebuilt_whole(stmt.writes, replaced, facts.temporary, rebuilds)
            if read.relative and rebuilt is not None and not acked:
                check.info(
                    "IDEM004",
                    file,
                    line,
                    f"the window is taken relative to the clock ({text} shifted by a span), but it fills "
                    f"{rebuilt}, which the task empties whole first: the table holds only the span of its "
                    "latest run (a current-state rebuild), so a late or missed run leaves no span out; the "
                    "next run writes the span of its own time",
                )
                continue
            if read.relative:
                facts.windows.append(
                    WindowRef("relative", f'The clock: "the last N" before {text} in its SQL.')
                )
                check.add(
                    "IDEM004",
                    file,
                    line,
                    f"the window is taken relative to the clock ({text} shifted by a fixed span): a "
                    "rerun a day late reads a different span, and the missed one is never loaded",
                    cause="window" if not acked else f"window {hit.function} allowed",
                    acknowledged=acked,
                    reason="listed in allow_functions on the operator" if acked else None,
                )
                continue
            if not (read.filtering or project or acked) and hit.kind == "clock" and stamp_column(read.column):
                assert read.column is not None  # a stamp column is named
                targets = tuple(w.table for w in stmt.writes if w.how not in REMOVING)
                exported = None if stmt.writes else stmt.unloads or rows_file(check.task)
                files = read.period and bool({w.how for w in stmt.writes} & ADDS_ROWS)
                facts.stamps.append(Stamp(read.column, targets, file, line, text, exported, files_rows=files))
                continue  # `stamps` decides once the repository's marks are known
            if read.tableless and not stmt.writes and hit.kind == "clock":
                check.info(
                    "IDEM001",
                    file,
                    line,
                    f"{text} is selected from no table (the server's time handed to the code, as a "
                    "connection test does): it chooses no rows and writes none",
                )
                continue
            if not read.filtering and read.column and AUDIT_COLUMN.search(read.column):
                check.info(
                    "IDEM001",
                    file,
                    line,
                    f"{text} is written to {read.column}, an audit column (when the row was last "
                    "touched): it changes no row a window holds and no value a report reads",
                )
                continue
            if hit.kind == "clock" and not read.filtering and read.column and stmt.only_missing:
                check.info(
                    "IDEM001",
                    file,
                    line,
                    f"{text} is written to {read.column} of rows the insert adds only when its target "
                    "lacks them (an anti-join on the target): a rerun adds none of them again, so the "
                    "first run's value stands",
                )
                continue
            if hit.kind == "random" and not (read.filtering or acked):
                written = [w.table for w in stmt.writes if w.how not in REMOVING]
                why = reloads.benign_randomness(
                    written, stmt.constants, stmt.keeps_first, replaced, stmt.only_missing
                )
                if why is not None:
                    check.info("IDEM001", file, line, f"{text} is random, but {why}")
                    continue
            if read.filtering:
                facts.windows.append(WindowRef("clock", f"The clock: {text} in its SQL."))
            hows = {w.how for w in stmt.writes}
            if hit.kind == "clock" and not (project or acked):
                why = not_a_defect(
                    read.filtering, read.period, read.coarse, read.labels, read.day_match, hows
                )
                if why is not None:  # round 36c: defects only where the clock picks or files rows
                    check.info("IDEM001", file, line, f"{text} reads the clock, but {why}")
                    continue
            if not read.filtering:
                facts.unstable.append(f"{text} ({_KIND_TEXT.get(hit.kind, hit.kind)})")
            check.add(
                "IDEM001",
                file,
                line,
                f"the SQL reads {_KIND_TEXT.get(hit.kind, 'the clock')}: {text}, so a rerun of a "
                "window gives different rows than its first run",
                cause=hit.kind if not acked else f"{hit.kind} {hit.function} allowed",
                acknowledged=acked,
                reason="listed in allow_functions on the operator" if acked else None,
            )
        writes = stmt.writes
        if not writes and (into := stmt.unloads or rows_file(check.task)) is not None:
            facts.files_written.extend(n for n in file_names(into) if n not in facts.files_written)
        if stmt.high_water:
            facts.windows.append(
                WindowRef("target", f"The target's current contents: {stmt.high_water} (a high-water mark).")
            )
        if stmt.high_water and not project:
            file, line = located.place(stmt.offset)
            for write in (w for w in writes if w.how == "append"):
                check.add(
                    "IDEM004",
                    file,
                    line,
                    f"the window is taken from the target's current contents ({stmt.high_water}): a "
                    "rerun or backfill of an earlier window loads nothing, and rows that arrive late "
                    "behind the mark are never loaded",
                    cause="window",
                )
                detail = f"{write.detail} of the rows past {stmt.high_water}"
                facts.writes.append(
                    Write(write.table, "high-water", detail, file, line, check.conn, check.unit)
                )
            writes = [w for w in writes if w.how != "append"]
        names = set(stmt.placeholders)
        if names and not project:  # the project operators bind :window_start / :window_end
            bound = ", ".join(f":{n}" for n in sorted(names))
            facts.windows.append(WindowRef("param", f"Bound parameters {bound} in its SQL."))
        if stmt.declared is not None:
            facts.declared.append(stmt.declared)
        facts.max_of.extend(stmt.max_of)
        facts.pending.extend(stmt.pending)
        if shown_only is None or stmt.writes:  # a printed count reads no mark back
            facts.marks.extend(stmt.marks)
        if not project:
            for write in writes:
                file, line = located.place(write.offset if write.offset is not None else stmt.offset)
                facts.writes.append(
                    Write(
                        write.table,
                        write.how,
                        shown(write.detail),
                        file,
                        line,
                        check.conn,
                        check.unit,
                        write.columns,
                        write.sets,
                        write.constant,
                    )
                )


def _rebuilt_whole(
    writes: list[SqlWrite], replaced: dict[str, reloads.Slice], temporary: set[str], rebuilds: bool
) -> str | None:
    """The tables a statement fills when the task emptied each whole before it (``TRUNCATE``, ``DROP``
    then ``CREATE .. AS``, ``DELETE`` without ``WHERE``), or which are temporary tables of SQL that
    fills no other table but ones it empties whole first (`rebuilds`): round 36j, Grover's reports and
    dashboards rebuilt each run, through a temporary table or not."""
    filled = [w.table for w in writes if w.how not in REMOVING]
    if not filled or any((not rebuilds) if t in temporary else replaced.get(t) != () for t in filled):
        return None
    return ", ".join(sorted({shown(t) for t in filled}))


def _rebuilds(
    statements: list[SqlStatement], replaced: dict[str, reloads.Slice], temporary: set[str]
) -> bool:
    """Every table but temporary ones that the SQL fills is one it emptied whole before."""
    emptied = dict(replaced)
    for stmt in statements:
        emptied.update(stmt.replaced)
        if any(
            emptied.get(w.table) != ()
            for w in stmt.writes
            if w.how not in REMOVING and w.table not in temporary
        ):
            return False
    return True


def check_jinja(
    check: TaskCheck,
    prepared: Prepared,
    located: Located,
    where: str = "its SQL",
    argument: str | None = None,
) -> None:
    """Jinja expressions of a template (in the operator's `argument`, when it is one): a clock read
    (IDEM001 in SQL, IDEM003 elsewhere; IDEM004 when shifted by a span), a Variable or another task's
    XCom it reads, or the run's names that decide the window."""
    facts = check.facts
    for text, at in zip(prepared.jinja, prepared.jinja_at, strict=False):
        place = located.place(at)
        for pull in xcom_pulls(text, located.text, at):
            facts.state_reads.append(StateUse("xcom", pull.task_id, *place, numbers=pull.numbers))
        facts.files_read.extend(f"xcom:{task_id}" for task_id in file_pulls(text))
        for match in _VARIABLE.finditer(text):
            facts.state_reads.append(StateUse("variable", match.group(1), *place))
        try:
            tree = ast.parse(text.split("|")[0].strip() or "None", mode="eval")
        except SyntaxError:
            continue
        clock = False
        parent_of = parents(tree)
        macros = clock_macros(check.task.dag)
        for node in ast.walk(tree):
            read = _clock_read(node, parent_of, macros)
            if read is not None:
                name, relative = read
                clock = True
                if relative:
                    check.clock_read(name, place, f"a template in {where}", True)
                    continue
                in_sql = where == "its SQL"
                check.add(
                    "IDEM001" if in_sql else "IDEM003",
                    *place,
                    f"the template {{{{ {text} }}}} in {where} reads the clock ({name}), so a rerun "
                    "of a window renders something different than its first run",
                    cause="clock" if in_sql else "the clock",
                )
                facts.windows.append(WindowRef("clock", f"The clock: {{{{ {text} }}}} in {where}."))
        if clock:
            continue
        started = [n for n in ast.walk(tree) if _run_start(n) is not None]
        if started:
            _run_start_read(check, started[0], parent_of, text, place, where, argument)
            continue
        if check_last_success(check, tree, place[0], f"a template in {where}", place[1]):
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        run = sorted((names | attrs) & RUN_NAMES)
        if run:
            what = "data interval" if any(n.startswith("data_interval") for n in run) else "logical date"
            facts.windows.append(WindowRef("run", f"The run's {what}: {{{{ {text} }}}} in {where}."))


def _clock_read(
    node: ast.AST, parent_of: dict[ast.AST, ast.AST], macros: dict[str, tuple[str, bool]]
) -> tuple[str, bool] | None:
    """A clock read in a template: a call (``macros.datetime.now()``), or a ``user_defined_macros``
    name whose value reads the clock (`clock_macros`): (the read as written, shifted by a span)."""
    if isinstance(node, ast.Call) and (name := clock_call(node, None)) is not None:
        return name, is_relative(node, parent_of)
    if isinstance(node, ast.Name) and node.id in macros:
        clock, relative = macros[node.id]
        return f"the macro {node.id} (user_defined_macros: {clock})", relative
    return None


def _run_start(node: ast.AST) -> str | None:
    """``dag_run.start_date``, ``ti.start_date``: the moment the run (or try) started, as written."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    return f"{node.value.id}.{node.attr}" if (node.value.id, node.attr) in _RUN_STARTS else None


def _run_start_read(
    check: TaskCheck,
    node: ast.AST,
    parent_of: dict[ast.AST, ast.AST],
    text: str,
    place: tuple[str, int],
    where: str,
    argument: str | None = None,
) -> None:
    """Principle: the run's start (``{{ dag_run.start_date }}``, ``{{ ti.start_date }}``) is the wall
    clock when the run (or try) began, never its window: a run cleared or retried later starts later.
    In SQL it is read as ``now()`` is (IDEM001; IDEM004 when shifted by a span in the template). Handed
    to a task's code or command as a whole argument, it stands where the run's window belongs: the
    window the code derives from it is taken from the clock, IDEM004. Triggered DAGs too: a triggered
    run's logical date is the moment it was asked for and stays when the run is cleared; its start
    does not. Handed to the repository's own operator, whose code only labels what it writes with it
    (`runlabels`), it names a snapshot, no window: information."""
    name = _run_start(node) or text
    facts = check.facts
    shifted = any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub) for n in parent_of.values()
    )
    if where == "its SQL" and not shifted:
        check.add(
            "IDEM001",
            *place,
            f"the template {{{{ {text} }}}} in {where} reads the run's wall-clock start ({name}), not its "
            "window: a run cleared or retried later renders a later time",
            cause="clock",
        )
        facts.windows.append(WindowRef("clock", f"The clock: {{{{ {text} }}}} in {where}."))
        return
    owner = labels_written(check.task, argument) if argument is not None and not shifted else None
    if owner is not None:
        check.info(
            "IDEM004",
            *place,
            f"{{{{ {text} }}}} in {where} is the run's wall-clock start ({name}), but {owner}'s code only "
            "labels what it writes with it (object names, record fields, metadata, its return value) and "
            "reads nothing by it: a snapshot named for when it was taken; a rerun writes another beside "
            "it and reads no other span",
        )
        named = f"The clock: the run's start {{{{ {text} }}}} names what it writes."
        facts.windows.append(WindowRef("clock", named))
        return
    message = (
        f"the window is taken from the run's wall-clock start: {{{{ {text} }}}} in {where} ({name}), not "
        "the run's data interval; a run cleared or retried on another day reads another span, and its "
        "own is never read"
    )
    check.add("IDEM004", *place, message, cause="window")
    facts.windows.append(WindowRef("relative", f"The clock: the run's start {{{{ {text} }}}} in {where}."))


def check_templated_args(
    check: TaskCheck, node: ast.expr | None, where: str, argument: str | None = None
) -> None:
    """Templates in a templated argument (a string, or the strings of a dict or list), the operator's
    `argument`."""
    if node is None:
        return
    value, scope = check.task.scope.value(node)
    items: list[ast.expr | None]
    if isinstance(value, ast.Dict):
        items = list(value.values)
    elif isinstance(value, ast.List | ast.Tuple):
        items = list(value.elts)
    else:
        items = [value]
    for item in items:
        located = scope.string(item) if item is not None else None
        if located is not None:
            check_jinja(check, prepare_sql(located.text), located, where, argument)
