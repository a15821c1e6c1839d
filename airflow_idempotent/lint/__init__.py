"""Lint: the SQL determinism check the operators run, and the DAG linter behind ``airflow-idempotent lint``.

- `check_deterministic` / `find_nondeterminism` (`sql`): refuse SQL that reads the clock,
  randomness or a sequence before it runs, on sqlglot's syntax tree (`parsing`).
- `lint_paths` (`linter`): read DAG files (never import them) and report what makes a rerun unsafe
  (`rules.RULES`), with each task's answers to the three review questions; `sql_writes`
  (`sqlfacts`): which tables a SQL text writes, and how.
- The ``lint`` subcommand: `airflow_idempotent.lint.cli` (``register(subparsers)``, ``run(args)``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from airflow_idempotent.lint.parsing import DIALECTS, parse_one_statement, parse_statements
from airflow_idempotent.lint.sql import Finding, check_deterministic, find_nondeterminism

if TYPE_CHECKING:
    from airflow_idempotent.lint.linter import lint_paths
    from airflow_idempotent.lint.report import LintReport, RuleFinding, TaskReport
    from airflow_idempotent.lint.rules import RULES, Rule
    from airflow_idempotent.lint.sqlfacts import SqlWrite, sql_writes

#: The DAG linter's names, imported when first used: every task process imports the operators,
#: which need only the determinism check, and the linter's modules cost it 145-160 ms.
LAZY = {
    "lint_paths": "linter",
    "LintReport": "report",
    "RuleFinding": "report",
    "TaskReport": "report",
    "RULES": "rules",
    "Rule": "rules",
    "SqlWrite": "sqlfacts",
    "sql_writes": "sqlfacts",
}


def __getattr__(name: str) -> Any:
    module = LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "DIALECTS",
    "RULES",
    "Finding",
    "LintReport",
    "Rule",
    "RuleFinding",
    "SqlWrite",
    "TaskReport",
    "check_deterministic",
    "find_nondeterminism",
    "lint_paths",
    "parse_one_statement",
    "parse_statements",
    "sql_writes",
]
