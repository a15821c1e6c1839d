"""The UI's history scoped to what the caller may read (issue 14: F2, F3, F4), through real parts.

The environment is tests/ui_env.py: Airflow's own API app with the plugin, the per-DAG auth
manager of tests/authmanager.py (alice may reach DAG A only), and a history store holding writes,
attempts, effects and backfills of both DAGs. Every route of the plugin's app is enumerated from
the app itself and asked by alice about A, about B and about no DAG: B's distinctive values
(run ids, checksums, fingerprints, policy versions, hosts, errors, measures, recipient, file,
idempotency key) appear nowhere. A backfill's status lists its own DAG's writes, never those of
another DAG's run with the same run id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from tests.ui_env import (
    B_ONLY,
    B_SECRETS,
    B_TASK,
    DAG_A,
    DAG_B,
    FORM,
    UiEnv,
    app_routes,
    b_leaks,
    ui_environment,
)


@pytest.fixture(scope="module")
def env(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with ui_environment(tmp_path_factory) as environment:
        yield environment


def leaks(answer: Any) -> list[str]:
    """B's values in an answer, other than those the request itself named (a form echoes them)."""
    asked = str(answer.request.url)
    return [leak for leak in b_leaks(answer.text) if quote(leak.split("=", 1)[1], safe="") not in asked]


# --------------------------------------------------------------------------------------------
# The auth manager is Airflow's, with alice limited to DAG A
# --------------------------------------------------------------------------------------------


def test_the_per_dag_auth_manager_limits_alice_to_dag_a_in_airflows_own_api(env: UiEnv) -> None:
    dags = env.call("GET", "/api/v2/dags", user="alice").json()["dags"]
    assert {d["dag_id"] for d in dags} & {DAG_A, DAG_B} == {DAG_A}
    assert env.call("GET", f"/api/v2/dags/{DAG_B}", user="alice").status_code == 403
    assert env.call("GET", f"/api/v2/dags/{DAG_A}", user="alice").status_code == 200
    admin = {d["dag_id"] for d in env.call("GET", "/api/v2/dags").json()["dags"]}
    assert {DAG_A, DAG_B} <= admin


def test_a_user_who_may_read_dag_a_but_not_its_runs_sees_none_of_its_history(env: UiEnv) -> None:
    """dana may read DAG A but none of its runs (FAB: `can_read` on `DAG:scope_a` without `DAG
    Runs`): Airflow shows her the DAG and refuses its runs; the history, with or without a DAG
    filter, refuses her too (the nav history used to show A's runs, tries and effects)."""
    assert env.call("GET", f"/api/v2/dags/{DAG_A}", user="dana").status_code == 200
    assert env.call("GET", f"/api/v2/dags/{DAG_A}/dagRuns", user="dana").status_code == 403
    for path in (
        "/idempotent/api/history",
        "/idempotent/history",
        f"/idempotent/api/history?dag_id={DAG_A}",
        f"/idempotent/api/dags/{DAG_A}/history",
        f"/idempotent/dags/{DAG_A}/history",
    ):
        answer = env.call("GET", path, user="dana")
        assert answer.status_code == 403, (path, answer.status_code, answer.text[:300])
        assert "achecksum" not in answer.text and not b_leaks(answer.text), path


# --------------------------------------------------------------------------------------------
# F2, F3: history, attempts, effects, charts: only the DAGs the caller may read
# --------------------------------------------------------------------------------------------


def _dags_in(answer: dict[str, Any]) -> dict[str, set[str]]:
    windows = answer["windows"]
    return {
        "writes": {w["dag_id"] for win in windows for w in win["writes"]},
        "attempts": {a["dag_id"] for win in windows for a in win["attempts"]},
        "effects": {e["dag_id"] for win in windows for e in win.get("effects", [])},
    }


@pytest.mark.parametrize(
    "path",
    [
        f"/idempotent/api/dags/{DAG_A}/history",
        f"/idempotent/api/history?dag_id={DAG_A}",
        "/idempotent/api/history",
    ],
)
def test_history_shows_alice_only_dag_as_writes_attempts_and_effects(env: UiEnv, path: str) -> None:
    answer = env.call("GET", path, user="alice")
    assert answer.status_code == 200, answer.text
    assert _dags_in(answer.json()) == {"writes": {DAG_A}, "attempts": {DAG_A}, "effects": {DAG_A}}
    assert not leaks(answer), leaks(answer)
    # The charts are built from what alice may see: A's totals only.
    assert B_SECRETS["measure"].replace("987654", "987,654") not in json.dumps(answer.json()["charts"])
    # An admin sees each shared window whole (both DAGs wrote it).
    everything = env.call("GET", path).json()
    assert _dags_in(everything)["writes"] == {DAG_A, DAG_B}


def test_the_dag_history_page_shows_alice_no_other_dags_data(env: UiEnv) -> None:
    for path in (
        f"/idempotent/dags/{DAG_A}/history",
        f"/idempotent/history?dag_id={DAG_A}",
        "/idempotent/history",
    ):
        page = env.call("GET", path, user="alice")
        assert page.status_code == 200, page.text
        assert "achecksum3" in page.text  # alice does see A's writes
        assert not leaks(page), (path, leaks(page))
        assert "987,654.32" not in page.text  # B's measure in no chart or diff


@pytest.mark.parametrize(
    "query",
    [{"task_id": B_TASK}, {"table": B_ONLY}, {"table": "b_ledger"}, {"flag": "failed"}],
    ids=["B's task", "B's table", "B's table name", "B's failed attempts"],
)
def test_a_filter_on_another_dags_task_or_table_reveals_nothing(env: UiEnv, query: dict[str, str]) -> None:
    for path in ("/idempotent/api/history", f"/idempotent/api/dags/{DAG_A}/history"):
        answer = env.call("GET", f"{path}?{urlencode(query)}", user="alice")
        assert answer.status_code == 200, answer.text
        assert answer.json()["windows"] == [], (path, query)  # not even which windows B wrote
    page = env.call("GET", f"/idempotent/history?{urlencode(query)}", user="alice")
    assert "0 windows." in page.text or "No window" in page.text, page.text[:2000]
    # The filters do match for someone who may read B.
    assert env.call("GET", f"/idempotent/api/history?{urlencode(query)}").json()["windows"]


def test_the_effects_of_unreadable_dags_are_not_in_the_history(env: UiEnv) -> None:
    answer = env.call("GET", "/idempotent/api/history", user="alice").json()
    effects = [e for win in answer["windows"] for e in win["effects"]]
    assert effects and {e["dag_id"] for e in effects} == {DAG_A}
    text = json.dumps(answer)
    for name in ("recipient", "file", "file_hash", "idempotency_key", "hostname"):
        assert B_SECRETS[name] not in text, name
    admin = env.call("GET", "/idempotent/api/history").json()
    assert {e["dag_id"] for win in admin["windows"] for e in win["effects"]} == {DAG_A, DAG_B}


# --------------------------------------------------------------------------------------------
# F4: a backfill's status is its DAG's runs' writes, not every DAG's run of the same run id
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", ["admin", "alice"])
def test_backfill_status_lists_only_its_dags_writes(env: UiEnv, user: str) -> None:
    answer = env.call("GET", f"/idempotent/api/dags/{DAG_A}/backfills/{env.backfills[DAG_A]}", user=user)
    assert answer.status_code == 200, answer.text
    windows = answer.json()["windows"]
    assert [w["run_id"] for w in windows] == env.backfill_run_ids[DAG_B]  # the same run ids as B's
    writes = [w for win in windows for w in win["writes"]]
    assert len(writes) == len(windows) == 2  # one write of A per window, none of B
    assert all(w["checksum"].startswith("achecksum") for w in writes), writes
    assert not leaks(answer), leaks(answer)
    # B's status (for an admin) has B's own.
    b_status = env.call("GET", f"/idempotent/api/dags/{DAG_B}/backfills/{env.backfills[DAG_B]}").json()
    assert {w["checksum"] for win in b_status["windows"] for w in win["writes"]} == {B_SECRETS["checksum"]}


# --------------------------------------------------------------------------------------------
# Every route of the app, asked by alice about A, about B and about no DAG
# --------------------------------------------------------------------------------------------

#: Query strings a route is asked with (besides none): each names B's data some way.
NAV_QUERIES = [
    {"dag_id": DAG_A},
    {"dag_id": DAG_B},
    {"task_id": B_TASK},
    {"table": B_ONLY},
    {"flag": "failed"},
    {"from": "2026-08-01", "to": "2026-08-31", "limit": "500"},
]


#: A rerun preview of a day both DAGs wrote (their tasks write no window: nothing is staged).
RERUN = {"window_start": "2026-08-03T00:00:00+00:00", "window_end": "2026-08-04T00:00:00+00:00"}


def _attempt_queries(env: UiEnv) -> list[dict[str, str]]:
    return [
        {"run_id": "scheduled__2026-08-03T00:00:00+00:00", "task_id": "write_payouts"},
        {"run_id": B_SECRETS["run_id"], "task_id": B_TASK, "map_index": "-1"},
        {"run_id": env.backfill_run_ids[DAG_A][0], "task_id": "write_payouts"},
    ]


def _bodies(path: str) -> Any:
    if path.endswith("/rerun/preview"):
        return RERUN
    if path.endswith("/stop"):
        return {"reason": "scope test"}
    if path.endswith("/killswitch/clear"):
        return {}
    return FORM


def requests_for(env: UiEnv, method: str, template: str) -> list[tuple[str, str, Any, str | None]]:
    """(method, path, body, the DAG it names) for one route template: about A, B and no DAG."""
    dags: list[str | None] = [DAG_A, DAG_B] if "{dag_id}" in template else [None]
    out = []
    for dag in dags:
        path = template.replace("{name}", "idempotent.css")
        if dag is not None:
            path = path.replace("{dag_id}", dag).replace("{backfill_id}", str(env.backfills[dag]))
        queries: list[dict[str, str]] = [{}]
        if path.endswith("/history"):
            queries += NAV_QUERIES
        if path.endswith(("/attempt", "/attempts")):
            queries = _attempt_queries(env)
        if path.endswith("/rerun"):
            queries = [{k: v for k, v in RERUN.items() if k.startswith("window_")}]
        for query in queries:
            named = dag or query.get("dag_id")  # a DAG route's path wins over ?dag_id=
            full = f"{path}?{urlencode(query)}" if query else path
            out.append((method, full, _bodies(path) if method == "POST" else None, named))
    return out


def test_every_route_asked_by_alice_shows_no_data_of_a_dag_she_may_not_read(env: UiEnv) -> None:
    routes = app_routes()
    assert len(routes) >= 16, routes  # every page, API route, static file and the document
    asked: dict[str, int] = {}
    problems: list[str] = []
    for method, template in routes:
        for method_, path, body, named in requests_for(env, method, template):
            answer = env.call(method_, path, body, user="alice", follow_redirects=False)
            asked[template] = asked.get(template, 0) + 1
            if named == DAG_B and answer.status_code != 403:
                problems.append(f"{method_} {path}: {answer.status_code} (B is not alice's)")
            elif named != DAG_B and answer.status_code not in (200, 303, 409):
                problems.append(f"{method_} {path}: {answer.status_code} {answer.text[:200]}")
            if leaks(answer):
                problems.append(f"{method_} {path}: shows {leaks(answer)}")
    assert set(asked) == {t for _, t in routes}
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------
# A DAG that does not exist: 404 naming it, to a caller allowed on it; 403 like B to alice
# --------------------------------------------------------------------------------------------

#: A well-formed DAG id no DAG file defines.
UNKNOWN = "no_such_dag_31"


def test_every_dag_route_answers_404_for_an_unknown_dag_and_alice_403_as_for_b(env: UiEnv) -> None:
    """Every route with a DAG in its path (pages and API), asked as each route's own test asks it
    about B, but about a DAG that does not exist: the admin (who may reach any DAG) gets 404
    naming it, as its document says; alice gets exactly the answer she gets about B (an existing
    DAG she may not read), so she cannot tell the two apart. Nothing is logged or written."""
    spec = env.call("GET", "/idempotent/api/openapi.json").json()["paths"]
    before = _backfills_of(env, DAG_A), _backfills_of(env, DAG_B)
    problems: list[str] = []
    asked = set()
    for method, template in app_routes():
        if "{dag_id}" not in template:
            continue
        asked.add((method, template))
        documented = template.removeprefix("/idempotent").replace("{backfill_id:int}", "{backfill_id}")
        if documented in spec:
            assert "404" in spec[documented][method.lower()]["responses"], (method, template)
        for method_, path, body, named in requests_for(env, method, template):
            if named != DAG_B:
                continue
            unknown = path.replace(f"/dags/{DAG_B}/", f"/dags/{UNKNOWN}/")
            admin = env.call(method_, unknown, body, follow_redirects=False)
            if admin.status_code != 404 or f"DAG {UNKNOWN} not found" not in admin.text:
                problems.append(f"admin {method_} {unknown}: {admin.status_code} {admin.text[:200]}")
            elif "/api/" in unknown and "check the DAG id" not in admin.json()["detail"]:
                problems.append(f"admin {method_} {unknown}: {admin.json()}")
            b_answer = env.call(method_, path, body, user="alice", follow_redirects=False)
            mine = env.call(method_, unknown, body, user="alice", follow_redirects=False)
            same = (mine.status_code, mine.text) == (b_answer.status_code, b_answer.text)
            if not same or mine.status_code != 403:
                problems.append(
                    f"alice {method_} {unknown}: {mine.status_code} {mine.text[:120]} but about B: "
                    f"{b_answer.status_code} {b_answer.text[:120]}"
                )
    assert len(asked) >= 12, asked  # history, attempts, guard, backfill routes, rerun; pages too
    assert not problems, "\n".join(problems)
    assert (_backfills_of(env, DAG_A), _backfills_of(env, DAG_B)) == before


def test_the_history_and_attempts_of_an_unknown_dag_are_404_not_an_empty_list(env: UiEnv) -> None:
    """The history store may hold records of any DAG id: the routes say the DAG is unknown, while
    the DAG that exists and wrote nothing for this query answers its empty list."""
    attempts = "attempts?run_id=r1&task_id=write_payouts"
    for tail in ("history", attempts, f"history?task_id={B_TASK}"):
        answer = env.call("GET", f"/idempotent/api/dags/{UNKNOWN}/{tail}")
        assert answer.status_code == 404, answer.text
        assert answer.json()["detail"].startswith(f"DAG {UNKNOWN} not found: check the DAG id"), answer.text
    assert env.call("GET", f"/idempotent/api/dags/{DAG_A}/{attempts}").json()["tries"] == []
    assert env.call("GET", f"/idempotent/api/dags/{DAG_A}/history?task_id=nothing").json()["windows"] == []
    page = env.call("GET", f"/idempotent/dags/{UNKNOWN}/history", headers={"Accept": "text/html"})
    assert page.status_code == 404 and "text/html" in page.headers["content-type"], page.text[:300]
    assert f"DAG {UNKNOWN} not found" in page.text


# --------------------------------------------------------------------------------------------
# Creating a backfill of a DAG the caller may not read: Airflow's 403, never the guard's verdict
# --------------------------------------------------------------------------------------------

#: A corrective conf the guard accepts; over the cap (3) only by the range's length.
DECLARED = {"semantics": "corrective", "reason": "scope test", "policy_version": "v2"}


def _backfills_of(env: UiEnv, dag_id: str) -> int:
    answer = env.call("GET", f"/api/v2/backfills?dag_id={dag_id}&limit=100")
    assert answer.status_code == 200, answer.text
    return int(answer.json()["total_entries"])


@pytest.mark.parametrize("path", ["/api/v2/backfills", "/api/v2/backfills/dry_run"])
@pytest.mark.parametrize("days", [2, 8], ids=["within-cap", "over-cap"])
def test_alice_creating_a_backfill_of_dag_b_gets_403_and_learns_nothing_of_its_guard(
    env: UiEnv, path: str, days: int
) -> None:
    body = {
        "dag_id": DAG_B,
        "from_date": "2026-08-20T00:00:00+00:00",
        "to_date": f"2026-08-{19 + days}T00:00:00+00:00",
        "dag_run_conf": DECLARED,
        "reprocess_behavior": "completed",
    }
    before = _backfills_of(env, DAG_B)
    answer = env.call("POST", path, body, user="alice")
    assert answer.status_code == 403, answer.text
    assert "cap" not in answer.text and "window" not in answer.text, answer.text  # not the guard's words
    assert _backfills_of(env, DAG_B) == before
    # The control: the same request about her own DAG gets the guard's verdict (over the cap: 422
    # naming the cap; within it: a dry run's count), so the 403 above is the DAG's, not the route's.
    mine = env.call("POST", "/api/v2/backfills/dry_run", body | {"dag_id": DAG_A}, user="alice")
    if days > 3:
        assert mine.status_code == 422 and "cap" in mine.text, mine.text
    else:
        assert mine.status_code == 200 and mine.json()["total_entries"] == days, mine.text
