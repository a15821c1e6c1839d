"""Measure the DAG linter against labelled DAG files: per-rule precision, recall and every mismatch.

    .venv/bin/python tools/lint_eval.py [--out docs/lint-evaluation.md] [--json PATH|-] [--title TEXT]

The labelled set is tests/lint_eval/labels.json: the findings a correct linter reports for every DAG
file of tests/lint_eval/corpus and of Airflow's example DAGs as installed next to this interpreter
(how they were decided: tests/lint_eval/README.md). Each DAG file is linted on its own (one call of
the linter per file, so one file's crash is recorded and the run goes on, and tables of unrelated
files are never paired). A finding matches a label when file, rule and task agree and its line is
within LINE_TOLERANCE of the label's line or of one of its `also_lines` (other places that spell the
same cause); each label matches at most one finding, so a second finding for the same task and
cause counts as a false positive. Acknowledged findings count like any other.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The linter's public entry point, "module:function". The lead repoints this one line when the
#: linter moves (e.g. to "airflow_idempotent.lint:lint_paths"); nothing else here names the module.
LINTER = "airflow_idempotent.lint:lint_paths"

#: How far (in lines) a finding may be from the labelled line and still match it.
LINE_TOLERANCE = 2

REPO = Path(__file__).resolve().parent.parent
LABELS = REPO / "tests" / "lint_eval" / "labels.json"
CORPUS = REPO / "tests" / "lint_eval" / "corpus"
AIRFLOW_PREFIX = "airflow:"
RULES = [f"IDEM00{i}" for i in range(10)]


@dataclass(frozen=True)
class Item:
    """A label or a finding, in the labels' terms."""

    file: str
    rule: str
    task: str | None
    line: int
    why: str = ""
    also_lines: tuple[int, ...] = ()

    def lines(self) -> tuple[int, ...]:
        return (self.line, *self.also_lines)

    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class FileResult:
    dag_file: str
    labels: list[Item]
    findings: list[Item] = field(default_factory=list)
    matched: list[tuple[Item, Item]] = field(default_factory=list)
    missed: list[Item] = field(default_factory=list)  # false negatives
    extra: list[Item] = field(default_factory=list)  # false positives
    crash: str | None = None
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------------
# The linter, its findings, and where files are
# ---------------------------------------------------------------------------------------------


def load_linter(spec: str = LINTER) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "lint_paths")


def airflow_root() -> Path:
    """The installed airflow package (found, not imported)."""
    spec = importlib.util.find_spec("airflow")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("lint_eval: apache-airflow is not installed in this interpreter")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


class Places:
    """Turns label file names into paths, and the linter's paths back into label file names."""

    def __init__(self, corpus: Path, airflow: Path) -> None:
        self.corpus = corpus.resolve()
        self.airflow = airflow.resolve()

    def path(self, name: str) -> Path:
        if name.startswith(AIRFLOW_PREFIX):
            return self.airflow / name[len(AIRFLOW_PREFIX) :]
        return self.corpus / name

    def name(self, shown: str) -> str:
        path = Path(shown)
        path = (path if path.is_absolute() else Path.cwd() / path).resolve()
        for root, prefix in ((self.corpus, ""), (self.airflow, AIRFLOW_PREFIX)):
            if path.is_relative_to(root):
                return prefix + path.relative_to(root).as_posix()
        return shown

    def dag_files_on_disk(self) -> set[str]:
        """Every DAG file the labels must cover: the corpus (but include/) and example_dags/*.py."""
        found = {
            p.relative_to(self.corpus).as_posix()
            for p in self.corpus.rglob("*.py")
            if "include" not in p.relative_to(self.corpus).parts and "__pycache__" not in p.parts
        }
        found |= {
            f"{AIRFLOW_PREFIX}example_dags/{p.name}" for p in (self.airflow / "example_dags").glob("*.py")
        }
        return found


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def findings_of(report: Any, places: Places) -> list[Item]:
    """The findings of one lint report (objects or dicts with rule, file, line, task_id), one item per
    task a site's `tasks` list (the labels here are per task)."""
    raw = _get(report, "findings")
    if raw is None and isinstance(report, Iterable):
        raw = report
    out = []
    for f in raw or []:
        # one finding per code site (round 36g): its `tasks`; the labels here are one per task
        members = _get(f, "tasks") or [{"task_id": _get(f, "task_id", "task")}]
        for member in members:
            out.append(
                Item(
                    file=places.name(str(_get(f, "file"))),
                    rule=str(_get(f, "rule")),
                    task=member[1] if isinstance(member, tuple) else _get(member, "task_id"),
                    line=int(_get(f, "line") or 0),
                    why=str(_get(f, "message") or ""),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------------------------


def distance(label: Item, finding: Item) -> int | None:
    if (label.file, label.rule, label.task) != (finding.file, finding.rule, finding.task):
        return None
    d = min(abs(finding.line - line) for line in label.lines())
    return d if d <= LINE_TOLERANCE else None


def match(result: FileResult) -> None:
    pairs = sorted(
        (d, i, j)
        for i, label in enumerate(result.labels)
        for j, finding in enumerate(result.findings)
        if (d := distance(label, finding)) is not None
    )
    used_labels: set[int] = set()
    used_findings: set[int] = set()
    for _, i, j in pairs:
        if i in used_labels or j in used_findings:
            continue
        used_labels.add(i)
        used_findings.add(j)
        result.matched.append((result.labels[i], result.findings[j]))
    result.missed = [label for i, label in enumerate(result.labels) if i not in used_labels]
    result.extra = [f for j, f in enumerate(result.findings) if j not in used_findings]


def near(miss: Item, extras: list[Item]) -> tuple[str, Item] | None:
    """The unmatched finding closest to a missed label, and how it differs."""
    best: tuple[int, str, Item] | None = None
    for f in extras:
        if f.file == miss.file and f.rule == miss.rule and f.task == miss.task:
            off = min(abs(f.line - line) for line in miss.lines())
            cand = (0, f"line off by {off} (reported at {f.line})", f)
        elif f.rule == miss.rule and f.file == miss.file and abs(f.line - miss.line) <= LINE_TOLERANCE:
            cand = (1, f"task differs: reported for {f.task!r}", f)
        elif f.task == miss.task and f.file == miss.file and abs(f.line - miss.line) <= LINE_TOLERANCE:
            cand = (2, f"reported as {f.rule}", f)
        else:
            continue
        if best is None or cand[0] < best[0]:
            best = cand
    return (best[1], best[2]) if best else None


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def evaluate(labels_doc: dict[str, Any], places: Places, lint: Callable[..., Any]) -> list[FileResult]:
    results = []
    for dag_file, entries in labels_doc["files"].items():
        labels = [
            Item(
                e["file"],
                e["rule"],
                e["task"],
                int(e["line"]),
                e.get("why", ""),
                tuple(e.get("also_lines", ())),
            )
            for e in entries
        ]
        result = FileResult(dag_file, labels)
        started = time.perf_counter()
        try:
            result.findings = findings_of(lint([str(places.path(dag_file))]), places)
        except Exception as exc:  # one file's crash is a result, not the end of the run
            last = traceback.extract_tb(exc.__traceback__)[-1]
            result.crash = f"{type(exc).__name__}: {exc} ({Path(last.filename).name}:{last.lineno})"
        result.seconds = time.perf_counter() - started
        match(result)
        results.append(result)
    return results


def scores(results: Iterable[FileResult]) -> dict[str, dict[str, Any]]:
    table: dict[str, Counter[str]] = {rule: Counter() for rule in RULES}
    for r in results:
        for label, _ in r.matched:
            table.setdefault(label.rule, Counter())["tp"] += 1
        for f in r.extra:
            table.setdefault(f.rule, Counter())["fp"] += 1
        for label in r.missed:
            table.setdefault(label.rule, Counter())["fn"] += 1
    out: dict[str, dict[str, Any]] = {}
    total: Counter[str] = Counter()
    for rule in sorted(table):
        c = table[rule]
        total.update(c)
        out[rule] = _ratios(c)
    out["all"] = _ratios(total)
    return out


def _ratios(c: Counter[str]) -> dict[str, Any]:
    tp, fp, fn = c["tp"], c["fp"], c["fn"]
    return {
        "labels": tp + fn,
        "findings": tp + fp,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }


def mismatches(results: Iterable[FileResult]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        extras = list(r.extra)
        for miss in r.missed:
            hint = near(miss, extras)
            out.append(
                {
                    "dag_file": r.dag_file,
                    "kind": "FN",
                    "rule": miss.rule,
                    "task": miss.task,
                    "where": miss.where(),
                    "what": miss.why,
                    "nearest": hint[0] if hint else ("the linter crashed" if r.crash else "not reported"),
                }
            )
        for f in extras:
            out.append(
                {
                    "dag_file": r.dag_file,
                    "kind": "FP",
                    "rule": f.rule,
                    "task": f.task,
                    "where": f.where(),
                    "what": f.why,
                    "nearest": "",
                }
            )
    return out


def machine() -> dict[str, str]:
    commit = "unknown"
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        commit += " (with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        pass
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "python": platform.python_version(),
        "commit": commit,
    }


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _table(rows: dict[str, dict[str, Any]]) -> list[str]:
    out = [
        "| rule | labels | findings | TP | FP | FN | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rule, s in rows.items():
        name = "**all**" if rule == "all" else rule
        out.append(
            f"| {name} | {s['labels']} | {s['findings']} | {s['tp']} | {s['fp']} | {s['fn']} | "
            f"{_pct(s['precision'])} | {_pct(s['recall'])} |"
        )
    return out


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    out = [
        f"# {doc['title']}",
        "",
        f"Measured {doc['date']} on {m['host']} ({m['platform']}, {m['cpus']} CPUs, Python {m['python']}), "
        f"commit {m['commit']}, linter `{doc['linter']}`, by `python tools/lint_eval.py`.",
        "",
        f"Labelled set: {doc['sets']['corpus']['files']} DAG files of `tests/lint_eval/corpus` and "
        f"{doc['sets']['airflow']['files']} of Airflow {doc['airflow_version']}'s `example_dags`, "
        f"{doc['scores']['all']['labels']} labels (`tests/lint_eval/labels.json`, rules in "
        "`tests/lint_eval/README.md`). Each file is linted on its own; a finding matches a label when "
        f"file, rule and task agree and its line is within +-{LINE_TOLERANCE} of the label's line (or of "
        "another line spelling the same cause); a second finding for one task and cause is a false "
        f"positive. {doc['seconds']:.1f} s for all files.",
        "",
        "## Per rule, both sets",
        "",
        *_table(doc["scores"]),
        "",
    ]
    for key, title in (("corpus", "Corpus (tests/lint_eval/corpus)"), ("airflow", "Airflow's example DAGs")):
        out += [f"## {title}", "", *_table(doc["sets"][key]["scores"]), ""]
    if doc["crashes"]:
        out += ["## Crashes", ""] + [f"- `{c['dag_file']}`: {c['error']}" for c in doc["crashes"]] + [""]
    if doc["unlabelled"] or doc["missing"]:
        out += ["## Label set not closed", ""]
        out += [f"- on disk, not labelled: `{f}`" for f in doc["unlabelled"]]
        out += [f"- labelled, not on disk: `{f}`" for f in doc["missing"]]
        out.append("")
    out += [
        f"## Mismatches ({len(doc['mismatches'])})",
        "",
        "FN: a label no finding matched (with the nearest unmatched finding, if any). "
        "FP: a finding no label matched (with the linter's message).",
        "",
        "| file | kind | rule | task | at | what | nearest finding |",
        "|---|---|---|---|---|---|---|",
    ]
    for mm in doc["mismatches"]:
        what = mm["what"].replace("|", "\\|").replace("\n", " ")
        if len(what) > 140:
            what = what[:137] + "..."
        task = mm["task"] if mm["task"] is not None else "(DAG)"
        out.append(
            f"| `{mm['dag_file']}` | {mm['kind']} | {mm['rule']} | {task} | `{mm['where']}` | {what} | "
            f"{mm['nearest']} |"
        )
    return "\n".join(out) + "\n"


#: The public-repository evaluation (tools/lint_public.py, issue 35) lives in the same report, after
#: this marker; a rerun of this tool keeps it as it is.
PUBLIC_MARKER = "<!-- public repositories: tools/lint_public.py -->"


def kept_public_section(out: Path) -> str:
    """The report's public-repository section (from PUBLIC_MARKER on), kept across reruns."""
    text = out.read_text() if out.exists() else ""
    at = text.find(PUBLIC_MARKER)
    return "" if at < 0 else "\n" + text[at:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", default=str(REPO / "docs" / "lint-evaluation.md"), help="markdown report path"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON ('-' for stdout)")
    parser.add_argument("--title", default="Lint evaluation", help="the report's heading")
    parser.add_argument("--labels", default=str(LABELS))
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--airflow", default=None, help="the airflow package directory (default: installed)")
    parser.add_argument("--linter", default=LINTER, help=f"module:function to evaluate (default {LINTER})")
    args = parser.parse_args(argv)

    labels_doc = json.loads(Path(args.labels).read_text())
    places = Places(Path(args.corpus), Path(args.airflow) if args.airflow else airflow_root())
    lint = load_linter(args.linter)
    started = time.perf_counter()
    results = evaluate(labels_doc, places, lint)
    seconds = time.perf_counter() - started

    on_disk = places.dag_files_on_disk()
    labelled = set(labels_doc["files"])
    corpus = [r for r in results if not r.dag_file.startswith(AIRFLOW_PREFIX)]
    airflow = [r for r in results if r.dag_file.startswith(AIRFLOW_PREFIX)]
    doc = {
        "title": args.title,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "linter": args.linter,
        "airflow_version": labels_doc.get("airflow_version", "?"),
        "line_tolerance": LINE_TOLERANCE,
        "seconds": seconds,
        "scores": scores(results),
        "sets": {
            "corpus": {"files": len(corpus), "scores": scores(corpus)},
            "airflow": {"files": len(airflow), "scores": scores(airflow)},
        },
        "crashes": [{"dag_file": r.dag_file, "error": r.crash} for r in results if r.crash],
        "unlabelled": sorted(on_disk - labelled),
        "missing": sorted(labelled - on_disk),
        "mismatches": mismatches(results),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(markdown(doc) + kept_public_section(Path(args.out)))
    if args.json == "-":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    for line in _table(doc["scores"]):
        print(line)
    print(
        f"{len(results)} files, {len(doc['mismatches'])} mismatches, {len(doc['crashes'])} crashes, "
        f"{seconds:.1f} s; report: {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
