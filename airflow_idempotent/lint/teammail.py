"""Team e-mails: a retried send whose recipients are the team's own list, not someone the data names.

Principle (IDEM006, round 21 follow-up): a retried task sends its e-mail again. When every recipient
is the team's own list, named so in the code (``EMAIL_DEVS``, ``devs_to_email_addr``,
``Variable.get("ALERT_EMAILS")``, the DAG's ``default_args["email"]``), the second send is a
duplicate notice in the team's inbox: no row, order or other system's state changes. That is
information, not a defect. A recipient read from the data (a requester's address, a row's e-mail),
a literal address (``finance@..``: a reader outside the team, the corpus's fx01) or a setting not
named as the team's (``HUBSPOT_NOTIFICATION_EMAIL``: an inbox that opens a ticket per mail, round
19's cal-itp) stays a finding. A wrapper's ``kwargs.get("to", devs)`` counts as its default: the
helper is the team's notice sender (libsys' ``send_email_with_server_name``, round 21).
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.syntax import assigned_values, dotted, keywords

__all__ = ["TEAM_MAIL_TEXT", "team_recipients"]

TEAM_MAIL_TEXT = (
    "its recipients are the team's own list ({name}): a retry sends the team a second copy, no data changes"
)
#: Words that name a team's own list in a recipient's name or setting key (split on ``_``, ``-``, ``.``).
_TEAM_WORDS = frozenset(
    {
        "dev",
        "devs",
        "developer",
        "developers",
        "admin",
        "admins",
        "ops",
        "devops",
        "oncall",
        "maintainer",
        "maintainers",
        "engineering",
        "team",
        "alert",
        "alerts",
    }
)
#: Calls that read a deployment setting by its key.
_SETTING_READS = ("Variable.get", "getenv", "environ.get", "conf.get")
_MAX_DEPTH = 4


def _team_name(name: str) -> bool:
    return any(word in _TEAM_WORDS for word in re.split(r"[^a-z0-9]+", name.lower()))


def _team(node: ast.expr | None, fn: ast.AST, depth: int = 0) -> str | None:
    """The team name `node` is read from when every recipient in it is the team's list, else None."""
    if node is None or depth > _MAX_DEPTH:
        return None
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        names = [_team(elt, fn, depth + 1) for elt in node.elts]
        return names[0] if names and all(names) else None
    if isinstance(node, ast.Name):
        if _team_name(node.id):
            return node.id
        values = assigned_values(fn, node.id)  # its one assignment in the function
        return _team(values[0], fn, depth + 1) if len(values) == 1 else None
    if isinstance(node, ast.Attribute):
        return node.attr if _team_name(node.attr) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        if not isinstance(key, str):
            return None
        if dotted(node.value).endswith("default_args") and key == "email":
            return 'default_args["email"]'  # the DAG's own failure e-mail list
        return key if _team_name(key) else None
    if isinstance(node, ast.Call):
        callee = dotted(node.func)
        arg = node.args[0] if node.args else None
        if callee.endswith(_SETTING_READS) and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value if _team_name(arg.value) else None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and len(node.args) == 2:
            return _team(node.args[1], fn, depth + 1)  # a wrapper's ``kwargs.get("to", devs)``
    return None


def team_recipients(call: ast.Call, method: str, fn: ast.AST) -> str | None:
    """Why a retried e-mail `call` is safe (its recipients are the team's list), or None."""
    if method not in ("send_email", "send_mail"):
        return None
    to = keywords(call).get("to", call.args[0] if call.args else None)
    name = _team(to, fn)
    return TEAM_MAIL_TEXT.format(name=name) if name is not None else None
