"""What Python code does, read from its syntax tree: clock reads, spans, side effects and their keys.

Used for DAG files' module code, task arguments, TaskFlow and ``python_callable`` bodies, and the
Python expressions inside Jinja templates.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.scope import Scope, dotted, last_name

__all__ = [
    "KEY_WORDS",
    "RELATIVE_CALLS",
    "SIDE_EFFECT_CALLS",
    "SIDE_EFFECT_OPERATORS",
    "SQL_METHODS",
    "clock_call",
    "is_relative",
    "keyed",
    "looks_like_sql",
    "parents",
]

KEY_WORDS = re.compile(r"idempot|dedup", re.IGNORECASE)
"""A keyword, header or dict key that carries an idempotency or deduplication key."""
_CLOCK_OWNERS = ("datetime", "date", "pendulum", "DateTime", "timezone", "Date")
_CLOCK_METHODS = frozenset({"now", "utcnow", "today", "yesterday", "tomorrow", "utcfromtimestamp"})
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
    {"execute", "run", "exec_driver_sql", "get_records", "get_first", "get_pandas_df", "read_sql", "text"}
)


def clock_call(call: ast.Call, scope: Scope | None) -> str | None:
    """`datetime.now` etc. when the call reads the clock or randomness, else None."""
    written = dotted(call.func)
    name = scope.resolve_name(written) if scope is not None else written
    if name != written and _clock_call_name(name) is not None:
        return f"{written}()"
    return _clock_call_name(written)


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
        if parent is None:
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


def looks_like_sql(text: str) -> bool:
    """The string starts like a SQL statement (for strings task code passes to execute/run)."""
    return bool(
        re.match(r"\s*(select|insert|update|delete|merge|with|truncate|replace|create|drop)\b", text, re.I)
    )
