"""Schemathesis over the UI's OpenAPI document: generated requests to every operation, answered
without a server error and exactly as the document says (status, content type, body schema).

In-process, through real parts: Airflow's own API app with the plugin mounted behind Airflow's
middlewares and the per-DAG auth manager (tests/ui_env.py: two guarded DAGs, history, effects and
a running backfill each), the document as the API serves it to a logged-in user, every request
with an admin's valid token. Each operation runs with generated path values (mostly DAGs and
backfills that do not exist), with DAG A in the path, and (status, stop) with A's own backfill;
each of those with schema-conforming data and with data that breaks the schema (negative mode,
which also sends requests without the token: their 401 is what the document promises).

Bounded: `IDEM_SCHEMATHESIS_EXAMPLES` examples per operation, variant and mode (default 40), and
`IDEM_SCHEMATHESIS_SECONDS` in all (default 240; operations not reached by then are counted as
skipped). `IDEM_SCHEMATHESIS_CHECKS=all` runs every check schemathesis has (schema-valid data
accepted, invalid data rejected, ...), not only 5xx and conformance: on 2026-12-03 it counted 242
failures in 1,760 requests (0 server errors), recorded per operation and kind with a sample each
(`failure_kinds`, `failure_samples`). Seeded with the suite's seed. The figures (requests,
answers by status, server errors, schema violations) are recorded as the hostile case
`schemathesis_ui_api`, then asserted.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.reliability.conftest import Recorder
from tests.ui_env import DAG_A, UiEnv, ui_environment

EXAMPLES = int(os.environ.get("IDEM_SCHEMATHESIS_EXAMPLES", "40"))
SECONDS = float(os.environ.get("IDEM_SCHEMATHESIS_SECONDS", "240"))
#: IDEM_SCHEMATHESIS_CHECKS=all: every check schemathesis has, not only 5xx and conformance.
ALL_CHECKS = os.environ.get("IDEM_SCHEMATHESIS_CHECKS", "") == "all"
#: Where Airflow's API server mounts the plugin's app (the document's paths are relative to it).
BASE_PATH = "/idempotent"
BASE_URL = f"http://localhost{BASE_PATH}"


@pytest.fixture(scope="module")
def env(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with ui_environment(tmp_path_factory) as environment:
        yield environment


def variants(env: UiEnv, path: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, fixed path parameters) an operation runs with."""
    out: list[tuple[str, dict[str, Any]]] = [("generated", {})]
    if "{dag_id}" in path:
        out.append(("dag A", {"dag_id": DAG_A}))
    if "{backfill_id}" in path:
        out.append(("A's backfill", {"dag_id": DAG_A, "backfill_id": env.backfills[DAG_A]}))
    return out


def addresses(operation_path: str, sent_path: str) -> bool:
    """Whether the path the client sent still addresses the operation.

    A generated path value such as `..` is a dot segment, which every HTTP client removes before
    sending (RFC 3986, 5.2.4): `/api/dags/x/backfills/../..` goes out as `/api/dags`, another
    resource (or, two levels up, Airflow's HTML UI), so its answer says nothing about this operation.
    """
    pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(BASE_PATH + operation_path))
    return re.fullmatch(pattern, sent_path) is not None


def run(strategy: Any, call: Callable[[Any], None], seed_value: int) -> None:
    """`call` on EXAMPLES cases of `strategy` (hypothesis, seeded; every example runs)."""

    @seed(seed_value)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def each(case: Any) -> None:
        call(case)

    each()


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    env: UiEnv, reliability: Recorder, reliability_seed: int
) -> None:
    import schemathesis
    from schemathesis import checks as core_checks
    from schemathesis.core.failures import FailureGroup
    from schemathesis.specs.openapi import checks

    document = env.call("GET", "/idempotent/api/openapi.json")
    assert document.status_code == 200, document.text
    schema = schemathesis.openapi.from_dict(document.json())
    schema.app = env.app
    operations = [result.ok() for result in schema.get_all_operations()]
    selected = [
        core_checks.not_a_server_error,
        checks.status_code_conformance,
        checks.content_type_conformance,
        checks.response_schema_conformance,
        checks.response_headers_conformance,
    ]
    if ALL_CHECKS:  # every check schemathesis registers (negative data rejected, positive accepted, ...)
        selected = list(core_checks.CHECKS.get_all())
    statuses: Counter[str] = Counter()
    per_operation: dict[str, Counter[str]] = {}
    server_errors: list[str] = []
    violations: list[str] = []
    skipped: list[str] = []
    kinds: Counter[str] = Counter()  # (operation, schemathesis' failure title) -> failures
    first: dict[str, str] = {}  # its first failure, as a sample
    started = time.monotonic()

    for operation in operations:
        name = f"{operation.method.upper()} {operation.path}"
        for variant, fixed in variants(env, operation.path):
            for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
                if time.monotonic() - started > SECONDS:
                    skipped.append(f"{name} ({variant}, {mode.value})")
                    continue
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed or None)
                counter = per_operation.setdefault(name, Counter())

                def call(case: Any, name: str = name, counter: Counter[str] = counter) -> None:
                    response = case.call(base_url=BASE_URL, headers=env.headers())
                    if not addresses(case.path, urlsplit(response.request.url).path):
                        statuses["left the operation (dot segments)"] += 1
                        return
                    statuses[f"HTTP {response.status_code}"] += 1
                    counter[str(response.status_code)] += 1
                    try:
                        case.validate_response(response, checks=selected, headers=env.headers())
                    # The checks raise one Failure, or a FailureGroup (a BaseExceptionGroup) of several.
                    except (Exception, FailureGroup) as err:
                        what = f"{name} {response.status_code} ({response.request.url}): {str(err)[:400]}"
                        (server_errors if response.status_code >= 500 else violations).append(what)
                        for kind in set(re.findall(r"^- (.+)$", str(err), re.MULTILINE)) or {"other"}:
                            kinds[f"{name}: {kind}"] += 1
                            first.setdefault(f"{name}: {kind}", what)

                run(strategy, call, reliability_seed)

    requests = sum(statuses.values())
    seconds = round(time.monotonic() - started, 1)
    ok = not server_errors and not violations and not skipped and requests > 0
    reliability.record(
        suite="hostile",
        case="hostile/schemathesis_ui_api",
        database="sqlite",
        strategy=None,
        outcome="ok" if ok else "broken",
        rows_lost=None,
        duplicates=None,
        inputs_tried=requests,
        answers=dict(statuses),
        unexplained=len(server_errors) + len(violations),
        server_errors=len(server_errors),
        schema_violations=len(violations),
        samples=(server_errors + violations)[:5],
        operations=len(operations),
        per_operation={k: dict(v) for k, v in per_operation.items()},
        examples_per_variant=EXAMPLES,
        time_limit_seconds=SECONDS,
        seconds=seconds,
        skipped=skipped,
        schemathesis=schemathesis.__version__,
        checks=[check.__name__ for check in selected],
        failure_kinds=dict(kinds.most_common()),
        failure_samples=first,
    )
    assert not server_errors, server_errors[:5]
    assert not violations, violations[:5]
    assert not skipped, f"the time limit ({SECONDS:.0f} s) left {len(skipped)} runs undone: {skipped[:5]}"
    assert requests > 0
