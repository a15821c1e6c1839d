"""Score the DAG linter on public DAG repositories it was never tuned to (issue 35).

    .venv/bin/python tools/lint_public.py --trees DIR [--mirrors DIR] [--split heldout|tuning|all]
        [--json PATH|-] [--unlabelled] [--only OWNER/NAME ...] [--follow-imported-callables] [--per-task]
        [--kinds]

The repositories and their exact commits are in tests/lint_eval/public_repos.json (split into a
tuning and a held-out half before any linter output was read); the labels are
tests/lint_eval/heldout.jsonl and tests/lint_eval/tuning.jsonl, one JSON object a line:

- ``kind: finding``: a finding the linter reported when the labels were made, judged by hand:
  ``useful`` (true, a reviewer would act on it), ``harmless`` (the condition holds but the rerun is
  safe here), ``false`` (the condition does not hold);
- ``kind: problem``: a rerun problem in a file read in full, which a correct linter reports (the
  recall set: the useful findings in those files plus what the linter missed);
- ``kind: read``: a file drawn at random (seeded) and read in full.

Never their code: repository, commit, path, line, rule, task and a one-line reason. The trees are
found as ``DIR/<owner>+<name>/`` (a work tree); a repository missing there is extracted from a bare
git mirror ``MIRRORS/<owner>+<name>/repo`` at the recorded commit (blobs the mirror lacks, such as
large binaries, are skipped). Each repository is linted as one project (one ``lint_paths`` call on
its tree), as ``airflow-idempotent lint TREE`` would.

A finding matches a label when repository, path, rule and task agree and the lines are within
LINE_TOLERANCE (of ``line`` or of an ``also_lines`` entry: another line spelling the same cause, as a
helper's write a task's call runs; an ``also_at`` "path:line" is such a place in another file, as a
submitted Spark script's write); a finding no label matches is ``unlabelled`` (``--unlabelled``
lists them to be labelled). Per rule: the findings raised, the share a reviewer would act on (useful /
labelled), and recall (problems matched by a raised finding of the same rule at the same place /
problems).

The unit (round 36g): the linter reports one finding per code site (rule, file, line) with the tasks
reaching it; the labels are per task. A site matches the labels of all its (dag, task) members (each
member as a finding of its own would) and counts once: useful if any matched label is useful, else
harmless if any is, else false; unlabelled only when no member matches a label; ``mixed`` counts the
sites whose matched labels disagree. A problem is found when any member matches it. ``--per-task``
scores each member as its own finding (the unit before round 36g), information too.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EVAL = REPO / "tests" / "lint_eval"
REPOS = EVAL / "public_repos.json"
LABEL_FILES = {"heldout": EVAL / "heldout.jsonl", "tuning": EVAL / "tuning.jsonl"}
LINE_TOLERANCE = 2
RULES = [f"IDEM00{i}" for i in range(10)]


@dataclass(frozen=True)
class Found:
    """One finding of the linter, in the labels' terms."""

    repo: str
    path: str
    line: int
    rule: str
    dag: str | None
    task: str | None
    message: str
    #: the (dag, task) of each task's finding grouped into this code site (the linter's ``members``;
    #: a task twice when it reaches the site for two causes); empty: (dag, task) alone
    tasks: tuple[tuple[str | None, str | None], ...] = ()

    def members(self) -> list[Found]:
        """The site as one finding per task reaching it (the unit before round 36g)."""
        owners = self.tasks or ((self.dag, self.task),)
        return [Found(self.repo, self.path, self.line, self.rule, d, t, self.message) for d, t in owners]


def load_labels(splits: Iterable[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for split in splits:
        path = LABEL_FILES[split]
        if path.exists():
            rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def _extract(git_dir: Path, commit: str, into: Path) -> None:
    """Write the tree of `commit` into `into`, skipping blobs the mirror does not have."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", commit],
        check=True,
        capture_output=True,
    ).stdout.decode()
    for entry in filter(None, listing.split("\0")):
        meta, _, name = entry.partition("\t")
        _mode, kind, blob = meta.split()
        if kind != "blob":
            continue
        shown = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "blob", blob], capture_output=True)
        if shown.returncode != 0:
            continue
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shown.stdout)


def tree_of(repo: dict[str, str], trees: Path, mirrors: Path | None, scratch: Path) -> Path:
    slug = repo["repo"].replace("/", "+")
    if (trees / slug).is_dir():
        return trees / slug
    if mirrors is not None and (mirrors / slug / "repo").is_dir():
        into = scratch / slug
        git_dir = mirrors / slug / "repo"
        if (git_dir / ".git").is_dir():  # a snapshot fetched as a work tree, not a bare mirror
            git_dir = git_dir / ".git"
        _extract(git_dir, repo["commit"], into)
        return into
    raise SystemExit(f"lint_public: no tree of {repo['repo']} under {trees} (nor a mirror): fetch it first")


def lint_repository(
    name: str, tree: Path, information: list[Found] | None = None, follow_callables: bool = False
) -> list[Found]:
    """Lint one repository's tree as one project; findings with paths relative to the tree (and, into
    `information`, what the linter lists as information: the condition holds, the rerun is safe).
    `follow_callables`: the linter's ``--follow-imported-callables`` (off by default)."""
    from airflow_idempotent.lint import lint_paths

    report = lint_paths([str(tree)], follow_callables=follow_callables)
    found = []
    if information is not None:
        information.extend(
            Found(name, f.file, f.line, f.rule, f.dag_id, f.task_id, "", _owners(f))
            for f in report.information
        )
    for f in report.findings:
        path = Path(f.file)
        path = (path if path.is_absolute() else Path.cwd() / path).resolve()
        rel = path.relative_to(tree.resolve()).as_posix() if path.is_relative_to(tree.resolve()) else f.file
        found.append(Found(name, rel, f.line, f.rule, f.dag_id, f.task_id, f.message, _owners(f)))
    return found


def _owners(f: Any) -> tuple[tuple[str | None, str | None], ...]:
    """(dag, task) of each per-task finding a reported site groups (round 36g's ``members``)."""
    return tuple((m.dag_id, m.task_id) for m in f.members) or f.reached_by()


def _same_place(label: dict[str, Any], f: Found, task_too: bool = True) -> bool:
    if (label["repo"], label["rule"]) != (f.repo, f.rule):
        return False
    # ``also_at``: "path:line" places in another file spelling the same cause (a submitted script's write)
    places = [
        (label["path"], int(label["line"])),
        *((label["path"], int(x)) for x in label.get("also_lines", ())),
    ]
    places += [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in label.get("also_at", ())]
    if all(path != f.path or abs(line - f.line) > LINE_TOLERANCE for path, line in places):
        return False
    if not task_too:
        return True
    return label.get("task") == f.task and label.get("dag") in (None, f.dag)


#: a site's label from its members' matched labels: the first of these any member carries
_PRECEDENCE = ("useful", "harmless", "false")
#: a site's label in the per-kind counts (`--kinds`)
LABELS = (*_PRECEDENCE, "unlabelled")
#: what `kind_of` blanks in a message: quoted text, then numbers, then dotted or underscored names
_QUOTED = re.compile(r"'[^']*'|`[^`]*`|\"[^\"]*\"")
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")
_NAME = re.compile(r"\b[\w.]*[_.][\w.]*\b")


def kind_of(message: str) -> str:
    """A finding's kind: its message with the names and numbers of this place blanked (quoted text
    `Q`, numbers `N`, dotted or underscored names `ID`), cut at 110 characters; findings that say the
    same thing of other tables and tasks share it (`--kinds`)."""
    text = _NAME.sub("ID", _NUMBER.sub("N", _QUOTED.sub("Q", message)))
    return text[:110]


def score(labels: list[dict[str, Any]], found: list[Found]) -> dict[str, Any]:
    """Per rule: findings raised (code sites, each with its member tasks), labelled useful / harmless
    / false / unlabelled, the sites whose members' labels disagree (mixed), and recall; with the
    problems no raised finding reaches (`missed`: what recall work starts from)."""
    finding_labels = [x for x in labels if x["kind"] == "finding"]
    problems = [x for x in labels if x["kind"] == "problem"]
    counts: dict[str, Counter[str]] = {rule: Counter() for rule in RULES}
    kinds: dict[tuple[str, str], Counter[str]] = {}
    unlabelled: list[Found] = []
    used: set[int] = set()
    for f in found:
        hits: list[str] = []
        for member in f.members():  # each member takes one label, as a per-task finding would
            hit = next(
                (i for i, x in enumerate(finding_labels) if i not in used and _same_place(x, member)),
                None,
            )
            if hit is not None:
                used.add(hit)
                hits.append(finding_labels[hit]["label"])
        counts[f.rule]["findings"] += 1
        counts[f.rule]["per_task"] += len(f.members())
        site_label = next((label for label in _PRECEDENCE if label in hits), "unlabelled")
        kinds.setdefault((f.rule, kind_of(f.message)), Counter())[site_label] += 1
        counts[f.rule][site_label] += 1
        if not hits:
            unlabelled.append(f)
        else:
            counts[f.rule]["mixed"] += len(set(hits)) > 1
    members = [m for f in found for m in f.members()]
    missed: list[dict[str, Any]] = []
    for p in problems:
        counts[p["rule"]]["problems"] += 1
        if any(_same_place(p, m, task_too=p.get("task") is not None) for m in members):
            counts[p["rule"]]["found"] += 1
        else:
            missed.append(p)
    rows = {rule: _ratios(c) for rule, c in counts.items()}
    rows["all"] = _ratios(sum(counts.values(), Counter()))
    by_kind = [
        {"rule": rule, "kind": kind, "sites": sum(c.values()), **{k: c[k] for k in LABELS}}
        for (rule, kind), c in sorted(kinds.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    ]
    return {"rules": rows, "unlabelled": [f.__dict__ for f in unlabelled], "kinds": by_kind, "missed": missed}


def _ratios(c: Counter[str]) -> dict[str, Any]:
    labelled = c["useful"] + c["harmless"] + c["false"]
    return {
        "findings": c["findings"],
        "useful": c["useful"],
        "harmless": c["harmless"],
        "false": c["false"],
        "unlabelled": c["unlabelled"],
        "mixed": c["mixed"],
        "per_task": c["per_task"],
        "actionable": c["useful"] / labelled if labelled else None,
        "problems": c["problems"],
        "found": c["found"],
        "recall": c["found"] / c["problems"] if c["problems"] else None,
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def markdown(rows: dict[str, dict[str, Any]], information: Counter[str] | None = None) -> str:
    """The per-rule table; with `information` (counts by rule), a column of what is listed as
    information (never failed) instead of raised."""
    info = information if information is not None else Counter()
    lines = [
        "| rule | findings | useful | harmless | false | unlabelled | mixed | a reviewer would act on "
        "| problems | found | recall | information |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rule, r in rows.items():
        count = sum(info.values()) if rule == "all" else info[rule]
        if rule != "all" and not r["findings"] and not r["problems"] and not count:
            continue
        name = "**all**" if rule == "all" else rule
        lines.append(
            f"| {name} | {r['findings']} | {r['useful']} | {r['harmless']} | {r['false']} "
            f"| {r['unlabelled']} | {r['mixed']} "
            f"| {_pct(r['actionable'])} | {r['problems']} | {r['found']} | {_pct(r['recall'])} | {count} |"
        )
    return "\n".join(lines) + "\n"


def kinds_markdown(kinds: list[dict[str, Any]]) -> str:
    """The sites per kind (`kind_of`), most first, with the share a reviewer would act on."""
    lines = [
        "| rule | kind | sites | useful | harmless | false | unlabelled | a reviewer would act on |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for k in kinds:
        labelled = k["useful"] + k["harmless"] + k["false"]
        share = _pct(k["useful"] / labelled if labelled else None)
        kind = k["kind"].replace("|", "\\|")
        lines.append(
            f"| {k['rule']} | {kind} | {k['sites']} | {k['useful']} | {k['harmless']} | {k['false']} "
            f"| {k['unlabelled']} | {share} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trees", required=True, help="folder with one <owner>+<name>/ tree per repository")
    parser.add_argument("--mirrors", default=None, help="folder of bare mirrors <owner>+<name>/repo")
    parser.add_argument("--split", choices=("heldout", "tuning", "all"), default="all")
    parser.add_argument("--json", metavar="PATH", help="write the scores as JSON ('-' for stdout)")
    parser.add_argument("--unlabelled", action="store_true", help="list findings no label matches")
    parser.add_argument(
        "--follow-imported-callables",
        action="store_true",
        help="lint with the linter's --follow-imported-callables (off by default)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="OWNER/NAME",
        help="score only these repositories (repeatable), e.g. one round's former held-out half",
    )
    parser.add_argument(
        "--rounds",
        metavar="FIRST-LAST",
        help="score only the repositories recorded in these rounds (e.g. 49-52: a held-out test's batches)",
    )
    parser.add_argument(
        "--kinds",
        action="store_true",
        help="also list the findings per kind (the message with this place's names blanked)",
    )
    parser.add_argument(
        "--missed",
        action="store_true",
        help="list the labelled problems no raised finding reaches (information does not count)",
    )
    parser.add_argument(
        "--per-task",
        action="store_true",
        help="count each task reaching a code site as its own finding (the unit before round 36g)",
    )
    args = parser.parse_args(argv)
    splits = ["heldout", "tuning"] if args.split == "all" else [args.split]
    repos = [r for r in json.loads(REPOS.read_text())["repositories"] if r["split"] in splits]
    if args.rounds:
        first, _, last = args.rounds.partition("-")
        rounds = range(int(first), int(last or first) + 1)
        args.only = [*(args.only or ()), *(r["repo"] for r in repos if r.get("round") in rounds)]
        if not args.only:
            raise SystemExit(f"lint_public: no repository is recorded in rounds {args.rounds}")
    if args.only:
        repos = [r for r in repos if r["repo"] in args.only]
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for split in splits:
            found: list[Found] = []
            information: list[Found] = []
            for repo in (r for r in repos if r["split"] == split):
                mirrors = Path(args.mirrors) if args.mirrors else None
                tree = tree_of(repo, Path(args.trees), mirrors, Path(scratch))
                found.extend(lint_repository(repo["repo"], tree, information, args.follow_imported_callables))
            if args.per_task:
                found = [m for f in found for m in f.members()]
                information = [m for f in information for m in f.members()]
            labels = [x for x in load_labels([split]) if not args.only or x["repo"] in args.only]
            result[split] = score(labels, found)
            counts = Counter(f.rule for f in information)
            result[split]["information"] = dict(sorted(counts.items()))
            print(f"## {split}\n\n{markdown(result[split]['rules'], counts)}")
            if args.kinds:
                print(f"### {split} per kind\n\n{kinds_markdown(result[split]['kinds'])}")
            if args.unlabelled:
                for f in result[split]["unlabelled"]:
                    where = f"{f['repo']} {f['path']}:{f['line']} {f['rule']} {f['dag']}.{f['task']}"
                    print(f"UNLABELLED {where} | {f['message'][:160]}")
            if args.missed:
                for p in result[split]["missed"]:
                    where = f"{p['repo']} {p['path']}:{p['line']} {p['rule']} {p.get('dag')}.{p.get('task')}"
                    print(f"MISSED {where} | round {p.get('round')} | {p['why']}")
    if args.json:
        text = json.dumps(result, indent=1)
        if args.json == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
