"""The linter measured against the labelled set (tools/lint_eval.py): every rule at least 90% precise
and 90% complete, no crash, every DAG file labelled. The labels are the independent figure; a
regression in the linter fails here before it reaches docs/lint-evaluation.md."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from airflow_idempotent.lint import RULES, lint_paths

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "lint_eval.py"
THRESHOLD = 0.9


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_eval_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def evaluation() -> tuple[ModuleType, list]:  # type: ignore[type-arg]
    tool = _tool()
    labels = json.loads(tool.LABELS.read_text())
    places = tool.Places(tool.CORPUS, tool.airflow_root())
    return tool, tool.evaluate(labels, places, lint_paths)


def test_the_label_set_is_closed(evaluation: tuple[ModuleType, list]) -> None:  # type: ignore[type-arg]
    tool, results = evaluation
    places = tool.Places(tool.CORPUS, tool.airflow_root())
    labelled = {r.dag_file for r in results}
    assert labelled == places.dag_files_on_disk()
    assert len([f for f in labelled if not f.startswith(tool.AIRFLOW_PREFIX)]) >= 60


def test_no_file_crashes_the_linter(evaluation: tuple[ModuleType, list]) -> None:  # type: ignore[type-arg]
    _tool_module, results = evaluation
    assert [(r.dag_file, r.crash) for r in results if r.crash] == []


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_rule_is_precise_and_complete(evaluation: tuple[ModuleType, list], rule: str) -> None:  # type: ignore[type-arg]
    tool, results = evaluation
    score = tool.scores(results)[rule]
    misses = [m for m in tool.mismatches(results) if m["rule"] == rule]
    assert score["labels"] > 0, f"{rule} has no labels in the set"
    assert score["precision"] is not None and score["precision"] >= THRESHOLD, misses
    assert score["recall"] >= THRESHOLD, misses
