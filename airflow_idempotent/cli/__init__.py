"""The ``airflow-idempotent`` command line (console script ``airflow_idempotent.cli:main``).

Modules: ``main`` (the parser and the entry point), ``common`` (errors, arguments, the store, the
console), ``history``, ``switches`` (stop, resume, switches), ``effects`` (effects list, resolve).
"""

from airflow_idempotent.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
