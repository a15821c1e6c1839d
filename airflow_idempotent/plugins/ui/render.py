"""HTML: the Jinja2 templates (autoescape on, undefined names are errors), their filters, and the
error answers (a page for a page, JSON for the API).

Data for scripts is embedded with `tojson` in a `<script type="application/json">` block; the
script builds the DOM with `textContent` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from airflow_idempotent.history.dag_versions import bundle_label, version_label
from airflow_idempotent.history.report import first_line, short
from airflow_idempotent.plugins.ui.charts import fmt_number, places_of, signed, to_decimal, version_name

#: Where Airflow's API server mounts the app (the pages' links are relative to it).
URL_PREFIX = "/idempotent"
TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")
#: The files `/static/{name}` serves (nothing else is ever read from disk by name).
STATIC_FILES = {
    "idempotent.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "backfill.js": "text/javascript; charset=utf-8",
    "rerun.js": "text/javascript; charset=utf-8",
}


def when(value: Any) -> str:
    """An instant as the pages show it: UTC, to the second, with a Z."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(value, datetime):
        return "" if value is None else str(value)
    value = value.astimezone(timezone.utc) if value.tzinfo else value
    return value.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def diff_summary(diff: Any) -> dict[str, Any] | None:
    """A diff for display: counts and each measure's before -> after (delta)."""
    if not isinstance(diff, dict):
        return None
    measures = []
    raw = diff.get("measures")
    for name, sums in raw.items() if isinstance(raw, dict) else []:
        if not isinstance(sums, dict):
            continue
        before, after = to_decimal(sums.get("before")), to_decimal(sums.get("after"))
        delta = to_decimal(sums.get("delta"))
        if delta is None and before is not None and after is not None:
            delta = after - before
        places = places_of((before, after, delta))
        measures.append(
            {
                "name": str(name),
                "before": fmt_number(before, places),
                "after": fmt_number(after, places),
                "delta": signed(delta, places),
            }
        )
    counts = {
        k: diff.get(k) for k in ("rows_before", "rows_after", "added", "removed", "changed", "unchanged")
    }
    return {"counts": counts, "measures": measures}


@cache
def jinja_env() -> Any:
    """The templates' environment (built once)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        {
            "when": when,
            "short": lambda v, n=12: short(v, n) if isinstance(v, str) else ("" if v is None else v),
            "num": lambda v: fmt_number(to_decimal(v)) if v is not None else "",
            "u": lambda v: quote(str(v), safe=""),
            "diff_summary": diff_summary,
            "first_line": lambda v: first_line(v) if isinstance(v, str) else v,
            "version_name": version_name,
            "dag_version": lambda w: version_label(w) or "",
            "bundle": lambda w: bundle_label(w) or "",
            "iso": lambda v: v.isoformat() if isinstance(v, datetime) else str(v),
        }
    )
    return env


def root_path(request: Request) -> str:
    """This app's path prefix as the browser sees it (Airflow's root path + /idempotent)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def airflow_root(request: Request) -> str:
    """Airflow's own path prefix as the browser sees it (links back into Airflow's UI)."""
    root = root_path(request)
    return root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page: `template` with `context`, plus the paths and defaults every page uses."""
    context.setdefault("root", root_path(request))
    context.setdefault("airflow", airflow_root(request))
    context.setdefault("csrf", "")
    context.setdefault("title", "airflow-idempotent")
    context.setdefault("user", None)
    html = jinja_env().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status)


def _route_path(request: Request) -> str:
    path = str(request.scope.get("path", ""))
    root = str(request.scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def wants_html(request: Request) -> bool:
    """A page (not the API, not a static file) answers its errors as a page."""
    path = _route_path(request)
    return not path.startswith(("/api/", "/static/")) and path != "/api"


def error_response(
    request: Request, status: int, detail: Any, headers: Mapping[str, str] | None = None
) -> Response:
    """An error as the caller reads it: the error page, or `{"detail": ...}` for the API."""
    if wants_html(request):
        messages = (
            [f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail]
            if isinstance(detail, list)
            else [str(detail)]
        )
        page = render(
            request, "error.html", status=status, status_code=status, messages=messages, title="Error"
        )
        page.headers.update(headers or {})
        return page
    return JSONResponse({"detail": detail}, status_code=status, headers=dict(headers or {}))
