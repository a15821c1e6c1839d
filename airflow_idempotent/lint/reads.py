"""Requests that change nothing when sent again: reads and logins sent by POST, and whole-object PUTs.

Principle (IDEM006, round 12): an HTTP verb is not the effect. Two shapes send no second effect:

- **A read sent by POST.** A GraphQL request whose document holds no ``mutation`` (the module that
  sends it never spells the word) is a query (harper-concierge's Shopify orders query, tuning); so is
  a POST to an endpoint named for reading: a search, a query, a lookup, a count or a report
  (``/_search``, ``/query``, ``/reports/campaigns``: kanchan-1f's Apple Search Ads reports, tuning).
  A second one returns the same answer, or asks for the same report again.
- **A login.** A POST to an endpoint that issues credentials (``/auth/token``, ``/oauth2/token``,
  ``/login``, ``/authenticate``; not a bare ``/auth``, which may authorize a payment: sul-dlss' Airflow
  API client, round 21) asks for a token: a second one gets another token and changes no data. What
  the task then does with the token (a DAG run it triggers, a record it writes) is judged at that call.
- **A whole object written to its key.** An object store's PUT replaces the object at that key:
  boto3's ``Object(bucket, key).put(Body=..)`` (scalezio's run-dated CSV, tuning), and an HTTP PUT
  to a presigned object-store URL (one ``generate_presigned_url`` made, or named presigned/signed, or
  on an S3/GCS host). Sent twice, the same bytes stand at the same key (HTTP's own definition of PUT).
- **A file copied to its path** (lint30): ``put`` of an SCP or SFTP client (``scp.SCPClient(..)``,
  paramiko's ``open_sftp()``/``SFTPClient``) copies a local file to a remote path, no HTTP at all
  (woonpeng's ``upload_file``, round 11's batch): a second copy leaves the same file there.
- **A login named by its URL's variable** (lint30): a POST to a URL known only at run time whose name
  says it issues credentials (``token_endpoint``, ``TOKEN_URL``, ``login_url``, ``oauth_url``;
  Amsterdam's scooter feed, round 18's batch), as a resolved ``/token`` path already was.
- **A login told by its body** (round 29b, `overwrites.fetches_token`): a POST to a URL held in a
  connection whose body carries a password and whose response is read only for tokens (GeoNetwork's
  credentials POST); and a POST to an endpoint named for getting (``/get-files-paths``) is a read.

Principle (IDEM006, round 13): two more requests are sent again but change nothing more the second
time; they are listed as information (`path_repeat`), since the request is still sent:

- **Ending a job.** A request whose path ends by asking to cancel, abort, stop, kill, terminate or
  shut down (mitgate's ``POST {druid}/{task_id}/cancel`` for a timed-out Druid task, tuning): the
  second one finds the job already ended.
- **A cache.** A request whose last or second-to-last path segment names a cache
  (``/chart/warm_up_cache``, ``/symbol/clear/hk/symbol/cache``, ``/reload/symbols/chart/cache/1week``:
  mitgate's Superset warm-up and RockFlow's cache reloads, tuning): a cache is data the receiver
  derives from its own, so rebuilding or clearing it again leaves the same cache.
- **A refresh.** A request whose path names a refresh, a sync or a reload (a segment ``refresh``,
  ``sync``, ``reload``, ``rebuild``, or one starting so: ``refreshSymbols``; RockFlow's
  ``/accounts/refresh``, ``/ftpFiles/sync``, ``/sync/es/watchlist``, tuning) and no send (``send``,
  ``email``, ``notify``, ``push``, ``message``, ``sms``): it asks the receiver to make its state
  match its sources again; a second one finds them matching.

Anything else (a POST to ``/orders``, a PUT to an internal endpoint) stays a send: the path cannot
tell a refresh from a grant, so they are judged by people, not here.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.overwrites import fetches_token
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import BODY_KEYWORDS, dotted, last_name, request_url

__all__ = ["CACHE_TEXT", "ENDS_TEXT", "REFRESH_TEXT", "changes_nothing", "path_repeat", "request_repeat"]

REFRESH_TEXT = "it asks to refresh or sync state from its sources: sent again, it finds them matching"
ENDS_TEXT = "it asks to cancel or stop a job: sent again, it finds the job already ended"
CACHE_TEXT = (
    "it rebuilds or clears a cache: sent again, the receiver derives the same cache from the same data"
)

#: path segments that name a read: the last segments of the URL (before any query string)
_READ_PATH = re.compile(
    r"/(?:_?search|_msearch|_count|query|queries|lookup|find|reports?)(?:/[\w.-]*)?/?(?:[?#]|$)", re.I
)
#: a last segment named for getting (``/get-files-paths``, ``/getRecords``, ``/list_jobs``), round 29b
_GET_PATH = re.compile(r"/(?:[gG]et|[fF]etch|[lL]ist)(?:[-_][\w-]+|[A-Z][\w-]*)/?(?:[?#]|$)")
#: a path that ends by asking to end a job
_ENDING_PATH = re.compile(r"/(?:cancel|abort|stop|kill|terminate|shutdown)/?(?:[?#]|$)", re.I)
#: a path whose last or second-to-last segment names a cache
_CACHE_PATH = re.compile(r"(?:^|/)[\w-]*cache[\w-]*(?:/[\w.%-]*)?/?(?:[?#]|$)", re.I)
#: a path segment naming a refresh, a sync or a reload (``refreshSymbols`` too), and one naming a send
_REFRESH_PATH = re.compile(r"(?:^|/)(?:refresh|re-?sync|sync|reload|rebuild)(?:[A-Z_-][\w-]*)?(?=/|[?#]|$)")
#: the last segment of a path that issues credentials: a token, a login
_LOGIN_PATH = re.compile(
    r"/(?:(?:access_|id_|refresh_)?token|tokens|login|signin|authenticate)/?(?:[?#]|$)", re.I
)
_SEND_PATH = re.compile(r"send|e-?mail|notif|push|message|sms", re.I)
_GRAPHQL = re.compile(r"graphql", re.I)
_OBJECT_HOST = re.compile(
    r"\.s3[.-]|s3\.amazonaws\.com|storage\.googleapis\.com|blob\.core\.windows\.net", re.I
)
_SIGNED_NAME = re.compile(r"presigned|signed_?url", re.I)
#: a variable's name that says its URL issues credentials (``token_endpoint``, ``LOGIN_URL``)
_LOGIN_NAME = re.compile(r"(?:^|_)(?:token|login|oauth2?|signin)(?:_|$)", re.I)
#: calls that make a file-copy client: its ``put(local, remote)`` copies a file, no HTTP request
_FILE_CLIENTS = frozenset({"SCPClient", "SFTPClient", "open_sftp", "from_transport"})
_SIGNING_CALLS = frozenset({"generate_presigned_url", "generate_signed_url", "presigned_put_object"})


def changes_nothing(call: ast.Call, method: str, fn: ast.AST, scope: Scope) -> bool:
    """`call` (a ``.post``/``.put``) only reads, or writes a whole object to its key: no send."""
    if method == "put":
        whole = any(k.arg == "Body" for k in call.keywords) or _signed_url(request_url(call), fn, scope)
        return whole or _file_copy(call, fn)
    if method != "post":
        return False
    url = request_url(call)
    text = _text(url, scope)
    if text is None and url is not None and _LOGIN_NAME.search(last_name(dotted(url) or "")):
        return True
    if text is not None and (_READ_PATH.search(text) or _GET_PATH.search(text) or _LOGIN_PATH.search(text)):
        return True
    if fetches_token(call, fn):
        return True  # `overwrites`: a secret sent, only a token read back
    graphql = text is not None and _GRAPHQL.search(text)
    return bool(graphql) and _query_body(call) and "mutation" not in scope.source.text


def path_repeat(path: str | None) -> str | None:
    """Why sending a request to `path` (a URL or an operator's endpoint) again changes nothing more
    (ENDS_TEXT, CACHE_TEXT, REFRESH_TEXT), or None."""
    if path is None:
        return None
    if _ENDING_PATH.search(path):
        return ENDS_TEXT
    if _CACHE_PATH.search(path):
        return CACHE_TEXT
    return REFRESH_TEXT if _REFRESH_PATH.search(path) and not _SEND_PATH.search(path) else None


def request_repeat(call: ast.Call, scope: Scope) -> str | None:
    """`path_repeat` of the URL a ``.post``/``.put``/``.patch`` call sends to."""
    return path_repeat(_text(request_url(call), scope))


def _text(url: ast.expr | None, scope: Scope) -> str | None:
    located = scope.string(url) if url is not None else None
    return located.text if located is not None else None


def _query_body(call: ast.Call) -> bool:
    """The request's JSON body is a GraphQL document: a dict with a ``query`` key, written in the call
    or in the name it passes."""
    for k in call.keywords:
        if k.arg in BODY_KEYWORDS and any(
            isinstance(n, ast.Dict)
            and any(isinstance(key, ast.Constant) and key.value == "query" for key in n.keys)
            for n in ast.walk(k.value)
        ):
            return True
        if k.arg in BODY_KEYWORDS and isinstance(k.value, ast.Name):
            return True  # json=payload: the dict is built elsewhere in the function
    return False


def _signed_url(url: ast.expr | None, fn: ast.AST, scope: Scope) -> bool:
    """The PUT's URL is a presigned object-store URL: named so, on an object store's host, or the
    value of a signing call in the same function."""
    if url is None:
        return False
    if _SIGNED_NAME.search(dotted(url) or ast.unparse(url)):
        return True
    text = _text(url, scope)
    if text is not None and _OBJECT_HOST.search(text):
        return True
    if not isinstance(url, ast.Name):
        return False
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == url.id for t in node.targets
        ):
            calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
            if any(last_name(dotted(c.func)) in _SIGNING_CALLS for c in calls):
                return True
    return False


def _file_copy(call: ast.Call, fn: ast.AST) -> bool:
    """``x.put(..)`` where `fn` makes ``x`` an SCP or SFTP client (``with scp.SCPClient(..) as x``,
    ``x = ssh.open_sftp()``): a file copied to a path, not an HTTP PUT."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return False
    name = func.value.id
    for node in ast.walk(fn):
        if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            bound = node.optional_vars.id == name
            made = node.context_expr
        elif isinstance(node, ast.Assign):
            bound = any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            made = node.value
        else:
            continue
        if bound and isinstance(made, ast.Call) and last_name(dotted(made.func)) in _FILE_CLIENTS:
            return True
    return False
