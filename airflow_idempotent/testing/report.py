"""The harness's verdict: every attempt of every scenario, how each target differs, who broke what."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_idempotent.testing.scenarios import Crash
from airflow_idempotent.testing.tables import TableDiff, TableState

__all__ = ["Attempt", "HarnessReport", "NotIdempotentError", "ScenarioResult"]


@dataclass
class Attempt:
    """One attempt of one task in a scenario."""

    task_id: str
    crash: Crash | None
    outcome: str
    """completed, crashed, failed, or "completed (crash point not reached)"."""
    detail: str = ""
    seconds: float = 0.0

    def describe(self) -> str:
        planned = f" [crash {self.crash.label()}]" if self.crash else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.task_id}{planned} {self.outcome} in {self.seconds:.2f}s{detail}"


@dataclass
class ScenarioResult:
    name: str
    crash_task: str | None
    attempts: list[Attempt]
    diffs: list[TableDiff]
    note: str | None = None

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.diffs)

    def culprits(self) -> list[str]:
        """Who broke the property: the crashed task if it writes a broken table, else the table's writers."""
        out: list[str] = []
        for diff in self.diffs:
            if diff.ok:
                continue
            if self.crash_task is not None and self.crash_task in diff.writers:
                names = [self.crash_task]
            else:
                names = diff.writers or ["(no declared writer)"]
            out.extend(n for n in names if n not in out)
        return out


@dataclass
class HarnessReport:
    """The verdict for one subject and window: the clean run, every scenario, and who broke what."""

    subject: str
    window: str
    runs: int
    seed: int | None
    operators: dict[str, str]
    targets: dict[str, list[str]]
    clean: dict[str, TableState]
    scenarios: list[ScenarioResult]
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.scenarios)

    def broken(self) -> dict[str, list[str]]:
        """{task_id: ["<scenario>: <how>", ...]} for every task that broke the property."""
        out: dict[str, list[str]] = {}
        for scenario in self.scenarios:
            for task_id in scenario.culprits():
                kinds = sorted(
                    {
                        k
                        for d in scenario.diffs
                        if not d.ok and task_id in (d.writers or [task_id])
                        for k in d.kinds
                    }
                )
                out.setdefault(task_id, []).append(f"{scenario.name}: {', '.join(kinds)}")
        return out

    def text(self) -> str:
        lines = [
            f"Idempotency of {self.subject} for window {self.window}: "
            + ("PASS" if self.ok else "FAIL")
            + f" ({len(self.scenarios)} scenario(s), {self.runs} run(s) each"
            + (f", seed {self.seed}" if self.seed is not None else "")
            + ")",
            "clean run: " + "; ".join(state.describe() for state in self.clean.values()),
        ]
        for scenario in self.scenarios:
            lines.append(f"{'ok  ' if scenario.ok else 'FAIL'}  {scenario.name}")
            for attempt in scenario.attempts:
                if attempt.outcome != "completed" or attempt.crash is not None:
                    lines.append(f"        {attempt.describe()}")
            for diff in scenario.diffs:
                if not diff.ok:
                    writers = f" (written by {', '.join(diff.writers)})" if diff.writers else ""
                    lines.append(f"        {diff.describe()}{writers}")
            if scenario.note:
                lines.append(f"        note: {scenario.note}")
        lines.extend(f"skipped: {s}" for s in self.skipped)
        broken = self.broken()
        for task_id, hows in broken.items():
            operator = self.operators.get(task_id, "?")
            lines.append(f"BROKEN by {task_id} ({operator}): " + "; ".join(hows))
        return "\n".join(lines) + "\n"

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "window": self.window,
            "ok": self.ok,
            "runs": self.runs,
            "seed": self.seed,
            "targets": self.targets,
            "clean": {t: {"rows": s.row_count, "checksum": s.checksum} for t, s in self.clean.items()},
            "scenarios": [
                {
                    "name": s.name,
                    "ok": s.ok,
                    "crash_task": s.crash_task,
                    "attempts": [
                        {
                            "task_id": a.task_id,
                            "crash": a.crash.label() if a.crash else None,
                            "outcome": a.outcome,
                            "detail": a.detail,
                            "seconds": round(a.seconds, 3),
                        }
                        for a in s.attempts
                    ],
                    "diffs": [d.as_dict() for d in s.diffs],
                    "note": s.note,
                }
                for s in self.scenarios
            ],
            "broken": self.broken(),
            "skipped": self.skipped,
        }


class NotIdempotentError(AssertionError):
    """A rerun left the targets different from one clean run; the message is the report. (Here, with
    the report it carries, so the harness's errors module needs nothing of the report.)"""

    def __init__(self, report: HarnessReport) -> None:
        super().__init__(report.text())
        self.report = report
