"""pytest plugin: the ``idempotency`` fixture and ``--idem-*`` options.

Registered through the ``pytest11`` entry point ``idempotent``. It imports nothing from Airflow
when pytest loads it (a project's conftest may set AIRFLOW_HOME first); the harness is imported
when a test first asks for the fixture.

    def test_payouts_merge_is_idempotent(idempotency, engine):
        idempotency.assert_idempotent("dags/payouts.py", "2026-05-01", dag_id="payouts_merge", engine=engine)

Options: ``--idem-runs N`` (attempts per scenario, default 3), ``--idem-crashes`` (``all``,
``none``, ``random`` or a comma list of ``before,during,after_commit``), ``--idem-seed N`` (the
random scenarios' seed, printed in the header and in each report), ``--idem-random N`` (how many
random scenarios).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from airflow_idempotent.testing.harness import Harness

_CRASH_CHOICES = ("all", "none", "random")
_POINTS = ("before", "during", "after_commit")


def _crashes(text: str) -> str | list[str]:
    text = text.strip()
    if text in _CRASH_CHOICES:
        return text
    points = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in points if p not in _POINTS]
    if unknown or not points:
        raise pytest.UsageError(
            f"--idem-crashes {text!r}: use all, none, random, or a comma list of {', '.join(_POINTS)}"
        )
    return points


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("idempotent", "airflow-idempotent: idempotency harness")
    group.addoption("--idem-runs", type=int, default=3, help="attempts per scenario (default 3)")
    group.addoption(
        "--idem-crashes",
        default="all",
        help="crash points: all (default), none, random, or a comma list of before,during,after_commit",
    )
    group.addoption("--idem-seed", type=int, default=None, help="seed of the random crash scenarios")
    group.addoption("--idem-random", type=int, default=3, help="how many random scenarios (default 3)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "idempotency: a test proving a DAG or task idempotent with the airflow-idempotent harness"
    )
    _crashes(config.getoption("--idem-crashes"))  # a bad value is a usage error before any test runs


def pytest_report_header(config: pytest.Config) -> str | None:
    crashes = config.getoption("--idem-crashes")
    if crashes == "random":
        seed = config.getoption("--idem-seed")
        return (
            f"idempotency harness: random crashes, seed {seed if seed is not None else '(fresh per check)'}"
        )
    return None


@pytest.fixture
def idempotency(request: pytest.FixtureRequest) -> Harness:
    """A Harness with this run's --idem-* options: .check() returns a report, .assert_idempotent() fails."""
    from airflow_idempotent.testing.harness import Harness

    config = request.config
    harness = Harness(
        runs=config.getoption("--idem-runs"),
        crashes=_crashes(config.getoption("--idem-crashes")),
        seed=config.getoption("--idem-seed"),
        random_scenarios=config.getoption("--idem-random"),
    )
    return harness
