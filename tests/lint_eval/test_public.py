"""The public-repository labels (issue 35) are well formed, and tools/lint_public.py scores them as
counted by hand here. The repositories themselves are not in this repository (their code is theirs):
re-scoring them needs their trees (`tools/lint_public.py --trees DIR`)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
EVAL = REPO / "tests" / "lint_eval"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_public_tool", REPO / "tools" / "lint_public.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (EVAL / f"{split}.jsonl").read_text().splitlines() if line.strip()]


def test_labels_name_only_recorded_repositories_at_their_commits_and_no_code() -> None:
    repos = {r["repo"]: r for r in json.loads((EVAL / "public_repos.json").read_text())["repositories"]}
    assert len(repos) >= 8 and {r["split"] for r in repos.values()} == {"heldout", "tuning"}
    for split in ("heldout", "tuning"):
        for row in _rows(split):
            assert row["split"] == split and repos[row["repo"]]["split"] == split
            assert row["commit"] == repos[row["repo"]]["commit"]
            assert row["kind"] in ("finding", "problem", "read")
            if row["kind"] == "finding":
                assert row["label"] in ("useful", "harmless", "false") and row["rule"].startswith("IDEM")
            if row["kind"] != "read":
                assert 0 < len(row["why"]) <= 160 and "\n" not in row["why"]
    # each round's held-out half has its own seeded draw of files read in full (round 4: 20)
    assert sum(r["kind"] == "read" for r in _rows("heldout")) >= 20
    assert sum(r["kind"] == "read" for r in _rows("tuning")) >= 40


def test_score_counts_findings_and_recall_as_counted_by_hand() -> None:
    tool = _tool()
    base = {"split": "heldout", "repo": "o/r", "commit": "c" * 40, "dag": "d", "why": "w"}
    labels = [
        {
            **base,
            "kind": "finding",
            "path": "a.py",
            "line": 10,
            "rule": "IDEM002",
            "task": "t",
            "label": "useful",
        },
        {
            **base,
            "kind": "finding",
            "path": "a.py",
            "line": 20,
            "rule": "IDEM002",
            "task": "u",
            "label": "harmless",
        },
        {
            **base,
            "kind": "finding",
            "path": "b.py",
            "line": 5,
            "rule": "IDEM004",
            "task": "t",
            "label": "false",
        },
        {**base, "kind": "problem", "path": "a.py", "line": 10, "rule": "IDEM002", "task": "t"},
        {**base, "kind": "problem", "path": "c.py", "line": 3, "rule": "IDEM003", "task": None},
    ]
    found = [
        tool.Found("o/r", "a.py", 11, "IDEM002", "d", "t", "m"),  # within 2 lines: the useful one
        tool.Found("o/r", "a.py", 20, "IDEM002", "d", "u", "m"),  # the harmless one
        tool.Found("o/r", "b.py", 9, "IDEM004", "d", "t", "m"),  # 4 lines off: unlabelled
    ]
    rows = tool.score(labels, found)["rules"]
    assert (rows["IDEM002"]["findings"], rows["IDEM002"]["useful"], rows["IDEM002"]["harmless"]) == (2, 1, 1)
    assert rows["IDEM002"]["actionable"] == 0.5 and rows["IDEM002"]["recall"] == 1.0
    assert rows["IDEM004"]["unlabelled"] == 1 and rows["IDEM004"]["actionable"] is None
    assert (rows["all"]["problems"], rows["all"]["found"]) == (2, 1)


def test_a_label_matches_at_another_line_spelling_its_cause() -> None:
    tool = _tool()
    base = {"split": "heldout", "repo": "o/r", "commit": "c" * 40, "dag": "d", "why": "w", "rule": "IDEM002"}
    # a task's call at line 132 runs a helper whose write is at line 45: the linter reports the write
    problem = {**base, "kind": "problem", "path": "a.py", "line": 132, "task": "t", "also_lines": [45]}
    assert (
        tool.score([problem], [tool.Found("o/r", "a.py", 45, "IDEM002", "d", "t", "m")])["rules"]["all"][
            "found"
        ]
        == 1
    )
    assert (
        tool.score([problem], [tool.Found("o/r", "a.py", 80, "IDEM002", "d", "t", "m")])["rules"]["all"][
            "found"
        ]
        == 0
    )
