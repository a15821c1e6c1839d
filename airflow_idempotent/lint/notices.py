"""Notices: chat posts whose repeat is a second message to people, not a second effect on anything.

Principle (IDEM006, round 11): a retried task sends its effects again. When the effect is a chat
post (a Slack, Teams, Telegram or Discord operator, or an HTTP request to a chat service's incoming
webhook), the second send is a duplicate message in a team's channel: no row, order, payment or
other system's state changes. That is information (its own, lower severity), not a defect. A
request is a chat post when its URL is a chat webhook's host (written in the call or in a constant
it names) or when the code names it as one: the URL's variable, the receiver of ``.post(..)`` or the
function around the call says slack, teams, telegram, discord, google chat or chat webhook. Words
that also name business sends (notification, push, email in a URL path, alert) are not read: an
HTTP call to the repository's own API stays a finding whatever its path says. E-mail stays a
finding: the labelled corpus (tests/lint_eval) holds a retried report e-mail as IDEM006, since it
goes to people outside the team (a customer, finance) who act on each copy.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.fieldsets import sets_fields
from airflow_idempotent.lint.overwrites import replaces_named, says_overwrite
from airflow_idempotent.lint.reads import request_repeat
from airflow_idempotent.lint.resubmit import REPLACES_TEXT, replaces_interval
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.sendernames import name_parts
from airflow_idempotent.lint.syntax import dotted, request_url
from airflow_idempotent.lint.teammail import team_recipients

__all__ = ["NOTICE_CALLEE", "NOTICE_TEXT", "chat_helper", "notice_call", "notice_operator", "repeat_is_safe"]

NOTICE_TEXT = "it is a chat notice: a retry posts a second copy to the channel, no data changes"
#: Functions named for sending a message to people (``send_notification``, ``post_to_slack``): a clock
#: value that reaches one only as text dates the message (`textuse.ends_in_text`), no data window.
NOTICE_CALLEE = re.compile(r"notif|slack|teams|telegram|discord|chat|alert|send_message|post_message", re.I)
#: Operator class names (case-insensitive substrings) that send a message to people.
_NOTICE_OPERATORS = ("slack", "teams", "telegram", "discord")
#: Incoming-webhook hosts of chat services.
_CHAT_HOST = re.compile(
    r"hooks\.slack\.com|slack\.com/api/chat|chat\.googleapis\.com|webhook\.office\.com|"
    r"outlook\.office(?:365)?\.com/webhook|api\.telegram\.org|discord(?:app)?\.com/api/webhooks",
    re.IGNORECASE,
)
#: Names the code gives a chat post (a variable, a receiver, the function around the call).
_CHAT_NAME = re.compile(
    r"slack|teams|telegram|discord|g_?chat|google_?chat|chat_?webhook|webhook_?chat", re.I
)


#: round 36i (lint68): a repository's own helper that posts to a chat (``send_slack_message``,
#: ``post_to_teams``): a chat service's word and a sender's word both in the callee's name
#: (``notify``/``alert`` alone may be business sends)
_CHAT_POST = re.compile(r"slack|teams|telegram|discord", re.IGNORECASE)
_POST_WORDS = frozenset({"send", "post", "alert", "message", "msg", "notify", "notification"})


def chat_helper(func: str) -> bool:
    """A function named for posting to a chat service: a value it gets is a message's text."""
    return bool(_CHAT_POST.search(func)) and any(w in name_parts(func) for w in _POST_WORDS)


def notice_operator(operator: str) -> bool:
    """An operator class that posts a chat message."""
    name = operator.lower()
    return any(marker in name for marker in _NOTICE_OPERATORS)


def notice_call(call: ast.Call, method: str, fn: ast.AST, scope: Scope) -> bool:
    """A send in task code that is a chat notice: a request to a chat webhook, or one named as a chat post."""
    if _CHAT_NAME.search(getattr(fn, "name", "")):
        return True
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if receiver is not None and _CHAT_NAME.search(dotted(receiver) or ast.unparse(receiver)):
        return True
    url = request_url(call)
    if url is None:
        return False
    if isinstance(url, ast.Name) and _CHAT_NAME.search(url.id):
        return True
    located = scope.string(url)
    if located is not None and _CHAT_HOST.search(located.text):
        return True
    return any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_CHAT_HOST.search(node.value))
        for node in ast.walk(url)
    )


def repeat_is_safe(call: ast.Call, method: str, fn: ast.AST, scope: Scope) -> str | None:
    """Why sending `call` again is safe (information, not a defect), or None: its body replaces an
    interval (`resubmit`), it is a notice or an e-mail to the team's own list (`teammail`), it ends
    a job or rebuilds a cache (`reads.path_repeat`), it sets named fields of one object (`fieldsets`),
    or it PUTs a named resource or says it overwrites (`overwrites`)."""
    if replaces_interval(call, fn, scope):
        return REPLACES_TEXT
    if notice_call(call, method, fn, scope):
        return NOTICE_TEXT
    return (
        team_recipients(call, method, fn)
        or request_repeat(call, scope)
        or sets_fields(call, method, fn)
        or replaces_named(call, method, fn)
        or says_overwrite(call, fn)
    )
