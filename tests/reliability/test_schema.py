"""Schemathesis over the UI's OpenAPI document, with every check it has: generated requests to
every operation, answered without a server error, exactly as the document says (status, content
type, body schema, headers), schema-valid data accepted and schema-violating data refused.

In-process, through real parts: Airflow's own API app with the plugin mounted behind Airflow's
middlewares and the per-DAG auth manager (tests/ui_env.py: two guarded DAGs, history, effects and
a running backfill each), the document as the API serves it to a logged-in user. Every operation
runs as an admin and as alice, who may reach DAG A only; with generated path values (mostly DAGs
and backfills that do not exist), with DAG A in the path, and (status, stop) with A's own
backfill; each with schema-conforming data and with data that breaks the schema (negative mode:
a case whose headers break it goes out without the token, and its 401 is what the document
promises).

Two things the document states in words, not in JSON Schema, are kept by the test: positive
cases keep the cross-field rules (`states_rules`), and a 422 whose detail is a message (the
guard's or Airflow's refusal of a well-formed request, e.g. over the cap) is counted as a refusal
(`guard_refusals`), not a disagreement; a 422 listing input problems for schema-valid data is one.

Bounded: `IDEM_SCHEMATHESIS_EXAMPLES` examples per operation, variant, mode and user (8 in `make
test`: 704 requests, 47 s with the environment's setup; 40 under `make reliability`), and
`IDEM_SCHEMATHESIS_SECONDS` in all (default 240; operations not reached by then are counted as
skipped). `IDEM_SCHEMATHESIS_CHECKS=core` runs only the answer checks (5xx and conformance).
Failures are recorded per operation and kind with a sample each (`failure_kinds`,
`failure_samples`): on 2026-12-04, before issue 32's fixes, 137 in 880 requests as an admin (20
examples: 130 schema-valid requests refused, 7 violating ones accepted), 0 after them. Seeded
with the suite's seed. The figures (requests, answers by status, server errors, schema
violations, guard refusals, failures by kind) are recorded as the hostile case
`schemathesis_ui_api`, then asserted.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.reliability.conftest import Recorder
from tests.ui_env import DAG_A, UiEnv, ui_environment

#: Per operation, variant, mode and user: 8 in `make test`, 40 under `make reliability`.
EXAMPLES = int(os.environ.get("IDEM_SCHEMATHESIS_EXAMPLES", "8"))
SECONDS = float(os.environ.get("IDEM_SCHEMATHESIS_SECONDS", "240"))
#: Every check schemathesis has (the default); IDEM_SCHEMATHESIS_CHECKS=core: only 5xx and
#: conformance of the answers (status, content type, body and headers).
#: schemathesis' title of its check that schema-valid data is accepted.
ACCEPTANCE = "ST202 Schema-valid request rejected"
ALL_CHECKS = os.environ.get("IDEM_SCHEMATHESIS_CHECKS", "all") != "core"
#: Who calls: an admin, and alice, who may reach DAG A only (tests/ui_env.py).
USERS = ("admin", "alice")
#: Where Airflow's API server mounts the plugin's app (the document's paths are relative to it).
BASE_PATH = "/idempotent"
BASE_URL = f"http://localhost{BASE_PATH}"


@pytest.fixture(scope="module")
def env(airflow_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with ui_environment(tmp_path_factory) as environment:
        yield environment


@pytest.fixture
def regex_strategies_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    r"""Hypothesis builds a pattern's strategy character by character, and schemathesis builds it
    again for every operation, variant, mode and user: for the document's identifier patterns
    (Python's `\w` spelled out, 140,000 characters) that was 0.8 s each, 60 s of the run. The same
    pattern and alphabet give the same strategy, so it is built once (test-side only)."""
    try:  # an internal of hypothesis: where it moves, the run is only slower
        from hypothesis.strategies._internal import regex

        original = regex.base_regex_strategy
    except (ImportError, AttributeError):
        return
    built: dict[tuple[str, int, str], Any] = {}

    def base_regex_strategy(pattern: Any, *, parsed: Any = None, alphabet: Any = None) -> Any:
        key = (repr(pattern.pattern), int(pattern.flags), repr(alphabet))
        if key not in built:
            built[key] = original(pattern, parsed=parsed, alphabet=alphabet)
        return built[key]

    monkeypatch.setattr(regex, "base_regex_strategy", base_regex_strategy)


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


def instant(text: str) -> datetime:
    """An instant of the document's pattern (a day, or a day and time; naive = UTC)."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def states_rules(case: Any) -> bool:
    """Whether a schema-valid case also keeps the rules the document states in words, as JSON
    Schema cannot compare two fields: `to` not before `from` (history), `window_end` after
    `window_start` (rerun preview). Positive cases that break one are not generated: the API's
    422 for them is what the document says (tests/test_ui*.py assert those refusals)."""
    query = case.query or {}
    if (
        isinstance(query.get("from"), str)
        and isinstance(query.get("to"), str)
        and query["from"] > query["to"]
    ):
        return False
    body = case.body if isinstance(case.body, dict) else {}
    start, end = body.get("window_start"), body.get("window_end")
    return not (isinstance(start, str) and isinstance(end, str) and instant(end) <= instant(start))


def refusal(response: Any) -> bool:
    """A 422 whose detail is a message (the guard's or Airflow's refusal of a well-formed request:
    over the cap, a kill switch, no policy for corrective, ...), not a list of input problems."""
    if response.status_code != 422:
        return False
    try:
        return isinstance(response.json().get("detail"), str)
    except ValueError:
        return False


def run(strategy: Any, call: Callable[[Any], None], seed_value: int) -> None:
    """`call` on EXAMPLES cases of `strategy` (hypothesis, seeded; every example runs)."""

    @seed(seed_value)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def each(case: Any) -> None:
        call(case)

    each()


@pytest.mark.usefixtures("regex_strategies_built_once")
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    env: UiEnv, reliability: Recorder, reliability_seed: int
) -> None:
    import schemathesis
    from schemathesis import checks as core_checks
    from schemathesis.core.failures import FailureGroup
    from schemathesis.core.parameters import ParameterLocation
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

    timing: Counter[str] = Counter()  # seconds per operation
    refusals: Counter[str] = Counter()  # per operation: a schema-valid request the guard refused
    for operation in operations:
        name = f"{operation.method.upper()} {operation.path}"
        for variant, fixed in variants(env, operation.path):
            for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed or None)
                if mode is schemathesis.GenerationMode.POSITIVE:
                    strategy = strategy.filter(states_rules)
                for user in USERS:  # one strategy, both callers
                    if time.monotonic() - started > SECONDS:
                        skipped.append(f"{name} ({variant}, {mode.value}, {user})")
                        continue
                    counter = per_operation.setdefault(name, Counter())

                    def call(
                        case: Any, name: str = name, counter: Counter[str] = counter, user: str = user
                    ) -> None:
                        # A case whose headers break the schema (no or a malformed Authorization)
                        # goes out as generated: its 401 is what the document promises.
                        header = case.meta.components.get(ParameterLocation.HEADER) if case.meta else None
                        broken_header = header is not None and header.mode.is_negative
                        token = {} if broken_header else env.headers(user)
                        response = case.call(base_url=BASE_URL, headers=token)
                        if not addresses(case.path, urlsplit(response.request.url).path):
                            statuses["left the operation (dot segments)"] += 1
                            return
                        statuses[f"HTTP {response.status_code}"] += 1
                        counter[str(response.status_code)] += 1
                        try:
                            case.validate_response(response, checks=selected, headers=token)
                        # The checks raise one Failure, or a FailureGroup (a BaseExceptionGroup) of several.
                        except (Exception, FailureGroup) as err:
                            found = set(re.findall(r"^- (.+)$", str(err), re.MULTILINE)) or {"other"}
                            if found == {ACCEPTANCE} and refusal(response):
                                refusals[name] += 1
                                return
                            sent = f"{name} as {user} {response.status_code} ({response.request.url})"
                            what = f"{sent}: {str(err)[:1200]}"
                            (server_errors if response.status_code >= 500 else violations).append(what)
                            for kind in found:
                                kinds[f"{name}: {kind}"] += 1
                                first.setdefault(f"{name}: {kind}", what)

                    began = time.monotonic()
                    run(strategy, call, reliability_seed)
                    timing[name] += time.monotonic() - began

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
        users=list(USERS),
        seconds_per_operation={k: round(v, 1) for k, v in timing.most_common()},
        guard_refusals=dict(refusals.most_common()),
        failure_kinds=dict(kinds.most_common()),
        failure_samples=first,
    )
    assert not server_errors, server_errors[:5]
    assert not violations, violations[:5]
    assert not skipped, f"the time limit ({SECONDS:.0f} s) left {len(skipped)} runs undone: {skipped[:5]}"
    assert requests > 0
