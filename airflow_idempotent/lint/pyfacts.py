"""What Python code does, read from its syntax tree: clock reads, spans, side effects and their keys.

Used for DAG files' module code, task arguments, TaskFlow and ``python_callable`` bodies, and the
Python expressions inside Jinja templates.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import asserts_only, assigned_values, dotted, last_name
from airflow_idempotent.lint.textuse import (
    as_text,
    assigned_name,
    ends_in_text,
    is_log_call,
    labels_only,
    name_loads,
    names_file,
)

__all__ = [
    "KEY_WORDS",
    "PARAM_CONTEXT",
    "RELATIVE_CALLS",
    "SIDE_EFFECT_CALLS",
    "SIDE_EFFECT_OPERATORS",
    "SQL_METHODS",
    "START_DATE_CONTEXT",
    "clock_call",
    "clock_calls_at",
    "clock_owner_purpose",
    "clock_use",
    "context_of",
    "is_random",
    "is_relative",
    "keeps",
    "keyed",
    "looks_like_sql",
    "parents",
]

KEY_WORDS = re.compile(r"idempot|dedup", re.IGNORECASE)
"""A keyword, header or dict key that carries an idempotency or deduplication key."""
_CLOCK_OWNERS = ("datetime", "date", "pendulum", "DateTime", "timezone", "Date")
_CLOCK_METHODS = frozenset({"now", "utcnow", "today", "yesterday", "tomorrow"})
#: conversions of a given timestamp: a clock read only when that timestamp is ``time.time()``
_FROM_TIMESTAMP = frozenset({"utcfromtimestamp", "fromtimestamp"})
_RANDOM_CALLS = frozenset(
    {
        "random.random",
        "random.randint",
        "random.choice",
        "random.uniform",
        "random.shuffle",
        "random.sample",
        "random.randrange",
        "uuid.uuid1",
        "uuid.uuid4",
        "uuid4",
        "uuid1",
        "secrets.token_hex",
        "secrets.token_urlsafe",
        "os.urandom",
    }
)
RELATIVE_CALLS = frozenset({"timedelta", "duration", "relativedelta", "Duration"})
_SHIFT_METHODS = frozenset({"subtract", "add", "shift", "minus", "plus"})


SIDE_EFFECT_OPERATORS: tuple[tuple[str, str], ...] = (
    ("MSGraph", "an MS Graph request"),
    ("Email", "an email"),
    ("Smtp", "an email"),
    ("Slack", "a Slack message"),
    ("Http", "an HTTP request"),
    ("Webhook", "a webhook call"),
    ("Sns", "an SNS message"),
    ("Sqs", "an SQS message"),
    ("Telegram", "a Telegram message"),
    ("Discord", "a Discord message"),
    ("Teams", "a Teams message"),
    ("Pagerduty", "a PagerDuty event"),
    ("Opsgenie", "an Opsgenie alert"),
    ("Twilio", "an SMS"),
    ("PubSubPublish", "a Pub/Sub message"),
)
SIDE_EFFECT_CALLS: dict[str, str] = {
    "post": "an HTTP POST",
    "put": "an HTTP PUT",
    "patch": "an HTTP PATCH",
    "send_email": "an email",
    "sendmail": "an email",
    "send_mail": "an email",
    "send_message": "a message",
    "publish": "a published message",
    "send_sms": "an SMS",
    "create_payment": "a payment",
    "create_transfer": "a transfer",
    "charge": "a charge",
}
SQL_METHODS = frozenset(
    {
        "execute",
        "executemany",
        "run",
        "exec_driver_sql",
        "get_records",
        "get_first",
        "get_pandas_df",
        "read_sql",
        "text",
        # clients' query methods (BigQuery, ClickHouse, Snowflake, DuckDB): the string must look like SQL
        "query",
        "query_df",
        "execute_query",
        "command",
        "sql",
    }
)


def clock_call(call: ast.Call, scope: Scope | None) -> str | None:
    """`datetime.now` etc. when the call reads the clock or randomness, else None."""
    written = dotted(call.func)
    if last_name(written) in _FROM_TIMESTAMP:
        given = call.args[0] if call.args else None
        now = isinstance(given, ast.Call) and dotted(given.func) in ("time.time", "time")
        return f"{written}(time.time())" if now else None
    name = scope.resolve_name(written) if scope is not None else written
    if name != written and _clock_call_name(name) is not None:
        return f"{written}()"
    origin = _imported_from(written, scope)
    if origin is not None and _clock_call_name(origin) is not None:
        return f"{written}()"  # ``from pendulum import today`` then ``today("UTC")`` (round 24, rocs)
    return _clock_call_name(written)


def clock_calls_at(tree: ast.AST, line: int) -> list[tuple[ast.Call, str]]:
    """The calls on `line` of `tree` that read the clock or randomness, each with its `clock_call`
    name: the reads a finding reported at that line stands for."""
    return [
        (node, name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node, "lineno", 0) == line
        and (name := clock_call(node, None)) is not None
    ]


def is_random(name: str) -> bool:
    """Whether the `clock_call` name `name` reads randomness (uuid, random, secrets, os.urandom)
    rather than the clock."""
    return name.startswith(("uuid", "random", "secrets", "os."))


def _imported_from(written: str, scope: Scope | None) -> str | None:
    """``pendulum.today`` for a bare ``today`` the module imported by ``from pendulum import today``:
    the name alone does not say whose function it is, its module does."""
    imported = scope.imports.get(written) if scope is not None and "." not in written else None
    if imported is None or imported[1] is None or imported[2] or not imported[0]:
        return None
    return f"{imported[0]}.{imported[1]}"


def _clock_call_name(name: str) -> str | None:
    last = last_name(name)
    owner = name.rsplit(".", 2)[-2] if "." in name else ""
    if last in _CLOCK_METHODS and (owner in _CLOCK_OWNERS or owner.endswith("datetime")):
        return f"{name}()"
    if name in ("timezone.utcnow", "utcnow", "days_ago", "dates.days_ago"):
        return f"{name}()"
    if name in _RANDOM_CALLS:
        return f"{name}()"
    return None


def is_relative(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> bool:
    """The clock read is shifted by a span: now() - timedelta(hours=24), now().subtract(days=1)..."""
    if last_name(dotted(call.func)) == "days_ago":
        return True
    node: ast.AST = call
    for _ in range(4):
        parent = parents.get(node)
        if parent is None or as_text(parent, node):
            return False
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add | ast.Sub):
            other = parent.right if parent.left is node else parent.left
            if isinstance(other, ast.Call) and last_name(dotted(other.func)) in RELATIVE_CALLS:
                return True
            if isinstance(other, ast.Name | ast.Attribute | ast.Constant):
                return True
        if isinstance(parent, ast.Attribute) and parent.attr in _SHIFT_METHODS:
            return True
        node = parent
    return False


START_DATE_CONTEXT = "start_date"
PARAM_CONTEXT = "param"
_START_DATE_NAMES = frozenset({"start_date", "end_date"})


def param_fallback(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The clock read is only the fallback when the run names no value of its own: the ``else`` of
    ``params['date'] if params['date'] else now()`` or of ``if 'date' in dag_run.conf: .. else: ..``."""
    child: ast.AST = node
    parent = parents.get(child)
    while parent is not None and not isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
        if isinstance(parent, ast.IfExp | ast.If):
            in_else = child is parent.orelse or (isinstance(parent.orelse, list) and child in parent.orelse)
            names = {n.id for n in ast.walk(parent.test) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(parent.test) if isinstance(n, ast.Attribute)}
            if in_else and names & {"params", "conf"}:
                return True
        child, parent = parent, parents.get(parent)
    return False


def context_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """Where a value is used, when that decides it is no data window: a UI ``Param`` default or
    ``params=`` (``PARAM_CONTEXT``), a ``start_date``/``end_date`` (``START_DATE_CONTEXT``)."""
    child: ast.AST = node
    parent = parents.get(child)
    while parent is not None:
        if isinstance(parent, ast.Call) and last_name(dotted(parent.func)) == "Param":
            return PARAM_CONTEXT
        if isinstance(parent, ast.keyword) and parent.arg in ("params", *_START_DATE_NAMES):
            return PARAM_CONTEXT if parent.arg == "params" else START_DATE_CONTEXT
        if isinstance(parent, ast.Dict) and child in parent.values:
            key = parent.keys[parent.values.index(child)]  # type: ignore[arg-type]
            if isinstance(key, ast.Constant) and key.value in _START_DATE_NAMES:
                return START_DATE_CONTEXT
            if isinstance(key, ast.Constant) and key.value == "params":
                return PARAM_CONTEXT
        if isinstance(parent, ast.stmt):
            if isinstance(parent, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in _START_DATE_NAMES for t in parent.targets
            ):
                return START_DATE_CONTEXT
            return None
        child, parent = parent, parents.get(parent)
    return None


def clock_use(call: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    """`_value_use`'s verdict, with ``"used"`` refined to ``"stamp"`` when the value only stamps a
    record (`_stamp_only`; a clock read only: randomness makes ids, never stamps)."""
    use = _value_use(call, body, parents)
    random = isinstance(call, ast.Call) and dotted(call.func) in _RANDOM_CALLS
    if use == "used" and not random and _stamp_only(call, body, parents, 0):
        return "stamp"
    return use


def _time_of_day(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The clock's date only hosts a time of day: ``datetime.combine(date.today(), t)``, shifted or
    not, reduced to ``.time()`` in the same expression (round 18: Amsterdam's parking regimes add a
    minute to a time so). No date of the clock's survives, so no window can come from it."""
    parent = parents.get(node)
    if not (
        isinstance(parent, ast.Call)
        and last_name(dotted(parent.func)) == "combine"
        and parent.args
        and parent.args[0] is node
    ):
        return False
    current: ast.AST = parent
    for _ in range(4):
        up = parents.get(current)
        if up is None or isinstance(up, ast.stmt):
            return False
        if isinstance(up, ast.Attribute) and up.attr == "time" and isinstance(parents.get(up), ast.Call):
            return True
        current = up
    return False


def _value_use(
    call: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST], _depth: int = 0, _text: bool = False
) -> str:
    """What a clock read's value does in `body`: ``"relative"`` (shifted by a span: a relative window),
    ``"rendered"`` (shifted, but only rendered into a template: see `ends_in_text`), ``"stamp"``
    (only a named field of a record: see `_stamp_only`), ``"output"``
    (only logged or printed), ``"unused"`` (assigned and never read), ``"label"`` (made text that only
    names a file, titles an e-mail or dates an HTML report), else ``"used"`` (written, returned,
    stored, or deciding what is read)."""
    node: ast.AST = call
    parent = parents.get(node)
    if asserts_only(node, parents):
        return "output"  # a freshness or health check: it only decides whether the task fails
    if _time_of_day(node, parents):
        return "output"  # combine(today(), t) + timedelta(..)).time(): the clock's date is dropped
    text = _text  # past a strftime/isoformat/str(): a `+` concatenates text
    while parent is not None and not isinstance(parent, ast.stmt):
        text = text or as_text(parent, node)
        if (
            not text
            and isinstance(parent, ast.BinOp)
            and isinstance(parent.op, ast.Sub)
            and (_elapsed(parent, node, body) or _duration(parent, body, parents))
        ):
            return "output"  # clock - clock: how long a call took, no window (t0 = now(); ..; now() - t0)
        if (
            not text
            and isinstance(parent, ast.BinOp)
            and isinstance(parent.op, ast.Add | ast.Sub)
            and _span(parent, node)
        ) or (not text and isinstance(parent, ast.Attribute) and parent.attr in _SHIFT_METHODS):
            if _waits_only(parent, body, parents):
                return "output"  # a polling deadline: ``end = now() + timeout; while now() < end``
            ends = ends_in_text(parent, body, parents, 0)
            return ("output" if ends == {"output"} else "rendered") if ends else "relative"
        if isinstance(parent, ast.Call) and parent.func is not node and is_log_call(parent):
            return "output"
        if (
            isinstance(parent, ast.Call)
            and parent.func is not node
            and last_name(dotted(parent.func)) == "sleep"
        ):
            return "output"  # sleep(random.randint(1, 10)): jitter, when the task acts and never what
        if text and isinstance(parent, ast.keyword) and labels_only(parent, node):
            return "label"
        if text and isinstance(parent, ast.Call) and node in parent.args and names_file(parent):
            return "label"  # open(f"{db}_{now():%Y%m%d}.sql.gz"), Path(..), os.path.join(..)
        node, parent = parent, parents.get(parent)
    if text and isinstance(parent, ast.Assign) and labels_only(parent, node):
        return "label"
    if (
        isinstance(parent, ast.Assign | ast.AnnAssign)
        and _depth < 3
        and isinstance(
            target := (parent.targets[0] if isinstance(parent, ast.Assign) else parent.target), ast.Name
        )
        and (not isinstance(parent, ast.Assign) or len(parent.targets) == 1)
    ):
        loads = name_loads(body, target.id)
        uses = [use for use in loads if not _self_shift(use, parents)]
        if not uses:
            return "unused"
        found = {_value_use(use, body, parents, _depth + 1, text) for use in uses}
        if len(uses) < len(loads) and "used" in found:
            found.add("relative")  # ``after = after - timedelta(days=n)``, then compared: the last n days
        for verdict in ("relative", "used", "rendered", "label"):
            if verdict in found:
                return verdict
        return "output" if "output" in found else "unused"
    if isinstance(parent, ast.Expr) and isinstance(node, ast.Call) and node is call:
        return "unused"  # a bare call whose value nobody keeps
    if isinstance(parent, ast.While) and node is parent.test:
        return "output"  # ``while now() < deadline:``: how long the task polls, never what it reads
    return "used"


def _waits_only(shifted: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Principle (IDEM003/IDEM004): a clock read, or the clock shifted by a span, whose value only
    decides *when* the task acts is no data: the duration of a ``sleep(..)`` (jitter), and a polling
    deadline (``end = now() + timeout``) read only in the condition of the ``while`` loop that polls.
    What the task reads or writes inside the loop comes from other values, so a rerun a day late
    reads the same data; such reads are not reported. Here: `shifted`'s value is only a deadline a
    ``while`` loop's condition compares, directly or through the one name it is assigned to."""
    node, parent = shifted, parents.get(shifted)
    while parent is not None and not isinstance(parent, ast.stmt):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, ast.While) and node is parent.test:
        return True
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and node is parent.value):
        return False
    target = parent.targets[0]
    if not isinstance(target, ast.Name):
        return False
    uses = name_loads(body, target.id)
    return bool(uses) and all(_in_while_test(use, parents) for use in uses)


def _in_while_test(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    while parent is not None and not isinstance(parent, ast.stmt):
        node, parent = parent, parents.get(parent)
    return isinstance(parent, ast.While) and node is parent.test


#: calls that keep a value for the next run or retry (task or asset state, a Variable, XCom), or make
#: a key of it (a hash, a name-based uuid): a clock value reaching them is no record's stamp
_KEEPS = frozenset({"set", "set_state", "xcom_push", "sha1", "sha256", "md5", "uuid3", "uuid5", "hash"})


def keeps(call: ast.Call) -> bool:
    """`call` keeps a value for the next run or retry, or makes a key of it (`_KEEPS`)."""
    return last_name(dotted(call.func)) in _KEEPS


def _stamp_only(node: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST], depth: int) -> bool:
    """Principle (IDEM003): a clock value whose every use is a named field of a record the task returns
    (a value under a string key of a dict, or a keyword of ``dict(..)`` or of a class), directly, as text
    (``.isoformat()``) or through the names it is assigned to, stamps that record: a rerun returns
    the record with a later stamp, and no id, path, filter or state is derived from it (adapstory's
    ``"observedAt": now().isoformat()`` in a returned observation). Decided by the value's flow, never
    by the field's name: the same value that also reaches a hash, a format of a key, a comparison,
    arithmetic, any call (a query's parameters) or state kept for the next run (``.set(..)``,
    ``xcom_push``) stays a finding."""
    if depth > 3:
        return False
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.Attribute) and parent.value is child:
            call = parents.get(parent)
            if not (isinstance(call, ast.Call) and call.func is parent) or keeps(call):
                return False  # a part of it (.year) goes elsewhere
            child, parent = call, parents.get(call)  # a method of the value: .isoformat(), .replace(..)
            continue
        if isinstance(parent, ast.keyword):
            call = parents.get(parent)
            return (
                isinstance(call, ast.Call) and _record_type(call) and _record_handed_on(call, body, parents)
            )
        if isinstance(parent, ast.Dict):
            key = parent.keys[parent.values.index(child)] if child in parent.values else None
            named = isinstance(key, ast.Constant) and isinstance(key.value, str)
            return named and _record_handed_on(parent, body, parents)
        return False
    if (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        name = parent.targets[0].id
        uses = name_loads(body, name)
        return bool(uses) and all(_stamp_only(use, body, parents, depth + 1) for use in uses)
    return False


def _record_type(call: ast.Call) -> bool:
    """``dict(..)`` or a class (``Observation(..)``, a capitalised name): a call that builds a record
    from its keywords. Any other call's keyword may filter, key or compute (``fetch(since=now())``)."""
    name = last_name(dotted(call.func))
    return name == "dict" or name[:1].isupper()


def _record_handed_on(record: ast.AST, body: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The record is what the task returns (its XCom), directly or through the name it is assigned to,
    whose other uses only set or read its fields. A record handed to any call may be a query's
    parameters or a filter (``hook.run(sql, parameters={"day": day})``): never a stamp."""
    parent = parents.get(record)
    if isinstance(parent, ast.Return):
        return True
    name = assigned_name(parent)
    if name is None:
        return False
    returned = False
    for use in (n for n in ast.walk(body) if isinstance(n, ast.Name) and n.id == name):
        above = parents.get(use)
        if above is parent:  # the assignment's own target
            continue
        if isinstance(above, ast.Return):
            returned = True
            continue
        if isinstance(above, ast.Subscript) and above.value is use:
            continue  # its fields are set or read
        return False
    return returned


def _elapsed(binop: ast.BinOp, node: ast.AST, body: ast.AST) -> bool:
    """``clock - clock``: the other side is a clock read too, or a name only ever bound to one."""
    other = binop.right if binop.left is node else binop.left
    if isinstance(other, ast.Call):
        return _clock_call_name(dotted(other.func)) is not None
    if not isinstance(other, ast.Name):
        return False
    bound = assigned_values(body, other.id)
    return bool(bound) and all(
        (isinstance(v, ast.Call) and _clock_call_name(dotted(v.func)) is not None)
        or _shifts_itself(v, other.id)
        for v in bound
    )


def _shifts_itself(value: ast.AST, name: str) -> bool:
    """`value` is ``name +/- span``: what ``name = name + timedelta(seconds=wait)`` assigns (a timer
    moved on, as a poll loop restarts its clock): the name keeps the kind of value it had."""
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Add | ast.Sub)
        and any(isinstance(side, ast.Name) and side.id == name for side in (value.left, value.right))
        and _span(
            value, value.left if isinstance(value.left, ast.Name) and value.left.id == name else value.right
        )
    )


def _self_shift(use: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Principle (round 33, Singular's report poll): a name read only to move itself by a span
    (``started_at = started_at + timedelta(seconds=wait)``) hands its value to nobody else: the
    name's other reads decide what the value does (``(utcnow() - started_at).total_seconds() >
    timeout`` times a poll; it is no window). Read as data (``mod_time > after`` once ``after =
    after - timedelta(days=10)``), the shifted value is "the last N" (`_value_use`)."""
    binop = parents.get(use)
    assign = parents.get(binop) if binop is not None else None
    return (
        isinstance(use, ast.Name)
        and isinstance(binop, ast.BinOp)
        and isinstance(assign, ast.Assign)
        and assign.value is binop
        and len(assign.targets) == 1
        and isinstance(assign.targets[0], ast.Name)
        and assign.targets[0].id == use.id
        and _shifts_itself(binop, use.id)
    )


#: What only a duration has (``timedelta.total_seconds()``, ``.days``; pendulum's ``in_days()``): a
#: datetime shifted by a span has none (it has ``.day``), so ``(now() - parsed).days`` is an age.
_DURATION_ATTRS = frozenset(
    {"total_seconds", "seconds", "microseconds", "days", "in_days", "in_hours", "in_minutes", "in_seconds"}
)


def _duration(binop: ast.BinOp, body: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """``now() - started`` whose result is read as a duration (``.total_seconds()``, ``.seconds``),
    directly or through the one name it is assigned to: elapsed time (the start pulled from XCom,
    say), not a window ("now minus a span" is a datetime, which has no ``total_seconds``)."""
    parent = parents.get(binop)
    if isinstance(parent, ast.Attribute):
        return parent.attr in _DURATION_ATTRS
    if not isinstance(parent, ast.Assign) or len(parent.targets) != 1:
        return False
    target = parent.targets[0]
    if not isinstance(target, ast.Name):
        return False
    name = target.id
    uses = name_loads(body, name)
    return bool(uses) and all(
        isinstance(attr := parents.get(use), ast.Attribute) and attr.attr in _DURATION_ATTRS for use in uses
    )


def _span(binop: ast.BinOp, node: ast.AST) -> bool:
    """The other side of ``clock +/- other`` is a span: timedelta(..), a duration, a name or number
    (never a string literal: ``'Report-' + x`` concatenates)."""
    other = binop.right if binop.left is node else binop.left
    if isinstance(other, ast.Constant) and isinstance(other.value, str):
        return False
    if isinstance(other, ast.Call):
        return last_name(dotted(other.func)) in RELATIVE_CALLS
    return isinstance(other, ast.Name | ast.Attribute | ast.Constant)


def parents(root: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node's parent, for looking upward from a clock read."""
    return {child: parent for parent in ast.walk(root) for child in ast.iter_child_nodes(parent)}


def keyed(root: ast.AST) -> bool:
    """A call or argument carries an idempotency / deduplication key (a keyword, header or dict key)."""
    for node in ast.walk(root):
        if isinstance(node, ast.keyword) and node.arg and KEY_WORDS.search(node.arg):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY_WORDS.search(node.value):
            return True
    return False


_SQL_START = re.compile(
    r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"  # leading comments (a .sql file's header)
    r"(select|insert|update|delete|merge|with|truncate|replace|create|drop|copy)\b",
    re.IGNORECASE | re.DOTALL,
)


def looks_like_sql(text: str) -> bool:
    """The string starts like a SQL statement, after any comments (for strings task code passes to
    execute/run)."""
    return bool(_SQL_START.match(text))


#: A function that deletes, expires or archives what is older than a cutoff (``_cleanup_old_backups``).
_RETENTION_NAME = re.compile(r"clean_?up|purge|prune|retention|housekeep|expire|(?:delete|remove)_old", re.I)
#: A function whose work is a chat message (``info_slack``): the clock dates a report, no data.
#: Round 28b: or whose name composes or sends one (``generate_top_downloads_message``, whose
#: ``today - hours`` only names the day in the Slack text); never one that consumes messages.
#: Round 30b: or an e-mail or notification (``send_email``, whose ``now() - 1 day`` heads the mail's
#: text; ``send_etl_notification``, whose ``now()`` dates the subject).
_MESSAGE_NAME = re.compile(
    r"slack|^(?:generate|build|make|format|compose|create|prepare|render|send|post)_(?:\w+_)?"
    r"(?:message|msg|e?mail|notification)$",
    re.I,
)


def clock_owner_purpose(fn: ast.AST) -> str | None:
    """Why a clock read in `fn` decides no data window, from the function's name: ``"retention"``
    (it cleans up or expires what is older than a cutoff: a late run deletes as much, and what one
    run leaves the next one takes) or ``"message"`` (it posts a chat report or mails one); else None."""
    name = getattr(fn, "name", "")
    if _RETENTION_NAME.search(name):
        return "retention"
    if _MESSAGE_NAME.search(name):
        return "message"
    return None
