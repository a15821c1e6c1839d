"""tools/reliability_report.py: RELIABILITY.md from the reliability suite's results, byte for byte.

The expected pages in tests/reliability_report/ were written by the report as it was before it was
split into modules (one 645-line file), from `results.jsonl`: the case lines of a real clean-clone
run (one per suite, database, strategy, crash point kind, fault and hostile target), four made-up
cases whose outcome is not ok (so the findings and the hostile table's other branches run), and
`minimal.jsonl` (no crash, effect, fault or load case, no session). The clock is frozen; every
other byte must be the same. Figures the test states itself are counted here from the JSON lines.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
FIXTURES = Path(__file__).resolve().parent / "reliability_report"
#: The clock the expected pages were written at.
FROZEN = datetime(2026, 12, 4, 13, 37, 42, tzinfo=timezone.utc)


class FrozenClock(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> FrozenClock:  # type: ignore[override]
        return FROZEN  # type: ignore[return-value]


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The tool as `python tools/reliability_report.py` runs it (tools/ first on the path)."""
    monkeypatch.syspath_prepend(str(TOOLS))
    module = importlib.import_module("reliability_report")
    monkeypatch.setattr(module, "datetime", FrozenClock)
    return module


def _cases(name: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [item for item in map(json.loads, filter(str.strip, lines)) if item["kind"] == "case"]


@pytest.mark.parametrize(
    ("results", "expected"), [("results.jsonl", "RELIABILITY.md"), ("minimal.jsonl", "minimal.md")]
)
def test_the_report_is_byte_for_byte_the_page_it_wrote_before(
    report: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    results: str,
    expected: str,
) -> None:
    monkeypatch.chdir(FIXTURES)  # the page names its source as given
    out = tmp_path / "RELIABILITY.md"
    assert report.main(["--results", results, "--out", str(out)]) == 0
    assert out.read_bytes() == (FIXTURES / expected).read_bytes()
    cases = _cases(results)
    suite = [c for c in cases if c["suite"] != "control"]
    outcomes = Counter(c["outcome"] for c in suite)
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}: {len(cases)} cases from "), printed
    assert ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) in printed, printed
    text = out.read_text(encoding="utf-8")
    assert f"on {FROZEN:%Y-%m-%d %H:%M} UTC" in text
    every = f"| all (goal: 0 rows lost, 0 duplicates) | {len(suite)} | {outcomes['ok']} |"
    assert every in text, text[:3000]


def test_no_results_or_no_case_is_exit_status_2(report: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "RELIABILITY.md"
    assert report.main(["--results", str(tmp_path / "absent.jsonl"), "--out", str(out)]) == 2
    sessions_only = tmp_path / "sessions.jsonl"
    sessions_only.write_text('{"kind": "session", "session": "s", "at": "-"}\n', encoding="utf-8")
    assert report.main(["--results", str(sessions_only), "--out", str(out)]) == 2
    assert not out.exists()


@pytest.mark.parametrize(
    ("beside", "said"),
    [
        ("the Spark group's tests", "Ran beside the Spark group's tests: its wall times"),
        ("", "Ran alone on the machine."),
    ],
)
def test_the_load_table_says_what_ran_beside_it(
    report: ModuleType, monkeypatch: pytest.MonkeyPatch, beside: str, said: str
) -> None:
    """make test runs the load test beside the Spark group: its figures must not read as the machine's."""
    requests = importlib.import_module("reliability_requests")
    text = (FIXTURES / "results.jsonl").read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    load = [c for c in lines if c.get("suite") == "load"]
    assert load, "the fixture has load cases"
    for case in load:
        case["details"]["beside"] = beside
    head = requests.load_runs(load)[0]
    assert said in head and head.startswith(f"Windows per run: {load[0]['details']['windows']} ")
    assert ("Ran alone" in head) == (not beside)
