"""End to end with the FAB auth manager: the plugin's per-DAG access as real deployments grant it.

A real API server (the plugin mounted by Airflow's plugin manager) with `[core] auth_manager` set
to the FAB auth manager of apache-airflow-providers-fab, on fresh PostgreSQL databases (conftest's
helpers): FAB's tables come with `airflow db migrate`, the DAGs of tests/ui_env.py (A and B, both
guarded) are serialized with their FAB resources (`DAG:<id>`) by `airflow dags reserialize`, the
custom roles are FAB's own (`[fab] custom_roles`, created by FAB's role sync) and the users are
made with FAB's CLI (`airflow users create`). FAB syncs its roles once, in the admin's
`users create`; the API server and the other users' commands skip it (`[fab] update_fab_perms`)
so no two processes race it. No scheduler: nothing here needs a task to run.

ROLES is the setup every expectation is computed from: alice's role may read and edit DAG A (and
runs, task instances), dana's may read DAG A itself but none of its runs. Attacked as an attacker
would: no credentials, a forged token, a captured token altered or expired, FAB's Flask session
cookie, HTTP basic auth with good passwords (FAB's basic backend enabled), every bearer form and
the UI's cookie; alice on every route of the plugin about A, B and a DAG that does not exist;
dana on every route; the guarded backfill routes of Airflow's API about B. Figures: every answer's
status, the 403 bodies about B and the unknown DAG byte for byte, none of B's seeded values in any
answer to alice, and Airflow's own API agreeing with the plugin for each user.
"""

from __future__ import annotations

import base64
import http.cookiejar
import json
import re
import secrets
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_idempotent.history.store import HistoryStore
from tests.e2e.conftest import (
    AIRFLOW,
    SERVICES,
    AirflowCluster,
    deployment,
    kill_group,
)
from tests.ui_env import DAG_A, DAG_B, DAG_FILE, FORM, app_routes, b_leaks, seed

pytestmark = pytest.mark.e2e

FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
#: FAB's basic-auth backend enabled as a deployment coming from Airflow 2 would have it.
FAB_BACKENDS = (
    "airflow.providers.fab.auth_manager.api.auth.backend.basic_auth,"
    "airflow.providers.fab.auth_manager.api.auth.backend.session"
)
#: The custom FAB roles: (action, resource) pairs, FAB's own names.
ROLES: dict[str, list[tuple[str, str]]] = {
    "a_operator": [
        ("can_read", f"DAG:{DAG_A}"),
        ("can_edit", f"DAG:{DAG_A}"),
        ("can_read", "DAG Runs"),
        ("can_create", "DAG Runs"),
        ("can_edit", "DAG Runs"),
        ("can_read", "Task Instances"),
    ],
    "a_dag_only": [("can_read", f"DAG:{DAG_A}")],
}
#: user: (role, password).
USERS = {
    "admin": ("Admin", "admin"),  # what conftest's `AirflowCluster.token` logs in with
    "alice": ("a_operator", secrets.token_urlsafe(12)),
    "dana": ("a_dag_only", secrets.token_urlsafe(12)),
}
#: A well-formed DAG id no DAG file defines.
UNKNOWN = "no_such_dag_32"
#: The rerun preview of a day both DAGs wrote (their tasks write no window: nothing is staged).
RERUN = {"window_start": "2026-08-03T00:00:00+00:00", "window_end": "2026-08-04T00:00:00+00:00"}
ATTEMPT = {"run_id": "scheduled__2026-08-03T00:00:00+00:00", "task_id": "write_payouts"}


def granted_dags(role: str) -> set[str]:
    """The DAGs a role names (FAB's `DAG:<id>` resources), read from ROLES, not from the server."""
    return {resource.removeprefix("DAG:") for _, resource in ROLES[role] if resource.startswith("DAG:")}


def grants(role: str, action: str, resource: str) -> bool:
    return (action, resource) in ROLES[role]


def cli(env: dict[str, str], home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [AIRFLOW, *args],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[str], what: str, timeout: float = 300) -> str:
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)  # type: ignore[arg-type]
        raise
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{output[-3000:]}"
    return output


def create_user(env: dict[str, str], home: Path, user: str) -> subprocess.Popen[str]:
    """FAB's `airflow users create` for `user` (USERS: role, password)."""
    role, password = USERS[user]
    names = ["-f", user, "-l", "Test", "-e", f"{user}@example.test"]
    # `--password=..` in one word: a random password may begin with "-" (token_urlsafe), which
    # argparse would take for an option after a separate "-p" (a CI run failed on it).
    return cli(env, home, "users", "create", "-u", user, f"--password={password}", "-r", role, *names)


@pytest.fixture(scope="module")
def fab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowCluster]:
    """An API server with the FAB auth manager; FAB's users and roles made by FAB's CLI."""
    started = time.monotonic()
    dags = tmp_path_factory.mktemp("fab_dags")
    (dags / "scope_dags.py").write_text(DAG_FILE)
    timings: dict[str, float] = {}

    def lap(what: str) -> None:
        timings[what] = round(time.monotonic() - started - sum(timings.values()), 1)

    # an API server alone: nothing to let finish, 3 s before KILL
    with deployment(tmp_path_factory, "idem_fab", dags, grace=3) as cluster:
        env, home = cluster.env, cluster.home
        env.pop("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS")
        env.update(
            {
                "AIRFLOW__CORE__AUTH_MANAGER": FAB_AUTH_MANAGER,
                "AIRFLOW__FAB__AUTH_BACKENDS": FAB_BACKENDS,
                "AIRFLOW__FAB__CUSTOM_ROLES": json.dumps(
                    {role: [{"action": a, "resource": r} for a, r in pairs] for role, pairs in ROLES.items()}
                ),
            }
        )
        finish(cli(env, home, "db", "migrate"), "airflow db migrate")  # FAB's tables too
        lap("db migrate")
        finish(cli(env, home, "dags", "reserialize"), "airflow dags reserialize")  # and DAG:<id>
        lap("dags reserialize")
        # FAB's first start syncs its roles: the built-in ones, and ROLES ([fab] custom_roles).
        finish(create_user(env, home, "admin"), "airflow users create admin")
        lap("users create admin, FAB's roles synced")
        # Synced once: the other processes skip FAB's sync (and cannot race it).
        env["AIRFLOW__FAB__UPDATE_FAB_PERMS"] = "False"
        cluster.start("api-server", SERVICES["api-server"])
        creating = {user: create_user(env, home, user) for user in USERS if user != "admin"}
        for user, proc in creating.items():
            finish(proc, f"airflow users create {user}")
        lap("users create alice, dana")
        cluster.wait_serving()
        lap("API server serving")
        try:
            yield cluster
        finally:
            print(f"FAB deployment: {timings}, {time.monotonic() - started:.1f} s in all")


def fab_token(cluster: AirflowCluster, user: str, path: str = "/auth/token") -> str:
    """A JWT from one of FAB's token routes, for `user`'s FAB password."""
    status, answer = cluster.call("POST", path, {"username": user, "password": USERS[user][1]}, auth=False)
    assert status == 201, (user, path, status, answer)
    return str(answer["access_token"])


def call(
    cluster: AirflowCluster, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """Status and text of a request with exactly these headers (urllib: no cookie jar, no redirects
    followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    data = json.dumps(body).encode() if body is not None else None
    sent = {"Accept": "application/json", **({"Content-Type": "application/json"} if data else {})}
    req = urllib.request.Request(
        cluster.base_url + path, data=data, method=method, headers={**sent, **(headers or {})}
    )
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --------------------------------------------------------------------------------------------
# What each route of the plugin needs, in FAB's terms (as Airflow's own routes for the same
# action): the action on the path's DAG (`DAG:<id>`) and the global permissions beside it.
# --------------------------------------------------------------------------------------------

READ_RUNS = ("can_read", [("can_read", "DAG Runs")])
READ_TASK_INSTANCES = ("can_read", [("can_read", "DAG Runs"), ("can_read", "Task Instances")])
CREATE_RUNS = ("can_edit", [("can_create", "DAG Runs")])
EDIT_RUNS = ("can_edit", [("can_edit", "DAG Runs")])
API = "/idempotent/api/dags/{dag_id}"
PAGE = "/idempotent/dags/{dag_id}"
#: (method, route) -> what it needs on the DAG of its path.
DAG_ROUTES: dict[tuple[str, str], tuple[str, list[tuple[str, str]]]] = {
    ("GET", f"{API}/history"): READ_RUNS,
    ("GET", f"{API}/guard"): READ_RUNS,
    ("GET", f"{API}/backfills/{{backfill_id}}"): READ_RUNS,
    ("GET", f"{API}/attempts"): READ_TASK_INSTANCES,
    ("POST", f"{API}/backfills/preview"): CREATE_RUNS,
    ("POST", f"{API}/rerun/preview"): CREATE_RUNS,
    ("POST", f"{API}/killswitch/clear"): EDIT_RUNS,
    ("POST", f"{API}/backfills/{{backfill_id}}/stop"): EDIT_RUNS,
    ("POST", f"{API}/backfills"): CREATE_RUNS,
    ("GET", f"{PAGE}/history"): READ_RUNS,
    ("GET", f"{PAGE}/backfill"): READ_RUNS,
    ("GET", f"{PAGE}/rerun"): READ_RUNS,
    ("GET", f"{PAGE}/attempt"): READ_TASK_INSTANCES,
}
#: The history of every DAG whose runs the caller may read (403 when there is none).
NAV_HISTORY = [("GET", "/idempotent/api/history"), ("GET", "/idempotent/history")]
#: Any authenticated user: the redirect to the history, the static files, the OpenAPI document.
ANY_USER = [
    ("GET", "/idempotent/"),
    ("GET", "/idempotent/static/{name}"),
    ("GET", "/idempotent/api/openapi.json"),
]


def may(role: str, need: tuple[str, list[tuple[str, str]]], dag_id: str) -> bool:
    """Whether ROLES lets `role` do what a route needs on `dag_id`."""
    action, others = need
    return grants(role, action, f"DAG:{dag_id}") and all(grants(role, a, r) for a, r in others)


def may_read_runs(role: str) -> bool:
    return any(may(role, READ_RUNS, dag) for dag in granted_dags(role))


def concrete(method: str, route: str, dag_id: str | None, backfill_id: int) -> tuple[str, Any]:
    """(path with query, body) of a route asked about `dag_id`."""
    path = route.replace("{name}", "idempotent.css").replace("{backfill_id}", str(backfill_id))
    if dag_id is not None:
        path = path.replace("{dag_id}", dag_id)
    if path.endswith(("/attempts", "/attempt")):
        path += "?" + urllib.parse.urlencode(ATTEMPT)
    elif path.endswith("/rerun"):
        path += "?" + urllib.parse.urlencode(RERUN)
    body: Any = None
    if method == "POST":
        body = RERUN if path.endswith("/rerun/preview") else FORM
        body = {"reason": "fab test"} if path.endswith("/stop") else {} if "killswitch" in path else body
    return path, body


@pytest.fixture(scope="module")
def seeded(fab: AirflowCluster) -> dict[str, int]:
    """A backfill of each DAG (created by the admin), and the history store holding both DAGs'
    writes, attempts and effects (tests/ui_env.py's seed: B's distinctive values in B_SECRETS)."""
    store = HistoryStore(engine=sa.create_engine(fab.history_url))
    try:
        store.migrate()
        backfills: dict[str, int] = {}
        run_ids: dict[str, list[str]] = {}
        for dag_id in (DAG_A, DAG_B):
            created = fab.request("POST", f"/idempotent/api/dags/{dag_id}/backfills", FORM)
            backfills[dag_id] = int(created["backfill"]["id"])
            status = fab.request("GET", f"/idempotent/api/dags/{dag_id}/backfills/{backfills[dag_id]}")
            run_ids[dag_id] = [w["run_id"] for w in status["windows"]]
        seed(store, run_ids)
    finally:
        store.engine.dispose()
    return backfills


@pytest.fixture(scope="module")
def tokens(fab: AirflowCluster) -> dict[str, str]:
    """Each user's JWT from FAB's POST /auth/token (their FAB password)."""
    return {user: fab_token(fab, user) for user in USERS}


def expected(user: str, method: str, route: str, dag_id: str) -> int:
    """The status ROLES give `user` on a DAG route about `dag_id`: 403 unless the role grants what
    the route needs there. Allowed, every route answers 200, but a second backfill of A: the
    admin's (`seeded`) is still open (nothing runs it), so Airflow refuses it with 409."""
    if not may(USERS[user][0], DAG_ROUTES[(method, route)], dag_id):
        return 403
    return 409 if (method, route) == ("POST", f"{API}/backfills") else 200


def test_every_route_answers_as_the_fab_role_grants(
    fab: AirflowCluster, seeded: dict[str, int], tokens: dict[str, str]
) -> None:
    """alice (A's operator) and dana (A's DAG, none of its runs) on every route of the plugin,
    about A, B and a DAG that does not exist; the admin about the unknown DAG (404: the route is
    reached, and the DAG really is unknown). No answer to either shows B's seeded values."""
    assert set(app_routes()) == set(DAG_ROUTES) | set(NAV_HISTORY) | set(ANY_USER)
    problems: list[str] = []
    counted = 0
    for user in ("alice", "dana"):
        role = USERS[user][0]
        for (method, route), _ in DAG_ROUTES.items():
            answers = {}
            for dag_id in (DAG_A, DAG_B, UNKNOWN):
                path, body = concrete(method, route, dag_id, seeded.get(dag_id, seeded[DAG_A]))
                answers[dag_id] = status, text = call(fab, method, path, body, bearer(tokens[user]))
                counted += 1
                if status != expected(user, method, route, dag_id):
                    problems.append(f"{user} {method} {path}: {status} {text[:150]}")
                if b_leaks(text):
                    problems.append(f"{user} {method} {path}: shows {b_leaks(text)}")
            if answers[UNKNOWN] != answers[DAG_B]:  # an unknown DAG is told apart from B by nothing
                problems.append(f"{user} {method} {route}: unknown {answers[UNKNOWN]} B {answers[DAG_B]}")
        for method, route in NAV_HISTORY:
            status, text = call(fab, method, route, None, bearer(tokens[user]))
            counted += 1
            want = 200 if may_read_runs(role) else 403
            if status != want or b_leaks(text) or (want == 200 and "achecksum3" not in text):
                problems.append(f"{user} {method} {route}: {status} {b_leaks(text)} {text[:150]}")
            filtered = {}  # a ?dag_id= filter is checked as the DAG's own history route
            for dag_id in (DAG_A, DAG_B, UNKNOWN):
                filtered[dag_id] = call(fab, method, f"{route}?dag_id={dag_id}", None, bearer(tokens[user]))
                want = 200 if may(role, READ_RUNS, dag_id) else 403
                if filtered[dag_id][0] != want or b_leaks(filtered[dag_id][1]):
                    problems.append(f"{user} {route}?dag_id={dag_id}: {filtered[dag_id][0]}")
            if filtered[UNKNOWN] != filtered[DAG_B]:
                problems.append(f"{user} {route}?dag_id=: unknown {filtered[UNKNOWN]} B {filtered[DAG_B]}")
        for method, route in ANY_USER:
            path, _ = concrete(method, route, None, 0)
            status, text = call(fab, method, path, None, bearer(tokens[user]))
            counted += 1
            if status != (303 if route == "/idempotent/" else 200) or b_leaks(text):
                problems.append(f"{user} {method} {path}: {status} {text[:150]}")
    for method, route in DAG_ROUTES:
        path, body = concrete(method, route, UNKNOWN, seeded[DAG_A])
        status, text = call(fab, method, path, body, bearer(tokens["admin"]))
        if status != 404 or f"DAG {UNKNOWN} not found" not in text:
            problems.append(f"admin {method} {path}: {status} {text[:150]}")
    assert not problems, "\n".join(problems)
    assert counted == 2 * (3 * len(DAG_ROUTES) + len(NAV_HISTORY) + len(ANY_USER))


def test_airflows_own_api_agrees_and_the_guard_tells_no_one_else(
    fab: AirflowCluster, seeded: dict[str, int], tokens: dict[str, str]
) -> None:
    """Airflow's runs of each DAG, for each user, as ROLES grant them (the plugin's answers above
    follow the same grants); the guarded backfill routes of Airflow's API about B and the unknown
    DAG: Airflow's 403, never the guard's verdict (B's cap); about A, alice gets the verdict."""
    for user in ("alice", "dana"):
        for dag_id in (DAG_A, DAG_B, UNKNOWN):
            status, text = call(fab, "GET", f"/api/v2/dags/{dag_id}/dagRuns", None, bearer(tokens[user]))
            assert status == (200 if may(USERS[user][0], READ_RUNS, dag_id) else 403), (user, dag_id, text)
    over_cap = {
        "from_date": "2026-08-20T00:00:00+00:00",
        "to_date": "2026-08-27T00:00:00+00:00",
        "dag_run_conf": {"semantics": "corrective", "reason": "fab test", "policy_version": "v2"},
    }

    def backfills() -> list[int]:
        return [fab.request("GET", f"/api/v2/backfills?dag_id={d}")["total_entries"] for d in (DAG_A, DAG_B)]

    before = backfills()
    for path in ("/api/v2/backfills", "/api/v2/backfills/dry_run"):
        for user in ("alice", "dana"):
            refused = {}
            for dag_id in (DAG_B, UNKNOWN):
                refused[dag_id] = call(
                    fab, "POST", path, {**over_cap, "dag_id": dag_id}, bearer(tokens[user])
                )
                assert refused[dag_id] == (403, '{"detail":"Forbidden"}'), (path, user, dag_id, refused)
        status, text = call(fab, "POST", path, {**over_cap, "dag_id": DAG_A}, bearer(tokens["alice"]))
        assert status == 422 and "over the DAG's cap of 3" in text, (path, status, text)
        status, text = call(fab, "POST", path, {**over_cap, "dag_id": DAG_A}, bearer(tokens["dana"]))
        assert (status, text) == (403, '{"detail":"Forbidden"}'), (path, status, text)
    assert backfills() == before


def fab_login(fab: AirflowCluster, user: str) -> dict[str, str]:
    """The cookies a browser holds after FAB's login form (`session`, Flask's; `_token`, the JWT)."""
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with browser.open(f"{fab.base_url}/auth/login/", timeout=60) as page:
        form = page.read().decode()
    found = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form)
    assert found is not None, form[:2000]
    fields = {"username": user, "password": USERS[user][1], "csrf_token": found.group(1)}
    with browser.open(
        f"{fab.base_url}/auth/login/", urllib.parse.urlencode(fields).encode(), timeout=60
    ) as answer:
        answer.read()
    cookies = {c.name: c.value for c in jar}
    assert {"session", "_token"} <= set(cookies), cookies.keys()
    return cookies


def forged(claims: dict[str, Any], key: str, algorithm: str = "HS512") -> str:
    import jwt

    return jwt.encode(claims, key, algorithm=algorithm)


def test_credential_forms_with_fab(
    fab: AirflowCluster, seeded: dict[str, int], tokens: dict[str, str]
) -> None:
    """Every route of the plugin (about A, which alice may use) with each credential an attacker
    has: none, a forged token, alice's token altered or expired, a token signed `none`, FAB's
    Flask session cookie without the JWT, HTTP basic auth with good passwords (FAB's basic backend
    is enabled): 401 or 403, never an answer. Then the forms FAB and Airflow accept (every bearer
    form, FAB's CLI token, the JWT cookie from FAB's login form): alice's own answer about A, and
    the 403 about B."""
    import jwt

    secret = fab.env["AIRFLOW__API_AUTH__JWT_SECRET"]
    claims = jwt.decode(tokens["alice"], options={"verify_signature": False})
    admin_id = jwt.decode(tokens["admin"], options={"verify_signature": False})["sub"]
    now = int(time.time())
    header, _, signature = tokens["alice"].rpartition(".")[0], None, tokens["alice"].rpartition(".")[2]
    payload = base64.urlsafe_b64encode(json.dumps({**claims, "sub": admin_id}).encode()).rstrip(b"=")
    as_admin = f"{header.split('.')[0]}.{payload.decode()}.{signature}"
    browser = fab_login(fab, "alice")
    refused = {
        "no credentials": ({}, 401),
        "forged token (admin's id, another key)": (
            bearer(forged({**claims, "sub": admin_id}, "k" * 64)),
            403,
        ),
        "alice's token, sub changed to the admin's": (bearer(as_admin), 403),
        "alice's token re-signed, expired": (
            bearer(forged({**claims, "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600}, secret)),
            401,
        ),
        "token signed 'none'": (bearer(jwt.encode({**claims, "sub": admin_id}, None, algorithm="none")), 403),
        "FAB's session cookie alone": ({"Cookie": f"session={browser['session']}"}, 401),
        "basic auth, the admin's password": (
            {"Authorization": "Basic " + base64.b64encode(f"admin:{USERS['admin'][1]}".encode()).decode()},
            401,
        ),
        "Bearer, then a tab": ({"Authorization": f"Bearer\t{tokens['admin']}"}, 401),
    }
    problems: list[str] = []
    for (method, route), _ in [*DAG_ROUTES.items(), *[(r, None) for r in NAV_HISTORY + ANY_USER]]:
        path, body = concrete(method, route, DAG_A, seeded[DAG_A])
        for form, (headers, want) in refused.items():
            status, text = call(fab, method, path, body, headers)
            if status != want or "achecksum" in text:
                problems.append(f"{form}: {method} {path}: {status} {text[:150]}")
    # Airflow's own API refuses them alike (basic auth too: nothing in Airflow 3 reads it).
    for form, (headers, want) in refused.items():
        status, text = call(fab, "GET", f"/api/v2/dags/{DAG_A}/dagRuns", None, headers)
        if status != want:
            problems.append(f"{form}: Airflow's dagRuns {status} {text[:150]}")
    cli_token = fab_token(fab, "alice", "/auth/token/cli")
    for path in ("/auth/token", "/auth/token/cli"):  # no token for a wrong or another user's password
        for name, password in (("alice", "wrong"), ("alice", USERS["dana"][1]), ("nobody", "x")):
            status, answer = fab.call("POST", path, {"username": name, "password": password}, auth=False)
            if status != 401 or "access_token" in str(answer):
                problems.append(f"{path} as {name}: {status} {str(answer)[:150]}")
    accepted = {
        "Bearer": bearer(tokens["alice"]),
        "bearer (lower case)": {"Authorization": f"bearer {tokens['alice']}"},
        "Bearer + two spaces": {"Authorization": f"Bearer  {tokens['alice']}"},
        "Bearer + space + tab": {"Authorization": f"Bearer \t{tokens['alice']}"},
        "FAB's CLI token": bearer(cli_token),
        "JWT cookie from FAB's login form": {"Cookie": f"_token={browser['_token']}"},
        "FAB's JWT cookie and session cookie": {
            "Cookie": f"_token={browser['_token']}; session={browser['session']}"
        },
    }
    reads = [route for (method, route) in DAG_ROUTES if method == "GET"]
    for form, headers in accepted.items():
        for route in reads:
            for dag_id in (DAG_A, DAG_B):
                path, _ = concrete("GET", route, dag_id, seeded[dag_id])
                status, text = call(fab, "GET", path, None, headers)
                want = expected("alice", "GET", route, dag_id)
                if status != want or b_leaks(text):
                    problems.append(f"{form}: GET {path}: {status} (want {want}) {text[:150]}")
    # A change by cookie needs the page's CSRF token as well (a bearer form does not).
    cookie = accepted["JWT cookie from FAB's login form"]
    preview, _ = concrete("POST", f"{API}/rerun/preview", DAG_A, 0)
    status, text = call(fab, "POST", preview, RERUN, cookie)
    if status != 403 or "X-Idempotent-CSRF" not in text:
        problems.append(f"cookie without CSRF: {status} {text[:150]}")
    status, page = call(
        fab, "GET", f"/idempotent/dags/{DAG_A}/rerun?{urllib.parse.urlencode(RERUN)}", None, cookie
    )
    token = re.search(r'<meta name="idempotent-csrf" content="([^"]+)">', page)
    assert status == 200 and token is not None, (status, page[:300])
    for dag_id, want in ((DAG_A, 200), (DAG_B, 403)):
        path, _ = concrete("POST", f"{API}/rerun/preview", dag_id, 0)
        status, text = call(fab, "POST", path, RERUN, {**cookie, "X-Idempotent-CSRF": token.group(1)})
        if status != want:
            problems.append(f"cookie with the page's CSRF token: POST {path}: {status} {text[:150]}")
    for form, headers in accepted.items():
        if form.startswith(("Bearer", "bearer", "FAB's CLI")):
            status, text = call(fab, "POST", preview, RERUN, headers)
            if status != 200:
                problems.append(f"{form}: POST {preview}: {status} {text[:150]}")
    assert not problems, "\n".join(problems)
