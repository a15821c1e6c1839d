"""The provider's pages inside Airflow's UI, and the JSON API they (and scripts) use.

A FastAPI app mounted by `IdempotentPlugin` in Airflow's API server under ``/idempotent``, and
registered as external views (iframes) of Airflow's UI. Laid out as Airflow's own API
(``api_fastapi/core_api``): ``application`` (the app, ``FASTAPI_APPS``, ``EXTERNAL_VIEWS``),
``routes/`` (thin routers: ``api``, ``backfills``, ``pages``), ``datamodels`` (query, body and
response models), ``security`` (auth, DAG access, CSRF, headers, audit), ``dependencies`` (the
metadata session, the history store, JSON bodies), ``history``, ``backfills``, ``charts`` and
``render`` (templates in ``templates/``, scripts and styles in ``static/``).

========================  ==============================================  ==========================
UI entry                  page                                            Airflow UI destination
========================  ==============================================  ==========================
Browse > Run history      ``/idempotent/history``                         ``nav``
DAG tab "Run history"     ``/idempotent/dags/{dag_id}/history``           ``dag``
DAG tab "Guarded backfill" ``/idempotent/dags/{dag_id}/backfill``         ``dag``
Task instance tab         ``/idempotent/dags/{dag_id}/attempt?run_id=..``  ``task_instance``
A window's Preview rerun  ``/idempotent/dags/{dag_id}/rerun?window_..``   (a link of the history)
========================  ==============================================  ==========================

The JSON API (OpenAPI document at ``/idempotent/api/openapi.json``):

* ``GET  /idempotent/api/history`` and ``GET /idempotent/api/dags/{dag_id}/history``: windows
  (``window_history`` + ``jsonable``, the CLI's query and shape) with every write (its diff too)
  and attempt, and the chart series (each window's measure totals per dataset version).
* ``GET  /idempotent/api/dags/{dag_id}/guard``: the DAG's guard, kill switches, latest backfill.
* ``POST /idempotent/api/dags/{dag_id}/backfills/preview``: the windows a backfill would run, the
  count against the cap, each window's existing data and policy version, and what the guard (or
  Airflow) refuses. Nothing is created.
* ``POST /idempotent/api/dags/{dag_id}/backfills``: create the backfill (Airflow's own creation
  route, as the caller, after the guard's own evaluation: the same answer
  ``POST /api/v2/backfills`` gives). A refusal is a 422 whose ``detail`` is the guard's message.
* ``GET  /idempotent/api/dags/{dag_id}/backfills/{backfill_id}``: per-window status and diffs.
* ``POST /idempotent/api/dags/{dag_id}/backfills/{backfill_id}/stop``: the DAG's backfill kill
  switch, then Airflow's pause of the backfill.
* ``POST /idempotent/api/dags/{dag_id}/killswitch/clear``: clear the DAG's backfill switch.
* ``GET  /idempotent/api/dags/{dag_id}/attempts?run_id=&task_id=&map_index=``: one task
  instance's tries: each try's write, diff, fingerprint (and its parts) and attempt events.
* ``POST /idempotent/api/dags/{dag_id}/rerun/preview``: what rerunning a window would change,
  per task (the CLI's ``rerun --dry-run``: staged, diffed, dropped; nothing written).

Security:

* **Authentication and authorisation** are Airflow's: every route depends on Airflow's own
  ``get_user`` (Bearer header, else the UI's JWT cookie: 401 without, 403 for a bad token) and,
  for a DAG, ``requires_access_dag`` (403 without access): reading history and backfill status
  needs GET on the DAG's runs, an attempt GET on its task instances, preview, create and the
  rerun preview POST on its runs (as Airflow's dry run and create), stop and clear PUT (as
  Airflow's pause). Every history answer (JSON, page, chart; with or without a DAG) holds only
  the writes, attempts and effects of the DAGs the user may read, and only their writes choose
  the windows shown (403 if none). A backfill id in a path must belong to the path's DAG (else
  404), so access to one DAG never reaches another's backfill; its status is that DAG's runs'
  writes, keyed (dag_id, run_id).
* **CSRF**: every state-changing route is a POST with a JSON body (415 otherwise), refused when
  the browser says it is cross-site (``Sec-Fetch-Site``, ``Origin``), and, when the caller is
  authenticated by the UI's cookie (not by an ``Authorization: Bearer`` header, which a browser
  never attaches by itself), it must carry the ``X-Idempotent-CSRF`` header: a token the page
  embeds, signed with Airflow's ``[api] secret_key``, bound to the user and to the session (the
  Airflow token the page was opened with): valid 12 hours, and never after that session ends
  (Airflow's logout revokes the token; or it expires).
* **Bodies**: at most 64,000 bytes, refused with 413 before anything reads them (``BodyLimit``,
  so neither a parser nor Airflow's audit log sees them); nested at most 32 levels (422), checked
  by pydantic's parser before the audit step and the form's model. An unexpected error is a 500
  with the security headers and no exception text.
* **Escaping**: pages are Jinja2 templates with autoescape on; data for scripts is embedded with
  ``tojson`` in a ``<script type="application/json">`` block and the script builds the DOM with
  ``textContent`` only. Every query parameter and form field is validated (422 on anything else,
  nothing written); SQL is only ever SQLAlchemy expressions with bound values. Responses carry a
  Content-Security-Policy (scripts and styles from this app only, framing by Airflow's origin).
"""

from typing import Any

from airflow_idempotent.plugins.ui.views import EXTERNAL_VIEWS

__all__ = ["EXTERNAL_VIEWS", "FASTAPI_APPS", "URL_PREFIX", "app", "create_app"]

# The app and its imports (FastAPI, the routes, the effect ledger: ~0.5 s) load on first use, not
# with the package: a task loads this plugin for its listener and never serves a page.
_LAZY = {
    "FASTAPI_APPS": "application",
    "app": "application",
    "create_app": "application",
    "URL_PREFIX": "render",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
