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
    # the one problem no finding reaches is listed, whole, for recall work
    assert tool.score(labels, found)["missed"] == [labels[4]]


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


def test_a_site_counts_once_labelled_by_any_of_its_tasks_and_per_task_as_before() -> None:
    """Round 36g: a code site reached by several tasks matches each task's label and counts once:
    useful if any is, else harmless if any is, else false; mixed when they disagree; --per-task
    scores its members one by one as before. Figures counted by hand from the rows below."""
    tool = _tool()
    base = {"split": "heldout", "repo": "o/r", "commit": "c" * 40, "why": "w", "kind": "finding"}

    def label(path: str, line: int, rule: str, dag: str, verdict: str) -> dict:
        return {
            **base,
            "path": path,
            "line": line,
            "rule": rule,
            "dag": dag,
            "task": "load",
            "label": verdict,
        }

    labels = [
        # helper.py:6 IDEM002, reached by three DAGs: harmless for a, useful for b, unlabelled for c
        label("helper.py", 6, "IDEM002", "a", "harmless"),
        label("helper.py", 6, "IDEM002", "b", "useful"),
        # factory.py:11 IDEM002, two DAGs: harmless and false
        label("factory.py", 11, "IDEM002", "x", "harmless"),
        label("factory.py", 11, "IDEM002", "y", "false"),
        # clock.py:3 IDEM003, two DAGs, both false: not mixed
        label("clock.py", 3, "IDEM003", "a", "false"),
        label("clock.py", 4, "IDEM003", "b", "false"),
        {
            **base,
            "kind": "problem",
            "path": "helper.py",
            "line": 6,
            "rule": "IDEM002",
            "dag": "c",
            "task": "load",
        },
    ]

    def site(path: str, line: int, rule: str, dags: list[str]) -> object:
        return tool.Found("o/r", path, line, rule, dags[0], "load", "m", tuple((d, "load") for d in dags))

    found = [
        site("helper.py", 6, "IDEM002", ["a", "b", "c"]),
        site("factory.py", 11, "IDEM002", ["x", "y"]),
        site("clock.py", 3, "IDEM003", ["a", "b"]),
        site("other.py", 9, "IDEM003", ["z"]),  # no label: unlabelled
    ]
    rows = tool.score(labels, found)["rules"]
    idem2, idem3 = rows["IDEM002"], rows["IDEM003"]
    assert (idem2["findings"], idem2["useful"], idem2["harmless"], idem2["false"], idem2["mixed"]) == (
        2,
        1,
        1,
        0,
        2,
    )
    assert (idem2["unlabelled"], idem2["per_task"], idem2["actionable"]) == (0, 5, 0.5)
    assert (idem3["findings"], idem3["false"], idem3["mixed"], idem3["unlabelled"]) == (2, 1, 0, 1)
    # recall: the problem is dag c's task, a member of the helper's site (not its first)
    assert (idem2["problems"], idem2["found"]) == (1, 1)
    # --per-task: each member its own finding, as before round 36g (7 findings, 1 unlabelled member c)
    per_task = tool.score(labels, [m for f in found for m in f.members()])["rules"]
    assert (per_task["IDEM002"]["findings"], per_task["IDEM002"]["unlabelled"]) == (5, 1)
    assert (per_task["IDEM002"]["useful"], per_task["IDEM002"]["harmless"], per_task["IDEM002"]["false"]) == (
        1,
        2,
        1,
    )
    assert (
        per_task["IDEM003"]["findings"],
        per_task["IDEM003"]["false"],
        per_task["IDEM003"]["unlabelled"],
    ) == (3, 2, 1)
    assert per_task["all"]["mixed"] == 0 and per_task["IDEM002"]["found"] == 1
    # members() of a site are the findings the unit before round 36g had, owner first
    assert [(m.dag, m.task, m.tasks) for m in found[0].members()] == [
        ("a", "load", ()),
        ("b", "load", ()),
        ("c", "load", ()),
    ]


def test_kinds_group_sites_whose_messages_differ_only_in_names_and_numbers() -> None:
    """`--kinds`: a site's kind is its message with quoted text, numbers and dotted or underscored
    names blanked; sites of one kind are counted together with their site labels. The expected
    rows are counted by hand from the three sites below."""
    tool = _tool()
    base = {"split": "heldout", "repo": "o/r", "commit": "c" * 40, "why": "w", "kind": "finding", "dag": "d"}
    labels = [
        {**base, "path": "a.py", "line": 5, "rule": "IDEM002", "task": "t1", "label": "useful"},
        {**base, "path": "b.py", "line": 9, "rule": "IDEM002", "task": "t2", "label": "harmless"},
    ]
    append = "INSERT INTO {} appends: no DELETE of its window and no key, so every rerun adds {} rows"
    found = [
        tool.Found("o/r", "a.py", 5, "IDEM002", "d", "t1", append.format("sales.payouts", 20)),
        tool.Found("o/r", "b.py", 9, "IDEM002", "d", "t2", append.format("staging_orders", 7)),
        tool.Found("o/r", "c.py", 2, "IDEM003", "d", "t3", "now() in its code reads the clock: 'x' differs"),
    ]

    kinds = tool.score(labels, found)["kinds"]

    assert tool.kind_of(append.format("sales.payouts", 20)) == (
        "INSERT INTO ID appends: no DELETE of its window and no key, so every rerun adds N rows"
    )
    fields = ("rule", "sites", "useful", "harmless", "false", "unlabelled")
    assert [tuple(k[f] for f in fields) for k in kinds] == [
        ("IDEM002", 2, 1, 1, 0, 0),
        ("IDEM003", 1, 0, 0, 0, 1),
    ]
    assert kinds[1]["kind"] == "now() in its code reads the clock: Q differs"
    table = tool.kinds_markdown(kinds)
    assert "| IDEM002 | INSERT INTO ID appends" in table and "| 2 | 1 | 1 | 0 | 0 | 50% |" in table


def test_rounds_score_the_repositories_recorded_in_those_rounds(monkeypatch, tmp_path) -> None:
    """`--rounds 49-52` scores exactly the repositories public_repos.json records for rounds 49 to 52
    (counted here from the file), each once; a range no repository is recorded in stops with a
    message instead of scoring nothing."""
    tool = _tool()
    recorded = json.loads((EVAL / "public_repos.json").read_text())["repositories"]
    expected = sorted(
        r["repo"] for r in recorded if 49 <= r.get("round", 0) <= 52 and r["split"] == "heldout"
    )
    linted: list[str] = []
    monkeypatch.setattr(tool, "tree_of", lambda repo, *args: tmp_path)
    monkeypatch.setattr(tool, "lint_repository", lambda name, *args: linted.append(name) or [])

    assert tool.main(["--trees", str(tmp_path), "--split", "heldout", "--rounds", "49-52"]) == 0
    assert sorted(linted) == expected and len(expected) == 12

    try:
        tool.main(["--trees", str(tmp_path), "--rounds", "9000"])
    except SystemExit as stop:
        assert "no repository is recorded in rounds 9000" in str(stop)
    else:
        raise AssertionError("an empty range scored nothing without a word")
