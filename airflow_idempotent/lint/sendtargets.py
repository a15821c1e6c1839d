"""Which retried sends are defects (IDEM006, issue 35, round 36c).

Of every IDEM006 finding reviewers labelled on public DAG repositories (rounds 1-36: 23 useful of
~400), the useful ones create or move something for people outside, once per send: a billed job
(``POST /create-clips``), a record (``FireService/save``), orders, rewards, statements sent, reminders
and messages pushed, a payment; or one e-mail or published message per record, in a loop (a ticket
per created issue, an observation per payload). The harmless ones are notices (a report or alert
e-mail to the team, a chat message), reads sent by POST (tokens, report queries), state set again
(prices, stock, a whole list), and refreshes or syncs of another service: a retry sends a second copy
of a notice, or redoes the same call. So a send is a defect only when its URL or endpoint names such
an effect, or it is a payment, or it is sent once per record in a loop, or an e-mail or message goes
to an address taken from the data (a requester: round 24's shape); the rest is information.
"""

from __future__ import annotations

import ast
import itertools
import re

from airflow_idempotent.lint.syntax import assigned_values, request_url

__all__ = ["creates", "target_text", "to_the_data"]

#: words of a URL path that name something created, sent or moved for someone outside
_EFFECT_WORDS = frozenset(
    {
        "create",
        "save",
        "insert",
        "add",
        "order",
        "orders",
        "pay",
        "payment",
        "payments",
        "payout",
        "charge",
        "refund",
        "transfer",
        "reward",
        "rewards",
        "claim",
        "grant",
        "credit",
        "send",
        "email",
        "mail",
        "message",
        "messages",
        "notify",
        "notification",
        "notifications",
        "push",
        "remind",
        "reminder",
        "popup",
        "ticket",
        "tickets",
        "publish",
        "invite",
    }
)
#: sends that always move money
_MONEY = ("a payment", "a transfer", "a charge")
_TOKEN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _words(text: str) -> set[str]:
    """The lower-case words of a URL: split at punctuation and camelCase (``virtualOrder``: virtual, order;
    ``popUp``: pop, up and popup)."""
    words: set[str] = set()
    for part in re.split(r"[^A-Za-z]+", text):
        tokens = [t.lower() for t in _TOKEN.findall(part)]
        words.update(tokens)
        words.update(a + b for a, b in itertools.pairwise(tokens))
    return words


def creates(what: str, target: str | None) -> str | None:
    """What a send creates or moves (a word of its URL, or a payment), or None."""
    if what.startswith(_MONEY):
        return what.partition(" (")[0]
    if target is None:
        return None
    hit = sorted(_words(target) & _EFFECT_WORDS)
    return f"'{hit[0]}' in {target[:80]}" if hit else None


def target_text(call: ast.Call, fn: ast.AST) -> str | None:
    """The URL a ``requests.post(url, ..)`` call sends to, as text (its constant parts; a local name is
    read from its last assignment before the call in `fn`)."""
    arg = request_url(call)
    if isinstance(arg, ast.Name):
        before = [v for v in assigned_values(fn, arg.id) if v.lineno <= call.lineno]
        arg = max(before, key=lambda v: v.lineno) if before else arg
    if arg is None:
        return None
    parts = [n.value for n in ast.walk(arg) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return "/".join(parts) if parts else None


#: keyword arguments that carry an e-mail's or message's recipients
_RECIPIENTS = frozenset(
    {"to", "to_addrs", "recipients", "destination", "to_addresses", "phone_number", "phonenumber"}
)


def to_the_data(call: ast.Call, fn: ast.AST) -> bool:
    """The send's recipient comes from the data: a field of a record (``row["requester_email"]``) or
    an argument of the function that sends (``_send_email(email, ..)``), not the team's own list."""
    params = (
        {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)} if not isinstance(fn, ast.Module) else set()
    )
    values = [k.value for k in call.keywords if k.arg and k.arg.lower() in _RECIPIENTS]
    if not values and call.args:
        values = [call.args[0]]
    for value in values:
        if any(isinstance(node, ast.Name) and node.id in params for node in ast.walk(value)):
            return True
    return False
